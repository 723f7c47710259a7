// sa_attention_v2_args from a caller built against any interface-2 header.
// One built before seqused_k and the paged fields were appended (kernel.h)
// passes struct_size = SA_ATTENTION_V2_ARGS_V2_0_SIZE, one built before the
// masks SA_ATTENTION_V2_ARGS_V2_1_SIZE, one built before the block scales
// SA_ATTENTION_V2_ARGS_V2_2_SIZE, one built before the scale type and the
// per-head descales SA_ATTENTION_V2_ARGS_V2_3_SIZE: the fields past its size are then absent,
// which means NULL and 0 (no used lengths, contiguous K and V, no attn_mask,
// attn_bias, block or tree mask, no block scales).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "softmax_audit/kernel.h"

namespace sa::kernels {

// `a` itself when it holds every field of this header's struct; else a copy
// in `tmp` with the appended fields zeroed; nullptr when `a` is NULL or
// shorter than interface 2's first sa_attention_v2_args.
inline const sa_attention_v2_args* complete_v2_args(const sa_attention_v2_args* a,
                                                    sa_attention_v2_args& tmp) {
  if (a == nullptr || a->struct_size < SA_ATTENTION_V2_ARGS_V2_0_SIZE) return nullptr;
  if (a->struct_size >= sizeof(sa_attention_v2_args)) return a;
  tmp = sa_attention_v2_args{};
  // The fields of the caller's header: up to the last boundary its size reaches.
  const std::size_t n =
      a->struct_size >= SA_ATTENTION_V2_ARGS_V2_3_SIZE   ? SA_ATTENTION_V2_ARGS_V2_3_SIZE
      : a->struct_size >= SA_ATTENTION_V2_ARGS_V2_2_SIZE ? SA_ATTENTION_V2_ARGS_V2_2_SIZE
      : a->struct_size >= SA_ATTENTION_V2_ARGS_V2_1_SIZE ? SA_ATTENTION_V2_ARGS_V2_1_SIZE
                                                         : SA_ATTENTION_V2_ARGS_V2_0_SIZE;
  std::memcpy(&tmp, a, n);
  return &tmp;
}

// Elements from a mask tensor's data to the end of its last addressed
// element (kernel.h's extents: batch, heads_q, eq, ek), 0 when unused or
// empty; -1 when a stride is negative or the reach passes 2^40.
inline std::int64_t mask_reach(const sa_attention_v2_args& a, const sa_mask_tensor& m,
                               std::int64_t eq, std::int64_t ek) {
  if (!m.data || a.batch < 1 || a.heads_q < 1 || eq < 1 || ek < 1) return 0;
  const std::int64_t st[4] = {m.stride_b, m.stride_h, m.stride_q, m.stride_k};
  const std::int64_t ex[4] = {a.batch, a.heads_q, eq, ek};
  std::int64_t last = 0;
  for (int x = 0; x < 4; ++x) {
    if (st[x] < 0 || st[x] > (std::int64_t{1} << 40) || ex[x] > (std::int64_t{1} << 30)) return -1;
    last += (ex[x] - 1) * st[x];
    if (last > (std::int64_t{1} << 40)) return -1;
  }
  return last + 1;
}

// The four mask tensors' reaches in elements, in the order attn_mask,
// attn_bias, block_mask, tree_mask (element sizes 1, 4, 1, 1).
inline void mask_reaches(const sa_attention_v2_args& a, std::int64_t out[4]) {
  const std::int64_t q = a.seqlen_q, k = a.seqlen_k;
  const std::int64_t bq = a.block_q >= 1 ? (q + a.block_q - 1) / a.block_q : 0,
                     bk = a.block_k >= 1 ? (k + a.block_k - 1) / a.block_k : 0;
  out[0] = mask_reach(a, a.attn_mask, q, k);
  out[1] = mask_reach(a, a.attn_bias, q, k);
  out[2] = mask_reach(a, a.block_mask, bq, bk);
  out[3] = mask_reach(a, a.tree_mask, q, q);
}

// The quantised inputs' arguments (kernel.h: fp4 e2m1 and int8, the block
// scales and their scale_dtype): "" when they are well formed, else what is
// wrong, naming the field. `a` is complete (complete_v2_args).
inline std::string quant_args_error(const sa_attention_v2_args& a) {
  std::int32_t qt, st;  // read as integers: a value outside the enum is not UB here
  std::memcpy(&qt, &a.qkv_dtype, 4);
  std::memcpy(&st, &a.scale_dtype, 4);
  const bool quantised =
      qt == SA_FP8_E4M3 || qt == SA_FP8_E5M2 || qt == SA_FP4_E2M1 || qt == SA_INT8;
  if (qt == SA_FP4_E2M1) {
    // Two elements per byte: every head row must start on a byte.
    const struct {
      const char* name;
      std::int64_t v;
    } even[] = {
        {"head_dim", a.head_dim},     {"head_dim_v", a.head_dim_v}, {"q.stride_b", a.q.stride_b},
        {"q.stride_h", a.q.stride_h}, {"q.stride_s", a.q.stride_s}, {"k.stride_b", a.k.stride_b},
        {"k.stride_h", a.k.stride_h}, {"k.stride_s", a.k.stride_s}, {"v.stride_b", a.v.stride_b},
        {"v.stride_h", a.v.stride_h}, {"v.stride_s", a.v.stride_s}};
    for (const auto& e : even)
      if (e.v % 2 != 0)
        return std::string("fp4 e2m1 inputs (two per byte) need even strides and head dims: ") +
               e.name + " = " + std::to_string(e.v);
  }
  if (a.scale_block < 0) return "scale_block must be >= 0 (0: no block scales)";
  if (a.scale_block == 0) return {};
  if (!quantised)
    return "block scales (scale_block > 0) need quantised inputs (fp8, fp4 e2m1, int8), not "
           "qkv_dtype " +
           std::to_string(qt);
  if (st != 0 && st != SA_FP8_E4M3 && st != SA_F32)
    return "scale_dtype " + std::to_string(st) + "; expected 0 (E8M0), SA_FP8_E4M3 or SA_F32";
  if (!a.q_scale.data || !a.k_scale.data || !a.v_scale.data)
    return "block scales need q_scale, k_scale and v_scale";
  return {};
}

}  // namespace sa::kernels
