// The built-in CUDA kernel's own source run by the host SIMT emulator
// (kernels/cuda/emulation.hpp), as a kernel plugin: `softmax-audit check
// --plugin .../libsa_cuda_emulated_plugin.so` gates it like any outside
// kernel, on a machine without a GPU. Its name is "cuda-emulated" and it
// declares what the CUDA kernel declares, so the gate draws the same cases
// as `check --builtin cuda` with the same seed and spec. That is how a
// failure seen on a GPU is reproduced here (docs/gpu.md, the H200 run).
// Slow (one host thread runs every CUDA thread); a test device, not a kernel.
#include "softmax_audit/kernel.h"

namespace sa::kernels {
const sa_kernel* cuda_kernel();
}

extern "C" __attribute__((visibility("default"))) const sa_kernel* sa_kernel_entry(void) {
  return sa::kernels::cuda_kernel();
}
