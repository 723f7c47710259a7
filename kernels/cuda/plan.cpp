#include "kernels/cuda/plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace sa::kernels::cuda {

const char* name_of(RowStrategy s) {
  switch (s) {
    case RowStrategy::warp:
      return "warp-per-row";
    case RowStrategy::block:
      return "block-per-row";
    case RowStrategy::split:
      return "multi-block split";
  }
  return "?";
}

std::int64_t grid_for(std::int64_t work, std::int64_t per_block) {
  const std::int64_t blocks = (work + per_block - 1) / per_block;
  return std::clamp<std::int64_t>(blocks, 1, kMaxGridX);
}

namespace {
std::int64_t ceil_log2(std::int64_t x) {
  std::int64_t l = 0;
  while ((std::int64_t{1} << l) < x) ++l;
  return l;
}
}  // namespace

RowPlan plan_rows(std::int64_t rows, std::int64_t n) {
  RowPlan p;
  if (n <= kWarpMaxN) {
    p.strategy = RowStrategy::warp;
    p.work_items = rows;
    p.threads = 32 * kWarpRowsPerBlock;
    p.grid = grid_for(rows, kWarpRowsPerBlock);
    return p;
  }
  if (n <= kBlockMaxN) {
    p.strategy = RowStrategy::block;
    p.work_items = rows;
    p.threads = kRowThreads;
    p.grid = grid_for(rows, 1);
    return p;
  }
  p.strategy = RowStrategy::split;
  p.chunks_per_row = (n + kChunk - 1) / kChunk;
  p.work_items = rows * p.chunks_per_row;
  p.threads = kRowThreads;
  p.grid = grid_for(p.work_items, 1);
  // Row merge: thread t merges chunks t, t + kRowThreads, ... in order (each
  // merge can rescale a term once), then a butterfly over the 32 lanes of a
  // warp (5 levels), then the warps' results in order (kRowThreads/32 - 1).
  // Inside a chunk the max is found first: no rescale. Each rescale needs a
  // strictly larger max, so there are also at most n - 1.
  const std::int64_t per_thread = (p.chunks_per_row + kRowThreads - 1) / kRowThreads;
  p.max_rescales =
      std::min<std::int64_t>(per_thread - 1 + ceil_log2(32) + (kRowThreads / 32 - 1), n - 1);
  // chunk states (m, S, T) + chunk sums (adaptive) per work item; per row: state,
  // beta, adaptive sum.
  // One-pass path (rows.cu, fused_chunks_kernel): a chunk counter per row and
  // one ticket counter, after the rest (8-byte aligned: up to 7 bytes more).
  p.workspace_bytes = static_cast<std::size_t>(p.work_items) * 4 * sizeof(float) +
                      static_cast<std::size_t>(rows) * 5 * sizeof(float) +
                      (static_cast<std::size_t>(rows) + 2) * sizeof(unsigned long long);
  return p;
}

namespace {
std::string field(const char* op, const std::string& what) { return std::string(op) + ": " + what; }
bool valid_dtype(int d) { return d == SA_F32 || d == SA_BF16; }
}  // namespace

std::string validate_rows(const char* op, int dtype, const sa_rows* s, const void* in,
                          const void* out, const char* out_name, bool out_is_rows) {
  if (!valid_dtype(dtype))
    return field(op, "dtype = " + std::to_string(dtype) + "; expected SA_F32 (1) or SA_BF16 (2)");
  if (s == nullptr) return field(op, "shape is NULL; expected a pointer to sa_rows");
  if (s->rows < 0) return field(op, "shape->rows = " + std::to_string(s->rows) + "; expected >= 0");
  if (s->n < 1) return field(op, "shape->n = " + std::to_string(s->n) + "; expected >= 1");
  if (s->in_stride < s->n)
    return field(op, "shape->in_stride = " + std::to_string(s->in_stride) +
                         "; expected >= n = " + std::to_string(s->n));
  if (out_is_rows && s->out_stride < s->n)
    return field(op, "shape->out_stride = " + std::to_string(s->out_stride) +
                         "; expected >= n = " + std::to_string(s->n));
  if (!(s->temperature > 0.0) || !std::isfinite(s->temperature))
    return field(op, "shape->temperature = " + std::to_string(s->temperature) +
                         "; expected a finite value > 0");
  // Overflow of the element count (rows * stride must fit in int64).
  if (s->rows > 0 && s->in_stride > INT64_MAX / s->rows)
    return field(op, "shape->rows * in_stride overflows a 64-bit element count");
  if (out_is_rows && s->rows > 0 && s->out_stride > INT64_MAX / s->rows)
    return field(op, "shape->rows * out_stride overflows a 64-bit element count");
  if (s->rows > 0 && in == nullptr) return field(op, "in is NULL; expected a device pointer");
  if (s->rows > 0 && out == nullptr)
    return field(op, std::string(out_name) + " is NULL; expected a device pointer");
  return {};
}

