// docs/theory.md T2 — Size at which every item must have dispersed (the paper's
// Theorem 2.2 and Corollary B.1).
//
// Claim: from T1's upper bound, p_k < eps for every item k as soon as
//
//     n  >  n*(eps, delta, theta)  =  1 + (1/eps - 1) e^{delta/theta}
//
// (strict: p_k <= 1/(1 + (n-1) e^{-t}) < eps  <=>  n > n*). With eps the unit
// roundoff of a data type (float32 2^-24, bfloat16 2^-8, float16 2^-11) this
// is the size past which a single item's weight is below that type's
// resolution near 1. The paper's Corollary B.1 turns that into wrong answers
// for a sharp function such as max only under its hypotheses: a finite input
// vocabulary with a strict order, continuous (MLP) layers around a single
// softmax attention head, so that the spread delta is bounded for every n, and
// no ties between class scores. Here delta is simply given. This n* is sharper
// than the paper's e^{delta/theta}/eps, and eps is the unit roundoff (half the
// "machine epsilon" the paper names), which about doubles n*
// (docs/theory.md T2).
#pragma once

#include <cmath>
#include <stdexcept>

#include "core/dtype.hpp"

namespace sa::theory {

template <class Real>
Real critical_size(Real eps, Real spread, Real temperature) {
  using std::exp;
  if (!(eps > Real(0) && eps < Real(1)))
    throw std::invalid_argument("critical size: eps must lie in (0, 1)");
  if (!(spread >= Real(0))) throw std::invalid_argument("critical size: spread must be >= 0");
  if (!(temperature > Real(0)))
    throw std::invalid_argument("critical size: temperature must be > 0");
  return Real(1) + (Real(1) / eps - Real(1)) * exp(spread / temperature);
}

// n* with eps = the unit roundoff of `type`.
inline double critical_size(DType type, double spread, double temperature) {
  return critical_size(unit_roundoff(type), spread, temperature);
}

// The smallest integer n with n > n*, i.e. the first size at which T1
// guarantees every weight is below eps. Exact below 2^53; from 2^53 on, where
// doubles are spaced 2 or more apart, floor(n*) + 1 rounds back to n*, so the
// next double above n* is returned: an integer > n*, at most one spacing above
// the exact answer. Returns +inf past 2^63.
inline double first_dispersed_size(double n_star) {
  const double f = n_star < 0x1p53 ? std::floor(n_star) + 1.0 : std::nextafter(n_star, INFINITY);
  return f > 9.2e18 ? INFINITY : f;
}

}  // namespace sa::theory
