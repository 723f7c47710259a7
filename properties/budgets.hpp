// Error budgets of the "ulp" rule and the metamorphic properties: what a
// correct kernel computing in float32 (for float32, bfloat16 and float16 storage) can
// be off by, derived from the standard rounding-error model (each operation,
// exp and log with relative error <= u, exp and log allowed to be faithful,
// i.e. 2u) in the style of Blanchard, Higham & Higham 2021 (theory.md T7),
// but per element instead of in the max norm.
//
// Summation: a row sum of n positive terms in float32 has relative error
// <= (n-1) u for recursive summation in any order (deterministic; the n u
// term of T7). The probabilistic sqrt(n) u behaviour (Higham & Mary 2019)
// needs independent rounding errors, which flat rows (n equal terms: spike,
// near-ties, masks) do not have: a correct sequential float32 sum of 3841
// equal terms was measured ~500 u off, beyond 8 sqrt(n) u. So
//     A(n) = n - 1      (units of u)
// and the budget never fails a correct float32-accumulating kernel. It is
// loose at large n (4096 u at n = 4097); the statistical bias gate and the
// pytorch_fudge5 rule are the sharper instruments there. A kernel summing in
// bfloat16 is still off by ~2^16 times more and fails it.
//
// Per-element softmax budget, relative, units of u = 2^-24 (float32):
//     4 + A(n) + 3 |z_j - max z| + [theta != 1] (|z_j| + |max z|)
// (4: faithful exp 2u + the division u + the final rounding u; 3|z_j - m|:
// rounding the exp's argument (also as exp2(x log2 e)), amplified by exp; the theta term: rounding
// of l/theta before the shift, which the problem's condition number 2||z|| (T7) turns into output
// error). Outputs: float32 adds 1 ulp of the output (rounding, subnormal slack); bfloat16 adds 0.5
// ulp of bfloat16 (the final rounding of the float32 value); float16 adds 0.5 ulp of float16
// (u = 2^-11; below float16's smallest normal 2^-14 the ulp is the subnormal spacing 2^-24, so
// an exact weight under 2^-25 may come out 0 and one in [2^-24, 2^-14) must come out as the
// nearest subnormal: a kernel that flushes float16 subnormals to zero or rounds them toward
// zero fails, while one computing in float32 and rounding once meets it, float32's own range
// reaching far below 2^-24). Gradual underflow is required: a subnormal float32 result is
// within its ulp (2^-149) like any other, unless the kernel declares the flush_to_zero
// convention (conventions.hpp: then results below 2^-125 may be 0); the double_rounding
// convention adds u_t |x| to a bfloat16/float16 output. An exactly-zero expected value (a
// mask) must be exactly zero.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>

#include "core/dtype.hpp"
#include "properties/conventions.hpp"