std::string validate_attention(const sa_attention_args* a) {
  const char* op = "attention";
  if (a == nullptr) return field(op, "args is NULL; expected a pointer to sa_attention_args");
  if (!valid_dtype(a->dtype))
    return field(
        op, "args->dtype = " + std::to_string(a->dtype) + "; expected SA_F32 (1) or SA_BF16 (2)");
  if (a->nq < 1) return field(op, "args->nq = " + std::to_string(a->nq) + "; expected >= 1");
  if (a->nk < 1) return field(op, "args->nk = " + std::to_string(a->nk) + "; expected >= 1");
  if (a->d < 1) return field(op, "args->d = " + std::to_string(a->d) + "; expected >= 1");
  if (a->dv < 1) return field(op, "args->dv = " + std::to_string(a->dv) + "; expected >= 1");
  if (a->q_stride < a->d)
    return field(op, "args->q_stride = " + std::to_string(a->q_stride) +
                         "; expected >= d = " + std::to_string(a->d));
  if (a->k_stride < a->d)
    return field(op, "args->k_stride = " + std::to_string(a->k_stride) +
                         "; expected >= d = " + std::to_string(a->d));
  if (a->v_stride < a->dv)
    return field(op, "args->v_stride = " + std::to_string(a->v_stride) +
                         "; expected >= dv = " + std::to_string(a->dv));
  if (a->out_stride < a->dv)
    return field(op, "args->out_stride = " + std::to_string(a->out_stride) +
                         "; expected >= dv = " + std::to_string(a->dv));
  if (!std::isfinite(a->scale))
    return field(op, "args->scale = " + std::to_string(a->scale) + "; expected a finite value");
  if (a->num_splits < 0)
    return field(op, "args->num_splits = " + std::to_string(a->num_splits) +
                         "; expected >= 0 (0 or 1: no split)");
  if (a->q == nullptr) return field(op, "args->q is NULL; expected a device pointer");
  if (a->k == nullptr) return field(op, "args->k is NULL; expected a device pointer");
  if (a->v == nullptr) return field(op, "args->v is NULL; expected a device pointer");
  if (a->out == nullptr) return field(op, "args->out is NULL; expected a device pointer");
  return {};
}

AttentionV2Plan plan_attention_v2(const sa_attention_v2_args& a, std::int64_t max_len_q) {
  AttentionV2Plan p;
  // FlashAttention-2's forward uses 128-key tiles for small heads and 64 above.
  p.key_tile = std::max(a.head_dim, a.head_dim_v) <= 64 ? kV2LargeTile : kV2SmallTile;
  // Odd: the eight threads of a row read keys g, g + 8, ... at one column, in
  // eight different banks.
  p.k_stride_smem = a.head_dim | 1;
  p.kv_floats = p.key_tile * std::max(p.k_stride_smem, a.head_dim_v);
  p.q_tiles = (max_len_q + kV2Rows - 1) / kV2Rows;
  p.work_items = a.batch * a.heads_q * p.q_tiles;
  p.grid = grid_for(p.work_items, 1);
  p.shared_bytes =
      static_cast<std::size_t>(kV2Rows * a.head_dim + p.kv_floats + kV2Rows * p.key_tile) *
          sizeof(float) +
      static_cast<std::size_t>(kV2Rows * p.key_tile);
  return p;
}

namespace {
bool known_dtype(int t) { return t >= SA_F32 && t <= SA_FP8_E5M2; }
bool is_fp8(int t) { return t == SA_FP8_E4M3 || t == SA_FP8_E5M2; }
std::string num(std::int64_t x) { return std::to_string(x); }
}  // namespace

