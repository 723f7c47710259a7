// The "cpu" kernel: argument checking, the row loop (threads), the per-row
// algorithms built from row_ops.hpp, and the exact special-value paths.
#include "kernels/cpu/cpu_kernel.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/attention_v2.hpp"
#include "kernels/cpu/merge_n.hpp"
#include "kernels/cpu/backward.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/bfloat16.hpp"
#include "kernels/cpu/isa_limit.hpp"
#include "kernels/cpu/row_ops.hpp"
#include "theory/adaptive_temperature.hpp"
#include "theory/streamed_entropy.hpp"

namespace sa::kernels {
namespace {

using cpu::RowState;
using cpu::Scale;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// float32 rows longer than cpu::row_f32_three_pass_max_n() use the two-pass
// softmax (online normaliser, then exp recomputed and scaled: 2 reads + 1
// write) instead of the three-pass one (max; exp stored + summed; scale: 3
// reads + 2 writes): where the exp is cheap against the memory, past the
// caches the extra exp costs less than the traffic. Measured per target and
// vendor (bench/alternate_bench.py, CPU time, minimum of 6 runs): 2^21 on
// Intel Xeon (Sapphire Rapids class, both targets; the earlier choice, not
// remeasured) and on AMD EPYC Zen 5 on AVX-512 (two-pass 1681 against 2004
// us at 2^22, 7379 against 9623 us at 2^24); no limit on Zen 5's AVX2, whose
// exp costs twice as much (three-pass 2399 against 3279 us at 2^22, 10195
// against 13120 us at 2^24).
// Shorter rows do not ask (three_pass_f32). Adaptive rows and float16 rows
// (which widen into a scratch row) keep 2^21.
constexpr std::int64_t kThreePassMaxN = std::int64_t{1} << 21;
bool three_pass_f32(std::int64_t n) {
  return n <= kThreePassMaxN || n <= cpu::row_f32_three_pass_max_n();
}

// bfloat16 rows up to cpu::row_bf16_scratch_max_n() store their exps in a
// float scratch row; longer ones compute exp twice instead (a sum pass, then
// the fused exp * 1/S pass of row_exp.cpp): once the scratch leaves the
// caches, two of the cheap bf16 exps can cost less than 6 bytes per element
// of scratch traffic. Where that happens was measured per target and vendor:
// Intel Xeon (Sapphire Rapids class) 2^18 on AVX-512 (at 2^20: 0.57 ms exp
// twice against 0.75 ms scratch) and 2^20 on AVX2 (0.79 ms scratch against
// 0.94 ms); AMD EPYC Zen 5 2^20 on AVX-512 (at 2^20: 174-182 us scratch
// against 198-203 us; at 2^22 scratch loses, 1040 against 830-849 us) and
// 2^22 on AVX2 (at 2^22: 1574-1579 us scratch against 1991-2034 us).

// bfloat16 rows longer than cpu::row_bf16_three_pass_max_n() use the
// two-pass form too: Intel 2^22 (8 MiB of input; not remeasured); AMD EPYC
// Zen 5 no limit, where the online normaliser loses to a range pass and exp
// twice on both targets (at 2^24: 9104 against 11306 us on AVX2, 4712
// against 5059 us on AVX-512). Shorter rows do not ask (three_pass_bf16).
constexpr std::int64_t kBf16ThreePassMaxN = std::int64_t{1} << 22;
bool three_pass_bf16(std::int64_t n) {
  return n <= kBf16ThreePassMaxN || n <= cpu::row_bf16_three_pass_max_n();
}

// Rows are spread over threads only when there are at least two and the batch
// is big enough to pay for waking the team.
constexpr std::int64_t kParallelMinElements = std::int64_t{1} << 15;

thread_local std::string g_error;

sa_status fail(sa_status s, std::string what) {
  g_error = "cpu kernel: " + std::move(what);
  return s;
}

// ------------------------------------------------------------ element access
inline float load(const float* x, std::int64_t i) { return x[i]; }
inline float load(const std::uint16_t* x, std::int64_t i) { return float_from_bf16(x[i]); }
inline void put(float* y, std::int64_t i, float v) { y[i] = v; }
inline void put(std::uint16_t* y, std::int64_t i, float v) { y[i] = bf16_from_float(v); }

// ------------------------------------------------------------ argument checks
std::size_t element_size(sa_dtype t) { return t == SA_BF16 || t == SA_F16 ? 2 : 4; }

sa_status check_dtype(sa_dtype t) {
  if (t != SA_F32 && t != SA_BF16 && t != SA_F16)
    return fail(SA_UNSUPPORTED, "dtype " + std::to_string(static_cast<int>(t)) +
                                    " is not SA_F32 (1), SA_BF16 (2) or SA_F16 (3)");
  return SA_OK;
}

// Bytes spanned by `rows` rows of n elements at `stride`.
std::uintptr_t span_bytes(std::int64_t rows, std::int64_t n, std::int64_t stride, std::size_t es) {
  return static_cast<std::uintptr_t>(((rows - 1) * stride + n)) * es;
}

sa_status check_rows(const char* op, sa_dtype t, const sa_rows* shape, const void* in,
                     const void* out, bool has_out) {
  g_error.clear();
  if (sa_status s = check_dtype(t); s != SA_OK) return s;
  // The operation's name leads each message; built only when one is needed
  // (a valid call pays no string work).
  struct Op {
    const char* name;
    std::string operator+(const std::string& m) const { return std::string(name) + ": " + m; }
    std::string operator+(const char* m) const { return std::string(name) + ": " + m; }
  } o{op};
  if (!shape) return fail(SA_INVALID_ARGUMENT, o + "shape is NULL");
  if (shape->rows < 0)
    return fail(SA_INVALID_ARGUMENT,
                o + "rows = " + std::to_string(shape->rows) + ", expected >= 0");
  if (shape->n <= 0)
    return fail(SA_INVALID_ARGUMENT,
                o + "n = " + std::to_string(shape->n) + ", expected >= 1 (a row needs a logit)");
  if (shape->in_stride < shape->n)
    return fail(SA_INVALID_ARGUMENT, o + "in_stride = " + std::to_string(shape->in_stride) +
                                         " is less than n = " + std::to_string(shape->n));
  if (has_out && shape->out_stride < shape->n)
    return fail(SA_INVALID_ARGUMENT, o + "out_stride = " + std::to_string(shape->out_stride) +
                                         " is less than n = " + std::to_string(shape->n));
  if (!(shape->temperature > 0) || !std::isfinite(shape->temperature))
    return fail(SA_INVALID_ARGUMENT, o + "temperature = " + std::to_string(shape->temperature) +
                                         ", expected finite and > 0");
  if (shape->rows == 0) return SA_OK;
  if (!in) return fail(SA_INVALID_ARGUMENT, o + "input pointer is NULL");
  if (!out) return fail(SA_INVALID_ARGUMENT, o + "output pointer is NULL");
  if (has_out) {
    const std::size_t es = element_size(t);
    const auto a = reinterpret_cast<std::uintptr_t>(in);
    const auto b = reinterpret_cast<std::uintptr_t>(out);
    if (a == b) {
      if (shape->rows > 1 && shape->in_stride != shape->out_stride)
        return fail(SA_INVALID_ARGUMENT, o + "in place (in == out) needs in_stride == out_stride");
    } else {
      const auto ea = a + span_bytes(shape->rows, shape->n, shape->in_stride, es);
      const auto eb = b + span_bytes(shape->rows, shape->n, shape->out_stride, es);
      if (a < eb && b < ea)
        return fail(SA_INVALID_ARGUMENT, o + "in and out overlap without being equal");
    }
  }
  return SA_OK;
}

template <class F>
void for_rows(std::int64_t rows, std::int64_t n, F&& f) {
  if (rows < 2 || rows * n < kParallelMinElements) {  // no thread team at all
    for (std::int64_t r = 0; r < rows; ++r) f(r);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) f(r);
}

// ------------------------------------------------------------ special rows
// A row with NaN, +inf or no finite logit (kernel.h semantics).
struct Special {
  bool nan = false;
  std::int64_t pos_inf = 0;  // number of +inf logits
  bool all_masked = true;    // every logit -inf
};

template <class T>
Special classify(const T* x, std::int64_t n) {
  Special s;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = load(x, i);
    if (std::isnan(v)) {
      s.nan = true;
      s.all_masked = false;
      return s;
    }
    if (v == kInf) ++s.pos_inf;
    if (v != -kInf) s.all_masked = false;
  }
  return s;
}

// Weights of a special row: NaN everywhere, 1/k at the +inf items, or 0.
// Returns false for an ordinary row (the caller then uses the scalar path).
template <class T>
bool special_weights(const T* x, T* y, std::int64_t n, const Special& s) {
  if (s.nan) {
    for (std::int64_t i = 0; i < n; ++i) put(y, i, kNaN);
    return true;
  }
  if (s.pos_inf > 0) {
    const float w = static_cast<float>(1.0 / static_cast<double>(s.pos_inf));
    for (std::int64_t i = 0; i < n; ++i) put(y, i, load(x, i) == kInf ? w : 0.0f);
    return true;
  }
  if (s.all_masked) {
    for (std::int64_t i = 0; i < n; ++i) put(y, i, 0.0f);
    return true;
  }
  return false;
}

// Plain double-precision scalar softmax: only reached if a fast path declines
// a row that is not special (not expected; kept so no row is ever dropped).
template <class T>
void scalar_softmax(const T* x, T* y, std::int64_t n, double s) {
  double m = -INFINITY;
  for (std::int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<double>(load(x, i)));
  double S = 0;
  for (std::int64_t i = 0; i < n; ++i) S += std::exp((load(x, i) - m) * s);
  for (std::int64_t i = 0; i < n; ++i)
    put(y, i, static_cast<float>(std::exp((load(x, i) - m) * s) / S));
}

// ------------------------------------------------------------ row algorithms
struct Recip {
  float hi, lo;
};
Recip recip(double S) {
  const double r = 1.0 / S;
  const float hi = static_cast<float>(r);
  return {hi, static_cast<float>(r - static_cast<double>(hi))};
}

RowState normaliser(const float* x, std::int64_t n, const Scale& s) {
  return cpu::row_normaliser_f32(x, n, s);
}
RowState normaliser(const std::uint16_t* x, std::int64_t n, const Scale& s) {
  return cpu::row_normaliser_bf16(x, n, s);
}
RowState entropy_state(const float* x, std::int64_t n, const Scale& s) {
  return cpu::row_entropy_f32(x, n, s);
}
RowState entropy_state(const std::uint16_t* x, std::int64_t n, const Scale& s) {
  return cpu::row_entropy_bf16(x, n, s);
}
void exp_scale(const float* x, float* y, std::int64_t n, float m, float lo, const Scale& s, Recip r,
               double S = 0) {
  cpu::row_exp_scale_f32(x, y, n, m, lo, s, r.hi, r.lo, cpu::row_weights_normal(lo, m, s.s, S));
}
void exp_scale(const std::uint16_t* x, std::uint16_t* y, std::int64_t n, float m, float lo,
               const Scale& s, Recip r, double = 0) {
  cpu::row_exp_scale_bf16(x, y, n, m, lo, s, r.hi, r.lo);
}
// The row's smallest and largest logits (raw).
struct Range {
  float lo, hi;
};
Range range(const float* x, std::int64_t n) {
  Range r;
  cpu::row_range_f32(x, n, &r.lo, &r.hi);
  return r;
}
Range range(const std::uint16_t* x, std::int64_t n) {
  Range r;
  cpu::row_range_bf16(x, n, &r.lo, &r.hi);
  return r;
}
constexpr float kNoLo = -kInf;  // row minimum not known

// softmax with the row max m (raw) already known and finite; lo the row
// minimum (or kNoLo).
template <class T>
void softmax_known_max(const T* x, T* y, std::int64_t n, float m, float lo, const Scale& s) {
  if constexpr (std::is_same_v<T, float>) {
    if (three_pass_f32(n)) {
      const double S = cpu::row_exp_store_f32(x, y, n, m, lo, s);
      if (std::isfinite(S) && S > 0) {
        const Recip r = recip(S);
        cpu::row_scale_f32(y, n, r.hi, r.lo, cpu::row_weights_normal(lo, m, s.s, S));
        return;
      }
      scalar_softmax(x, y, n, s.s);
      return;
    }
    const double S = cpu::row_sum_exp_f32(x, n, m, lo, s);
    exp_scale(x, y, n, m, lo, s, recip(S), S);
  } else {
    const double S = cpu::row_sum_exp_bf16(x, n, m, lo, s);
    exp_scale(x, y, n, m, lo, s, recip(S));
  }
}

template <class T>
void softmax_row(const T* x, T* y, std::int64_t n, const Scale& s) {
  if constexpr (std::is_same_v<T, float>) {
    if (three_pass_f32(n)) {
      const auto [lo, m] = range(x, n);
      if (std::isfinite(m)) {
        const double S = cpu::row_exp_store_f32(x, y, n, m, lo, s);
        if (std::isfinite(S) && S > 0) {
          const Recip r = recip(S);
          cpu::row_scale_f32(y, n, r.hi, r.lo, cpu::row_weights_normal(lo, m, s.s, S));
          return;
        }
      }
      // Special row. In place, pass 2 may have overwritten x, but only when
      // the max was finite, so the row holds a NaN, and NaN stays NaN.
      if (!special_weights(x, y, n, classify(x, n))) scalar_softmax(x, y, n, s.s);
      return;
    }
  }
  if constexpr (std::is_same_v<T, std::uint16_t>)
    if (three_pass_bf16(n)) {
      // bfloat16: max; exp stored (float) and summed; scaled and rounded.
      // Longer rows use the online normaliser and recompute exp (below).
      // The exps go to a per-thread float scratch row (<= 16 MiB), so each is
      // computed once.
      const auto [lo, m] = range(x, n);
      if (std::isfinite(m) && n > cpu::row_bf16_scratch_max_n()) {
        const double S = cpu::row_sum_exp_bf16(x, n, m, lo, s);
        if (std::isfinite(S) && S > 0) {
          exp_scale(x, y, n, m, lo, s, recip(S));
          return;
        }
      } else if (std::isfinite(m)) {
        thread_local std::vector<float> scratch;
        if (scratch.size() < static_cast<std::size_t>(n))
          scratch.resize(static_cast<std::size_t>(n));
        const double S = cpu::row_exp_store_bf16(x, scratch.data(), n, m, lo, s);
        if (std::isfinite(S) && S > 0) {
          const Recip r = recip(S);
          cpu::row_scale_to_bf16(scratch.data(), y, n, r.hi, r.lo,
                                 cpu::row_weights_normal(lo, m, s.s, S));
          return;
        }
      }
      if (!special_weights(x, y, n, classify(x, n))) scalar_softmax(x, y, n, s.s);
      return;
    }
  const RowState st = normaliser(x, n, s);
  if (!st.ok) {
    if (!special_weights(x, y, n, classify(x, n))) scalar_softmax(x, y, n, s.s);
    return;
  }
  exp_scale(x, y, n, st.m, st.lo, s, recip(st.S), st.S);
}

// log p_i = (x_i - m) s - L with L = log(k + rest) = log k + log1p(rest / k),
// k the count of logits at the max m (each weight exactly 1 before
// normalising) and rest the sum of the others: a dominant item's log-weight
// -log1p(rest) keeps its relative accuracy even when rest < 2^-53.
template <class T>
void log_softmax_row(const T* x, T* y, std::int64_t n, const Scale& s) {
  float m;
  if constexpr (std::is_same_v<T, float>)
    m = cpu::row_max_f32(x, n);
  else
    m = cpu::row_max_bf16(x, n);
  if (std::isfinite(m)) {
    std::int64_t k = 0;
    double rest;
    if constexpr (std::is_same_v<T, float>)
      rest = cpu::row_sum_exp_rest_f32(x, n, m, s, &k);
    else
      rest = cpu::row_sum_exp_rest_bf16(x, n, m, s, &k);
    if (std::isfinite(rest) && k > 0) {
      const double kd = static_cast<double>(k);
      const double L = std::log(kd) + std::log1p(rest / kd);
      if constexpr (std::is_same_v<T, float>)
        cpu::row_log_softmax_f32(x, y, n, m, s.s, L);
      else
        cpu::row_log_softmax_bf16(x, y, n, m, s.s, L);
      return;
    }
  }
  const Special sp = classify(x, n);
  if (sp.nan) {
    for (std::int64_t i = 0; i < n; ++i) put(y, i, kNaN);
  } else if (sp.pos_inf > 0) {
    const float w = static_cast<float>(-std::log(static_cast<double>(sp.pos_inf)));
    for (std::int64_t i = 0; i < n; ++i) put(y, i, load(x, i) == kInf ? w : -kInf);
  } else {  // fully masked (the only other way the normaliser declines)
    for (std::int64_t i = 0; i < n; ++i) put(y, i, -kInf);
  }
}

template <class T>
float lse_row(const T* x, std::int64_t n, const Scale& s) {
  const RowState st = normaliser(x, n, s);
  if (st.ok) return static_cast<float>(static_cast<double>(st.m) * s.s + std::log(st.S));
  const Special sp = classify(x, n);
  if (sp.nan) return kNaN;
  return sp.pos_inf > 0 ? kInf : -kInf;
}

// Entropy and the final state of a row; returns false for special rows
// after filling H and the state per kernel.h.
template <class T>
bool entropy_row(const T* x, std::int64_t n, const Scale& s, RowState& st, double& H,
                 sa_entropy_state& state) {
  st = entropy_state(x, n, s);
  if (st.ok) {
    H = std::log(st.S) - st.T / st.S;  // theory.md T6: both terms >= 0
    state = {static_cast<float>(static_cast<double>(st.m) * s.s), static_cast<float>(st.S),
             static_cast<float>(st.T)};
    return true;
  }
  const Special sp = classify(x, n);
  if (sp.nan) {
    H = NAN;
    state = {kNaN, kNaN, kNaN};
  } else if (sp.pos_inf > 0) {
    H = std::log(static_cast<double>(sp.pos_inf));
    state = {kInf, static_cast<float>(sp.pos_inf), 0.0f};
  } else {
    H = 0;
    state = {-kInf, 0.0f, 0.0f};
  }
  return false;
}

// Adaptive softmax (theory.md T5 with Shannon H from the T6 state):
//   m = row max; one pass forms (S, T) at beta = 1 (float32 out of place: the
//   exps are stored in y as well); H = log S - T/S; beta = beta(H), rounded to
//   float, and that float is what scales the logits, so the weights are
//   exactly softmax(beta_out * l / theta) up to rounding;
//   beta == 1: y = stored exps / S (float32) or exp recomputed / S (bfloat16,
//   or in place); beta > 1: a softmax pass at the new scale (max known).
template <class T>
void adaptive_row(const T* x, T* y, std::int64_t n, double inv_theta, float& beta_out,
                  float& H_out) {
  const Scale s1 = Scale::of(inv_theta);
  const auto [lo, m] = range(x, n);
  if (std::isfinite(m)) {
    const bool stored =
        std::is_same_v<T, float> && static_cast<const void*>(x) != y && n <= kThreePassMaxN;
    double S, Tsum = 0;
    if constexpr (std::is_same_v<T, float>)
      S = stored ? cpu::row_exp_store_T_f32(x, y, n, m, lo, s1, &Tsum)
                 : cpu::row_sum_exp_T_f32(x, n, m, lo, s1, &Tsum);
    else
      S = cpu::row_sum_exp_T_bf16(x, n, m, lo, s1, &Tsum);
    if (std::isfinite(S) && S > 0 && std::isfinite(Tsum)) {
      const double H = std::log(S) - Tsum / S;  // theory.md T6: both terms >= 0
      const float beta = static_cast<float>(theory::adaptive_beta<double>(H));
      beta_out = beta;
      H_out = static_cast<float>(H);
      if (beta == 1.0f) {
        const Recip r = recip(S);
        if constexpr (std::is_same_v<T, float>) {
          if (stored) {
            cpu::row_scale_f32(y, n, r.hi, r.lo, cpu::row_weights_normal(lo, m, s1.s, S));
            return;
          }
        }
        exp_scale(x, y, n, m, lo, s1, r, S);
        return;
      }
      softmax_known_max(x, y, n, m, lo, Scale::of(static_cast<double>(beta) * inv_theta));
      return;
    }
  }
  // Special rows (NaN, +inf, fully masked): exact conventions.
  RowState st;
  double H;
  sa_entropy_state state;
  entropy_row(x, n, s1, st, H, state);
  const float beta = std::isnan(H) ? kNaN : static_cast<float>(theory::adaptive_beta<double>(H));
  beta_out = beta;
  H_out = static_cast<float>(H);
  if (!special_weights(x, y, n, classify(x, n))) scalar_softmax(x, y, n, beta * inv_theta);
}

// ------------------------------------------------------------ ABI entry points
template <class T>
const T* row_in(const void* p, const sa_rows* sh, std::int64_t r) {
  return static_cast<const T*>(p) + r * sh->in_stride;
}
template <class T>
T* row_out(void* p, const sa_rows* sh, std::int64_t r) {
  return static_cast<T*>(p) + r * sh->out_stride;
}

template <class F>
void by_dtype(sa_dtype t, F&& f) {
  if (t == SA_F32)
    f(float{});
  else
    f(std::uint16_t{});
}

// float16 rows: the row is widened exactly into a per-thread float32 row,
// computed by the float32 algorithms (the accurate path: two-float x - max,
// double sums) and rounded once to float16 on store (row_narrow_f16: nearest
// even, subnormals, overflow to inf). In place works: the input is read in
// full before the output is written.
struct F16Rows {
  std::vector<float> x, y;
  const float* widen(const void* in, const sa_rows* sh, std::int64_t r) {
    if (x.size() < static_cast<std::size_t>(sh->n)) x.resize(static_cast<std::size_t>(sh->n));
    cpu::row_widen_f16(static_cast<const std::uint16_t*>(in) + r * sh->in_stride, x.data(), sh->n);
    return x.data();
  }
  float* out(std::int64_t n) {
    if (y.size() < static_cast<std::size_t>(n)) y.resize(static_cast<std::size_t>(n));
    return y.data();
  }
  void narrow(void* out, const sa_rows* sh, std::int64_t r) const {
    cpu::row_narrow_f16(y.data(), static_cast<std::uint16_t*>(out) + r * sh->out_stride, sh->n);
  }
};
F16Rows& f16_rows() {
  thread_local F16Rows s;
  return s;
}

sa_status k_softmax(void*, sa_dtype t, const sa_rows* sh, const void* in, void* out) {
  if (sa_status s = check_rows("softmax", t, sh, in, out, true); s != SA_OK) return s;
  const Scale s = Scale::of(1.0 / sh->temperature);
  if (t == SA_F16) {
    for_rows(sh->rows, sh->n, [&](std::int64_t r) {
      F16Rows& f = f16_rows();
      const std::int64_t n = sh->n;
      if (n <= kThreePassMaxN) {
        // softmax_row's three-pass float32 path with the widening fused into
        // the range pass and the narrowing into the scaling pass (same bits).
        if (f.x.size() < static_cast<std::size_t>(n)) f.x.resize(static_cast<std::size_t>(n));
        const auto* x16 = static_cast<const std::uint16_t*>(in) + r * sh->in_stride;
        float lo, m;
        cpu::row_widen_range_f16(x16, f.x.data(), n, &lo, &m);
        if (std::isfinite(m)) {
          float* e = f.out(n);
          const double S = cpu::row_exp_store_f32(f.x.data(), e, n, m, lo, s);
          if (std::isfinite(S) && S > 0) {
            const Recip rc = recip(S);
            cpu::row_scale_to_f16(e, static_cast<std::uint16_t*>(out) + r * sh->out_stride, n,
                                  rc.hi, rc.lo, cpu::row_weights_normal(lo, m, s.s, S));
            return;
          }
        }
        softmax_row(f.x.data(), f.out(n), n, s);  // special rows (x already widened)
        f.narrow(out, sh, r);
        return;
      }
      softmax_row(f.widen(in, sh, r), f.out(n), n, s);
      f.narrow(out, sh, r);
    });
    return SA_OK;
  }
  by_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    for_rows(sh->rows, sh->n, [&](std::int64_t r) {
      softmax_row(row_in<T>(in, sh, r), row_out<T>(out, sh, r), sh->n, s);
    });
  });
  return SA_OK;
}

