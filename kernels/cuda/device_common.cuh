// Device-side building blocks shared by rows.cu, merge.cu and attention_v2.cu.
//
// All state arithmetic is theory/streamed_entropy.hpp (theory.md T6) and
// theory/adaptive_temperature.hpp (T5), compiled for the device: this file
// only adds element loads/stores, warp/block reductions of those states, and
// the per-row procedure built on them.
//
// Accuracy: float32 arithmetic throughout (bfloat16 is storage only); exp and
// log are CUDA's expf/logf (max error 2 ulp and 1 ulp, CUDA Programming Guide,
// "Mathematical Functions"); division is IEEE round-to-nearest (no fast math).
#pragma once

#if defined(SA_CUDA_EMULATION)
#include "kernels/cuda/emulation.hpp"  // tests only: run this code on the host
#else
#include <cuda_bf16.h>
#include <cuda_runtime.h>
// SA_LAUNCH(grid, block, shared bytes, kernel)(args...): a kernel launch that
// the host emulator (emulation.hpp) can replace.
#define SA_LAUNCH(grid, block, shared, ...) __VA_ARGS__<<<(grid), (block), (shared)>>>
#define SA_EXTERN_SHARED(type, name) extern __shared__ type name[]
#endif

#include <cstdint>
#include <string>

#include "softmax_audit/kernel.h"
#include "theory/adaptive_temperature.hpp"
#include "theory/streamed_entropy.hpp"

