// attention_v2.cascade_equals_full (issue 33 item 7): cascade (shared-prefix)
// attention merged through the kernel's own merge_attention_states_n, as
// kernels ship it wrong. Each mutant is the naive kernel with one bug in the
// merge or in the lse its attention_v2 returns; the property catches each on
// every seed (1 in the default run, 1-20 under the label long), and the
// naive and CPU kernels pass the same runs.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <numbers>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernel.hpp"
#include "kernels/naive/attention_v2.hpp"
#include "kernels/naive/naive_kernel.hpp"
#include "properties/suite.hpp"

namespace {

#ifdef SA_CASCADE_SEEDS
constexpr int kSeeds = SA_CASCADE_SEEDS;
#else
constexpr int kSeeds = 20;
#endif

enum class Bug {
  last_part_as_max,  // merge: rescaled by the last part's lse (an empty last part: NaN)
  contiguous_lse,    // merge: part p's lse read at lse[0] + p * rows (one block assumed)
  lse_base2,         // attention_v2: lse returned in base 2 (log2 sum 2^(s log2 e))
};

// One pass in float32: w_p = exp(lse_p - m), out = sum w_p o_p / sum w_p,
// m the largest lse (an all-empty row: out 0, lse -inf), with the bug B.
template <Bug B>
sa_status merge_n(void*, std::int64_t parts, std::int64_t rows, std::int64_t dv,
                  const float* const* o, const float* const* lse, float* out, float* out_lse) {
  auto l = [&](std::int64_t p, std::int64_t r) {
    return B == Bug::contiguous_lse ? lse[0][p * rows + r] : lse[p][r];
  };
  for (std::int64_t r = 0; r < rows; ++r) {
    float m = -INFINITY;
    for (std::int64_t p = 0; p < parts; ++p) m = std::fmax(m, l(p, r));
    if (B == Bug::last_part_as_max) m = l(parts - 1, r);
    if (m == -INFINITY && B != Bug::last_part_as_max) {
      for (std::int64_t c = 0; c < dv; ++c) out[r * dv + c] = 0.0f;
      out_lse[r] = -INFINITY;
      continue;
    }
    float S = 0;
    std::vector<float> acc(static_cast<std::size_t>(dv), 0.0f);
    for (std::int64_t p = 0; p < parts; ++p) {
      const float w = std::exp(l(p, r) - m);
      S += w;
      for (std::int64_t c = 0; c < dv; ++c)
        acc[static_cast<std::size_t>(c)] += w * o[p][r * dv + c];
    }
    for (std::int64_t c = 0; c < dv; ++c) out[r * dv + c] = acc[static_cast<std::size_t>(c)] / S;
    out_lse[r] = m + std::log(S);
  }
  return SA_OK;
}

// The naive kernel's attention_v2 with its lse divided by ln 2 (base 2).
sa_status attention_lse_base2(void* ctx, const sa_attention_v2_args* a) {
  const sa_status s = sa::kernels::naive_attention_v2(ctx, a);
  if (s != SA_OK || a->lse == nullptr) return s;
  const bool varlen = a->cu_seqlens_q != nullptr;
  const std::int64_t n =
      varlen ? a->heads_q * a->cu_seqlens_q[a->batch] : a->batch * a->heads_q * a->seqlen_q;
  for (std::int64_t i = 0; i < n; ++i) a->lse[i] = a->lse[i] / std::numbers::ln2_v<float>;
  return s;
}

template <Bug B>
const sa_kernel* mutant(const char* name) {
  static sa_kernel k = [name] {
    sa_kernel m = *sa::kernels::naive_kernel();
    m.name = name;
    if (B == Bug::lse_base2)
      m.attention_v2 = attention_lse_base2;
    else
      m.merge_attention_states_n = merge_n<B>;
    return m;
  }();
  return &k;
}

// The default run (SuiteConfig's 100 cases, [attention] defaults) of the
// property, float32.
sa::props::SuiteConfig config(std::uint64_t seed) {
  sa::props::SuiteConfig c;
  c.ops = {sa::Op::attention_v2};
  c.properties = {"attention_v2.cascade_equals_full"};
  c.attention.types = {sa::AttnType::float32};
  c.seed = seed;
  c.shrink_seconds = 0;  // caught or not is the question here
  return c;
}

void expect_caught(const sa_kernel* desc) {
  const sa::Kernel k(desc, "tests/mutants");
  std::vector<int> escaped;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    bool caught = false;
    for (const auto& v : sa::props::run_suite(k, config(seed))) {
      EXPECT_NE(v.outcome, sa::Outcome::error) << "seed " << seed << ": " << sa::describe(v);
      if (v.property == "attention_v2.cascade_equals_full" && v.outcome == sa::Outcome::fail) {
        caught = true;
        if (seed == 1) std::cout << desc->name << ":\n" << sa::describe(v) << "\n";
      }
    }
    if (!caught) escaped.push_back(seed);
  }
  EXPECT_TRUE(escaped.empty()) << desc->name << " escaped on " << escaped.size() << " of " << kSeeds
                               << " seeds, the first " << escaped[0];
}

TEST(CascadeMutant, MergeRescaledByTheLastPart) {
  expect_caught(mutant<Bug::last_part_as_max>("mutant_merge_n_last_part_as_max"));
}
TEST(CascadeMutant, MergeAssumesOneLseBlock) {
  expect_caught(mutant<Bug::contiguous_lse>("mutant_merge_n_contiguous_lse"));
}
TEST(CascadeMutant, LseInBase2) { expect_caught(mutant<Bug::lse_base2>("mutant_v2_lse_base2")); }

// The correct kernels pass the same runs, with cases run.
void expect_passes(const sa_kernel* desc) {
  const sa::Kernel k(desc, "built-in");
  for (int seed = 1; seed <= kSeeds; ++seed) {
    int passed = 0;
    for (const auto& v : sa::props::run_suite(k, config(seed))) {
      EXPECT_EQ(v.outcome, sa::Outcome::pass) << "seed " << seed << ": " << sa::describe(v);
      if (v.property == "attention_v2.cascade_equals_full" && v.outcome == sa::Outcome::pass) {
        ++passed;
        EXPECT_GT(v.cases, 0) << "seed " << seed;
      }
    }
    EXPECT_EQ(passed, 1) << desc->name << " seed " << seed;
  }
}

TEST(CascadeMutantControl, NaiveKernelPasses) { expect_passes(sa::kernels::naive_kernel()); }
TEST(CascadeMutantControl, CpuKernelPasses) { expect_passes(sa::kernels::cpu_kernel()); }

}  // namespace
