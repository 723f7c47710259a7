#include "kernels/cuda/plan.hpp"

#include <algorithm>
#include <cmath>

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
  p.workspace_bytes = static_cast<std::size_t>(p.work_items) * 4 * sizeof(float) +
                      static_cast<std::size_t>(rows) * 5 * sizeof(float);
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

AttentionPlan plan_attention(const sa_attention_args& a) {
  AttentionPlan p;
  const std::int64_t tiles = (a.nk + kAttnKeyTile - 1) / kAttnKeyTile;
  p.splits = std::clamp<std::int64_t>(a.num_splits, 1, std::max<std::int64_t>(tiles, 1));
  p.tiles_per_split = (tiles + p.splits - 1) / p.splits;
  p.query_blocks = (a.nq + kAttnQueriesPerBlock - 1) / kAttnQueriesPerBlock;
  p.work_items = p.query_blocks * p.splits;
  p.threads = 32 * kAttnWarps;
  p.grid = grid_for(p.work_items, 1);
  p.key_stride_smem = a.d | 1;  // odd: lane j reads row j, banks (j * stride + k) % 32 distinct
  p.shared_bytes =
      static_cast<std::size_t>(kAttnQueriesPerBlock * a.d + kAttnKeyTile * p.key_stride_smem +
                               kAttnKeyTile * a.dv) *
      sizeof(float);
  // One tile-state merge per key tile of the split (the first merges into the
  // identity: no rescale), then splits - 1 sequential merges across splits.
  p.max_rescales = std::max<std::int64_t>(p.tiles_per_split - 1, 0) + (p.splits - 1);
  // per split and query: state (m, S, T) + dv accumulators; per query: M, beta, H.
  p.workspace_bytes = static_cast<std::size_t>(p.splits) * static_cast<std::size_t>(a.nq) *
                          static_cast<std::size_t>(3 + a.dv) * sizeof(float) +
                      static_cast<std::size_t>(a.nq) * 3 * sizeof(float);
  return p;
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