sa_status k_log_softmax(void*, sa_dtype t, const sa_rows* sh, const void* in, void* out) {
  if (sa_status s = check_rows("log_softmax", t, sh, in, out, true); s != SA_OK) return s;
  const Scale s = Scale::of(1.0 / sh->temperature);
  if (t == SA_F16) {
    for_rows(sh->rows, sh->n, [&](std::int64_t r) {
      F16Rows& f = f16_rows();
      log_softmax_row(f.widen(in, sh, r), f.out(sh->n), sh->n, s);
      f.narrow(out, sh, r);
    });
    return SA_OK;
  }
  by_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    for_rows(sh->rows, sh->n, [&](std::int64_t r) {
      log_softmax_row(row_in<T>(in, sh, r), row_out<T>(out, sh, r), sh->n, s);
    });
  });
  return SA_OK;
}

sa_status k_logsumexp(void*, sa_dtype t, const sa_rows* sh, const void* in, float* lse) {
  if (sa_status s = check_rows("logsumexp", t, sh, in, lse, false); s != SA_OK) return s;
  const Scale s = Scale::of(1.0 / sh->temperature);
  if (t == SA_F16) {
    for_rows(sh->rows, sh->n,
             [&](std::int64_t r) { lse[r] = lse_row(f16_rows().widen(in, sh, r), sh->n, s); });
    return SA_OK;
  }
  by_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    for_rows(sh->rows, sh->n,
             [&](std::int64_t r) { lse[r] = lse_row(row_in<T>(in, sh, r), sh->n, s); });
  });
  return SA_OK;
}

