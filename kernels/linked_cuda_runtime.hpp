// The CUDA runtime that device_memory() stages through, when a program links
// one. A program with the built-in CUDA kernel links the CUDA runtime
// statically (kernels/cuda/CMakeLists.txt), so it starts on machines without
// CUDA, and registers that runtime's entry points here before main
// (kernels/cuda/linked_runtime.cpp): staging and the built-in kernel's
// launches then share one runtime. A program without it (a CPU-only build, a
// consumer of the installed library) registers nothing, and device_memory()
// opens a shared libcudart.so with dlopen instead (kernels/device_memory.cpp).
#pragma once

#include <cstddef>

namespace sa {

// The entry points device_memory() uses, with the CUDA runtime's C signatures
// (cudaError_t is an int-sized enum, 0 = cudaSuccess; cudaMemcpyKind 1 = host to
// device, 2 = device to host).
struct CudaRuntimeEntryPoints {
  int (*get_device_count)(int*) = nullptr;
  int (*malloc)(void**, std::size_t) = nullptr;
  int (*free)(void*) = nullptr;
  int (*memcpy)(void*, const void*, std::size_t, int) = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*get_last_error)() = nullptr;
};

// Registers the linked runtime. Must run before the first device_memory() call
// (a static initialiser does); returns true so it can initialise a constant.
bool use_linked_cuda_runtime(const CudaRuntimeEntryPoints& entry);

// Whether a linked runtime was registered (tests: a program with the built-in
// CUDA kernel must have one, else its package would need libcudart.so).
bool linked_cuda_runtime_registered();

}  // namespace sa
