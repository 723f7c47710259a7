// Vector types of the CPU row operations (float lanes, the double halves
// they widen into) and the double-lane accumulation helpers.
// Lambdas in the per-vector loops are forced inline: GCC otherwise emits
// them out of line (one call per vector, constants reloaded each time), which
// cost ~40% of the exp passes' time.
#ifndef SA_VEC_LAMBDA
#define SA_VEC_LAMBDA HWY_ATTR __attribute__((always_inline))
#endif

// Highway per-target header: included by the row_*.cpp files after
// foreach_target.h, once per instruction set (hence the toggled guard).
#if defined(SA_KERNELS_CPU_VEC_TYPES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SA_KERNELS_CPU_VEC_TYPES_INL_H_
#undef SA_KERNELS_CPU_VEC_TYPES_INL_H_
#else
#define SA_KERNELS_CPU_VEC_TYPES_INL_H_
#endif

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "hwy/highway.h"
#include "kernels/cpu/row_ops.hpp"

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

constexpr std::size_t kMaxLanes =
    HWY_MAX_BYTES / sizeof(float) < 2 ? 2 : HWY_MAX_BYTES / sizeof(float);

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
// a0 += low halves of v and w, a1 += their high halves (each pair added in
// double first).
HWY_INLINE void AccD2(VD& a0, VD& a1, VF v, VF w) {
  a0 = hn::Add(a0, hn::Add(PromLo(v), PromLo(w)));
  a1 = hn::Add(a1, hn::Add(PromHi(v), PromHi(w)));
}
HWY_INLINE double SumD(VD a) {
  const DD dd;
  return hn::GetLane(hn::SumOfLanes(dd, a));
}
}  // namespace HWY_NAMESPACE
}  // namespace sa::kernels::cpu
HWY_AFTER_NAMESPACE();

#endif  // SA_KERNELS_CPU_VEC_TYPES_INL_H_
