// The naive kernel's backward operations (interface v2): softmax and
// log-softmax backward per row, and attention backward in FlashAttention's
// formulation. float32 arithmetic for every storage type, sequential sums,
// one rounding to the output type; written to be read, not to be fast.
//
//   softmax_backward      S = sum_i y_i dy_i (sequential, float32), then
//                         dx_i = y_i (dy_i - S) / theta
//   log_softmax_backward  S = sum_i dy_i, then dx_i = (dy_i - exp(y_i) S) / theta
//   attention_backward    per query row, from the forward's out and lse:
//                         P_ij = exp(s_ij - lse_i) (0 for masked keys and for a
//                         row with lse = -inf), D_i = dout_i . out_i,
//                         ds_ij = P_ij (dout_i . v_j - D_i) [x softcap'(t_ij)],
//                         dq_i = scale sum_j ds_ij k_j, dk_j += scale ds_ij q_i,
//                         dv_j += P_ij dout_i, dsink -= exp(sink - lse_i) D_i;
//                         dk and dv accumulate in float32 over every query row
//                         (and every query head of a GQA group) in a fixed
//                         order, so results are deterministic and batch
//                         invariant. Every feature of attention_v2 but
//                         adaptive temperature and fp8 inputs.
#pragma once

#include <cstdint>
#include <vector>

#include "core/attention_case.hpp"
#include "softmax_audit/kernel.h"

namespace sa::kernels {

sa_status naive_softmax_backward(void* ctx, sa_dtype t, const sa_rows* shape, const void* y,
                                 const void* dy, void* dx);
sa_status naive_log_softmax_backward(void* ctx, sa_dtype t, const sa_rows* shape, const void* y,
                                     const void* dy, void* dx);
sa_status naive_attention_backward(void* ctx, const sa_attention_backward_args* args);

// For tests (tests/mutants): the same attention backward with the query rows
// of each (sequence, head) visited in a pseudo-random order drawn from
// `order_seed` (0: the natural order), which changes the float32 order of the
// dk/dv sums and so, in general, their bits.
sa_status naive_attention_backward_ordered(const sa_attention_backward_args* args,
                                           std::uint64_t order_seed);

namespace same_dtype {
// FlashAttention's baseline for its backward rule (gradient error <= 3x the
// same-precision implementation's): PyTorch's attention_ref with upcast=False
// differentiated by autograd, i.e. scores, weights, dP, dS and each gradient
// rounded to the case's output type (float32 accumulation inside each
// product), D_i = sum_j P_ij dP_ij as PyTorch's softmax backward forms it.
struct Gradients {
  std::vector<float> dq, dk, dv, dsinks;  // packed BSHD as core/attention_case.hpp
};
Gradients attention_backward(const AttentionCase& c, const std::vector<float>& dout);
}  // namespace same_dtype

}  // namespace sa::kernels