sa_status k_entropy(void*, sa_dtype t, const sa_rows* sh, const void* in, float* entropy,
                    sa_entropy_state* state) {
  if (sa_status s = check_rows("entropy", t, sh, in, entropy, false); s != SA_OK) return s;
  const Scale s = Scale::of(1.0 / sh->temperature);
  auto one = [&](const auto* x, std::int64_t r) {
    RowState st;
    double H;
    sa_entropy_state es;
    entropy_row(x, sh->n, s, st, H, es);
    entropy[r] = static_cast<float>(H);
    if (state) state[r] = es;
  };
  if (t == SA_F16) {
    for_rows(sh->rows, sh->n, [&](std::int64_t r) { one(f16_rows().widen(in, sh, r), r); });
    return SA_OK;
  }
  by_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    for_rows(sh->rows, sh->n, [&](std::int64_t r) { one(row_in<T>(in, sh, r), r); });
  });
  return SA_OK;
}

sa_status k_adaptive(void*, sa_dtype t, const sa_rows* sh, const void* in, void* out, float* beta,
                     float* entropy) {
  if (sa_status s = check_rows("adaptive_softmax", t, sh, in, out, true); s != SA_OK) return s;
  const double inv_theta = 1.0 / sh->temperature;
  if (t == SA_F16) {
    for_rows(sh->rows, sh->n, [&](std::int64_t r) {
      F16Rows& f = f16_rows();
      float b, H;
      adaptive_row(f.widen(in, sh, r), f.out(sh->n), sh->n, inv_theta, b, H);
      f.narrow(out, sh, r);
      if (beta) beta[r] = b;
      if (entropy) entropy[r] = H;
    });
    return SA_OK;
  }
  by_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    for_rows(sh->rows, sh->n, [&](std::int64_t r) {
      float b, H;
      adaptive_row(row_in<T>(in, sh, r), row_out<T>(out, sh, r), sh->n, inv_theta, b, H);
      if (beta) beta[r] = b;
      if (entropy) entropy[r] = H;
    });
  });
  return SA_OK;
}

