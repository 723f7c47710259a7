// core/fp8.hpp against exact arithmetic: every one of the 256 patterns of each
// format decodes to the value its fields define, round-trips, and every
// midpoint between neighbours rounds to the even one.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "core/fp8.hpp"

namespace sa {
namespace {

struct Expect {
  Fp8Format f;
  const char* name;
  float max_finite, min_sub;
};

class Fp8 : public ::testing::TestWithParam<Expect> {};

TEST_P(Fp8, EveryPatternDecodesRoundTripsAndNeighboursTieToEven) {
  const Expect e = GetParam();
  std::map<float, int> finite;  // value -> pattern (non-negative patterns)
  int nans = 0, infs = 0;
  for (int b = 0; b < 256; ++b) {
    const float x = fp8_to_float(static_cast<std::uint8_t>(b), e.f);
    if (std::isnan(x)) {
      ++nans;
      EXPECT_TRUE(std::isnan(fp8_to_float(fp8_from_float(x, e.f, false), e.f)));
      continue;
    }
    if (std::isinf(x)) {
      ++infs;
      continue;
    }
    EXPECT_EQ(fp8_from_float(x, e.f, false) & 0x7f, b & 0x7f) << e.name << " pattern " << b;
    EXPECT_EQ(fp8_to_float(fp8_from_float(x, e.f, false), e.f), x);
    if (b < 128) finite[x] = b;
  }
  if (e.f == Fp8Format::e4m3) {
    EXPECT_EQ(nans, 2);  // 0x7f, 0xff
    EXPECT_EQ(infs, 0);
  } else {
    EXPECT_EQ(nans, 6);  // S.11111.{01,10,11}
    EXPECT_EQ(infs, 2);
  }
  EXPECT_EQ(finite.rbegin()->first, e.max_finite);
  EXPECT_EQ(std::next(finite.begin())->first, e.min_sub);
  // Midpoints between consecutive finite values round to the even pattern.
  std::vector<std::pair<float, int>> v(finite.begin(), finite.end());
  for (std::size_t i = 0; i + 1 < v.size(); ++i) {
    const float mid = (v[i].first + v[i + 1].first) / 2;  // exact: few bits
    const int even = (v[i].second % 2 == 0) ? v[i].second : v[i + 1].second;
    EXPECT_EQ(fp8_from_float(mid, e.f, false), even) << e.name << " midpoint " << mid;
    EXPECT_EQ(fp8_from_float(std::nextafter(mid, 0.0f), e.f, false), v[i].second);
    EXPECT_EQ(fp8_from_float(std::nextafter(mid, INFINITY), e.f, false), v[i + 1].second);
    EXPECT_EQ(fp8_from_float(-mid, e.f, false), even | 0x80);
  }
  // Overflow: saturating gives the largest finite, otherwise NaN (e4m3) / inf (e5m2).
  const float big = e.max_finite * 2;
  EXPECT_EQ(fp8_to_float(fp8_from_float(big, e.f, true), e.f), e.max_finite);
  const float o = fp8_to_float(fp8_from_float(big, e.f, false), e.f);
  if (e.f == Fp8Format::e4m3)
    EXPECT_TRUE(std::isnan(o));
  else
    EXPECT_EQ(o, INFINITY);
  // Below half the smallest subnormal: zero, sign kept.
  EXPECT_EQ(fp8_from_float(e.min_sub / 2, e.f, false), 0);  // tie to even (0)
  EXPECT_EQ(fp8_from_float(-e.min_sub / 4, e.f, false), 0x80);
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8,
                         ::testing::Values(Expect{Fp8Format::e4m3, "e4m3", 448.0f, 0x1p-9f},
                                           Expect{Fp8Format::e5m2, "e5m2", 57344.0f, 0x1p-16f}),
                         [](const auto& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace sa
