// Vector exp of the CPU row operations: the scaled difference (x - m) s as
// a two-float sum, the polynomial and table-driven exps (float32 and
// bfloat16 accuracy), and the exact scaling of biased exps back down
// (ScaleDown96, MulR). Each function states its error.
// Highway per-target header: included by the row_*.cpp files after
// foreach_target.h, once per instruction set (hence the toggled guard).
#if defined(SA_KERNELS_CPU_VEC_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SA_KERNELS_CPU_VEC_EXP_INL_H_
#undef SA_KERNELS_CPU_VEC_EXP_INL_H_
#else
#define SA_KERNELS_CPU_VEC_EXP_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "hwy/highway.h"
#include "kernels/cpu/vec_types-inl.h"

HWY_BEFORE_NAMESPACE();
namespace sa::kernels::cpu {
namespace HWY_NAMESPACE {
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

// How Diff splits x - m into its rounding hi and the exact error lo. All
// three give the same pair (lo is the unique exact remainder), so the same
// bits downstream; the row's range [lo, m] says which may be used
// (DiffSplitOf):
// - kTwoSum: Knuth's TwoSum, any x and m (5 operations after hi);
// - kMFirst: Fast2Sum with -m as the first operand, lo = x - (hi + m)
//   (2 operations): exact when no x has a larger exponent than m (Dekker's
//   condition; m = 0 is exact as well);
// - kXFirst: Fast2Sum with x first, lo = (x - hi) - m: exact when m <= 0,
//   so that every |x| >= |m|.
enum DiffSplit : int { kTwoSum = 0, kMFirst = 1, kXFirst = 2 };
// The cheapest exact split for a row with finite maximum m and minimum lo
// (-inf or NaN: not known). |x| <= max(|lo|, m) for every x of the row, so
// an exponent field of lo at most m's puts every exponent at or below m's
// (m a normal float; a subnormal m takes TwoSum).
inline int DiffSplitOf(float lo, float m) {
  if (m <= 0.0f) return kXFirst;
  auto field = [](float v) {
    std::uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return (b >> 23) & 0xffu;  // 0xff: inf or NaN
  };
  const std::uint32_t fm = field(m), fl = field(lo);
  return fm >= 1 && fm < 0xff && fl <= fm ? kMFirst : kTwoSum;
}

// (x - m) * s as an unevaluated sum dh + dl. kAcc: x - m is split exactly
// (kSplit, above) and the product keeps its rounding error (ProdErr: an FMA,
// or Dekker's product where the target has no FMA), so dh + dl is within
// ~2^-47 relative of the exact value. Without kAcc (bfloat16, whose 8-bit
// inputs subtract exactly in float unless their exponents differ by more than
// 16) dl = 0 and the product is rounded once.
template <bool kAcc, int kSplit = kTwoSum>
HWY_INLINE VF Diff(DF d, VF x, VF m, const ScaleV& s, VF& dl) {
  VF hi = hn::Sub(x, m);
  VF lo = hn::Zero(d);
  if constexpr (kAcc && kSplit == kMFirst) {
    lo = hn::Sub(x, hn::Add(hi, m));
  } else if constexpr (kAcc && kSplit == kXFirst) {
    lo = hn::Sub(hn::Sub(x, hi), m);
  } else if constexpr (kAcc) {
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
//   smallest subnormal); dh is zeroed there for the caller (dl may be NaN).
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
// over 32 entries; AVX2: one vpermps over 8), the hot passes use
//   exp(d) = 2^floor(K/L) * 2^(j/L) * e^r,   K = round(d L / ln2), j = K mod L,
//   r = d - K ln2/L,  |r| <= ln2/(2L) = 0.0108 (L = 32) or 0.0433 (L = 8),
// so the polynomial for e^r is short. (AVX2 used L = 16 before: two vpermps
// and a blend per lookup, and 16 registers could not hold the loop's
// constants and sums, which spilled; L = 8 with one more polynomial term
// is fewer instructions and no spills.) The table holds T_j = 2^(j/L) rounded to
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
//   binade). L = 8 (AVX2): a quartic and an exact first reduction step
//   (ExpLive), measured 0.538 ulp at most over every float d in [-104, 0].
//   The degree-7 path above is within 0.75 ulp.
// bfloat16: e = T' + T' r p(r), p(r) = c1 + c2 r (L = 32, minimax: 0.90 u) or
//   1 + c2 r + c3 r^2 (L = 16, 0.039 u; L = 8, 0.66 u, with the two-constant
//   reduction: 2.84 u in all over every float d in [-104, 0]); T_j
//   rounded (<= 0.5 u), rho dropped;
//   one-constant reduction (|K| |ln2/L - float(ln2/L)| <= 4801 * 5.96e-11 =
//   2.9e-7, only for weights below e^-83; <= 0.96 u for weights above e^-20).
//   Within about 2.5 u (1.5e-7) relative in all: a bf16 rounding goes the
//   wrong way only within 1.5e-7 relative of a midpoint.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
constexpr int kTabBits = 5;
#elif HWY_TARGET == HWY_AVX2
constexpr int kTabBits = 3;
#else
constexpr int kTabBits = 0;
#endif
constexpr int kTabL = 1 << kTabBits;
// L/ln2, and ln2/L as a float plus its remainder (Cody-Waite).
constexpr float kTabLOverLn2 = kTabBits == 5   ? 0x1.715476p+5f
                               : kTabBits == 4 ? 0x1.715476p+4f
                                               : 0x1.715476p+3f;
constexpr float kTabLn2OverL = kTabBits == 5   ? 0x1.62e43p-6f
                               : kTabBits == 4 ? 0x1.62e43p-5f
                                               : 0x1.62e43p-4f;
constexpr float kTabLn2OverLLo = kTabBits == 5   ? -0x1.05c61p-34f
                                 : kTabBits == 4 ? -0x1.05c61p-33f
                                                 : -0x1.05c61p-32f;
// float32: e^r - 1 ~ r + r^2 (c2 + c3 r [+ c4 r^2]), interpolated at
// Chebyshev nodes: the cubic (L = 32, 16) or the quartic (L = 8, c2 = 1/2;
// truncation 3.5e-10 = 0.006 u relative on |r| <= 1.01 ln2/16).
constexpr float kTabF32C2 = kTabBits == 5 ? 0x1.00007ap-1f : kTabBits == 4 ? 0x1.0001ecp-1f : 0.5f;
constexpr float kTabF32C3 = kTabBits == 5   ? 0x1.5555b8p-3f
                            : kTabBits == 4 ? 0x1.5556dep-3f
                                            : 0x1.555b9cp-3f;
constexpr float kTabF32C4 = 0x1.555984p-5f;  // L = 8 only
// bfloat16: e^r ~ 1 + r (c1 + c2 r + c3 r^2): the minimax quadratic (L = 32,
// c3 = 0 and not evaluated), the float32 cubic (L = 16), or the cubic
// interpolated at Chebyshev nodes (L = 8: 0.66 u relative).
constexpr float kTabBF16C1 = kTabBits == 5 ? 0x1.0000f8p+0f : 1.0f;
constexpr float kTabBF16C2 = kTabBits == 5   ? 0x1.000174p-1f
                             : kTabBits == 4 ? kTabF32C2
                                             : 0x1.0007d8p-1f;
constexpr float kTabBF16C3 = kTabBits == 5 ? 0.0f : kTabBits == 4 ? kTabF32C3 : 0x1.555b9cp-3f;

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
    } else if constexpr (kTabL == static_cast<int>(HWY_MAX_BYTES / sizeof(float))) {
      // one vector per column (AVX2, L = 8: every 4th entry)
      alignas(64) float h[kTabL], r[kTabL];
      for (int j = 0; j < kTabL; ++j) {
        h[j] = kExp2Hi32[j * (32 / kTabL)];
        r[j] = kExp2Rho32[j * (32 / kTabL)];
      }
      (void)N;
      return {hn::Load(d, h), hn::Zero(d), hn::Load(d, r), hn::Zero(d)};
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
  static_assert(kTabBits == 3);  // one vpermps over the 8 entries of t0
  (void)t1;
  return VF{_mm256_permutevar8x32_ps(t0.raw, _mm256_castps_si256(kf.raw))};
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
// bfloat16 rows: r = dh - K ln2/L, with the remainder term where L = 8 (the
// one-constant error |K| |ln2/8 - float(ln2/8)| would reach 2.9e-7 at K =
// -1200, 7.3 u in all; with it the float value before the bf16 rounding is
// within 2.84 u over every float argument in [-104, 0]).
HWY_INLINE VF TabReduceBF16(DF d, VF k, VF dh) {
  const VF r = TabReduce(d, k, dh);
  if constexpr (kTabBits == 3) return hn::NegMulAdd(k, hn::Set(d, kTabLn2OverLLo), r);
  return r;
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
    const VF r = TabReduceBF16(d, k, dh);
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
//   smallest subnormal), evaluated at dh = -104 (dl is left as it is: the
//   lane may go NaN on the way, and is zeroed at the end). Exact zeros
//   matter: a lane that saw only masked logits must stay empty (S = 0), and
//   a single live logit must give H = 0 exactly.
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
  }
  VF e;
  if constexpr (!kAcc) {
    (void)dl;
    VF P, u;
    ExpPartsBF16(d, tab, dh, P, u);
    e = hn::Mul(P, u);
  } else if constexpr (kTabBits == 3) {
    // L = 8 (AVX2: one vpermps per table). r0 = dh - K float(ln2/8) is exact
    // (one FMA: K float(ln2/8) is a multiple of 2^-27 and, for K != 0,
    // |dh| > ln2/16 puts dh on a grid of 2^-28 or coarser, so the difference,
    // below 2^-4, fits 24 bits; checked for every float dh in [-104, 0]).
    // rl = dl - K (ln2/8 - float(ln2/8)) is tiny (|rl| < 4e-6, rounding
    // < 2^-42), r = r0 + rl only feeds the polynomial, and
    //   q' = r0 + (r^2 (c2 + c3 r + c4 r^2) + (rho + rl)),
    //   e  = T' + T' q'
    // round q' once (<= 2^-29 absolute) and e once. Checked exhaustively
    // against exp in long double over every float dh in [-104, 0] (half of
    // them with a random dl, |dl| <= ulp(dh)/2): max 0.538 ulp.
    VF k;
    const VF kf = TabK(d, dh, k);
    const VF T = hn::BitCast(d, hn::Add(hn::BitCast(di, Lut(tab.h0, tab.h1, kf)), TabExp(d, kf)));
    const VF r0 = TabReduce(d, k, dh);
    const VF rl = hn::NegMulAdd(k, hn::Set(d, kTabLn2OverLLo), dl);
    const VF r = hn::Add(r0, rl);
    const VF p = hn::MulAdd(hn::MulAdd(hn::Set(d, kTabF32C4), r, hn::Set(d, kTabF32C3)), r,
                            hn::Set(d, kTabF32C2));
    const VF b = hn::MulAdd(hn::Mul(r, r), p, hn::Add(Lut(tab.r0, tab.r1, kf), rl));
    e = hn::MulAdd(T, hn::Add(r0, b), T);
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
// ever forming a subnormal in floating point (x86 takes a microcode assist for
// each): results below 2^-126 (q < 2^-30) are k 2^-149 with k = q 2^53
// rounded to an integer, done by one float add: v = q 2^53 < 2^23 is exact,
// and v + 2^23 lies in [2^23, 2^24), whose ulp is 1, so the add rounds v to
// the nearest integer (ties to even, as 2^23 is even) and leaves k in the low
// mantissa bits: bits(v + 2^23) - bits(2^23) is the subnormal's encoding (or
// 2^-126's when k = 2^23). Checked against the exact rounding for every
// normal q below 2^-30.
//
// ScaleDown96 checks each vector and takes the integer form only where a
// lane needs it. On rows where a few percent of the weights are subnormal
// that branch mispredicts, and on a row streamed from memory each
// mispredict also drops the loads in flight (2^20 weights, 9 % of them
// subnormal: 4.7x the blend on AVX2, softmax_bench scale_f32_form).
// ScaleDown96Blend computes both forms and blends them (no branch, a few
// more operations). The same bits either way.
HWY_INLINE VF ScaleDown96Blend(DF d, VF q) {
  const VF kLow = hn::Set(d, 9.313225746154785e-10f);    // 2^-30: q * 2^-96 >= 2^-126
  const VF kDown = hn::Set(d, 1.2621774483536189e-29f);  // 2^-96
  const hn::RebindToSigned<DF> di;
  const VF normal = hn::Mul(hn::Max(q, kLow), kDown);
  const VF t = hn::MulAdd(hn::Min(q, kLow), hn::Set(d, 9007199254740992.0f),  // 2^53
                          hn::Set(d, 8388608.0f));                            // + 2^23
  const VF sub = hn::BitCast(d, hn::Sub(hn::BitCast(di, t), hn::Set(di, 0x4B000000)));
  return hn::IfThenElse(hn::Lt(q, kLow), sub, normal);
}

// How a pass brings its products down by 2^-96 (MulR):
// - kSubCheck: ScaleDown96 (a check per vector);
// - kSubNone: a multiply, for results the caller knows are normal (or 0);
// - kSubBlend: ScaleDown96Blend (no branch);
// - kSubAdaptive (a whole pass, SubTrack; rows of kSubAdaptiveMinN or
//   more): per block of 16 vectors, the check, or the blend after a block
//   where at least two vectors needed the integer form, until a block where
//   none did.
enum SubForm : int { kSubCheck = 0, kSubNone = 1, kSubBlend = 2, kSubAdaptive = 3 };
// The shortest row whose passes take kSubAdaptive rather than kSubCheck.
// While the row is in L2 a mispredict costs less than the blend's operations;
// once it streams from L3 or memory the lost loads dominate. On a Zen 5, the
// scale pass of an N(0, 15^2) row (5-9 % of its weights subnormal), checked
// against adaptive (softmax_bench, scale_f32_form): AVX2 2^18: 39.7 against
// 48.6 us, 2^19: 386.9 against 93.5; AVX-512 2^18: 38.2 against 36.4.
constexpr std::int64_t kSubAdaptiveMinN = std::int64_t{1} << 19;
// f(std::integral_constant<int, form>) with the form a pass over n weights
// takes: kSubNone when every weight is normal, kSubAdaptive for rows of
// kSubAdaptiveMinN or more, else kSubCheck (always under checked_forms_only).
template <class F>
HWY_INLINE void WithSubForm(bool normal, std::int64_t n, const F& f) {
  if (checked_forms_only()) return f(std::integral_constant<int, kSubCheck>{});
  if (normal) return f(std::integral_constant<int, kSubNone>{});
  if (n >= kSubAdaptiveMinN) return f(std::integral_constant<int, kSubAdaptive>{});
  return f(std::integral_constant<int, kSubCheck>{});
}

// What a block of kSubAdaptive saw: vectors that took ScaleDown96's integer
// form (check), or lanes that needed it (blend).
struct SubTrack {
  int slow = 0;
  MF need;
};
HWY_INLINE VF ScaleDown96(DF d, VF q, SubTrack* track = nullptr) {
  const VF kLow = hn::Set(d, 9.313225746154785e-10f);  // 2^-30
  if (HWY_LIKELY(hn::AllTrue(d, hn::Or(hn::Ge(q, kLow), hn::Eq(q, hn::Zero(d))))))
    return hn::Mul(q, hn::Set(d, 1.2621774483536189e-29f));  // 2^-96
  if (track) ++track->slow;
  return ScaleDown96Blend(d, q);
}

// p = E * (r_hi + r_lo) for E = exp(d) 2^32: the product is formed as
// E * (r 2^64) (normal range, one rounding, the small product first) and
// brought down by 2^-96 (exact, or one integer rounding for subnormal
// weights), in the form kSub says (kSubCheck, kSubNone or kSubBlend); every
// form gives the same bits. With a track, the form's findings are noted.
template <int kSub = kSubCheck>
HWY_INLINE VF MulR(VF e, VF rh, VF rl, SubTrack* track = nullptr) {
#if HWY_NATIVE_FMA
  const VF q = hn::MulAdd(e, rh, hn::Mul(e, rl));
#else  // no FMA: p + (err(e rh) + e rl), Dekker's exact error term
  const VF p = hn::Mul(e, rh);
  const VF q = hn::Add(p, hn::Add(ProdErr(DF(), e, rh, p), hn::Mul(e, rl)));
#endif
  const DF d;
  if constexpr (kSub == kSubNone) {
    (void)track;
    return hn::Mul(q, hn::Set(d, 1.2621774483536189e-29f));  // 2^-96
  } else if constexpr (kSub == kSubBlend) {
    if (track)
      track->need = hn::Or(track->need, hn::And(hn::Lt(q, hn::Set(d, 9.313225746154785e-10f)),
                                                hn::Lt(hn::Zero(d), q)));
    return ScaleDown96Blend(d, q);
  } else {
    return ScaleDown96(d, q, track);
  }
}

// The blocks of 16 vectors of a pass of kSubAdaptive, from i to len (whole
// pairs of vectors): block(end, sub, track) handles [i, end) in the form sub
// (an std::integral_constant<int, SubForm>) and advances i; the form of the
// next block follows from the track. Other forms: every block in kForm.
template <int kForm, class Block>
HWY_INLINE void SubBlocks(DF d, std::size_t& i, std::size_t len, const Block& block) {
  const std::size_t N = hn::Lanes(d);
  const std::size_t last = i + (len - std::min(i, len)) / (2 * N) * (2 * N);
  if constexpr (kForm != kSubAdaptive) {
    while (i < last) {
      SubTrack t;
      block(std::min(last, i + 16 * N), std::integral_constant<int, kForm>{}, t);
    }
  } else {
    bool blend = false;
    while (i < last) {
      const std::size_t end = std::min(last, i + 16 * N);
      SubTrack t;
      if (blend) {
        t.need = hn::Lt(hn::Zero(d), hn::Zero(d));  // all false
        block(end, std::integral_constant<int, kSubBlend>{}, t);
        blend = !hn::AllFalse(d, t.need);
      } else {
        block(end, std::integral_constant<int, kSubCheck>{}, t);
        blend = t.slow >= 2;
      }
    }
  }
}
constexpr float kTwo64 = 18446744073709551616.0f;  // 2^64
}  // namespace HWY_NAMESPACE
}  // namespace sa::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // SA_KERNELS_CPU_VEC_EXP_INL_H_
