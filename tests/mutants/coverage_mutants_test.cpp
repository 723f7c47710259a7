// The bug classes that only a declared feature, a feature pair or a NaN in an
// unmasked position exposes are caught on every one of seeds 1-20 by the
// default run (100 cases: the fixed pairwise coverage cases plus the random
// ones), not on lucky seeds: split-KV merged without rescaling, adaptive beta
// from the entropy in bits, key padding indexed as dense under varlen,
// top-left alignment where the call says bottom-right with Lq != Lk, the ALiBi
// slope read per key/value head under GQA, fp8 NaN codes decoded as the
// largest finite value, a NaN score skipped like a masked one, page ids
// truncated to 16 bits, page slots wrong past 128, page_size taken for a
// power of two, seqused_k ignored, a chunked prefill's diagonal placed by the
// key buffer's length or its causal mask dropped, a block scale read per 16
// elements, decoded with the wrong bias or dropped for K, attn_mask polarity
// inverted or read row-major, attn_bias's batch stride ignored or read per
// key/value head, the last partial block dropped or non-square blocks taken
// square, the tree mask on the prefix or transposed. The control:
// the correct kernels pass the same runs with full coverage.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "attention_v2_mutants.hpp"
#include "backward_mutants.hpp"
#include "kernels/cpu/cpu_kernel.hpp"
#include "kernels/naive/naive_kernel.hpp"
#include "properties/suite.hpp"

