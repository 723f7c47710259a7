// Host-only tests of the CUDA kernel: everything that must hold without a GPU.
//  - The descriptor passes sa::Kernel's checks (ops and dtypes agree with the
//    function pointers).
//  - Every bad argument of every operation is SA_INVALID_ARGUMENT before any
//    CUDA call, and last_error names the field and what was expected.
//  - Launch plans: strategy thresholds, 1-D grids within the x limit and
//    never above kMaxGridX (grid-stride loops cover the rest; no 65,535
//    limit), 64-bit work counts past 2^31 elements, shared memory within the
//    sm_80 opt-in limit.
//  - device_memory() agrees with the CUDA runtime about whether a device exists.
//  - The shared host/device arithmetic compiled by nvcc gives bit-identical
//    results to the same headers compiled by the host compiler, and matches
//    the MPFR reference within first-order bounds.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/bfloat16.hpp"
#include "kernels/cuda/cuda_kernel.hpp"
#include "kernels/cuda/plan.hpp"
#include "kernels/kernel.hpp"
#include "kernels/linked_cuda_runtime.hpp"
#include "reference/softmax.hpp"
#include "tests/cuda/bounds.hpp"
#include "tests/cuda/shared_arith.hpp"
#include "theory/adaptive_temperature.hpp"
#include "theory/streamed_entropy.hpp"

