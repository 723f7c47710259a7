// float16 rows of the CPU kernel: whole-row conversions between float16
// storage and the float32 rows the float32 algorithms work on (exact widening;
// one round-to-nearest-even narrowing, subnormals and overflow as IEEE does
// them). Compiled once per instruction set by foreach_target.h; the exported
// wrappers at the bottom pick the best one at run time.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/cpu/row_ops.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/row_f16.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/vec_types-inl.h"
#include "kernels/cpu/vec_load_store-inl.h"
#include "kernels/cpu/vec_exp-inl.h"

HWY_BEFORE_NAMESPACE();
namespace sa::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void WidenF16(const std::uint16_t* x, float* y, std::int64_t n) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  for (; i + N <= len; i += N) hn::StoreU(LoadF16(d, x + i), d, y + i);
  if (i < len) {
    alignas(64) std::uint16_t in[kMaxLanes] = {};
    alignas(64) float out[kMaxLanes];
    std::memcpy(in, x + i, (len - i) * sizeof(std::uint16_t));
    hn::Store(LoadF16(d, in), d, out);
    std::memcpy(y + i, out, (len - i) * sizeof(float));
  }
}

void NarrowF16(const float* x, std::uint16_t* y, std::int64_t n) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  for (; i + N <= len; i += N) StoreF16(d, hn::LoadU(d, x + i), y + i);
  if (i < len) {
    alignas(64) float in[kMaxLanes] = {};
    alignas(64) std::uint16_t out[kMaxLanes];
    std::memcpy(in, x + i, (len - i) * sizeof(float));
    StoreF16(d, hn::Load(d, in), out);
    std::memcpy(y + i, out, (len - i) * sizeof(std::uint16_t));
  }
}

// WidenF16 and the row's (min, max) in the same pass (NaN: unspecified).
void WidenRangeF16(const std::uint16_t* x, float* y, std::int64_t n, float* lo, float* hi) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF pinf = hn::Set(d, std::numeric_limits<float>::infinity());
  VF m0 = hn::Neg(pinf), m1 = m0, l0 = pinf, l1 = pinf;
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  for (; i + 2 * N <= len; i += 2 * N) {
    const VF a = LoadF16(d, x + i), b = LoadF16(d, x + i + N);
    hn::StoreU(a, d, y + i);
    hn::StoreU(b, d, y + i + N);
    m0 = hn::Max(m0, a);
    m1 = hn::Max(m1, b);
    l0 = hn::Min(l0, a);
    l1 = hn::Min(l1, b);
  }
  float h = hn::GetLane(hn::MaxOfLanes(d, hn::Max(m0, m1)));
  float l = hn::GetLane(hn::MinOfLanes(d, hn::Min(l0, l1)));
  if (i < len) {
    WidenF16(x + i, y + i, static_cast<std::int64_t>(len - i));
    for (; i < len; ++i) {
      h = std::max(h, y[i]);
      l = std::min(l, y[i]);
    }
  }
  *lo = l;
  *hi = h;
}

// y (float16) = e * (r_hi + r_lo) for biased float exps e: MulR (the bits of
// row_scale_f32) rounded once to float16 (the bits of row_narrow_f16).
template <int kForm>
void ScaleToF16T(const float* e, std::uint16_t* y, std::int64_t n, float rhf, float rlf) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF rh = hn::Set(d, rhf * kTwo64), rl = hn::Set(d, rlf * kTwo64);
  const std::size_t len = static_cast<std::size_t>(n);
  std::size_t i = 0;
  SubBlocks<kForm>(d, i, len, [&](std::size_t end, auto sub, SubTrack& t) SA_VEC_LAMBDA {
    constexpr int kS = decltype(sub)::value;
    for (; i < end; i += 2 * N) {
      StoreF16(d, MulR<kS>(hn::LoadU(d, e + i), rh, rl, &t), y + i);
      StoreF16(d, MulR<kS>(hn::LoadU(d, e + i + N), rh, rl, &t), y + i + N);
    }
  });
  for (; i + N <= len; i += N) StoreF16(d, MulR(hn::LoadU(d, e + i), rh, rl), y + i);
  if (i < len) {
    alignas(64) float in[kMaxLanes] = {};
    alignas(64) std::uint16_t out[kMaxLanes];
    std::memcpy(in, e + i, (len - i) * sizeof(float));
    StoreF16(d, MulR(hn::Load(d, in), rh, rl), out);
    std::memcpy(y + i, out, (len - i) * sizeof(std::uint16_t));
  }
}
void ScaleToF16(const float* e, std::uint16_t* y, std::int64_t n, float rhf, float rlf,
                bool normal) {
  WithSubForm(normal, n, [&](auto form) { ScaleToF16T<decltype(form)::value>(e, y, n, rhf, rlf); });
}

}  // namespace HWY_NAMESPACE
}  // namespace sa::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sa::kernels::cpu {

HWY_EXPORT(WidenF16);
HWY_EXPORT(NarrowF16);
HWY_EXPORT(WidenRangeF16);
HWY_EXPORT(ScaleToF16);

void row_widen_range_f16(const std::uint16_t* x, float* y, std::int64_t n, float* lo, float* hi) {
  HWY_DYNAMIC_DISPATCH(WidenRangeF16)(x, y, n, lo, hi);
}
void row_scale_to_f16(const float* e, std::uint16_t* y, std::int64_t n, float rh, float rl,
                      bool normal) {
  HWY_DYNAMIC_DISPATCH(ScaleToF16)(e, y, n, rh, rl, normal);
}

void row_widen_f16(const std::uint16_t* x, float* y, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(WidenF16)(x, y, n);
}
void row_narrow_f16(const float* x, std::uint16_t* y, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(NarrowF16)(x, y, n);
}

}  // namespace sa::kernels::cpu
#endif  // HWY_ONCE
