// sa::device_memory() for builds with CUDA: staging buffers for
// SA_MEMORY_CUDA kernels through cudaMalloc/cudaMemcpy on the current device.
// When no device can be used, every pointer but why_unavailable is null and
// why_unavailable says why (the CUDA runtime's error text, or "no CUDA device
// present"). Copy and allocation failures throw std::runtime_error.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "kernels/kernel.hpp"

namespace sa {
namespace {

std::string& reason() {
  static std::string r;
  return r;
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA staging: ") + what +
                             " failed: " + cudaGetErrorString(e));
}

void* alloc(std::size_t bytes) {
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "cudaMalloc");
  return p;
}
void release(void* p) { cudaFree(p); }
void to_device(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
}
void to_host(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}
const char* why() { return reason().c_str(); }

DeviceMemory probe() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    reason() = cudaGetErrorString(e);
    cudaGetLastError();  // clear the sticky-free error state
    return {nullptr, nullptr, nullptr, nullptr, why};
  }
  if (count == 0) {
    reason() = "no CUDA device present";
    return {nullptr, nullptr, nullptr, nullptr, why};
  }
  reason() = "";
  return {alloc, release, to_device, to_host, why};
}

}  // namespace

const DeviceMemory& device_memory() {
  static const DeviceMemory m = probe();
  return m;
}

}  // namespace sa
