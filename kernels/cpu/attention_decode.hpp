// The CPU attention's path for few queries per sequence (decoding): every
// query row of a GQA group (the query heads that share one key/value head,
// times the sequence's queries) is computed in one pass over that head's K
// and V, read in place (contiguous, or paged: each key row found through the
// block table, AttentionHeadArgs::pages, so a paged KV cache is never
// gathered on this path). The tiled path (kernels/cpu/attention.cpp) packs K
// and V into transposed float tiles per (sequence, query head) call; with one
// query that packing, and its allocation, cost about 50 times the arithmetic
// (perf on BM_AttentionV2 decode, 2026-11-24: memset and page faults 39%,
// packing 10%, the tile loop 0.8% of the samples). Both entries take it: the
// interface-v2 entry for sequences with Lq x group <= cpu_attention_decode_max_rows,
// the version-1 entry (cpu_attention) for nq <= cpu_attention_decode_max_rows;
// both only without a requested split (num_splits <= 1).
//
// Algorithm: a group's keys are cut into chunks of cpu_attention_decode_chunk
// keys at fixed positions (multiples of the chunk from key 0, whatever the
// batch, the thread count or the other groups), and the (group, chunk) work
// items run in parallel (OpenMP), so one long sequence uses every thread.
// Per key tile of cpu_attention_key_tile keys of a chunk:
// - scores q.k: float32 FMA per lane over d for 4 keys at once and up to 4
//   rows (K read in place; bfloat16 and float16 widened exactly in registers:
//   bfloat16 as even and odd elements of 32-bit words, q stored in the same
//   order; fp8 through a widened copy), then one transpose-and-add reduction
//   of the 4 keys' lane sums, then the columns past the last whole vector
//   added in order;
// - then the tiled path's own per-tile steps (attention_tile-inl.h:
//   FinishScores, OnlineRow), so scores, weights, the online softmax and the
//   special-value rows follow exactly the same semantics;
// - O = a O + P V with V read in place and widened in registers (bfloat16
//   accumulators in the same even/odd order, put back in order at the end).
// A chunk whose O comes out non-finite (a NaN or inf in V, or overflow) is
// recomputed with the tiled path's treatment of non-finite V (masked keys
// skipped, never 0 * inf), so special values follow the tiled path exactly.
// The chunks' states (m, S, T, O) are merged in chunk order (T6, as
// theory::entropy_merge; O scaled like S), a sink being the state before the
// first chunk. Adaptive temperature takes two passes, as in the tiled path.
//
// Accuracy: as kernels/cpu/attention.hpp states for the tiled path; only the
// order of the d-term float32 dot product differs (lane partial sums, then a
// tree), which has the same bound gamma_d sum_c |q_c k_c|, and the online
// softmax restarts at each chunk and is merged once per chunk (one more
// rescale of S, T and O per chunk: O(u) each, nk / chunk of them, inside the
// O((nk + spread) u) term). Deterministic: the chunking and the merge order
// depend only on the key count, so a row's bits do not depend on the batch,
// the other groups or OMP_NUM_THREADS.
//
// Memory: per thread, scratch of about rows * (d + dv + 2 * tile) + tile * (d + dv)
// floats, kept between calls; per call, the groups' merged states (rows * dv
// floats per group) and one wave of at most a few hundred chunk results.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/attention.hpp"

namespace sa::kernels {

// Query rows (query heads of the group x queries of the sequence) one group takes.
inline constexpr std::int64_t cpu_attention_decode_max_rows = 64;
// Keys per chunk (a multiple of cpu_attention_key_tile): the unit of the
// split over threads and of the merge.
inline constexpr std::int64_t cpu_attention_decode_chunk = 2048;

// Groups g in [0, ngroups): heads[starts[g] .. starts[g + 1]) are the
// single-head calls of the query heads sharing one key/value head of one
// sequence. They must agree in every field except q, out, lse, entropy, beta,
// alibi_slope and sink, have nheads * nq <= cpu_attention_decode_max_rows and
// num_splits <= 1 (the path does not take the caller's split). Parallel over
// (group, chunk) with OpenMP; call it from outside a parallel region.
// Errors: SA_INTERNAL_ERROR (allocation).
sa_status cpu_attention_decode(const AttentionHeadArgs* heads, const std::size_t* starts,
                               std::int64_t ngroups);

// One group: cpu_attention_decode on heads[0 .. nheads).
sa_status cpu_attention_decode_group(const AttentionHeadArgs* heads, std::int64_t nheads);

}  // namespace sa::kernels
