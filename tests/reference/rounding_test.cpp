// Correct rounding of reference values: round_to must agree with the
// hardware's correctly rounded conversions (double -> float, float -> _Float16)
// and with the bfloat16 bit conversion, including subnormals, ties and
// overflow; ulp_error must put a correctly rounded result at <= 0.5 ulp.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstring>

#include "core/bfloat16.hpp"
#include "reference/rounding.hpp"

using sa::DType;
using sa::ref::Mp;

namespace {
double random_double(std::uint64_t bits_seed, int exp) {
  // A random 53-bit significand at a chosen binary exponent.
  const double sig = 1.0 + static_cast<double>(bits_seed >> 11) * std::ldexp(1.0, -53);
  return std::ldexp(sig, exp);
}
}  // namespace

RC_GTEST_PROP(Rounding, Float32MatchesHardwareConversion, ()) {
  const int e = *rc::gen::inRange(-160, 130);  // subnormal, normal and overflow ranges
  const double x = random_double(*rc::gen::arbitrary<std::uint64_t>(), e) *
                   (*rc::gen::arbitrary<bool>() ? 1 : -1);
  const float hw = static_cast<float>(x);  // IEEE RNE, one rounding
  RC_ASSERT(sa::ref::round_to(DType::float32, Mp(x)) == static_cast<double>(hw));
  RC_ASSERT(sa::ref::round_to_float32(Mp(x)) == hw);
}

RC_GTEST_PROP(Rounding, BFloat16MatchesBitConversion, ()) {
  std::uint32_t u = *rc::gen::arbitrary<std::uint32_t>();
  float f;
  std::memcpy(&f, &u, 4);
  RC_PRE(!std::isnan(f));
  const float want = sa::round_to_bf16(f);
  RC_ASSERT(sa::ref::round_to(DType::bfloat16, Mp(static_cast<double>(f))) ==
            static_cast<double>(want));
  RC_ASSERT(sa::ref::round_to_bfloat16_bits(Mp(static_cast<double>(f))) == sa::bf16_from_float(f));
}

#if defined(__FLT16_MAX__)  // _Float16 exists (gcc 12; not clang 14 on x86)
RC_GTEST_PROP(Rounding, Float16MatchesHardwareConversion, ()) {
  const int e = *rc::gen::inRange(-30, 18);
  const float x = static_cast<float>(random_double(*rc::gen::arbitrary<std::uint64_t>(), e));
  const _Float16 h = static_cast<_Float16>(x);  // RNE, one rounding
  RC_ASSERT(sa::ref::round_to(DType::float16, Mp(static_cast<double>(x))) ==
            static_cast<double>(h));
}
#else
TEST(Rounding, Float16MatchesHardwareConversion) {
  GTEST_SKIP() << "this compiler has no _Float16 (clang 14 on x86, the sanitize build); "
                  "the release build (gcc) runs this property";
}
#endif

TEST(Rounding, TiesGoToEven) {
  // 1 + 2^-24 is halfway between 1 and 1 + 2^-23 in float32: rounds to 1 (even).
  EXPECT_EQ(sa::ref::round_to(DType::float32, Mp(1) + Mp(std::ldexp(1.0, -24))), 1.0);
  // 1 + 3*2^-24 is halfway between 1 + 2^-23 and 1 + 2^-22: rounds up (even).
  EXPECT_EQ(sa::ref::round_to(DType::float32, Mp(1) + 3 * Mp(std::ldexp(1.0, -24))),
            1.0 + std::ldexp(1.0, -22));
  // A hair above the tie rounds up: the reference keeps digits double would lose.
  EXPECT_EQ(sa::ref::round_to(DType::float32,
                              Mp(1) + Mp(std::ldexp(1.0, -24)) + Mp(std::ldexp(1.0, -200))),
            1.0 + std::ldexp(1.0, -23));
  // bfloat16: 1 + 2^-8 ties to 1; smallest subnormal 2^-133; half of it ties to 0.
  EXPECT_EQ(sa::ref::round_to(DType::bfloat16, Mp(1) + Mp(std::ldexp(1.0, -8))), 1.0);
  EXPECT_EQ(sa::ref::round_to(DType::bfloat16, Mp(std::ldexp(1.0, -133))), std::ldexp(1.0, -133));
  EXPECT_EQ(sa::ref::round_to(DType::bfloat16, Mp(std::ldexp(1.0, -134))), 0.0);
  EXPECT_EQ(sa::ref::round_to(DType::bfloat16, Mp(std::ldexp(1.5, -134))), std::ldexp(1.0, -133));
}