sa_status k_merge_entropy(void*, std::int64_t count, const sa_entropy_state* a,
                          const sa_entropy_state* b, sa_entropy_state* out) {
  g_error.clear();
  if (count < 0)
    return fail(SA_INVALID_ARGUMENT,
                "merge_entropy_states: count = " + std::to_string(count) + ", expected >= 0");
  if (count > 0 && (!a || !b || !out))
    return fail(SA_INVALID_ARGUMENT, "merge_entropy_states: a, b and out must not be NULL");
  for_rows(count, 1 << 6, [&](std::int64_t i) {
    // In double, rounded once per field (theory.md T6 merge, special values in
    // theory/streamed_entropy.hpp).
    const theory::EntropyState<double> x{a[i].m, a[i].S, a[i].T}, y{b[i].m, b[i].S, b[i].T};
    const auto z = theory::entropy_merge(x, y);
    out[i] = {static_cast<float>(z.m), static_cast<float>(z.S), static_cast<float>(z.T)};
  });
  return SA_OK;
}

// Attention and the split-KV merge live in kernels/cpu/attention.cpp; their
// error text is copied into this kernel's last_error.
sa_status forward_error(sa_status s) {
  if (s != SA_OK) {
    const char* e = cpu_attention_last_error();
    g_error = e ? e : "attention: failed without a message";
  }
  return s;
}

