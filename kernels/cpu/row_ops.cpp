// Highway implementation of the single-row building blocks (row_ops.hpp).
// Compiled once per instruction set by foreach_target.h; the exported
// wrappers at the bottom pick the best one at run time.
#include "kernels/cpu/row_ops.hpp"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/row_ops.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "theory/streamed_entropy.hpp"

HWY_BEFORE_NAMESPACE();
namespace sa::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
#if HWY_TARGET == HWY_SCALAR
using DD = hn::Rebind<double, DF>;  // one lane: no halves
#else
using DH = hn::Half<DF>;
using DD = hn::Rebind<double, DH>;
#endif
using VD = hn::Vec<DD>;
using MF = hn::Mask<DF>;

// Lambdas in the per-vector loops are forced inline: GCC otherwise emits
// them out of line (one call per vector, constants reloaded each time), which
// cost ~40% of the exp passes' time.
#define SA_VEC_LAMBDA HWY_ATTR __attribute__((always_inline))

constexpr std::size_t kMaxLanes =
    HWY_MAX_BYTES / sizeof(float) < 2 ? 2 : HWY_MAX_BYTES / sizeof(float);

// ---------------------------------------------------------------- load/store
// bfloat16 -> float32 is exact (a shift); float32 -> bfloat16 rounds to
// nearest even (NaN never reaches a store: NaN rows take the special path).
HWY_INLINE VF LoadF(DF d, const float* p) { return hn::LoadU(d, p); }
HWY_INLINE VF LoadF(DF d, const std::uint16_t* p) {
  const hn::RebindToUnsigned<DF> du32;
  const hn::Rebind<std::uint16_t, DF> du16;
  return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}
