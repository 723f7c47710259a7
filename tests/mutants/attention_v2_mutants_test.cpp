// Every batched-attention mutant is caught by the attention_v2 properties with
// a shrunk counterexample, and the correct naive kernel passes the same run.
#include <gtest/gtest.h>

#include <iostream>
#include <map>

#include "attention_v2_mutants.hpp"
#include "kernels/naive/naive_kernel.hpp"
#include "properties/suite.hpp"

namespace {

sa::props::SuiteConfig v2_config() {
  sa::props::SuiteConfig c;
  c.ops = {sa::Op::attention_v2};
  c.properties = {"attention_v2"};  // the determinism family has its own mutant test
  c.dtypes = {sa::DType::float32};
  c.cases = 160;  // 20 batched-attention cases
  c.seed = 424242;
  return c;
}

const std::map<std::string, std::string> kExpected = {
    {"mutant_v2_window_edge", "attention_v2.rounding"},
    {"mutant_v2_gqa_mapping", "attention_v2.rounding"},
    {"mutant_v2_varlen_offset", "attention_v2.rounding"},
    {"mutant_v2_past_128_tile", "attention_v2.rounding"},
};

class AttentionV2Mutant : public ::testing::TestWithParam<int> {};

TEST_P(AttentionV2Mutant, CaughtWithShrunkCounterexample) {
  const auto m = sa::mutants::attention_v2_mutants()[static_cast<std::size_t>(GetParam())];
  const sa::Kernel k(m.kernel, "tests/mutants");
  bool caught = false;
  for (const auto& v : sa::props::run_suite(k, v2_config())) {
    if (v.outcome == sa::Outcome::error) ADD_FAILURE() << sa::describe(v);
    if (v.outcome != sa::Outcome::fail) continue;
    EXPECT_NE(v.counterexample.find("shrunk"), std::string::npos) << sa::describe(v);
    if (v.property == kExpected.at(k.name())) {
      caught = true;
      std::cout << k.name() << " (" << m.bug_class << "):\n" << sa::describe(v) << "\n";
    }
  }
  EXPECT_TRUE(caught) << k.name() << " (" << m.bug_class << ") escaped "
                      << kExpected.at(k.name());
}

INSTANTIATE_TEST_SUITE_P(
    BatchedAttention, AttentionV2Mutant,
    ::testing::Range(0, static_cast<int>(sa::mutants::attention_v2_mutants().size())),
    [](const ::testing::TestParamInfo<int>& i) {
      return std::string(
          sa::mutants::attention_v2_mutants()[static_cast<std::size_t>(i.param)].kernel->name);
    });

TEST(AttentionV2MutantControl, NaiveKernelPassesTheSameRun) {
  const sa::Kernel k(sa::kernels::naive_kernel(), "built-in");
  int passed = 0;
  for (const auto& v : sa::props::run_suite(k, v2_config())) {
    EXPECT_TRUE(v.outcome == sa::Outcome::pass || v.outcome == sa::Outcome::skip)
        << sa::describe(v);
    passed += v.outcome == sa::Outcome::pass;
  }
  EXPECT_GE(passed, 4) << "the control checked (almost) nothing";
}

}  // namespace
