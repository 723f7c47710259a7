// Quantised attention inputs beyond fp8 (kernel.h, issue 33): fp4 e2m1 and
// int8 elements, and the block scales' three types (E8M0, e4m3, float32).
//
//   e2m1 (OCP MX v1.0's FP4): sign, 2 exponent bits (bias 1), 1 mantissa
//        bit; the magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 (codes 0..7, the
//        sign in bit 3); no infinity, no NaN. Two per byte, the element at
//        an even offset in the low four bits.
//   int8: two's complement, -128..127 (the suite draws -127..127, the
//        symmetric range quantisers use).
//   scales: E8M0 (OCP MX: 2^(x - 127), x = 255 NaN), e4m3 (NVFP4's scale
//        per 16 elements; its value, 0x7f/0xff NaN), float32.
//
// How the suite's call finds a run's scale from the case's values (which
// are element times scale): run_scale below. Everything here is exact.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/attention_case.hpp"
#include "core/fp8.hpp"

namespace sa {

// Magnitude of e2m1 code c (0..7).
inline constexpr float kFp4Magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// Exact value of a four-bit e2m1 code (the high bits of `code` ignored).
inline float fp4_to_float(std::uint8_t code) {
  const float m = kFp4Magnitudes[code & 7u];
  return (code & 8u) ? -m : m;
}

// The e2m1 code nearest to x (ties to the even code, the one with mantissa
// bit 0), saturating at +-6; NaN gives code 0 (e2m1 has none: the suite
// puts NaN in a run's scale instead).
inline std::uint8_t fp4_from_float(float x) {
  if (std::isnan(x)) return 0;
  const std::uint8_t sign = std::signbit(x) ? 8u : 0u;
  const float a = std::fabs(x);
  std::uint8_t best = 0;
  for (std::uint8_t c = 1; c < 8; ++c) {
    const float lo = kFp4Magnitudes[c - 1], hi = kFp4Magnitudes[c], mid = (lo + hi) / 2;
    if (a > mid || (a == mid && (c & 1u) == 0)) best = c;
  }
  return static_cast<std::uint8_t>(sign | best);
}

inline float round_to_fp4(float x) { return std::isnan(x) ? x : fp4_to_float(fp4_from_float(x)); }

// The nearest integer (ties to even) in -127..127; NaN stays NaN.
inline float round_to_int8(float x) {
  if (std::isnan(x)) return x;
  const float r = std::nearbyint(x);
  return r > 127.0f ? 127.0f : r < -127.0f ? -127.0f : r;
}

inline const char* name_of(ScaleType s) {
  switch (s) {
    case ScaleType::e8m0:
      return "e8m0";
    case ScaleType::e4m3:
      return "e4m3";
    case ScaleType::f32:
      return "f32";
  }
  return "?";
}

// The largest finite element of a quantised input type.
inline float quant_max(AttnType t) {
  switch (t) {
    case AttnType::fp8_e4m3:
      return 448.0f;
    case AttnType::fp8_e5m2:
      return 57344.0f;
    case AttnType::fp4_e2m1:
      return 6.0f;
    case AttnType::int8:
      return 127.0f;
    default:
      return INFINITY;
  }
}

// x rounded to the element grid of a quantised type (saturating).
inline float round_to_elem(AttnType t, float x) {
  switch (t) {
    case AttnType::fp8_e4m3:
      return round_to_fp8(x, Fp8Format::e4m3);
    case AttnType::fp8_e5m2:
      return round_to_fp8(x, Fp8Format::e5m2);
    case AttnType::fp4_e2m1:
      return round_to_fp4(x);
    case AttnType::int8:
      return round_to_int8(x);
    default:
      return x;
  }
}

// Whether x is an element of quantised type t (finite, on its grid).
inline bool is_elem(AttnType t, float x) { return std::isfinite(x) && round_to_elem(t, x) == x; }

// Whether s is a scale of type st (finite, > 0, exactly representable).
inline bool is_scale(ScaleType st, float s) {
  if (!(s > 0.0f) || !std::isfinite(s)) return false;
  switch (st) {
    case ScaleType::e8m0: {
      int e;
      return std::frexp(s, &e) == 0.5f && e - 1 >= -127 && e - 1 <= 127;
    }
    case ScaleType::e4m3:
      return round_to_fp8(s, Fp8Format::e4m3) == s;
    case ScaleType::f32:
      return true;
  }
  return false;
}

// The scale the suite's call gives one run of n values x (element times
// scale) of quantised type t with scales of type st:
//   - a run holding NaN with fp4 or int8 elements (no NaN of their own):
//     NaN (the scale carries it: every element of the run is NaN);
//   - e4m3 and float32 scales: amax / (the type's largest element) when
//     that is a scale of the type and every x / s is an element with
//     (x / s) * s == x (NVFP4 and int8 quantisers' amax rule);
//   - else (and E8M0) the power of two 2^e of block_exponent, e within the
//     scale type's range (e4m3: 2^-9..2^8): a run of grid values times a
//     power of two keeps its elements on the grid (every grid here is
//     closed under doubling up to its largest value).
// The call checks that every element it then stores is exact.
inline float run_scale(AttnType t, ScaleType st, const float* x, std::int64_t n) {
  const float mx = quant_max(t);
  float amax = 0.0f;
  bool nan = false;
  for (std::int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) nan = true;
    if (std::isfinite(x[i])) amax = std::fabs(x[i]) > amax ? std::fabs(x[i]) : amax;
  }
  if (nan && !is_fp8(t)) return NAN;
  if (st != ScaleType::e8m0 && amax > 0.0f) {
    const float s = amax / mx;
    bool ok = is_scale(st, s);
    for (std::int64_t i = 0; i < n && ok; ++i)
      if (std::isfinite(x[i])) ok = is_elem(t, x[i] / s) && (x[i] / s) * s == x[i];
    if (ok) return s;
  }
  int e = block_exponent(mx, x, n);
  if (st == ScaleType::e4m3) e = e < -9 ? -9 : e > 8 ? 8 : e;
  return std::ldexp(1.0f, e);
}