namespace sa::props::budget {

constexpr double u32 = 0x1p-24;       // float32 unit roundoff: the working precision
constexpr double flt_min = 0x1p-126;  // smallest normal float32 / bfloat16

inline double summation(double n) { return std::max(n - 1.0, 0.0); }

// Storage types a float32-computing kernel rounds its outputs to once (bfloat16, float16).
inline bool low_precision(DType t) { return t == DType::bfloat16 || t == DType::float16; }

// Spacing of format t in the binade of x (the smallest subnormal spacing at 0).
inline double ulp(DType t, double x) {
  const FloatFormat f = format_of(t);
  int e = f.emin;
  if (x != 0.0 && std::isfinite(x)) {
    int ex;
    std::frexp(x, &ex);
    e = std::max(ex - 1, f.emin);
  }
  return std::ldexp(1.0, e - f.precision + 1);
}

// Half an ulp of the storage type at x for low-precision outputs (their one final
// rounding), else 0 (float32's output rounding is counted in float32 terms).
inline double store_half_ulp(DType t, double x) { return low_precision(t) ? 0.5 * ulp(t, x) : 0.0; }

// The final rounding to a low-precision storage type as a max-norm relative error, i.e.
// relative to the row's largest exact weight p_max: each weight moves by <= u_t |p| in the
// normal range and by <= half the smallest subnormal below it, so
//     max(u_t, 2^(emin - p + 1) / 2 / p_max).
// The floor term matters for float16 only: half its smallest subnormal is 2^-25, which exceeds
// u_f16 p_max once p_max < 2^-14 (rows of more than 2^14 similar items, where every weight is
// subnormal in float16); for bfloat16 it is 2^-134 / p_max, below 2^-8 for any row. 0 for
// float32.
inline double storage_rel(DType t, double p_max) {
  if (!low_precision(t)) return 0.0;
  const FloatFormat f = format_of(t);
  const double half_min_sub = std::ldexp(1.0, f.emin - f.precision);
  return std::max(unit_roundoff(t), p_max > 0 ? half_min_sub / p_max : 0.0);
}

// The largest exact weight a correct kernel may return as 0 in a low-precision
// storage type, beyond float32's flush-to-zero range: half the smallest
// subnormal (float16: 2^-25; bfloat16: 2^-134), 0 for float32.
inline double zero_floor(DType t) {
  if (!low_precision(t)) return 0.0;
  const FloatFormat f = format_of(t);
  return std::ldexp(1.0, f.emin - f.precision);
}

// What the suite needs to know about a row of exact scaled logits z = l/theta.
struct RowStats {
  std::int64_t live = 0;   // entries that are not -inf
  double max = -INFINITY;  // of the finite entries
  double spread = 0;       // max - min over finite entries
  double max_abs = 0;      // max |z| over finite entries
  bool finite = true;      // no NaN or +inf
  bool theta_one = true;
  // A row whose IEEE value of exp(z - max) / sum is NaN though kernel.h defines
  // a limit: +inf logits and no NaN, or every logit -inf (conventions.hpp,
  // ieee_special_values).
  bool ieee_special = false;
};

inline RowStats stats(std::span<const float> row, double theta) {
  RowStats s;
  double lo = INFINITY;
  s.theta_one = theta == 1.0;
  for (float x : row) {
    const double z = static_cast<double>(x) / theta;
    if (std::isnan(z) || z == INFINITY) s.finite = false;
    if (z == -INFINITY) continue;
    ++s.live;
    if (!std::isfinite(z)) continue;
    s.max = std::max(s.max, z);
    lo = std::min(lo, z);
    s.max_abs = std::max(s.max_abs, std::abs(z));
  }
  s.spread = s.live > 0 && std::isfinite(lo) ? s.max - lo : 0.0;
  bool nan = false, pos_inf = false;
  for (float x : row) nan = nan || std::isnan(x), pos_inf = pos_inf || x == INFINITY;
  s.ieee_special = !nan && (pos_inf || s.live == 0);
  return s;
}

inline double theta_term(const RowStats& s) { return s.theta_one ? 0.0 : 2.0 * s.max_abs; }

// Relative softmax budget of item j (units of u32).
// The exp-argument term is 3 |z_j - m|: the rounding of z_j - m (u) plus an
// exp2(x log2 e) formulation's rounding of x log2 e (1.44 u), with slack.
inline double softmax_rel(const RowStats& s, double z_j) {
  return 4.0 + summation(static_cast<double>(s.live)) + 3.0 * std::abs(z_j - s.max) +
         (s.theta_one ? 0.0 : std::abs(z_j) + std::abs(s.max));
}

// What the double_rounding convention adds to an output of exact value x in
// type t: one more rounding to t, <= u_t |x| in the normal range and half the
// smallest subnormal below it (0 for float32).
inline double double_rounding_extra(DType t, double x) {
  if (!low_precision(t)) return 0.0;
  const FloatFormat f = format_of(t);
  return std::max(unit_roundoff(t) * std::abs(x), std::ldexp(1.0, f.emin - f.precision));
}
// Absolute budget for an output of exact value x given the float32-internal
// absolute error bound `internal`, widened by the declared conventions
// (active_conventions()).
inline double output_abs(DType t, double x, double internal) {
  if (x == 0.0) return internal;  // exact zeros (masks) must stay exact unless internal > 0
  const Conventions& c = active_conventions();
  // Each rounding acts on the value computed so far, which can exceed |x| by
  // the errors before it: its ulp is taken at that reach, so a result that
  // the earlier errors push across a power of two (where the ulp doubles) is
  // still covered. (Taken at |x|, a bfloat16 dq of an exact-arithmetic
  // kernel measured 13.13 ulp against a 12.98 ulp bound: its value before
  // the final rounding lay above 2^-8, its exact value below.)
  const double reach = std::abs(x) + internal;
  const double u32_at = ulp(DType::float32, reach);
  double b = internal + u32_at + store_half_ulp(t, reach + u32_at);
  if (c.double_rounding) b += double_rounding_extra(t, x);
  if (c.flush_to_zero && std::abs(x) < kFlushBelow) b = std::max(b, std::abs(x));
  return b;
}
// The undeclared convention under which `got` would be within `budget` of
// `exact` in output type t ("flush_to_zero" or "double_rounding"), or empty:
// what a failing element's verdict names, so that a policy difference reads
// apart from an error.
inline std::string convention_allowing(DType t, double got, double exact, double budget) {
  if (!std::isfinite(got) || !std::isfinite(exact)) return {};
  const Conventions& c = active_conventions();
  if (!c.flush_to_zero && got == 0.0 && exact != 0.0 && std::abs(exact) < kFlushBelow)
    return "flush_to_zero";
  if (!c.double_rounding && low_precision(t) &&
      std::abs(got - exact) <= budget + double_rounding_extra(t, exact))
    return "double_rounding";
  return {};
}

inline double softmax_abs(DType t, const RowStats& s, double z_j, double p) {
  if (p == 0.0) return 0.0;
  return output_abs(t, p, softmax_rel(s, z_j) * u32 * std::abs(p));
}

// log-softmax item j (absolute): rounding z_j - m, log S's error, final subtraction.
inline double log_softmax_abs(DType t, const RowStats& s, double z_j, double exact) {
  return output_abs(
      t, exact,
      u32 * (std::abs(z_j - s.max) + summation(double(s.live)) + 4.0 + s.spread + theta_term(s)));
}

// log-sum-exp (float32 output): m + log S.
inline double lse_abs(const RowStats& s, double exact) {
  return output_abs(DType::float32, exact,
                    u32 * (summation(double(s.live)) + 4.0 + s.spread + theta_term(s)));
}

// Entropy (float32 output), H = log S - T/S or -sum p log p: relative errors of
// the weights (A + 4 + 2 delta) u propagate into both terms, each <= (1 + H).
inline double entropy_abs(const RowStats& s, double H) {
  return output_abs(DType::float32, H,
                    2.0 * u32 * (summation(double(s.live)) + 4.0 + 2.0 * s.spread + theta_term(s)) *
                        (1.0 + std::abs(H)));
}

// Error of beta(H) from an error dH in H plus the polynomial's evaluation
// (Horner, 8 operations: <= 8u sum |c_i| H^(4-i)). beta is Lipschitz with
// constant max |poly'| where poly > 1, and constant where it is clamped.
inline double beta_abs(double H, double dH) {
  const double h = std::abs(H) + dH;
  const double dpoly = std::abs(4 * 0.037 * h * h * h) + 3 * 0.481 * h * h + 2 * 2.3 * h + 4.917;
  const double terms = 0.037 * h * h * h * h + 0.481 * h * h * h + 2.3 * h * h + 4.917 * h + 1.791;
  return dpoly * dH + 8.0 * u32 * terms + 2.0 * u32 * 2.5;
}

}  // namespace sa::props::budget
