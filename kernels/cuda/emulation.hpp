// A small single-threaded SIMT emulator, so that the CUDA kernels' own source
// (rows.cu, merge.cu, attention_v2.cu) can be compiled by the host compiler and executed
// on a machine without a GPU (SA_CUDA_EMULATION defined; used only by
// tests/cuda's emulation test). It is a test device, not a performance tool.
//
// Semantics covered: each CUDA thread is a cooperative fiber (ucontext);
// __syncthreads / __syncthreads_or are block barriers; __shfl_sync,
// __shfl_xor_sync, __any_sync and __syncwarp are warp barriers with a value
// exchange (full-warp masks only, as the kernels use); __shared__ variables
// are function statics (blocks run one after another); dynamic shared memory
// is one buffer per launch; "device memory" is host memory. Grids are capped
// at kMaxBlocks blocks, which exercises the kernels' grid-stride loops.
// Arithmetic is the host's (glibc expf/logf, IEEE float), not the GPU's.
#pragma once

#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "core/bfloat16.hpp"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define SA_EXTERN_SHARED(type, name) type* name = static_cast<type*>(::sa_emu::dynamic_shared())

namespace sa_emu {

inline constexpr unsigned kMaxBlocks = 3;
inline constexpr std::size_t kStack = 256 * 1024;

struct Dim {
  unsigned x = 1, y = 1, z = 1;
};

struct Fiber {
  ucontext_t ctx{};
  std::vector<char> stack;
  Dim tid;
  bool done = false;
};

struct Machine {
  ucontext_t scheduler{};
  std::vector<Fiber> fibers;
  Fiber* current = nullptr;
  Dim block, grid, block_dim;
  std::vector<char> shared;
  // barriers: generation counters
  unsigned block_count = 0, block_gen = 0;
  std::vector<unsigned> warp_count, warp_gen;
  std::vector<std::uint32_t> exchange;  // one slot per thread
  std::function<void()> body;
};

inline Machine& machine() {
  static Machine m;
  return m;
}

inline void yield() { swapcontext(&machine().current->ctx, &machine().scheduler); }

inline unsigned linear_tid() { return machine().current->tid.x; }

inline void sync_block() {
  Machine& m = machine();
  const unsigned gen = m.block_gen;
  if (++m.block_count == m.block_dim.x) {
    m.block_count = 0;
    ++m.block_gen;
    return;
  }
  while (m.block_gen == gen) yield();
}

inline void sync_warp() {
  Machine& m = machine();
  const unsigned w = linear_tid() / 32;
  const unsigned gen = m.warp_gen[w];
  if (++m.warp_count[w] == 32) {
    m.warp_count[w] = 0;
    ++m.warp_gen[w];
    return;
  }
  while (m.warp_gen[w] == gen) yield();
}

inline std::uint32_t bits(float v) { return sa::float_bits(v); }
inline float from_bits(std::uint32_t u) { return sa::float_from_bits(u); }

inline std::uint32_t exchange_from(std::uint32_t mine, unsigned src_lane) {
  Machine& m = machine();
  const unsigned t = linear_tid();
  m.exchange[t] = mine;
  sync_warp();
  const std::uint32_t r = m.exchange[(t / 32) * 32 + (src_lane & 31)];
  sync_warp();
  return r;
}

inline void* dynamic_shared() { return machine().shared.data(); }

inline void trampoline() {
  machine().body();
  machine().current->done = true;
}

// Runs body() as every thread of every block (blocks one after another).
inline void run_grid(Dim grid, Dim block, std::size_t shared_bytes, std::function<void()> body) {
  Machine& m = machine();
  if (block.x == 0 || block.x % 32 != 0 || block.y != 1 || block.z != 1)
    throw std::logic_error("emulator: blocks must be 1-D multiples of 32 threads");
  m.grid = grid;
  m.grid.x = grid.x < kMaxBlocks ? grid.x : kMaxBlocks;
  m.block_dim = block;
  m.body = std::move(body);
  m.shared.assign(shared_bytes + 16, 0);
  m.fibers.resize(block.x);
  m.exchange.assign(block.x, 0);
  for (unsigned b = 0; b < m.grid.x; ++b) {
    m.block = Dim{b, 0, 0};
    m.block_count = 0;
    m.warp_count.assign(block.x / 32, 0);
    m.warp_gen.assign(block.x / 32, 0);
    for (unsigned t = 0; t < block.x; ++t) {
      Fiber& f = m.fibers[t];
      f.stack.resize(kStack);
      f.tid = Dim{t, 0, 0};
      f.done = false;
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = f.stack.data();
      f.ctx.uc_stack.ss_size = f.stack.size();
      f.ctx.uc_link = &m.scheduler;
      makecontext(&f.ctx, trampoline, 0);
    }
    for (bool all_done = false; !all_done;) {
      all_done = true;
      for (Fiber& f : m.fibers) {
        if (f.done) continue;
        all_done = false;
        m.current = &f;
        swapcontext(&m.scheduler, &f.ctx);
      }
    }
  }
  m.current = nullptr;
}

}  // namespace sa_emu