HWY_INLINE void StoreF(DF d, VF v, float* p) { hn::StoreU(v, d, p); }
HWY_INLINE void StoreF(DF, VF v, std::uint16_t* p) {
  const hn::RebindToUnsigned<DF> du32;
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<std::uint16_t, DF> du16;
  const auto u = hn::BitCast(du32, v);
  const auto bias =
      hn::Add(hn::Set(du32, 0x7fffu), hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 1u)));
  const auto r = hn::ShiftRight<16>(hn::Add(u, bias));
  hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, r)), du16, p);
}
// Two vectors at once (2N values): round to nearest even by adding
// 0x7fff + (bit 16) without shifts, then keep the high halves in order
// (ConcatOdd). Values are finite (NaN rows never reach a store).
HWY_INLINE void StoreF2(DF d, VF v0, VF v1, float* p) {
  StoreF(d, v0, p);
  StoreF(d, v1, p + hn::Lanes(d));
}
HWY_INLINE void StoreF2(DF d, VF v0, VF v1, std::uint16_t* p) {
#if HWY_TARGET == HWY_SCALAR
  StoreF(d, v0, p);
  StoreF(d, v1, p + 1);
#else
  const hn::RebindToUnsigned<DF> du32;
  const hn::Repartition<std::uint16_t, DF> du16;
  const auto bit = hn::Set(du32, 0x10000u);
  auto round = [&](VF v) SA_VEC_LAMBDA {
    const auto u = hn::BitCast(du32, v);
    const auto bias =
        hn::IfThenElse(hn::TestBit(u, bit), hn::Set(du32, 0x8000u), hn::Set(du32, 0x7fffu));
    return hn::BitCast(du16, hn::Add(u, bias));
  };
  hn::StoreU(hn::ConcatOdd(du16, round(v1), round(v0)), du16, p);
#endif
}
// 2N values as two float vectors, for order-free reductions (max, sums):
// bfloat16 values are widened by interleaving with zeros (a shuffle, no
// shift), which permutes them within 128-bit blocks.
HWY_INLINE void LoadF2Unordered(DF d, const float* p, VF& a, VF& b) {
  a = hn::LoadU(d, p);
  b = hn::LoadU(d, p + hn::Lanes(d));
}
HWY_INLINE void LoadF2Unordered(DF d, const std::uint16_t* p, VF& a, VF& b) {
#if HWY_TARGET == HWY_SCALAR
  a = LoadF(d, p);
  b = LoadF(d, p + 1);
#else
  const hn::Repartition<std::uint16_t, DF> du16;
  const auto v = hn::LoadU(du16, p);
  const auto z = hn::Zero(du16);
  a = hn::BitCast(d, hn::InterleaveLower(du16, z, v));
  b = hn::BitCast(d, hn::InterleaveUpper(du16, z, v));
#endif
}
inline float scalar_of(float v) { return v; }
inline float scalar_of(std::uint16_t v) {
  const std::uint32_t u = static_cast<std::uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
template <class T>
inline T neg_inf_of() {
  if constexpr (std::is_same_v<T, float>)
    return -std::numeric_limits<float>::infinity();
  else
    return static_cast<std::uint16_t>(0xFF80u);
}

// A vector's worth of the row's tail, padded with -inf (a masked logit: it
// contributes weight 0 to every pass), so tails use the same arithmetic.
template <class T>
struct Tail {
  alignas(64) T in[kMaxLanes];
  alignas(64) T out[kMaxLanes];
  std::size_t count;
  Tail(const T* x, std::size_t c) : count(c) {
    for (std::size_t j = 0; j < kMaxLanes; ++j) in[j] = j < c ? x[j] : neg_inf_of<T>();
  }
  void flush(T* y) const { std::memcpy(y, out, count * sizeof(T)); }
};

// ---------------------------------------------------------------- doubles
// The float lanes split into two double vectors (lower, upper half).
#if HWY_TARGET == HWY_SCALAR
HWY_INLINE VD PromLo(VF v) { return hn::PromoteTo(DD(), v); }
HWY_INLINE VD PromHi(VF) { return hn::Zero(DD()); }
HWY_INLINE VF Demote2(VD /*hi*/, VD lo) { return hn::DemoteTo(DF(), lo); }
#else
HWY_INLINE VD PromLo(VF v) { return hn::PromoteTo(DD(), hn::LowerHalf(DH(), v)); }
HWY_INLINE VD PromHi(VF v) { return hn::PromoteTo(DD(), hn::UpperHalf(DH(), v)); }
HWY_INLINE VF Demote2(VD hi, VD lo) {
  return hn::Combine(DF(), hn::DemoteTo(DH(), hi), hn::DemoteTo(DH(), lo));
}
#endif
HWY_INLINE void AccD(VD& a0, VD& a1, VF v) {
  a0 = hn::Add(a0, PromLo(v));
  a1 = hn::Add(a1, PromHi(v));
}
HWY_INLINE double SumD(VD a) {
  const DD dd;
  return hn::GetLane(hn::SumOfLanes(dd, a));
}

// ---------------------------------------------------------------- scaled difference
struct ScaleV {
  VF hi, lo;
  bool unit;
};
HWY_INLINE ScaleV ScaleVOf(DF d, const Scale& s) {
  return {hn::Set(d, s.hi), hn::Set(d, s.lo), s.unit};
}

// (x - m) * s as an unevaluated sum dh + dl. kAcc: x - m is split exactly
// (TwoSum, Knuth) and the product keeps its rounding error (FMA), so dh + dl
// is within ~2^-47 relative of the exact value. Without kAcc (bfloat16, whose
// 8-bit inputs subtract exactly in float unless their exponents differ by
// more than 16) dl = 0 and the product is rounded once.
template <bool kAcc>
HWY_INLINE VF Diff(DF d, VF x, VF m, const ScaleV& s, VF& dl) {
  VF hi = hn::Sub(x, m);
  VF lo = hn::Zero(d);
  if constexpr (kAcc) {
    const VF bb = hn::Sub(hi, x);  // ~ -m
    lo = hn::Sub(hn::Sub(x, hn::Sub(hi, bb)), hn::Add(m, bb));
  }
  if (!s.unit) {
    const VF ph = hn::Mul(hi, s.hi);
    if constexpr (kAcc) {
      const VF pl = hn::MulSub(hi, s.hi, ph);  // exact error of hi*s.hi
      lo = hn::Add(pl, hn::MulAdd(lo, s.hi, hn::Mul(hi, s.lo)));
    }
    hi = ph;
  }
  dl = lo;
  return hi;
}

// r = dh - k ln2 by Cody-Waite with two constants (ln2_hi has 16 bits, so
// k ln2_hi is exact for |k| < 2^8) and FMA.
HWY_INLINE VF ReduceCW(DF d, VF k, VF dh) {
  const VF r = hn::NegMulAdd(k, hn::Set(d, 0.693145751953125f), dh);
  return hn::NegMulAdd(k, hn::Set(d, 1.428606765330187e-06f), r);
}
// exp(r) - 1 = r + r^2 q(r), q the Taylor polynomial to degree 7 of exp
// (truncation < 0.07 ulp on |r| <= ln2/2); q's rounding errors are damped by r^2.
HWY_INLINE VF ExpM1Taylor7(DF d, VF r) {
  VF q = hn::Set(d, 1.0f / 5040.0f);
  q = hn::MulAdd(q, r, hn::Set(d, 1.0f / 720.0f));
  q = hn::MulAdd(q, r, hn::Set(d, 1.0f / 120.0f));
  q = hn::MulAdd(q, r, hn::Set(d, 1.0f / 24.0f));
  q = hn::MulAdd(q, r, hn::Set(d, 1.0f / 6.0f));
  q = hn::MulAdd(q, r, hn::Set(d, 0.5f));
  return hn::MulAdd(q, hn::Mul(r, r), r);
}

// exp(dh + dl) for dh <= ~0 (every caller subtracts a maximum).
// - dh < -104 (incl. -inf): exactly 0 (exp(-104) < 2^-150, below half the
//   smallest subnormal); dh and dl are zeroed there for the caller.
// - NaN propagates.
// Reduction k = round(dh log2 e), r = dh - k ln2 (Cody-Waite, two constants,
// FMA) + dl; exp(r) = 1 + (r + r^2 q(r)), q the Taylor polynomial to degree 7
// (truncation < 0.07 ulp on |r| <= ln2/2); scaling by 2^k is exact for normal
// results, and rounds once (two-step scaling) for subnormal ones.
// With `p1` given: p1 = exp(dh + dl) - 1 (unrounded by the final 1 + ...)
// in lanes where no power-of-two scaling applies (|dh| < ~ln2/2, not dead),
// else 0; such lanes return 0 in `one` = 1 otherwise. The streamed states use
// (one + p1) in double so many tiny rescales do not accumulate 2^-24 each.
//
// kBias: the result is exp(dh + dl) * 2^kBias. The sums and stored exps use
// kBias = kExpBias (below), which keeps every live value in float's normal
// range (no subnormal microcode assists on x86).
template <bool kAcc, int kBias = 0>
HWY_INLINE VF ExpMasked(DF d, VF& dh, VF& dl, VF* p1 = nullptr, VF* one = nullptr) {
  const MF dead = hn::Lt(dh, hn::Set(d, -104.0f));
  dh = hn::IfThenZeroElse(dead, dh);  // dl may be NaN there (TwoSum of -inf): e is zeroed below
  // k = round(dh log2 e) by the 1.5 * 2^23 shifter: kf's low mantissa bits
  // hold k in two's complement, so (bits(kf) << 23) is k << 23 exactly.
  const VF shifter = hn::Set(d, 12582912.0f);
  const VF kf = hn::MulAdd(dh, hn::Set(d, 1.44269504088896341f), shifter);
  const VF k = hn::Sub(kf, shifter);
  VF r = ReduceCW(d, k, dh);
  if constexpr (kAcc) r = hn::Add(r, dl);
  const VF p = ExpM1Taylor7(d, r);
  VF e = hn::Add(p, hn::Set(d, 1.0f));
  if (p1) {
    const MF small = hn::AndNot(dead, hn::Eq(k, hn::Zero(d)));
    *p1 = hn::IfThenElseZero(small, p);
    *one = hn::IfThenElseZero(small, hn::Set(d, 1.0f));
  }
  const hn::RebindToSigned<DF> di;
  if (HWY_LIKELY(hn::AllTrue(d, hn::Ge(k, hn::Set(d, -125.0f - kBias))))) {
    const auto kb = hn::Add(hn::BitCast(di, kf), hn::Set(di, kBias));
    e = hn::BitCast(d, hn::Add(hn::BitCast(di, e), hn::ShiftLeft<23>(kb)));
  } else {  // subnormal results or NaN: scale by 2^k1 (exact) then 2^k2 (one rounding)
    const auto ki = hn::Add(hn::ConvertTo(di, hn::Max(k, hn::Set(d, -160.0f))), hn::Set(di, kBias));
    const auto k1 = hn::ShiftRight<1>(ki);
    const auto k2 = hn::Sub(ki, k1);
    const auto bias = hn::Set(di, 127);
    e = hn::Mul(hn::Mul(e, hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(k1, bias)))),
                hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(k2, bias))));
    // NaN lanes: k may have become -160 above; e is NaN and stays NaN.
  }
  return hn::IfThenZeroElse(dead, e);
}

