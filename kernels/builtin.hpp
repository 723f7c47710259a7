// The kernels shipped with softmax-audit, each behind the same C ABI an
// outside kernel implements. Which ones exist depends on the build (CUDA).
#pragma once

#include <string>
#include <vector>

#include "kernels/kernel.hpp"

namespace sa {

std::vector<Kernel> builtin_kernels();

// The instruction set a built-in kernel runs on in this process, for the
// audit's provenance: the CPU kernel's Highway runtime dispatch target (e.g.
// "AVX2"), "scalar C++" for the naive kernel, "CUDA device code" for the CUDA
// kernel; "" for a name that is not a built-in kernel.
std::string builtin_simd_target(const std::string& name);
// Empty when the built-in kernels' environment settings are valid (today:
// SA_CPU_MAX_ISA, kernels/cpu/isa_limit.hpp), else a one-line error naming it.
std::string builtin_environment_error();

}  // namespace sa
