// Every backward mutant (issue 16's bug classes) is caught by the property
// named for it with a shrunk counterexample (or, for determinism, the call
// that differed), and the correct naive kernel passes the same run.
#include <gtest/gtest.h>

#include <iostream>

#include "backward_mutants.hpp"
#include "kernels/naive/naive_kernel.hpp"
#include "properties/suite.hpp"

namespace {

sa::props::SuiteConfig bwd_config() {
  sa::props::SuiteConfig c;
  c.ops = {sa::Op::softmax_backward, sa::Op::attention_backward};
  c.properties = {"backward", "attention_backward", "determinism"};
  c.dtypes = {sa::DType::float32};
  c.cases = 96;  // 12 attention cases, 24 row cases
  c.seed = 16161616;
  c.determinism_repeats = 20;
  return c;
}

class BackwardMutant : public ::testing::TestWithParam<int> {};

TEST_P(BackwardMutant, CaughtWithShrunkCounterexample) {
  const auto m = sa::mutants::backward_mutants()[static_cast<std::size_t>(GetParam())];
  const sa::Kernel k(m.mutant.kernel, "tests/mutants");
  bool caught = false;
  for (const auto& v : sa::props::run_suite(k, bwd_config())) {
    if (v.outcome == sa::Outcome::error) ADD_FAILURE() << sa::describe(v);
    if (v.outcome != sa::Outcome::fail) continue;
    if (v.property.rfind("determinism.", 0) != 0)
      EXPECT_NE(v.counterexample.find("shrunk"), std::string::npos) << sa::describe(v);
    if (v.property == m.caught_by) {
      caught = true;
      std::cout << k.name() << " (" << m.mutant.bug_class << "):\n" << sa::describe(v) << "\n";
    }
  }
  EXPECT_TRUE(caught) << k.name() << " (" << m.mutant.bug_class << ") escaped " << m.caught_by;
}

INSTANTIATE_TEST_SUITE_P(
    Backward, BackwardMutant,
    ::testing::Range(0, static_cast<int>(sa::mutants::backward_mutants().size())),
    [](const ::testing::TestParamInfo<int>& i) {
      return std::string(
          sa::mutants::backward_mutants()[static_cast<std::size_t>(i.param)].mutant.kernel->name);
    });

TEST(BackwardMutantControl, NaiveKernelPassesTheSameRun) {
  const sa::Kernel k(sa::kernels::naive_kernel(), "built-in");
  int passed = 0;
  for (const auto& v : sa::props::run_suite(k, bwd_config())) {
    EXPECT_TRUE(v.outcome == sa::Outcome::pass || v.outcome == sa::Outcome::skip)
        << sa::describe(v);
    passed += v.outcome == sa::Outcome::pass;
  }
  EXPECT_GE(passed, 8) << "the control checked (almost) nothing";
}

// The opt-in cuDNN frontend convention (rule cudnn_frontend_bwd,
// attention_backward.cudnn_frontend): it fails a kernel outside cuDNN's SDPA
// backward tolerances (dQ multiplied by the scale twice) with a shrunk
// counterexample naming dq, passes the correct naive kernel on the same
// cases, and runs only when the rule is named.
TEST(CudnnFrontendConvention, FailsAKernelOutsideItAndPassesOneInside) {
  sa::props::SuiteConfig c;
  c.ops = {sa::Op::attention_backward};
  c.properties = {"attention_backward.cudnn_frontend"};
  c.rules = {"cudnn_frontend_bwd"};
  c.dtypes = {sa::DType::bfloat16};
  c.cases = 96;
  c.seed = 16161616;
  const sa::mutants::BackwardMutant* outside = nullptr;
  static const auto all = sa::mutants::backward_mutants();
  for (const auto& m : all)
    if (std::string(m.mutant.kernel->name) == "mutant_bwd_dq_scaled_twice") outside = &m;
  ASSERT_NE(outside, nullptr);
  const auto bad = sa::props::run_suite(sa::Kernel(outside->mutant.kernel, "tests/mutants"), c);
  ASSERT_EQ(bad.size(), 1u);
  std::cout << sa::describe(bad[0]) << "\n";
  EXPECT_EQ(bad[0].outcome, sa::Outcome::fail) << sa::describe(bad[0]);
  EXPECT_EQ(bad[0].rule.id, "cudnn_frontend_bwd");
  EXPECT_NE(bad[0].counterexample.find("shrunk"), std::string::npos) << sa::describe(bad[0]);
  EXPECT_NE(sa::describe(bad[0]).find("dq"), std::string::npos) << sa::describe(bad[0]);

  const sa::Kernel naive(sa::kernels::naive_kernel(), "built-in");
  const auto good = sa::props::run_suite(naive, c);
  ASSERT_EQ(good.size(), 1u);
  EXPECT_EQ(good[0].outcome, sa::Outcome::pass) << sa::describe(good[0]);

  // Opt-in: without the rule named, the property does not run.
  c.rules.clear();
  EXPECT_TRUE(sa::props::run_suite(naive, c).empty());
}

}  // namespace
