// T2 (Theorem 2.2, Corollary B.1): p_k < eps for every k exactly when
// n > n* = 1 + (1/eps - 1) e^{delta/theta}. Checked against T1's upper bound
// evaluated directly at high precision on both sides of n*.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "reference/mpfr.hpp"
#include "theory/critical_size.hpp"
#include "theory/dispersion.hpp"

using sa::ref::Mp;
namespace th = sa::theory;

RC_GTEST_PROP(CriticalSize, SeparatesDispersedFromNot, ()) {
  const Mp eps = Mp(1) / Mp(*rc::gen::inRange(2, 1 << 24));
  const Mp spread = Mp(*rc::gen::inRange(0, 200)) / 10;
  const Mp theta = Mp(*rc::gen::element(0.5, 1.0, 2.0));
  const Mp nstar = th::critical_size(eps, spread, theta);
  // The first integer n > n*. When n* is an integer up to the 2^-256 rounding of
  // its evaluation (spread 0, eps = 1/k), floor(n*) + 1 may land on n* itself,
  // where the bound equals eps: step past it.
  Mp above = floor(nstar) + 1;
  if (above - nstar <= Mp(1e-50) * nstar) above += 1;
  RC_ASSERT(th::dispersion_bounds(above, spread, theta).upper < eps);
  const Mp below =
      ceil(nstar) - 1;  // the last integer n < n* (skipped when n* is an integer up to rounding)
  if (below >= 1 && nstar - below > Mp(1e-50) * nstar)
    RC_ASSERT(th::dispersion_bounds(below, spread, theta).upper > eps);
  // At n* itself the upper bound equals eps.
  const Mp at = th::dispersion_bounds(nstar, spread, theta).upper;
  RC_ASSERT(abs(at - eps) / eps < Mp(1e-60));
}

TEST(CriticalSize, DtypeUnitRoundoffs) {
  // Zero spread: n* = 1/eps; the unit roundoffs are 2^-24, 2^-8, 2^-11.
  EXPECT_EQ(th::critical_size(sa::DType::float32, 0.0, 1.0), 16777216.0);
  EXPECT_EQ(th::critical_size(sa::DType::bfloat16, 0.0, 1.0), 256.0);
  EXPECT_EQ(th::critical_size(sa::DType::float16, 0.0, 1.0), 2048.0);
}

TEST(CriticalSize, GemmaWorkedExample) {
  // Gemma 2B mean spread 5.69 (docs/theory.md T2) in bfloat16: 1 + 255 e^5.69.
  const double n = th::critical_size(sa::DType::bfloat16, 5.69, 1.0);
  EXPECT_NEAR(n, 1.0 + 255.0 * std::exp(5.69), 1e-9 * n);
  EXPECT_GT(n, 75000.0);
  EXPECT_LT(n, 76000.0);
  EXPECT_EQ(th::first_dispersed_size(n), std::floor(n) + 1);
}

TEST(CriticalSize, RejectsBadArguments) {
  EXPECT_THROW(th::critical_size(0.0, 1.0, 1.0), std::invalid_argument);
  EXPECT_THROW(th::critical_size(1.0, 1.0, 1.0), std::invalid_argument);
  EXPECT_THROW(th::critical_size(0.1, -1.0, 1.0), std::invalid_argument);
  EXPECT_THROW(th::critical_size(0.1, 1.0, -1.0), std::invalid_argument);
}

// Claim: first_dispersed_size(n*) is an integer strictly above n* at every
// magnitude. Above 2^53 floor(n*) + 1 rounds back to n* (it used to be
// returned, and printed by `bounds`, as the "first" n, which is not > n*).
TEST(CriticalSize, FirstDispersedSizeIsAboveNStarBeyond2To53) {
  for (double spread : {30.0, 33.0, 36.0, 40.0}) {
    const double n = th::critical_size(0x1p-24, spread, 1.0);  // float32: 2^24 e^spread
    const double f = th::first_dispersed_size(n);
    if (!std::isfinite(f)) continue;  // past 2^63
    EXPECT_GT(f, n) << "spread " << spread;
    EXPECT_EQ(f, std::floor(f)) << "spread " << spread;
    if (n >= 0x1p53) EXPECT_EQ(f, std::nextafter(n, INFINITY)) << "spread " << spread;
  }
}
