// T1 (Lemma 2.1): every softmax weight of n logits in [m, M] lies within
// [1/(1+(n-1)e^{d/theta}), 1/(1+(n-1)e^{-d/theta})], and the extremal inputs
// attain the bounds. Checked on the MPFR reference: both sides are computed at
// 256 bits, so the only slack is the reference's own rounding (2^-200 relative).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "reference/softmax.hpp"
#include "tests/support/mp_testing.hpp"
#include "theory/dispersion.hpp"

using sa::ref::Mp;
namespace th = sa::theory;

RC_GTEST_PROP(Dispersion, EveryWeightWithinTightBounds, ()) {
  const double lo = *rc::gen::inRange(-50, 50);
  const double spread = *rc::gen::inRange(0, 40) / 4.0;
  const double theta = *rc::gen::element(0.25, 0.5, 1.0, 2.0, 7.0);
  const auto l = *sa::testing::bounded_logits(64, lo, spread);
  const double d = *std::max_element(l.begin(), l.end()) - *std::min_element(l.begin(), l.end());
  const auto p = sa::ref::softmax(l, theta);
  const auto b = th::dispersion_bounds<Mp>(Mp(static_cast<double>(l.size())), Mp(d), Mp(theta));
  const Mp slack = Mp(sa::testing::mp_tolerance());
  for (const Mp& pk : p) {
    RC_ASSERT(pk >= b.lower * (1 - slack));
    RC_ASSERT(pk <= b.upper * (1 + slack));
  }
}

RC_GTEST_PROP(Dispersion, ExtremalInputsAttainTheBounds, ()) {
  const std::int64_t n = *rc::gen::inRange<std::int64_t>(1, 300);
  const double lo = *rc::gen::inRange(-20, 20);
  const double hi = lo + *rc::gen::inRange(0, 60) / 3.0;
  const double theta = *rc::gen::element(0.5, 1.0, 3.0);
  const Mp spread = Mp(hi) - Mp(lo);  // the spread the inputs really have
  const auto b = th::dispersion_bounds<Mp>(Mp(static_cast<double>(n)), spread, Mp(theta));
  const auto up = sa::ref::softmax(th::upper_extremal_logits<double>(n, lo, hi), theta);
  const auto dn = sa::ref::softmax(th::lower_extremal_logits<double>(n, lo, hi), theta);
  RC_ASSERT(sa::testing::rel_diff(up[0], b.upper) <= sa::testing::mp_tolerance());
  RC_ASSERT(sa::testing::rel_diff(dn[0], b.lower) <= sa::testing::mp_tolerance());
}

RC_GTEST_PROP(Dispersion, PaperBoundsFollowFromTightOnes, ()) {
  const double n = *rc::gen::inRange(1, 1 << 20);
  const double spread = *rc::gen::inRange(0, 100) / 5.0;
  const double theta = *rc::gen::element(0.5, 1.0, 2.0);
  const auto tight = th::dispersion_bounds<Mp>(Mp(n), Mp(spread), Mp(theta));
  const auto paper = th::dispersion_bounds_paper<Mp>(Mp(n), Mp(spread), Mp(theta));
  RC_ASSERT(paper.lower <= tight.lower);
  RC_ASSERT(tight.upper <= paper.upper);
}

TEST(Dispersion, BoundsShrinkToZeroAsNGrows) {
  double prev = 1.0;
  for (double n = 2; n <= 1e12; n *= 10) {
    const auto b = th::dispersion_bounds(n, 5.69, 1.0);
    EXPECT_LT(b.upper, prev) << "n=" << n;
    EXPECT_LE(b.upper, std::exp(5.69) / n) << "n=" << n;  // the paper's looser form
    prev = b.upper;
  }
}

TEST(Dispersion, NoOverflowForHugeSpread) {
  const auto b = th::dispersion_bounds(1e6, 5000.0, 1.0);  // e^5000 overflows double
  EXPECT_EQ(b.upper, 1.0);
  EXPECT_EQ(b.lower, 0.0);  // underflows, correctly: true value ~ e^-5000
  EXPECT_FALSE(std::isnan(b.lower));
}

TEST(Dispersion, RejectsBadArguments) {
  EXPECT_THROW(th::dispersion_bounds(0.0, 1.0, 1.0), std::invalid_argument);
  EXPECT_THROW(th::dispersion_bounds(4.0, -1.0, 1.0), std::invalid_argument);
  EXPECT_THROW(th::dispersion_bounds(4.0, 1.0, 0.0), std::invalid_argument);
}

// Claim: one item always has weight exactly 1, whatever the spread; the tight
// pair is (1, 1). With e^{-1000} underflowing, lower = e/(e + 0) was 0/0 (NaN;
// `bounds --spread 1000 --n 1` printed -nan).
TEST(Dispersion, OneItemHasWeightOneAtAnySpread) {
  for (double spread : {0.0, 1.0, 745.0, 1000.0, 1e300}) {
    const auto b = th::dispersion_bounds(1.0, spread, 1.0);
    EXPECT_EQ(b.lower, 1.0) << "spread " << spread;
    EXPECT_EQ(b.upper, 1.0) << "spread " << spread;
  }
}