namespace sa::kernels::cuda {

using State = sa::theory::EntropyState<float>;

__device__ __forceinline__ float load_f(const float* p) { return *p; }
__device__ __forceinline__ float load_f(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store_f(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_f(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

__device__ __forceinline__ float pos_inf() { return __int_as_float(0x7f800000); }
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float qnan() { return __int_as_float(0x7fc00000); }

__device__ __forceinline__ State shfl_xor(const State& s, int mask) {
  return {__shfl_xor_sync(0xffffffffu, s.m, mask), __shfl_xor_sync(0xffffffffu, s.S, mask),
          __shfl_xor_sync(0xffffffffu, s.T, mask)};
}

// Reductions over one warp (every lane must call, with the same control flow).
struct WarpGroup {
  __device__ float max(float v) const {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
  }
  __device__ float sum(float v) const {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
  }
  __device__ bool any(bool v) const { return __any_sync(0xffffffffu, v); }
  __device__ State merge(State s) const {
    for (int o = 16; o > 0; o >>= 1) s = sa::theory::entropy_merge(s, shfl_xor(s, o));
    return s;
  }
};

// Reductions over a whole block of kThreads threads (all must call; the block
// synchronises inside). Results are returned to every thread.
template <int kThreads>
struct BlockGroup {
  static constexpr int kWarps = kThreads / 32;
  State* scratch;  // kWarps entries of shared memory
  __device__ State all(State s, int kind) const {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    WarpGroup w;
    if (kind == 0)
      s.m = w.max(s.m);
    else if (kind == 1)
      s.S = w.sum(s.S);
    else
      s = w.merge(s);
    __syncthreads();  // scratch may still be read by a previous reduction
    if (lane == 0) scratch[warp] = s;
    __syncthreads();
    State r = scratch[0];
    for (int i = 1; i < kWarps; ++i) {
      const State x = scratch[i];
      if (kind == 0)
        r.m = fmaxf(r.m, x.m);
      else if (kind == 1)
        r.S += x.S;
      else
        r = sa::theory::entropy_merge(r, x);
    }
    return r;
  }
  __device__ float max(float v) const { return all(State{v, 0.f, 0.f}, 0).m; }
  __device__ float sum(float v) const { return all(State{0.f, v, 0.f}, 1).S; }
  __device__ bool any(bool v) const { return __syncthreads_or(v) != 0; }
  __device__ State merge(State s) const { return all(s, 2); }
};

// The (m, S, T) state of a row (or a chunk of one) whose logits this thread
// visits through for_each(fn) (fn(z) for each of its logits; -inf padding is
// harmless). The maximum is found first and every term is taken against it,
// so the threads' partial states share m and merging them rescales nothing
// (exp(0) = 1 exactly). Special values follow streamed_entropy.hpp: NaN
// anywhere -> NaN state; all -inf -> identity; +inf present -> (+inf, k, 0).
template <class G, class ForEach>
__device__ State row_state(const G& g, ForEach for_each) {
  float m = neg_inf();
  bool nan = false;
  for_each([&](float z) {
    nan |= (z != z);
    m = fmaxf(m, z);
  });
  nan = g.any(nan);
  if (nan) return sa::theory::entropy_nan_state<float>();
  m = g.max(m);
  if (m == neg_inf()) return sa::theory::entropy_identity<float>();
  if (m == pos_inf()) {
    float k = 0.f;
    for_each([&](float z) { k += (z == pos_inf()) ? 1.f : 0.f; });
    return {pos_inf(), g.sum(k), 0.f};
  }
  // Every logit here is finite or -inf (no NaN, and the max is finite), so
  // entropy_push(s, z) against this max takes one branch of entropy_merge:
  // nothing for z = -inf (its state is the identity) or where exp(z - m)
  // underflows to 0, else S + e 1 and T + e (0 + d 1) with d = z - m. That
  // branch is written out below, operation for operation (the same bits),
  // without the per-element tests entropy_merge makes for the general case.
  State s{m, 0.f, 0.f};
  for_each([&](float z) {
    if (z == neg_inf()) return;
    const float d = z - m;
    const float e = expf(d);
    if (e == 0.f) return;
    s.S = s.S + e * 1.f;
    s.T = s.T + e * (0.f + d * 1.f);
  });
  return g.merge(s);
}

// Kinds of final state, which decide every output's special value.
__device__ __forceinline__ bool state_is_nan(const State& s) { return s.m != s.m; }
__device__ __forceinline__ bool state_is_finite(const State& s) {
  return s.m != neg_inf() && s.m != pos_inf() && s.m == s.m;
}

// softmax weight of logit z in a row whose final state is st (kernel.h semantics).
__device__ __forceinline__ float softmax_weight(const State& st, float z) {
  if (state_is_nan(st)) return qnan();
  if (st.m == neg_inf()) return 0.f;                                // fully masked row
  if (st.m == pos_inf()) return z == pos_inf() ? 1.f / st.S : 0.f;  // k items share weight
  // d = z - m is rounded to float32; for |d| near 90 that rounding alone
  // (up to 2^-18 absolute) becomes a relative error of about |d| 2^-24 in
  // exp(d), 60 ulps and more (docs/gpu.md, the 2^27 sweep). The rounding
  // error r of the subtraction is exact (TwoSum), and exp(d + r) = exp(d)
  // (1 + r + O(r^2)) with |r| <= 2^-24 |d|, so one fma restores the lost
  // digits: what is left is expf's own 2 ulp, the fma and the division.
  const float d = z - st.m;
  const float e = expf(d);
  if (e == 0.f) return 0.f;  // z = -inf or far below: r may be NaN there
  const float nm = -st.m;
  const float zr = d - nm;
  const float mr = d - zr;
  const float r = (z - zr) + (nm - mr);
  return fmaf(e, r, e) / st.S;
}

// log-softmax of z; logS = logf(st.S).
__device__ __forceinline__ float log_softmax_value(const State& st, float logS, float z) {
  if (state_is_nan(st)) return qnan();
  if (st.m == neg_inf()) return neg_inf();
  if (st.m == pos_inf()) return z == pos_inf() ? -logS : neg_inf();
  return (z - st.m) - logS;
}

// Adaptive weight exp(beta (z - m)) / S2 for a finite row (S2 = sum of the
// numerators); the special rows fall back to softmax_weight (beta does not
// change them).
__device__ __forceinline__ float adaptive_numerator(const State& st, float beta, float z) {
  return expf(beta * (z - st.m));
}

// The factor a partial result with running max mx gets when the merged max is
// mn, exactly as entropy_merge scales S: 0 for an empty part, 1 for the part
// holding the max, exp(mx - mn) otherwise.
__device__ __forceinline__ float merge_factor(float mx, float mn) {
  if (mx == neg_inf()) return 0.f;
  if (mx == mn) return 1.f;
  return expf(mx - mn);
}

}  // namespace sa::kernels::cuda

// Host-side helpers for the launchers.
namespace sa::kernels::cuda::host {

inline sa_status cuda_failure(cudaError_t e, const char* what, std::string& error) {
  error = std::string(what) + ": " + cudaGetErrorString(e);
  return SA_INTERNAL_ERROR;
}

// SA_OK when p is device (or managed) memory; SA_INVALID_ARGUMENT naming `name` when it is
// host memory (the kernel's memory is SA_MEMORY_CUDA).
inline sa_status require_device(const void* p, const char* op, const char* name,
                                std::string& error) {
  if (p == nullptr) return SA_OK;
  cudaPointerAttributes attr{};
  const cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return cuda_failure(e, op, error);
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
    error = std::string(op) + ": " + name +
            " is not CUDA device memory; this kernel's memory is SA_MEMORY_CUDA";
    return SA_INVALID_ARGUMENT;
  }
  return SA_OK;
}

// Device scratch freed at scope exit.
struct Scratch {
  void* p = nullptr;
  ~Scratch() {
    if (p) cudaFree(p);
  }
  cudaError_t alloc(std::size_t bytes) { return cudaMalloc(&p, bytes ? bytes : 1); }
  template <class T>
  T* as(std::size_t offset_bytes = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(p) + offset_bytes);
  }
};

}  // namespace sa::kernels::cuda::host
