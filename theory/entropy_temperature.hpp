// docs/theory.md T4 — Entropy decreases monotonically as temperature decreases
// (the paper's Proposition 3.2).
//
// With Z(beta) = sum exp(beta l_i) and p = softmax(beta l):
//     d log Z / d beta   = E_p[l]
//     d^2 log Z / d beta^2 = Var_p[l]
//     H(beta) = log Z - beta E_p[l]
//     dH/d beta = -beta Var_p[l]        (equivalently dH/d theta = Var_p[l] / theta^3)
// so H falls as |beta| grows, strictly unless all logits are equal.
// Limits: H(0) = log n; as beta -> +inf, H -> log(number of items tied at the max).
// Two logits, t = delta/theta:  H = log(1 + e^{-t}) + t / (1 + e^{t}).
// Always 0 <= H <= log n.
//
// All functions take finite logits and are templated on the real type (double
// or MPFR); they shift by the largest beta*l_i, so nothing overflows.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <stdexcept>

namespace sa::theory {

// Moments of the logits under p = softmax(beta l).
template <class Real>
struct TemperatureMoments {
  Real log_partition;  // log Z(beta)
  Real mean;           // E_p[l]
  Real variance;       // Var_p[l]
  Real entropy;        // H(beta) = log Z - beta E_p[l]
};

template <class Real>
TemperatureMoments<Real> temperature_moments(std::span<const Real> l, Real beta) {
  using std::exp;
  using std::log;
  if (l.empty()) throw std::invalid_argument("temperature moments: no logits (n = 0)");
  Real shift = beta * l[0];
  for (const Real& x : l) shift = std::max<Real>(shift, beta * x);
  Real S = 0, T = 0, first = 0;
  for (const Real& x : l) {
    const Real z = beta * x - shift;  // <= 0
    const Real w = exp(z);
    S += w;
    T += w * z;
    first += w * x;
  }
  const Real mean = first / S;
  Real second = 0;
  for (const Real& x : l) {
    const Real w = exp(beta * x - shift);
    second += w * (x - mean) * (x - mean);
  }
  TemperatureMoments<Real> r;
  r.log_partition = shift + log(S);
  r.mean = mean;
  r.variance = second / S;
  r.entropy = log(S) - T / S;  // = log Z - beta E_p[l], without cancellation
  return r;
}

template <class Real>
Real entropy_at(std::span<const Real> l, Real beta) {
  return temperature_moments(l, beta).entropy;
}

// dH/dbeta = -beta Var_p[l]  (Proposition 3.2)
template <class Real>
Real entropy_derivative(std::span<const Real> l, Real beta) {
  return -beta * temperature_moments(l, beta).variance;
}

// H at beta = 0: log n.
template <class Real>
Real entropy_at_zero_beta(std::size_t n) {
  using std::log;
  return log(Real(n));
}

// lim_{beta -> +inf} H = log(number of logits tied at the maximum).
template <class Real>
Real entropy_at_infinite_beta(std::span<const Real> l) {
  using std::log;
  if (l.empty()) throw std::invalid_argument("entropy limit: no logits (n = 0)");
  const Real m = *std::max_element(l.begin(), l.end());
  const auto ties = std::count(l.begin(), l.end(), m);
  return log(Real(ties));
}

// Two logits at distance t = delta/theta >= 0: H = log(1 + e^{-t}) + t / (1 + e^{t}).
template <class Real>
Real two_logit_entropy(Real t) {
  using std::exp;
  using std::log;
  using std::log1p;
  const Real e = exp(-t);  // t/(1+e^t) = t e^{-t} / (1 + e^{-t})
  return log1p(e) + t * e / (Real(1) + e);
}

}  // namespace sa::theory
