// The v2 attention reference (reference/attention.hpp): its semantics on
// cases small enough to work out by hand, and the extended-precision path
// against the MPFR path on random cases of every feature.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "reference/attention.hpp"

namespace sa {
namespace {

// One sequence, one head, d = 1: q = 1, so score j is scale * k_j.
AttentionCase one_head(std::vector<float> k, std::vector<float> v, std::int64_t nq = 1) {
  AttentionCase c;
  c.seqlen_q = nq;
  c.seqlen_k = static_cast<std::int64_t>(k.size());
  c.d = c.dv = 1;
  c.q.assign(static_cast<std::size_t>(nq), 1.0f);
  c.k = std::move(k);
  c.v = std::move(v);
  return c;
}

TEST(AttentionReference, PlainSoftmaxWeights) {
  const float k1 = std::log(3.0f);  // a float near log 3: weights near 1/4, 3/4
  auto c = one_head({0.0f, k1}, {1.0f, 2.0f});
  const auto r = ref::attention_v2(c);
  const double e = std::exp(static_cast<double>(k1)), p0 = 1 / (1 + e), p1 = e / (1 + e);
  EXPECT_NEAR(r.out[0], p0 + 2 * p1, 1e-15);
  EXPECT_NEAR(r.lse[0], std::log1p(e), 1e-15);
  EXPECT_NEAR(r.entropy[0], -(p0 * std::log(p0) + p1 * std::log(p1)), 1e-15);
  EXPECT_EQ(r.beta[0], 1.0);
}

TEST(AttentionReference, SinkJoinsDenominatorAndLseButHasNoValue) {
  auto c = one_head({0.0f}, {5.0f});
  c.sinks = {0.0f};  // one extra logit 0 with value 0
  const auto r = ref::attention_v2(c);
  EXPECT_NEAR(r.out[0], 2.5, 1e-12);
  EXPECT_NEAR(r.lse[0], std::log(2.0), 1e-12);
  EXPECT_NEAR(r.entropy[0], std::log(2.0), 1e-12);  // over (key, sink)
}

TEST(AttentionReference, FullyMaskedRowWithAndWithoutSink) {
  auto c = one_head({1.0f, 2.0f}, {3.0f, 4.0f});
  c.key_padding_mask = {0, 0};
  auto r = ref::attention_v2(c);
  EXPECT_EQ(r.out[0], 0.0);
  EXPECT_EQ(r.lse[0], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(r.entropy[0], 0.0);
  c.sinks = {0.5f};
  r = ref::attention_v2(c);
  EXPECT_EQ(r.out[0], 0.0);
  EXPECT_EQ(r.lse[0], 0.5);  // the sink alone
}

TEST(AttentionReference, CausalAlignments) {
  // 2 queries, 3 keys. Bottom-right: query 0 sees keys 0..1, query 1 all.
  // Top-left: query 0 sees key 0, query 1 keys 0..1.
  auto c = one_head({0.0f, 0.0f, 0.0f}, {1.0f, 2.0f, 6.0f}, 2);
  c.causal = true;
  auto r = ref::attention_v2(c);
  EXPECT_NEAR(r.out[0], 1.5, 1e-15);
  EXPECT_NEAR(r.out[1], 3.0, 1e-15);
  c.top_left = true;
  r = ref::attention_v2(c);
  EXPECT_NEAR(r.out[0], 1.0, 1e-15);
  EXPECT_NEAR(r.out[1], 1.5, 1e-15);
}

TEST(AttentionReference, SlidingWindowBothSides) {
  // 5 queries and keys (bottom-right = top-left here), window (1, 1): query i
  // sees keys i-1 .. i+1.
  auto c = one_head({0, 0, 0, 0, 0}, {1, 2, 3, 4, 5}, 5);
  c.window_left = 1;
  c.window_right = 1;
  const auto r = ref::attention_v2(c);
  EXPECT_NEAR(r.out[0], 1.5, 1e-15);
  EXPECT_NEAR(r.out[2], 3.0, 1e-15);
  EXPECT_NEAR(r.out[4], 4.5, 1e-15);
}

TEST(AttentionReference, SoftcapBeforeMaskAndAlibiAfterSoftcap) {
  auto c = one_head({100.0f, 0.0f}, {1.0f, 0.0f});
  c.softcap = 2.0;  // score 100 -> 2 tanh(50) ~ 2, score 0 -> 0
  auto r = ref::attention_v2(c);
  const double s0 = 2.0 * std::tanh(50.0);
  EXPECT_NEAR(r.out[0], std::exp(s0) / (std::exp(s0) + 1.0), 1e-12);
  // ALiBi (bottom-right, 1 query, 2 keys: the query is aligned with key 1):
  // key 0 gets -slope * 1 after the softcap.
  c.alibi_slopes = {0.5f};
  r = ref::attention_v2(c);
  const double a0 = s0 - 0.5;
  EXPECT_NEAR(r.out[0], std::exp(a0) / (std::exp(a0) + 1.0), 1e-12);
}

TEST(AttentionReference, GqaHeadMappingAndVarlen) {
  // heads_q = 4, heads_kv = 2: query heads 0,1 read kv head 0; 2,3 kv head 1.
  AttentionCase c;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.batch = 2;
  c.cu_q = {0, 1, 1};  // sequence 1 is empty
  c.cu_k = {0, 2, 3};
  c.d = c.dv = 1;
  c.q.assign(4, 0.0f);  // equal weights
  c.k.assign(3 * 2, 0.0f);
  c.v = {1, 10, 3, 30, 99, 99};  // [key row][kv head]
  const auto r = ref::attention_v2(c);
  ASSERT_EQ(r.out.size(), 4u);
  EXPECT_NEAR(r.out[0], 2.0, 1e-15);
  EXPECT_NEAR(r.out[1], 2.0, 1e-15);
  EXPECT_NEAR(r.out[2], 20.0, 1e-15);
  EXPECT_NEAR(r.out[3], 20.0, 1e-15);
}

TEST(AttentionReference, MaskedValuesAreNeverRead) {
  auto c = one_head({0.0f, 0.0f}, {1.0f, std::numeric_limits<float>::quiet_NaN()});
  c.key_padding_mask = {1, 0};
  c.k[1] = std::numeric_limits<float>::infinity();
  const auto r = ref::attention_v2(c);
  EXPECT_EQ(r.out[0], 1.0);
}

// The masks of interface 2's appendix (kernel.h): one sequence, one head,
// 2 queries and 4 keys; scores scale * k_j with q = 1.
TEST(AttentionReference, BoolBlockTreeMasksAndBiasByHand) {
  auto c = one_head({0.0f, 0.0f, 0.0f, 0.0f}, {1.0f, 2.0f, 4.0f, 8.0f}, 2);
  // attn_mask [1][1][2][4]: query 0 sees keys 0 and 2, query 1 keys 1, 2, 3.
  c.attn_mask = {1, 1, 2, 4, {1, 0, 1, 0, 0, 1, 1, 1}, false};
  auto r = ref::attention_v2(c);
  EXPECT_NEAR(r.out[0], (1.0 + 4.0) / 2, 1e-15);
  EXPECT_NEAR(r.out[1], (2.0 + 4.0 + 8.0) / 3, 1e-15);
  // A block mask of 1 x 3 blocks: block (0, 1) (keys 3) masked for query 0,
  // block (1, 0) (keys 0-2) for query 1: query 0 keeps 0 and 2, query 1 key 3.
  c.block_q = 1;
  c.block_k = 3;
  c.block_mask = {1, 1, 2, 2, {1, 0, 0, 1}, false};
  r = ref::attention_v2(c);
  EXPECT_NEAR(r.out[0], (1.0 + 4.0) / 2, 1e-15);
  EXPECT_NEAR(r.out[1], 8.0, 1e-15);
  // A tree over the last 2 keys (2 and 3): query 0 (draft token 0) sees
  // itself only, query 1 its parent 0 and itself; the prefix (0, 1) always.
  c.attn_mask = c.block_mask = MaskTensor{};
  c.tree_mask = {1, 1, 2, 2, {1, 0, 1, 1}, false};
  r = ref::attention_v2(c);
  EXPECT_NEAR(r.out[0], (1.0 + 2.0 + 4.0) / 3, 1e-15);
  EXPECT_NEAR(r.out[1], (1.0 + 2.0 + 4.0 + 8.0) / 4, 1e-15);
  // Every key masked for query 1: out 0, lse -inf.
  c.tree_mask = MaskTensor{};
  c.attn_mask = {1, 1, 2, 4, {1, 1, 1, 1, 0, 0, 0, 0}, false};
  r = ref::attention_v2(c);
  EXPECT_EQ(r.out[1], 0.0);
  EXPECT_EQ(r.lse[1], -std::numeric_limits<double>::infinity());
  // A per-key bias after softcap: key j gets log(j + 1), so weights 1:2:3:4.
  c.attn_mask = MaskTensor{};
  c.softcap = 3.0;
  c.attn_bias = {1, 1, 1, 4, {0.0f, std::log(2.0f), std::log(3.0f), std::log(4.0f)}, false};
  r = ref::attention_v2(c);
  double num = 0, den = 0;
  for (int j = 0; j < 4; ++j) {
    const double w = std::exp(static_cast<double>(c.attn_bias.v[static_cast<std::size_t>(j)]));
    num += w * c.v[static_cast<std::size_t>(j)];
    den += w;
  }
  EXPECT_NEAR(r.out[0], num / den, 1e-15);
  EXPECT_NEAR(r.out[1], num / den, 1e-15);
  // Masked keys and their values are never read.
  c.attn_bias = MaskTensor{};
  c.attn_mask = {1, 1, 1, 4, {1, 1, 1, 0}, false};
  c.k[3] = std::numeric_limits<float>::infinity();
  c.v[3] = std::numeric_limits<float>::quiet_NaN();
  r = ref::attention_v2(c);
  EXPECT_NEAR(r.out[0], (1.0 + 2.0 + 4.0) / 3, 1e-15);
}

TEST(AttentionReference, ValidationNamesTheField) {
  auto c = one_head({0.0f}, {1.0f});
  c.heads_q = 3;
  c.heads_kv = 2;
  try {
    ref::attention_v2(c);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("heads_q = 3 is not a multiple of heads_kv = 2"),
              std::string::npos)
        << e.what();
  }
}

// Random small cases of every feature: the extended-precision reference agrees
// with the MPFR one to within the error its header states ((n_k + d + 16)
// 2^-63 of the magnitudes), measured here as at most 2^-50 relative.
TEST(AttentionReference, ExtendedAgreesWithMpfr) {
  std::mt19937_64 g(7);
  std::uniform_real_distribution<float> u(-3.0f, 3.0f);
  double worst = 0;
  for (int t = 0; t < 60; ++t) {
    AttentionCase c;
    c.batch = 1 + t % 2;
    c.heads_kv = 1 + t % 2;
    c.heads_q = c.heads_kv * (1 + t % 3);
    c.d = 1 + t % 7;
    c.dv = 1 + (t * 5) % 6;
    if (t % 4 == 0) {
      c.cu_q = {0, 3};
      c.cu_k = {0, 5};
      if (c.batch == 2) c.cu_q.push_back(3), c.cu_k.push_back(9);
    } else {
      c.seqlen_q = 1 + t % 5;
      c.seqlen_k = 1 + (t * 3) % 11;
    }
    c.causal = t % 3 == 0;
    c.top_left = t % 6 == 3;
    if (t % 5 == 1) c.window_left = 2, c.window_right = 1;
    if (t % 7 == 2) c.softcap = 1.5;
    if (t % 4 == 1) c.alibi_slopes.assign(static_cast<std::size_t>(c.heads_q), 0.25f);
    if (t % 3 == 2) c.sinks.assign(static_cast<std::size_t>(c.heads_q), 0.75f);
    c.adaptive = t % 8 == 5;
    c.scale = 0.5;
    // The masks of interface 2's appendix on some cases: a per-head bias,
    // a boolean mask over (b, h, i, j), a 2 x 3 block mask, a tree.
    const std::int64_t mq = c.max_len_q(), mk = c.max_len_k();
    auto draw_mask = [&](MaskTensor& m, std::int64_t nq, std::int64_t nk, bool bias) {
      m = {c.batch, c.heads_q, nq, nk, {}, false};
      for (std::int64_t x = 0; x < c.batch * c.heads_q * nq * nk; ++x)
        m.v.push_back(bias ? u(g) : (g() % 3 == 0 ? 0.0f : 1.0f));
    };
    if (t % 5 == 3) draw_mask(c.attn_bias, mq, mk, true);
    if (t % 6 == 1) draw_mask(c.attn_mask, mq, mk, false);
    if (t % 7 == 4) {
      c.block_q = 2;
      c.block_k = 3;
      draw_mask(c.block_mask, (mq + 1) / 2, (mk + 2) / 3, false);
    }
    if (t % 9 == 6) draw_mask(c.tree_mask, mq, mq, false);
    for (std::int64_t i = 0; i < c.total_q() * c.heads_q * c.d; ++i) c.q.push_back(u(g));
    for (std::int64_t i = 0; i < c.total_k() * c.heads_kv * c.d; ++i) c.k.push_back(u(g));
    for (std::int64_t i = 0; i < c.total_k() * c.heads_kv * c.dv; ++i) c.v.push_back(u(g));
    const auto x = ref::attention_v2(c);
    const auto e = ref::attention_exact(c);
    auto cmp = [&](const std::vector<double>& a, const std::vector<double>& b, double mag) {
      ASSERT_EQ(a.size(), b.size());
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::isinf(b[i])) {
          EXPECT_EQ(a[i], b[i]);
          continue;
        }
        worst = std::max(worst, std::abs(a[i] - b[i]) / (mag + std::abs(b[i])));
      }
    };
    cmp(x.out, e.out, 3.0);  // |v| <= 3 bounds sum p |v|
    cmp(x.lse, e.lse, 1.0);
    cmp(x.entropy, e.entropy, 1.0);
    cmp(x.beta, e.beta, 1.0);
  }
  EXPECT_LT(worst, std::ldexp(1.0, -50)) << "worst relative disagreement " << worst;
}

}  // namespace
}  // namespace sa