// Stored exps and the sums are exp(d) * 2^32: for live lanes (d >= -104)
// that is >= 2^-118, a normal float; results come back down through
// ScaleDown (exact, integer rounding for subnormal weights).
constexpr int kExpBias = 32;
constexpr double kTwoM32 = 2.3283064365386962890625e-10;  // 2^-32

// bfloat16 rows: exp(r) ~ 1 + r q(r), q of degree 5 interpolated at the
// Chebyshev nodes of [-ln2/2, ln2/2] (float coefficients; relative error
// 1.05e-8 = 0.18 u of float, measured on a 20001-point grid), Horner: one
// FMA per coefficient. Float32 rows keep the degree-7 Taylor form, whose
// rounding errors are damped by r^2 (the 0.75 ulp claim above).
HWY_INLINE VF PolyQ5(DF d, VF r) {
  VF q = hn::Set(d, 0.00139336416f);
  q = hn::MulAdd(q, r, hn::Set(d, 0.00836914871f));
  q = hn::MulAdd(q, r, hn::Set(d, 0.0416664667f));
  q = hn::MulAdd(q, r, hn::Set(d, 0.166665047f));
  q = hn::MulAdd(q, r, hn::Set(d, 0.5f));
  return hn::MulAdd(q, r, hn::Set(d, 1.0f));
}
// bfloat16 rows: r = dh - k ln2 with ln2 rounded to float (one FMA): the
// reduction error k |ln2_f - ln2| <= 151 * 1.9e-9 = 2.9e-7 is an absolute
// error in r, i.e. relative in the result, and only for the tiniest results
// (|k| >= 120 means weights below e^-83); for k <= 30 it is under 0.9 u.
// Far below bf16's half-ulp 2^-9 in every case.
HWY_INLINE VF ReduceBF16(DF d, VF k, VF dh) {
  return hn::NegMulAdd(k, hn::Set(d, 0.693147182464599609375f), dh);
}

