// The masks of issue 33 through the handle (attn_mask, attn_bias,
// block_mask, tree_mask): what a kernel that declares them is handed
// (strides 0 where a case broadcasts, key-major copies, extents padded to
// the call's seqlen_q and seqlen_k), that a kernel declaring none never sees
// them set, that bad cases are refused with the field named, and that case
// files carry them.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/call_log.hpp"
#include "kernels/kernel.hpp"

namespace {

struct Seen {
  sa_attention_v2_args a{};
  std::vector<std::uint8_t> mask;  // attn_mask at (b, h, i, j) for the call's extents
  std::vector<float> bias;
  int calls = 0;
};
Seen seen;

sa_status recording(void*, const sa_attention_v2_args* a) {
  seen.a = *a;
  ++seen.calls;
  seen.mask.clear();
  seen.bias.clear();
  for (std::int64_t b = 0; b < a->batch; ++b)
    for (std::int64_t h = 0; h < a->heads_q; ++h)
      for (std::int64_t i = 0; i < a->seqlen_q; ++i)
        for (std::int64_t j = 0; j < a->seqlen_k; ++j) {
          const auto& m = a->attn_mask;
          if (m.data)
            seen.mask.push_back(static_cast<const std::uint8_t*>(
                m.data)[b * m.stride_b + h * m.stride_h + i * m.stride_q + j * m.stride_k]);
          const auto& t = a->attn_bias;
          if (t.data)
            seen.bias.push_back(static_cast<const float*>(
                t.data)[b * t.stride_b + h * t.stride_h + i * t.stride_q + j * t.stride_k]);
        }
  for (std::int64_t b = 0; b < a->batch; ++b)
    for (std::int64_t i = 0; i < a->seqlen_q; ++i)
      for (std::int64_t h = 0; h < a->heads_q; ++h)
        for (std::int64_t x = 0; x < a->head_dim_v; ++x)
          static_cast<float*>(
              a->out)[b * a->out_stride_b + h * a->out_stride_h + i * a->out_stride_s + x] = 0.0f;
  return SA_OK;
}

sa_capabilities caps(std::uint32_t extra) {
  sa_capabilities c{};
  c.struct_size = sizeof c;
  c.attention_features = SA_ATTN_BATCHED | SA_ATTN_GQA | SA_ATTN_STRIDED | extra;
  return c;
}

sa_kernel recorder(const sa_capabilities* cap) {
  sa_kernel k{};
  k.abi_version = SA_KERNEL_ABI_VERSION;
  k.struct_size = sizeof(sa_kernel);
  k.name = "recorder";
  k.ops = SA_OP_ATTENTION_V2;
  k.dtypes = SA_DTYPE_F32;
  k.memory = SA_MEMORY_HOST;
  k.capabilities = cap;
  k.attention_v2 = recording;
  return k;
}

// Two sequences, two heads, 3 queries, 4 keys, d = 2.
sa::AttentionCase small_case() {
  sa::AttentionCase c;
  c.batch = 2;
  c.heads_q = c.heads_kv = 2;
  c.seqlen_q = 3;
  c.seqlen_k = 4;
  c.d = c.dv = 2;
  c.q.assign(static_cast<std::size_t>(2 * 3 * 2 * 2), 0.5f);
  c.k.assign(static_cast<std::size_t>(2 * 4 * 2 * 2), 0.25f);
  c.v.assign(c.k.size(), 1.0f);
  return c;
}

// A [1][1][3][4] mask (broadcast over batch and heads), value (i, j) = 1 iff
// (i + 2 j) % 3 != 0.
sa::MaskTensor broadcast_mask(bool kt) {
  sa::MaskTensor m;
  m.nb = m.nh = 1;
  m.nq = 3;
  m.nk = 4;
  m.kt = kt;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) m.v.push_back((i + 2 * j) % 3 != 0 ? 1.0f : 0.0f);
  return m;
}

}  // namespace

TEST(MaskCall, BroadcastAndKeyMajorMasksArriveByTheirStrides) {
  const sa_capabilities cap = caps(SA_ATTN_BOOL_MASK | SA_ATTN_BIAS);
  const sa_kernel k = recorder(&cap);
  const sa::Kernel h(&k, "test");
  for (bool kt : {false, true}) {
    sa::AttentionCase c = small_case();
    c.attn_mask = broadcast_mask(kt);
    // A per-head captured bias: [1][2][1][1].
    c.attn_bias.nb = c.attn_bias.nq = c.attn_bias.nk = 1;
    c.attn_bias.nh = 2;
    c.attn_bias.v = {0.5f, -2.0f};
    h.attention_v2(c);
    EXPECT_EQ(seen.a.attn_mask.stride_b, 0);
    EXPECT_EQ(seen.a.attn_mask.stride_h, 0);
    EXPECT_EQ(seen.a.attn_mask.stride_q, kt ? 1 : 4);
    EXPECT_EQ(seen.a.attn_mask.stride_k, kt ? 3 : 1);
    EXPECT_EQ(seen.a.attn_bias.stride_b, 0);
    EXPECT_EQ(seen.a.attn_bias.stride_q, 0);
    EXPECT_EQ(seen.a.attn_bias.stride_k, 0);
    ASSERT_EQ(seen.mask.size(), 2u * 2 * 3 * 4);
    for (int b = 0; b < 2; ++b)
      for (int hh = 0; hh < 2; ++hh)
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 4; ++j) {
            const std::size_t e = static_cast<std::size_t>(((b * 2 + hh) * 3 + i) * 4 + j);
            EXPECT_EQ(seen.mask[e], (i + 2 * j) % 3 != 0 ? 1 : 0) << kt << " " << i << " " << j;
            EXPECT_EQ(seen.bias[e], hh == 0 ? 0.5f : -2.0f);
          }
    EXPECT_EQ(seen.a.block_mask.data, nullptr);
    EXPECT_EQ(seen.a.tree_mask.data, nullptr);
  }
}

