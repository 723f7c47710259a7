// T4 (Proposition 3.2): H(beta) is non-increasing in beta >= 0, dH/dbeta =
// -beta Var_p[l], H(0) = log n, H(inf) = log(#ties at the max), the two-logit
// closed form, and 0 <= H <= log n. All at 256-bit precision.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "reference/softmax.hpp"
#include "tests/support/mp_testing.hpp"
#include "theory/entropy_temperature.hpp"

using sa::ref::Mp;
namespace th = sa::theory;

namespace {
std::vector<Mp> to_mp(const std::vector<double>& l) { return {l.begin(), l.end()}; }
}  // namespace

RC_GTEST_PROP(EntropyTemperature, MonotoneInBeta, ()) {
  const auto l = to_mp(*sa::testing::bounded_logits(40, -10, 20));
  const Mp b1 = Mp(*rc::gen::inRange(0, 400)) / 100;
  const Mp b2 = b1 + Mp(*rc::gen::inRange(1, 400)) / 100;
  const Mp h1 = th::entropy_at<Mp>(l, b1), h2 = th::entropy_at<Mp>(l, b2);
  RC_ASSERT(h2 <= h1 + Mp(sa::testing::mp_tolerance()));
}

// Central difference with h = 2^-40: truncation error h^2/6 |H'''|; with logits
// in [-10, 10] and beta <= 4, |H'''| <= 4 * 20^3 * (1 + 20 * 4) < 3e6, so the
// difference is within 3e6 * 2^-80 / 6 < 1e-18 of dH/dbeta. Rounding adds
// 2^-200 / h. Bound used: 1e-15 (absolute).
RC_GTEST_PROP(EntropyTemperature, DerivativeIsMinusBetaVariance, ()) {
  const auto l = to_mp(*sa::testing::bounded_logits(30, -10, 20));
  const Mp beta = Mp(*rc::gen::inRange(0, 400)) / 100;
  const Mp h = Mp(std::ldexp(1.0, -40));
  const Mp fd = (th::entropy_at<Mp>(l, beta + h) - th::entropy_at<Mp>(l, beta - h)) / (2 * h);
  const Mp closed = th::entropy_derivative<Mp>(l, beta);
  RC_ASSERT(abs(fd - closed) < Mp(1e-15));
}

RC_GTEST_PROP(EntropyTemperature, WithinZeroAndLogN, ()) {
  const auto l = to_mp(*sa::testing::bounded_logits(100, -30, 60));
  const Mp beta = Mp(*rc::gen::inRange(0, 1000)) / 10;
  const Mp H = th::entropy_at<Mp>(l, beta);
  const Mp tol = Mp(sa::testing::mp_tolerance());
  RC_ASSERT(H >= -tol);
  RC_ASSERT(H <= log(Mp(static_cast<double>(l.size()))) + tol);
}

RC_GTEST_PROP(EntropyTemperature, AgreesWithReferenceEntropy, ()) {
  const auto l = *sa::testing::bounded_logits(50, -10, 20);
  const double theta = *rc::gen::element(0.25, 1.0, 3.0);
  const Mp a = th::entropy_at<Mp>(to_mp(l), Mp(1) / Mp(theta));
  const Mp b = sa::ref::entropy(l, theta);
  RC_ASSERT(abs(a - b) <= Mp(sa::testing::mp_tolerance()));
}

TEST(EntropyTemperature, Limits) {
  const std::vector<Mp> l = {Mp(3), Mp(1), Mp(3), Mp(-2), Mp(3), Mp(0)};
  // beta = 0: the uniform distribution.
  EXPECT_LT(abs(th::entropy_at<Mp>(l, Mp(0)) - log(Mp(6))), Mp(1e-70));
  EXPECT_EQ(th::entropy_at_zero_beta<Mp>(6), log(Mp(6)));
  // beta -> inf: three items tie at the max. At beta = 300 the others carry
  // weight < 4 e^-600, which moves H by < 1e-250.
  EXPECT_EQ(th::entropy_at_infinite_beta<Mp>(l), log(Mp(3)));
  EXPECT_LT(abs(th::entropy_at<Mp>(l, Mp(300)) - log(Mp(3))), Mp(1e-200));
}

RC_GTEST_PROP(EntropyTemperature, TwoLogitClosedForm, ()) {
  const Mp a = Mp(*rc::gen::inRange(-1000, 1000)) / 10;
  const Mp delta = Mp(*rc::gen::inRange(0, 1000)) / 10;
  const Mp theta = Mp(*rc::gen::element(0.5, 1.0, 4.0));
  const std::vector<Mp> l = {a, a + delta};
  const Mp direct = th::entropy_at<Mp>(l, Mp(1) / theta);
  RC_ASSERT(abs(direct - th::two_logit_entropy(delta / theta)) <= Mp(sa::testing::mp_tolerance()));
}
