// merge_attention_states on the GPU: a warp per row. (Interface v1
// attention is the single-head case of attention_v2.cu: cuda_kernel.cpp
// translates a v1 call, kernels/attention_v1_args.hpp.)
#include <algorithm>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/plan.hpp"

namespace sa::kernels::cuda {
namespace {

// merge_attention_states: a warp per row; all lanes read both lse values
// before lane 0 writes out_lse (which may alias lse_a).
__global__ void __launch_bounds__(128)
    merge_attention_kernel(std::int64_t rows, std::int64_t dv, const float* o_a, const float* lse_a,
                           const float* o_b, const float* lse_b, float* out, float* out_lse) {
  const int lane = threadIdx.x & 31;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t r =
           static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
       r < rows; r += step) {
    const float la = lse_a[r], lb = lse_b[r];
    __syncwarp();
    // Weights of the two parts (sum 1) and the merged lse. A part at -inf
    // contributes nothing; two parts at +inf share equally (each is the limit
    // of its own +inf logits, whose counts are not known here); NaN -> NaN.
    float wa, wb, L;
    if (la != la || lb != lb) {
      wa = wb = L = qnan();
    } else if (la == neg_inf() && lb == neg_inf()) {
      wa = wb = 0.f;
      L = neg_inf();
    } else if (la == pos_inf() || lb == pos_inf()) {
      wa = la == pos_inf() ? (lb == pos_inf() ? 0.5f : 1.f) : 0.f;
      wb = lb == pos_inf() ? (la == pos_inf() ? 0.5f : 1.f) : 0.f;
      L = pos_inf();
    } else {
      const float m = fmaxf(la, lb);
      const float ea = merge_factor(la, m), eb = merge_factor(lb, m);  // one of them is 1
      const float sum = ea + eb;
      wa = ea / sum;
      wb = eb / sum;
      L = m + logf(sum);
    }
    for (std::int64_t c = lane; c < dv; c += 32) {
      const std::int64_t i = r * dv + c;
      float o = 0.f;
      if (wa != 0.f) o = wa * o_a[i];
      if (wb != 0.f) o = fmaf(wb, o_b[i], o);
      if (wa != wa) o = qnan();
      out[i] = o;
    }
    if (lane == 0) out_lse[r] = L;
  }
}

// p[0 .. n) = value (a v1 attention call's beta without the adaptive
// temperature: 1 on every row, NaN rows included; kernel.h).
__global__ void __launch_bounds__(128) fill_kernel(float* p, std::int64_t n, float value) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += step)
    p[i] = value;
}

sa_status finish(const char* what, std::string& error) {
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return host::cuda_failure(e, (std::string(what) + " launch").c_str(), error);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
    return host::cuda_failure(e, what, error);
  return SA_OK;
}

}  // namespace

sa_status launch_merge_attention(std::int64_t rows, std::int64_t dv, const float* o_a,
                                 const float* lse_a, const float* o_b, const float* lse_b,
                                 float* out, float* out_lse, std::string& error) {
  const char* op = "merge_attention_states";
  for (auto [ptr, name] : {std::pair<const void*, const char*>{o_a, "o_a"},
                           {lse_a, "lse_a"},
                           {o_b, "o_b"},
                           {lse_b, "lse_b"},
                           {out, "out"},
                           {out_lse, "out_lse"}})
    if (sa_status s = host::require_device(ptr, op, name, error); s != SA_OK) return s;
  SA_LAUNCH(static_cast<unsigned>(grid_for(rows, 4)), 128, 0, merge_attention_kernel)
  (rows, dv, o_a, lse_a, o_b, lse_b, out, out_lse);
  return finish("merge_attention_states", error);
}

sa_status launch_fill(float* p, std::int64_t n, float value, const char* op, const char* name,
                      std::string& error) {
  if (n <= 0) return SA_OK;
  if (sa_status s = host::require_device(p, op, name, error); s != SA_OK) return s;
  SA_LAUNCH(static_cast<unsigned>(grid_for(n, 128)), 128, 0, fill_kernel)(p, n, value);
  return finish(op, error);
}

}  // namespace sa::kernels::cuda
