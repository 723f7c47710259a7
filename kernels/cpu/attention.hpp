// Production CPU single-head attention forward (float32 and bfloat16 storage
// for the ABI's `attention`; float16 and fp8 inputs and float16 outputs for
// interface v2 through cpu_attention_head; float32 accumulation) behind the
// ABI's `attention` and `merge_attention_states` pointers, and per (sequence,
// head) behind `attention_v2` (kernels/cpu/attention_v2.cpp).
//
// Calls of the ABI's `attention` with nq <= cpu_attention_decode_max_rows and
// num_splits <= 1 take the few-query path instead (attention_decode.hpp: K and
// V read in place, keys split over the threads in fixed chunks, the same
// per-tile steps and accuracy); everything below describes the tiled path,
// which every other call (and cpu_attention_head) takes.
//
// Algorithm (flash-style; the nq x nk coefficient matrix is never formed):
// - K is packed once per call into float tiles of cpu_attention_key_tile keys
//   (transposed, d x tile), V into float tiles (tile x dv rounded up to the
//   vector width); bfloat16, float16 and fp8 (table lookup) are widened exactly.
// - Queries are processed in blocks of up to cpu_attention_query_block rows; per key
//   tile a block computes its logits (Highway broadcast-FMA micro-kernel,
//   float32 accumulation over d), applies scale (times beta), then softcap
//   c tanh(s/c) and ALiBi -slope |i + off - j| (Highway Tanh, within 4 ulp;
//   with either, beta multiplies the finished score), the window / causal
//   bounds i + off - window_left <= j <= i + off + window_right (causal:
//   window_right = 0, off = nk - nq), the key mask and the tile tail (tiles
//   outside every row's window are skipped), then updates the
//   per-row online-softmax state (m running max, S = sum exp(s - m),
//   T = sum exp(s - m)(s - m), O = sum exp(s - m) v) against the running max,
//   rescaling S, T and O by exp(m_old - m_new). A sink starts key part 0's
//   state at m = beta sink, S = 1, T = 0, O = 0: an item with value 0 that
//   joins the max, S, T and the lse. Tiles that are -inf for a row
//   (masked) leave that row untouched: no -inf - -inf is ever evaluated.
// - entropy = log S - T / S (theory.md T6) of the logits at beta = 1.
// - adaptive: pass 1 streams (m, S, T) only, gives H and beta(H) (T5);
//   pass 2 is the ordinary pass with logits scale * beta * q.k.
// - num_splits > 1: keys [0, nk) are cut into num_splits contiguous parts
//   [p nk / ns, (p+1) nk / ns); each part yields a normalised output and its
//   lse, merged with merge_attention_partials (empty / masked parts are the
//   identity); the parts' (m, S, T) are merged with theory::entropy_merge.
// - Rows containing NaN or +inf logits (or a NaN / +inf sink) are finished by an exact scalar path
//   with the header's semantics (NaN row: all outputs NaN, beta NaN when
//   adaptive else 1; k logits at +inf: out = mean of their v, lse +inf,
//   entropy log k). Keys whose logit is -inf (masked) never touch v, so a NaN
//   or inf in a masked key's v does not leak into the output.
// - Parallel over (query block, split) work items with OpenMP when built with
//   it (OMP_NUM_THREADS), else single-threaded.
//
// Accuracy (derivation in tests/cpu_attention/attention_test.cpp): logits
// carry the error of a length-d float32 dot product, gamma_d sum|q_c k_c|
// scaled, plus one rounding for the scale; the softmax-weighted average adds a
// relative error of O((nk + spread) u) of max|v| in the worst case (u = 2^-24,
// Highway's Exp is within 1 ulp); bfloat16 outputs are then rounded once
// (RNE). Range: float32 logits; an overflowing scale * q.k becomes +inf.
//
// Memory: one float copy of K and V per call (nk (d + dv) 4 bytes, padded) and,
// when num_splits > 1, num_splits partial results of nq x dv floats.
#pragma once

#include <cstdint>

#include "softmax_audit/kernel.h"

