// The naive kernel's batched attention (interface v2, every feature): one
// query row at a time, scores in float32, two passes (max, then sum and
// weights), float32 accumulation of P V, one rounding to the output type.
// It follows kernel.h's semantics step by step and is written to be read, not
// to be fast: the plain implementation a tile-based kernel is compared with.
#pragma once

#include <string>
#include <vector>

#include "core/attention_case.hpp"
#include "softmax_audit/kernel.h"

namespace sa::kernels {

// The kernel's entry (sa_kernel.attention_v2 of the naive kernel).
sa_status naive_attention_v2(void* ctx, const sa_attention_v2_args* args);

// The naive kernel's last_error text (this thread's), shared by its operations.
std::string& naive_last_error();

// Capabilities of the naive kernel's attention_v2.
const sa_capabilities* naive_capabilities();

namespace same_dtype {
// FlashAttention's baseline for its "2x the naive implementation's error"
// rule, on a whole v2 case: the same algorithm with the scores, the weights
// and the output each rounded to the output type (PyTorch's attention_ref with
// upcast=False: bfloat16 scores, bfloat16 softmax, bfloat16 P V with float32
// accumulation). For float32 it is the naive kernel's own arithmetic.
// Returns out (packed BSHD, total_q x heads_q x dv) as floats.
std::vector<float> attention_v2(const AttentionCase& c);
}  // namespace same_dtype

}  // namespace sa::kernels
