// Compiled by nvcc: host entry points into the shared host/device headers
// (see shared_arith.hpp). The kernel below makes nvcc compile the same
// functions for the device too, so a header change that breaks device
// compilation fails this build even where no GPU exists.
#include "core/bfloat16.hpp"
#include "tests/cuda/shared_arith.hpp"
#include "theory/adaptive_temperature.hpp"
#include "theory/streamed_entropy.hpp"

namespace sa::cuda_test::nvcc_host {
namespace {
using State = sa::theory::EntropyState<float>;
SA_HD State from(sa_entropy_state s) { return {s.m, s.S, s.T}; }
SA_HD sa_entropy_state to(State s) { return {s.m, s.S, s.T}; }
}  // namespace

// External linkage so that it is compiled (and not reported as unused).
__global__ void device_compile_check(const float* z, int n, sa_entropy_state* out, float* beta) {
  State s = sa::theory::entropy_identity<float>();
  for (int i = 0; i < n; ++i) s = sa::theory::entropy_push(s, z[i]);
  *out = to(s);
  *beta = sa::theory::adaptive_beta(sa::theory::entropy_of(s)) +
          sa::float_from_bf16(sa::bf16_from_float(sa::theory::log_sum_exp_of(s)));
}

sa_entropy_state merge(sa_entropy_state a, sa_entropy_state b) {
  return to(sa::theory::entropy_merge(from(a), from(b)));
}
sa_entropy_state push_all(const float* z, std::size_t n) {
  State s = sa::theory::entropy_identity<float>();
  for (std::size_t i = 0; i < n; ++i) s = sa::theory::entropy_push(s, z[i]);
  return to(s);
}
float entropy_of(sa_entropy_state s) { return sa::theory::entropy_of(from(s)); }
float log_sum_exp_of(sa_entropy_state s) { return sa::theory::log_sum_exp_of(from(s)); }
float adaptive_beta(float H) { return sa::theory::adaptive_beta(H); }
std::uint16_t bf16_from_float(float x) { return sa::bf16_from_float(x); }

}  // namespace sa::cuda_test::nvcc_host
