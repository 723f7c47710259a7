// core/float16.hpp against exact arithmetic and MPFR:
// - every one of the 65,536 float16 encodings decodes to the value its fields
//   say (computed here in double from sign, exponent and fraction), and
//   encodes back to itself (NaN: to a quiet NaN with the same sign);
// - every float32 at, just below and just above every float16 midpoint (and
//   at every float16 value) encodes to MPFR's correctly rounded float16
//   (reference/rounding.hpp, gradual underflow, ties to even, overflow to inf);
// - random float32 values of every binade encode as MPFR rounds them;
// - where the compiler has _Float16, the hardware conversion agrees.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/float16.hpp"
#include "reference/rounding.hpp"

using sa::DType;
using sa::ref::Mp;

namespace {

// The value of encoding h from its fields, in double (exact).
double f16_value(std::uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 0x1f, f = h & 0x3ff;
  double v;
  if (e == 0x1f)
    v = f ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  else if (e == 0)
    v = std::ldexp(static_cast<double>(f), -24);
  else
    v = std::ldexp(1.0 + f / 1024.0, e - 15);
  return s ? -v : v;
}

// MPFR's correctly rounded float16 value of the float32 x.
double mpfr_f16(float x) { return sa::ref::round_to(DType::float16, Mp(static_cast<double>(x))); }

void expect_encodes_as_mpfr(float x) {
  const std::uint16_t h = sa::f16_from_float(x);
  const double want = mpfr_f16(x);
  ASSERT_EQ(f16_value(h), want) << "x = " << std::hexfloat << x << " encoded 0x" << std::hex << h;
  if (want == 0.0) ASSERT_EQ(std::signbit(f16_value(h)), std::signbit(x)) << std::hexfloat << x;
}

}  // namespace

TEST(Float16, EveryEncodingDecodesExactlyAndRoundTrips) {
  int nans = 0;
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    const double want = f16_value(h);
    const float got = sa::float_from_f16(h);
    if (std::isnan(want)) {
      ++nans;
      ASSERT_TRUE(std::isnan(got)) << std::hex << i;
      ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << i;
      const std::uint16_t back = sa::f16_from_float(got);
      ASSERT_EQ(back, h | 0x0200) << std::hex << i;  // quiet, same payload and sign
      continue;
    }
    ASSERT_EQ(static_cast<double>(got), want) << std::hex << i;
    ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << i;
    ASSERT_EQ(sa::f16_from_float(got), h) << std::hex << i;
    ASSERT_EQ(sa::round_to_f16(got), got) << std::hex << i;
  }
  EXPECT_EQ(nans, 2 * 1023);  // exponent 31 with a nonzero fraction, both signs
}

TEST(Float16, RangeConstantsAsStated) {
  EXPECT_EQ(sa::float_from_f16(0x7bff), 65504.0f);
  EXPECT_EQ(sa::float_from_f16(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(sa::float_from_f16(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(sa::f16_from_float(65519.996f), 0x7bff);
  EXPECT_EQ(sa::f16_from_float(65520.0f), 0x7c00);  // tie to the even 2^16: overflow
  EXPECT_EQ(sa::f16_from_float(-65520.0f), 0xfc00);
  EXPECT_EQ(sa::f16_from_float(std::ldexp(1.0f, -25)), 0x0000);  // tie to the even 0
  EXPECT_EQ(sa::f16_from_float(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(sa::f16_from_float(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 ulp ties to even 2
  EXPECT_EQ(sa::f16_from_float(-0.0f), 0x8000);
  EXPECT_EQ(sa::f16_from_float(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(sa::f16_from_float(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even 1
  EXPECT_EQ(sa::f16_from_float(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie to even up
}

// Every float16 value v, the midpoints between neighbours, and the float32
// values one float32 ulp either side of each: these are the inputs where a
// wrong rounding (truncation, ties away, double rounding, a lost subnormal)
// shows. Compared with MPFR's correctly rounded float16.
TEST(Float16, MidpointsAndNeighboursMatchMpfr) {
  sa::ref::PrecisionScope prec(64);
  for (std::uint32_t i = 0; i < 0x7c00; ++i) {  // every finite non-negative encoding
    const float v = sa::float_from_f16(static_cast<std::uint16_t>(i));
    const float next = i + 1 < 0x7c00 ? sa::float_from_f16(static_cast<std::uint16_t>(i + 1))
                                      : 65536.0f;  // the tie above the largest finite value
    const float mid = static_cast<float>((static_cast<double>(v) + next) / 2);  // exact
    for (float s : {1.0f, -1.0f}) {
      for (float x : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY),
                      std::nextafter(v, INFINITY)}) {
        expect_encodes_as_mpfr(s * x);
      }
    }
  }
  for (float x : {std::numeric_limits<float>::infinity(), 1e30f, 65536.0f, 70000.0f})
    for (float s : {1.0f, -1.0f}) expect_encodes_as_mpfr(s * x);
}

RC_GTEST_PROP(Float16, RandomFloat32MatchesMpfr, ()) {
  const int e = *rc::gen::inRange(-30, 18);  // below the subnormals to past overflow
  const auto frac = *rc::gen::inRange<std::uint32_t>(0, 1u << 23);
  const float x = std::ldexp(1.0f + static_cast<float>(frac) * 0x1p-23f, e) *
                  (*rc::gen::arbitrary<bool>() ? 1.0f : -1.0f);
  const double want = sa::ref::round_to(DType::float16, Mp(static_cast<double>(x)));
  RC_ASSERT(f16_value(sa::f16_from_float(x)) == want);
}

#if defined(__FLT16_MAX__)  // _Float16 exists (gcc 12; not clang 14 on x86)
TEST(Float16, AgreesWithCompilerFloat16OnEveryEncoding) {
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<std::uint16_t>(i);
    _Float16 c;
    std::memcpy(&c, &h, 2);
    const float want = static_cast<float>(c);
    if (std::isnan(want)) continue;
    ASSERT_EQ(sa::float_from_f16(h), want) << std::hex << i;
  }
}
#endif
