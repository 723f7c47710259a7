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
// v's bits plus 0x7fff + (bit 16): the high 16 bits are then v rounded to
// bfloat16, nearest even (finite v). No shift: callers keep the high halves.
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> RoundHighBF16(VF v) {
  const hn::RebindToUnsigned<DF> du32;
  const auto u = hn::BitCast(du32, v);
  const auto bias = hn::IfThenElse(hn::TestBit(u, hn::Set(du32, 0x10000u)), hn::Set(du32, 0x8000u),
                                   hn::Set(du32, 0x7fffu));
  return hn::Add(u, bias);
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
  const hn::Repartition<std::uint16_t, DF> du16;
  hn::StoreU(hn::ConcatOdd(du16, hn::BitCast(du16, RoundHighBF16(v1)),
                           hn::BitCast(du16, RoundHighBF16(v0))),
             du16, p);
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
// An order-keeping pair: LoadF2Blocked reads 2N values as two float vectors
// in the order LoadF2Unordered gives, and StoreF2Blocked writes two such
// vectors back (rounded to bfloat16) in the original order. On AVX-512 the
// bfloat16 forms are an unpack per vector and one two-source 16-bit permute per
// pair that both undoes the unpack order and keeps the high halves (no shift);
// elsewhere they are the ordered LoadF / StoreF2.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
HWY_INLINE void LoadF2Blocked(DF d, const std::uint16_t* p, VF& a, VF& b) {
  LoadF2Unordered(d, p, a, b);
}
HWY_INLINE void StoreF2Blocked(DF d, VF v0, VF v1, std::uint16_t* p) {
  const hn::Repartition<std::uint16_t, DF> du16;
  // Output u16 p = 8 blk + q: the high half of v0's lane 4 blk + q (q < 4),
  // else of v1's lane 4 blk + q - 4 (index 32 + ... selects the second source).
  alignas(64) static constexpr std::uint16_t kIdx[32] = {1,  3,  5,  7,  33, 35, 37, 39, 9,  11, 13,
                                                         15, 41, 43, 45, 47, 17, 19, 21, 23, 49, 51,
                                                         53, 55, 25, 27, 29, 31, 57, 59, 61, 63};
  const __m512i idx = _mm512_load_si512(kIdx);
  const __m512i r = _mm512_permutex2var_epi16(RoundHighBF16(v0).raw, idx, RoundHighBF16(v1).raw);
  hn::StoreU(hn::Vec<decltype(du16)>{r}, du16, p);
  (void)d;
}
#else
HWY_INLINE void LoadF2Blocked(DF d, const std::uint16_t* p, VF& a, VF& b) {
  a = LoadF(d, p);
  b = LoadF(d, p + hn::Lanes(d));
}
HWY_INLINE void StoreF2Blocked(DF d, VF v0, VF v1, std::uint16_t* p) { StoreF2(d, v0, v1, p); }
#endif
HWY_INLINE void LoadF2Blocked(DF d, const float* p, VF& a, VF& b) {
  a = LoadF(d, p);
  b = LoadF(d, p + hn::Lanes(d));
}
HWY_INLINE void StoreF2Blocked(DF d, VF v0, VF v1, float* p) { StoreF2(d, v0, v1, p); }

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
// a * b - p exactly, for p = fl(a * b) (no overflow or underflow): one FMA
// where the target has it; Dekker's product (Veltkamp splitting at 2^12 + 1)
// on targets without FMA (Highway's scalar and 128-bit x86 fallbacks), where
// MulSub would round twice and return 0.
HWY_INLINE VF ProdErr(DF d, VF a, VF b, VF p) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::MulSub(a, b, p);
#else
  const VF c = hn::Set(d, 4097.0f);
  auto split = [&](VF v, VF& h, VF& l) {
    const VF t = hn::Mul(c, v);
    h = hn::Sub(t, hn::Sub(t, v));
    l = hn::Sub(v, h);
  };
  VF ah, al, bh, bl;
  split(a, ah, al);
  split(b, bh, bl);
  return hn::Add(hn::Add(hn::Add(hn::Sub(hn::Mul(ah, bh), p), hn::Mul(ah, bl)), hn::Mul(al, bh)),
                 hn::Mul(al, bl));
#endif
}

struct ScaleV {
  VF hi, lo;
  bool unit;
};
HWY_INLINE ScaleV ScaleVOf(DF d, const Scale& s) {
  return {hn::Set(d, s.hi), hn::Set(d, s.lo), s.unit};
}

