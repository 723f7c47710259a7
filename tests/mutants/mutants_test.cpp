// Every mutant (one bug class of docs/bug-classes.md each) is caught by the property
// suite with a shrunk counterexample, by the property the table below names;
// and the correct naive kernel, run with the same configuration, passes.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <set>

#include "kernels/naive/naive_kernel.hpp"
#include "mutant_kernels.hpp"
#include "properties/suite.hpp"

namespace {

sa::props::SuiteConfig config() {
  sa::props::SuiteConfig c;
  c.cases = 25;
  c.seed = 424242;
  return c;
}

// bug class -> a property (id[op/dtype]) that must catch it (others may too).
const std::map<std::string, std::string> kExpected = {
    {"mutant_no_max", "differential.ulp[softmax/float32]"},
    {"mutant_abs_max", "differential.ulp[softmax/float32]"},
    {"mutant_masked_nan", "special.values[softmax/float32]"},
    {"mutant_masked_uniform", "special.values[softmax/float32]"},
    {"mutant_block_max", "differential.ulp[softmax/float32]"},
    {"mutant_neg_inf_tile", "differential.ulp[softmax/float32]"},
    {"mutant_bf16_accumulation", "differential.ulp[softmax/bfloat16]"},
    {"mutant_split_kv_weights", "differential.ulp[merge_attention_states/float32]"},
    {"mutant_tail_unmasked", "differential.ulp[softmax/float32]"},
    // The mutants are interface v1 kernels: their attention is judged through
    // the v1 slot by the attention_v2 properties (op attention).
    {"mutant_causal_top_left", "attention_v2.rounding[attention/float32]"},
    {"mutant_inf_nan", "special.values[softmax/float32]"},
    {"mutant_index_wrap", "differential.ulp[softmax/float32]"},
    {"mutant_round_toward_zero", "differential.bias[softmax/bfloat16]"},
    {"mutant_entropy_cancellation", "metamorphic.shift_invariance[entropy/float32]"},
    {"mutant_temperature_twice", "differential.ulp[softmax/float32]"},
    {"mutant_adaptive_no_clamp", "metamorphic.adaptive_beta[adaptive_softmax/float32]"},
    {"mutant_in_place", "interface.sizes[softmax/float32]"},
    {"mutant_contiguous_rows", "interface.sizes[softmax/float32]"},
    {"mutant_chunk_tail", "interface.sizes[softmax/float32]"},
    // 3u is inside what correct kernels reach on one row (a faithful exp, a
    // reciprocal multiply): only the statistic over all rows sees it.
    {"mutant_scaled_1_plus_3u", "differential.bias[softmax/float32]"},
    // float16 stores: truncation is up to a whole ulp where nearest even is
    // half of one; flushed subnormals lose weights in [2^-24, 2^-14) that the
    // per-element budget (0.5 ulp of float16, spacing 2^-24 there) requires.
    {"mutant_f16_round_toward_zero", "differential.ulp[softmax/float16]"},
    {"mutant_f16_flush_subnormals", "differential.ulp[softmax/float16]"},
};

// A statistical property needs more rows than one row's bug: the (1+3u)
// mutant runs the default policy on float32 softmax only, with more cases, on
// rows up to 32 items (on long rows the base kernel's own sequential-sum
// errors, hundreds of ulps at n = 4096, swamp the mean: standard error 2 ulp).
sa::props::SuiteConfig config_for(const std::string& mutant) {
  sa::props::SuiteConfig c = config();
  if (mutant == "mutant_scaled_1_plus_3u") {
    c.ops = {sa::Op::softmax};
    c.dtypes = {sa::DType::float32};
    c.cases = 200;
    for (std::int64_t n = 1; n <= 32; ++n) c.sizes.push_back(n);
    c.distributions = {"gaussian"};
  }
  if (mutant.rfind("mutant_f16_", 0) == 0) c.dtypes = {sa::DType::float16};
  return c;
}

std::string key(const sa::Verdict& v) { return v.property + "[" + v.op + "/" + v.dtype + "]"; }

class MutantTest : public ::testing::TestWithParam<int> {};

TEST_P(MutantTest, CaughtWithCounterexample) {
  const auto mutants = sa::mutants::all_mutants();
  const auto& m = mutants[static_cast<std::size_t>(GetParam())];
  const sa::Kernel k(m.kernel, "tests/mutants");
  const auto verdicts = sa::props::run_suite(k, config_for(k.name()));
  std::set<std::string> caught;
  const sa::Verdict* first = nullptr;
  for (const auto& v : verdicts)
    if (v.outcome == sa::Outcome::fail) {
      caught.insert(key(v));
      if (!first || key(v) == kExpected.at(k.name())) first = &v;
      EXPECT_FALSE(v.counterexample.empty()) << sa::describe(v);
    }
  std::cout << k.name() << " (" << m.bug_class << ") caught by " << caught.size() << " properties:";
  for (const auto& c : caught) std::cout << " " << c;
  std::cout << "\n";
  EXPECT_FALSE(caught.empty()) << k.name() << " (" << m.bug_class << ") escaped the suite";
  if (first) std::cout << sa::describe(*first) << "\n";
  std::string expected_verdict;
  for (const auto& v : verdicts)
    if (key(v) == kExpected.at(k.name())) expected_verdict = sa::describe(v);
  EXPECT_TRUE(caught.count(kExpected.at(k.name())))
      << "expected " << kExpected.at(k.name()) << "; its verdict:\n"
      << expected_verdict;
}

INSTANTIATE_TEST_SUITE_P(
    AllBugClasses, MutantTest,
    ::testing::Range(0, static_cast<int>(sa::mutants::all_mutants().size())),
    [](const ::testing::TestParamInfo<int>& i) {
      return std::string(
          sa::mutants::all_mutants()[static_cast<std::size_t>(i.param)].kernel->name);
    });

TEST(MutantControl, NaiveKernelPassesTheSameConfiguration) {
  const sa::Kernel k(sa::kernels::naive_kernel(), "built-in");
  // config() has no dtypes: float32, bfloat16 and (the naive kernel declares
  // it) float16, so this run contains the float16 mutants' float16-only run
  // (same seed, same float16 cases).
  bool f16_checked = false;
  for (const auto& v : sa::props::run_suite(k, config())) {
    EXPECT_TRUE(v.outcome == sa::Outcome::pass || v.outcome == sa::Outcome::skip)
        << sa::describe(v);
    f16_checked = f16_checked || (v.dtype == "float16" && v.outcome == sa::Outcome::pass);
  }
  EXPECT_TRUE(f16_checked) << "no float16 verdict passed: the float16 mutants' control is missing";
  for (const auto& v : sa::props::run_suite(k, config_for("mutant_scaled_1_plus_3u")))
    EXPECT_TRUE(v.outcome == sa::Outcome::pass || v.outcome == sa::Outcome::skip)
        << sa::describe(v);
}

}  // namespace

