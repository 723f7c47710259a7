// The CUDA kernel's batched attention (interface v2, kernels/cuda/attention_v2.cu).
//
// Built twice, as device_test.cpp is: cuda_attention_v2_test runs the kernel
// on a GPU (without one every test skips with "no CUDA device: <reason>",
// never a pass), and cuda_emulation_v2_test runs the same kernel source on
// the host SIMT emulator (kernels/cuda/emulation.hpp): the same tile order,
// the same rounding steps, host expf/logf/tanhf instead of CUDA's.
//
//  - GateProperties: the gate's attention_v2 properties (properties/
//    attention_v2.cpp: rounding budget against the MPFR reference
//    reference/attention, FlashAttention's 2x rule, masked values never
//    leak, GQA = repeated heads, varlen = separate calls, paged KV = contiguous,
//    chunked prefill = one prefill, masked = removed keys, trivial masks change
//    nothing) on their own random
//    cases (head dims 1..256, lengths straddling 64/128/256-key tiles, every
//    feature) for float32, bfloat16, float16, fp8 e4m3 and e5m2 inputs.
//  - Exact claims the kernel's algorithm makes, at tile boundaries: kernel.h's
//    special rows (empty key sequences with and without a sink, every key
//    masked, NaN rows), masked tail keys equal absent keys bit for bit (a
//    tile whose keys are all masked adds exact zeros), and the layout
//    (BSHD, BHSD, padded strides) changes no bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/attention_case.hpp"
#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "kernels/cuda/cuda_kernel.hpp"
#include "kernels/kernel.hpp"
#include "properties/suite.hpp"

namespace {

#if defined(SA_CUDA_EMULATION)
constexpr bool kEmulated = true;
#define V2_SUITE CudaEmulatedV2
#else
constexpr bool kEmulated = false;
#define V2_SUITE CudaV2
#endif

const sa::Kernel& kernel() {
  static const sa::Kernel k(sa::kernels::cuda_kernel(), "built-in");
  return k;
}

class V2_SUITE : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kEmulated && sa::device_memory().alloc == nullptr)
      GTEST_SKIP() << "no CUDA device: " << sa::device_memory().why_unavailable()
                   << " (device runs of attention_v2 are pending a GPU)";
  }
};

constexpr float kInf = std::numeric_limits<float>::infinity();

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST_F(V2_SUITE, GateProperties) {
  // Claim: every attention_v2 verdict of the gate passes (or is the float32
  // FlashAttention-2x skip, whose rule needs a low-precision type), and the
  // rounding property ran cases for every input type the kernel declares.
  sa::props::SuiteConfig cfg;
  cfg.ops = {sa::Op::attention_v2};
  cfg.properties = {"attention_v2.rounding",
                    "attention_v2.flash_attention_2x",
                    "attention_v2.masked_never_leak",
                    "attention_v2.gqa_equals_repeated",
                    "attention_v2.varlen_equals_separate",
                    "attention_v2.paged_equals_contiguous",
                    "attention_v2.chunked_prefill_equals_prefill",
                    "attention_v2.mask_equals_removed_keys",
                    "attention_v2.trivial_masks_change_nothing"};
  cfg.cases = 48;  // 6 random cases per type (properties/attention.cpp: cases / 8, >= 6)
  if (const char* s = std::getenv("SA_SUITE_CASES")) cfg.cases = std::atoi(s);
  cfg.seed = 20261123;
  if (const char* s = std::getenv("SA_SUITE_SEED")) cfg.seed = std::strtoull(s, nullptr, 10);
  const auto verdicts = sa::props::run_suite(kernel(), cfg);
  int rounding_passes = 0;
  for (const auto& v : verdicts) {
    if (std::getenv("SA_SUITE_VERBOSE")) std::cout << sa::describe(v) << "\n";
    const bool fa_f32 = v.property == "attention_v2.flash_attention_2x" && v.dtype == "float32";
    if (fa_f32) {
      EXPECT_EQ(v.outcome, sa::Outcome::skip) << sa::describe(v);
      continue;
    }
    EXPECT_TRUE(v.outcome == sa::Outcome::pass || v.outcome == sa::Outcome::skip)
        << sa::describe(v);
    // Every case is within the declared capabilities except adaptive ones
    // (the generator draws none): no case may be reported not applicable.
    // ("not applicable: no case applied" only means no case of the slot's
    // kind was drawn, e.g. no varlen case for the varlen property.)
    EXPECT_EQ(v.note.find("case(s) not applicable"), std::string::npos) << sa::describe(v);
    if (v.property == "attention_v2.rounding" && v.passed()) ++rounding_passes;
  }
  EXPECT_EQ(rounding_passes, 5) << "float32, bfloat16, float16, fp8_e4m3, fp8_e5m2";
}

