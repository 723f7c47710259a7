// T5: beta(H) >= 1 always, = 1 for H <= 0.5, > 1 exactly on the interval where
// the polynomial exceeds 1 (about (0.849, 5.944)), with its peak about 2.42
// near H = 4.41. The interval and peak are computed from the polynomial
// (theory/adaptive_temperature.hpp), then compared with docs/theory.md's rounded values.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "reference/mpfr.hpp"
#include "theory/adaptive_temperature.hpp"

using sa::ref::Mp;
namespace th = sa::theory;

TEST(AdaptiveTemperature, CoefficientsAreThePapersDecimals) {
  // numpy polyval order [-0.037, 0.481, -2.3, 4.917, -1.791]; exact decimals in MPFR.
  EXPECT_EQ(th::adaptive_coefficient<Mp>(0), Mp("-0.037"));
  EXPECT_EQ(th::adaptive_coefficient<Mp>(1), Mp("0.481"));
  EXPECT_EQ(th::adaptive_coefficient<Mp>(2), Mp("-2.3"));
  EXPECT_EQ(th::adaptive_coefficient<Mp>(3), Mp("4.917"));
  EXPECT_EQ(th::adaptive_coefficient<Mp>(4), Mp("-1.791"));
  // And the correctly rounded float/double of each.
  EXPECT_EQ(th::adaptive_coefficient<float>(3), 4.917f);
  EXPECT_EQ(th::adaptive_coefficient<double>(0), -0.037);
}

TEST(AdaptiveTemperature, CorrectionIntervalAndPeak) {
  const auto [lo, hi] = th::adaptive_correction_interval<Mp>();
  // docs/theory.md quotes "about (0.849, 5.944)"; the roots are 0.8490.. and
  // 5.94452.. (the upper one truncated there, not rounded): agree to 1e-3.
  EXPECT_LT(abs(lo - Mp("0.849")), Mp("0.001")) << lo;
  EXPECT_LT(abs(hi - Mp("5.944")), Mp("0.001")) << hi;
  EXPECT_LT(abs(th::adaptive_polynomial(lo) - 1), Mp(1e-70));
  EXPECT_LT(abs(th::adaptive_polynomial(hi) - 1), Mp(1e-70));
  const auto [h_peak, beta_peak] = th::adaptive_beta_peak<Mp>();
  EXPECT_LT(abs(h_peak - Mp("4.41")), Mp("0.01")) << h_peak;
  EXPECT_LT(abs(beta_peak - Mp("2.42")), Mp("0.01")) << beta_peak;
}

RC_GTEST_PROP(AdaptiveTemperature, BetaAtLeastOneAndOneBelowThreshold, ()) {
  const Mp H = Mp(*rc::gen::inRange(0, 200000)) / 10000;  // [0, 20]
  const Mp beta = th::adaptive_beta(H);
  RC_ASSERT(beta >= 1);
  if (H <= Mp("0.5")) RC_ASSERT(beta == 1);
}

RC_GTEST_PROP(AdaptiveTemperature, CorrectsExactlyInsideTheInterval, ()) {
  static const auto iv = th::adaptive_correction_interval<Mp>();
  static const Mp peak = th::adaptive_beta_peak<Mp>().second;
  const Mp H = Mp(*rc::gen::inRange(0, 200000)) / 10000;
  const Mp beta = th::adaptive_beta(H);
  const bool inside = H > iv.first && H < iv.second;
  RC_ASSERT((beta > 1) == inside);
  RC_ASSERT(beta <= peak);
}

TEST(AdaptiveTemperature, FloatAgreesWithHighPrecision) {
  // The float evaluation (as the kernels and CUDA run it) against the exact map
  // at the same H. Horner's rule of degree 4 with coefficients rounded to float
  // has error <= gamma_9 * sum_i |c_i| |H|^i (Higham, Accuracy and Stability,
  // eq. 5.3, plus one rounding per coefficient), gamma_9 ~ 9 * 2^-24.
  for (int i = 0; i <= 8000; ++i) {
    const float h = static_cast<float>(i) / 1000.0f;
    const double got = th::adaptive_beta(h);
    const double want = th::adaptive_beta(Mp(h)).convert_to<double>();
    double mag = 0, hp = 1;
    for (int c = 4; c >= 0; --c, hp *= h) mag += std::abs(th::adaptive_coefficient<double>(c)) * hp;
    EXPECT_LE(std::abs(got - want), 9 * std::ldexp(1.0, -24) * mag) << "H = " << h;
  }
}

TEST(AdaptiveTemperature, NaNPropagates) { EXPECT_TRUE(std::isnan(th::adaptive_beta(NAN))); }