std::string validate_attention_v2(const sa_attention_v2_args* a) {
  const char* op = "attention_v2";
  if (a == nullptr) return field(op, "args is NULL; expected a pointer to sa_attention_v2_args");
  if (a->struct_size < sizeof(sa_attention_v2_args))
    return field(op, "args->struct_size = " + num(a->struct_size) + "; expected >= " +
                         num(sizeof(sa_attention_v2_args)) + " (sizeof(sa_attention_v2_args))");
  // Enums are read as integers: a value outside them is an error, not UB.
  std::int32_t qkv, out, align;
  std::memcpy(&qkv, &a->qkv_dtype, sizeof qkv);
  std::memcpy(&out, &a->out_dtype, sizeof out);
  std::memcpy(&align, &a->alignment, sizeof align);
  if (!known_dtype(qkv))
    return field(op, "args->qkv_dtype = " + num(qkv) +
                         "; expected SA_F32 (1), SA_BF16 (2), SA_F16 (3), SA_FP8_E4M3 (4) or "
                         "SA_FP8_E5M2 (5)");
  if (!known_dtype(out) || is_fp8(out))
    return field(op, "args->out_dtype = " + num(out) +
                         "; expected SA_F32 (1), SA_BF16 (2) or SA_F16 (3) (fp8 is an input type "
                         "only)");
  if (a->batch < 0) return field(op, "args->batch = " + num(a->batch) + "; expected >= 0");
  if (a->heads_q < 1) return field(op, "args->heads_q = " + num(a->heads_q) + "; expected >= 1");
  if (a->heads_kv < 1 || a->heads_q % a->heads_kv != 0)
    return field(op, "args->heads_kv = " + num(a->heads_kv) +
                         "; expected >= 1 and dividing heads_q = " + num(a->heads_q));
  if (a->seqlen_q < 0 || a->seqlen_k < 0)
    return field(op, "args->seqlen_q = " + num(a->seqlen_q) + ", seqlen_k = " + num(a->seqlen_k) +
                         "; expected >= 0");
  if (a->head_dim < 1 || a->head_dim_v < 1)
    return field(op, "args->head_dim = " + num(a->head_dim) +
                         ", head_dim_v = " + num(a->head_dim_v) + "; expected >= 1");
  if ((a->cu_seqlens_q == nullptr) != (a->cu_seqlens_k == nullptr))
    return field(op,
                 "args->cu_seqlens_q and cu_seqlens_k: expected both set (varlen) or both NULL");
  const std::pair<const sa_tensor*, const char*> ts[] = {{&a->q, "q"}, {&a->k, "k"}, {&a->v, "v"}};
  for (auto [t, name] : ts) {
    if (t->data == nullptr)
      return field(op, std::string("args->") + name + ".data is NULL; expected a device pointer");
    if (t->stride_b < 0 || t->stride_h < 0 || t->stride_s < 0)
      return field(op, std::string("args->") + name + " strides (" + num(t->stride_b) + ", " +
                           num(t->stride_h) + ", " + num(t->stride_s) + "); expected >= 0");
  }
  if (a->out == nullptr) return field(op, "args->out is NULL; expected a device pointer");
  if (a->out_stride_b < 0 || a->out_stride_h < 0 || a->out_stride_s < 0)
    return field(op, "args->out strides (" + num(a->out_stride_b) + ", " + num(a->out_stride_h) +
                         ", " + num(a->out_stride_s) + "); expected >= 0");
  if (!std::isfinite(a->scale))
    return field(op, "args->scale = " + std::to_string(a->scale) + "; expected a finite value");
  if (align != SA_ALIGN_BOTTOM_RIGHT && align != SA_ALIGN_TOP_LEFT)
    return field(op, "args->alignment = " + num(align) +
                         "; expected SA_ALIGN_BOTTOM_RIGHT (0) or SA_ALIGN_TOP_LEFT (1)");
  if (a->window_left < -1 || a->window_right < -1)
    return field(op, "args->window_left = " + num(a->window_left) + ", window_right = " +
                         num(a->window_right) + "; expected >= -1 (-1: unbounded)");
  if (!(a->softcap >= 0.0) || !std::isfinite(a->softcap))
    return field(op, "args->softcap = " + std::to_string(a->softcap) +
                         "; expected a finite value >= 0 (0: none)");
  if (is_fp8(qkv) &&
      !(std::isfinite(a->q_descale) && std::isfinite(a->k_descale) && std::isfinite(a->v_descale)))
    return field(op, "args->q_descale, k_descale, v_descale: expected finite values");
  if (a->num_splits < 0)
    return field(op, "args->num_splits = " + num(a->num_splits) + "; expected >= 0");
  if (a->block_table != nullptr &&
      (a->page_size < 1 || a->num_pages < 1 || a->block_table_stride < 1))
    return field(op, "args->page_size = " + num(a->page_size) +
                         ", num_pages = " + num(a->num_pages) + ", block_table_stride = " +
                         num(a->block_table_stride) + "; expected >= 1 each with a block_table");
  if (a->block_mask.data && (a->block_q < 1 || a->block_k < 1))
    return field(op, "args->block_q = " + num(a->block_q) + ", block_k = " + num(a->block_k) +
                         "; expected >= 1 each with a block_mask");
  const std::pair<const char*, const sa_mask_tensor*> masks[] = {{"attn_mask", &a->attn_mask},
                                                                 {"attn_bias", &a->attn_bias},
                                                                 {"block_mask", &a->block_mask},
                                                                 {"tree_mask", &a->tree_mask}};
  for (const auto& [name, m] : masks)
    if (m->data && (m->stride_b < 0 || m->stride_h < 0 || m->stride_q < 0 || m->stride_k < 0))
      return field(op, std::string("args->") + name + " strides: expected >= 0");
  return {};
}

