// The CPU kernel's n-way split-KV merge (kernel.h's merge_attention_states_n).
//
// Accuracy: per row, the weights exp(lse_p - max lse), their sum, the
// weighted sum of the parts and log S are formed in double and each output
// is rounded to float32 once: within 0.5 ulp of float32 plus a few double
// ulps (relative to sum_p w_p |o_p|) of the exact merge of the given parts.
// Special values: a NaN lse gives a NaN row; parts with lse = +inf share the
// weight equally (lse +inf); parts with lse = -inf contribute nothing and are
// never read; all parts -inf give out 0 and lse -inf.
#pragma once

#include <cstdint>

#include "softmax_audit/kernel.h"

namespace sa::kernels {

sa_status cpu_merge_attention_states_n(void* ctx, std::int64_t parts, std::int64_t rows,
                                       std::int64_t dv, const float* const* o,
                                       const float* const* lse, float* out, float* out_lse);
// The text of the last error on this thread, or nullptr.
const char* cpu_merge_n_last_error();

}  // namespace sa::kernels
