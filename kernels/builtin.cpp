#include "kernels/builtin.hpp"

#if defined(SA_HAVE_NAIVE_KERNEL)
#include "kernels/naive/naive_kernel.hpp"
#endif
#if defined(SA_HAVE_CPU_KERNEL)
#include "kernels/cpu/cpu_kernel.hpp"
#include "kernels/cpu/isa_limit.hpp"
#include "kernels/cpu/row_ops.hpp"
#endif
#if defined(SA_HAVE_CUDA_KERNEL)
#include "kernels/cuda/cuda_kernel.hpp"
#endif

namespace sa {

std::vector<Kernel> builtin_kernels() {
  std::vector<Kernel> out;
#if defined(SA_HAVE_CPU_KERNEL)
  out.emplace_back(kernels::cpu_kernel(), "built-in");
#endif
#if defined(SA_HAVE_NAIVE_KERNEL)
  out.emplace_back(kernels::naive_kernel(), "built-in");
#endif
#if defined(SA_HAVE_CUDA_KERNEL)
  out.emplace_back(kernels::cuda_kernel(), "built-in");
#endif
  return out;
}

std::string builtin_simd_target(const std::string& name) {
#if defined(SA_HAVE_CPU_KERNEL)
  if (name == "cpu") {
    std::string t = kernels::cpu::dispatch_target();
    if (std::string(kernels::cpu::cpu_isa_limit()) != "none")
      t += std::string(" (limited by SA_CPU_MAX_ISA=") + kernels::cpu::cpu_isa_limit() + ")";
    return t;
  }
#endif
  if (name == "naive") return "scalar C++";
  if (name == "cuda") return "CUDA device code";
  return "";
}

std::string builtin_environment_error() {
#if defined(SA_HAVE_CPU_KERNEL)
  return kernels::cpu::cpu_isa_limit_error();
#else
  return "";
#endif
}

}  // namespace sa
