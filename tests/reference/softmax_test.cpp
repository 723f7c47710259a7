// The reference's own consistency and its documented special-value semantics
// (include/softmax_audit/kernel.h): these are what every kernel is held to.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <limits>

#include "reference/softmax.hpp"
#include "tests/support/mp_testing.hpp"
#include "theory/adaptive_temperature.hpp"

using sa::ref::Mp;
constexpr double inf = std::numeric_limits<double>::infinity();

RC_GTEST_PROP(ReferenceSoftmax, SumsToOneAndMatchesLogSoftmax, ()) {
  const auto l = *sa::testing::bounded_logits(200, -100, 200);
  const double theta = *rc::gen::element(0.1, 1.0, 10.0);
  const auto p = sa::ref::softmax(l, theta);
  const auto lp = sa::ref::log_softmax(l, theta);
  const Mp lse = sa::ref::log_sum_exp(l, theta);
  Mp sum = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    sum += p[i];
    // Absolute agreement: every quantity carries ~2^-256 (n + |z|) error.
    const Mp z = Mp(l[i]) / Mp(theta);
    const Mp tol = Mp(sa::testing::mp_tolerance()) * (1 + abs(lse) + abs(z));
    RC_ASSERT(abs(log(p[i]) - lp[i]) <= tol);
    RC_ASSERT(abs(lp[i] - (z - lse)) <= tol);
  }
  RC_ASSERT(abs(sum - 1) <= Mp(sa::testing::mp_tolerance()));
}

RC_GTEST_PROP(ReferenceSoftmax, PrecisionIsEnough, ()) {
  // The same row at 256 and 512 bits agrees to 2^-200: the working precision
  // does not move any float32/bfloat16 verdict.
  const auto l = *sa::testing::bounded_logits(100, -1e4, 2e4);
  const auto a = sa::ref::softmax(l);
  std::vector<Mp> b;
  {
    sa::ref::PrecisionScope scope(512);
    b = sa::ref::softmax(l);
  }
  for (std::size_t i = 0; i < a.size(); ++i)
    RC_ASSERT(sa::testing::rel_diff(a[i], b[i]) <= sa::testing::mp_tolerance());
}

RC_GTEST_PROP(ReferenceSoftmax, ShiftInvariantExactly, ()) {
  const auto l = *sa::testing::bounded_logits(50, -10, 20);
  std::vector<double> shifted = l;
  for (double& x : shifted) x += 1e4;  // exact in double for these values
  const auto a = sa::ref::softmax(l), b = sa::ref::softmax(shifted);
  for (std::size_t i = 0; i < a.size(); ++i)
    RC_ASSERT(sa::testing::rel_diff(a[i], b[i]) <= sa::testing::mp_tolerance());
}

TEST(ReferenceSoftmax, MaskedEntriesGetZero) {
  const std::vector<double> l = {1.0, -inf, 2.0, -inf};
  const auto p = sa::ref::softmax(l);
  EXPECT_EQ(p[1], 0);
  EXPECT_EQ(p[3], 0);
  EXPECT_LT(abs(p[0] + p[2] - 1), Mp(1e-70));
  EXPECT_TRUE(isinf(sa::ref::log_softmax(l)[1]));
}

TEST(ReferenceSoftmax, FullyMaskedRow) {
  const std::vector<double> l(5, -inf);
  for (const Mp& x : sa::ref::softmax(l)) EXPECT_EQ(x, 0);
  for (const Mp& x : sa::ref::log_softmax(l)) EXPECT_TRUE(isinf(x) && x < 0);
  const Mp lse = sa::ref::log_sum_exp(l);
  EXPECT_TRUE(isinf(lse) && lse < 0);
  EXPECT_EQ(sa::ref::entropy(l), 0);
  EXPECT_EQ(sa::ref::streamed_entropy(l), 0);
  const auto a = sa::ref::adaptive_softmax(l);
  EXPECT_EQ(a.beta, 1);
  for (const Mp& x : a.weights) EXPECT_EQ(x, 0);
}