std::string validate_kv_cache(const std::int32_t* buffer, const std::int32_t* seqused,
                              const std::int32_t* table, std::int64_t batch,
                              std::int64_t table_stride, std::int64_t page_size,
                              std::int64_t num_pages) {
  const char* op = "attention_v2";
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t n = buffer[b], used = seqused ? seqused[b] : n;
    if (used < 0 || used > n)
      return field(op, "args->seqused_k[" + num(b) + "] = " + num(used) + "; expected 0.." +
                           num(n) + " (the sequence's key buffer)");
    if (!table) continue;
    if ((n + page_size - 1) / page_size > table_stride)
      return field(op, "args->block_table_stride = " + num(table_stride) + " is below the " +
                           num((n + page_size - 1) / page_size) + " pages of sequence " + num(b));
    for (std::int64_t g = 0; g < (used + page_size - 1) / page_size; ++g) {
      const std::int64_t id = table[b * table_stride + g];
      if (id < 0 || id >= num_pages)
        return field(op, "args->block_table[" + num(b) + "][" + num(g) + "] = " + num(id) +
                             "; expected 0.." + num(num_pages - 1));
    }
  }
  return {};
}

std::string unsupported_attention_v2(const sa_attention_v2_args& a) {
  const char* op = "attention_v2";
  if (a.head_dim > kV2MaxHead || a.head_dim_v > kV2MaxHead)
    return field(op, "head_dim = " + num(a.head_dim) + ", head_dim_v = " + num(a.head_dim_v) +
                         "; this kernel supports head dims <= " + num(kV2MaxHead));
  if (a.adaptive != 0)
    return field(op,
                 "adaptive temperature is not implemented by the CUDA kernel's attention "
                 "(SA_ATTN_ADAPTIVE is not declared)");
  return {};
}

std::string validate_cu_seqlens(const std::int32_t* cu_q, const std::int32_t* cu_k,
                                std::int64_t batch, std::int64_t seqlen_q, std::int64_t seqlen_k) {
  const char* op = "attention_v2";
  if (cu_q[0] != 0 || cu_k[0] != 0)
    return field(op, "args->cu_seqlens_q[0] = " + num(cu_q[0]) +
                         ", cu_seqlens_k[0] = " + num(cu_k[0]) + "; expected 0");
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t lq = std::int64_t{cu_q[b + 1]} - cu_q[b];
    const std::int64_t lk = std::int64_t{cu_k[b + 1]} - cu_k[b];
    if (lq < 0 || lk < 0)
      return field(op, "args->cu_seqlens_q/k decrease at sequence " + num(b) +
                           "; expected nondecreasing offsets");
    if (lq > seqlen_q || lk > seqlen_k)
      return field(op, "sequence " + num(b) + " has " + num(lq) + " queries and " + num(lk) +
                           " keys; expected <= seqlen_q = " + num(seqlen_q) +
                           " and seqlen_k = " + num(seqlen_k) + " (the largest lengths)");
  }
  return {};
}