// (x - m) * s as an unevaluated sum dh + dl. kAcc: x - m is split exactly
// (TwoSum, Knuth) and the product keeps its rounding error (ProdErr: an FMA,
// or Dekker's product where the target has no FMA), so dh + dl is within
// ~2^-47 relative of the exact value. Without kAcc (bfloat16, whose 8-bit
// inputs subtract exactly in float unless their exponents differ by more than
// 16) dl = 0 and the product is rounded once.
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
      const VF pl = ProdErr(d, hi, s.hi, ph);  // exact error of hi*s.hi
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

// ---------------------------------------------------------------- table-driven exp
// On targets with a cheap in-register table lookup (AVX-512: one vpermt2ps
// over 32 entries; AVX2: two vpermps and a blend over 16), the hot passes use
//   exp(d) = 2^floor(K/L) * 2^(j/L) * e^r,   K = round(d L / ln2), j = K mod L,
//   r = d - K ln2/L,  |r| <= ln2/(2L) = 0.0108 (L = 32) or 0.0217 (L = 16),
// so the polynomial for e^r is short. The table holds T_j = 2^(j/L) rounded to
// float, times 2^32 (the bias of the stored exps, kExpBias), and
// rho_j = (2^(j/L) - T_j) / T_j rounded to float (|rho_j| < 2^-24); the power
// 2^floor(K/L) is added to T_j's exponent as an integer (T_j 2^floor(K/L) is a
// normal float for every live lane: floor(K/L) >= -151, + 32).
// Other targets (128-bit, scalar, scalable vectors) keep the polynomial on
// |r| <= ln2/2 (ExpM1Taylor7, PolyQ5 above).
//
// float32 (kAcc): e = T' + T' q', q' = r + rho + r^2 (c2 + c3 r), the cubic
//   interpolated at Chebyshev nodes (truncation 0.0025 u for L = 32, 0.039 u
//   for L = 16; u = 2^-24); r by two-constant Cody-Waite with FMA (error
//   <= u |r|), r + dl the two-float argument. The one rounding of the final
//   FMA dominates: |e - exp(d)| <= 0.5 ulp + 0.08 ulp (the 0.08 covers q', rho
//   and r, at most 0.04 u relative, doubled where e falls just below T_j's
//   binade). The degree-7 path above is within 0.75 ulp.
// bfloat16: e = T' + T' r p(r), p(r) = c1 + c2 r (L = 32, minimax: 0.90 u) or
//   1 + c2 r + c3 r^2 (L = 16, 0.039 u); T_j rounded (<= 0.5 u), rho dropped;
//   one-constant reduction (|K| |ln2/L - float(ln2/L)| <= 4801 * 5.96e-11 =
//   2.9e-7, only for weights below e^-83; <= 0.96 u for weights above e^-20).
//   Within about 2.5 u (1.5e-7) relative in all: a bf16 rounding goes the
//   wrong way only within 1.5e-7 relative of a midpoint.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr int kTabBits = 5;
#elif HWY_TARGET == HWY_AVX2
constexpr int kTabBits = 4;
#else
constexpr int kTabBits = 0;
#endif
constexpr int kTabL = 1 << kTabBits;
// L/ln2, and ln2/L as a float plus its remainder (Cody-Waite).
constexpr float kTabLOverLn2 = kTabBits == 5 ? 0x1.715476p+5f : 0x1.715476p+4f;
constexpr float kTabLn2OverL = kTabBits == 5 ? 0x1.62e43p-6f : 0x1.62e43p-5f;
constexpr float kTabLn2OverLLo = kTabBits == 5 ? -0x1.05c61p-34f : -0x1.05c61p-33f;
// float32: e^r - 1 ~ r + r^2 (c2 + c3 r), the cubic interpolated at Chebyshev nodes.
constexpr float kTabF32C2 = kTabBits == 5 ? 0x1.00007ap-1f : 0x1.0001ecp-1f;
constexpr float kTabF32C3 = kTabBits == 5 ? 0x1.5555b8p-3f : 0x1.5556dep-3f;
// bfloat16: e^r ~ 1 + r (c1 + c2 r + c3 r^2): the minimax quadratic (L = 32,
// c3 = 0 and not evaluated) or the float32 cubic (L = 16).
constexpr float kTabBF16C1 = kTabBits == 5 ? 0x1.0000f8p+0f : 1.0f;
constexpr float kTabBF16C2 = kTabBits == 5 ? 0x1.000174p-1f : kTabF32C2;
constexpr float kTabBF16C3 = kTabBits == 5 ? 0.0f : kTabF32C3;

