// docs/theory.md T7 — A-priori rounding-error bounds for softmax
// (Blanchard, Higham & Higham, "Accurately computing the log-sum-exp and
// softmax functions", IMA J. Numer. Anal. 41(4), 2021).
//
// Model: each operation and each exp has relative error at most u (unit
// roundoff); no overflow or underflow; O(u^2) terms dropped.
//
// - shifted softmax p_j = exp(l_j - max) / sum exp(l_i - max):
//       ||p - p^||_inf / ||p||_inf <= (n + 2 + 2 delta) u
//   where delta is the logit spread (the 2 delta u term: rounding l_j - max,
//   amplified by exp, in the numerator and in the sum).
// - unshifted exp(l_j) / sum exp(l_i) (no overflow): every component has
//   relative error <= (n + 3) u.
// - If exp is only faithful (error <= 1 ulp = 2u), each of the two exp terms
//   doubles: exp_error_units = 2 adds 2u.
// - The deterministic n u term is pessimistic (sqrt(n) is typical) and void
//   once n ~ 1/u: bound_is_informative says whether the bound is below 1.
// - Condition number of softmax with respect to relative perturbation of the
//   inputs: at most 2 ||l||_inf, so quantising inputs to a type with unit
//   roundoff u moves the output by up to 2 ||l||_inf u (relative).
#pragma once

#include <algorithm>
#include <cmath>
#include <span>

namespace sa::theory {

// Relative max-norm error bound of the shifted softmax.
// exp_error_units: the exp's error in units of u (1 = correctly rounded, 2 = faithful).
inline double shifted_softmax_error_bound(double n, double spread, double u,
                                          double exp_error_units = 1.0) {
  return (n + 2.0 * exp_error_units + 2.0 * spread) * u;
}

// Componentwise relative error bound of the unshifted softmax.
inline double unshifted_softmax_error_bound(double n, double u, double exp_error_units = 1.0) {
  return (n + 1.0 + 2.0 * exp_error_units) * u;
}

// True when a relative bound still says something (is below 1).
inline bool bound_is_informative(double relative_bound) { return relative_bound < 1.0; }

// Condition number of softmax for relative input perturbations: 2 ||l||_inf.
inline double softmax_condition_number(std::span<const double> l) {
  double m = 0.0;
  for (double x : l)
    if (std::isfinite(x)) m = std::max(m, std::abs(x));
  return 2.0 * m;
}

}  // namespace sa::theory