// The launch: SA_LAUNCH(grid, block, shared, kernel)(args...).
namespace sa_emu {
template <class... P>
struct Bound {
  Dim grid, block;
  std::size_t shared;
  void (*k)(P...);
  template <class... A>
  void operator()(A&&... a) const {
    auto kk = k;
    std::tuple<P...> args(std::forward<A>(a)...);
    run_grid(grid, block, shared, [kk, args] { std::apply(kk, args); });
  }
};
}  // namespace sa_emu
#define SA_LAUNCH(grid, block, shared, ...) \
  (::sa_emu::Bound{                         \
      {static_cast<unsigned>(grid)}, {static_cast<unsigned>(block)}, (shared), &__VA_ARGS__})

// CUDA built-ins the kernels use.
#define threadIdx (::sa_emu::machine().current->tid)
#define blockIdx (::sa_emu::machine().block)
#define blockDim (::sa_emu::machine().block_dim)
#define gridDim (::sa_emu::machine().grid)

inline void __syncthreads() { sa_emu::sync_block(); }
inline int __syncthreads_or(int pred) {
  sa_emu::Machine& m = sa_emu::machine();
  m.exchange[sa_emu::linear_tid()] = pred ? 1u : 0u;
  sa_emu::sync_block();
  int r = 0;
  for (unsigned t = 0; t < m.block_dim.x; ++t) r |= m.exchange[t] != 0;
  sa_emu::sync_block();
  return r;
}
inline void __syncwarp(unsigned = 0xffffffffu) { sa_emu::sync_warp(); }
inline float __shfl_sync(unsigned, float v, int src) {
  return sa_emu::from_bits(sa_emu::exchange_from(sa_emu::bits(v), static_cast<unsigned>(src)));
}
inline float __shfl_xor_sync(unsigned, float v, int mask) {
  return sa_emu::from_bits(sa_emu::exchange_from(
      sa_emu::bits(v), (sa_emu::linear_tid() & 31) ^ static_cast<unsigned>(mask)));
}
inline int __any_sync(unsigned, int pred) {
  sa_emu::Machine& m = sa_emu::machine();
  const unsigned t = sa_emu::linear_tid(), base = t / 32 * 32;
  m.exchange[t] = pred ? 1u : 0u;
  sa_emu::sync_warp();
  int r = 0;
  for (unsigned i = 0; i < 32; ++i) r |= m.exchange[base + i] != 0;
  sa_emu::sync_warp();
  return r;
}
inline float __int_as_float(int i) { return sa_emu::from_bits(static_cast<std::uint32_t>(i)); }

struct __nv_bfloat16 {
  std::uint16_t bits;
};
inline float __bfloat162float(__nv_bfloat16 b) { return sa::float_from_bf16(b.bits); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return {sa::bf16_from_float(f)}; }

// Runtime API subset.
enum cudaError_t { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
  cudaMemoryTypeManaged = 3
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
struct cudaPointerAttributes {
  cudaMemoryType type;
};
inline const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "emulator: out of memory";
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaMalloc(void** p, std::size_t bytes) {
  *p = std::malloc(bytes);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
inline cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind) {
  if (bytes) std::memcpy(dst, src, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void*) {
  a->type = cudaMemoryTypeDevice;  // every pointer is "device" memory here
  return cudaSuccess;
}
template <class K>
cudaError_t cudaFuncSetAttribute(K, cudaFuncAttribute, int) {
  return cudaSuccess;
}