// A case with values drawn from `seed` (exact in the input type).
sa::AttentionCase make_case(sa::AttnType t, std::int64_t batch, std::int64_t hq, std::int64_t hkv,
                            std::int64_t sq, std::int64_t sk, std::int64_t d, std::int64_t dv,
                            std::uint64_t seed) {
  sa::AttentionCase c;
  c.qkv = c.out_type = t;
  c.batch = batch, c.heads_q = hq, c.heads_kv = hkv, c.seqlen_q = sq, c.seqlen_k = sk;
  c.d = d, c.dv = dv;
  std::mt19937_64 g(seed);
  std::normal_distribution<float> n01(0.f, 1.f);
  auto val = [&] { return t == sa::AttnType::bfloat16 ? sa::round_to_bf16(n01(g)) : n01(g); };
  c.q.resize(static_cast<std::size_t>(batch * sq * hq * d));
  c.k.resize(static_cast<std::size_t>(batch * sk * hkv * d));
  c.v.resize(static_cast<std::size_t>(batch * sk * hkv * dv));
  for (auto& x : c.q) x = val();
  for (auto& x : c.k) x = val();
  for (auto& x : c.v) x = val();
  c.scale = 1.0 / std::sqrt(static_cast<double>(d));
  return c;
}

TEST_F(V2_SUITE, SpecialRowsAtTileBoundaries) {
  // Claim (kernel.h): a query row with no visible key has out 0, entropy 0,
  // lse -inf without a sink and lse = sink with one; a NaN in a query row
  // makes exactly that row's outputs NaN; rows of empty query sequences are
  // never written (the handle checks that no padding is written).
  sa::AttentionCase c = make_case(sa::AttnType::float32, 1, 4, 2, 1, 1, 16, 24, 5);
  // Varlen: query lengths 0, 5, 140 and key lengths 9, 0, 300 (a 128-key tile
  // boundary, a tail tile of 44 keys); causal bottom-right.
  c.cu_q = {0, 0, 5, 145};
  c.cu_k = {0, 9, 9, 309};
  c.seqlen_q = c.seqlen_k = 0;
  c.batch = 3;
  std::mt19937_64 g(6);
  std::normal_distribution<float> n01(0.f, 1.f);
  c.q.resize(145 * 4 * 16);
  c.k.resize(309 * 2 * 16);
  c.v.resize(309 * 2 * 24);
  for (auto& x : c.q) x = n01(g);
  for (auto& x : c.k) x = n01(g);
  for (auto& x : c.v) x = n01(g);
  c.causal = true;
  c.q[(7 * 4 + 1) * 16 + 3] = std::numeric_limits<float>::quiet_NaN();  // row 7, head 1
  for (bool sinks : {false, true}) {
    c.sinks.clear();
    if (sinks) c.sinks = {0.5f, -1.25f, 2.0f, 0.0f};
    const sa::AttentionResult r = kernel().attention_v2(c);
    ASSERT_EQ(r.lse.size(), 145u * 4u);
    ASSERT_EQ(r.entropy.size(), 145u * 4u);
    for (std::int64_t row = 0; row < 145; ++row)
      for (std::int64_t h = 0; h < 4; ++h) {
        const std::size_t o = static_cast<std::size_t>(row * 4 + h);
        const bool no_keys = row < 5;  // sequence 1 has no keys
        const bool nan_row = row == 7 && h == 1;
        SCOPED_TRACE("row " + std::to_string(row) + " head " + std::to_string(h) +
                     (sinks ? " with sinks" : ""));
        if (nan_row) {
          EXPECT_TRUE(std::isnan(r.lse[o]));
          EXPECT_TRUE(std::isnan(r.entropy[o]));
          for (std::int64_t x = 0; x < 24; ++x) EXPECT_TRUE(std::isnan(r.out[o * 24 + x]));
          continue;
        }
        EXPECT_FALSE(std::isnan(r.lse[o]));
        if (!no_keys) continue;
        EXPECT_TRUE(same_bits(r.lse[o], sinks ? c.sinks[h] : -kInf)) << r.lse[o];
        EXPECT_TRUE(same_bits(r.entropy[o], 0.f)) << r.entropy[o];
        for (std::int64_t x = 0; x < 24; ++x) EXPECT_TRUE(same_bits(r.out[o * 24 + x], 0.f));
      }
  }
}