sa_status k_attention(void* ctx, const sa_attention_args* args) {
  g_error.clear();
  return forward_error(cpu_attention(ctx, args));
}

sa_status k_merge_attention(void* ctx, std::int64_t rows, std::int64_t dv, const float* o_a,
                            const float* lse_a, const float* o_b, const float* lse_b, float* out,
                            float* out_lse) {
  g_error.clear();
  return forward_error(
      merge_attention_partials(ctx, rows, dv, o_a, lse_a, o_b, lse_b, out, out_lse));
}

sa_status k_attention_v2(void* ctx, const sa_attention_v2_args* args) {
  g_error.clear();
  const sa_status s = cpu_attention_v2(ctx, args);
  if (s != SA_OK) {
    const char* e = cpu_attention_v2_last_error();
    g_error = e ? e : "attention_v2: failed without a message";
  }
  return s;
}

sa_status k_merge_n(void* ctx, std::int64_t parts, std::int64_t rows, std::int64_t dv,
                    const float* const* o, const float* const* lse, float* out, float* out_lse) {
  g_error.clear();
  const sa_status s = cpu_merge_attention_states_n(ctx, parts, rows, dv, o, lse, out, out_lse);
  if (s != SA_OK) {
    const char* e = cpu_merge_n_last_error();
    g_error = e ? e : "merge_attention_states_n: failed without a message";
  }
  return s;
}
// The backward operations live in kernels/cpu/backward.cpp.
sa_status backward_error(sa_status s) {
  if (s != SA_OK) {
    const char* e = cpu_backward_last_error();
    g_error = e ? e : "backward: failed without a message";
  }
  return s;
}
sa_status k_softmax_backward(void* ctx, sa_dtype t, const sa_rows* s, const void* y, const void* dy,
                             void* dx) {
  g_error.clear();
  return backward_error(cpu_softmax_backward(ctx, t, s, y, dy, dx));
}
sa_status k_log_softmax_backward(void* ctx, sa_dtype t, const sa_rows* s, const void* y,
                                 const void* dy, void* dx) {
  g_error.clear();
  return backward_error(cpu_log_softmax_backward(ctx, t, s, y, dy, dx));
}
sa_status k_attention_backward(void* ctx, const sa_attention_backward_args* args) {
  g_error.clear();
  return backward_error(cpu_attention_backward(ctx, args));
}

