// The correct naive kernel passes the whole property suite: no false alarms.
// (A failure here means the suite, a bound, or the naive kernel is wrong; the
// verdict printed says which claim, measured value, bound and input.)
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "kernels/naive/naive_kernel.hpp"
#include "properties/suite.hpp"

namespace {

sa::props::SuiteConfig config() {
  sa::props::SuiteConfig c;
  c.cases = 60;
  if (const char* s = std::getenv("SA_SUITE_CASES")) c.cases = std::atoi(s);
  c.seed = 20261121;
  if (const char* s = std::getenv("SA_SUITE_SEED")) c.seed = std::strtoull(s, nullptr, 10);
  return c;
}

TEST(NaiveSuite, EveryVerdictPassesOrSkips) {
  const sa::Kernel k(sa::kernels::naive_kernel(), "built-in");
  auto cfg = config();
  cfg.rules = {"ulp", "t7_apriori", "flash_attention_2x", "pytorch_fudge5", "onednn_10eps", "bias"};
  const auto t0 = std::chrono::steady_clock::now();
  const auto verdicts = sa::props::run_suite(k, cfg);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << verdicts.size() << " verdicts in " << s << " s\n";
  int pass = 0, skip = 0;
  for (const auto& v : verdicts) {
    if (v.outcome == sa::Outcome::pass) ++pass;
    if (v.outcome == sa::Outcome::skip) ++skip;
    const bool ok = v.outcome == sa::Outcome::pass || v.outcome == sa::Outcome::skip;
    // onednn_10eps is a convention a correct float32-accumulating kernel may miss at large n;
    // it is reported, not required (see properties/suite.cpp rules()).
    if (v.rule.id == "onednn_10eps") {
      if (!ok) std::cout << "(convention not met, informational)\n" << sa::describe(v) << "\n";
      continue;
    }
    EXPECT_TRUE(ok) << sa::describe(v);
    if (std::getenv("SA_SUITE_VERBOSE")) std::cout << sa::describe(v) << "\n";
  }
  std::cout << pass << " pass, " << skip << " skip\n";
  EXPECT_GT(pass, 60);
}

TEST(NaiveSuite, ListsAreConsistent) {
  const auto props = sa::props::properties();
  const auto rules = sa::props::rules();
  for (const auto& p : props) {
    bool found = false;
    for (const auto& r : rules) found = found || r.id == p.rule;
    EXPECT_TRUE(found) << p.id << " names rule " << p.rule << " which rules() lacks";
  }
  EXPECT_GE(sa::props::distributions().size(), 9u);
}

}  // namespace
