// device_memory() for builds without CUDA: nothing can be staged to a GPU.
#include "kernels/kernel.hpp"

namespace sa {
const DeviceMemory& device_memory() {
  static const DeviceMemory none{nullptr, nullptr, nullptr, nullptr, [] {
                                   return "this build of softmax-audit has no CUDA support "
                                          "(configure with nvcc present, SA_CUDA=AUTO or ON)";
                                 }};
  return none;
}
}  // namespace sa
