// Single-row building blocks of the CPU kernel (Highway, runtime dispatch to
// the best instruction set this machine has: AVX-512, AVX2 or portable 128-bit).
//
// Internal to kernels/cpu (the benchmarks use them as peers); the suite calls
// the kernel through its C ABI only. Every function works on ONE row and is
// single-threaded; cpu_kernel.cpp spreads rows over threads.
//
// Fast paths only: a row with NaN, +inf or no finite logit is reported back
// (ok = false / NaN result) and cpu_kernel.cpp answers it with the exact scalar
// special-value path. -inf logits (masks) are handled here.
//
// Scaling: the kernel computes with d_i = (x_i - m) * s, s = beta / theta.
// Scale carries s as a double and as an unevaluated float sum hi + lo, so that
// float lanes can form d_i to about 2^-48 relative (theory.md T7: the classic
// ~17 ulp floor of float softmax comes from rounding x - m; here x - m is
// formed exactly as a two-float sum before exp).
//
// exp: on AVX-512 and AVX2, table-driven (2^(j/L) for L = 32 or 8 entries
// held in registers, |r| <= ln2/(2L), a quartic, cubic or quadratic for e^r);
// on the other targets a polynomial on |r| <= ln2/2. vec_exp-inl.h states
// each error.
//
// Files: vec_types-inl.h (vector types, double lanes), vec_load_store-inl.h
// (per-dtype loads and stores), vec_exp-inl.h (vector exp and exact scaling),
// row_reduce.cpp (max, range, streamed states), row_exp.cpp (exp passes and
// scaling by 1/S), row_log_softmax.cpp (the log-softmax pass).
//
// Accuracy (measured in tests/cpu, on every instruction set compiled in):
// - float32 rows: exp of a two-float argument within 0.58 ulp (table; AVX2's
//   L = 8 table measured 0.538 ulp over every float argument in [-104, 0]) or
//   0.75 ulp (degree-7 Taylor polynomial; also the streamed rescales);
//   S of a stored row adds the two halves of each pair of vectors in double
//   before the running double sum (one more 2^-53 rounding);
//   S is accumulated in double lanes, T (entropy) in float blocks of 8 values
//   per lane flushed to double (<= 8 u of T).
// - bfloat16 rows: inputs subtract exactly; exp within ~2.5 u (table with a
//   quadratic, or cubic) or 1.05e-8 (degree-6 Chebyshev polynomial), with a
//   one-constant reduction (<= 2.9e-7 absolute in r, only for weights below
//   e^-83); the final pass multiplies by 1/S inside the polynomial and adds
//   the exponents as integers, so the float value is within ~3 u before its
//   one rounding to bfloat16 (measured 100% correctly rounded on the suite's
//   rows, against a >= 99% claim).
// - float16 rows: widened exactly to float32, computed as float32 rows, and
//   rounded once to float16 (row_widen_f16 / row_narrow_f16: F16C or
//   AVX-512F conversions on those targets, integer code elsewhere): the float32
//   result's error (< 1 ulp of float32) is 2^-13 of a float16 ulp, so the
//   float16 output is the correctly rounded one except within that distance
//   of a float16 midpoint.
// - Rows with a known minimum (row_range) whose weights all stay normal floats
//   skip the per-lane checks for masked lanes and subnormal results; the
//   arithmetic, and so every bit of the result, is the same.
#pragma once

#include <atomic>
#include <cstdint>

