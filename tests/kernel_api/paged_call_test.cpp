// Paged KV and seqused_k through the handle (issue 33): what a kernel that
// declares them is handed (a block table of distinct shuffled pages, ids
// across 65,535, NaN in every slot and page no sequence uses, seqused_k the
// case's key counts, the buffer's extra keys NaN), that a kernel declaring
// neither never sees the new fields set, and that bad cases are refused with
// the field named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/call_log.hpp"
#include "kernels/kernel.hpp"

namespace {

// What the recording kernel saw of its last call.
struct Seen {
  sa_attention_v2_args a{};
  std::vector<std::int32_t> block_table, seqused, cu_k;
  std::vector<float> k, v;  // the whole k and v buffers (float32)
  std::size_t k_count = 0, v_count = 0;
};
Seen seen;
std::size_t k_elems = 0, v_elems = 0;  // set by the test: buffer sizes to copy

sa_status recording(void*, const sa_attention_v2_args* a) {
  seen = Seen{};
  seen.a = *a;
  if (a->block_table)
    seen.block_table.assign(a->block_table, a->block_table + a->batch * a->block_table_stride);
  if (a->seqused_k) seen.seqused.assign(a->seqused_k, a->seqused_k + a->batch);
  if (a->cu_seqlens_k) seen.cu_k.assign(a->cu_seqlens_k, a->cu_seqlens_k + a->batch + 1);
  const auto* k = static_cast<const float*>(a->k.data);
  const auto* v = static_cast<const float*>(a->v.data);
  seen.k.assign(k, k + k_elems);
  seen.v.assign(v, v + v_elems);
  // Outputs: zeros in every query row (so the handle has rows to read).
  const bool varlen = a->cu_seqlens_q != nullptr;
  for (std::int64_t b = 0; b < a->batch; ++b) {
    const std::int64_t q0 = varlen ? a->cu_seqlens_q[b] : 0;
    const std::int64_t lq = varlen ? a->cu_seqlens_q[b + 1] - q0 : a->seqlen_q;
    for (std::int64_t i = 0; i < lq; ++i)
      for (std::int64_t h = 0; h < a->heads_q; ++h)
        for (std::int64_t x = 0; x < a->head_dim_v; ++x)
          static_cast<float*>(a->out)[(varlen ? 0 : b * a->out_stride_b) + h * a->out_stride_h +
                                      (q0 + i) * a->out_stride_s + x] = 0.0f;
  }
  return SA_OK;
}

sa_capabilities caps(std::uint32_t extra) {
  sa_capabilities c{};
  c.struct_size = sizeof c;
  c.attention_features = SA_ATTN_BATCHED | SA_ATTN_GQA | SA_ATTN_VARLEN | SA_ATTN_STRIDED |
                         SA_ATTN_UNEQUAL_HEAD_DIMS | extra;
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

// A varlen case, keys k[row][h][x] = 1000 row + 10 h + x (distinct, finite).
sa::AttentionCase varlen_case(std::vector<std::int32_t> lq, std::vector<std::int32_t> lk) {
  sa::AttentionCase c;
  c.batch = static_cast<std::int64_t>(lq.size());
  c.heads_q = 2;
  c.heads_kv = 2;
  c.d = 3;
  c.dv = 2;
  c.cu_q = {0};
  c.cu_k = {0};
  for (std::size_t b = 0; b < lq.size(); ++b) {
    c.cu_q.push_back(c.cu_q.back() + lq[b]);
    c.cu_k.push_back(c.cu_k.back() + lk[b]);
  }
  c.q.assign(static_cast<std::size_t>(c.total_q() * c.heads_q * c.d), 0.5f);
  for (std::int64_t r = 0; r < c.total_k(); ++r)
    for (std::int64_t h = 0; h < c.heads_kv; ++h) {
      for (std::int64_t x = 0; x < c.d; ++x)
        c.k.push_back(static_cast<float>(1000 * r + 10 * h + x));
      for (std::int64_t x = 0; x < c.dv; ++x)
        c.v.push_back(static_cast<float>(-1000 * r - 10 * h - x));
    }
  c.scale = 1.0;
  return c;
}

std::string validate_error(const sa::AttentionCase& c) {
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(PagedCall, CaseRefusesBadPagedAndSequsedFieldsNamingThem) {
  sa::AttentionCase c = varlen_case({1, 2}, {3, 0});
  EXPECT_EQ(validate_error(c), "");
  sa::AttentionCase x = c;
  x.kv_extra = {1};
  EXPECT_NE(validate_error(x).find("kv_extra has 1 values, expected 2"), std::string::npos)
      << validate_error(x);
  x.kv_extra = {1, -1};
  EXPECT_NE(validate_error(x).find("kv_extra[1] = -1"), std::string::npos) << validate_error(x);
  x = c;
  x.page_size = 1025;
  EXPECT_NE(validate_error(x).find("page_size = 1025"), std::string::npos) << validate_error(x);
  x = c;
  x.dense_call = true;
  EXPECT_NE(validate_error(x).find("dense_call needs"), std::string::npos) << validate_error(x);
  x.kv_extra = {0, 2};
  EXPECT_NE(validate_error(x).find("dense_call needs equal query lengths"), std::string::npos)
      << validate_error(x);
  x = c;
  x.page_size = 256;
  x.page_id_base = 1 << 30;  // the pool would span more than 2^34 elements
  EXPECT_NE(validate_error(x).find("page pool"), std::string::npos) << validate_error(x);
}

TEST(PagedCall, BlockTableIsAShuffledPermutationOfDistinctPagesFromTheBase) {
  for (std::int64_t ps : {1, 5, 16, 256}) {
    sa::AttentionCase c = varlen_case({1, 3, 2}, {40, 0, 300});
    c.page_size = ps;
    // Ids across 65,535 where the pool stays small; a base of 100 for 256-token pages.
    const std::int64_t base = ps <= 16 ? 65530 : 100;
    c.page_id_base = base;
    c.kv_extra = {7, 0, 3};
    c.page_seed = 12345 + static_cast<std::uint64_t>(ps);
    ASSERT_EQ(validate_error(c), "");
    const sa::PagedKv p = sa::paged_kv(c);
    std::set<std::int32_t> live;
    bool ordered = true;
    std::int32_t prev = -1;
    for (std::int64_t b = 0; b < c.batch; ++b) {
      const std::int64_t pages = (c.key_buffer(b) + ps - 1) / ps;
      ASSERT_LE(pages, p.stride);
      for (std::int64_t e = 0; e < p.stride; ++e) {
        const std::int32_t id = p.block_table[static_cast<std::size_t>(b * p.stride + e)];
        EXPECT_GE(id, base);
        EXPECT_LT(id, p.num_pages);
        if (e < pages) {
          EXPECT_TRUE(live.insert(id).second) << "page " << id << " named twice";
          ordered = ordered && id > prev;
          prev = id;
        } else {
          EXPECT_NE(std::find(p.spare.begin(), p.spare.end(), id), p.spare.end());
        }
      }
    }
    if (base > 65535 - 8) EXPECT_GT(*live.rbegin(), 65535) << "page size " << ps;
    if (live.size() > 3) EXPECT_FALSE(ordered) << "physical order not shuffled, page size " << ps;
  }
}

TEST(PagedCall, KernelGetsPagesSequsedKAndNaNEverywhereElse) {
  const sa_capabilities cap = caps(SA_ATTN_PAGED_KV | SA_ATTN_SEQUSED_K);
  const sa_kernel raw = recorder(&cap);
  const sa::Kernel k(&raw, "test");
  for (bool bhsd : {false, true}) {
    sa::AttentionCase c = varlen_case({2, 1, 1}, {6, 0, 9});
    c.page_size = 5;
    c.kv_extra = {2, 3, 0};
    c.page_seed = 7;
    c.layout = bhsd ? sa::AttnLayout::bhsd : sa::AttnLayout::bshd;
    c.row_pad = 1;
    const sa::PagedKv p = sa::paged_kv(c);
    // Pool strides as the handle lays them out (NHD or HND pages, padded).
    const std::int64_t ss = bhsd ? c.d + 1 : c.heads_kv * c.d + 1, sh = bhsd ? 5 * ss : c.d,
                       sb = bhsd ? c.heads_kv * sh : 5 * ss;
    k_elems = static_cast<std::size_t>(p.num_pages * sb);
    v_elems = 1;
    k.attention_v2(c);
    const sa_attention_v2_args& a = seen.a;
    EXPECT_EQ(a.page_size, 5);
    EXPECT_EQ(a.num_pages, p.num_pages);
    EXPECT_EQ(a.block_table_stride, p.stride);
    EXPECT_EQ(seen.block_table, p.block_table);
    EXPECT_EQ(seen.seqused, (std::vector<std::int32_t>{6, 0, 9}));
    // cu_seqlens_k gives the buffers: used keys plus the extra ones.
    EXPECT_EQ(seen.cu_k, (std::vector<std::int32_t>{0, 8, 11, 20}));
    EXPECT_EQ(a.k.stride_b, sb);
    EXPECT_EQ(a.k.stride_h, sh);
    EXPECT_EQ(a.k.stride_s, ss);
    // Every element of the pool: the case's key where a used key lives, NaN elsewhere.
    std::vector<bool> live(k_elems, false);
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t j = 0; j < c.len_k(b); ++j)
        for (std::int64_t h = 0; h < c.heads_kv; ++h)
          for (std::int64_t x = 0; x < c.d; ++x) {
            const std::int64_t page = p.block_table[static_cast<std::size_t>(b * p.stride + j / 5)];
            const std::size_t at = static_cast<std::size_t>(page * sb + (j % 5) * ss + h * sh + x);
            live[at] = true;
            EXPECT_EQ(seen.k[at],
                      c.k[static_cast<std::size_t>((c.row_k(b, j) * c.heads_kv + h) * c.d + x)]);
          }
    for (std::size_t i = 0; i < k_elems; ++i)
      if (!live[i]) EXPECT_TRUE(std::isnan(seen.k[i])) << "k element " << i << " is not NaN";
  }
}

TEST(PagedCall, DenseCallPassesFixedLengthsWithSequsedK) {
  const sa_capabilities cap = caps(SA_ATTN_SEQUSED_K);
  const sa_kernel raw = recorder(&cap);
  const sa::Kernel k(&raw, "test");
  sa::AttentionCase c = varlen_case({2, 2, 2}, {4, 0, 7});
  c.kv_extra = {1, 5, 0};
  c.dense_call = true;
  const std::int64_t n = 7;  // the longest buffer: 4 + 1, 0 + 5, 7 + 0
  k_elems = static_cast<std::size_t>(c.batch * n * c.heads_kv * c.d);
  v_elems = 1;
  k.attention_v2(c);
  const sa_attention_v2_args& a = seen.a;
  EXPECT_EQ(a.cu_seqlens_q, nullptr);
  EXPECT_EQ(a.cu_seqlens_k, nullptr);
  EXPECT_EQ(a.block_table, nullptr);
  EXPECT_EQ(a.seqlen_q, 2);
  EXPECT_EQ(a.seqlen_k, n);
  EXPECT_EQ(seen.seqused, (std::vector<std::int32_t>{4, 0, 7}));
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t j = 0; j < n; ++j) {
      const float got = seen.k[static_cast<std::size_t>((b * n + j) * c.heads_kv * c.d)];
      if (j < c.len_k(b))
        EXPECT_EQ(got, c.k[static_cast<std::size_t>(c.row_k(b, j) * c.heads_kv * c.d)]);
      else
        EXPECT_TRUE(std::isnan(got)) << "sequence " << b << " key " << j;
    }
}

// A kernel that declares neither feature: paged and seqused_k cases are not
// applicable (never called), and the other cases reach it with the appended
// fields NULL and 0, as a kernel built against the earlier header expects.
TEST(PagedCall, UndeclaredFeaturesAreNotApplicableAndNeverSet) {
  const sa_capabilities cap = caps(0);
  const sa_kernel raw = recorder(&cap);
  const sa::Kernel k(&raw, "test");
  sa::AttentionCase c = varlen_case({1, 2}, {3, 4});
  sa::AttentionCase p = c;
  p.page_size = 16;
  EXPECT_NE(k.why_not_applicable(p).find("paged KV"), std::string::npos);
  EXPECT_THROW(k.attention_v2(p), sa::NotApplicable);
  sa::AttentionCase u = c;
  u.kv_extra = {0, 1};
  EXPECT_NE(k.why_not_applicable(u).find("seqused_k"), std::string::npos);
  EXPECT_THROW(k.attention_v2(u), sa::NotApplicable);
  k_elems = static_cast<std::size_t>(c.total_k() * c.heads_kv * c.d);
  v_elems = 1;
  k.attention_v2(c);
  EXPECT_EQ(seen.a.seqused_k, nullptr);
  EXPECT_EQ(seen.a.block_table, nullptr);
  EXPECT_EQ(seen.a.block_table_stride, 0);
  EXPECT_EQ(seen.a.page_size, 0);
  EXPECT_EQ(seen.a.num_pages, 0);
  EXPECT_EQ(seen.cu_k, c.cu_k);
}

// A case file keeps the paged and seqused_k description (replay calls the
// same block table, the same poisoned slots).
TEST(PagedCall, CaseFilesRoundTripThePagedAndSequsedFields) {
  sa::AttentionCase c = varlen_case({2, 2}, {5, 0});
  c.page_size = 3;
  c.page_id_base = 65533;
  c.page_seed = 99;
  c.kv_extra = {4, 1};
  c.dense_call = true;
  const sa::AttentionCase r =
      sa::call_log::attention_case_of(sa::call_log::attention_call("attention_v2", c));
  EXPECT_EQ(r.page_size, 3);
  EXPECT_EQ(r.page_id_base, 65533);
  EXPECT_EQ(r.page_seed, 99u);
  EXPECT_EQ(r.kv_extra, c.kv_extra);
  EXPECT_TRUE(r.dense_call);
  EXPECT_EQ(sa::paged_kv(r).block_table, sa::paged_kv(c).block_table);
  // A contiguous case writes none of them, and reads back without them.
  const sa::AttentionCase plain = sa::call_log::attention_case_of(
      sa::call_log::attention_call("attention_v2", varlen_case({1}, {2})));
  EXPECT_FALSE(plain.paged());
  EXPECT_FALSE(plain.seqused());
}

namespace {

// MLA (issue 33): a case whose V is the first dv elements of each key vector.
sa::AttentionCase v_in_k_case() {
  sa::AttentionCase c = varlen_case({2, 1}, {3, 2});
  for (std::int64_t r = 0; r < c.total_k() * c.heads_kv; ++r)
    for (std::int64_t x = 0; x < c.dv; ++x)
      c.v[static_cast<std::size_t>(r * c.dv + x)] = c.k[static_cast<std::size_t>(r * c.d + x)];
  c.v_in_k = true;
  return c;
}

// The kernel is handed V as a view of K (the same pointer and strides), in
// contiguous and paged calls; a case whose v is not K's prefix (a derived,
// poisoned case) gets separate buffers; dv > d is refused naming the field.
TEST(MlaCall, VIsAPrefixViewOfKWhereTheValuesAreThat) {
  const sa_capabilities cap = caps(SA_ATTN_PAGED_KV);
  const sa_kernel rk = recorder(&cap);
  const sa::Kernel k(&rk, "test");
  k_elems = v_elems = 1;
  for (std::int64_t page : {0, 4}) {
    sa::AttentionCase c = v_in_k_case();
    c.page_size = page;
    k.attention_v2(c);
    EXPECT_EQ(seen.a.v.data, seen.a.k.data) << "page_size " << page;
    EXPECT_EQ(seen.a.v.stride_s, seen.a.k.stride_s);
    EXPECT_EQ(seen.a.v.stride_h, seen.a.k.stride_h);
    EXPECT_EQ(seen.a.v.stride_b, seen.a.k.stride_b);
    EXPECT_EQ(seen.a.head_dim_v, 2);
    EXPECT_EQ(seen.a.head_dim, 3);
  }
  sa::AttentionCase poisoned = v_in_k_case();
  poisoned.v[0] = NAN;
  k.attention_v2(poisoned);
  EXPECT_NE(seen.a.v.data, seen.a.k.data);
  sa::AttentionCase wide = v_in_k_case();
  wide.dv = 4;
  wide.v.assign(static_cast<std::size_t>(wide.total_k() * wide.heads_kv * 4), 0.0f);
  EXPECT_NE(validate_error(wide).find("v_in_k"), std::string::npos) << validate_error(wide);
}

// A kernel that takes no strides gets separate buffers (a view of K with
// dv < d has K's strides).
TEST(MlaCall, NoViewForAKernelWithoutStrides) {
  sa_capabilities cap = caps(0);
  cap.attention_features &= ~static_cast<std::uint32_t>(SA_ATTN_STRIDED);
  const sa_kernel rk = recorder(&cap);
  k_elems = v_elems = 1;
  sa::Kernel(&rk, "test").attention_v2(v_in_k_case());
  EXPECT_NE(seen.a.v.data, seen.a.k.data);
}

TEST(MlaCall, CaseFilesRoundTripVInK) {
  const sa::AttentionCase r =
      sa::call_log::attention_case_of(sa::call_log::attention_call("attention_v2", v_in_k_case()));
  EXPECT_TRUE(r.v_in_k);
  EXPECT_TRUE(r.v_aliases_k());
  const sa::AttentionCase plain = sa::call_log::attention_case_of(
      sa::call_log::attention_call("attention_v2", varlen_case({1}, {2})));
  EXPECT_FALSE(plain.v_in_k);
}

}  // namespace
