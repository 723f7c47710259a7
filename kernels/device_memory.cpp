// sa::device_memory(): staging buffers for SA_MEMORY_CUDA kernels through the
// CUDA runtime (cudaMalloc/cudaMemcpy on the current device), which is opened
// with dlopen at first use rather than linked. So sa_kernel_api, and with it the
// installed package, needs no CUDA to build against or to run: a CPU-only
// consumer of a package built where nvcc exists links nothing from CUDA.
// The runtime is the one a CUDA kernel already loaded (dlopen finds it by its
// soname: libcudart.so.<major>), else the first of those names found on the
// library path. When none loads, or it reports no usable device, every pointer
// but why_unavailable is null and why_unavailable says why. Copy and allocation
// failures throw std::runtime_error.
#include <dlfcn.h>

#include <cstddef>
#include <stdexcept>
#include <string>

#include "kernels/kernel.hpp"

namespace sa {
namespace {

// The few CUDA runtime entry points used, with their C signatures (cudaError_t
// is an int-sized enum, 0 = cudaSuccess; cudaMemcpyKind 1 = host to device,
// 2 = device to host).
struct Runtime {
  int (*get_device_count)(int*) = nullptr;
  int (*malloc)(void**, std::size_t) = nullptr;
  int (*free)(void*) = nullptr;
  int (*memcpy)(void*, const void*, std::size_t, int) = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*get_last_error)() = nullptr;
};

Runtime& rt() {
  static Runtime r;
  return r;
}

std::string& reason() {
  static std::string r;
  return r;
}

void check(int e, const char* what) {
  if (e != 0)
    throw std::runtime_error(std::string("CUDA staging: ") + what +
                             " failed: " + rt().error_string(e));
}

void* alloc(std::size_t bytes) {
  void* p = nullptr;
  check(rt().malloc(&p, bytes), "cudaMalloc");
  return p;
}
void release(void* p) { rt().free(p); }
void to_device(void* dst, const void* src, std::size_t bytes) {
  check(rt().memcpy(dst, src, bytes, 1), "cudaMemcpy to device");
}
void to_host(void* dst, const void* src, std::size_t bytes) {
  check(rt().memcpy(dst, src, bytes, 2), "cudaMemcpy to host");
}
const char* why() { return reason().c_str(); }

template <class F>
bool bind(void* lib, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, name));
  return f != nullptr;
}

DeviceMemory probe() {
  const DeviceMemory none{nullptr, nullptr, nullptr, nullptr, why};
  void* lib = nullptr;
  for (const char* name :
       {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"}) {
    if ((lib = dlopen(name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD))) break;
  }
  for (const char* name :
       {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"}) {
    if (lib) break;
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  }
  if (!lib) {
    reason() = "no CUDA runtime (libcudart.so) could be loaded";
    return none;
  }
  Runtime& r = rt();
  if (!bind(lib, "cudaGetDeviceCount", r.get_device_count) || !bind(lib, "cudaMalloc", r.malloc) ||
      !bind(lib, "cudaFree", r.free) || !bind(lib, "cudaMemcpy", r.memcpy) ||
      !bind(lib, "cudaGetErrorString", r.error_string) ||
      !bind(lib, "cudaGetLastError", r.get_last_error)) {
    reason() = "the CUDA runtime that was loaded lacks cudaMalloc/cudaMemcpy";
    return none;
  }
  int count = 0;
  const int e = r.get_device_count(&count);
  if (e != 0) {
    reason() = r.error_string(e);
    r.get_last_error();  // clear the sticky-free error state
    return none;
  }
  if (count == 0) {
    reason() = "no CUDA device present";
    return none;
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