// exp(dh + dl) * 2^kBias without a branch, for the streaming passes' sums and
// stores (kBias = kExpBias, so every result is a normal float):
// - dh < -104 (incl. -inf): exactly 0 (exp(-104) < 2^-150, below half the
//   smallest subnormal), evaluated at dh = -104, dl = 0 to keep the lane
//   finite. Exact zeros matter: a lane that saw only masked logits must stay
//   empty (S = 0), and a single live logit must give H = 0 exactly.
// - NaN propagates (the comparison is false for NaN; dh stays NaN).
// Same reduction and polynomial as ExpMasked (faithful + 0.07 ulp) for float32
// rows, PolyQ5 for bfloat16; k >= -151 so k + 32 >= -119: the scaling never
// leaves the normal range.
template <bool kAcc>
HWY_INLINE VF ExpLive(DF d, VF dh, VF dl) {
  static_assert(kExpBias >= 32);
  const MF dead = hn::Lt(dh, hn::Set(d, -104.0f));
  dh = hn::IfThenElse(dead, hn::Set(d, -104.0f), dh);
  const VF shifter = hn::Set(d, 12582912.0f);
  const VF kf = hn::MulAdd(dh, hn::Set(d, 1.44269504088896341f), shifter);
  const VF k = hn::Sub(kf, shifter);
  VF e;
  if constexpr (kAcc) {
    const VF r = hn::Add(ReduceCW(d, k, dh), hn::IfThenZeroElse(dead, dl));
    e = hn::Add(ExpM1Taylor7(d, r), hn::Set(d, 1.0f));
  } else {
    (void)dl;
    const VF r = ReduceBF16(d, k, dh);
    e = hn::MulAdd(PolyQ5(d, r), r, hn::Set(d, 1.0f));
  }
  // 2^(k + bias) as a float (exponent field k + bias + 127 in [8, 160]), and
  // a float multiply (exact: the product is normal) so NaN stays NaN.
  const hn::RebindToSigned<DF> di;
  const auto kb = hn::Add(hn::BitCast(di, kf), hn::Set(di, kExpBias + 127));
  const VF out = hn::Mul(e, hn::BitCast(d, hn::ShiftLeft<23>(kb)));
  return hn::IfThenZeroElse(dead, out);
}

// p = q * 2^-96 rounded to nearest even, q >= 0 a normal float or 0, without
// ever forming a subnormal in floating point: results below 2^-126 are built
// from q's significand by an integer shift with round-to-nearest-even.
HWY_INLINE VF ScaleDown96(DF d, VF q) {
  const VF kLow = hn::Set(d, 9.313225746154785e-10f);    // 2^-30: q * 2^-96 >= 2^-126
  const VF kDown = hn::Set(d, 1.2621774483536189e-29f);  // 2^-96
  if (HWY_LIKELY(hn::AllTrue(d, hn::Or(hn::Ge(q, kLow), hn::Eq(q, hn::Zero(d))))))
    return hn::Mul(q, kDown);
  const hn::RebindToUnsigned<DF> du;
  const VF normal = hn::Mul(hn::Max(q, kLow), kDown);
  const auto qb = hn::BitCast(du, q);
  const auto E = hn::ShiftRight<23>(qb);
  const auto M = hn::Or(hn::And(qb, hn::Set(du, 0x7FFFFFu)), hn::Set(du, 0x800000u));
  // q * 2^-96 = M * 2^(E - 246) = B * 2^-149 with B = M * 2^(E - 97).
  const auto sh =
      hn::Min(hn::Sub(hn::Set(du, 97u), hn::Min(E, hn::Set(du, 96u))), hn::Set(du, 31u));
  const auto one = hn::Set(du, 1u);
  const auto half = hn::operator<<(one, hn::Sub(sh, one));
  const auto odd = hn::And(hn::operator>>(M, sh), one);
  const auto B = hn::operator>>(hn::Add(M, hn::Add(hn::Sub(half, one), odd)), sh);
  return hn::IfThenElse(hn::Lt(q, kLow), hn::BitCast(d, B), normal);
}

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
  float seed = RowMax(x, std::min<std::int64_t>(n, 2048));
  if (seed == std::numeric_limits<float>::infinity()) return RowState{};  // special row
  // -inf / NaN prefix: start from the lowest finite value (m - m never NaN;
  // -inf logits fall below it; NaN shows up in S).
  if (!(seed > -FLT_MAX)) seed = -FLT_MAX;
  VF m = hn::Set(d, seed);
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
    const VF e = ExpLive<kAcc>(d, eh, el);
    AccD(Sa, Sb, e);
    if constexpr (kT) Tl = hn::MulAdd(e, hn::Max(eh, hn::Set(d, -104.0f)), Tl);
  };
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  for (; i + 2 * N <= len; i += 2 * N) {
    const VF v0 = LoadF(d, x + i), v1 = LoadF(d, x + i + N);
    const VF vm = hn::Max(v0, v1);
    if (HWY_UNLIKELY(!hn::AllFalse(d, hn::Gt(vm, m)))) rescale(hn::Max(m, vm));
    accum(v0, S0, S1, Tf);
    accum(v1, S2, S3, Tg);
    if (kT && ++pending == kBlock) flush();
  }
  auto step = [&](VF v) HWY_ATTR {
    if (HWY_UNLIKELY(!hn::AllFalse(d, hn::Gt(v, m)))) rescale(hn::Max(m, v));
    accum(v, S0, S1, Tf);
  };
  for (; i + N <= len; i += N) step(LoadF(d, x + i));
  if (i < len) {
    Tail<T> t(x + i, len - i);
    step(LoadF(d, t.in));
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
  return r;
}