const char* k_last_error(void*) { return g_error.empty() ? nullptr : g_error.c_str(); }

sa_kernel make_kernel() {
  sa_kernel k{};
  k.abi_version = SA_KERNEL_ABI_VERSION;
  k.struct_size = sizeof(sa_kernel);
  k.name = "cpu";
  k.description =
      "production CPU kernel: Highway SIMD with runtime dispatch, rows in parallel (OpenMP), "
      "float32, bfloat16 and float16 rows (float32 arithmetic, double sums; attention: float32 "
      "and bfloat16), two-float x - max, "
      "one-pass streamed entropy (theory T6), tiled flash-style attention with split-KV";
  k.ops = SA_OP_SOFTMAX | SA_OP_LOG_SOFTMAX | SA_OP_LOGSUMEXP | SA_OP_ENTROPY |
          SA_OP_ADAPTIVE_SOFTMAX | SA_OP_ATTENTION | SA_OP_MERGE_ENTROPY_STATES |
          SA_OP_MERGE_ATTENTION_STATES | SA_OP_ATTENTION_V2 | SA_OP_MERGE_ATTENTION_STATES_N |
          SA_OP_SOFTMAX_BACKWARD | SA_OP_LOG_SOFTMAX_BACKWARD | SA_OP_ATTENTION_BACKWARD;
  k.dtypes = SA_DTYPE_F32 | SA_DTYPE_BF16 | SA_DTYPE_F16;
  k.memory = SA_MEMORY_HOST;
  k.adaptive_entropy = SA_ENTROPY_SHANNON;
  k.ctx = nullptr;
  k.softmax = k_softmax;
  k.log_softmax = k_log_softmax;
  k.logsumexp = k_logsumexp;
  k.entropy = k_entropy;
  k.adaptive_softmax = k_adaptive;
  k.attention = k_attention;
  k.merge_entropy_states = k_merge_entropy;
  k.merge_attention_states = k_merge_attention;
  k.last_error = k_last_error;
  k.capabilities = cpu_capabilities_with_backward();
  k.attention_v2 = k_attention_v2;
  k.merge_attention_states_n = k_merge_n;
  k.softmax_backward = k_softmax_backward;
  k.log_softmax_backward = k_log_softmax_backward;
  k.attention_backward = k_attention_backward;
  return k;
}

}  // namespace

const sa_kernel* cpu_kernel() {
  cpu::apply_cpu_isa_limit();  // SA_CPU_MAX_ISA, before the first vector call
  static const sa_kernel k = make_kernel();
  return &k;
}

}  // namespace sa::kernels
