// The "naive same-dtype implementation": every arithmetic operation and every
// exp/log rounded to the storage type (for bfloat16: computed in float32 and
// rounded to bfloat16 after each operation, as PyTorch's bfloat16 CPU ops
// do). This is NOT a kernel the suite accepts as correct (bfloat16 sums stop
// growing near 256 similar terms); it is the baseline error that
// FlashAttention's ("<= 2x the naive low-precision error") and PyTorch's
// ("fudge factor 5 over the naive same-dtype error") tolerance rules measure
// against (theory.md T8). Only finite inputs are meaningful here.
#pragma once

#include <span>
#include <vector>

#include "core/dtype.hpp"
#include "kernels/kernel.hpp"

namespace sa::kernels::same_dtype {

// dtype: float32, bfloat16 or float16; row values must already be of that type.
std::vector<float> softmax(DType t, std::span<const float> row, double temperature);
std::vector<float> log_softmax(DType t, std::span<const float> row, double temperature);
float logsumexp(DType t, std::span<const float> row, double temperature);
float entropy(DType t, std::span<const float> row, double temperature);
// (Attention's same-dtype baseline is kernels/naive/attention_v2.hpp's.)

}  // namespace sa::kernels::same_dtype
