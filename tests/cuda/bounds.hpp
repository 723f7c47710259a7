// Error bounds the CUDA kernel's results are held to, against the MPFR
// reference, with where each comes from. First-order rounding analysis in
// the model of theory.md T7 (Blanchard, Higham & Higham 2021): every
// operation has relative error <= u (u = 2^-24, float32 arithmetic; bfloat16
// is storage only), exp has relative error <= E u and log <= L u:
//   CUDA C++ Programming Guide, "Mathematical Functions", single precision:
//   expf max 2 ulp, logf max 1 ulp; 1 ulp <= 2u relative, so E = 4, L = 2.
// O(u^2) terms are dropped by the model; kMargin (1 %) covers them (they are
// below bound * n u, i.e. far below 1 % of the bound for every size tested).
//
// Running-max rescales: a term exp(z - m_local) that is later rescaled by
// exp(m_local - m_new) picks up one more exp error and one multiplication
// per rescale; R is the most rescales any term goes through, from the
// kernel's launch plan (plan.hpp: 0 on the warp/block row paths; on the split
// path and in attention, the sequential and tree merges). The exponent
// roundings of a term along its path telescope: their total is <= u (m - z)
// <= u * spread, as in T7's single shift.
//
// Relation to the CPU kernel's tests (tests/cpu on the cpu branch): those hold
// that kernel to kernel-specific bounds (double sums, its own <= 0.75 ulp exp);
// this kernel sums in float32 with CUDA's expf, so T7's float32 model (with
// E, L and R above) is the applicable one. Both measure against MPFR on the
// same (float32 or bfloat16) inputs, so input quantisation is not counted.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/dtype.hpp"
#include "theory/rounding_bounds.hpp"

namespace sa::cuda_test {

inline constexpr double u32 = 0x1p-24;
inline constexpr double kExpUnits = 4.0;  // expf: 2 ulp
inline constexpr double kLogUnits = 2.0;  // logf: 1 ulp
inline constexpr double kMargin = 1.01;   // dropped O(u^2) terms
// Below float32's normal range the model does not hold (gradual underflow);
// every such result may carry an absolute error of a few subnormal steps,
// far below this allowance (the smallest normal float32, 2^-126).
inline constexpr double kUnderflow = 0x1p-126;

// Rounding of the stored result: bfloat16 outputs are float32 results rounded
// to nearest bfloat16, relative error <= 2^-8; float32 outputs add nothing.
inline double output_u(DType t) { return t == DType::bfloat16 ? 0x1p-8 : 0.0; }

// Relative error of the row sum S = sum exp(z_i - m): (n - 1) additions, one
// exp per term, the exponents' roundings (<= u * spread), R rescales.
inline double eps_S(double n, double spread, double R) {
  return (n - 1.0 + kExpUnits + spread + (kExpUnits + 1.0) * R) * u32;
}

// Relative error of T = sum exp(z_i - m)(z_i - m) (all terms <= 0: no
// cancellation): additions, exp, the rounded difference, the product, the
// exponent roundings, and per rescale exp, the scaled S-term and two operations.
inline double eps_T(double n, double spread, double R) {
  return (n + kExpUnits + 1.0 + spread + (kExpUnits + 4.0) * R) * u32;
}

// softmax, max-norm relative: T7's shifted bound (n + 2E + 2 spread) u
// (theory::shifted_softmax_error_bound with exp error E u) plus (E + 1) u per
// rescale, then the output rounding.
inline double softmax_rel(DType t, double n, double spread, double R) {
  const double f32 =
      theory::shifted_softmax_error_bound(n, spread, u32, kExpUnits) + (kExpUnits + 1.0) * R * u32;
  return kMargin * (f32 + output_u(t) * (1.0 + f32));
}

// log_softmax, absolute, for element value y = (z - m) - log S:
// u |z - m| (<= u spread) + L u log S (log S <= log n) + eps_S + u |y|.
inline double log_softmax_abs(DType t, double n, double spread, double R, double y) {
  const double f32 =
      spread * u32 + kLogUnits * u32 * std::log(n) + eps_S(n, spread, R) + u32 * std::abs(y);
  return kMargin * (f32 + output_u(t) * (std::abs(y) + f32));
}

// logsumexp m + log S, absolute: L u log n + eps_S + u |lse| (the final addition).
inline double logsumexp_abs(double n, double spread, double R, double lse) {
  return kMargin * (kLogUnits * u32 * std::log(n) + eps_S(n, spread, R) + u32 * std::abs(lse));
}

// entropy H = log S - T/S, absolute: log S carries eps_S + L u log n; T/S
// carries eps_T + eps_S + u relative and |T/S| <= H; the final operation u H.
inline double entropy_abs(double n, double spread, double R, double H) {
  const double eS = eps_S(n, spread, R), eT = eps_T(n, spread, R);
  return kMargin * (eS + kLogUnits * u32 * std::log(n) + (eT + eS + 2.0 * u32) * H);
}

// Adaptive weights exp(beta (z - m)) / S2 against softmax(beta_kernel z):
// the exponent is rounded twice (z - m, then times beta): <= 2 u beta spread
// per term, so T7's bound with spread 2 beta spread; the fixed row max means
// no rescales.
inline double adaptive_rel(DType t, double n, double spread, double beta) {
  return softmax_rel(t, n, 2.0 * beta * spread, 0.0);
}

// beta = max(poly(H), 1) evaluated by Horner's rule in float32 (4 steps of a
// multiply and an add): |error| <= gamma_8 sum |c_i| H^(4-i) (Higham,
// "Accuracy and Stability of Numerical Algorithms", 2nd ed., eq. 5.3).
inline double horner_abs(double H) {
  const double c[5] = {0.037, 0.481, 2.3, 4.917, 1.791};
  double s = 0.0, p = 1.0;
  for (int i = 4; i >= 0; --i) {
    s += c[i] * p;
    p *= std::abs(H);
  }
  const double g8 = 8.0 * u32 / (1.0 - 8.0 * u32);
  return kMargin * g8 * s;
}

// merge_entropy_states: S = S_a + b S_b with b = exp(d), d = m_b - m_a <= 0
// rounded once (absolute error u |d|, a relative error u |d| of b):
// |S^ - S| <= (E + 2) u S + u |d| b S_b. T = T_a + b (T_b + d S_b), terms of
// one sign: |T^ - T| <= (E + 6) u |T| + u |d| |b (T_b + d S_b)| (exp, the
// rounded d, two products, two sums). The test adds the |d| terms per case.
inline double merge_S_rel() { return kMargin * (kExpUnits + 2.0) * u32; }
inline double merge_T_rel() { return kMargin * (kExpUnits + 6.0) * u32; }

}  // namespace sa::cuda_test
