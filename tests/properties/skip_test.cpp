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
  k.attention_v2 = nullptr;
  k.softmax_backward = nullptr;
  k.log_softmax_backward = nullptr;
  k.attention_backward = nullptr;
  k.merge_attention_states_n = nullptr;
  const sa::Kernel kernel(&k, "test");
  sa::props::SuiteConfig c;
  c.cases = 10;
  c.seed = 7;
  int skips = 0, passes = 0;
  for (const auto& v : sa::props::run_suite(kernel, c)) {
    EXPECT_TRUE(v.outcome == sa::Outcome::pass || v.outcome == sa::Outcome::skip)
        << sa::describe(v);
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

TEST(SuiteConfigErrors, NameTheBadField) {
  const sa::Kernel kernel(sa::kernels::naive_kernel(), "built-in");
  sa::props::SuiteConfig c;
  c.distributions = {"gausian"};
  try {
    sa::props::run_suite(kernel, c);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gausian"), std::string::npos);
  }
  c = {};
  c.rules = {"ulps"};
  EXPECT_THROW(sa::props::run_suite(kernel, c), std::invalid_argument);
  c = {};
  c.temperature = 0;
  EXPECT_THROW(sa::props::run_suite(kernel, c), std::invalid_argument);
}

TEST(SuiteSelection, PropertyFamilyAndOpFilters) {
  const sa::Kernel kernel(sa::kernels::naive_kernel(), "built-in");
  sa::props::SuiteConfig c;
  c.cases = 5;
  c.seed = 3;
  c.properties = {"metamorphic"};
  c.ops = {sa::Op::entropy};
  c.dtypes = {sa::DType::float32};
  const auto vs = sa::props::run_suite(kernel, c);
  ASSERT_FALSE(vs.empty());
  for (const auto& v : vs) {
    EXPECT_EQ(v.property.rfind("metamorphic.", 0), 0u) << v.property;
    EXPECT_EQ(v.op, "entropy");
    EXPECT_TRUE(v.passed()) << sa::describe(v);
  }
}