// ---------------------------------------------------------------- exp passes
// y = exp((x - m) s) (biased); returns the double sum of the stored values
// (and *Tout = sum e (x - m) s when kT). m is the row max, so d <= 0.
// Sums: S in double lanes per vector. bfloat16 rows (no T) first sum blocks of
// 8 values per lane in float (relative error <= 8 u = 2^-21, far below
// bf16's 2^-8). T's terms (all <= 0, one sign) go to float lanes for blocks of
// 8 values per lane (relative error <= 8 u of T, as in Stream) and are then
// flushed to double; T only feeds H (theory.md T6), whose budget is
// 2 u (2.5 + 10 H) and T/S <= H.
template <class T, class U, bool kT = false>
double ExpStore(const T* x, U* y, std::int64_t n, float mf, const Scale& scale, bool store,
                double* Tout = nullptr) {
  constexpr bool kAcc = std::is_same_v<T, float>;
  constexpr bool kFloatS = !kAcc && !kT;
  const DF d;
  const DD dd;
  const std::size_t N = hn::Lanes(d);
  const ScaleV s = ScaleVOf(d, scale);
  const VF m = hn::Set(d, mf);
  VD a0 = hn::Zero(dd), a1 = hn::Zero(dd), a2 = hn::Zero(dd), a3 = hn::Zero(dd);
  VD t0 = hn::Zero(dd), t1 = hn::Zero(dd), t2 = hn::Zero(dd), t3 = hn::Zero(dd);
  // e and the clamped argument of one vector (dead lanes: e = 0 when stored).
  auto ev = [&](VF v, VF& h) SA_VEC_LAMBDA {
    VF l;
    h = Diff<kAcc>(d, v, m, s, l);
    return ExpLive<kAcc>(d, h, l);
  };
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  while (i + 2 * N <= len) {
    VF f0 = hn::Zero(d), f1 = hn::Zero(d), g0 = hn::Zero(d), g1 = hn::Zero(d);
    for (int b = 0; b < 8 && i + 2 * N <= len; ++b, i += 2 * N) {
      VF h0, h1, v0, v1;
      if (store) {  // stored values keep their order
        v0 = LoadF(d, x + i);
        v1 = LoadF(d, x + i + N);
      } else {
        LoadF2Unordered(d, x + i, v0, v1);
      }
      const VF e0 = ev(v0, h0);
      const VF e1 = ev(v1, h1);
      if (store) {
        StoreF(d, e0, y + i);
        StoreF(d, e1, y + i + N);
      }
      if constexpr (kFloatS) {
        f0 = hn::Add(f0, e0);
        f1 = hn::Add(f1, e1);
      } else {
        AccD(a0, a1, e0);
        AccD(a2, a3, e1);
      }
      if constexpr (kT) {  // dead lanes: e = 0 times a finite clamped h
        g0 = hn::MulAdd(e0, hn::Max(h0, hn::Set(d, -104.0f)), g0);
        g1 = hn::MulAdd(e1, hn::Max(h1, hn::Set(d, -104.0f)), g1);
      }
    }
    if constexpr (kFloatS) {
      AccD(a0, a1, f0);
      AccD(a2, a3, f1);
    }
    if constexpr (kT) {
      AccD(t0, t1, g0);
      AccD(t2, t3, g1);
    }
  }
  auto one = [&](VF v, U* out) SA_VEC_LAMBDA {
    VF h;
    const VF e = ev(v, h);
    if (store) StoreF(d, e, out);
    AccD(a0, a1, e);
    if constexpr (kT) AccD(t0, t1, hn::Mul(e, hn::Max(h, hn::Set(d, -104.0f))));
  };
  for (; i + N <= len; i += N) one(LoadF(d, x + i), store ? y + i : nullptr);
  if (i < len) {
    Tail<T> t(x + i, len - i);
    Tail<U> o(nullptr, 0);
    one(LoadF(d, t.in), o.out);
    o.count = len - i;
    if (store) o.flush(y + i);
  }
  if constexpr (kT) *Tout = SumD(hn::Add(hn::Add(t0, t1), hn::Add(t2, t3))) * kTwoM32;
  return SumD(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))) * kTwoM32;
}