// 2^(j/32) 2^32 and the relative remainders; the 16-entry table is every
// other entry (2^(j/16) = 2^(2j/32)).
alignas(64) constexpr float kExp2Hi32[32] = {
    0x1.0p+32f,      0x1.059b0ep+32f, 0x1.0b5586p+32f, 0x1.11301ep+32f, 0x1.172b84p+32f,
    0x1.1d4874p+32f, 0x1.2387a6p+32f, 0x1.29e9ep+32f,  0x1.306fep+32f,  0x1.371a74p+32f,
    0x1.3dea64p+32f, 0x1.44e086p+32f, 0x1.4bfdaep+32f, 0x1.5342b6p+32f, 0x1.5ab07ep+32f,
    0x1.6247ecp+32f, 0x1.6a09e6p+32f, 0x1.71f75ep+32f, 0x1.7a1148p+32f, 0x1.82589ap+32f,
    0x1.8ace54p+32f, 0x1.93737cp+32f, 0x1.9c4918p+32f, 0x1.a5503cp+32f, 0x1.ae89fap+32f,
    0x1.b7f77p+32f,  0x1.c199bep+32f, 0x1.cb720ep+32f, 0x1.d5818ep+32f, 0x1.dfc974p+32f,
    0x1.ea4afap+32f, 0x1.f50766p+32f};
alignas(64) constexpr float kExp2Rho32[32] = {
    0x0.0p+0f,        -0x1.947414p-25f, 0x1.8d96d4p-25f,  -0x1.dda2fcp-25f, -0x1.9c0c22p-27f,
    -0x1.a2fbb2p-25f, 0x1.964904p-25f,  -0x1.2b0dbcp-25f, 0x1.125002p-25f,  -0x1.cde8cep-26f,
    0x1.370be4p-25f,  0x1.336de2p-30f,  -0x1.0a355p-25f,  -0x1.c541b4p-26f, -0x1.00d8acp-27f,
    -0x1.6cb284p-25f, 0x1.26055cp-26f,  0x1.8b2bb8p-26f,  -0x1.05cb44p-25f, -0x1.1c2142p-26f,
    0x1.67a1cap-28f,  -0x1.348e56p-25f, 0x1.a3b5e4p-28f,  -0x1.0b7ec8p-25f, -0x1.f9c304p-27f,
    -0x1.e4c886p-26f, -0x1.6961b4p-28f, -0x1.b5151ep-28f, -0x1.a5217cp-28f, -0x1.ab7132p-26f,
    0x1.61428ep-28f,  -0x1.2ad5f8p-27f};

// The table in registers (two vectors per column), loaded once per pass.
struct ExpTab {
  VF h0, h1, r0, r1;
};
HWY_INLINE ExpTab LoadExpTab(DF d) {
  if constexpr (kTabBits == 0) {
    return {hn::Zero(d), hn::Zero(d), hn::Zero(d), hn::Zero(d)};
  } else {
    const std::size_t N = hn::Lanes(d);
    if constexpr (kTabL == 32) {
      return {hn::Load(d, kExp2Hi32), hn::Load(d, kExp2Hi32 + N), hn::Load(d, kExp2Rho32),
              hn::Load(d, kExp2Rho32 + N)};
    } else {  // every other entry
      alignas(64) float h[kTabL], r[kTabL];
      for (int j = 0; j < kTabL; ++j) {
        h[j] = kExp2Hi32[j * (32 / kTabL)];
        r[j] = kExp2Rho32[j * (32 / kTabL)];
      }
      return {hn::Load(d, h), hn::Load(d, h + N), hn::Load(d, r), hn::Load(d, r + N)};
    }
  }
}
// Entry (bits of kf) mod L of the table (t0, t1): the instructions read only
// the index's low kTabBits bits.
HWY_INLINE VF Lut(VF t0, VF t1, VF kf) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  return VF{_mm512_permutex2var_ps(t0.raw, _mm512_castps_si512(kf.raw), t1.raw)};
#elif HWY_TARGET == HWY_AVX2
  const __m256i i = _mm256_castps_si256(kf.raw);
  const __m256 a = _mm256_permutevar8x32_ps(t0.raw, i);
  const __m256 b = _mm256_permutevar8x32_ps(t1.raw, i);
  return VF{_mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(i, 28)))};
#else
  (void)t1;
  (void)kf;
  return t0;  // unused: kTabBits == 0
