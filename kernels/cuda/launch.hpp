// Launchers of the CUDA kernels (implemented in rows.cu, merge.cu,
// attention_v2.cu and backward.cu),
// callable from plain C++. Arguments are already validated (plan.hpp). Each
// returns SA_OK, or an error status with `error` set (a CUDA error string, or
// SA_INVALID_ARGUMENT when a pointer is not device memory). Synchronous.
#pragma once

#include <string>

#include "softmax_audit/kernel.h"

namespace sa::kernels::cuda {

enum class RowOp { softmax, log_softmax, logsumexp, entropy, adaptive };

struct RowCall {
  RowOp op = RowOp::softmax;
  sa_dtype dtype = SA_F32;
  sa_rows shape{};
  const void* in = nullptr;
  void* out = nullptr;                // softmax, log_softmax, adaptive
  float* lse = nullptr;               // logsumexp
  float* entropy = nullptr;           // entropy, adaptive (may be null for adaptive)
  float* beta = nullptr;              // adaptive (may be null)
  sa_entropy_state* state = nullptr;  // entropy (may be null)
};

sa_status launch_rows(const RowCall& call, std::string& error);
sa_status launch_merge_entropy(std::int64_t count, const sa_entropy_state* a,
                               const sa_entropy_state* b, sa_entropy_state* out,
                               std::string& error);
// Batched attention (interface v2; attention_v2.cu). Reads varlen offsets back
// to the host to check them (SA_INVALID_ARGUMENT) before the launch.
sa_status launch_attention_v2(const sa_attention_v2_args& args, std::string& error);
// Backward passes (interface v2; backward.cu). Arguments validated by the
// caller (cuda_kernel.cpp); attention_backward reads the varlen offsets back
// to check them, as launch_attention_v2 does.
sa_status launch_rows_backward(bool log, sa_dtype dtype, const sa_rows& shape, const void* y,
                               const void* dy, void* dx, std::string& error);
sa_status launch_attention_backward(const sa_attention_backward_args& args, std::string& error);
// p[0 .. n) = value on the device (merge.cu); `op` and `name` name p in errors.
sa_status launch_fill(float* p, std::int64_t n, float value, const char* op, const char* name,
                      std::string& error);
sa_status launch_merge_attention(std::int64_t rows, std::int64_t dv, const float* o_a,
                                 const float* lse_a, const float* o_b, const float* lse_b,
                                 float* out, float* out_lse, std::string& error);

}  // namespace sa::kernels::cuda
