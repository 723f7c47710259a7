// The built-in CUDA kernel: every operation of include/softmax_audit/kernel.h
// for float32 and bfloat16 (float32 accumulation), on CUDA device memory
// (sa_kernel.memory = SA_MEMORY_CUDA). Present only in builds with
// SA_HAVE_CUDA; calling it needs a device, but argument validation runs first
// and needs none (a bad argument is SA_INVALID_ARGUMENT naming the field).
#pragma once

#include "softmax_audit/kernel.h"

namespace sa::kernels {

const sa_kernel* cuda_kernel();

}  // namespace sa::kernels