// A scale's stored bits: E8M0 and e4m3 one byte, float32 four (NaN: 255,
// 0x7f, a quiet NaN).
inline std::uint32_t scale_bits(ScaleType st, float s) {
  switch (st) {
    case ScaleType::e8m0:
      return std::isnan(s) ? 255u : static_cast<std::uint32_t>(std::ilogb(s) + 127);
    case ScaleType::e4m3:
      return fp8_from_float(s, Fp8Format::e4m3, false);
    case ScaleType::f32: {
      std::uint32_t b;
      std::memcpy(&b, &s, 4);
      return b;
    }
  }
  return 0;
}
inline std::size_t scale_size(ScaleType st) { return st == ScaleType::f32 ? 4 : 1; }

// Scale idx of a scale tensor of type st (kernel.h scale_dtype), exactly.
inline float load_scale(ScaleType st, const void* base, std::int64_t idx) {
  switch (st) {
    case ScaleType::e8m0: {
      const std::uint8_t b = static_cast<const std::uint8_t*>(base)[idx];
      return b == 255 ? NAN : std::ldexp(1.0f, static_cast<int>(b) - 127);
    }
    case ScaleType::e4m3:
      return fp8_to_float(static_cast<const std::uint8_t*>(base)[idx], Fp8Format::e4m3);
    case ScaleType::f32: {
      float f;
      std::memcpy(&f, static_cast<const unsigned char*>(base) + idx * 4, 4);
      return f;
    }
  }
  return NAN;
}

// Element idx (an element offset) of a packed e2m1 buffer: byte idx / 2, the
// low four bits for even idx.
inline float load_fp4(const void* base, std::int64_t idx) {
  const std::uint8_t b = static_cast<const std::uint8_t*>(base)[idx >> 1];
  return fp4_to_float(static_cast<std::uint8_t>((idx & 1) ? b >> 4 : b & 0x0f));
}

// The descales per (sequence, kv head) the call passes for a case with
// descale_bh: for tensor 0 (q), 1 (k) or 2 (v), 2^e per (b, g) in the order
// b * heads_kv + g, e the smallest exponent that keeps every finite element
// of the slab (q: the group's query heads) within the fp8 format, as
// fp8_block_exponent gives a block's. The call divides each slab by it.
inline std::vector<float> descales_bh(const AttentionCase& c, int tensor) {
  std::vector<float> out;
  if (!c.descale_bh || !is_fp8(c.qkv)) return out;
  const Fp8Format ff = c.qkv == AttnType::fp8_e4m3 ? Fp8Format::e4m3 : Fp8Format::e5m2;
  const std::int64_t group = c.heads_q / c.heads_kv;
  const std::vector<float>& x = tensor == 0 ? c.q : tensor == 1 ? c.k : c.v;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t g = 0; g < c.heads_kv; ++g) {
      float amax = 0.0f;
      auto see = [&](std::int64_t at, std::int64_t n) {
        for (std::int64_t e = at; e < at + n; ++e) {
          const float v = x[static_cast<std::size_t>(e)];
          if (std::isfinite(v)) amax = std::max(amax, std::fabs(v));
        }
      };
      if (tensor == 0) {
        for (std::int64_t i = 0; i < c.len_q(b); ++i)
          see((c.row_q(b, i) * c.heads_q + g * group) * c.d, group * c.d);
      } else {
        const std::int64_t dim = tensor == 1 ? c.d : c.dv;
        for (std::int64_t j = 0; j < c.len_k(b); ++j)
          see((c.row_k(b, j) * c.heads_kv + g) * dim, dim);
      }
      out.push_back(std::ldexp(1.0f, fp8_block_exponent(ff, &amax, 1)));
    }
  return out;
}

}  // namespace sa
