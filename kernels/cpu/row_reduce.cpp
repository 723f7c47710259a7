// Row reductions of the CPU kernel: max, (min, max) range, and the one-pass
// streamed states (online normaliser (m, S), entropy state (m, S, T)).
// Compiled once per instruction set by foreach_target.h; the exported
// wrappers at the bottom pick the best one at run time.
#include "kernels/cpu/row_ops.hpp"
#include "kernels/cpu/isa_limit.hpp"

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/row_reduce.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/vec_types-inl.h"
#include "kernels/cpu/vec_load_store-inl.h"
#include "kernels/cpu/vec_exp-inl.h"
#include "theory/streamed_entropy.hpp"

HWY_BEFORE_NAMESPACE();
namespace sa::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---------------------------------------------------------------- max
template <class T>
float RowMax(const T* x, std::int64_t n) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  VF m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  for (; i + 4 * N <= len; i += 4 * N) {
    VF a, b, c, e;
    LoadF2Unordered(d, x + i, a, b);
    LoadF2Unordered(d, x + i + 2 * N, c, e);
    m0 = hn::Max(m0, a);
    m1 = hn::Max(m1, b);
    m2 = hn::Max(m2, c);
    m3 = hn::Max(m3, e);
  }
  for (; i + N <= len; i += N) m0 = hn::Max(m0, LoadF(d, x + i));
  if (i < len) {
    Tail<T> t(x + i, len - i);
    m1 = hn::Max(m1, LoadF(d, t.in));
  }
  const VF m = hn::Max(hn::Max(m0, m1), hn::Max(m2, m3));
  return hn::GetLane(hn::MaxOfLanes(d, m));
}

// Largest and smallest element (raw) in one pass. NaN: unspecified results
// (callers detect NaN rows through the sums).
template <class T>
void RowRange(const T* x, std::int64_t n, float* lo, float* hi) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const VF pinf = hn::Set(d, std::numeric_limits<float>::infinity());
  // Four independent (max, min) chains: the latency of max/min, not the
  // loads, bounds a two-chain loop.
  VF m0 = ninf, m1 = ninf, l0 = pinf, l1 = pinf;
  VF m2 = ninf, m3 = ninf, l2 = pinf, l3 = pinf;
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  for (; i + 4 * N <= len; i += 4 * N) {
    VF a, b, c, e;
    LoadF2Unordered(d, x + i, a, b);
    LoadF2Unordered(d, x + i + 2 * N, c, e);
    m0 = hn::Max(m0, a);
    m1 = hn::Max(m1, b);
    m2 = hn::Max(m2, c);
    m3 = hn::Max(m3, e);
    l0 = hn::Min(l0, a);
    l1 = hn::Min(l1, b);
    l2 = hn::Min(l2, c);
    l3 = hn::Min(l3, e);
  }
  m0 = hn::Max(m0, m2);
  m1 = hn::Max(m1, m3);
  l0 = hn::Min(l0, l2);
  l1 = hn::Min(l1, l3);
  for (; i + 2 * N <= len; i += 2 * N) {
    VF a, b;
    LoadF2Unordered(d, x + i, a, b);
    m0 = hn::Max(m0, a);
    m1 = hn::Max(m1, b);
    l0 = hn::Min(l0, a);
    l1 = hn::Min(l1, b);
  }
  for (; i + N <= len; i += N) {
    const VF a = LoadF(d, x + i);
    m0 = hn::Max(m0, a);
    l0 = hn::Min(l0, a);
  }
  float h = hn::GetLane(hn::MaxOfLanes(d, hn::Max(m0, m1)));
  float l = hn::GetLane(hn::MinOfLanes(d, hn::Min(l0, l1)));
  for (; i < len; ++i) {
    const float v = scalar_of(x[i]);
    h = std::max(h, v);
    l = std::min(l, v);
  }
  *hi = h;
  *lo = l;
}