// Sum of exp((x - m) s) over the elements different from m, and the number k
// of elements equal to m (each contributes exactly 1): S = k + rest keeps the
// small part exact enough for log1p (log-softmax of a dominant item).
template <class T>
double SumExpRest(const T* x, std::int64_t n, float mf, const Scale& scale, std::int64_t* k) {
  constexpr bool kAcc = std::is_same_v<T, float>;
  const DF d;
  const DD dd;
  const std::size_t N = hn::Lanes(d);
  const ScaleV s = ScaleVOf(d, scale);
  const VF m = hn::Set(d, mf);
  VD a0 = hn::Zero(dd), a1 = hn::Zero(dd);
  std::int64_t count = 0;
  auto one = [&](VF v) SA_VEC_LAMBDA {
    const MF at_max = hn::Eq(v, m);
    count += static_cast<std::int64_t>(hn::CountTrue(d, at_max));
    VF l;
    VF h = Diff<kAcc>(d, v, m, s, l);
    AccD(a0, a1, hn::IfThenZeroElse(at_max, ExpMasked<kAcc, kExpBias>(d, h, l)));
  };
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  for (; i + N <= len; i += N) one(LoadF(d, x + i));
  if (i < len) {
    Tail<T> t(x + i, len - i);
    one(LoadF(d, t.in));
  }
  *k = count;
  return SumD(hn::Add(a0, a1)) * kTwoM32;
}

// p = E * (r_hi + r_lo) for E = exp(d) 2^32: the product is formed as
// E * (r 2^64) (normal range, one rounding, the small product first) and
// brought down by 2^-96 (ScaleDown96: exact, or one integer rounding for
// subnormal weights).
HWY_INLINE VF MulR(VF e, VF rh, VF rl) {
  return ScaleDown96(DF(), hn::MulAdd(e, rh, hn::Mul(e, rl)));
}
constexpr float kTwo64 = 18446744073709551616.0f;  // 2^64

void ScaleF32(float* y, std::int64_t n, float rhf, float rlf) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF rh = hn::Set(d, rhf * kTwo64), rl = hn::Set(d, rlf * kTwo64);
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  for (; i + 2 * N <= len; i += 2 * N) {
    hn::StoreU(MulR(hn::LoadU(d, y + i), rh, rl), d, y + i);
    hn::StoreU(MulR(hn::LoadU(d, y + i + N), rh, rl), d, y + i + N);
  }
  for (; i + N <= len; i += N) hn::StoreU(MulR(hn::LoadU(d, y + i), rh, rl), d, y + i);
  if (i < len) {
    Tail<float> t(y + i, len - i);
    hn::Store(MulR(hn::Load(d, t.in), rh, rl), d, t.out);
    t.flush(y + i);
  }
}

// y (bfloat16) = e * (r_hi + r_lo), e float (a scratch row of stored exps).
void ScaleToBF16(const float* e, std::uint16_t* y, std::int64_t n, float rhf, float rlf) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF rh = hn::Set(d, rhf * kTwo64), rl = hn::Set(d, rlf * kTwo64);
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  for (; i + N <= len; i += N) StoreF(d, MulR(hn::LoadU(d, e + i), rh, rl), y + i);
  if (i < len) {
    Tail<float> t(e + i, len - i);
    Tail<std::uint16_t> o(nullptr, 0);
    StoreF(d, MulR(hn::LoadU(d, t.in), rh, rl), o.out);
    o.count = len - i;
    o.flush(y + i);
  }
}

