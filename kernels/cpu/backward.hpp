// The CPU kernel's backward operations (interface v2): kernels/cpu/backward.cpp.
//
//   softmax_backward, log_softmax_backward: rows in parallel (OpenMP), the row
//     sum <dy, y> (or sum dy) in double, dx in float32, one rounding to the
//     storage type; float32, bfloat16, float16.
//   attention_backward: FlashAttention's formulation in two deterministic
//     passes over 64-row query tiles and 64-key tiles: pass 1 (parallel over
//     query tiles) recomputes P = exp(s - lse) and dP and accumulates dQ; pass
//     2 (parallel over key tiles) recomputes them and accumulates dK and dV
//     over every query row of the key/value head's group. Each 64 x 64 block
//     is vector code per Highway target (backward_tile.hpp: S and dP as
//     register-blocked products, exp and tanh of Highway's math library). No
//     atomics, a fixed summation order whatever the thread count or the
//     batch: deterministic and batch invariant. float32 and bfloat16 (float32 arithmetic), every
//     attention_v2 feature (GQA, varlen, strides, causal both alignments,
//     window, softcap, ALiBi, key padding, sinks with d(sink)); no adaptive
//     temperature, no fp8.
#pragma once

#include "softmax_audit/kernel.h"

namespace sa::kernels {

sa_status cpu_softmax_backward(void* ctx, sa_dtype t, const sa_rows* shape, const void* y,
                               const void* dy, void* dx);
sa_status cpu_log_softmax_backward(void* ctx, sa_dtype t, const sa_rows* shape, const void* y,
                                   const void* dy, void* dx);
sa_status cpu_attention_backward(void* ctx, const sa_attention_backward_args* args);
// Text of the last error of these functions on this thread, or NULL.
const char* cpu_backward_last_error();
// cpu_capabilities() with the backward operations' element types added.
const sa_capabilities* cpu_capabilities_with_backward();

}  // namespace sa::kernels
