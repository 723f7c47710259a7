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
//
// A peer declares only what it can do on the running CPU: each one's element
// types are probed once (oneDNN 2.6 has no bfloat16 softmax below AVX-512, so
// on an AVX2-only CPU, or under ONEDNN_MAX_CPU_ISA=AVX2, its bfloat16 column
// is left out and peer_gaps() says why).
#pragma once

#include <string>
#include <vector>

#include "softmax_audit/kernel.h"

namespace sa::calibration {

// Every peer compiled into this binary.
std::vector<const sa_kernel*> peer_kernels();

// An operation a peer lacks on this CPU, and the reason in words.
struct PeerGap {
  std::string peer;   // "onednn"
  std::string dtype;  // "bfloat16"
  std::string ops;    // "softmax, log_softmax"
  std::string why;    // "oneDNN 2.6.3 has no bfloat16 softmax on this CPU (...)"
};
std::vector<PeerGap> peer_gaps();

// Whether `peer` runs element type `dtype` (name_of(DType)) here.
bool peer_has(const std::string& peer, const std::string& dtype);

// One line per peer: its library version and the instruction set it runs
// (e.g. "onednn: oneDNN 2.6.3, effective ISA avx2, float32 softmax impl jit:avx2").
std::vector<std::string> peer_platform();

// For --expect-isa: empty when every peer and the built-in cpu kernel run at
// most instruction set `isa` ("avx2"), else what runs above it. It proves that
// ONEDNN_MAX_CPU_ISA, ATEN_CPU_CAPABILITY and SA_CPU_MAX_ISA took effect.
std::string isa_above(const std::string& isa);

}  // namespace sa::calibration
