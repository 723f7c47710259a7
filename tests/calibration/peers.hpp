// Softmax implementations nobody here wrote, behind the project's one kernel
// interface (include/softmax_audit/kernel.h), so that the same suite and the
// same rules judge them as judge our kernels. Used to calibrate the rules
// (calibrate.cpp): a rule that fails one of these on a size or input where the
// library is right is a false alarm.
//
//   eigen   Eigen 3.4 array expressions (the way bench/softmax_bench.cpp calls
//           it): m = maxCoeff, Y = (X - m).exp(), Y *= 1 / Y.sum(); float32
//           only. Compiled with this project's flags (no -march: SSE2 packets).
//   onednn  oneDNN's softmax_forward / logsoftmax_forward primitives, axis 1,
//           forward_inference, float32 and bfloat16 (when oneDNN is found).
//   torch   PyTorch's at::softmax / at::log_softmax on CPU tensors, dim -1,
//           one thread, float32 and bfloat16 (when libtorch is found).
// Temperature: the logits are divided by theta in float32 before the call.
// Only softmax and log_softmax are provided.
#pragma once

#include <vector>

#include "softmax_audit/kernel.h"

namespace sa::calibration {

// Every peer compiled into this binary.
std::vector<const sa_kernel*> peer_kernels();

}  // namespace sa::calibration
