// docs/theory.md T1 — Dispersion bounds (the paper's Lemma 2.1, tight form).
//
// Claim: if every one of n logits lies in [m, M] (spread delta = M - m), then
// for every item k, at temperature theta > 0,
//
//     1 / (1 + (n-1) e^{+delta/theta})  <=  p_k  <=  1 / (1 + (n-1) e^{-delta/theta})
//
// Both sides tend to 0 as n grows: no coefficient can stay sharp. The pair is
// tight for every n: the upper bound is attained by (M, m, ..., m) for the item
// at M, the lower by (m, M, ..., M) for the item at m. The paper prints the
// looser (1/n) e^{-delta/theta} <= p_k <= (1/n) e^{delta/theta}, which follows.
//
// Evaluated without overflow for any delta/theta (the e^{+t} factor is moved
// to the numerator); n = 1 gives exactly (1, 1) at any spread. Accuracy:
// delta/theta is rounded once before exp, a relative error of up to
// (delta/theta) u in the result, i.e. (delta/theta)/2 ulp of Real; the other
// operations add a few ulp. Below Real's smallest number the lower bound
// underflows to 0.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace sa::theory {

template <class Real>
struct Bounds {
  Real lower;
  Real upper;
};

namespace detail {
template <class Real>
void check_dispersion_args(Real n, Real spread, Real temperature) {
  if (!(n >= Real(1))) throw std::invalid_argument("dispersion bounds: n must be >= 1");
  if (!(spread >= Real(0))) throw std::invalid_argument("dispersion bounds: spread must be >= 0");
  if (!(temperature > Real(0)))
    throw std::invalid_argument("dispersion bounds: temperature must be > 0");
}
}  // namespace detail

// The tight pair of Lemma 2.1.
template <class Real>
Bounds<Real> dispersion_bounds(Real n, Real spread, Real temperature) {
  using std::exp;
  detail::check_dispersion_args(n, spread, temperature);
  const Real e = exp(-spread / temperature);  // in (0, 1]
  const Real others = n - Real(1);
  if (others == Real(0)) return {Real(1), Real(1)};  // n = 1: e/(e + 0) is 0/0 once e underflows
  // lower = 1/(1 + (n-1) e^{t}) = e^{-t} / (e^{-t} + (n-1))
  return {e / (e + others), Real(1) / (Real(1) + others * e)};
}

// The looser pair the paper prints: (1/n) e^{-t} <= p_k <= (1/n) e^{t}.
template <class Real>
Bounds<Real> dispersion_bounds_paper(Real n, Real spread, Real temperature) {
  using std::exp;
  detail::check_dispersion_args(n, spread, temperature);
  const Real t = spread / temperature;
  return {exp(-t) / n, exp(t) / n};
}

// The input that attains the upper bound for its item 0: (M, m, ..., m).
template <class Real>
std::vector<Real> upper_extremal_logits(std::int64_t n, Real lo, Real hi) {
  std::vector<Real> l(static_cast<std::size_t>(n), lo);
  if (n > 0) l[0] = hi;
  return l;
}

// The input that attains the lower bound for its item 0: (m, M, ..., M).
template <class Real>
std::vector<Real> lower_extremal_logits(std::int64_t n, Real lo, Real hi) {
  std::vector<Real> l(static_cast<std::size_t>(n), hi);
  if (n > 0) l[0] = lo;
  return l;
}

}  // namespace sa::theory
