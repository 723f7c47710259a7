// float16 (IEEE 754 binary16) storage: 1 sign bit, 5 exponent bits (bias 15),
// 10 fraction bits; precision p = 11, unit roundoff u = 2^-11.
// Range: largest finite 65504 = (2 - 2^-10) 2^15; smallest normal 2^-14;
// subnormals k 2^-24 (k = 1 .. 1023), the smallest 2^-24.
//
// f16_from_float: float32 -> float16, round to nearest, ties to even, exact
// for every float32 input (one rounding, no double rounding): finite values
// whose rounding reaches 65520 = 65504 + half an ulp (ties go to the even
// 2^16) or more become +-inf; values below 2^-14 round on the subnormal grid
// k 2^-24 (gradual underflow; |x| <= 2^-25 gives +-0, the tie at 2^-25 going
// to the even 0); float32 subnormals give +-0; the sign of zero is kept;
// +-inf stay; NaN stays NaN (quiet bit set, sign and the top 9 payload bits
// kept). Integer arithmetic only: the result does not depend on the
// floating-point environment (rounding mode, FTZ/DAZ).
//
// float_from_f16: float16 -> float32, exact for every one of the 65,536
// encodings (every float16 value is a float32 value; NaN payloads widen into
// the high fraction bits, quiet NaN stays quiet, signalling NaN gets the
// quiet bit).
//
// Checked exhaustively (all 65,536 encodings, and every float32 neighbour of
// every float16 midpoint against MPFR's rounding) in tests/reference/rounding_test.cpp.
#pragma once

#include <cstdint>

#include "core/bfloat16.hpp"  // float_bits, float_from_bits
#include "core/host_device.hpp"

namespace sa {

SA_HD inline std::uint16_t f16_from_float(float f) {
  const std::uint32_t u = float_bits(f);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t a = u & 0x7fffffffu;
  if (a >= 0x7f800000u)  // inf, or NaN (quiet bit forced)
    return static_cast<std::uint16_t>(sign | 0x7c00u |
                                      (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u));
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: inf
  if (a >= 0x38800000u) {  // >= 2^-14: normal result; the carry may reach the exponent
    const std::uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((r - 0x38000000u) >> 13));
  }
  // Below 2^-14: k = round(|f| / 2^-24) on the subnormal grid (k = 1024 is
  // the smallest normal, whose encoding is 0x0400 = k: the carry is right).
  const std::uint32_t e = a >> 23;                       // biased float32 exponent, <= 112
  if (e < 102) return static_cast<std::uint16_t>(sign);  // |f| < 2^-25: rounds to 0
  const std::uint32_t m = (a & 0x7fffffu) | 0x800000u;   // |f| = m 2^(e - 150)
  const std::uint32_t sh = 126u - e;                     // 14 .. 24
  const std::uint32_t q = m >> sh, rem = m & ((1u << sh) - 1u), half = 1u << (sh - 1u);
  const std::uint32_t k = q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u);
  return static_cast<std::uint16_t>(sign | k);
}

SA_HD inline float float_from_f16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1fu, frac = h & 0x3ffu;
  if (e == 0x1fu)  // inf or NaN (NaN made quiet)
    return float_from_bits(sign | 0x7f800000u | (frac << 13) | (frac ? 0x400000u : 0u));
  if (e != 0) return float_from_bits(sign | ((e + 112u) << 23) | (frac << 13));
  // Subnormal or zero: frac 2^-24, exact in float32 (frac < 2^10).
  const float v = static_cast<float>(frac) * 5.9604644775390625e-8f;  // 2^-24
  return sign ? -v : v;
}

// Rounds a float32 value to the nearest float16 and back (the value a float16
// kernel actually sees).
SA_HD inline float round_to_f16(float f) { return float_from_f16(f16_from_float(f)); }

}  // namespace sa