namespace {

struct Case {
  const char* mutant;
  const char* property;  // the property that must fail on every seed
  sa::AttnType type;
};

const Case kCases[] = {
    {"mutant_v2_split_kv_unscaled", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_sink_in_every_split", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_adaptive_entropy_in_bits", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_key_padding_dense_varlen", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_always_top_left", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_alibi_slope_per_kv_head", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_fp8_nan_as_max", "attention_v2.nan_propagates", sa::AttnType::fp8_e4m3},
    {"mutant_v2_nan_score_as_masked", "attention_v2.nan_propagates", sa::AttnType::float32},
    // Paged KV and seqused_k (issue 33).
    {"mutant_v2_block_id_16bit", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_page_slot_past_128", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_page_size_pow2", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_ignores_seqused_k", "attention_v2.rounding", sa::AttnType::float32},
    // Chunked prefill (issue 33): caught by the metamorphic property alone.
    {"mutant_v2_chunk_diagonal_from_buffer", "attention_v2.chunked_prefill_equals_prefill",
     sa::AttnType::float32},
    {"mutant_v2_chunk_queries_see_all", "attention_v2.chunked_prefill_equals_prefill",
     sa::AttnType::float32},
    // Block scales (MXFP8, issue 33): fp8 inputs only.
    {"mutant_v2_mx_scale_per_16", "attention_v2.rounding", sa::AttnType::fp8_e4m3},
    {"mutant_v2_mx_scale_bias_128", "attention_v2.rounding", sa::AttnType::fp8_e5m2},
    {"mutant_v2_mx_k_scale_ignored", "attention_v2.rounding", sa::AttnType::fp8_e4m3},
    // fp4 e2m1 and int8 with e4m3 and float32 block scales (issue 33 item 4).
    {"mutant_v2_fp4_high_nibble_first", "attention_v2.rounding", sa::AttnType::fp4_e2m1},
    {"mutant_v2_nvfp4_scale_per_32", "attention_v2.rounding", sa::AttnType::fp4_e2m1},
    {"mutant_v2_nvfp4_scale_as_e8m0", "attention_v2.rounding", sa::AttnType::fp4_e2m1},
    {"mutant_v2_fp4_tensor_scale_dropped", "attention_v2.rounding", sa::AttnType::fp4_e2m1},
    {"mutant_v2_int8_scale_per_row", "attention_v2.rounding", sa::AttnType::int8},
    {"mutant_v2_int8_read_unsigned", "attention_v2.rounding", sa::AttnType::int8},
    // Masks beyond causal and window (issue 33).
    {"mutant_v2_bool_mask_polarity", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_bool_mask_row_major", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_bias_batch_stride_0", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_bias_per_kv_head", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_block_last_partial", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_block_square", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_tree_on_prefix", "attention_v2.rounding", sa::AttnType::float32},
    {"mutant_v2_tree_transposed", "attention_v2.rounding", sa::AttnType::float32},
    // MLA (issue 33): V a prefix view of K.
    {"mutant_v2_v_strides_from_dv", "attention_v2.rounding", sa::AttnType::float32},
    // FlashAttention 3's descales per (batch, kv head) (issue 33): fp8 inputs only.
    {"mutant_v2_descale_bh_scalar", "attention_v2.rounding", sa::AttnType::fp8_e4m3},
    {"mutant_v2_descale_bh_transposed", "attention_v2.rounding", sa::AttnType::fp8_e5m2},
    {"mutant_v2_descale_bh_v_dropped", "attention_v2.rounding", sa::AttnType::fp8_e4m3},
};

// Seeds 1..kSeeds: 20 in the long-labelled binary, the first 3 in the
// default run (each mutant costs about 1.8 s per seed).
#ifdef SA_COVERAGE_SEEDS
constexpr int kSeeds = SA_COVERAGE_SEEDS;
#else
constexpr int kSeeds = 20;
#endif

// The default run (SuiteConfig's 100 cases and [attention] defaults) of one
// attention property on one input type, seed `seed`.
sa::props::SuiteConfig config(const char* property, sa::AttnType t, std::uint64_t seed) {
  sa::props::SuiteConfig c;
  c.ops = {sa::Op::attention_v2};
  c.properties = {property, "attention_v2.coverage"};
  c.attention.types = {t};
  c.seed = seed;
  c.shrink_seconds = 0;  // caught or not is the question here, not the shrunk case
  // SA_PAIR_CASES=k reruns with another [attention] pair_cases: how its
  // default (3) was chosen (with 2, one mutant escapes on 2 of 20 seeds).
  if (const char* k = std::getenv("SA_PAIR_CASES")) c.attention.pair_cases = std::atoi(k);
  return c;
}

const sa_kernel* find_mutant(const std::string& name) {
  for (const auto& m : sa::mutants::attention_v2_mutants())
    if (name == m.kernel->name) return m.kernel;
  return nullptr;
}

class CoverageMutant : public ::testing::TestWithParam<Case> {};

TEST_P(CoverageMutant, CaughtOnEverySeed) {
  const Case& cs = GetParam();
  const sa_kernel* raw = find_mutant(cs.mutant);
  ASSERT_NE(raw, nullptr) << cs.mutant;
  const sa::Kernel k(raw, "tests/mutants");
  std::vector<int> escaped;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    bool caught = false;
    for (const auto& v : sa::props::run_suite(k, config(cs.property, cs.type, seed))) {
      EXPECT_NE(v.outcome, sa::Outcome::error) << "seed " << seed << ": " << sa::describe(v);
      if (v.property == cs.property && v.outcome == sa::Outcome::fail) {
        caught = true;
        if (seed == 1) std::cout << cs.mutant << ":\n" << sa::describe(v) << "\n";
      }
    }
    if (!caught) escaped.push_back(seed);
  }
  EXPECT_TRUE(escaped.empty()) << cs.mutant << " escaped " << cs.property << " on "
                               << escaped.size() << " of " << kSeeds << " seeds, the first "
                               << escaped[0];
}

INSTANTIATE_TEST_SUITE_P(BugClasses, CoverageMutant, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& i) {
                           return std::string(i.param.mutant).substr(10);
                         });

// The correct kernels pass the same runs on every seed, with every declared
// feature and pair covered (attention_v2.coverage passes).
void expect_passes(const sa::Kernel& k, const char* property, sa::AttnType t) {
  for (int seed = 1; seed <= kSeeds; ++seed) {
    int passed = 0, coverage = 0;
    for (const auto& v : sa::props::run_suite(k, config(property, t, seed))) {
      EXPECT_TRUE(v.outcome == sa::Outcome::pass) << "seed " << seed << ": " << sa::describe(v);
      passed += v.outcome == sa::Outcome::pass;
      coverage += v.property == "attention_v2.coverage" && v.outcome == sa::Outcome::pass;
    }
    EXPECT_EQ(passed, 2) << k.name() << " seed " << seed;
    EXPECT_EQ(coverage, 1) << k.name() << " seed " << seed;
  }
}

TEST(CoverageMutantControl, CpuKernelPassesEverySeed) {
  const sa::Kernel k(sa::kernels::cpu_kernel(), "built-in");
  expect_passes(k, "attention_v2.rounding", sa::AttnType::float32);
  expect_passes(k, "attention_v2.nan_propagates", sa::AttnType::fp8_e4m3);
  // fp4 e2m1 (MXFP4, NVFP4) and int8 (float32 scales per token-head or block).
  expect_passes(k, "attention_v2.rounding", sa::AttnType::fp4_e2m1);
  expect_passes(k, "attention_v2.rounding", sa::AttnType::int8);
}