namespace {
// The interface mutants are wrong only where kernel.h grants a freedom: without
// interface.sizes (n <= 4097) the chunk-tail mutant passes everything, so only
// the sizes past 4097 hold a kernel to its large-n paths.
TEST(MutantControl, ChunkTailMutantIsWrongOnlyPast4097) {
  for (const auto& m : sa::mutants::all_mutants()) {
    if (std::string(m.kernel->name) != "mutant_chunk_tail") continue;
    const sa::Kernel k(m.kernel, "tests/mutants");
    auto c = config();
    c.properties = {"differential", "metamorphic", "special"};
    for (const auto& v : sa::props::run_suite(k, c))
      EXPECT_TRUE(v.outcome == sa::Outcome::pass || v.outcome == sa::Outcome::skip)
          << sa::describe(v);
    c.properties = {"interface.sizes"};
    c.max_log2_n = 12;  // n <= 4097: still right
    for (const auto& v : sa::props::run_suite(k, c))
      EXPECT_NE(v.outcome, sa::Outcome::fail) << sa::describe(v);
    c.max_log2_n = 13;  // 8191, 8193: wrong
    bool caught = false;
    for (const auto& v : sa::props::run_suite(k, c))
      caught = caught || v.outcome == sa::Outcome::fail;
    EXPECT_TRUE(caught);
  }
}
}  // namespace