TEST_F(V2_SUITE, MaskedTailTilesEqualAbsentKeys) {
  // Claim (the algorithm): keys masked for a row contribute exact zeros to
  // its running sums and are skipped in P V, so a call whose keys past m are
  // all masked by the key padding mask gives the bits of the call with only
  // m keys, whether the masked keys fill the rest of a tile or whole tiles.
  // Tile sizes 128 (head dim 32) and 64 (head dim 96).
  for (std::int64_t d : {32, 96})
    for (std::int64_t m : {1, 63, 64, 65, 127, 128, 129, 200}) {
      const std::int64_t n = 300;
      sa::AttentionCase full = make_case(sa::AttnType::bfloat16, 2, 2, 1, 19, n, d, d, 7 + m);
      full.sinks = {0.25f, -3.0f};
      full.key_padding_mask.assign(static_cast<std::size_t>(2 * n), 1);
      for (std::int64_t b = 0; b < 2; ++b)
        for (std::int64_t j = m; j < n; ++j) full.key_padding_mask[b * n + j] = 0;
      sa::AttentionCase cut = full;
      cut.seqlen_k = m;
      cut.k.clear(), cut.v.clear(), cut.key_padding_mask.clear();
      for (std::int64_t b = 0; b < 2; ++b) {
        cut.k.insert(cut.k.end(), full.k.begin() + b * n * d, full.k.begin() + (b * n + m) * d);
        cut.v.insert(cut.v.end(), full.v.begin() + b * n * d, full.v.begin() + (b * n + m) * d);
      }
      full.top_left = cut.top_left = true;  // the same diagonal for both key counts
      full.causal = cut.causal = (m % 2) == 1;
      const auto a = kernel().attention_v2(full), b = kernel().attention_v2(cut);
      SCOPED_TRACE("d " + std::to_string(d) + " m " + std::to_string(m));
      std::size_t diff = 0;
      for (std::size_t e = 0; e < a.out.size(); ++e) diff += !same_bits(a.out[e], b.out[e]);
      for (std::size_t e = 0; e < a.lse.size(); ++e) diff += !same_bits(a.lse[e], b.lse[e]);
      for (std::size_t e = 0; e < a.entropy.size(); ++e)
        diff += !same_bits(a.entropy[e], b.entropy[e]);
      EXPECT_EQ(diff, 0u);
    }
}

TEST_F(V2_SUITE, LayoutChangesNoBit) {
  // Claim: strides only move data; BSHD, BHSD and padded rows/heads give the
  // same bits (GQA 8:2, head dims 40 and 72, 70 queries, 150 keys, window).
  sa::AttentionCase c = make_case(sa::AttnType::float16, 2, 8, 2, 70, 150, 40, 72, 11);
  for (auto& x : c.q) x = sa::round_to_f16(x);
  for (auto& x : c.k) x = sa::round_to_f16(x);
  for (auto& x : c.v) x = sa::round_to_f16(x);
  c.window_left = 50;
  c.window_right = 3;
  c.alibi_slopes = {0.5f, 0.25f, 0.125f, 0.0625f, 0.5f, 0.25f, 0.125f, 0.0625f};
  c.softcap = 10.0;
  const auto base = kernel().attention_v2(c);
  for (auto [layout, row_pad, head_pad] :
       {std::tuple{sa::AttnLayout::bhsd, 0, 0}, std::tuple{sa::AttnLayout::bshd, 5, 3},
        std::tuple{sa::AttnLayout::bhsd, 2, 7}}) {
    sa::AttentionCase s = c;
    s.layout = layout;
    s.row_pad = row_pad;
    s.head_pad = head_pad;
    const auto r = kernel().attention_v2(s);
    std::size_t diff = 0;
    for (std::size_t e = 0; e < r.out.size(); ++e) diff += !same_bits(r.out[e], base.out[e]);
    for (std::size_t e = 0; e < r.lse.size(); ++e) diff += !same_bits(r.lse[e], base.lse[e]);
    EXPECT_EQ(diff, 0u) << "layout " << (layout == sa::AttnLayout::bhsd ? "bhsd" : "bshd")
                        << " pads " << row_pad << "/" << head_pad;
  }
}

}  // namespace
