// A kernel lacking ops or dtypes gets skip verdicts saying why, never a
// failure or an error.
#include <gtest/gtest.h>

#include "kernels/naive/naive_kernel.hpp"
#include "properties/suite.hpp"

TEST(SuiteSkips, KernelWithOnlyFloat32Softmax) {
  static sa_kernel k = *sa::kernels::naive_kernel();
  k.name = "softmax_only";
  k.ops = SA_OP_SOFTMAX;
  k.dtypes = SA_DTYPE_F32;
  k.log_softmax = nullptr;
  k.logsumexp = nullptr;
  k.entropy = nullptr;
  k.adaptive_softmax = nullptr;
  k.attention = nullptr;
  k.merge_entropy_states = nullptr;
  k.merge_attention_states = nullptr;
  const sa::Kernel kernel(&k, "test");
  sa::props::SuiteConfig c;
  c.cases = 10;
  c.seed = 7;
  int skips = 0, passes = 0;
  for (const auto& v : sa::props::run_suite(kernel, c)) {
    EXPECT_TRUE(v.outcome == sa::Outcome::pass || v.outcome == sa::Outcome::skip) << sa::describe(v);
    if (v.outcome == sa::Outcome::skip) {
      ++skips;
      EXPECT_FALSE(v.note.empty()) << sa::describe(v);
    } else {
      ++passes;
      EXPECT_EQ(v.op, "softmax");
      EXPECT_EQ(v.dtype, "float32");
    }
  }
  EXPECT_GT(skips, 10);
  EXPECT_GT(passes, 3);
}
