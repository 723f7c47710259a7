// The naive kernel: a plain scalar implementation of the whole C ABI
// (include/softmax_audit/kernel.h), written to be obviously right rather than
// fast. It is the suite's "known good" kernel: it must pass every property
// (tests/properties), and the mutants in tests/mutants are broken copies of it.
//
// Arithmetic: float32 throughout, for every storage type (bfloat16 and float16
// inputs are widened exactly, outputs rounded to nearest even once at the end,
// float16 with its subnormals), i.e. "bfloat16/float16 with float32
// accumulation". Attention: float32 and bfloat16. Softmax subtracts the row maximum
// (theory.md T7's shifted form) and sums sequentially; entropy uses the
// streamed (m, S, T) state of theory.md T6; adaptive softmax implements T5
// with the Shannon entropy; attention computes scale*q.k in float32, applies
// the key/causal masks (bottom-right causal alignment), and, when num_splits
// > 1, really splits the keys and merges the partial results with the same
// merge it exports as merge_attention_states.
// Special values follow the header exactly (masks, fully masked rows, +inf
// shares, NaN rows, n = 1).
//
// Accuracy (float32 outputs): exp and log are glibc's (< 1 ulp); the row sum
// has the recursive-summation error <= (n-1) u, typically ~sqrt(n) u.
#pragma once

#include "softmax_audit/kernel.h"

namespace sa::kernels {

const sa_kernel* naive_kernel();

}  // namespace sa::kernels
