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

}  // namespace
