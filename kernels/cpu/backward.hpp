// The CPU kernel's backward operations (interface v2): kernels/cpu/backward.cpp.
//
//   softmax_backward, log_softmax_backward: rows in parallel (OpenMP), the row
//     sum <dy, y> (or sum dy) in double, dx in float32, one rounding to the
//     storage type; float32, bfloat16, float16.
//   attention_backward: FlashAttention's formulation in one pass over units
//     (sequence, key/value head, 64-key tile), in parallel: for every query
//     head of the group and every 64-row query block that sees the tile, P =
//     exp(s - lse), dP and dS are recomputed; dK and dV accumulate in the
//     unit, and the block's dQ share dS K goes to the unit's slot. Units run
//     in waves; after each wave every query row adds its slots in key-tile
//     order (deterministic without atomics: the same bits whatever the thread
//     count, the wave size or the batch around a sequence). Five block
//     products, each Highway vector code per target (backward_tile.hpp).
//     float32 and bfloat16 (float32 arithmetic), every attention_v2 feature
//     (GQA, varlen, strides, causal both alignments, window, softcap, ALiBi,
//     key padding, sinks with d(sink)); no adaptive temperature, no fp8.
#pragma once

#include <cstdint>

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

namespace detail {
// Test hook: the bytes of dQ slots attention_backward fills per wave (0: the
// default, 16 MiB; a wave holds at least two slots per thread). Small values
// force many waves; the result must not change by a bit.
void set_backward_slot_budget(std::int64_t bytes);
}  // namespace detail

}  // namespace sa::kernels
