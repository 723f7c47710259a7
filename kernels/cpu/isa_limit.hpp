// SA_CPU_MAX_ISA: the best instruction set the built-in CPU kernels may use
// in this process, read from the environment once, before the first vector
// call. It lets a machine with AVX-512 prove the AVX2 path end to end (the
// CTest runs labelled `avx2`, next to oneDNN's own ONEDNN_MAX_CPU_ISA=AVX2).
//
//   unset or empty   every target the CPU supports (the default)
//   AVX512           the same (no limit)
//   AVX2             no AVX-512 targets
//   SSE4 / EMU128    no AVX-512 and no AVX2: Highway's portable 128-bit target
//
// Case-insensitive. A value not in the list changes nothing here; the CLI
// refuses it before any work (cpu_isa_limit_error).
#pragma once

#include <string>

namespace sa::kernels::cpu {

// Applies the limit (idempotent, thread-safe); called by cpu_kernel() and by
// the vector code's dispatch before its first use.
void apply_cpu_isa_limit();
// The same every time it is called: for tests that mocked Highway's targets
// (hwy::SetSupportedTargetsForTest(0) resets the dispatch to the best target).
void reapply_cpu_isa_limit();

// Empty when SA_CPU_MAX_ISA is unset or valid, else a one-line error naming it.
std::string cpu_isa_limit_error();

// The Highway target the CPU attention library's vector code dispatches to
// now ("AVX3", "AVX2", "EMU128", ...).
const char* vector_dispatch_target();

// The limit in force ("none", "AVX2", "EMU128").
const char* cpu_isa_limit();

}  // namespace sa::kernels::cpu
