// sa::builtin_kernels() for test builds in which no built-in kernel library
// exists yet (linked only into the gate's test driver, never the real CLI).
#include "kernels/builtin.hpp"

namespace sa {
std::vector<Kernel> builtin_kernels() { return {}; }
}  // namespace sa
