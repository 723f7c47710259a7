// T7 (Blanchard, Higham & Higham 2021): the shifted softmax computed in a
// working precision with unit roundoff u has ||p - p^||_inf / ||p||_inf <=
// (n + 2 c_exp + 2 delta) u. Checked on plain double and float
// implementations against the MPFR reference. glibc's exp and expf are
// documented as < 1 ulp (faithful, not correctly rounded), so c_exp = 2.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "reference/softmax.hpp"
#include "tests/support/mp_testing.hpp"
#include "theory/rounding_bounds.hpp"

using sa::ref::Mp;
namespace th = sa::theory;

namespace {
template <class F>
std::vector<F> shifted_softmax(const std::vector<F>& l) {
  F m = l[0];
  for (F x : l) m = std::max(m, x);
  std::vector<F> e(l.size());
  F S = 0;
  for (std::size_t i = 0; i < l.size(); ++i) S += (e[i] = std::exp(l[i] - m));
  for (F& x : e) x /= S;
  return e;
}

template <class F>
double measured_error(const std::vector<double>& l) {
  std::vector<F> lf(l.begin(), l.end());
  std::vector<double> exact_in(lf.begin(), lf.end());  // the inputs the kernel actually saw
  const auto ref = sa::ref::softmax(exact_in);
  const auto got = shifted_softmax(lf);
  Mp worst = 0, norm = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    worst = std::max(worst, Mp(abs(Mp(static_cast<double>(got[i])) - ref[i])));
    norm = std::max(norm, ref[i]);
  }
  return (worst / norm).convert_to<double>();
}
}  // namespace

RC_GTEST_PROP(RoundingBounds, ShiftedSoftmaxWithinBoundDouble, ()) {
  const auto l = *sa::testing::bounded_logits(300, -20, *rc::gen::element(1.0, 10.0, 40.0));
  const double spread =
      *std::max_element(l.begin(), l.end()) - *std::min_element(l.begin(), l.end());
  const double bound = th::shifted_softmax_error_bound(static_cast<double>(l.size()), spread,
                                                       std::ldexp(1.0, -53), 2.0);
  RC_ASSERT(measured_error<double>(l) <= bound);
}

RC_GTEST_PROP(RoundingBounds, ShiftedSoftmaxWithinBoundFloat, ()) {
  const auto l = *sa::testing::bounded_logits(300, -20, *rc::gen::element(1.0, 10.0, 40.0));
  std::vector<float> lf(l.begin(), l.end());
  const double spread =
      *std::max_element(lf.begin(), lf.end()) - *std::min_element(lf.begin(), lf.end());
  const double bound = th::shifted_softmax_error_bound(static_cast<double>(l.size()), spread,
                                                       std::ldexp(1.0, -24), 2.0);
  RC_ASSERT(measured_error<float>(l) <= bound);
}

TEST(RoundingBounds, Formulas) {
  const double u = std::ldexp(1.0, -24);
  EXPECT_EQ(th::shifted_softmax_error_bound(100, 3, u), (100 + 2 + 6) * u);
  EXPECT_EQ(th::unshifted_softmax_error_bound(100, u), 103 * u);
  EXPECT_EQ(th::shifted_softmax_error_bound(100, 3, u, 2.0), (100 + 4 + 6) * u);
  // bfloat16 with bfloat16 accumulation: void once n ~ 1/u = 256.
  EXPECT_TRUE(th::bound_is_informative(th::shifted_softmax_error_bound(200, 0, 1.0 / 256)));
  EXPECT_FALSE(th::bound_is_informative(th::shifted_softmax_error_bound(256, 0, 1.0 / 256)));
  const std::vector<double> l = {-3, 7.5, 2};
  EXPECT_EQ(th::softmax_condition_number(l), 15.0);
}