// ---------------------------------------------------------------- streamed states
// Lanes keep (m, S, T) and rescale only when a logit exceeds their max.
// kT = false is the online normaliser (m, S) alone. The lanes' m start at the
// max of the first <= 2048 logits (a cache-resident pre-scan), so rows whose
// maximum comes early rescale rarely; the pass over the row is still the one
// streamed (m, S, T) pass of theory.md T6, and any seed gives the same state.
template <bool kT, class T>
RowState Stream(const T* x, std::int64_t n, const Scale& scale) {
  constexpr bool kAcc = std::is_same_v<T, float>;
  const DF d;
  const DD dd;
  const std::size_t N = hn::Lanes(d);
  const ScaleV s = ScaleVOf(d, scale);
  const ExpTab tab = LoadExpTab(d);
  float seed = RowMax(x, std::min<std::int64_t>(n, 2048));
  if (seed == std::numeric_limits<float>::infinity()) return RowState{};  // special row
  // -inf / NaN prefix: start from the lowest finite value (m - m never NaN;
  // -inf logits fall below it; NaN shows up in S).
  if (!(seed > -FLT_MAX)) seed = -FLT_MAX;
  VF m = hn::Set(d, seed);
  // The row minimum rides along (one Min per vector): the caller's second
  // pass then knows the row's range (row_ops.hpp: no per-lane checks).
  VF mn_lo = hn::Set(d, std::numeric_limits<float>::infinity());
  // Two sets of accumulators (A: even vectors, B: odd ones) for ILP. S is
  // summed in double; T's terms (all <= 0) go to float lanes for at most
  // kBlock vectors (relative error <= kBlock u) and are then flushed to double.
  VD S0 = hn::Zero(dd), S1 = hn::Zero(dd), T0 = hn::Zero(dd), T1 = hn::Zero(dd);
  VD S2 = hn::Zero(dd), S3 = hn::Zero(dd), T2 = hn::Zero(dd), T3 = hn::Zero(dd);
  VF Tf = hn::Zero(d), Tg = hn::Zero(d);
  constexpr int kBlock = 8;
  int pending = 0;
  auto flush = [&]() SA_VEC_LAMBDA {
    if constexpr (kT) {
      AccD(T0, T1, Tf);
      AccD(T2, T3, Tg);
      Tf = hn::Zero(d);
      Tg = hn::Zero(d);
      pending = 0;
    }
  };
  auto rescale = [&](VF mn) HWY_ATTR {
    flush();
    VF al, p1, one;
    VF ah = Diff<kAcc>(d, m, mn, s, al);
    // a = exp((m - mn) s), 0 for a lane that was empty; in double as
    // e + (one + p1) where exactly one of the two parts is nonzero.
    const VF a = ExpMasked<kAcc>(d, ah, al, &p1, &one);
    const VF ar = hn::IfThenZeroElse(hn::Eq(one, hn::Set(d, 1.0f)), a);
    const VD aL = hn::Add(PromLo(ar), hn::Add(PromLo(one), PromLo(p1)));
    const VD aH = hn::Add(PromHi(ar), hn::Add(PromHi(one), PromHi(p1)));
    if constexpr (kT) {  // T' = a (T + (m - mn) s S)
      const VD dL = PromLo(ah), dH = PromHi(ah);
      T0 = hn::Mul(aL, hn::MulAdd(dL, S0, T0));
      T1 = hn::Mul(aH, hn::MulAdd(dH, S1, T1));
      T2 = hn::Mul(aL, hn::MulAdd(dL, S2, T2));
      T3 = hn::Mul(aH, hn::MulAdd(dH, S3, T3));
    }
    S0 = hn::Mul(S0, aL);
    S1 = hn::Mul(S1, aH);
    S2 = hn::Mul(S2, aL);
    S3 = hn::Mul(S3, aH);
    m = mn;
  };
  auto accum = [&](VF v, VD& Sa, VD& Sb, VF& Tl) SA_VEC_LAMBDA {
    VF el;
    const VF eh = Diff<kAcc>(d, v, m, s, el);
    const VF e = ExpLive<kAcc>(d, tab, eh, el);
    AccD(Sa, Sb, e);
    if constexpr (kT) Tl = hn::MulAdd(e, hn::Max(eh, hn::Set(d, -104.0f)), Tl);
  };
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  for (; i + 2 * N <= len; i += 2 * N) {
    const VF v0 = LoadF(d, x + i), v1 = LoadF(d, x + i + N);
    const VF vm = hn::Max(v0, v1);
    mn_lo = hn::Min(mn_lo, hn::Min(v0, v1));
    if (HWY_UNLIKELY(!hn::AllFalse(d, hn::Gt(vm, m)))) rescale(hn::Max(m, vm));
    accum(v0, S0, S1, Tf);
    accum(v1, S2, S3, Tg);
    if (kT && ++pending == kBlock) flush();
  }
  auto step = [&](VF v) HWY_ATTR {
    if (HWY_UNLIKELY(!hn::AllFalse(d, hn::Gt(v, m)))) rescale(hn::Max(m, v));
    accum(v, S0, S1, Tf);
  };
  for (; i + N <= len; i += N) {
    const VF v = LoadF(d, x + i);
    mn_lo = hn::Min(mn_lo, v);
    step(v);
  }
  float tail_lo = std::numeric_limits<float>::infinity();
  if (i < len) {
    Tail<T> t(x + i, len - i);
    step(LoadF(d, t.in));  // -inf padding: weight 0, and not part of the minimum
    for (std::size_t j = i; j < len; ++j) tail_lo = std::min(tail_lo, scalar_of(x[j]));
  }
  flush();
  S0 = hn::Add(S0, S2);
  S1 = hn::Add(S1, S3);
  T0 = hn::Add(T0, T2);
  T1 = hn::Add(T1, T3);
  // Merge the lanes' states (theory.md T6) in double; empty lanes are the identity.
  alignas(64) float ml[kMaxLanes];
  alignas(64) double sl[kMaxLanes], tl[kMaxLanes];
  hn::Store(m, d, ml);
  const std::size_t H = hn::Lanes(dd);
  hn::Store(S0, dd, sl);
  hn::Store(S1, dd, sl + H);
  hn::Store(T0, dd, tl);
  hn::Store(T1, dd, tl + H);
  theory::EntropyState<double> acc = theory::entropy_identity<double>();
  float mraw = -std::numeric_limits<float>::infinity();
  for (std::size_t j = 0; j < N; ++j) {
    if (std::isnan(sl[j]) || std::isnan(tl[j])) return RowState{};
    if (!(sl[j] > 0)) continue;
    mraw = std::max(mraw, ml[j]);
  }
  if (!(mraw > -std::numeric_limits<float>::infinity()) || !std::isfinite(mraw)) return RowState{};
  for (std::size_t j = 0; j < N; ++j) {
    if (!(sl[j] > 0)) continue;
    // Lane state relative to the row max: shift by (m_j - M) s, computed in double.
    const double dm = (static_cast<double>(ml[j]) - static_cast<double>(mraw)) * scale.s;
    acc = theory::entropy_merge(acc, theory::EntropyState<double>{dm, sl[j], tl[j]});
  }
  // acc.m == 0 now (the row max's own lane); S and T are relative to mraw
  // (and carry the 2^32 of the biased exps: removed exactly here).
  RowState r;
  r.m = mraw;
  r.S = acc.S * kTwoM32;
  r.T = acc.T * kTwoM32;
  r.ok = std::isfinite(r.S) && r.S > 0 && std::isfinite(r.T);
  r.lo = std::min(hn::GetLane(hn::MinOfLanes(d, mn_lo)), tail_lo);
  return r;
}
// ---------------------------------------------------------------- exported (per target)
float RowMaxF32(const float* x, std::int64_t n) { return RowMax(x, n); }
float RowMaxBF16(const std::uint16_t* x, std::int64_t n) { return RowMax(x, n); }
RowState NormF32(const float* x, std::int64_t n, const Scale& s) { return Stream<false>(x, n, s); }
RowState NormBF16(const std::uint16_t* x, std::int64_t n, const Scale& s) {
  return Stream<false>(x, n, s);
}
RowState EntF32(const float* x, std::int64_t n, const Scale& s) { return Stream<true>(x, n, s); }
RowState EntBF16(const std::uint16_t* x, std::int64_t n, const Scale& s) {
  return Stream<true>(x, n, s);
}
void RangeF32(const float* x, std::int64_t n, float* lo, float* hi) { RowRange(x, n, lo, hi); }
void RangeBF16(const std::uint16_t* x, std::int64_t n, float* lo, float* hi) {
  RowRange(x, n, lo, hi);
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace sa::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sa::kernels::cpu {

HWY_EXPORT(RowMaxF32);
HWY_EXPORT(RowMaxBF16);
HWY_EXPORT(NormF32);
HWY_EXPORT(NormBF16);
HWY_EXPORT(EntF32);
HWY_EXPORT(EntBF16);
HWY_EXPORT(RangeF32);
HWY_EXPORT(RangeBF16);
HWY_EXPORT(TargetName);

Scale Scale::of(double s) {
  Scale r;
  r.s = s;
  r.hi = static_cast<float>(s);
  r.lo = static_cast<float>(s - static_cast<double>(r.hi));
  r.unit = (s == 1.0);
  return r;
}

namespace detail {
std::atomic<bool> checked_forms_only{false};
}
void set_checked_forms_only(bool on) {
  detail::checked_forms_only.store(on, std::memory_order_relaxed);
}

bool row_weights_normal(float lo, float m, double s, double S) {
  // log S < e ln 2 for S < 2^e (frexp), so the test below is the stated one
  // or stricter (a row within ln 2 of the margin takes the checked path);
  // no log on the way of every row.
  if (!(S > 0) || !std::isfinite(S)) return false;
  int e = 0;
  std::frexp(S, &e);
  const double t = (static_cast<double>(lo) - static_cast<double>(m)) * s -
                   static_cast<double>(e) * 0.6931471805599453;
  return t >= -86.0;  // false for NaN and -inf
}

float row_max_f32(const float* x, std::int64_t n) { return HWY_DYNAMIC_DISPATCH(RowMaxF32)(x, n); }
float row_max_bf16(const std::uint16_t* x, std::int64_t n) {
  return HWY_DYNAMIC_DISPATCH(RowMaxBF16)(x, n);
}
RowState row_normaliser_f32(const float* x, std::int64_t n, const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(NormF32)(x, n, s);
}
RowState row_normaliser_bf16(const std::uint16_t* x, std::int64_t n, const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(NormBF16)(x, n, s);
}
RowState row_entropy_f32(const float* x, std::int64_t n, const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(EntF32)(x, n, s);
}
RowState row_entropy_bf16(const std::uint16_t* x, std::int64_t n, const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(EntBF16)(x, n, s);
}
void row_range_f32(const float* x, std::int64_t n, float* lo, float* hi) {
  HWY_DYNAMIC_DISPATCH(RangeF32)(x, n, lo, hi);
}
void row_range_bf16(const std::uint16_t* x, std::int64_t n, float* lo, float* hi) {
  HWY_DYNAMIC_DISPATCH(RangeBF16)(x, n, lo, hi);
}
const char* dispatch_target() {
  apply_cpu_isa_limit();
  return HWY_DYNAMIC_DISPATCH(TargetName)();
}

}  // namespace sa::kernels::cpu
#endif  // HWY_ONCE