#endif
}
// K = round(d L / ln2) by the 1.5 * 2^23 shifter (kf's low mantissa bits
// hold K in two's complement) and k = K as a float.
HWY_INLINE VF TabK(DF d, VF dh, VF& k) {
  const VF shifter = hn::Set(d, 12582912.0f);
  const VF kf = hn::MulAdd(dh, hn::Set(d, kTabLOverLn2), shifter);
  k = hn::Sub(kf, shifter);
  return kf;
}
// floor(K/L) << 23 (the exponent field of 2^floor(K/L)) from kf's bits:
// bits(kf) = bits(shifter) + K, and bits(shifter) << (23 - kTabBits) == 0 mod 2^32.
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> TabExp(DF d, VF kf) {
  const hn::RebindToSigned<DF> di;
  (void)d;
  return hn::And(hn::ShiftLeft<23 - (kTabBits > 0 ? kTabBits : 1)>(hn::BitCast(di, kf)),
                 hn::Set(di, static_cast<std::int32_t>(0xFF800000u)));
}
// r = dh - K ln2/L with one constant (bfloat16 rows; float32 rows add the
// remainder term).
HWY_INLINE VF TabReduce(DF d, VF k, VF dh) {
  return hn::NegMulAdd(k, hn::Set(d, kTabLn2OverL), dh);
}
// bfloat16 rows: p(r) = c1 + c2 r (+ c3 r^2 for L = 16), e^r ~ 1 + r p(r);
// the coefficients are kTabBF16C*, possibly scaled by the caller.
HWY_INLINE VF TabPolyBF16(VF r, VF c1, VF c2, VF c3) {
  if constexpr (kTabBits == 5) {
    (void)c3;
    return hn::MulAdd(c2, r, c1);
  } else {
    return hn::MulAdd(hn::MulAdd(c3, r, c2), r, c1);
  }
}

// bfloat16 rows: exp(dh) * 2^kExpBias as a product P * u of a power-of-two
// part P (table targets: T_j 2^floor(K/L), exact; others: 2^k) and u (table:
// 1 + r p(r); others: 1 + r q(r)), so a sum can take the product in its FMA.
// dh >= -104 (no dead lanes here); NaN propagates through u.
HWY_INLINE void ExpPartsBF16(DF d, const ExpTab& tab, VF dh, VF& P, VF& u) {
  const hn::RebindToSigned<DF> di;
  if constexpr (kTabBits > 0) {
    VF k;
    const VF kf = TabK(d, dh, k);
    P = hn::BitCast(d, hn::Add(hn::BitCast(di, Lut(tab.h0, tab.h1, kf)), TabExp(d, kf)));
    const VF r = TabReduce(d, k, dh);
    const VF p =
        TabPolyBF16(r, hn::Set(d, kTabBF16C1), hn::Set(d, kTabBF16C2), hn::Set(d, kTabBF16C3));
    u = hn::MulAdd(r, p, hn::Set(d, 1.0f));
  } else {
    (void)tab;
    const VF shifter = hn::Set(d, 12582912.0f);
    const VF kf = hn::MulAdd(dh, hn::Set(d, 1.44269504088896341f), shifter);
    const VF k = hn::Sub(kf, shifter);
    const VF r = ReduceBF16(d, k, dh);
    u = hn::MulAdd(PolyQ5(d, r), r, hn::Set(d, 1.0f));
    // 2^(k + bias) as a float (exponent field k + bias + 127 in [8, 160])
    P = hn::BitCast(d,
                    hn::ShiftLeft<23>(hn::Add(hn::BitCast(di, kf), hn::Set(di, kExpBias + 127))));
  }
}