// y = exp((x - m) s) / S with 1/S = r_hi + r_lo.
// float32: exp rounded (ExpMasked, biased), times the two-float 1/S, one
// rounding (MulR): the same bits as row_exp_store_f32 + row_scale_f32, so a
// row gives the same result in place (recomputed exp) as out of place
// (stored exp), which adaptive softmax relies on.
// bfloat16, fused: 1/S = rm 2^kr with rm in [1, 2), and
//     y = bf16(rm (1 + r q(r)) * 2^(k + kr)),
// r the reduced argument, q the Horner polynomial (PolyQ5); the product is in
// [0.7, 2.9] (normal) and the power of two is an exact integer add to the
// exponent: the float value is within ~2 u, so the bf16 rounding is the
// correct one except within 2^-22 relative of a midpoint.
// Vectors with a result below the normal range (or NaN) take the unfused
// path: ExpMasked (biased), MulR, ScaleDown96 (correct subnormal rounding).
template <class T>
void ExpScale(const T* x, T* y, std::int64_t n, float mf, const Scale& scale, float rhf,
              float rlf) {
  constexpr bool kAcc = std::is_same_v<T, float>;
  const DF d;
  const hn::RebindToSigned<DF> di;
  const std::size_t N = hn::Lanes(d);
  const ScaleV s = ScaleVOf(d, scale);
  const VF m = hn::Set(d, mf);
  const VF rh = hn::Set(d, rhf * kTwo64), rl = hn::Set(d, rlf * kTwo64);
  int kr_int = 0;
  std::frexp(rhf, &kr_int);
  kr_int -= 1;  // rhf = rm_hi 2^kr, rm_hi in [1, 2)
  const VF rmh = hn::Set(d, std::ldexp(rhf, -kr_int));
  const auto kr = hn::Set(di, kr_int);
  const VF k_min = hn::Set(d, static_cast<float>(-125 - kr_int));
  auto val = [&](VF v) SA_VEC_LAMBDA -> VF {
    VF l;
    VF h = Diff<kAcc>(d, v, m, s, l);
    if constexpr (kAcc) return MulR(ExpMasked<kAcc, kExpBias>(d, h, l), rh, rl);
    const MF dead = hn::Lt(h, hn::Set(d, -104.0f));
    const VF dh = hn::IfThenElse(dead, hn::Set(d, -104.0f), h);
    const VF shifter = hn::Set(d, 12582912.0f);
    const VF kf = hn::MulAdd(dh, hn::Set(d, 1.44269504088896341f), shifter);
    const VF k = hn::Sub(kf, shifter);
    const VF r = ReduceBF16(d, k, dh);
    // rm (1 + r q(r)); rm's low part (< 2^-24 rm) is below bf16's concern
    const VF w = hn::MulAdd(PolyQ5(d, r), hn::Mul(r, rmh), rmh);
    if (HWY_LIKELY(hn::AllTrue(d, hn::Or(dead, hn::Ge(k, k_min))))) {  // k + kr >= -125
      const auto kk = hn::Add(hn::BitCast(di, kf), kr);
      const VF e = hn::BitCast(d, hn::Add(hn::BitCast(di, w), hn::ShiftLeft<23>(kk)));
      return hn::IfThenZeroElse(dead, e);
    }
    VF h2 = h, l2 = l;
    return MulR(ExpMasked<kAcc, kExpBias>(d, h2, l2), rh, rl);
  };
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  for (; i + 2 * N <= len; i += 2 * N) {
    const VF v0 = LoadF(d, x + i), v1 = LoadF(d, x + i + N);
    StoreF2(d, val(v0), val(v1), y + i);
  }
  for (; i + N <= len; i += N) StoreF(d, val(LoadF(d, x + i)), y + i);
  if (i < len) {
    Tail<T> t(x + i, len - i);
    StoreF(d, val(LoadF(d, t.in)), t.out);
    t.flush(y + i);
  }
}