TEST(MaskCall, UndeclaredMasksAreNotApplicableAndNeverSet) {
  const sa_capabilities none = caps(0);
  const sa_kernel k = recorder(&none);
  const sa::Kernel h(&k, "test");
  sa::AttentionCase c = small_case();
  h.attention_v2(c);
  EXPECT_EQ(seen.a.attn_mask.data, nullptr);
  EXPECT_EQ(seen.a.attn_bias.data, nullptr);
  EXPECT_EQ(seen.a.block_mask.data, nullptr);
  EXPECT_EQ(seen.a.tree_mask.data, nullptr);
  EXPECT_EQ(seen.a.block_q, 0);
  c.tree_mask.nb = 2;
  c.tree_mask.nh = 1;
  c.tree_mask.nq = c.tree_mask.nk = 3;
  c.tree_mask.v.assign(18, 1.0f);
  const int before = seen.calls;
  EXPECT_NE(h.why_not_applicable(c).find("tree mask"), std::string::npos);
  EXPECT_THROW(h.attention_v2(c), sa::NotApplicable);
  EXPECT_EQ(seen.calls, before);
  // The backward and the v1 slot refuse masks (forward only, not in v1).
  EXPECT_NE(h.why_not_applicable_backward(c).size(), 0u);
  EXPECT_NE(h.why_not_applicable_v1(c).size(), 0u);
}

TEST(MaskCall, CaseRefusesBadExtentsNamingThem) {
  sa::AttentionCase c = small_case();
  c.attn_mask = broadcast_mask(false);
  c.attn_mask.nk = 3;  // neither 1 nor 4
  c.attn_mask.v.resize(9);
  try {
    c.validate();
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("attn_mask extent k"), std::string::npos) << e.what();
  }
  sa::AttentionCase d = small_case();
  d.block_mask.nb = d.block_mask.nh = d.block_mask.nq = d.block_mask.nk = 1;
  d.block_mask.v = {1.0f};
  EXPECT_THROW(d.validate(), std::invalid_argument);  // block_q, block_k 0
  d.block_q = d.block_k = 2;
  d.block_mask.nk = 2;  // ceil(4 / 2)
  d.block_mask.v = {1.0f, 0.0f};
  EXPECT_NO_THROW(d.validate());
  sa::AttentionCase e = small_case();
  e.attn_bias = broadcast_mask(false);
  e.attn_bias.v[3] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(e.validate(), std::invalid_argument);  // the suite's biases are finite
}

TEST(MaskCall, CaseFilesRoundTripTheMasks) {
  sa::AttentionCase c = small_case();
  c.attn_mask = broadcast_mask(true);
  c.attn_bias = broadcast_mask(false);
  c.block_q = 2;
  c.block_k = 3;
  c.block_mask.nb = 2;
  c.block_mask.nh = 1;
  c.block_mask.nq = c.block_mask.nk = 2;
  c.block_mask.v = {1, 0, 1, 1, 0, 1, 1, 1};
  c.tree_mask.nb = c.tree_mask.nh = 1;
  c.tree_mask.nq = c.tree_mask.nk = 3;
  c.tree_mask.v = {1, 0, 0, 1, 1, 0, 1, 0, 1};
  const sa::AttentionCase r =
      sa::call_log::attention_case_of(sa::call_log::attention_call("attention_v2", c));
  for (auto [a, b] : {std::pair{&c.attn_mask, &r.attn_mask},
                      {&c.attn_bias, &r.attn_bias},
                      {&c.block_mask, &r.block_mask},
                      {&c.tree_mask, &r.tree_mask}}) {
    EXPECT_EQ(a->v, b->v);
    EXPECT_EQ(a->nb, b->nb);
    EXPECT_EQ(a->nh, b->nh);
    EXPECT_EQ(a->nq, b->nq);
    EXPECT_EQ(a->nk, b->nk);
    EXPECT_EQ(a->kt, b->kt);
  }
  EXPECT_EQ(r.block_q, 2);
  EXPECT_EQ(r.block_k, 3);
  const sa::AttentionCase plain =
      sa::call_log::attention_case_of(sa::call_log::attention_call("attention_v2", small_case()));
  EXPECT_FALSE(plain.masks());
}
