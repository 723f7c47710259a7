// 8-bit floating-point storage (the OCP 8-bit formats attention kernels take):
//
//   e4m3 ("E4M3FN"): sign, 4 exponent bits (bias 7), 3 mantissa bits.
//        No infinities; S.1111.111 is NaN (0x7f, 0xff); largest finite 448;
//        smallest normal 2^-6; smallest subnormal 2^-9.
//   e5m2: sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like:
//        S.11111.00 is inf, S.11111.xx (xx != 0) NaN; largest finite 57344;
//        smallest normal 2^-14; smallest subnormal 2^-16.
//
// Decoding is exact. Encoding rounds a float32 to nearest, ties to even, on the
// format's grid (subnormals included), in one step (no double rounding).
// Overflow saturates to the largest finite value when `saturate` is true (what
// FP8 attention kernels do when they quantise P or outputs) and otherwise
// gives NaN for e4m3 (it has no infinity) and inf for e5m2. NaN stays NaN.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.hpp"

namespace sa {

enum class Fp8Format { e4m3, e5m2 };

struct Fp8Layout {
  int exp_bits, man_bits, bias;
  float max_finite;
};

SA_HD constexpr Fp8Layout fp8_layout(Fp8Format f) {
  return f == Fp8Format::e4m3 ? Fp8Layout{4, 3, 7, 448.0f} : Fp8Layout{5, 2, 15, 57344.0f};
}

// Exact value of an 8-bit pattern.
SA_HD inline float fp8_to_float(std::uint8_t b, Fp8Format f) {
  const Fp8Layout L = fp8_layout(f);
  const bool neg = (b & 0x80u) != 0;
  const int e = (b >> L.man_bits) & ((1 << L.exp_bits) - 1);
  const int m = b & ((1 << L.man_bits) - 1);
  const int emax_field = (1 << L.exp_bits) - 1;
  float v;
  if (f == Fp8Format::e4m3 && e == emax_field && m == (1 << L.man_bits) - 1) {
    v = NAN;
  } else if (f == Fp8Format::e5m2 && e == emax_field) {
    v = m == 0 ? INFINITY : NAN;
  } else if (e == 0) {
    v = std::ldexp(static_cast<float>(m), 1 - L.bias - L.man_bits);
  } else {
    v = std::ldexp(static_cast<float>(m + (1 << L.man_bits)), e - L.bias - L.man_bits);
  }
  return neg ? -v : v;
}

// Nearest 8-bit pattern (ties to even) to x; see the header comment for overflow.
SA_HD inline std::uint8_t fp8_from_float(float x, Fp8Format f, bool saturate) {
  const Fp8Layout L = fp8_layout(f);
  const std::uint8_t sign = std::signbit(x) ? 0x80u : 0x00u;
  // S.1111.111 (e4m3's only NaN) is also a NaN of e5m2 (S.11111.11).
  if (std::isnan(x)) return static_cast<std::uint8_t>(sign | 0x7fu);
  const float a = std::fabs(x);
  const std::uint8_t max_pat =
      f == Fp8Format::e4m3 ? 0x7eu : 0x7bu;  // 0.1111.110 = 448, 0.11110.11 = 57344
  const std::uint8_t inf_pat = f == Fp8Format::e4m3 ? 0x7fu : 0x7cu;
  if (std::isinf(a)) return static_cast<std::uint8_t>(sign | (saturate ? max_pat : inf_pat));
  // Quantum of the binade holding a (subnormal binade below 2^(1-bias)).
  int e;
  std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1): binade exponent e - 1
  int binade = e - 1;
  const int emin = 1 - L.bias;
  if (binade < emin) binade = emin;
  const float quantum = std::ldexp(1.0f, binade - L.man_bits);
  // a / quantum is exact in float (a power-of-two scaling unless it underflows,
  // which cannot happen: quantum >= 2^-16 and a is a float32).
  const float q = a / quantum;
  float r = std::nearbyint(q);  // the default rounding mode: nearest, ties to even
  const float v = r * quantum;
  if (v > L.max_finite) {
    // Values at or above max + half an ulp overflow (ties round to the even
    // pattern, which is the overflow one for both formats).
    return static_cast<std::uint8_t>(sign | (saturate ? max_pat : inf_pat));
  }
  if (v == 0.0f) return sign;
  int ve;
  std::frexp(v, &ve);
  int vb = ve - 1;
  if (vb < emin) {  // subnormal
    return static_cast<std::uint8_t>(sign | static_cast<std::uint8_t>(r));
  }
  const int man = static_cast<int>(std::ldexp(v, L.man_bits - vb)) - (1 << L.man_bits);
  const int field = vb + L.bias;
  return static_cast<std::uint8_t>(sign | (field << L.man_bits) | man);
}

// The value an fp8 kernel sees for x (round to nearest even, saturating).
SA_HD inline float round_to_fp8(float x, Fp8Format f) {
  return fp8_to_float(fp8_from_float(x, f, true), f);
}

// The smallest e in -127..127 with every finite |x| / 2^e at most mx (0 for
// an all-zero run), for any format's largest value mx (fp8's below, fp4's 6).
inline int block_exponent(float mx, const float* x, std::int64_t n) {
  float amax = 0.0f;
  for (std::int64_t i = 0; i < n; ++i)
    if (std::isfinite(x[i])) amax = std::fabs(x[i]) > amax ? std::fabs(x[i]) : amax;
  if (amax == 0.0f) return 0;
  int e = std::ilogb(amax) - std::ilogb(mx) - 1;
  while (std::ldexp(amax, -e) > mx) ++e;
  while (e > -127 && std::ldexp(amax, -(e - 1)) <= mx) --e;
  return e < -127 ? -127 : e > 127 ? 127 : e;
}

// The E8M0 exponent e of one run of n block-scaled values (OCP MX; kernel.h
// scale_block): the smallest e in -127..127 with every finite |x| / 2^e at
// most the format's largest value, so the elements x / 2^e keep the most
// precision. If any exponent makes every x / 2^e an fp8 value, this one
// does (an fp8 value scaled up by a power of two, staying at most the
// largest value, stays one). An all-zero (or NaN) run gets 0.
inline int fp8_block_exponent(Fp8Format f, const float* x, std::int64_t n) {
  return block_exponent(fp8_layout(f).max_finite, x, n);
}

}  // namespace sa
