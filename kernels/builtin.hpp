// The kernels shipped with softmax-audit, each behind the same C ABI an
// outside kernel implements. Which ones exist depends on the build (CUDA).
#pragma once

#include <vector>

#include "kernels/kernel.hpp"

namespace sa {

std::vector<Kernel> builtin_kernels();

}  // namespace sa