namespace {

namespace cu = sa::kernels::cuda;
const sa_kernel& K() { return *sa::kernels::cuda_kernel(); }

// A pointer that is never dereferenced: validation must reject the call first.
void* fake() { return reinterpret_cast<void*>(std::uintptr_t{0x1000}); }

std::string last_error() {
  const char* e = K().last_error(K().ctx);
  return e ? e : "";
}

// Expects SA_INVALID_ARGUMENT with a message containing every `needles` word.
#define EXPECT_INVALID(call, ...)                                                       \
  do {                                                                                  \
    const sa_status st_ = (call);                                                       \
    EXPECT_EQ(st_, SA_INVALID_ARGUMENT) << #call;                                       \
    for (const char* n_ : {__VA_ARGS__})                                                \
      EXPECT_NE(last_error().find(n_), std::string::npos)                               \
          << #call << ": last_error \"" << last_error() << "\" lacks \"" << n_ << "\""; \
  } while (0)

TEST(CudaDescriptor, PassesTheKernelHandleChecks) {
  // Claim: sa::Kernel accepts the descriptor (it throws on any disagreement
  // between ops/dtypes and the pointers), and it advertises everything.
  const sa::Kernel k(sa::kernels::cuda_kernel(), "built-in");
  EXPECT_EQ(k.name(), "cuda");
  EXPECT_EQ(k.memory(), SA_MEMORY_CUDA);
  EXPECT_EQ(k.adaptive_entropy(), SA_ENTROPY_SHANNON);
  for (sa::Op op : sa::all_ops) EXPECT_TRUE(k.supports(op)) << sa::name_of(op);
  EXPECT_TRUE(k.supports(sa::DType::float32));
  EXPECT_TRUE(k.supports(sa::DType::bfloat16));
  EXPECT_FALSE(k.supports(sa::DType::float16));
}

TEST(CudaValidation, RowOperationsNameTheBadField) {
  const sa_rows good{2, 8, 8, 8, 1.0};
  auto with = [&](auto edit) {
    sa_rows s = good;
    edit(s);
    return s;
  };
  using Fn = sa_status (*)(void*, sa_dtype, const sa_rows*, const void*, void*);
  const std::pair<const char*, Fn> elementwise[] = {{"softmax", K().softmax},
                                                    {"log_softmax", K().log_softmax}};
  for (auto [name, fn] : elementwise) {
    SCOPED_TRACE(name);
    EXPECT_INVALID(fn(nullptr, static_cast<sa_dtype>(7), &good, fake(), fake()), name, "dtype");
    EXPECT_INVALID(fn(nullptr, SA_F32, nullptr, fake(), fake()), name, "shape");
    sa_rows s = with([](sa_rows& r) { r.rows = -1; });
    EXPECT_INVALID(fn(nullptr, SA_F32, &s, fake(), fake()), "rows", ">= 0");
    s = with([](sa_rows& r) { r.n = 0; });
    EXPECT_INVALID(fn(nullptr, SA_BF16, &s, fake(), fake()), "shape->n", ">= 1");
    s = with([](sa_rows& r) { r.in_stride = 7; });
    EXPECT_INVALID(fn(nullptr, SA_F32, &s, fake(), fake()), "in_stride", ">= n");
    s = with([](sa_rows& r) { r.out_stride = 3; });
    EXPECT_INVALID(fn(nullptr, SA_F32, &s, fake(), fake()), "out_stride", ">= n");
    for (double t : {0.0, -1.0, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
      s = with([&](sa_rows& r) { r.temperature = t; });
      EXPECT_INVALID(fn(nullptr, SA_F32, &s, fake(), fake()), "temperature", "finite value > 0");
    }
    s = with([](sa_rows& r) {
      r.rows = std::int64_t{1} << 40;
      r.in_stride = std::int64_t{1} << 30;
      r.out_stride = r.in_stride;
    });
    EXPECT_INVALID(fn(nullptr, SA_F32, &s, fake(), fake()), "overflows");
    EXPECT_INVALID(fn(nullptr, SA_F32, &good, nullptr, fake()), "in is NULL");
    EXPECT_INVALID(fn(nullptr, SA_F32, &good, fake(), nullptr), "out is NULL");
  }
  EXPECT_INVALID(K().logsumexp(nullptr, SA_F32, &good, fake(), nullptr), "logsumexp",
                 "lse is NULL");
  EXPECT_INVALID(K().entropy(nullptr, SA_F32, &good, fake(), nullptr, nullptr), "entropy",
                 "entropy is NULL");
  EXPECT_INVALID(K().adaptive_softmax(nullptr, SA_F32, &good, fake(), nullptr, nullptr, nullptr),
                 "adaptive_softmax", "out is NULL");
  // logsumexp and entropy do not use out_stride (kernel.h): a short one is fine
  // for validation, so the call proceeds to the device stage (not checked here).
  sa_rows s = with([](sa_rows& r) { r.n = 0; });
  EXPECT_INVALID(K().logsumexp(nullptr, SA_F32, &s, fake(), static_cast<float*>(fake())),
                 "logsumexp", "shape->n");
}

// float16 rows (ABI version 2) are not implemented by the CUDA kernel: every
// row op answers SA_UNSUPPORTED (not SA_INVALID_ARGUMENT) naming SA_F16,
// before any CUDA call, and the descriptor does not claim SA_DTYPE_F16.
TEST(CudaValidation, Float16RowsAreUnsupported) {
  const sa_rows good{2, 8, 8, 8, 1.0};
  auto expect_unsupported = [](sa_status st, const char* op) {
    EXPECT_EQ(st, SA_UNSUPPORTED) << op;
    EXPECT_NE(last_error().find("SA_F16"), std::string::npos) << op << ": " << last_error();
  };
  expect_unsupported(K().softmax(nullptr, SA_F16, &good, fake(), fake()), "softmax");
  expect_unsupported(K().log_softmax(nullptr, SA_F16, &good, fake(), fake()), "log_softmax");
  expect_unsupported(K().logsumexp(nullptr, SA_F16, &good, fake(), static_cast<float*>(fake())),
                     "logsumexp");
  expect_unsupported(
      K().entropy(nullptr, SA_F16, &good, fake(), static_cast<float*>(fake()), nullptr), "entropy");
  expect_unsupported(K().adaptive_softmax(nullptr, SA_F16, &good, fake(), fake(), nullptr, nullptr),
                     "adaptive_softmax");
  EXPECT_EQ(K().dtypes & SA_DTYPE_F16, 0u);
}

TEST(CudaValidation, EmptyBatchIsANoOpWithoutDevice) {
  // Claim: rows = 0 is valid and touches nothing (pointers may be null).
  const sa_rows s{0, 16, 16, 16, 1.0};
  EXPECT_EQ(K().softmax(nullptr, SA_F32, &s, nullptr, nullptr), SA_OK);
  EXPECT_EQ(K().logsumexp(nullptr, SA_BF16, &s, nullptr, nullptr), SA_OK);
  EXPECT_EQ(K().merge_entropy_states(nullptr, 0, nullptr, nullptr, nullptr), SA_OK);
  EXPECT_EQ(K().merge_attention_states(nullptr, 0, 4, nullptr, nullptr, nullptr, nullptr, nullptr,
                                       nullptr),
            SA_OK);
}

sa_attention_args good_attention() {
  sa_attention_args a{};
  a.dtype = SA_F32;
  a.nq = 4;
  a.nk = 5;
  a.d = 8;
  a.dv = 6;
  a.q = a.k = a.v = fake();
  a.out = fake();
  a.q_stride = a.k_stride = 8;
  a.v_stride = a.out_stride = 6;
  a.scale = 0.35;
  return a;
}

TEST(CudaValidation, AttentionNamesTheBadField) {
  EXPECT_INVALID(K().attention(nullptr, nullptr), "attention", "args");
  struct Case {
    void (*edit)(sa_attention_args&);
    const char* field;
  };
  const Case cases[] = {
      {[](sa_attention_args& a) { a.dtype = static_cast<sa_dtype>(0); }, "args->dtype"},
      {[](sa_attention_args& a) { a.nq = 0; }, "args->nq"},
      {[](sa_attention_args& a) { a.nk = -3; }, "args->nk"},
      {[](sa_attention_args& a) { a.d = 0; }, "args->d "},
      {[](sa_attention_args& a) { a.dv = 0; }, "args->dv"},
      {[](sa_attention_args& a) { a.q_stride = 7; }, "args->q_stride"},
      {[](sa_attention_args& a) { a.k_stride = 2; }, "args->k_stride"},
      {[](sa_attention_args& a) { a.v_stride = 5; }, "args->v_stride"},
      {[](sa_attention_args& a) { a.out_stride = 1; }, "args->out_stride"},
      {[](sa_attention_args& a) { a.scale = std::numeric_limits<double>::infinity(); },
       "args->scale"},
      {[](sa_attention_args& a) { a.scale = std::numeric_limits<double>::quiet_NaN(); },
       "args->scale"},
      {[](sa_attention_args& a) { a.num_splits = -1; }, "args->num_splits"},
      {[](sa_attention_args& a) { a.q = nullptr; }, "args->q is NULL"},
      {[](sa_attention_args& a) { a.k = nullptr; }, "args->k is NULL"},
      {[](sa_attention_args& a) { a.v = nullptr; }, "args->v is NULL"},
      {[](sa_attention_args& a) { a.out = nullptr; }, "args->out is NULL"},
  };
  for (const Case& c : cases) {
    sa_attention_args a = good_attention();
    c.edit(a);
    EXPECT_INVALID(K().attention(nullptr, &a), "attention", c.field);
  }
  // A head dimension beyond the kernel's limit is unsupported, not invalid.
  sa_attention_args a = good_attention();
  a.d = a.q_stride = a.k_stride = cu::kAttnMaxHead + 1;
  EXPECT_EQ(K().attention(nullptr, &a), SA_UNSUPPORTED);
  EXPECT_NE(last_error().find("d, dv <= 256"), std::string::npos) << last_error();
}

TEST(CudaValidation, MergesNameTheBadField) {
  auto* s = static_cast<sa_entropy_state*>(fake());
  EXPECT_INVALID(K().merge_entropy_states(nullptr, -1, s, s, s), "merge_entropy_states", "count");
  EXPECT_INVALID(K().merge_entropy_states(nullptr, 3, nullptr, s, s), "a is NULL");
  EXPECT_INVALID(K().merge_entropy_states(nullptr, 3, s, nullptr, s), "b is NULL");
  EXPECT_INVALID(K().merge_entropy_states(nullptr, 3, s, s, nullptr), "out is NULL");
  auto* f = static_cast<float*>(fake());
  EXPECT_INVALID(K().merge_attention_states(nullptr, -2, 4, f, f, f, f, f, f),
                 "merge_attention_states", "rows");
  EXPECT_INVALID(K().merge_attention_states(nullptr, 2, 0, f, f, f, f, f, f), "dv");
  EXPECT_INVALID(K().merge_attention_states(nullptr, 2, 4, nullptr, f, f, f, f, f), "o_a is NULL");
  EXPECT_INVALID(K().merge_attention_states(nullptr, 2, 4, f, nullptr, f, f, f, f),
                 "lse_a is NULL");
  EXPECT_INVALID(K().merge_attention_states(nullptr, 2, 4, f, f, nullptr, f, f, f), "o_b is NULL");
  EXPECT_INVALID(K().merge_attention_states(nullptr, 2, 4, f, f, f, nullptr, f, f),
                 "lse_b is NULL");
  EXPECT_INVALID(K().merge_attention_states(nullptr, 2, 4, f, f, f, f, nullptr, f), "out is NULL");
  EXPECT_INVALID(K().merge_attention_states(nullptr, 2, 4, f, f, f, f, f, nullptr),
                 "out_lse is NULL");
}

TEST(CudaPlan, RowStrategiesAndGrids) {
  // Claim: the thresholds are where plan.hpp says, grids are 1-D within
  // [1, kMaxGridX] (< 2^31 - 1, the x limit; never the 65,535 y/z limit
  // matters), and the work counts are 64-bit.
  EXPECT_EQ(cu::plan_rows(5, 1).strategy, cu::RowStrategy::warp);
  EXPECT_EQ(cu::plan_rows(5, 1024).strategy, cu::RowStrategy::warp);
  EXPECT_EQ(cu::plan_rows(5, 1025).strategy, cu::RowStrategy::block);
  EXPECT_EQ(cu::plan_rows(5, 8192).strategy, cu::RowStrategy::block);
  EXPECT_EQ(cu::plan_rows(5, 8193).strategy, cu::RowStrategy::split);
  for (std::int64_t rows : {std::int64_t{1}, std::int64_t{65535}, std::int64_t{65536 + 7},
                            std::int64_t{1} << 31, std::int64_t{1} << 40})
    for (std::int64_t n :
         {std::int64_t{1}, std::int64_t{1000}, std::int64_t{5000}, std::int64_t{100000}}) {
      const cu::RowPlan p = cu::plan_rows(rows, n);
      EXPECT_GE(p.grid, 1);
      EXPECT_LE(p.grid, cu::kMaxGridX);
      EXPECT_LT(cu::kMaxGridX, std::int64_t{1} << 31);
      EXPECT_GE(p.work_items, rows);  // 64-bit, no wrap
    }
  // 65,543 rows on the warp path: 16,386 blocks of 4 warps, one row each.
  EXPECT_EQ(cu::plan_rows(65543, 100).grid, 16386);
  // A single row of 2^31 + 67 logits: chunked with 64-bit counts.
  const std::int64_t n = (std::int64_t{1} << 31) + 67;
  const cu::RowPlan big = cu::plan_rows(1, n);
  EXPECT_EQ(big.strategy, cu::RowStrategy::split);
  EXPECT_EQ(big.chunks_per_row, (n + cu::kChunk - 1) / cu::kChunk);
  EXPECT_GE(big.chunks_per_row * cu::kChunk, n);
  EXPECT_LT((big.chunks_per_row - 1) * cu::kChunk, n);
  EXPECT_EQ(big.grid, big.work_items);  // one block per chunk (262,145 < the cap)
  // 2^31 rows: capped, the grid-stride loop covers the rest.
  EXPECT_EQ(cu::plan_rows(std::int64_t{1} << 31, 100).grid, cu::kMaxGridX);
  // Rescales: none when the whole row is cached; on the split path the sequential
  // per-thread merges plus the 5-level butterfly and the 7 warp results.
  EXPECT_EQ(cu::plan_rows(3, 8192).max_rescales, 0);
  EXPECT_EQ(cu::plan_rows(3, 8193).max_rescales, 0 + 5 + 7);
  EXPECT_EQ(big.max_rescales, (big.chunks_per_row + 255) / 256 - 1 + 5 + 7);
}

// A valid batched attention call (fake device pointers: never dereferenced
// by the checks below).
sa_attention_v2_args good_attention_v2() {
  sa_attention_v2_args a{};
  a.struct_size = sizeof a;
  a.qkv_dtype = a.out_dtype = SA_BF16;
  a.batch = 2, a.heads_q = 8, a.heads_kv = 2;
  a.seqlen_q = 100, a.seqlen_k = 300;
  a.head_dim = a.head_dim_v = 64;
  a.q = {fake(), 100 * 8 * 64, 64, 8 * 64};
  a.k = {fake(), 300 * 2 * 64, 64, 2 * 64};
  a.v = a.k;
  a.out = fake();
  a.out_stride_b = 100 * 8 * 64, a.out_stride_h = 64, a.out_stride_s = 8 * 64;
  a.scale = 0.125;
  a.window_left = a.window_right = -1;
  a.q_descale = a.k_descale = a.v_descale = 1.f;
  return a;
}

TEST(CudaValidation, AttentionV2NamesTheBadField) {
  // Claim: every bad argument is SA_INVALID_ARGUMENT before any CUDA call
  // (no GPU here), naming the field; valid calls the kernel does not
  // implement are SA_UNSUPPORTED, naming why.
  auto call = [](const sa_attention_v2_args& a) { return K().attention_v2(K().ctx, &a); };
  EXPECT_INVALID(K().attention_v2(K().ctx, nullptr), "args is NULL");
  sa_attention_v2_args a = good_attention_v2();
  a.struct_size = 8;
  EXPECT_INVALID(call(a), "struct_size");
  a = good_attention_v2();
  a.qkv_dtype = static_cast<sa_dtype>(9);
  EXPECT_INVALID(call(a), "qkv_dtype = 9");
  a = good_attention_v2();
  a.out_dtype = SA_FP8_E4M3;
  EXPECT_INVALID(call(a), "out_dtype", "input type only");
  a = good_attention_v2();
  a.heads_kv = 3;
  EXPECT_INVALID(call(a), "heads_kv = 3", "dividing heads_q = 8");
  a = good_attention_v2();
  a.batch = -1;
  EXPECT_INVALID(call(a), "batch = -1");
  a = good_attention_v2();
  a.head_dim_v = 0;
  EXPECT_INVALID(call(a), "head_dim_v = 0");
  a = good_attention_v2();
  a.cu_seqlens_q = static_cast<const std::int32_t*>(fake());
  EXPECT_INVALID(call(a), "cu_seqlens_q and cu_seqlens_k");
  a = good_attention_v2();
  a.k.data = nullptr;
  EXPECT_INVALID(call(a), "k.data is NULL");
  a = good_attention_v2();
  a.v.stride_s = -1;
  EXPECT_INVALID(call(a), "v strides");
  a = good_attention_v2();
  a.window_left = -2;
  EXPECT_INVALID(call(a), "window_left = -2");
  a = good_attention_v2();
  a.softcap = -1;
  EXPECT_INVALID(call(a), "softcap");
  a = good_attention_v2();
  a.scale = std::numeric_limits<double>::infinity();
  EXPECT_INVALID(call(a), "scale");
  a = good_attention_v2();
  std::int32_t bad_align = 7;
  std::memcpy(&a.alignment, &bad_align, sizeof bad_align);
  EXPECT_INVALID(call(a), "alignment = 7");
  a = good_attention_v2();
  a.qkv_dtype = SA_FP8_E5M2;
  a.k_descale = std::numeric_limits<float>::quiet_NaN();
  EXPECT_INVALID(call(a), "descale");

  a = good_attention_v2();
  a.head_dim = 257;
  EXPECT_EQ(call(a), SA_UNSUPPORTED);
  EXPECT_NE(last_error().find("head dims <= 256"), std::string::npos) << last_error();
  a = good_attention_v2();
  a.adaptive = 1;
  EXPECT_EQ(call(a), SA_UNSUPPORTED);
  EXPECT_NE(last_error().find("SA_ATTN_ADAPTIVE"), std::string::npos) << last_error();
}

TEST(CudaValidation, AttentionV2VarlenOffsets) {
  // Claim: varlen offsets (read back to the host before the launch) must
  // start at 0, not decrease, and stay within the declared largest lengths.
  const std::int32_t q_ok[] = {0, 3, 3, 10}, k_ok[] = {0, 0, 5, 9};
  EXPECT_EQ(cu::validate_cu_seqlens(q_ok, k_ok, 3, 7, 5), "");
  const std::int32_t q_start[] = {1, 3, 3, 10};
  EXPECT_NE(cu::validate_cu_seqlens(q_start, k_ok, 3, 7, 5).find("expected 0"), std::string::npos);
  const std::int32_t q_down[] = {0, 3, 2, 10};
  EXPECT_NE(cu::validate_cu_seqlens(q_down, k_ok, 3, 8, 5).find("decrease at sequence 1"),
            std::string::npos);
  EXPECT_NE(cu::validate_cu_seqlens(q_ok, k_ok, 3, 6, 5).find("sequence 2 has 7 queries"),
            std::string::npos);
}

TEST(CudaPlan, AttentionV2TilesAndSharedMemory) {
  // Claim: 128-key tiles when both head dims are <= 64, else 64 (the tile
  // sizes FlashAttention-2's forward uses); the shared memory of the largest
  // head (256) fits the 99 KB opt-in limit of compute capabilities 8.6 and
  // 8.9 (CUDA C++ Programming Guide, "Technical Specifications per Compute
  // Capability"), and small heads fit the 48 KB every launch may use.
  sa_attention_v2_args a = good_attention_v2();
  cu::AttentionV2Plan p = cu::plan_attention_v2(a, a.seqlen_q);
  EXPECT_EQ(p.key_tile, 128);
  EXPECT_EQ(p.q_tiles, 7);  // ceil(100 / 16)
  EXPECT_EQ(p.work_items, 2 * 8 * 7);
  EXPECT_EQ(p.k_stride_smem % 2, 1);
  EXPECT_LE(p.shared_bytes, 48u * 1024u);
  a.head_dim_v = 65;
  EXPECT_EQ(cu::plan_attention_v2(a, 1).key_tile, 64);
  a.head_dim = a.head_dim_v = cu::kV2MaxHead;
  p = cu::plan_attention_v2(a, 1);
  EXPECT_EQ(p.key_tile, 64);
  EXPECT_GT(p.shared_bytes, 48u * 1024u);
  EXPECT_LE(p.shared_bytes, 99u * 1024u);
  // Many rows: a 1-D capped grid, 64-bit work count.
  a.batch = std::int64_t{1} << 20;
  p = cu::plan_attention_v2(a, 1 << 20);
  EXPECT_EQ(p.work_items, (std::int64_t{1} << 20) * 8 * (1 << 16));
  EXPECT_LE(p.grid, cu::kMaxGridX);
}

TEST(CudaPlan, KvCacheChecksNameTheField) {
  // Claim: seqused_k outside 0..N_b, a block table row shorter than the
  // sequence's pages and a page id outside the pool are refused before any
  // launch, each with a message naming the argument; a valid cache passes
  // (pages past seqused_k are not checked: they are never read).
  const std::int32_t buffer[2] = {10, 7}, used[2] = {10, 3};
  const std::int32_t table[6] = {4, 0, 2, 1, 99, 99};  // 4 tokens a page: 3 and 2 pages
  EXPECT_EQ(cu::validate_kv_cache(buffer, used, table, 2, 3, 4, 5), "");
  const std::int32_t bad_used[2] = {10, 8};
  EXPECT_NE(cu::validate_kv_cache(buffer, bad_used, nullptr, 2, 0, 0, 0).find("seqused_k[1] = 8"),
            std::string::npos);
  EXPECT_NE(cu::validate_kv_cache(buffer, used, table, 2, 2, 4, 5).find("block_table_stride"),
            std::string::npos);
  const std::int32_t bad_table[6] = {4, 0, 7, 1, 99, 99};
  EXPECT_NE(
      cu::validate_kv_cache(buffer, used, bad_table, 2, 3, 4, 5).find("block_table[0][2] = 7"),
      std::string::npos);
}

TEST(CudaDescriptor, AttentionV2CapabilitiesAreWhatIsImplemented) {
  // Claim: attention_v2 declares the features attention_v2.cu implements and
  // nothing else (paged KV, seqused_k, the masks and the fp8 descales per (sequence, kv head)
  // included, forward only): no adaptive temperature, no split-KV (num_splits is ignored, as
  // kernel.h allows), no block scales; every input type, float outputs.
  const sa_capabilities* c = K().capabilities;
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->struct_size, sizeof(sa_capabilities));
  EXPECT_TRUE(K().ops & SA_OP_ATTENTION_V2);
  EXPECT_NE(K().attention_v2, nullptr);
  const std::uint32_t want = SA_ATTN_BATCHED | SA_ATTN_GQA | SA_ATTN_VARLEN | SA_ATTN_STRIDED |
                             SA_ATTN_CAUSAL | SA_ATTN_WINDOW | SA_ATTN_SOFTCAP | SA_ATTN_ALIBI |
                             SA_ATTN_SINKS | SA_ATTN_KEY_PADDING | SA_ATTN_LSE | SA_ATTN_ENTROPY |
                             SA_ATTN_UNEQUAL_HEAD_DIMS | SA_ATTN_PAGED_KV | SA_ATTN_SEQUSED_K |
                             SA_ATTN_BOOL_MASK | SA_ATTN_BIAS | SA_ATTN_BLOCK_MASK |
                             SA_ATTN_TREE_MASK | SA_ATTN_DESCALE_BH;
  EXPECT_EQ(c->attention_features, want);
  EXPECT_EQ(c->op_dtypes[8],
            static_cast<std::uint32_t>(SA_DTYPE_F32 | SA_DTYPE_BF16 | SA_DTYPE_F16 |
                                       SA_DTYPE_FP8_E4M3 | SA_DTYPE_FP8_E5M2));
  EXPECT_EQ(c->op_out_dtypes[8],
            static_cast<std::uint32_t>(SA_DTYPE_F32 | SA_DTYPE_BF16 | SA_DTYPE_F16));
  EXPECT_EQ(c->max_head_dim, 256);
  // Row operations stay float32 and bfloat16 (op_dtypes 0: the kernel-wide dtypes).
  EXPECT_EQ(c->op_dtypes[0], 0u);
  EXPECT_EQ(K().dtypes, static_cast<std::uint32_t>(SA_DTYPE_F32 | SA_DTYPE_BF16));
}

// Claim: a program with the built-in CUDA kernel stages through the CUDA
// runtime it links (statically), registered before main, so it needs no
// libcudart.so at run time (issue 14: the Debian package of a CUDA build).
TEST(CudaDeviceMemory, UsesTheLinkedRuntime) { EXPECT_TRUE(sa::linked_cuda_runtime_registered()); }

TEST(CudaDeviceMemory, AgreesWithTheRuntime) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  const sa::DeviceMemory& dm = sa::device_memory();
  ASSERT_NE(dm.why_unavailable, nullptr);
  if (e != cudaSuccess || count == 0) {
    // Claim: without a device nothing can be staged, the reason is given, and a
    // CUDA kernel call through sa::Kernel is a skip (KernelUnavailable).
    EXPECT_EQ(dm.alloc, nullptr);
    const std::string why = dm.why_unavailable();
    EXPECT_EQ(why,
              e != cudaSuccess ? std::string(cudaGetErrorString(e)) : "no CUDA device present");
    const sa::Kernel k(sa::kernels::cuda_kernel(), "built-in");
    EXPECT_THROW(k.softmax(sa::DType::float32, sa::RowBatch::single({1.f, 2.f})),
                 sa::KernelUnavailable);
  } else {
    EXPECT_NE(dm.alloc, nullptr);
    EXPECT_STREQ(dm.why_unavailable(), "");
  }
}

