// The log-softmax output pass of the CPU kernel: (x - m) s - L in double
// lanes, one rounding.
// Compiled once per instruction set by foreach_target.h; the exported
// wrappers at the bottom pick the best one at run time.
#include "kernels/cpu/row_ops.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/row_log_softmax.cpp"
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
void LogSoftmaxF32(const float* x, float* y, std::int64_t n, float m, double s, double L) {
  LogSoftmax(x, y, n, m, s, L);
}
void LogSoftmaxBF16(const std::uint16_t* x, std::uint16_t* y, std::int64_t n, float m, double s,
                    double L) {
  LogSoftmax(x, y, n, m, s, L);
}

}  // namespace HWY_NAMESPACE
}  // namespace sa::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sa::kernels::cpu {

HWY_EXPORT(LogSoftmaxF32);
HWY_EXPORT(LogSoftmaxBF16);

void row_log_softmax_f32(const float* x, float* y, std::int64_t n, float m, double s, double L) {
  HWY_DYNAMIC_DISPATCH(LogSoftmaxF32)(x, y, n, m, s, L);
}
void row_log_softmax_bf16(const std::uint16_t* x, std::uint16_t* y, std::int64_t n, float m,
                          double s, double L) {
  HWY_DYNAMIC_DISPATCH(LogSoftmaxBF16)(x, y, n, m, s, L);
}

}  // namespace sa::kernels::cpu
#endif  // HWY_ONCE
