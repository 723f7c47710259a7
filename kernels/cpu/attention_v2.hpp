// The CPU kernel's batched attention (interface v2) and its capabilities:
// kernels/cpu/attention_v2.cpp.
#pragma once

#include "softmax_audit/kernel.h"

namespace sa::kernels {

sa_status cpu_attention_v2(void* ctx, const sa_attention_v2_args* args);
// Text of the last error of cpu_attention_v2 on this thread, or NULL.
const char* cpu_attention_v2_last_error();
// What the CPU kernel declares (sa_kernel.capabilities).
const sa_capabilities* cpu_capabilities();

}  // namespace sa::kernels