namespace sa::kernels {

// Keys per tile of the tiled loop (tests use it to put masks and sizes on and
// off tile boundaries), and the query block: cpu_attention_query_block rows
// share each K/V tile while it is in cache; when that leaves fewer than two
// work items per thread, blocks of cpu_attention_small_query_block rows are used.
inline constexpr std::int64_t cpu_attention_key_tile = 64;
inline constexpr std::int64_t cpu_attention_query_block = 64;
inline constexpr std::int64_t cpu_attention_small_query_block = 16;
// num_splits is clamped to [1, min(nk, cpu_attention_max_splits)] (the ABI lets a
// kernel ignore it; the clamp bounds the partial-result memory).
inline constexpr std::int64_t cpu_attention_max_splits = 256;

// The ABI's `attention` entry. ctx is unused. Errors: SA_INVALID_ARGUMENT
// (null args or pointer, sizes < 1, strides below the row length, non-finite
// scale, negative num_splits), SA_UNSUPPORTED (dtype not SA_F32/SA_BF16),
// SA_INTERNAL_ERROR (allocation); the message names the field and is
// available from cpu_attention_last_error() on the calling thread.
sa_status cpu_attention(void* ctx, const sa_attention_args* args);

// One (sequence, head) of interface v2 (kernels/cpu/attention_v2.cpp calls it
// per pair): the single-head call with every v2 feature, in kernel.h's order
// (score = scale * q.k, softcap, ALiBi, masks; sink). Element types: q, k, v
// in qkv_dtype (F32, BF16, F16, FP8_E4M3, FP8_E5M2; read exactly as float),
// out in out_dtype (F32, BF16, F16; rounded once, RNE). Query i's diagonal key
// is i + diag_offset; key j is visible iff key_mask[j] != 0 (mask NULL: all),
// j >= i + diag_offset - window_left (window_left >= 0) and
// j <= i + diag_offset + window_right (window_right >= 0). `scale` already
// holds the fp8 q/k descales, v_descale multiplies the output. The caller has
// validated every field; the v1 entry is this call with diag_offset = nk - nq,
// window_right = causal ? 0 : -1 and nothing else.
struct AttentionHeadArgs {
  sa_dtype qkv_dtype = SA_F32, out_dtype = SA_F32;
  std::int64_t nq = 0, nk = 0, d = 0, dv = 0;
  const void* q = nullptr;
  std::int64_t q_stride = 0;
  const void* k = nullptr;
  std::int64_t k_stride = 0;
  const void* v = nullptr;
  std::int64_t v_stride = 0;
  void* out = nullptr;
  std::int64_t out_stride = 0;
  float* lse = nullptr;
  float* entropy = nullptr;
  float* beta = nullptr;
  const std::uint8_t* key_mask = nullptr;
  double scale = 1.0;
  std::int64_t diag_offset = 0;
  std::int64_t window_left = -1, window_right = -1;  // -1: unbounded
  double softcap = 0.0;                              // 0: none
  bool has_alibi = false;
  float alibi_slope = 0.0f;
  bool has_sink = false;
  float sink = 0.0f;
  float v_descale = 1.0f;
  bool adaptive = false;
  std::int64_t num_splits = 0;
  // Interface 2's masks for this (sequence, head), both optional: query i
  // sees key j only if elem_mask[i * elem_mask_stride + j] != 0 (the
  // attn_mask, block and tree masks combined by attention_v2.cpp), and
  // bias[i * bias_stride_q + j * bias_stride_k] is added after ALiBi.
  const std::uint8_t* elem_mask = nullptr;
  std::int64_t elem_mask_stride = 0;
  const float* bias = nullptr;
  std::int64_t bias_stride_q = 0, bias_stride_k = 0;
  // Paged K and V, read in place (the few-query path only): when pages is not
  // NULL, key j's row is at k + (pages[j / page_size] * k_page_stride +
  // (j % page_size) * k_stride) elements (v alike); k and v then point at the
  // pools with the head's offset applied.
  const std::int32_t* pages = nullptr;
  std::int64_t page_size = 0, k_page_stride = 0, v_page_stride = 0;
};
// Errors as cpu_attention (SA_INTERNAL_ERROR only: the arguments are trusted).
sa_status cpu_attention_head(const AttentionHeadArgs& args);

// The ABI's `merge_attention_states`: out = exp(lse_a - L) o_a + exp(lse_b - L) o_b,
// L = log(exp lse_a + exp lse_b), computed in double and rounded once.
// lse = -inf: the part is the identity; both -inf: out 0, lse -inf; any NaN
// lse: the row is NaN; both +inf: equal weights (exact when the two parts hold
// equally many +inf logits; the ABI carries no count). out/out_lse may alias
// a/lse_a (or b/lse_b).
sa_status merge_attention_partials(void* ctx, std::int64_t rows, std::int64_t dv, const float* o_a,
                                   const float* lse_a, const float* o_b, const float* lse_b,
                                   float* out, float* out_lse);

// Tuning / test knob, process-wide: forces the query block to `rows` (a
// multiple of 4 in [4, cpu_attention_query_block]); 0 restores the automatic
// choice. Returns false (and changes nothing) for any other value.
bool cpu_attention_set_query_block(std::int64_t rows);

// Text of the last error reported by cpu_attention or merge_attention_partials
// on this thread, or nullptr if none has failed yet (not cleared on success).
const char* cpu_attention_last_error();

}  // namespace sa::kernels