TEST(CoverageMutantControl, NaiveKernelPassesEverySeed) {
  const sa::Kernel k(sa::kernels::naive_kernel(), "built-in");
  expect_passes(k, "attention_v2.rounding", sa::AttnType::float32);
  expect_passes(k, "attention_v2.rounding", sa::AttnType::fp4_e2m1);
  expect_passes(k, "attention_v2.rounding", sa::AttnType::int8);
}

}  // namespace

namespace {

// A correct kernel with a real library's domain: head dims multiples of 8,
// causal-only, sinks in the float16 model only (the built-in CPU kernel
// behind a descriptor that says so). Every case is drawn inside that domain,
// every property that can apply passes, and coverage is full on every seed.
const sa_kernel* domain_kernel() {
  static const sa_capabilities caps = [] {
    sa_capabilities c = *sa::kernels::cpu_kernel()->capabilities;
    c.struct_size = sizeof(sa_capabilities);
    c.head_dim_multiple = 8;
    c.attention_required = SA_ATTN_CAUSAL;
    c.attention_features_by_dtype[SA_F32] = c.attention_features & ~SA_ATTN_SINKS;
    c.attention_features_by_dtype[SA_BF16] = c.attention_features & ~SA_ATTN_SINKS;
    c.attention_features_by_dtype[SA_F16] = c.attention_features;
    return c;
  }();
  static const sa_kernel k = [] {
    sa_kernel x = *sa::kernels::cpu_kernel();
    x.name = "cpu_causal_d8_f16_sinks";
    x.capabilities = &caps;
    return x;
  }();
  return &k;
}

TEST(DeclaredDomain, CausalOnlyHeadDim8Float16SinksPassesWithFullCoverage) {
  const sa::Kernel k(domain_kernel(), "tests/mutants");
  for (int seed = 1; seed <= kSeeds; ++seed) {
    sa::props::SuiteConfig c;
    c.ops = {sa::Op::attention_v2};
    c.properties = {"attention_v2"};
    c.attention.types = {sa::AttnType::float32, sa::AttnType::float16};
    c.seed = static_cast<std::uint64_t>(seed);
    int coverage = 0;
    for (const auto& v : sa::props::run_suite(k, c)) {
      EXPECT_TRUE(v.outcome == sa::Outcome::pass || v.outcome == sa::Outcome::skip)
          << "seed " << seed << ": " << sa::describe(v);
      // No case outside the declared domain was drawn (refusals would be
      // counted as not applicable in the notes).
      if (v.property == "attention_v2.rounding")
        EXPECT_EQ(v.note.find("not applicable"), std::string::npos) << sa::describe(v);
      if (v.property != "attention_v2.coverage") continue;
      coverage += v.outcome == sa::Outcome::pass;
      bool sinks = false;
      for (const auto& cell : v.coverage) sinks = sinks || cell.cell == "sinks";
      EXPECT_EQ(sinks, v.dtype == "float16") << "seed " << seed << " " << v.dtype;
    }
    EXPECT_EQ(coverage, 2) << "seed " << seed;
  }
}

}  // namespace

namespace {

// Row backward written wrongly in place (dy re-read after dx overwrote it) is
// caught on every seed: the fixed in-place edge cases run on each one.
TEST(InPlaceBackward, CaughtOnEverySeed) {
  const sa_kernel* raw = nullptr;
  for (const auto& m : sa::mutants::backward_mutants())
    if (std::string(m.mutant.kernel->name) == "mutant_bwd_softmax_in_place") raw = m.mutant.kernel;
  ASSERT_NE(raw, nullptr);
  const sa::Kernel k(raw, "tests/mutants");
  std::vector<int> escaped;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    sa::props::SuiteConfig c;
    c.ops = {sa::Op::softmax_backward};
    c.properties = {"backward.rounding"};
    c.dtypes = {sa::DType::float32};
    c.seed = static_cast<std::uint64_t>(seed);
    c.shrink_seconds = 0;
    bool caught = false;
    for (const auto& v : sa::props::run_suite(k, c))
      caught = caught || (v.property == "backward.rounding" && v.outcome == sa::Outcome::fail);
    if (!caught) escaped.push_back(seed);
  }
  EXPECT_TRUE(escaped.empty()) << "escaped on " << escaped.size() << " of " << kSeeds
                               << " seeds, the first " << escaped[0];
}

}  // namespace
