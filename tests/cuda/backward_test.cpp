// The CUDA kernel's backward passes (interface v2, kernels/cuda/backward.cu).
//
// Built twice, as attention_v2_test.cpp is: cuda_backward_test runs the
// kernel on a GPU (without one every test skips with "no CUDA device:
// <reason>", never a pass), and cuda_emulation_backward_test runs the same
// kernel source on the host SIMT emulator (kernels/cuda/emulation.hpp): the
// same tile order and rounding steps, host expf/tanhf instead of CUDA's.
//
//  - GateProperties: the gate's backward.*, attention_backward.* and
//    determinism.* properties (properties/backward.cpp, determinism.cpp):
//    rounding budgets against the MPFR reference gradients, FlashAttention's
//    3x rule, directional derivatives, rows summing to zero, GQA group sums,
//    masked keys' zero gradients, no NaN past partial tiles, bitwise
//    repeatability; every verdict passes or is a named skip, and the rounding
//    properties ran for float32, bfloat16 and float16 attention.
//  - Exact claims of the algorithm: the layout (BSHD, BHSD, padded strides)
//    changes no bit of any gradient, and masked tail keys give the bits of
//    absent keys (dq, and dk/dv of the kept keys).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/attention_case.hpp"
#include "core/bfloat16.hpp"
#include "kernels/cuda/cuda_kernel.hpp"
#include "kernels/kernel.hpp"
#include "properties/suite.hpp"

namespace {

#if defined(SA_CUDA_EMULATION)
constexpr bool kEmulated = true;
#define BWD_SUITE CudaEmulatedBackward
#else
constexpr bool kEmulated = false;
#define BWD_SUITE CudaBackward
#endif

const sa::Kernel& kernel() {
  static const sa::Kernel k(sa::kernels::cuda_kernel(), "built-in");
  return k;
}

class BWD_SUITE : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kEmulated && sa::device_memory().alloc == nullptr)
      GTEST_SKIP() << "no CUDA device: " << sa::device_memory().why_unavailable()
                   << " (device runs of the backward passes are pending a GPU)";
  }
};

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

std::size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return a.size() + b.size();
  std::size_t n = 0;
  for (std::size_t e = 0; e < a.size(); ++e) n += !same_bits(a[e], b[e]);
  return n;
}

TEST_F(BWD_SUITE, GateProperties) {
  // Claim: every backward verdict of the gate passes (or is a named skip:
  // FlashAttention's 3x rule for float32, batch invariance not claimed), and
  // the attention rounding property passed for all three input types.
  sa::props::SuiteConfig cfg;
  cfg.ops = {sa::Op::softmax_backward, sa::Op::log_softmax_backward, sa::Op::attention_backward};
  cfg.properties = {"backward", "attention_backward", "determinism"};
  cfg.cases = 48;  // 6 attention cases per type (properties/backward.cpp: cases / 8, >= 6)
  cfg.determinism_repeats = kEmulated ? 5 : 250;
  if (const char* s = std::getenv("SA_SUITE_CASES")) cfg.cases = std::atoi(s);
  cfg.seed = 20261123;
  if (const char* s = std::getenv("SA_SUITE_SEED")) cfg.seed = std::strtoull(s, nullptr, 10);
  int attn_rounding = 0, passes = 0;
  for (const auto& v : sa::props::run_suite(kernel(), cfg)) {
    const bool ok = v.outcome == sa::Outcome::pass || v.outcome == sa::Outcome::skip;
    if (std::getenv("SA_SUITE_VERBOSE") || !ok) std::cout << sa::describe(v) << "\n";
    EXPECT_TRUE(ok) << sa::describe(v);
    passes += v.passed();
    if (v.property == "attention_backward.rounding" && v.passed()) ++attn_rounding;
  }
  EXPECT_EQ(attn_rounding, 3) << "float32, bfloat16, float16";
  EXPECT_GE(passes, 20) << "the run checked (almost) nothing";
}

// A case with N(0,1) values exact in float32 and bfloat16.
sa::AttentionCase make_case(std::int64_t batch, std::int64_t hq, std::int64_t hkv, std::int64_t sq,
                            std::int64_t sk, std::int64_t d, std::int64_t dv, std::uint64_t seed) {
  sa::AttentionCase c;
  c.qkv = c.out_type = sa::AttnType::bfloat16;
  c.batch = batch, c.heads_q = hq, c.heads_kv = hkv, c.seqlen_q = sq, c.seqlen_k = sk;
  c.d = d, c.dv = dv;
  std::mt19937_64 g(seed);
  std::normal_distribution<float> n01(0.f, 1.f);
  auto fill = [&](std::vector<float>& x, std::int64_t n) {
    x.resize(static_cast<std::size_t>(n));
    for (auto& e : x) e = sa::round_to_bf16(n01(g));
  };
  fill(c.q, batch * sq * hq * d);
  fill(c.k, batch * sk * hkv * d);
  fill(c.v, batch * sk * hkv * dv);
  c.scale = 1.0 / std::sqrt(static_cast<double>(d));
  return c;
}