TEST(ReferenceSoftmax, PositiveInfinityIsTheLimit) {
  const std::vector<double> l = {inf, 1.0, inf, 5.0};
  const auto p = sa::ref::softmax(l);
  EXPECT_EQ(p[0], Mp(0.5));
  EXPECT_EQ(p[2], Mp(0.5));
  EXPECT_EQ(p[1], 0);
  EXPECT_EQ(sa::ref::log_sum_exp(l), Mp(inf));
  EXPECT_EQ(sa::ref::entropy(l), log(Mp(2)));
  EXPECT_EQ(sa::ref::streamed_entropy(l), log(Mp(2)));
  EXPECT_EQ(sa::ref::log_softmax(l)[0], -log(Mp(2)));
}

TEST(ReferenceSoftmax, NaNPoisonsTheRow) {
  const std::vector<double> l = {1.0, NAN, -inf};
  for (const Mp& x : sa::ref::softmax(l)) EXPECT_TRUE(isnan(x));
  for (const Mp& x : sa::ref::log_softmax(l)) EXPECT_TRUE(isnan(x));
  EXPECT_TRUE(isnan(sa::ref::log_sum_exp(l)));
  EXPECT_TRUE(isnan(sa::ref::entropy(l)));
  EXPECT_TRUE(isnan(sa::ref::streamed_entropy(l)));
  EXPECT_TRUE(isnan(sa::ref::adaptive_softmax(l).beta));
}

TEST(ReferenceSoftmax, SingleItem) {
  EXPECT_EQ(sa::ref::softmax(std::vector<double>{-3.5})[0], 1);
  EXPECT_EQ(sa::ref::entropy(std::vector<double>{7.0}), 0);
}

TEST(ReferenceSoftmax, BadInputsNameTheProblem) {
  const std::vector<double> empty;
  try {
    sa::ref::softmax(empty);
    FAIL() << "n = 0 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("n = 0"), std::string::npos) << e.what();
  }
  const std::vector<double> l = {1.0};
  EXPECT_THROW(sa::ref::softmax(l, 0.0), std::invalid_argument);
  EXPECT_THROW(sa::ref::softmax(l, -1.0), std::invalid_argument);
  EXPECT_THROW(sa::ref::softmax(l, inf), std::invalid_argument);
  EXPECT_THROW(sa::ref::entropy(l, NAN), std::invalid_argument);
}

RC_GTEST_PROP(ReferenceSoftmax, PaperEntropyIsBelowShannon, ()) {
  // -p log(p + 1e-9) < -p log p for every p > 0: the paper's H is smaller, and
  // the gap is at most sum p * 1e-9 / p = n * 1e-9.
  const auto l = *sa::testing::bounded_logits(300, -5, 10);
  const Mp hs = sa::ref::entropy(l, 1.0, sa::ref::EntropyDefinition::shannon);
  const Mp hp = sa::ref::entropy(l, 1.0, sa::ref::EntropyDefinition::paper_eps);
  RC_ASSERT(hp < hs);
  RC_ASSERT(hs - hp <= Mp(static_cast<double>(l.size()) * 1e-9));
}

RC_GTEST_PROP(ReferenceSoftmax, AdaptiveAppliesBetaOfEntropy, ()) {
  const auto l = *sa::testing::bounded_logits(100, -3, *rc::gen::element(0.5, 3.0, 20.0));
  const auto def =
      *rc::gen::element(sa::ref::EntropyDefinition::shannon, sa::ref::EntropyDefinition::paper_eps);
  const auto a = sa::ref::adaptive_softmax(l, 1.0, def);
  RC_ASSERT(a.entropy == sa::ref::entropy(l, 1.0, def));
  RC_ASSERT(a.beta == sa::theory::adaptive_beta(a.entropy));
  RC_ASSERT(a.beta >= 1);
  // softmax(beta l) == softmax(l / (1/beta)) at high precision.
  const auto direct = sa::ref::softmax(l, (Mp(1) / a.beta).convert_to<double>());
  // (1/beta rounded to double moves the temperature by <= 2^-53 relative, i.e.
  // logits by <= 2^-53 |l| beta; weights by <= 2 * that * max|l|: 2^-53 * 2 * 20 * 2.5 * 23.)
  for (std::size_t i = 0; i < l.size(); ++i)
    RC_ASSERT(abs(a.weights[i] - direct[i]) <= Mp(std::ldexp(1.0, -53) * 2 * 23 * 2.5 * 23));
}

