// interface.sizes to n = 2^24 + 1 (label `long`): every row op of the naive
// and built-in CPU kernels at n = 2^k - 1, 2^k, 2^k + 1 for k = 0..24, every
// element checked (properties/interface.cpp). The default run goes to 2^16.
#include <gtest/gtest.h>

#include "kernels/builtin.hpp"
#include "properties/suite.hpp"

TEST(LongSizes, BuiltInKernelsHoldToTwoToThe24) {
  for (const sa::Kernel& k : sa::builtin_kernels()) {
    if (k.memory() != SA_MEMORY_HOST) continue;
    sa::props::SuiteConfig c;
    c.seed = 24;
    c.properties = {"interface.sizes"};
    c.max_log2_n = 24;
    for (const auto& v : sa::props::run_suite(k, c)) {
      std::cout << sa::describe(v) << "\n";
      EXPECT_TRUE(v.outcome == sa::Outcome::pass || v.outcome == sa::Outcome::skip)
          << sa::describe(v);
    }
  }
}
