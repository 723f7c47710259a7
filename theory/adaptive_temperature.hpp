// docs/theory.md T5 — Adaptive temperature (the paper's Section 3, Figure 4, eq. 18).
//
//     H    = entropy of p = softmax(l)
//     poly = -0.037 H^4 + 0.481 H^3 - 2.3 H^2 + 4.917 H - 1.791
//     beta = max(poly, 1) if H > 0.5, else 1
//     out  = softmax(beta * l)
//
// Claims: beta >= 1 always (the correction never raises the entropy);
// beta = 1 for H <= 0.5; beta > 1 exactly where poly(H) > 1 and H > 0.5,
// which (from the polynomial's roots, see adaptive_beta_interval) is about
// (0.849, 5.944); the largest beta is about 2.42 near H = 4.41.
//
// The coefficients are written as integer ratios (-37/1000, ...), so that in
// any IEEE type and in MPFR each one is the correctly rounded value of the
// decimal the paper prints. Host-and-device code.
#pragma once

#include "core/host_device.hpp"

namespace sa::theory {

// Coefficient i of the paper's polynomial, highest degree first (numpy polyval order).
template <class Real>
SA_HD inline Real adaptive_coefficient(int i) {
  switch (i) {
    case 0:
      return Real(-37) / Real(1000);
    case 1:
      return Real(481) / Real(1000);
    case 2:
      return Real(-23) / Real(10);
    case 3:
      return Real(4917) / Real(1000);
    default:
      return Real(-1791) / Real(1000);
  }
}

// The polynomial itself (Horner form, same order of operations everywhere).
template <class Real>
SA_HD inline Real adaptive_polynomial(Real H) {
  Real acc = adaptive_coefficient<Real>(0);
  for (int i = 1; i < 5; ++i) acc = acc * H + adaptive_coefficient<Real>(i);
  return acc;
}

// The entropy threshold at or below which no correction is applied.
template <class Real>
SA_HD inline Real adaptive_threshold() {
  return Real(1) / Real(2);
}

// beta(H): 1 if H <= 0.5, else max(poly(H), 1). NaN H gives NaN.
template <class Real>
SA_HD inline Real adaptive_beta(Real H) {
  if (hd::is_nan(H)) return H;
  if (!(H > adaptive_threshold<Real>())) return Real(1);
  const Real p = adaptive_polynomial(H);
  return p > Real(1) ? p : Real(1);
}

}  // namespace sa::theory

#if !defined(__CUDACC__)
#include <utility>

namespace sa::theory {

// The interval of H on which the correction is active (beta > 1): the two
// roots of poly(H) = 1 above the 0.5 threshold, found by bisection on the
// polynomial itself (not typed in). About (0.849, 5.944).
template <class Real>
std::pair<Real, Real> adaptive_correction_interval() {
  auto f = [](const Real& h) { return adaptive_polynomial(h) - Real(1); };
  auto bisect = [&](Real lo, Real hi) {  // f(lo) and f(hi) have opposite signs
    const bool lo_neg = f(lo) < Real(0);
    for (int i = 0; i < 400; ++i) {
      const Real mid = (lo + hi) / Real(2);
      if ((f(mid) < Real(0)) == lo_neg)
        lo = mid;
      else
        hi = mid;
    }
    return (lo + hi) / Real(2);
  };
  // poly - 1 < 0 at H = 0.5, > 0 at H = 3, < 0 at H = 8 (checked by the tests).
  return {bisect(Real(1) / Real(2), Real(3)), bisect(Real(3), Real(8))};
}

// The largest beta and the entropy where it occurs: the root of poly'(H) = 0
// inside the correction interval, by bisection. About beta 2.42 at H 4.41.
template <class Real>
std::pair<Real, Real> adaptive_beta_peak() {
  auto dpoly = [](const Real& h) {
    return Real(4) * adaptive_coefficient<Real>(0) * h * h * h +
           Real(3) * adaptive_coefficient<Real>(1) * h * h +
           Real(2) * adaptive_coefficient<Real>(2) * h + adaptive_coefficient<Real>(3);
  };
  Real lo = Real(3), hi = Real(6);  // poly' > 0 at 3, < 0 at 6
  for (int i = 0; i < 400; ++i) {
    const Real mid = (lo + hi) / Real(2);
    if (dpoly(mid) > Real(0))
      lo = mid;
    else
      hi = mid;
  }
  const Real h = (lo + hi) / Real(2);
  return {h, adaptive_polynomial(h)};
}

}  // namespace sa::theory
#endif