TEST(Rounding, OverflowAndSpecials) {
  const double max_bf16 = std::ldexp(2.0 - std::ldexp(1.0, -7), 127);
  EXPECT_EQ(sa::ref::round_to(DType::bfloat16, Mp(max_bf16)), max_bf16);
  // max + half an ulp is a tie between max (odd significand) and 2^128: to even, i.e. overflow.
  EXPECT_EQ(sa::ref::round_to(DType::bfloat16, Mp(max_bf16) + Mp(std::ldexp(1.0, 127 - 8))),
            INFINITY);
  EXPECT_EQ(sa::ref::round_to(DType::bfloat16, Mp(max_bf16) + Mp(std::ldexp(1.0, 127 - 9))),
            max_bf16);
  EXPECT_EQ(sa::ref::round_to(DType::float32, -Mp(1e39)), -INFINITY);
  EXPECT_TRUE(std::isnan(sa::ref::round_to(DType::float32, Mp(NAN))));
  EXPECT_EQ(sa::ref::round_to(DType::float32, Mp(-INFINITY)), -INFINITY);
  EXPECT_TRUE(std::signbit(sa::ref::round_to(DType::float32, Mp(-0.0))));
}

RC_GTEST_PROP(Rounding, CorrectlyRoundedIsWithinHalfUlp, ()) {
  const int e = *rc::gen::inRange(-140, 120);
  const Mp x = Mp(random_double(*rc::gen::arbitrary<std::uint64_t>(), e)) *
               (1 + Mp(std::ldexp(1.0, -100)));  // not a double: exercises full precision
  for (DType t : {DType::float32, DType::bfloat16}) {
    const double r = sa::ref::round_to(t, x);
    RC_ASSERT(sa::ref::ulp_error(t, r, x) <= 0.5);
    // The neighbour one ulp away is more than half an ulp off.
    const double up = r + sa::ref::ulp_at(t, Mp(r));
    if (std::isfinite(up)) RC_ASSERT(sa::ref::ulp_error(t, up, x) > 0.5);
  }
}

TEST(Rounding, UlpsApart) {
  EXPECT_EQ(sa::ref::ulps_apart(DType::float32, 1.0, 1.0), 0);
  EXPECT_EQ(sa::ref::ulps_apart(DType::float32, 1.0, 1.0 + std::ldexp(1.0, -23)), 1);
  EXPECT_EQ(sa::ref::ulps_apart(DType::float32, std::ldexp(1.0, -149), -std::ldexp(1.0, -149)), 2);
  EXPECT_EQ(sa::ref::ulps_apart(DType::bfloat16, 1.0, 1.0 + std::ldexp(1.0, -7)), 1);
  EXPECT_EQ(sa::ref::ulps_apart(DType::bfloat16, 1.0, 1.0 - std::ldexp(1.0, -8)), 1);
  EXPECT_THROW(sa::ref::ulps_apart(DType::float32, 0.1, 0.2), std::invalid_argument);
}

TEST(Rounding, UlpErrorSpecials) {
  EXPECT_EQ(sa::ref::ulp_error(DType::float32, NAN, Mp(NAN)), 0.0);
  EXPECT_EQ(sa::ref::ulp_error(DType::float32, INFINITY, Mp(INFINITY)), 0.0);
  EXPECT_EQ(sa::ref::ulp_error(DType::float32, NAN, Mp(1)), INFINITY);
  EXPECT_EQ(sa::ref::ulp_error(DType::float32, 1.0, Mp(NAN)), INFINITY);
  EXPECT_EQ(sa::ref::ulp_error(DType::float32, -INFINITY, Mp(INFINITY)), INFINITY);
  // An exact value past float32's range correctly rounds to -inf: no error
  // (log_softmax of [0, -3.4e38] at theta 0.5 is -6.8e38).
  EXPECT_EQ(sa::ref::ulp_error(DType::float32, -INFINITY, Mp(-6.8e38)), 0.0);
  EXPECT_EQ(sa::ref::ulp_error(DType::float32, INFINITY, Mp(-6.8e38)), INFINITY);
  EXPECT_EQ(sa::ref::ulp_error(DType::float32, -INFINITY, Mp(-3.0e38)),
            INFINITY);  // rounds to a finite value
  // The smallest subnormal spacing is the ulp at 0.
  EXPECT_EQ(sa::ref::ulp_at(DType::float32, Mp(0)), std::ldexp(1.0, -149));
}