// --- shared arithmetic: nvcc-compiled host code vs the host compiler ---

using FState = sa::theory::EntropyState<float>;
sa_entropy_state abi(FState s) { return {s.m, s.S, s.T}; }
bool same_bits(float a, float b) {
  std::uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y || (std::isnan(a) && std::isnan(b));
}
::testing::AssertionResult same_state(sa_entropy_state a, sa_entropy_state b) {
  if (same_bits(a.m, b.m) && same_bits(a.S, b.S) && same_bits(a.T, b.T))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "(" << a.m << ", " << a.S << ", " << a.T << ") vs ("
                                       << b.m << ", " << b.S << ", " << b.T << ")";
}

TEST(CudaSharedArithmetic, NvccHostBuildMatchesHostCompilerBitForBit) {
  // Claim: the same header compiled by nvcc and by the host compiler computes
  // the same float bits (both are the host compiler's arithmetic with
  // std::exp/std::log; a difference means SA_HD or hd:: resolved differently).
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  std::mt19937_64 rng(20261121);
  std::normal_distribution<float> N(0.f, 4.f);
  std::vector<std::vector<float>> rows = {{1.f},           {-inf},          {-inf, -inf, 2.f},
                                          {inf, 1.f, inf}, {1.f, nan, 2.f}, {3e4f, 3e4f + 1.f}};
  for (int r = 0; r < 50; ++r) {
    std::vector<float> v(1 + rng() % 300);
    for (auto& x : v) x = N(rng);
    rows.push_back(v);
  }
  for (const auto& v : rows) {
    FState h = sa::theory::entropy_identity<float>();
    for (float x : v) h = sa::theory::entropy_push(h, x);
    const sa_entropy_state n = sa::cuda_test::nvcc_host::push_all(v.data(), v.size());
    EXPECT_TRUE(same_state(abi(h), n));
    EXPECT_TRUE(same_bits(sa::theory::entropy_of(h), sa::cuda_test::nvcc_host::entropy_of(n)));
    EXPECT_TRUE(
        same_bits(sa::theory::log_sum_exp_of(h), sa::cuda_test::nvcc_host::log_sum_exp_of(n)));
  }
  for (float H = -1.f; H < 8.f; H += 0.0173f)
    EXPECT_TRUE(same_bits(sa::theory::adaptive_beta(H), sa::cuda_test::nvcc_host::adaptive_beta(H)))
        << H;
  EXPECT_TRUE(
      same_bits(sa::theory::adaptive_beta(nan), sa::cuda_test::nvcc_host::adaptive_beta(nan)));
  for (float x : {0.f, 1.f, 1.00390625f, 1.005859375f, 3.4e38f, -inf, nan, 1e-40f})
    EXPECT_EQ(sa::bf16_from_float(x), sa::cuda_test::nvcc_host::bf16_from_float(x)) << x;
  // Merge special values: identity is neutral, +inf counts, NaN poisons.
  const sa_entropy_state id{-inf, 0.f, 0.f}, a{2.f, 3.f, -1.f}, pinf{inf, 2.f, 0.f};
  EXPECT_TRUE(same_state(sa::cuda_test::nvcc_host::merge(id, a), a));
  EXPECT_TRUE(same_state(sa::cuda_test::nvcc_host::merge(a, id), a));
  EXPECT_TRUE(same_state(sa::cuda_test::nvcc_host::merge(id, id), id));
  EXPECT_TRUE(
      same_state(sa::cuda_test::nvcc_host::merge(pinf, pinf), sa_entropy_state{inf, 4.f, 0.f}));
  EXPECT_TRUE(same_state(sa::cuda_test::nvcc_host::merge(a, pinf), pinf));
  EXPECT_TRUE(std::isnan(sa::cuda_test::nvcc_host::merge(a, sa_entropy_state{nan, 1.f, 0.f}).S));
}

TEST(CudaSharedArithmetic, NvccHostBuildMatchesTheReference) {
  // Claim: the streamed state pushed in order (per-push rescaling, R <= n - 1
  // rescales) gives H within bounds.hpp's entropy_abs of the MPFR entropy. The
  // host exp/log (glibc) are within 1 ulp, inside bounds.hpp's E and L.
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const std::size_t n = 1 + rng() % 2000;
    std::normal_distribution<float> N(0.f, 1.f + static_cast<float>(trial % 5) * 2.f);
    std::vector<float> v(n);
    for (auto& x : v) x = N(rng);
    const std::vector<double> l(v.begin(), v.end());
    const double H = static_cast<double>(sa::ref::entropy(l));
    double spread = 0;
    const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    spread = static_cast<double>(*hi) - static_cast<double>(*lo);
    const sa_entropy_state s = sa::cuda_test::nvcc_host::push_all(v.data(), n);
    const double got = sa::cuda_test::nvcc_host::entropy_of(s);
    const double bound =
        sa::cuda_test::entropy_abs(static_cast<double>(n), spread, static_cast<double>(n - 1), H);
    EXPECT_LE(std::abs(got - H), bound) << "n=" << n << " trial " << trial;
  }
}

}  // namespace
