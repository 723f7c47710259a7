// theory.md T5 — Adaptive temperature (the paper's Section 3, Figure 4, eq. 18).
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
    case 0: return Real(-37) / Real(1000);
    case 1: return Real(481) / Real(1000);
    case 2: return Real(-23) / Real(10);
    case 3: return Real(4917) / Real(1000);
    default: return Real(-1791) / Real(1000);
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