TEST(ReferencePrecision, DefaultIsSetBeforeMain) {
  // Run as its own process by CTest: the first number made must already carry
  // the documented 256 bits, not Boost's default.
  EXPECT_GE(mpfr_get_prec(Mp(1).backend().data()),
            static_cast<mpfr_prec_t>(sa::ref::default_precision_bits));
  EXPECT_EQ(sa::ref::precision_bits(), sa::ref::default_precision_bits);
}

// Claim (reference/mpfr.hpp): every reference function is accurate to 2^-200
// relative, also when the mass outside the maximum is far below the working
// precision. Rows like (0, -185) have rest = e^-185 ~ 2^-267: 1 + rest is 1 at
// 256 bits, so LSE = m + log(S) gave 0 (exact 4.52e-81), the top item's
// log-softmax 0, and -sum p log p lost the top item's term (0.54% off). Held
// against the textbook formulas evaluated at 2048 bits, where nothing is lost.
TEST(ReferenceSoftmax, TinyMassOutsideTheMaximumKeepsRelativeAccuracy) {
  const std::vector<std::vector<double>> rows = {
      {0.0, -185.0}, {3.0, -182.0, -190.5, -inf}, {-185.0, 0.0, -200.0}, {1e4, 1e4 - 300.0}};
  for (const auto& l : rows) {
    const Mp lse = sa::ref::log_sum_exp(l);
    const auto lp = sa::ref::log_softmax(l);
    const Mp h = sa::ref::entropy(l, 1.0, sa::ref::EntropyDefinition::shannon);
    const Mp hp = sa::ref::entropy(l, 1.0, sa::ref::EntropyDefinition::paper_eps);
    const Mp hs = sa::ref::adaptive_softmax(l, 1.0, sa::ref::EntropyDefinition::shannon).entropy;
    Mp lse_hi, h_hi, hp_hi;
    std::vector<Mp> lp_hi;
    {
      sa::ref::PrecisionScope scope(2048);
      Mp m = -Mp(inf), S = 0;
      for (double x : l) m = std::isinf(x) ? m : (Mp(x) > m ? Mp(x) : m);
      for (double x : l)
        if (!std::isinf(x)) S += exp(Mp(x) - m);
      lse_hi = m + log(S);
      h_hi = 0;
      hp_hi = 0;
      const Mp eps = Mp(1) / Mp(1000000000);
      for (double x : l) {
        lp_hi.push_back(std::isinf(x) ? -Mp(inf) : Mp(x) - lse_hi);
        if (std::isinf(x)) continue;
        const Mp p = exp(Mp(x) - lse_hi);
        h_hi -= p * log(p);
        hp_hi -= p * log(p + eps);
      }
    }
    const double tol = sa::testing::mp_tolerance();
    EXPECT_LE(sa::testing::rel_diff(lse, lse_hi), tol) << "log-sum-exp, row " << l[0];
    EXPECT_LE(sa::testing::rel_diff(h, h_hi), tol) << "Shannon entropy, row " << l[0];
    EXPECT_LE(sa::testing::rel_diff(hs, h_hi), tol) << "adaptive's Shannon entropy, row " << l[0];
    EXPECT_LE(sa::testing::rel_diff(hp, hp_hi), tol) << "paper entropy, row " << l[0];
    for (std::size_t i = 0; i < l.size(); ++i)
      if (!std::isinf(l[i]))
        EXPECT_LE(sa::testing::rel_diff(lp[i], lp_hi[i]), tol) << "log-softmax item " << i;
  }
}
