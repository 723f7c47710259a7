// float16 rows of the CPU kernel: whole-row conversions between float16
// storage and the float32 rows the float32 algorithms work on (exact widening;
// one round-to-nearest-even narrowing, subnormals and overflow as IEEE does
// them). Compiled once per instruction set by foreach_target.h; the exported
// wrappers at the bottom pick the best one at run time.
#include <cstdint>
#include <cstring>

#include "kernels/cpu/row_ops.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/row_f16.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/vec_types-inl.h"
#include "kernels/cpu/vec_load_store-inl.h"

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

}  // namespace HWY_NAMESPACE
}  // namespace sa::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sa::kernels::cpu {

HWY_EXPORT(WidenF16);
HWY_EXPORT(NarrowF16);

void row_widen_f16(const std::uint16_t* x, float* y, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(WidenF16)(x, y, n);
}
void row_narrow_f16(const float* x, std::uint16_t* y, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(NarrowF16)(x, y, n);
}

}  // namespace sa::kernels::cpu
#endif  // HWY_ONCE