struct Given {
  std::vector<float> out, lse, dout;
};

// The kernel's own forward, and a dout drawn from `seed`.
Given forward_of(const sa::AttentionCase& c, std::uint64_t seed) {
  const auto r = kernel().attention_v2(c);
  Given g{r.out, r.lse, {}};
  std::mt19937_64 e(seed);
  std::normal_distribution<float> n01(0.f, 1.f);
  g.dout.resize(r.out.size());
  for (auto& x : g.dout) x = sa::round_to_bf16(n01(e));
  return g;
}

TEST_F(BWD_SUITE, LayoutChangesNoBit) {
  // Claim: strides only move data; BSHD, BHSD and padded rows/heads give the
  // same gradient bits (GQA 4:2, head dims 24 and 40, window, ALiBi, softcap, sinks).
  sa::AttentionCase c = make_case(2, 4, 2, 37, 70, 24, 40, 11);
  c.window_left = 30;
  c.window_right = 2;
  c.alibi_slopes = {0.5f, 0.25f, 0.125f, 0.0625f};
  c.softcap = 8.0;
  c.sinks = {0.5f, -1.0f, 0.0f, 2.0f};
  const Given in = forward_of(c, 3);
  const auto base = kernel().attention_backward(c, in.out, in.lse, in.dout);
  for (auto [layout, row_pad, head_pad] :
       {std::tuple{sa::AttnLayout::bhsd, 0, 0}, std::tuple{sa::AttnLayout::bshd, 5, 3},
        std::tuple{sa::AttnLayout::bhsd, 2, 7}}) {
    sa::AttentionCase s = c;
    s.layout = layout;
    s.row_pad = row_pad;
    s.head_pad = head_pad;
    const auto g = kernel().attention_backward(s, in.out, in.lse, in.dout);
    EXPECT_EQ(differing(g.dq, base.dq) + differing(g.dk, base.dk) + differing(g.dv, base.dv) +
                  differing(g.dsinks, base.dsinks),
              0u)
        << "layout " << (layout == sa::AttnLayout::bhsd ? "bhsd" : "bshd") << " pads " << row_pad
        << "/" << head_pad;
  }
}

TEST_F(BWD_SUITE, MaskedTailKeysEqualAbsentKeys) {
  // Claim (the algorithm): a masked key adds nothing (its q.k is never
  // formed), so keys past m masked by the key padding mask give the bits of
  // the call with only m keys: dq, and dk/dv of the kept keys, whether the
  // masked keys fill the rest of a 64-key tile or whole tiles; the masked
  // keys' dk/dv are exactly 0.
  for (std::int64_t m : {1, 15, 16, 17, 63, 64, 65, 100}) {
    const std::int64_t n = 150, d = 16;
    sa::AttentionCase full = make_case(1, 2, 1, 21, n, d, d, 7 + m);
    full.key_padding_mask.assign(static_cast<std::size_t>(n), 1);
    for (std::int64_t j = m; j < n; ++j) full.key_padding_mask[static_cast<std::size_t>(j)] = 0;
    full.top_left = true;
    full.causal = (m % 2) == 1;
    sa::AttentionCase cut = full;
    cut.seqlen_k = m;
    cut.key_padding_mask.clear();
    cut.k.assign(full.k.begin(), full.k.begin() + m * d);
    cut.v.assign(full.v.begin(), full.v.begin() + m * d);
    const Given in = forward_of(cut, 100 + m);
    const auto a = kernel().attention_backward(full, in.out, in.lse, in.dout);
    const auto b = kernel().attention_backward(cut, in.out, in.lse, in.dout);
    SCOPED_TRACE("m = " + std::to_string(m));
    EXPECT_EQ(differing(a.dq, b.dq), 0u);
    const std::vector<float> kept_k(a.dk.begin(), a.dk.begin() + m * d),
        kept_v(a.dv.begin(), a.dv.begin() + m * d);
    EXPECT_EQ(differing(kept_k, b.dk) + differing(kept_v, b.dv), 0u);
    std::size_t nonzero = 0;
    for (std::size_t e = static_cast<std::size_t>(m * d); e < a.dk.size(); ++e)
      nonzero += !same_bits(a.dk[e], 0.f) + !same_bits(a.dv[e], 0.f);
    EXPECT_EQ(nonzero, 0u);
  }
}

}  // namespace
