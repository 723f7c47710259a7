// run_suite's progress (SuiteObserver::progress) and per-verdict time
// (Verdict::seconds), issue 32: the bar counts every family that runs (the
// batched attention families included), never goes back, and ends at its
// total; every verdict of the suite carries the wall seconds spent on it.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/naive/naive_kernel.hpp"
#include "properties/suite.hpp"

namespace {

struct Recorded {
  std::vector<std::pair<int, int>> progress;            // (done, total) per call
  std::vector<std::pair<std::string, int>> verdict_at;  // property, done when emitted
  std::vector<sa::Verdict> verdicts;
};

Recorded run(std::vector<sa::AttnType> types) {
  const sa::Kernel kernel(sa::kernels::naive_kernel(), "built-in");
  sa::props::SuiteConfig c;
  c.cases = 2;
  c.seed = 11;
  c.dtypes = {sa::DType::float32};
  c.attention.types = std::move(types);
  // One row property and the attention_v2 family: every family still runs
  // (and ticks), most of them with nothing selected.
  c.properties = {"differential.ulp", "attention_v2.rounding"};
  Recorded r;
  sa::props::SuiteObserver obs;
  int done = 0;
  obs.progress = [&](int d, int t) {
    r.progress.emplace_back(d, t);
    done = d;
  };
  obs.on_verdict = [&](const sa::Verdict& v) { r.verdict_at.emplace_back(v.property, done); };
  r.verdicts = sa::props::run_suite(kernel, c, &obs);
  return r;
}

TEST(SuiteProgress, MonotoneEndsAtTotalAndCountsAttentionV2) {
  const Recorded one = run({sa::AttnType::float32});
  ASSERT_FALSE(one.progress.empty());
  const int total = one.progress.front().second;
  ASSERT_GT(total, 0);
  int last = 0;
  for (const auto& [d, t] : one.progress) {
    EXPECT_EQ(t, total) << "the total never changes during a run";
    EXPECT_GE(d, last) << "progress never goes back";
    EXPECT_LE(d, total);
    last = d;
  }
  EXPECT_EQ(one.progress.back().first, total) << "100% when the suite returns";
  // The attention_v2 verdicts come before the bar is full: the family is in the total.
  bool saw_attention = false;
  for (const auto& [property, d] : one.verdict_at)
    if (property.rfind("attention_v2.", 0) == 0) {
      saw_attention = true;
      EXPECT_LT(d, total) << property << " emitted with the bar already at 100%";
    }
  EXPECT_TRUE(saw_attention) << "the naive kernel declares attention_v2";
  // One more attention_v2 element type: a larger total.
  const Recorded two = run({sa::AttnType::float32, sa::AttnType::bfloat16});
  ASSERT_FALSE(two.progress.empty());
  EXPECT_GT(two.progress.front().second, total);
  EXPECT_EQ(two.progress.back().first, two.progress.back().second);
}

TEST(SuiteProgress, EveryVerdictCarriesItsSeconds) {
  const Recorded r = run({sa::AttnType::float32});
  ASSERT_FALSE(r.verdicts.empty());
  double sum = 0;
  for (const auto& v : r.verdicts) {
    EXPECT_TRUE(std::isfinite(v.seconds) && v.seconds >= 0) << sa::describe(v);
    sum += v.seconds;
  }
  EXPECT_GT(sum, 0);
}

}  // namespace
