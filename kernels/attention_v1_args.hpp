// Interface v1 attention (sa_attention_args) as the interface v2 call it is a
// special case of: one sequence, one head, causal bottom-right, the key mask
// as the key padding mask, no window, softcap, ALiBi, sinks or descales. A
// kernel with both entries can implement its v1 slot as
//   return my_attention_v2(ctx, &v2_args_of(*args));
// (the naive and CUDA kernels do). Pointers are passed through unchanged,
// so the memory space is the caller's. One difference of meaning: v1's beta
// is 1 on every row without the adaptive temperature, a NaN row included,
// where attention_v2 gives a NaN row NaN outputs; a forwarder passes beta
// only with the adaptive temperature and writes the 1s itself otherwise.
#pragma once

#include "softmax_audit/kernel.h"

namespace sa::kernels {

inline sa_attention_v2_args v2_args_of(const sa_attention_args& a) {
  sa_attention_v2_args v{};
  v.struct_size = sizeof v;
  v.qkv_dtype = v.out_dtype = a.dtype;
  v.batch = v.heads_q = v.heads_kv = 1;
  v.seqlen_q = a.nq;
  v.seqlen_k = a.nk;
  v.head_dim = a.d;
  v.head_dim_v = a.dv;
  // One head: the head stride is the head dim; rows are v1's rows.
  v.q = {a.q, a.nq * a.q_stride, a.d, a.q_stride};
  v.k = {a.k, a.nk * a.k_stride, a.d, a.k_stride};
  v.v = {a.v, a.nk * a.v_stride, a.dv, a.v_stride};
  v.out = a.out;
  v.out_stride_b = a.nq * a.out_stride;
  v.out_stride_h = a.dv;
  v.out_stride_s = a.out_stride;
  v.lse = a.lse;
  v.entropy = a.entropy;
  v.beta = a.beta;
  v.key_padding_mask = a.key_mask;
  v.scale = a.scale;
  v.causal = a.causal;
  v.alignment = SA_ALIGN_BOTTOM_RIGHT;
  v.window_left = v.window_right = -1;
  v.softcap = 0;
  v.alibi_slopes = nullptr;
  v.sinks = nullptr;
  v.q_descale = v.k_descale = v.v_descale = 1.0f;
  v.adaptive = a.adaptive;
  v.num_splits = a.num_splits;
  return v;
}

}  // namespace sa::kernels
