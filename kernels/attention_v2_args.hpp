// sa_attention_v2_args from a caller built against any interface-2 header.
// One built before seqused_k and the paged fields were appended (kernel.h)
// passes struct_size = SA_ATTENTION_V2_ARGS_V2_0_SIZE, one built before the
// block scales SA_ATTENTION_V2_ARGS_V2_1_SIZE: the fields past its size are
// then absent, which means NULL and 0 (no used lengths, contiguous K and V,
// no block scales).
#pragma once

#include <cstring>

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
  std::memcpy(&tmp, a, a->struct_size);
  return &tmp;
}

}  // namespace sa::kernels
