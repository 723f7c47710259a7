// The n-way split-KV merge (merge_attention_states_n) as kernels ship it
// wrong: each mutant is the naive kernel with a one-pass float32 merge that
// has one real bug, and differential.ulp[merge_attention_states_n] catches it
// with a shrunk counterexample while the naive and cpu kernels pass the same run.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <vector>

#include "kernels/cpu/cpu_kernel.hpp"
#include "kernels/naive/naive_kernel.hpp"
#include "properties/suite.hpp"

namespace {

enum class Bug { drops_last_part, nan_when_all_empty, not_normalised };

// One pass: m = max lse, w_p = exp(lse_p - m), out = sum w_p o_p / sum w_p,
// in float32, with the bug `B`.
template <Bug B>
sa_status merge_n(void*, std::int64_t parts, std::int64_t rows, std::int64_t dv,
                  const float* const* o, const float* const* lse, float* out, float* out_lse) {
  const std::int64_t used = B == Bug::drops_last_part && parts > 1 ? parts - 1 : parts;
  for (std::int64_t r = 0; r < rows; ++r) {
    float m = -INFINITY;
    for (std::int64_t p = 0; p < used; ++p) m = std::fmax(m, lse[p][r]);
    const bool empty = m == -INFINITY;
    float S = 0;
    std::vector<float> acc(static_cast<std::size_t>(dv), 0.0f);
    for (std::int64_t p = 0; p < used; ++p) {
      // The correct kernel skips an all-empty row; the mutant forms -inf - -inf.
      if (empty && B != Bug::nan_when_all_empty) break;
      const float w = std::exp(lse[p][r] - m);
      S += w;
      for (std::int64_t c = 0; c < dv; ++c)
        acc[static_cast<std::size_t>(c)] += w * o[p][r * dv + c];
    }
    for (std::int64_t c = 0; c < dv; ++c)
      out[r * dv + c] = empty && B != Bug::nan_when_all_empty ? 0.0f
                        : B == Bug::not_normalised            ? acc[static_cast<std::size_t>(c)]
                                                   : acc[static_cast<std::size_t>(c)] / S;
    out_lse[r] = empty && B != Bug::nan_when_all_empty ? -INFINITY : m + std::log(S);
  }
  return SA_OK;
}

template <Bug B>
const sa_kernel* mutant(const char* name) {
  static sa_kernel k = [name] {
    sa_kernel m = *sa::kernels::naive_kernel();
    m.name = name;
    m.merge_attention_states_n = merge_n<B>;
    return m;
  }();
  return &k;
}

sa::props::SuiteConfig merge_config() {
  sa::props::SuiteConfig c;
  c.ops = {sa::Op::merge_attention_states_n};
  c.dtypes = {sa::DType::float32};
  c.properties = {"differential.ulp"};
  c.cases = 90;  // 30 cases
  c.seed = 515151;
  return c;
}

const sa::Verdict* merge_verdict(const std::vector<sa::Verdict>& vs) {
  for (const auto& v : vs)
    if (v.property == "differential.ulp" && v.op == "merge_attention_states_n") return &v;
  return nullptr;
}

void expect_caught(const sa_kernel* desc) {
  const sa::Kernel k(desc, "tests/mutants");
  const auto vs = sa::props::run_suite(k, merge_config());
  const sa::Verdict* v = merge_verdict(vs);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->outcome, sa::Outcome::fail) << sa::describe(*v);
  EXPECT_NE(v->counterexample.find("shrunk"), std::string::npos) << sa::describe(*v);
  std::cout << desc->name << ":\n" << sa::describe(*v) << "\n";
}

TEST(MergeNMutant, DropsTheLastPart) {
  expect_caught(mutant<Bug::drops_last_part>("mutant_merge_n_drops_last_part"));
}
TEST(MergeNMutant, NanWhenEveryPartIsEmpty) {
  expect_caught(mutant<Bug::nan_when_all_empty>("mutant_merge_n_nan_when_all_empty"));
}
TEST(MergeNMutant, NotNormalised) {
  expect_caught(mutant<Bug::not_normalised>("mutant_merge_n_not_normalised"));
}

// The same run passes the correct kernels: naive (a left fold of two-part
// merges, the deepest evaluation the bound allows) and cpu (one pass in double).
TEST(MergeNMutantControl, NaiveAndCpuPassTheSameRun) {
  for (const sa_kernel* desc : {sa::kernels::naive_kernel(), sa::kernels::cpu_kernel()}) {
    const sa::Kernel k(desc, "built-in");
    const auto vs = sa::props::run_suite(k, merge_config());
    const sa::Verdict* v = merge_verdict(vs);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->outcome, sa::Outcome::pass) << sa::describe(*v);
    std::cout << desc->name << ": " << sa::describe(*v) << "\n";
  }
}

}  // namespace