// y = (x - m) s - L in double lanes, one rounding to float (then to bfloat16).
template <class T>
void LogSoftmax(const T* x, T* y, std::int64_t n, float mf, double sd, double Ld) {
  const DF d;
  const DD dd;
  const std::size_t N = hn::Lanes(d);
  const VD m = hn::Set(dd, static_cast<double>(mf)), s = hn::Set(dd, sd), L = hn::Set(dd, Ld);
  auto one = [&](VF v, T* out) SA_VEC_LAMBDA {
    const VD lo = hn::MulSub(hn::Sub(PromLo(v), m), s, L);
    const VD hi = hn::MulSub(hn::Sub(PromHi(v), m), s, L);
    StoreF(d, Demote2(hi, lo), out);
  };
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  for (; i + N <= len; i += N) one(LoadF(d, x + i), y + i);
  if (i < len) {
    Tail<T> t(x + i, len - i);
    one(LoadF(d, t.in), t.out);
    t.flush(y + i);
  }
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
double ExpStoreF32(const float* x, float* y, std::int64_t n, float m, const Scale& s) {
  return ExpStore(x, y, n, m, s, true);
}
double SumExpF32(const float* x, std::int64_t n, float m, const Scale& s) {
  return ExpStore<float, float>(x, nullptr, n, m, s, false);
}
double SumExpBF16(const std::uint16_t* x, std::int64_t n, float m, const Scale& s) {
  return ExpStore<std::uint16_t, float>(x, nullptr, n, m, s, false);
}
double ExpStoreBF16(const std::uint16_t* x, float* y, std::int64_t n, float m, const Scale& s) {
  return ExpStore<std::uint16_t, float>(x, y, n, m, s, true);
}
double ExpStoreTF32(const float* x, float* y, std::int64_t n, float m, const Scale& s, double* T) {
  return ExpStore<float, float, true>(x, y, n, m, s, true, T);
}
double SumExpTF32(const float* x, std::int64_t n, float m, const Scale& s, double* T) {
  return ExpStore<float, float, true>(x, nullptr, n, m, s, false, T);
}
double SumExpTBF16(const std::uint16_t* x, std::int64_t n, float m, const Scale& s, double* T) {
  return ExpStore<std::uint16_t, float, true>(x, nullptr, n, m, s, false, T);
}
double SumRestF32(const float* x, std::int64_t n, float m, const Scale& s, std::int64_t* k) {
  return SumExpRest(x, n, m, s, k);
}
double SumRestBF16(const std::uint16_t* x, std::int64_t n, float m, const Scale& s,
                   std::int64_t* k) {
  return SumExpRest(x, n, m, s, k);
}
void ExpScaleF32(const float* x, float* y, std::int64_t n, float m, const Scale& s, float rh,
                 float rl) {
  ExpScale(x, y, n, m, s, rh, rl);
}
void ExpScaleBF16(const std::uint16_t* x, std::uint16_t* y, std::int64_t n, float m, const Scale& s,
                  float rh, float rl) {
  ExpScale(x, y, n, m, s, rh, rl);
}
void LogSoftmaxF32(const float* x, float* y, std::int64_t n, float m, double s, double L) {
  LogSoftmax(x, y, n, m, s, L);
}
void LogSoftmaxBF16(const std::uint16_t* x, std::uint16_t* y, std::int64_t n, float m, double s,
                    double L) {
  LogSoftmax(x, y, n, m, s, L);
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
HWY_EXPORT(ExpStoreF32);
HWY_EXPORT(SumExpF32);
HWY_EXPORT(SumExpBF16);
HWY_EXPORT(SumRestF32);
HWY_EXPORT(ExpStoreTF32);
HWY_EXPORT(ExpStoreBF16);
HWY_EXPORT(ScaleToBF16);
HWY_EXPORT(SumExpTF32);
HWY_EXPORT(SumExpTBF16);
HWY_EXPORT(SumRestBF16);
HWY_EXPORT(ScaleF32);
HWY_EXPORT(ExpScaleF32);
HWY_EXPORT(ExpScaleBF16);
HWY_EXPORT(LogSoftmaxF32);
HWY_EXPORT(LogSoftmaxBF16);
HWY_EXPORT(TargetName);

Scale Scale::of(double s) {
  Scale r;
  r.s = s;
  r.hi = static_cast<float>(s);
  r.lo = static_cast<float>(s - static_cast<double>(r.hi));
  r.unit = (s == 1.0);
  return r;
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
double row_exp_store_f32(const float* x, float* y, std::int64_t n, float m, const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(ExpStoreF32)(x, y, n, m, s);
}
double row_sum_exp_f32(const float* x, std::int64_t n, float m, const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(SumExpF32)(x, n, m, s);
}
double row_sum_exp_bf16(const std::uint16_t* x, std::int64_t n, float m, const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(SumExpBF16)(x, n, m, s);
}
double row_exp_store_bf16(const std::uint16_t* x, float* y, std::int64_t n, float m,
                          const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(ExpStoreBF16)(x, y, n, m, s);
}
void row_scale_to_bf16(const float* e, std::uint16_t* y, std::int64_t n, float rh, float rl) {
  HWY_DYNAMIC_DISPATCH(ScaleToBF16)(e, y, n, rh, rl);
}
double row_exp_store_T_f32(const float* x, float* y, std::int64_t n, float m, const Scale& s,
                           double* T) {
  return HWY_DYNAMIC_DISPATCH(ExpStoreTF32)(x, y, n, m, s, T);
}
double row_sum_exp_T_f32(const float* x, std::int64_t n, float m, const Scale& s, double* T) {
  return HWY_DYNAMIC_DISPATCH(SumExpTF32)(x, n, m, s, T);
}
double row_sum_exp_T_bf16(const std::uint16_t* x, std::int64_t n, float m, const Scale& s,
                          double* T) {
  return HWY_DYNAMIC_DISPATCH(SumExpTBF16)(x, n, m, s, T);
}
double row_sum_exp_rest_f32(const float* x, std::int64_t n, float m, const Scale& s,
                            std::int64_t* k) {
  return HWY_DYNAMIC_DISPATCH(SumRestF32)(x, n, m, s, k);
}
double row_sum_exp_rest_bf16(const std::uint16_t* x, std::int64_t n, float m, const Scale& s,
                             std::int64_t* k) {
  return HWY_DYNAMIC_DISPATCH(SumRestBF16)(x, n, m, s, k);
}
void row_scale_f32(float* y, std::int64_t n, float rh, float rl) {
  HWY_DYNAMIC_DISPATCH(ScaleF32)(y, n, rh, rl);
}
void row_exp_scale_f32(const float* x, float* y, std::int64_t n, float m, const Scale& s, float rh,
                       float rl) {
  HWY_DYNAMIC_DISPATCH(ExpScaleF32)(x, y, n, m, s, rh, rl);
}
void row_exp_scale_bf16(const std::uint16_t* x, std::uint16_t* y, std::int64_t n, float m,
                        const Scale& s, float rh, float rl) {
  HWY_DYNAMIC_DISPATCH(ExpScaleBF16)(x, y, n, m, s, rh, rl);
}
void row_log_softmax_f32(const float* x, float* y, std::int64_t n, float m, double s, double L) {
  HWY_DYNAMIC_DISPATCH(LogSoftmaxF32)(x, y, n, m, s, L);
}
void row_log_softmax_bf16(const std::uint16_t* x, std::uint16_t* y, std::int64_t n, float m,
                          double s, double L) {
  HWY_DYNAMIC_DISPATCH(LogSoftmaxBF16)(x, y, n, m, s, L);
}
const char* dispatch_target() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace sa::kernels::cpu
#endif  // HWY_ONCE
