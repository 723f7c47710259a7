// Element access of the naive kernel: every storage type of kernel.h read as
// float (exactly) and float written back with one rounding to nearest even.
// fp8, fp4 e2m1 and int8 are input types only, so they are read, never written.
#pragma once

#include <cstdint>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "core/fp8.hpp"
#include "core/quant.hpp"
#include "softmax_audit/kernel.h"

namespace sa::kernels::naive {

inline float load(sa_dtype t, const void* p, std::int64_t i) {
  switch (t) {
    case SA_BF16:
      return float_from_bf16(static_cast<const std::uint16_t*>(p)[i]);
    case SA_F16:
      return float_from_f16(static_cast<const std::uint16_t*>(p)[i]);
    case SA_FP8_E4M3:
      return fp8_to_float(static_cast<const std::uint8_t*>(p)[i], Fp8Format::e4m3);
    case SA_FP8_E5M2:
      return fp8_to_float(static_cast<const std::uint8_t*>(p)[i], Fp8Format::e5m2);
    case SA_FP4_E2M1:  // two per byte, element i in byte i / 2 (low nibble first)
      return load_fp4(p, i);
    case SA_INT8:
      return static_cast<float>(static_cast<const std::int8_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

inline void store(sa_dtype t, void* p, std::int64_t i, float v) {
  if (t == SA_BF16)
    static_cast<std::uint16_t*>(p)[i] = bf16_from_float(v);
  else if (t == SA_F16)
    static_cast<std::uint16_t*>(p)[i] = f16_from_float(v);
  else
    static_cast<float*>(p)[i] = v;
}

}  // namespace sa::kernels::naive
