// sa::device_memory(): staging buffers for SA_MEMORY_CUDA kernels through the
// CUDA runtime (cudaMalloc/cudaMemcpy on the current device). The runtime is,
// in this order:
//  0. the library named by the environment variable SA_CUDA_RUNTIME (a path),
//     when it is set: nothing else is tried (the gate's tests set it to a fake
//     runtime backed by host memory, tests/gate/fake_cudart.c);
//  1. the one linked into the program, when the built-in CUDA kernel is
//     (statically linked; it registers itself, kernels/linked_cuda_runtime.hpp);
//  2. a shared one a CUDA kernel already loaded (dlopen finds it by its soname:
//     libcudart.so.<major>);
//  3. the first of those names found on the library path.
// So sa_kernel_api, and with it the installed library, links nothing from CUDA
// even in builds with nvcc: a CPU-only consumer needs no CUDA to build or run.
// When no runtime is found, or it reports no usable device, every pointer but
// why_unavailable is null and why_unavailable says why. Copy and allocation
// failures throw std::runtime_error.
#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "kernels/kernel.hpp"
#include "kernels/linked_cuda_runtime.hpp"

namespace sa {
namespace {

using Runtime = CudaRuntimeEntryPoints;

Runtime& rt() {
  static Runtime r;
  return r;
}

// Set by use_linked_cuda_runtime() (before main), read by probe().
Runtime& linked() {
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

// Asks the runtime in rt() for a device.
DeviceMemory ask_for_device() {
  const DeviceMemory none{nullptr, nullptr, nullptr, nullptr, why};
  Runtime& r = rt();
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

// Binds rt() to the runtime `lib`; false (and reason() says why) when it lacks an entry point.
bool bind_runtime(void* lib) {
  Runtime& r = rt();
  if (!bind(lib, "cudaGetDeviceCount", r.get_device_count) || !bind(lib, "cudaMalloc", r.malloc) ||
      !bind(lib, "cudaFree", r.free) || !bind(lib, "cudaMemcpy", r.memcpy) ||
      !bind(lib, "cudaGetErrorString", r.error_string) ||
      !bind(lib, "cudaGetLastError", r.get_last_error)) {
    reason() = "the CUDA runtime that was loaded lacks cudaMalloc/cudaMemcpy";
    return false;
  }
  return true;
}

DeviceMemory probe() {
  const DeviceMemory none{nullptr, nullptr, nullptr, nullptr, why};
  if (const char* named = std::getenv("SA_CUDA_RUNTIME"); named && *named) {
    void* lib = dlopen(named, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      reason() = std::string("SA_CUDA_RUNTIME=") + named +
                 " could not be loaded: " + (e ? e : "dlopen failed");
      return none;
    }
    return bind_runtime(lib) ? ask_for_device() : none;
  }
  if (linked().get_device_count) {
    rt() = linked();
    return ask_for_device();
  }
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
  return bind_runtime(lib) ? ask_for_device() : none;
}

}  // namespace

bool use_linked_cuda_runtime(const CudaRuntimeEntryPoints& entry) {
  linked() = entry;
  return true;
}

bool linked_cuda_runtime_registered() { return linked().get_device_count != nullptr; }

const DeviceMemory& device_memory() {
  static const DeviceMemory m = probe();
  return m;
}

}  // namespace sa
