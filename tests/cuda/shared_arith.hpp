// The host/device arithmetic of theory/streamed_entropy.hpp (T6),
// theory/adaptive_temperature.hpp (T5) and core/bfloat16.hpp, compiled by
// nvcc (shared_arith_nvcc.cu: SA_HD = __host__ __device__) and called from
// host code, so tests can compare it with the same headers compiled by the
// host C++ compiler and with the MPFR reference.
#pragma once

#include <cstddef>
#include <cstdint>

#include "softmax_audit/kernel.h"

namespace sa::cuda_test::nvcc_host {

sa_entropy_state merge(sa_entropy_state a, sa_entropy_state b);
sa_entropy_state push_all(const float* z, std::size_t n);  // from the identity, in order
float entropy_of(sa_entropy_state s);
float log_sum_exp_of(sa_entropy_state s);
float adaptive_beta(float H);
std::uint16_t bf16_from_float(float x);

}  // namespace sa::cuda_test::nvcc_host
