// Host-side half of the CUDA kernel, in plain C++ (no CUDA headers) so that it
// is unit-testable on a machine without a GPU:
//   - argument validation for every operation of the C ABI (an empty string
//     means valid; otherwise the message names the field and what was expected);
//   - launch plans: which strategy a row length gets, grid sizes (x-dimension
//     only, capped, with grid-stride loops covering the rest, so no 65,535
//     limit applies), 64-bit element counts, workspace sizes, and the largest
//     number of running-max rescales any logit's term goes through (the tests'
//     error bounds use it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "softmax_audit/kernel.h"

namespace sa::kernels::cuda {

// --- Row operations (softmax, log_softmax, logsumexp, entropy, adaptive) ---

// n <= kWarpMaxN: one warp per row, the row held in registers (32 per lane).
inline constexpr std::int64_t kWarpMaxN = 1024;
// n <= kBlockMaxN: one block of kRowThreads per row, the row held in shared memory.
inline constexpr std::int64_t kBlockMaxN = 8192;
// Longer rows: chunks of kChunk logits, one block per chunk; per-chunk
// (m, S, T) states are merged per row (theory.md T6), then a write pass.
inline constexpr std::int64_t kChunk = 8192;
inline constexpr int kRowThreads = 256;
inline constexpr int kWarpRowsPerBlock = 4;  // warps (rows) per block on the warp path
// Grids are 1-D (x allows 2^31 - 1 blocks); they are capped here and every
// kernel loops over its work with a grid-stride loop.
inline constexpr std::int64_t kMaxGridX = std::int64_t{1} << 20;

enum class RowStrategy { warp, block, split };
const char* name_of(RowStrategy s);

struct RowPlan {
  RowStrategy strategy = RowStrategy::warp;
  std::int64_t work_items = 0;      // rows (warp: rows, block: rows, split: rows * chunks_per_row)
  std::int64_t chunks_per_row = 1;  // split only
  std::int64_t grid = 0;            // blocks launched for the main pass (<= kMaxGridX)
  int threads = 0;                  // threads per block
  // The largest number of times a logit's exp term is rescaled by exp(m_old - m_new)
  // on its way into the row sum S. 0 on the warp and block paths (the row max is
  // found first and every term is taken against it); on the split path the
  // per-chunk states are merged sequentially per thread, then by a tree.
  std::int64_t max_rescales = 0;
  std::size_t workspace_bytes = 0;  // device scratch the split path needs
};

// rows >= 0, n >= 1 (validated before).
RowPlan plan_rows(std::int64_t rows, std::int64_t n);

// Validates one row-operation call. `op` names the operation in the message,
// `out_name` the required output pointer `out` ("out", "lse", "entropy");
// out_is_rows: the output is rows of n elements (its out_stride is checked).
std::string validate_rows(const char* op, int dtype, const sa_rows* shape, const void* in,
                          const void* out, const char* out_name, bool out_is_rows);

// --- Attention ---

// Interface v1 attention is the single-head case of attention_v2 (below):
// cuda_kernel.cpp checks a v1 call's arguments by their v1 names, then
// translates it.
inline constexpr std::int64_t kAttnMaxHead = 256;  // largest d and dv of a v1 call
std::string validate_attention(const sa_attention_args* a);

// --- Attention, interface v2 (attention_v2.cu) ---
//
// FlashAttention-2's structure on CUDA cores: a block of kV2Threads threads
// takes kV2Rows query rows of one (sequence, query head) and walks the keys
// in tiles of key_tile (64, or 128 when both head dims are <= 64), staged as
// float32 in shared memory. Eight threads own a query row (kV2ThreadsPerRow);
// thread g of a row scores keys g, g + 8, ... of the tile and accumulates
// output columns g, g + 8, ... (so at most kV2MaxHead / 8 accumulators).
inline constexpr int kV2Threads = 128;
inline constexpr int kV2ThreadsPerRow = 8;
inline constexpr int kV2Rows = kV2Threads / kV2ThreadsPerRow;  // 16 query rows per block
inline constexpr std::int64_t kV2MaxHead = 256;                // largest head_dim, head_dim_v
inline constexpr std::int64_t kV2SmallTile = 64, kV2LargeTile = 128;

struct AttentionV2Plan {
  std::int64_t key_tile = kV2SmallTile;
  std::int64_t k_stride_smem = 0;  // padded row length of the staged key tile (odd)
  std::int64_t kv_floats = 0;      // key_tile * max(k_stride_smem, head_dim_v): K, then V
  std::int64_t q_tiles = 0;        // query tiles per (sequence, head): ceil(max_len_q / kV2Rows)
  std::int64_t work_items = 0;     // batch * heads_q * q_tiles
  std::int64_t grid = 0;
  int threads = kV2Threads;
  std::size_t shared_bytes = 0;  // Q tile, K/V tile, P tile (float) and visibility (bytes)
};

// max_len_q: the longest query sequence (seqlen_q, or the largest varlen length).
AttentionV2Plan plan_attention_v2(const sa_attention_v2_args& a, std::int64_t max_len_q);

// SA_INVALID_ARGUMENT cases of attention_v2 (a message naming the field), or "".
std::string validate_attention_v2(const sa_attention_v2_args* a);
// SA_UNSUPPORTED cases (valid arguments this kernel does not implement), or "".
std::string unsupported_attention_v2(const sa_attention_v2_args& a);
// Checks varlen offsets copied to the host: batch + 1 nondecreasing values
// from 0, each length within seqlen_q / seqlen_k (the largest lengths).
std::string validate_cu_seqlens(const std::int32_t* cu_q, const std::int32_t* cu_k,
                                std::int64_t batch, std::int64_t seqlen_q, std::int64_t seqlen_k);
// Checks seqused_k and the block table copied to the host (either may be
// NULL): buffer[b] is sequence b's key buffer N_b; 0 <= seqused_k[b] <= N_b;
// the table row holds ceil(N_b / page_size) entries and the pages a sequence
// uses have ids in 0..num_pages - 1.
std::string validate_kv_cache(const std::int32_t* buffer, const std::int32_t* seqused,
                              const std::int32_t* table, std::int64_t batch,
                              std::int64_t table_stride, std::int64_t page_size,
                              std::int64_t num_pages);

// The CUDA kernel's capabilities (sa_kernel.capabilities).
const sa_capabilities* capabilities();

// --- Merges ---
std::string validate_merge_entropy(std::int64_t count, const void* a, const void* b,
                                   const void* out);
std::string validate_merge_attention(std::int64_t rows, std::int64_t dv, const void* o_a,
                                     const void* lse_a, const void* o_b, const void* lse_b,
                                     const void* out, const void* out_lse);

// The launch grid for `work` items with at most `per_block` items per block,
// capped at kMaxGridX (grid-stride loops cover the rest); at least 1.
std::int64_t grid_for(std::int64_t work, std::int64_t per_block);

}  // namespace sa::kernels::cuda
