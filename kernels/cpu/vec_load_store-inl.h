// Per-dtype loads and stores of the CPU row operations: float32 as is,
// bfloat16 widened exactly and rounded to nearest even on store, and the
// -inf-padded tail buffer that lets a row's last partial vector use the
// same arithmetic.
// Highway per-target header: included by the row_*.cpp files after
// foreach_target.h, once per instruction set (hence the toggled guard).
#if defined(SA_KERNELS_CPU_VEC_LOAD_STORE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SA_KERNELS_CPU_VEC_LOAD_STORE_INL_H_
#undef SA_KERNELS_CPU_VEC_LOAD_STORE_INL_H_
#else
#define SA_KERNELS_CPU_VEC_LOAD_STORE_INL_H_
#endif

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "hwy/highway.h"
#include "kernels/cpu/vec_types-inl.h"

HWY_BEFORE_NAMESPACE();
namespace sa::kernels::cpu {
namespace HWY_NAMESPACE {
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

// ---------------------------------------------------------------- float16
#if (HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL) && \
    !defined(HWY_DISABLE_F16C)
// F16C (AVX2) and AVX-512F conversions: widening is exact; narrowing uses
// the rounding given in the instruction (nearest even, whatever MXCSR says),
// with gradual underflow, overflow to inf and NaN kept quiet with its top
// payload bits: the same bits as core/float16.hpp (tests/cpu checks every
// encoding and every midpoint on each target). The portable forms are below.
HWY_INLINE VF LoadF16(DF, const std::uint16_t* p) {
#if HWY_TARGET == HWY_AVX2
  return VF{_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
#else
  return VF{_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
#endif
}
HWY_INLINE void StoreF16(DF, VF v, std::uint16_t* p) {
#if HWY_TARGET == HWY_AVX2
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm256_cvtps_ph(v.raw, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#else
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                      _mm512_cvtps_ph(v.raw, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
}
#else
// float16 (IEEE binary16) -> float32, exact for every encoding (the same
// values as core/float16.hpp's float_from_f16): normal values rebias the
// exponent (+112); inf/NaN map to exponent 255 (NaN made quiet); subnormals
// k 2^-24 are formed as (2^-14 + k 2^-24) - 2^-14, exact in float32.
HWY_INLINE VF LoadF16(DF d, const std::uint16_t* p) {
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<std::uint16_t, DF> du16;
  const hn::RebindToUnsigned<DF> du32;
  const auto h = hn::BitCast(di, hn::PromoteTo(du32, hn::LoadU(du16, p)));
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(di, 0x8000)));
  const auto em = hn::And(h, hn::Set(di, 0x7fff));
  const auto sh = hn::ShiftLeft<13>(em);
  auto bits = hn::Add(sh, hn::Set(di, 112 << 23));
  const auto special = hn::Gt(em, hn::Set(di, 0x7bff));
  const auto nan_quiet = hn::IfThenElseZero(hn::Gt(em, hn::Set(di, 0x7c00)), hn::Set(di, 0x400000));
  bits = hn::IfThenElse(special, hn::Or(hn::Add(sh, hn::Set(di, 224 << 23)), nan_quiet), bits);
  const VF sub = hn::Sub(hn::BitCast(d, hn::Add(sh, hn::Set(di, 113 << 23))), hn::Set(d, 0x1p-14f));
  const VF mag =
      hn::IfThenElse(hn::RebindMask(d, hn::Lt(em, hn::Set(di, 0x400))), sub, hn::BitCast(d, bits));
  return hn::BitCast(d, hn::Or(hn::BitCast(di, mag), sign));
}
// float32 -> float16, round to nearest even, the same bits as
// core/float16.hpp's f16_from_float for every float32 (overflow to inf at
// 65520, gradual underflow, NaN quiet): normal results add 0xfff + (bit 13)
// and rebias; results below 2^-14 are |v| + 0.5 rounded by one float add to
// the 2^-24 grid (0.5's ulp), whose low bits are then k (default rounding
// mode; FTZ/DAZ only affect float32 subnormals, which round to 0 anyway).
HWY_INLINE void StoreF16(DF d, VF v, std::uint16_t* p) {
  // Unsigned lanes for the sums (they wrap for the inf/NaN lanes, which are
  // replaced below; signed lanes would overflow), signed lanes to compare.
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<std::uint16_t, DF> du16;
  const auto u = hn::BitCast(du, v);
  const auto au = hn::And(u, hn::Set(du, 0x7fffffffu));
  const auto a = hn::BitCast(di, au);  // |v|'s bits, >= 0
  const auto sign = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 0x8000u));
  const auto r =
      hn::Add(au, hn::Add(hn::Set(du, 0xfffu), hn::And(hn::ShiftRight<13>(au), hn::Set(du, 1u))));
  auto h = hn::BitCast(di, hn::ShiftRight<13>(hn::Sub(r, hn::Set(du, 0x38000000u))));
  const auto sub =
      hn::BitCast(di, hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(d, au), hn::Set(d, 0.5f))),
                              hn::Set(du, 0x3f000000u)));
  h = hn::IfThenElse(hn::Lt(a, hn::Set(di, 0x38800000)), sub, h);
  h = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x477fefff)), hn::Set(di, 0x7c00), h);
  const auto nan = hn::Or(hn::Set(di, 0x7e00), hn::And(hn::ShiftRight<13>(a), hn::Set(di, 0x3ff)));
  h = hn::IfThenElse(hn::Gt(a, hn::Set(di, 0x7f800000)), nan, h);
  hn::StoreU(hn::DemoteTo(du16, hn::Or(h, hn::BitCast(di, sign))), du16, p);
}
#endif  // float16 conversions
}  // namespace HWY_NAMESPACE
}  // namespace sa::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // SA_KERNELS_CPU_VEC_LOAD_STORE_INL_H_
