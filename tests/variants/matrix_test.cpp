// The property matrix of the built-in variants reproduces the expectations of
// docs/variants.md. The expectations below are the ORACLE, typed from
// docs/variants.md; the product discovers every cell by running the property
// (variants/fuzz.cpp), and this test compares.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>
#include <set>
#include <string>

#include "variants/fuzz.hpp"

namespace sa::variants {
namespace {

const Matrix& builtin_matrix() {
  static const Matrix m = [] {
    std::vector<const Variant*> all;
    for (const auto& v : registry().all())
      if (v.origin == "builtin") all.push_back(&v);
    FuzzConfig cfg;  // defaults: 100 cases, seed 1, gaps 0.5 1 2 3, n to 2^20
    return fuzz_all(all, cfg);
  }();
  return m;
}

const VariantResult& row(const std::string& name) {
  for (const auto& r : builtin_matrix().rows)
    if (r.variant == name) return r;
  throw std::runtime_error("no row for " + name);
}

Outcome outcome(const std::string& variant, const std::string& property) {
  const Verdict* v = cell(row(variant), property);
  if (!v) throw std::runtime_error("no cell " + variant + "/" + property);
  return v->outcome;
}

const std::set<std::string> kSumsToOne = {
    "softmax", "softmax_theta0.5", "adaptive_temperature", "ssmax_s0.5", "log_length",
    "ssmax_wrong_shift", "sparsemax", "entmax15", "top4_softmax", "hardmax",
    // issue 36
    "qwen_logn_L2048", "llama4_step", "yarn_s4", "stablemax", "fox_f15_16",
    // issue 36, second part (selective: softmax of l - ReLU(s); ASEntmax: 1.5-entmax)
    "selective", "asentmax_b0.5"};
const std::set<std::string> kNotSumToOne = {
    "softmax_plus_one", "softpick", "softpick_wrong_relu_den", "sigmoid_attention",
    "stick_breaking", "relu_attention",
    // issue 36: the sink keeps mass back; SA-Softmax and Cog weights are signed;
    // the power normalisation gives an all-zero row no mass (beta = 1) or too much (1/2).
    "sink_b1", "sa_softmax", "power_t2_b1", "power_t2_b0.5", "cog_signed",
    // issue 36, last part: the factor (l - a)/(b - a) in [0, 1] keeps mass back
    "sa_softmax_norm"};

void EveryBuiltinIsInTheMatrixAndEveryCellWasRun() {
  const Matrix& m = builtin_matrix();
  EXPECT_GE(m.rows.size(), 26u);
  for (const auto& r : m.rows) {
    ASSERT_EQ(r.cells.size(), m.columns.size()) << r.variant;
    for (const auto& v : r.cells) {
      EXPECT_NE(v.outcome, Outcome::error) << describe(v);
      EXPECT_FALSE(v.claim.empty()) << describe(v);
      EXPECT_FALSE(v.rule.id.empty()) << describe(v);
      if (v.outcome == Outcome::fail) EXPECT_FALSE(v.counterexample.empty()) << describe(v);
      if (v.outcome == Outcome::pass) EXPECT_TRUE(v.counterexample.empty()) << describe(v);
    }
  }
  std::cout << render_table(m);
  // docs/variants.md: the whole matrix in a few minutes at most (aim < 60 s).
  EXPECT_LT(m.seconds, 120.0);
}

// docs/variants.md column "sums to 1" (softpick and stick-breaking: <= 1;
// softmax-plus-one: < 1).
void SumsToOneAsVariantsMdSays() {
  for (const auto& n : kSumsToOne) EXPECT_EQ(outcome(n, "sum_to_one"), Outcome::pass) << n;
  for (const auto& n : kNotSumToOne) EXPECT_EQ(outcome(n, "sum_to_one"), Outcome::fail) << n;
  for (const auto& n : {"softmax_plus_one", "softpick", "stick_breaking", "sink_b1", "power_t2_b1",
                        "cog_signed", "sa_softmax_norm"})
    EXPECT_EQ(outcome(n, "sum_at_most_one"), Outcome::pass) << n;
  for (const auto& n : {"sigmoid_attention", "relu_attention", "sa_softmax", "power_t2_b0.5"})
    EXPECT_EQ(outcome(n, "sum_at_most_one"), Outcome::fail) << n;
}

// docs/variants.md column "shift-invariant" (StableMax sums to one but is not).
void ShiftInvarianceAsVariantsMdSays() {
  for (const auto& n : kSumsToOne)
    EXPECT_EQ(outcome(n, "shift_invariance"), n == "stablemax" ? Outcome::fail : Outcome::pass)
        << n;
  for (const auto& n : kNotSumToOne) EXPECT_EQ(outcome(n, "shift_invariance"), Outcome::fail) << n;
}

// Stick-breaking is order dependent; top-k / argmax are discontinuous (docs/variants.md).
void OrderDependenceAndDiscontinuity() {
  for (const auto& r : builtin_matrix().rows) {
    const Outcome perm = outcome(r.variant, "permutation_equivariance");
    const bool positional = r.variant == "stick_breaking" || r.variant == "fox_f15_16";
    EXPECT_EQ(perm, positional ? Outcome::fail : Outcome::pass) << r.variant;
  }
  EXPECT_EQ(outcome("top4_softmax", "continuity"), Outcome::fail);
  EXPECT_EQ(outcome("hardmax", "continuity"), Outcome::fail);
  const Verdict* jump = cell(row("hardmax"), "continuity");
  EXPECT_NE(jump->counterexample.find("jump"), std::string::npos) << describe(*jump);
  for (const auto& n : {"softmax", "ssmax_s0.5", "sparsemax", "entmax15", "sigmoid_attention",
                        "stick_breaking", "sink_b1", "qwen_logn_L2048", "llama4_step", "yarn_s4",
                        "stablemax", "sa_softmax", "power_t2_b0.5", "fox_f15_16"})
    EXPECT_EQ(outcome(n, "continuity"), Outcome::pass) << n;
  // Cog's sign(l) and relu(l)^2 / sum relu^2 jump at 0 (from a zero row to one-hot).
  // Normalised SA-Softmax's factor (l - a)/(b - a) is 0/0 on the all-zero row (0 chosen
  // there) and 1 on [2^-30]: a jump at 0.
  for (const auto& n : {"cog_signed", "power_t2_b1", "sa_softmax_norm"}) {
    const Verdict* c = cell(row(n), "continuity");
    EXPECT_EQ(c->outcome, Outcome::fail) << n;
    EXPECT_NE(c->counterexample.find("jump"), std::string::npos) << describe(*c);
  }
  for (const auto& n : {"sa_softmax", "power_t2_b0.5", "cog_signed"})
    EXPECT_EQ(outcome(n, "bounded_01"), Outcome::fail) << n;
  for (const auto& n : {"sa_softmax", "cog_signed"})
    EXPECT_EQ(outcome(n, "monotonicity"), Outcome::fail) << n;
  for (const auto& n :
       {"sink_b1", "stablemax", "fox_f15_16", "power_t2_b1", "yarn_s4", "sa_softmax_norm"})
    EXPECT_EQ(outcome(n, "monotonicity"), Outcome::pass) << n;
  EXPECT_EQ(outcome("sa_softmax_norm", "bounded_01"), Outcome::pass);  // factor in [0, 1]
  EXPECT_EQ(outcome("relu_attention", "bounded_01"),
            Outcome::fail);  // relu(l)/n exceeds 1 for l > n
}

// docs/variants.md column "disperses (bounded logits)", and theory's thresholds.
void DispersionAsVariantsMdSays() {
  const auto measured = [](const std::string& v, const std::string& gap) {
    const Verdict* c = cell(row(v), "dispersion_g" + gap);
    const auto pos = c->note.find("measured ");
    return c->note.substr(pos + 9, c->note.find(':', pos) - pos - 9);
  };
  for (const auto& n : {"softmax", "softmax_theta0.5", "adaptive_temperature", "softmax_plus_one",
                        "softpick", "sigmoid_attention", "relu_attention", "sink_b1",
                        "qwen_logn_L2048", "llama4_step", "yarn_s4", "stablemax", "sa_softmax",
                        "power_t2_b1", "power_t2_b0.5", "cog_signed", "sa_softmax_norm"})
    for (const auto& g : {"0.5", "1", "2", "3"})
      EXPECT_EQ(measured(n, g), "to_zero") << n << " g=" << g;
  // SSMax, s = 0.5: s*g = 0.25, 0.5 -> 0; s*g = 1 -> 1/2; s*g = 1.5 -> 1.
  EXPECT_EQ(measured("ssmax_s0.5", "1"), "to_zero");
  EXPECT_EQ(measured("ssmax_s0.5", "2"), "bounded");
  EXPECT_NEAR(cell(row("ssmax_s0.5"), "dispersion_g2")->measured, 0.5, 1e-5);
  EXPECT_EQ(measured("ssmax_s0.5", "3"), "to_one");
  // log-length scaling = SSMax with s = 1.
  EXPECT_EQ(measured("log_length", "0.5"), "to_zero");
  EXPECT_EQ(measured("log_length", "1"), "bounded");
  EXPECT_EQ(measured("log_length", "2"), "to_one");
  // sparsemax one-hot when the gap is >= 1, entmax when >= 2.
  EXPECT_EQ(measured("sparsemax", "0.5"), "bounded");
  for (const auto& g : {"1", "2", "3"}) EXPECT_EQ(measured("sparsemax", g), "to_one") << g;
  EXPECT_EQ(cell(row("sparsemax"), "dispersion_g1")->measured, 1.0);  // exactly one-hot
  EXPECT_EQ(measured("entmax15", "1"), "bounded");
  for (const auto& g : {"2", "3"}) EXPECT_EQ(measured("entmax15", g), "to_one") << g;
  // fixed-k top-k keeps weight; stick-breaking's nearest item keeps weight.
  for (const auto& g : {"0.5", "1", "2", "3"}) {
    EXPECT_EQ(measured("top4_softmax", g), "bounded") << g;
    EXPECT_EQ(measured("stick_breaking", g), "bounded") << g;
    EXPECT_EQ(measured("hardmax", g), "to_one") << g;
  }
  // FoX with a constant gate f = 15/16: items at distance d weigh (15/16)^d,
  // so the top weight tends to e^g/(e^g + 15) whatever n.
  for (const double g : {0.5, 1.0, 2.0, 3.0}) {
    std::ostringstream gs;
    gs << g;
    EXPECT_EQ(measured("fox_f15_16", gs.str()), "bounded") << g;
    EXPECT_NEAR(cell(row("fox_f15_16"), "dispersion_g" + gs.str())->measured,
                std::exp(g) / (std::exp(g) + 15.0), 1e-9)
        << g;
  }
  // alpha-entmax, alpha = 5/4: the top weight tends to (g/4)^4 > 0 from above,
  // but as slowly as n^{-1/4}: no class is claimed (n/a); the curve still
  // falls at every doubling and stays above its limit.
  for (const double g : {0.5, 1.0, 2.0, 3.0}) {
    const auto c = dispersion_curve(*registry().find("entmax_a1.25"), g, FuzzConfig{});
    for (std::size_t k = 1; k < c.top_weight.size(); ++k)
      EXPECT_LT(c.top_weight[k], c.top_weight[k - 1]) << g << " at 2^" << c.log2_n[k];
    EXPECT_GT(c.top_weight.back(), std::pow(g / 4.0, 4.0)) << g;
  }
  // Every correct variant agrees with its theory prediction at every gap
  // (alpha-entmax 5/4 has none).
  for (const auto& r : builtin_matrix().rows) {
    if (r.wrong_formulation) continue;
    for (const auto& v : r.cells)
      if (v.property.rfind("dispersion", 0) == 0)
        EXPECT_EQ(v.outcome, r.variant == "entmax_a1.25" || r.variant == "laser" ? Outcome::skip
                                                                                 : Outcome::pass)
            << describe(v);
  }
}

// Special values and kernel accuracy: every built-in float32 kernel follows
// variant.h's NaN and +inf semantics and stays within its stated rounding
// bound; -inf masks work everywhere except softpick, whose published
// denominator counts |exp(-inf) - 1| = 1 for a masked item.
void SpecialValuesAndKernelAccuracy() {
  for (const auto& r : builtin_matrix().rows) {
    EXPECT_EQ(outcome(r.variant, "special.nan"), Outcome::pass) << r.variant;
    EXPECT_EQ(outcome(r.variant, "special.pos_inf"), Outcome::pass) << r.variant;
    EXPECT_EQ(outcome(r.variant, "f32_vs_reference"), Outcome::pass)
        << describe(*cell(r, "f32_vs_reference"));
    // FoX: a masked key keeps its place in the decay (not claimed, builtins.cpp).
    const bool mask_finding = r.variant == "softpick" || r.variant == "fox_f15_16";
    EXPECT_EQ(outcome(r.variant, "special.neg_inf_mask"),
              mask_finding ? Outcome::fail : Outcome::pass)
        << r.variant;
    // Every streaming state a built-in supplies merges to the whole row.
    EXPECT_NE(outcome(r.variant, "streamable"), Outcome::fail) << describe(*cell(r, "streamable"));
  }
  for (const auto& n : {"adaptive_temperature", "sparsemax", "entmax15", "entmax_a1.25"})
    EXPECT_EQ(streamable_word(row(n)), "no") << n;
  for (const auto& n :
       {"softmax", "ssmax_s0.5", "softmax_plus_one", "sink_b1", "qwen_logn_L2048", "llama4_step",
        "yarn_s4", "stablemax", "sa_softmax", "cog_signed", "hardmax", "sigmoid_attention",
        "relu_attention", "fox_f15_16", "power_t2_b1", "power_t2_b0.5", "sa_softmax_norm"})
    EXPECT_EQ(streamable_word(row(n)), "yes") << n;
}

// The two-row variants (variant.h ABI 3) and ASEntmax, as docs/variants.md says.
void TwoRowVariantsAsVariantsMdSays() {
  // Differential attention: sums to 1 - lambda, signed weights (findings); each
  // softmax is shift invariant and both rows move together, so shift, permutation,
  // monotonicity (in A1) and continuity hold; with A2 uniform it disperses (T1).
  EXPECT_EQ(outcome("diff_l0.5", "sum_to_one"), Outcome::fail);
  EXPECT_NE(cell(row("diff_l0.5"), "sum_to_one")->counterexample.find("in2 = "), std::string::npos);
  EXPECT_EQ(outcome("diff_l0.5", "bounded_01"), Outcome::fail);
  for (const auto* p : {"sum_at_most_one", "shift_invariance", "permutation_equivariance",
                        "monotonicity", "continuity", "special.neg_inf_mask"})
    EXPECT_EQ(outcome("diff_l0.5", p), Outcome::pass) << p;
  EXPECT_FALSE(claims(row("diff_l0.5"), *cell(row("diff_l0.5"), "sum_to_one")));
  // LASER: one number per row, so the weight properties are n/a; invariant under a
  // shift of the logits and a joint permutation of keys and values; continuous.
  for (const auto* p : {"sum_to_one", "sum_at_most_one", "bounded_01", "monotonicity",
                        "dispersion_g0.5", "dispersion_g3"})
    EXPECT_EQ(outcome("laser", p), Outcome::skip) << p;
  for (const auto* p :
       {"shift_invariance", "permutation_equivariance", "continuity", "special.neg_inf_mask"})
    EXPECT_EQ(outcome("laser", p), Outcome::pass) << p;
  // Each streams with its second row (variant.h ABI 4): two (m, S) states,
  // one over l - ReLU(s), and LASER's (m, S) over l with (M, T) over l + v.
  for (const auto& n : {"diff_l0.5", "selective", "laser"}) {
    EXPECT_EQ(streamable_word(row(n)), "yes") << n;
    EXPECT_NE(row(n).in2_kind, In2Kind::none) << n;
  }
  EXPECT_TRUE(row("laser").scalar_output);
  // ASEntmax: the scale 1 + beta ln n makes the scaled gap reach 2: one-hot at every gap.
  for (const auto& g : {"0.5", "1", "2", "3"})
    EXPECT_EQ(cell(row("asentmax_b0.5"), std::string("dispersion_g") + g)->measured, 1.0) << g;
  EXPECT_EQ(streamable_word(row("asentmax_b0.5")), "no");
  EXPECT_TRUE(claimed_failures(builtin_matrix()).empty());
}

void JsonCarriesVerdictFieldsPerCell() {
  const auto j = to_json(builtin_matrix());
  ASSERT_TRUE(j.contains("variants"));
  const auto& v0 = j["variants"][0];
  for (const auto& col : j["columns"]) {
    const auto& c = v0["cells"][col["id"].get<std::string>()];
    for (const auto* f : {"claim", "measured", "bound", "rule", "counterexample", "outcome"})
      EXPECT_TRUE(c.contains(f)) << col["id"] << " lacks " << f;
  }
}

// One test (one process, one matrix run): the checks above share the matrix.
TEST(VariantMatrix, ReproducesVariantsMd) {
  {
    SCOPED_TRACE("EveryBuiltinIsInTheMatrixAndEveryCellWasRun");
    EveryBuiltinIsInTheMatrixAndEveryCellWasRun();
  }
  {
    SCOPED_TRACE("SumsToOneAsVariantsMdSays");
    SumsToOneAsVariantsMdSays();
  }
  {
    SCOPED_TRACE("ShiftInvarianceAsVariantsMdSays");
    ShiftInvarianceAsVariantsMdSays();
  }
  {
    SCOPED_TRACE("OrderDependenceAndDiscontinuity");
    OrderDependenceAndDiscontinuity();
  }
  {
    SCOPED_TRACE("DispersionAsVariantsMdSays");
    DispersionAsVariantsMdSays();
  }
  {
    SCOPED_TRACE("SpecialValuesAndKernelAccuracy");
    SpecialValuesAndKernelAccuracy();
  }
  {
    SCOPED_TRACE("TwoRowVariantsAsVariantsMdSays");
    TwoRowVariantsAsVariantsMdSays();
  }
  {
    SCOPED_TRACE("JsonCarriesVerdictFieldsPerCell");
    JsonCarriesVerdictFieldsPerCell();
  }
}

}  // namespace
}  // namespace sa::variants
