// bfloat16 storage: the upper 16 bits of an IEEE float32.
//
// Conversion from float32 rounds to nearest, ties to even, and is exact for
// every float32 input (no double rounding): NaN stays NaN (quiet), ±inf stay,
// finite values that round past the largest bfloat16 become ±inf, and float32
// subnormals round on the same bit grid (bfloat16 shares float32's exponent
// field). Conversion to float32 is exact.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/host_device.hpp"

namespace sa {

SA_HD inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
SA_HD inline float float_from_bits(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

SA_HD inline std::uint16_t bf16_from_float(float f) {
  std::uint32_t u = float_bits(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0)
    return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // quiet NaN, sign kept
  const std::uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;  // round to nearest even on bit 16; carries into the exponent correctly
  return static_cast<std::uint16_t>(u >> 16);
}

SA_HD inline float float_from_bf16(std::uint16_t b) {
  return float_from_bits(static_cast<std::uint32_t>(b) << 16);
}

// Rounds a float32 value to the nearest bfloat16 and back (the value a bfloat16
// kernel actually sees).
SA_HD inline float round_to_bf16(float f) { return float_from_bf16(bf16_from_float(f)); }

}  // namespace sa
