// The CPU attention's path for few queries per sequence (decoding): every
// query row of a GQA group (the query heads that share one key/value head,
// times the sequence's queries) is computed in one pass over that head's K
// and V, read in place. The tiled path (kernels/cpu/attention.cpp) packs K
// and V into transposed float tiles per (sequence, query head) call; with one
// query that packing, and its allocation, cost about 50 times the arithmetic
// (perf on BM_AttentionV2 decode, 2026-11-24: memset and page faults 39%,
// packing 10%, the tile loop 0.8% of the samples).
//
// Algorithm: per key tile of cpu_attention_key_tile keys, each row's scores
// q.k are float32 dot products over d (Highway FMA over d, lanes summed at
// the end; bfloat16, float16 and fp8 keys widened exactly into one row of
// scratch), then the tiled path's own per-tile steps (attention_tile-inl.h:
// FinishScores, OnlineRow, PvTile on the tile's V widened into scratch), so
// scores, weights, the online softmax and the special-value rows follow
// exactly the same semantics. Adaptive temperature takes two passes, as in
// the tiled path.
//
// Accuracy: as kernels/cpu/attention.hpp states for the tiled path; only the
// order of the d-term float32 dot product differs (lane partial sums, then a
// tree), which has the same bound gamma_d sum_c |q_c k_c|.
//
// Memory: per thread, scratch of about rows * (d + 2 * tile) + tile * dv
// floats, kept between calls; nothing proportional to the key count.
#pragma once

#include <cstdint>

#include "kernels/cpu/attention.hpp"

namespace sa::kernels {

// Query rows (query heads of the group x queries of the sequence) one call takes.
inline constexpr std::int64_t cpu_attention_decode_max_rows = 64;

// One sequence against one key/value head: heads[0 .. nheads) are the
// single-head calls of the query heads sharing it. They must agree in every
// field except q, out, lse, entropy, beta, alibi_slope and sink, have
// nheads * nq <= cpu_attention_decode_max_rows and num_splits <= 1 (the path
// does not split keys). Single-threaded; the caller runs groups in parallel.
// Errors: SA_INTERNAL_ERROR (allocation).
sa_status cpu_attention_decode_group(const AttentionHeadArgs* heads, std::int64_t nheads);

}  // namespace sa::kernels