const sa_capabilities* capabilities() {
  static const sa_capabilities caps = [] {
    sa_capabilities c{};
    c.struct_size = sizeof(sa_capabilities);
    // 0: the kernel-wide dtypes (float32, bfloat16) for every other operation.
    constexpr int kV2 = 8;  // bit index of SA_OP_ATTENTION_V2
    c.op_dtypes[kV2] =
        SA_DTYPE_F32 | SA_DTYPE_BF16 | SA_DTYPE_F16 | SA_DTYPE_FP8_E4M3 | SA_DTYPE_FP8_E5M2;
    c.op_out_dtypes[kV2] = SA_DTYPE_F32 | SA_DTYPE_BF16 | SA_DTYPE_F16;
    // Backward passes (backward.cu): softmax_backward (bit 9),
    // log_softmax_backward (10), attention_backward (11).
    for (int op : {9, 10, 11}) c.op_dtypes[op] = SA_DTYPE_F32 | SA_DTYPE_BF16 | SA_DTYPE_F16;
    c.attention_features = SA_ATTN_BATCHED | SA_ATTN_GQA | SA_ATTN_VARLEN | SA_ATTN_STRIDED |
                           SA_ATTN_CAUSAL | SA_ATTN_WINDOW | SA_ATTN_SOFTCAP | SA_ATTN_ALIBI |
                           SA_ATTN_SINKS | SA_ATTN_KEY_PADDING | SA_ATTN_LSE | SA_ATTN_ENTROPY |
                           SA_ATTN_UNEQUAL_HEAD_DIMS | SA_ATTN_PAGED_KV | SA_ATTN_SEQUSED_K |
                           SA_ATTN_BOOL_MASK | SA_ATTN_BIAS | SA_ATTN_BLOCK_MASK |
                           SA_ATTN_TREE_MASK | SA_ATTN_DESCALE_BH;
    c.max_head_dim = static_cast<std::int32_t>(kV2MaxHead);
    // Fixed reduction orders, no atomics (the backward included: dQ has its
    // own pass over key tiles): identical calls give identical bits.
    c.flags = SA_CAP_DETERMINISTIC;
    return c;
  }();
  return &caps;
}

std::string validate_merge_entropy(std::int64_t count, const void* a, const void* b,
                                   const void* out) {
  const char* op = "merge_entropy_states";
  if (count < 0) return field(op, "count = " + std::to_string(count) + "; expected >= 0");
  if (count > 0 && a == nullptr) return field(op, "a is NULL; expected a device pointer");
  if (count > 0 && b == nullptr) return field(op, "b is NULL; expected a device pointer");
  if (count > 0 && out == nullptr) return field(op, "out is NULL; expected a device pointer");
  return {};
}

std::string validate_merge_attention(std::int64_t rows, std::int64_t dv, const void* o_a,
                                     const void* lse_a, const void* o_b, const void* lse_b,
                                     const void* out, const void* out_lse) {
  const char* op = "merge_attention_states";
  if (rows < 0) return field(op, "rows = " + std::to_string(rows) + "; expected >= 0");
  if (dv < 1) return field(op, "dv = " + std::to_string(dv) + "; expected >= 1");
  if (rows > 0 && dv > INT64_MAX / rows)
    return field(op, "rows * dv overflows a 64-bit element count");
  if (rows == 0) return {};
  if (o_a == nullptr) return field(op, "o_a is NULL; expected a device pointer");
  if (lse_a == nullptr) return field(op, "lse_a is NULL; expected a device pointer");
  if (o_b == nullptr) return field(op, "o_b is NULL; expected a device pointer");
  if (lse_b == nullptr) return field(op, "lse_b is NULL; expected a device pointer");
  if (out == nullptr) return field(op, "out is NULL; expected a device pointer");
  if (out_lse == nullptr) return field(op, "out_lse is NULL; expected a device pointer");
  return {};
}

}  // namespace sa::kernels::cuda