namespace sa::kernels::cpu {

struct Scale {
  double s = 1.0;    // beta / theta
  float hi = 1.0f;   // s rounded to float
  float lo = 0.0f;   // s - hi rounded to float
  bool unit = true;  // s == 1 exactly: no multiplication at all
  static Scale of(double s);
};

// Online state of one row: raw (unscaled) max m over the lanes that saw a
// finite logit, S = sum exp((x - m) s), T = sum exp((x - m) s) (x - m) s,
// both in double. ok = false when the row needs the special-value path
// (NaN, +inf, or every logit -inf).
struct RowState {
  float m = 0;
  double S = 0;
  double T = 0;
  bool ok = false;
  float lo = -__builtin_inff();  // raw row minimum (NaN: unspecified), when ok
};

// Largest element (raw). NaN behaviour unspecified: callers check the sum.
float row_max_f32(const float* x, std::int64_t n);
float row_max_bf16(const std::uint16_t* x, std::int64_t n);
// Smallest and largest element (raw) in one pass (NaN: unspecified).
void row_range_f32(const float* x, std::int64_t n, float* lo, float* hi);
void row_range_bf16(const std::uint16_t* x, std::int64_t n, float* lo, float* hi);

// One pass, lanes keep (m, S) (online normaliser, Milakov & Gimelshein 2018).
RowState row_normaliser_f32(const float* x, std::int64_t n, const Scale& s);
RowState row_normaliser_bf16(const std::uint16_t* x, std::int64_t n, const Scale& s);

// One pass, lanes keep (m, S, T) (theory.md T6), merged with entropy_merge.
RowState row_entropy_f32(const float* x, std::int64_t n, const Scale& s);
RowState row_entropy_bf16(const std::uint16_t* x, std::int64_t n, const Scale& s);

// The passes below take the row max m (raw, finite) and the row minimum lo
// (raw; -inf when the row has masked logits or lo is not known). A row whose
// (lo - m) s keeps every weight in float's normal range runs without per-lane
// checks for masked lanes and subnormal results; any other lo is only slower.
//
// Stored exps are BIASED: y_i = exp((x_i - m) s) * 2^32 (every live value a
// normal float, so no subnormal microcode assists); they are meant for
// row_scale_f32 / row_scale_to_bf16, which remove the bias exactly (subnormal
// weights are rounded once, by integer arithmetic). Sums returned are
// unbiased: sum exp((x_i - m) s), accumulated in double.
//
// y_i = 2^32 exp((x_i - m) s); returns sum exp((x_i - m) s).
double row_exp_store_f32(const float* x, float* y, std::int64_t n, float m, float lo,
                         const Scale& s);
// sum exp((x_i - m) s) without storing.
double row_sum_exp_f32(const float* x, std::int64_t n, float m, float lo, const Scale& s);
double row_sum_exp_bf16(const std::uint16_t* x, std::int64_t n, float m, float lo, const Scale& s);

// bfloat16 input, biased float exps stored to a scratch row y; returns the sum.
double row_exp_store_bf16(const std::uint16_t* x, float* y, std::int64_t n, float m, float lo,
                          const Scale& s);
// The longest bfloat16 row that should store its exps in a float scratch row
// (row_exp_store_bf16 + row_scale_to_bf16) rather than compute exp twice
// (row_sum_exp_bf16 + row_exp_scale_bf16), for the dispatched target.
std::int64_t row_bf16_scratch_max_n();
// The longest float32 / bfloat16 row that should take the three-pass softmax
// (range; exps stored or summed; scaled) rather than the online normaliser
// and a fused exp-and-scale pass, for the dispatched target.
std::int64_t row_f32_three_pass_max_n();
std::int64_t row_bf16_three_pass_max_n();
// y (bfloat16, rounded to nearest even) = (biased e) * 2^-32 * (r_hi + r_lo).
// normal: as row_scale_f32's.
void row_scale_to_bf16(const float* e, std::uint16_t* y, std::int64_t n, float r_hi, float r_lo,
                       bool normal = false);

// As above, also *T = sum e_i (x_i - m) s. The _store_ form writes e_i to y.
double row_exp_store_T_f32(const float* x, float* y, std::int64_t n, float m, float lo,
                           const Scale& s, double* T);
double row_sum_exp_T_f32(const float* x, std::int64_t n, float m, float lo, const Scale& s,
                         double* T);
double row_sum_exp_T_bf16(const std::uint16_t* x, std::int64_t n, float m, float lo, const Scale& s,
                          double* T);

// sum exp((x_i - m) s) over x_i != m, and *k = the number of x_i == m.
double row_sum_exp_rest_f32(const float* x, std::int64_t n, float m, const Scale& s,
                            std::int64_t* k);
double row_sum_exp_rest_bf16(const std::uint16_t* x, std::int64_t n, float m, const Scale& s,
                             std::int64_t* k);

// y_i = (biased y_i) * 2^-32 * (r_hi + r_lo) (two-float reciprocal: one
// rounding per element). normal: the caller knows every result is a normal
// float (row_weights_normal), so the per-vector subnormal check is skipped;
// the same bits either way.
void row_scale_f32(float* y, std::int64_t n, float r_hi, float r_lo, bool normal = false);

// y_i = exp((x_i - m) s) * r (recomputes exp; x may equal y). normal: as above.
void row_exp_scale_f32(const float* x, float* y, std::int64_t n, float m, float lo, const Scale& s,
                       float r_hi, float r_lo, bool normal = false);

// Whether every weight exp((x_i - m) s) / S of a row with minimum lo (raw;
// -inf or NaN: no) is a normal float with margin: (lo - m) s - log S >= -86
// (e^-86 > 2^-124, so neither the exp's nor the product's rounding can
// take a weight below 2^-126). log S is bounded above through S's binary
// exponent, so a row within ln 2 of the margin may answer false (slower,
// same bits).
bool row_weights_normal(float lo, float m, double s, double S);

void row_exp_scale_bf16(const std::uint16_t* x, std::uint16_t* y, std::int64_t n, float m, float lo,
                        const Scale& s, float r_hi, float r_lo);

// y_i = (x_i - m) s - L, evaluated in double lanes, rounded once.
void row_log_softmax_f32(const float* x, float* y, std::int64_t n, float m, double s, double L);
void row_log_softmax_bf16(const std::uint16_t* x, std::uint16_t* y, std::int64_t n, float m,
                          double s, double L);

// float16 rows run the float32 algorithms above on a float32 copy:
// y_i = x_i exactly (every float16 value is a float32 value) ...
void row_widen_f16(const std::uint16_t* x, float* y, std::int64_t n);
// ... and y_i = x_i rounded to the nearest float16, ties to even, with
// gradual underflow (subnormals k 2^-24), overflow to inf from 65520, NaN
// quiet: the same bits as core/float16.hpp's f16_from_float.
void row_narrow_f16(const float* x, std::uint16_t* y, std::int64_t n);
// row_widen_f16 and the row's smallest and largest element in one pass.
void row_widen_range_f16(const std::uint16_t* x, float* y, std::int64_t n, float* lo, float* hi);
// y (float16) = biased e * 2^-32 * (r_hi + r_lo): row_scale_f32 then
// row_narrow_f16 in one pass, the same bits.
void row_scale_to_f16(const float* e, std::uint16_t* y, std::int64_t n, float r_hi, float r_lo,
                      bool normal = false);

// Name of the instruction set the dispatcher picked (for benchmark context).
const char* dispatch_target();

// Tests and benchmarks only: while on, the exp and scale passes take their
// checked forms (the dead-lane checks on every vector, TwoSum for x - m,
// ScaleDown96's per-vector check for every weight), the reference the faster
// forms are held to bit for bit (KnownMinimumChangesNoBit) and measured
// against (softmax_bench, scale_f32_form). Off by default; not for
// concurrent callers.
void set_checked_forms_only(bool on);
namespace detail {
extern std::atomic<bool> checked_forms_only;
}
inline bool checked_forms_only() {
  return detail::checked_forms_only.load(std::memory_order_relaxed);
}

}  // namespace sa::kernels::cpu
