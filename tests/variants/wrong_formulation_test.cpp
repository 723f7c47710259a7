// The known-wrong formulations of docs/variants.md are told apart from the correct
// ones by the matrix itself: each differs from the variant it mis-states in at
// least one cell, and in the cells the mathematics says it must.
#include <gtest/gtest.h>

#include "variants/fuzz.hpp"

namespace sa::variants {
namespace {

TEST(WrongFormulations, AreFlaggedAndToldApartFromTheCorrectOnes) {
  const Variant* ssmax = registry().find("ssmax_s0.5");
  const Variant* ssmax_wrong = registry().find("ssmax_wrong_shift");
  const Variant* softpick = registry().find("softpick");
  const Variant* softpick_wrong = registry().find("softpick_wrong_relu_den");
  ASSERT_TRUE(ssmax && ssmax_wrong && softpick && softpick_wrong);
  EXPECT_TRUE(ssmax_wrong->wrong_formulation);
  EXPECT_EQ(ssmax_wrong->wrong_of, "ssmax_s0.5");
  EXPECT_TRUE(softpick_wrong->wrong_formulation);
  EXPECT_EQ(softpick_wrong->wrong_of, "softpick");
  EXPECT_FALSE(ssmax->wrong_formulation);

  FuzzConfig cfg;
  const Matrix m = fuzz_all({ssmax, ssmax_wrong, softpick, softpick_wrong}, cfg);
  const auto& [rs, rsw, rp, rpw] = std::tie(m.rows[0], m.rows[1], m.rows[2], m.rows[3]);

  // Each wrong one differs from its correct one in at least one cell.
  auto differing = [&](const VariantResult& a, const VariantResult& b) {
    int d = 0;
    for (std::size_t k = 0; k < a.cells.size(); ++k) d += a.cells[k].outcome != b.cells[k].outcome;
    return d;
  };
  EXPECT_GE(differing(rs, rsw), 1);
  EXPECT_GE(differing(rp, rpw), 1);

  // exp(l - s log n)/sum is plain softmax: it disperses where SSMax (s g >= 1) does not,
  // so it fails SSMax's prediction at g = 2 (s g = 1) and g = 3 (s g = 1.5).
  for (const auto* g : {"dispersion_g2", "dispersion_g3"}) {
    EXPECT_EQ(cell(rs, g)->outcome, Outcome::pass) << describe(*cell(rs, g));
    EXPECT_EQ(cell(rsw, g)->outcome, Outcome::fail) << describe(*cell(rsw, g));
    EXPECT_LT(cell(rsw, g)->measured, 1e-3);  // dispersed at n = 2^20
    EXPECT_GT(cell(rs, g)->measured, 0.49);   // 1/2 or -> 1
  }
  // The wrong softpick drops the negative terms from the denominator: raising a
  // negative logit no longer moves the other weights (monotonicity holds), and
  // a -inf item no longer counts (masking works) -- both differ from softpick.
  EXPECT_EQ(cell(rp, "monotonicity")->outcome, Outcome::fail);
  EXPECT_EQ(cell(rpw, "monotonicity")->outcome, Outcome::pass);
  EXPECT_EQ(cell(rp, "special.neg_inf_mask")->outcome, Outcome::fail);
  EXPECT_EQ(cell(rpw, "special.neg_inf_mask")->outcome, Outcome::pass);
  // The correct softpick's minimal monotonicity counterexample has a negative logit.
  EXPECT_NE(cell(rp, "monotonicity")->counterexample.find('-'), std::string::npos)
      << cell(rp, "monotonicity")->counterexample;
}

}  // namespace
}  // namespace sa::variants
