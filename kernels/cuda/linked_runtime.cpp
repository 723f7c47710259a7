// Registers the CUDA runtime this library links (statically: libcudart_static)
// with device_memory() before main, so the staging of SA_MEMORY_CUDA buffers
// and the built-in kernel's launches use one runtime, and a program built with
// the CUDA kernel starts on a machine without CUDA (the static runtime opens
// the driver, libcuda.so.1, only when first used; without it every CUDA call
// reports cudaErrorInsufficientDriver and the CUDA tests skip with that reason).
#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/linked_cuda_runtime.hpp"

namespace sa::kernels::cuda {
namespace {

int get_device_count(int* n) { return static_cast<int>(cudaGetDeviceCount(n)); }
int malloc_device(void** p, std::size_t bytes) { return static_cast<int>(cudaMalloc(p, bytes)); }
int free_device(void* p) { return static_cast<int>(cudaFree(p)); }
int copy(void* dst, const void* src, std::size_t bytes, int kind) {
  return static_cast<int>(cudaMemcpy(dst, src, bytes, static_cast<cudaMemcpyKind>(kind)));
}
const char* error_string(int e) { return cudaGetErrorString(static_cast<cudaError_t>(e)); }
int last_error() { return static_cast<int>(cudaGetLastError()); }

}  // namespace

// Referenced by cuda_kernel.cpp, so that any program using the kernel links
// this file (and runs the registration) although nothing calls into it.
extern const bool linked_runtime_registered = use_linked_cuda_runtime(
    {get_device_count, malloc_device, free_device, copy, error_string, last_error});

}  // namespace sa::kernels::cuda
