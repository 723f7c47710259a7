// The built-in production CPU kernel ("cpu"): float32 and bfloat16 row
// operations behind the C ABI (include/softmax_audit/kernel.h).
//
// - Vector code: Highway with runtime dispatch (AVX-512, AVX2, portable 128-bit).
// - Rows run in parallel on all cores (OpenMP); one row is always computed by
//   one thread, so a single-row call is a single-thread measurement.
// - bfloat16 is storage only: loads widen exactly, arithmetic is float32 with
//   double accumulation, results round once to nearest even.
// - Accuracy (float32, theta = 1, measured against the MPFR reference in
//   tests/cpu): softmax within 2 ulp of the correctly rounded value; the
//   two-float argument x - m (theory.md T7: the ~17 ulp floor of common
//   kernels is the rounding of x - max) and double sums make this possible.
// - Subnormal weights (below 2^-126) are produced with gradual underflow,
//   i.e. correctly rounded to within 2 ulp like the rest; on x86 each costs a
//   microcode assist, so rows whose weights are mostly that small run several
//   times slower (bench/softmax_bench.cpp measures it). With FTZ/DAZ set in
//   MXCSR by the caller they become 0 instead, at full speed.
// - Thresholds between the one-row algorithms (three-pass, scratch row, online
//   normaliser + recomputed exp) are in cpu_kernel.cpp, chosen by measurement.
// - attention is not part of this descriptor yet (pointer NULL, op bit unset).
#pragma once

#include "softmax_audit/kernel.h"

namespace sa::kernels {

// The descriptor; valid for the program's lifetime.
const sa_kernel* cpu_kernel();

}  // namespace sa::kernels