// exp(dh + dl) * 2^kExpBias without a branch, for the streaming passes' sums
// and stores (every live result is a normal float):
// - dh < -104 (incl. -inf): exactly 0 (exp(-104) < 2^-150, below half the
//   smallest subnormal), evaluated at dh = -104, dl = 0 to keep the lane
//   finite. Exact zeros matter: a lane that saw only masked logits must stay
//   empty (S = 0), and a single live logit must give H = 0 exactly.
//   kLive: the caller guarantees dh >= -104 in every lane (a row whose
//   minimum is within range), and these checks are skipped.
// - NaN propagates (the comparison is false for NaN; dh stays NaN, and so do
//   r and the polynomial, whatever exponent the table path adds).
// Table targets: the table-driven exp above. Others: the reduction and
// polynomial of ExpMasked (float32) or PolyQ5 (bfloat16); k >= -151 so
// k + 32 >= -119: the scaling never leaves the normal range.
template <bool kAcc, bool kLive = false>
HWY_INLINE VF ExpLive(DF d, const ExpTab& tab, VF dh, VF dl) {
  static_assert(kExpBias == 32);  // the table is biased by 2^32
  const hn::RebindToSigned<DF> di;
  MF dead;
  if constexpr (!kLive) {
    dead = hn::Lt(dh, hn::Set(d, -104.0f));
    dh = hn::IfThenElse(dead, hn::Set(d, -104.0f), dh);
    if constexpr (kAcc) dl = hn::IfThenZeroElse(dead, dl);
  }
  VF e;
  if constexpr (!kAcc) {
    (void)dl;
    VF P, u;
    ExpPartsBF16(d, tab, dh, P, u);
    e = hn::Mul(P, u);
  } else if constexpr (kTabBits > 0) {
    VF k;
    const VF kf = TabK(d, dh, k);
    const VF T = hn::BitCast(d, hn::Add(hn::BitCast(di, Lut(tab.h0, tab.h1, kf)), TabExp(d, kf)));
    VF r = hn::NegMulAdd(k, hn::Set(d, kTabLn2OverLLo), TabReduce(d, k, dh));
    r = hn::Add(r, dl);
    const VF c3 = hn::Set(d, kTabF32C3), c2 = hn::Set(d, kTabF32C2);
    const VF q =
        hn::MulAdd(hn::Mul(r, r), hn::MulAdd(c3, r, c2), hn::Add(r, Lut(tab.r0, tab.r1, kf)));
    e = hn::MulAdd(T, q, T);
  } else {
    (void)tab;
    const VF shifter = hn::Set(d, 12582912.0f);
    const VF kf = hn::MulAdd(dh, hn::Set(d, 1.44269504088896341f), shifter);
    const VF k = hn::Sub(kf, shifter);
    const VF r = hn::Add(ReduceCW(d, k, dh), dl);
    const VF p = hn::Add(ExpM1Taylor7(d, r), hn::Set(d, 1.0f));
    // 2^(k + bias) as a float (exponent field k + bias + 127 in [8, 160]), and
    // a float multiply (exact: the product is normal) so NaN stays NaN.
    const auto kb = hn::Add(hn::BitCast(di, kf), hn::Set(di, kExpBias + 127));
    e = hn::Mul(p, hn::BitCast(d, hn::ShiftLeft<23>(kb)));
  }
  if constexpr (kLive) return e;
  return hn::IfThenZeroElse(dead, e);
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

// Largest and smallest element (raw) in one pass. NaN: unspecified results
// (callers detect NaN rows through the sums).
template <class T>
void RowRange(const T* x, std::int64_t n, float* lo, float* hi) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const VF pinf = hn::Set(d, std::numeric_limits<float>::infinity());
  VF m0 = ninf, m1 = ninf, l0 = pinf, l1 = pinf;
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
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
// kLive: every (x - m) s of the row is >= -103 (the caller knows the row's
// minimum), so no lane is dead and the full vectors skip the dead-lane checks
// (the padded tail never does: its padding is -inf).
template <class T, class U, bool kT, bool kLive>
double ExpStore(const T* x, U* y, std::int64_t n, float mf, const Scale& scale, bool store,
                double* Tout) {
  constexpr bool kAcc = std::is_same_v<T, float>;
  constexpr bool kFloatS = !kAcc && !kT;
  const DF d;
  const DD dd;
  const std::size_t N = hn::Lanes(d);
  const ScaleV s = ScaleVOf(d, scale);
  const VF m = hn::Set(d, mf);
  const ExpTab tab = LoadExpTab(d);
  VD a0 = hn::Zero(dd), a1 = hn::Zero(dd), a2 = hn::Zero(dd), a3 = hn::Zero(dd);
  VD t0 = hn::Zero(dd), t1 = hn::Zero(dd), t2 = hn::Zero(dd), t3 = hn::Zero(dd);
  // e and the argument of one vector (dead lanes: e = 0 when stored).
  auto ev = [&](VF v, VF& h) SA_VEC_LAMBDA {
    VF l;
    h = Diff<kAcc>(d, v, m, s, l);
    return ExpLive<kAcc, kLive>(d, tab, h, l);
  };
  // T's factor: the argument, clamped where a dead lane has e = 0.
  auto targ = [&](VF h) SA_VEC_LAMBDA {
    if constexpr (kLive) return h;
    return hn::Max(h, hn::Set(d, -104.0f));
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
      if constexpr (kFloatS && kLive) {
        if (!store) {  // the sum takes the product P u in its FMA
          VF P0, u0, P1, u1, l0, l1;
          ExpPartsBF16(d, tab, Diff<false>(d, v0, m, s, l0), P0, u0);
          ExpPartsBF16(d, tab, Diff<false>(d, v1, m, s, l1), P1, u1);
          f0 = hn::MulAdd(P0, u0, f0);
          f1 = hn::MulAdd(P1, u1, f1);
          continue;
        }
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
      if constexpr (kT) {
        g0 = hn::MulAdd(e0, targ(h0), g0);
        g1 = hn::MulAdd(e1, targ(h1), g1);
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
  // Leftover vectors and the padded tail: with the dead-lane checks.
  auto one = [&](VF v, U* out) SA_VEC_LAMBDA {
    VF l;
    const VF h = Diff<kAcc>(d, v, m, s, l);
    const VF e = ExpLive<kAcc>(d, tab, h, l);
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

// Whether every (x - m) s of a row with minimum lo is >= -103 (NaN: no).
inline bool RowLive(float lo, float m, const Scale& s) {
  return (static_cast<double>(lo) - static_cast<double>(m)) * s.s >= -103.0;
}
template <class T, class U, bool kT = false>
double ExpStoreRow(const T* x, U* y, std::int64_t n, float m, float lo, const Scale& s, bool store,
                   double* Tout = nullptr) {
  return RowLive(lo, m, s) ? ExpStore<T, U, kT, true>(x, y, n, m, s, store, Tout)
                           : ExpStore<T, U, kT, false>(x, y, n, m, s, store, Tout);
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
#if HWY_NATIVE_FMA
  return ScaleDown96(DF(), hn::MulAdd(e, rh, hn::Mul(e, rl)));
#else  // no FMA: p + (err(e rh) + e rl), Dekker's exact error term
  const VF p = hn::Mul(e, rh);
  return ScaleDown96(DF(), hn::Add(p, hn::Add(ProdErr(DF(), e, rh, p), hn::Mul(e, rl))));
#endif
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
// float32: exp rounded (ExpLive, biased), times the two-float 1/S, one
// rounding (MulR): the same bits as row_exp_store_f32 + row_scale_f32, so a
// row gives the same result in place (recomputed exp) as out of place
// (stored exp), which adaptive softmax relies on.
// bfloat16, fused: 1/S = rm 2^kr with rm in [1, 2), and
//     y = bf16(P (rm + r rm p(r)) 2^(kr - 32))
// with P and p of ExpPartsBF16 (P = T_j 2^(floor(K/L) + 32) on table targets,
// 2^(k + 32) otherwise) and rm p's coefficients premultiplied by rm; the
// product is formed at 2^-32 scale (normal) and the power of two 2^kr is an
// exact integer add to the exponent: the float value is within ~3 u, so the
// bf16 rounding is the correct one except within 1.8e-7 relative of a midpoint.
// kLive (the row's minimum lo is known): every result is a normal float, no
// lane is dead, and no vector needs a check. Otherwise vectors with a dead
// lane or a result below the normal range (or NaN) take the unfused path:
// ExpLive (biased), MulR, ScaleDown96 (correct subnormal rounding).
template <class T, bool kLive>
void ExpScale(const T* x, T* y, std::int64_t n, float mf, const Scale& scale, float rhf,
              float rlf) {
  constexpr bool kAcc = std::is_same_v<T, float>;
  const DF d;
  const hn::RebindToSigned<DF> di;
  using VI = hn::Vec<decltype(di)>;
  const std::size_t N = hn::Lanes(d);
  const ScaleV s = ScaleVOf(d, scale);
  const VF m = hn::Set(d, mf);
  const ExpTab tab = LoadExpTab(d);
  const VF rh = hn::Set(d, rhf * kTwo64), rl = hn::Set(d, rlf * kTwo64);
  int kr_int = 0;
  std::frexp(rhf, &kr_int);
  kr_int -= 1;                                // rhf = rm 2^kr, rm in [1, 2); kr <= 0 (S >= 1)
  const float rm = std::ldexp(rhf, -kr_int);  // rm's low part (< 2^-24 rm): below bf16's concern
  // Table targets: rm and rm p's coefficients at 2^-32 (the table carries
  // 2^32); all normal floats, each rounded once (< 2^-24 relative).
  const float rmb = rm * 0x1.0p-32f;
  const VF rmv = hn::Set(d, kTabBits > 0 ? rmb : rm);
  const VF c1 = hn::Set(d, rmb * kTabBF16C1), c2 = hn::Set(d, rmb * kTabBF16C2),
           c3 = hn::Set(d, rmb * kTabBF16C3);
  const VI kr23 = hn::Set(di, static_cast<std::int32_t>(static_cast<std::uint32_t>(kr_int) << 23));
  // Per-vector fast-path test: k + kr >= -125 (k = floor(K/L) or the
  // polynomial's k), tested on K.
  const VF k_min = hn::Set(d, static_cast<float>((-125 - kr_int) * (kTabBits > 0 ? kTabL : 1)));
  // w = rm e^(h - k ln2) in [0.98, 4.1) and e23 = k << 23.
  auto fused = [&](VF h, VF& k, VI& e23) SA_VEC_LAMBDA -> VF {
    if constexpr (kTabBits > 0) {
      const VF kf = TabK(d, h, k);
      const VF r = TabReduce(d, k, h);
      const VF p = TabPolyBF16(r, c1, c2, c3);
      e23 = TabExp(d, kf);
      return hn::Mul(Lut(tab.h0, tab.h1, kf), hn::MulAdd(r, p, rmv));
    } else {
      const VF shifter = hn::Set(d, 12582912.0f);
      const VF kf = hn::MulAdd(h, hn::Set(d, 1.44269504088896341f), shifter);
      k = hn::Sub(kf, shifter);
      const VF r = ReduceBF16(d, k, h);
      e23 = hn::ShiftLeft<23>(hn::BitCast(di, kf));
      return hn::MulAdd(PolyQ5(d, r), hn::Mul(r, rmv), rmv);
    }
  };
  // One vector; live: std::bool_constant<kLive> for full vectors, false for
  // the padded tail.
  auto val = [&](VF v, auto live) SA_VEC_LAMBDA -> VF {
    constexpr bool kL = decltype(live)::value;
    VF l;
    const VF h = Diff<kAcc>(d, v, m, s, l);
    if constexpr (kAcc) {
      return MulR(ExpLive<kAcc, kL>(d, tab, h, l), rh, rl);
    } else {
      VF k;
      VI e23;
      if constexpr (kL) {
        const VF w = fused(h, k, e23);
        return hn::BitCast(d, hn::Add(hn::BitCast(di, w), hn::Add(e23, kr23)));
      } else {
        const MF dead = hn::Lt(h, hn::Set(d, -104.0f));
        const VF w = fused(hn::IfThenElse(dead, hn::Set(d, -104.0f), h), k, e23);
        if (HWY_LIKELY(hn::AllTrue(d, hn::Or(dead, hn::Ge(k, k_min))))) {
          const VF e = hn::BitCast(d, hn::Add(hn::BitCast(di, w), hn::Add(e23, kr23)));
          return hn::IfThenZeroElse(dead, e);
        }
        return MulR(ExpLive<kAcc>(d, tab, h, l), rh, rl);
      }
    }
  };
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  for (; i + 2 * N <= len; i += 2 * N) {
    VF v0, v1;
    LoadF2Blocked(d, x + i, v0, v1);
    constexpr std::bool_constant<kLive> live;
    StoreF2Blocked(d, val(v0, live), val(v1, live), y + i);
  }
  // The leftover vector and the padded tail (-inf padding: dead lanes).
  for (; i + N <= len; i += N) StoreF(d, val(LoadF(d, x + i), std::false_type{}), y + i);
  if (i < len) {
    Tail<T> t(x + i, len - i);
    StoreF(d, val(LoadF(d, t.in), std::false_type{}), t.out);
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
void RangeF32(const float* x, std::int64_t n, float* lo, float* hi) { RowRange(x, n, lo, hi); }
void RangeBF16(const std::uint16_t* x, std::int64_t n, float* lo, float* hi) {
  RowRange(x, n, lo, hi);
}
double ExpStoreF32(const float* x, float* y, std::int64_t n, float m, float lo, const Scale& s) {
  return ExpStoreRow(x, y, n, m, lo, s, true);
}
double SumExpF32(const float* x, std::int64_t n, float m, float lo, const Scale& s) {
  return ExpStoreRow<float, float>(x, nullptr, n, m, lo, s, false);
}
double SumExpBF16(const std::uint16_t* x, std::int64_t n, float m, float lo, const Scale& s) {
  return ExpStoreRow<std::uint16_t, float>(x, nullptr, n, m, lo, s, false);
}
double ExpStoreBF16(const std::uint16_t* x, float* y, std::int64_t n, float m, float lo,
                    const Scale& s) {
  return ExpStoreRow<std::uint16_t, float>(x, y, n, m, lo, s, true);
}
double ExpStoreTF32(const float* x, float* y, std::int64_t n, float m, float lo, const Scale& s,
                    double* T) {
  return ExpStoreRow<float, float, true>(x, y, n, m, lo, s, true, T);
}
double SumExpTF32(const float* x, std::int64_t n, float m, float lo, const Scale& s, double* T) {
  return ExpStoreRow<float, float, true>(x, nullptr, n, m, lo, s, false, T);
}
double SumExpTBF16(const std::uint16_t* x, std::int64_t n, float m, float lo, const Scale& s,
                   double* T) {
  return ExpStoreRow<std::uint16_t, float, true>(x, nullptr, n, m, lo, s, false, T);
}
double SumRestF32(const float* x, std::int64_t n, float m, const Scale& s, std::int64_t* k) {
  return SumExpRest(x, n, m, s, k);
}
double SumRestBF16(const std::uint16_t* x, std::int64_t n, float m, const Scale& s,
                   std::int64_t* k) {
  return SumExpRest(x, n, m, s, k);
}
void ExpScaleF32(const float* x, float* y, std::int64_t n, float m, float lo, const Scale& s,
                 float rh, float rl) {
  if (RowLive(lo, m, s))
    ExpScale<float, true>(x, y, n, m, s, rh, rl);
  else
    ExpScale<float, false>(x, y, n, m, s, rh, rl);
}
// Fused bfloat16 fast path for the whole row when its smallest weight
// exp((lo - m) s) / S stays normal with margin: (lo - m) s log2(e) >= -123 - kr.
void ExpScaleBF16(const std::uint16_t* x, std::uint16_t* y, std::int64_t n, float m, float lo,
                  const Scale& s, float rh, float rl) {
  int kr = 0;
  std::frexp(rh, &kr);
  const double t = (static_cast<double>(lo) - static_cast<double>(m)) * s.s * 1.4426950408889634;
  if (t >= -123.0 - (kr - 1))
    ExpScale<std::uint16_t, true>(x, y, n, m, s, rh, rl);
  else
    ExpScale<std::uint16_t, false>(x, y, n, m, s, rh, rl);
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
HWY_EXPORT(RangeF32);
HWY_EXPORT(RangeBF16);
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
void row_range_f32(const float* x, std::int64_t n, float* lo, float* hi) {
  HWY_DYNAMIC_DISPATCH(RangeF32)(x, n, lo, hi);
}
void row_range_bf16(const std::uint16_t* x, std::int64_t n, float* lo, float* hi) {
  HWY_DYNAMIC_DISPATCH(RangeBF16)(x, n, lo, hi);
}
double row_exp_store_f32(const float* x, float* y, std::int64_t n, float m, float lo,
                         const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(ExpStoreF32)(x, y, n, m, lo, s);
}
double row_sum_exp_f32(const float* x, std::int64_t n, float m, float lo, const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(SumExpF32)(x, n, m, lo, s);
}
double row_sum_exp_bf16(const std::uint16_t* x, std::int64_t n, float m, float lo, const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(SumExpBF16)(x, n, m, lo, s);
}
double row_exp_store_bf16(const std::uint16_t* x, float* y, std::int64_t n, float m, float lo,
                          const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(ExpStoreBF16)(x, y, n, m, lo, s);
}
void row_scale_to_bf16(const float* e, std::uint16_t* y, std::int64_t n, float rh, float rl) {
  HWY_DYNAMIC_DISPATCH(ScaleToBF16)(e, y, n, rh, rl);
}
double row_exp_store_T_f32(const float* x, float* y, std::int64_t n, float m, float lo,
                           const Scale& s, double* T) {
  return HWY_DYNAMIC_DISPATCH(ExpStoreTF32)(x, y, n, m, lo, s, T);
}
double row_sum_exp_T_f32(const float* x, std::int64_t n, float m, float lo, const Scale& s,
                         double* T) {
  return HWY_DYNAMIC_DISPATCH(SumExpTF32)(x, n, m, lo, s, T);
}
double row_sum_exp_T_bf16(const std::uint16_t* x, std::int64_t n, float m, float lo, const Scale& s,
                          double* T) {
  return HWY_DYNAMIC_DISPATCH(SumExpTBF16)(x, n, m, lo, s, T);
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
void row_exp_scale_f32(const float* x, float* y, std::int64_t n, float m, float lo, const Scale& s,
                       float rh, float rl) {
  HWY_DYNAMIC_DISPATCH(ExpScaleF32)(x, y, n, m, lo, s, rh, rl);
}
void row_exp_scale_bf16(const std::uint16_t* x, std::uint16_t* y, std::int64_t n, float m, float lo,
                        const Scale& s, float rh, float rl) {
  HWY_DYNAMIC_DISPATCH(ExpScaleBF16)(x, y, n, m, lo, s, rh, rl);
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
