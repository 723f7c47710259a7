// Internals shared by the translation units that implement sa::Kernel's calls
// (kernels/kernel.cpp, kernels/attention_v2_call.cpp); not part of the API.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kernel.hpp"

namespace sa::detail {

// Throws KernelError for any status but SA_OK, with the kernel's last_error text.
void check_status(const Kernel& k, sa_status s, Op op);

// Adds wall nanoseconds to kernel_call_seconds().
void add_kernel_call_time(std::int64_t ns);

// Calls f (one call of a kernel's entry point) and adds its wall time to
// kernel_call_seconds().
template <class F>
auto timed_call(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = f();
  add_kernel_call_time(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  return r;
}

// Host or device buffers for one call. On the host it aliases the vectors; for
// SA_MEMORY_CUDA it copies in on construction and out on `fetch`.
class Stage {
 public:
  explicit Stage(sa_memory mem) : mem_(mem) {
    if (mem_ == SA_MEMORY_CUDA && device_memory().alloc == nullptr)
      throw KernelUnavailable(std::string("CUDA kernel needs a GPU: ") +
                              device_memory().why_unavailable());
  }
  ~Stage() {
    for (void* p : owned_) device_memory().free(p);
  }
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  void* in(const void* host, std::size_t bytes) {
    if (mem_ == SA_MEMORY_HOST || host == nullptr) return const_cast<void*>(host);
    void* d = device_memory().alloc(bytes ? bytes : 1);
    owned_.push_back(d);
    if (bytes) device_memory().to_device(d, host, bytes);
    return d;
  }
  void* out(void* host, std::size_t bytes) {
    if (mem_ == SA_MEMORY_HOST || host == nullptr) return host;
    void* d = in(host, bytes);  // copy so untouched outputs keep their sentinel
    back_.push_back({host, d, bytes});
    return d;
  }
  void fetch() {
    for (auto& b : back_) device_memory().to_host(b.host, b.dev, b.bytes);
  }

 private:
  struct Back {
    void* host;
    void* dev;
    std::size_t bytes;
  };
  sa_memory mem_;
  std::vector<void*> owned_;
  std::vector<Back> back_;
};

}  // namespace sa::detail
