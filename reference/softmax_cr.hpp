// Correctly rounded softmax: softmax(logits / theta) rounded to nearest-even
// in a target format, fast enough to check every element of a row of 2^24.
//
// Accuracy: every output is the correctly rounded value of the exact real
// result (NaN where the reference gives NaN, +0 for masked and underflowed
// weights), bit-identical to rounding the MPFR reference: for each i,
// softmax_rounded(t, l, theta)[i] == round_to(t, softmax(l, theta)[i]) with
// reference/softmax.hpp and reference/rounding.hpp (RefPath::mpfr_only
// computes exactly that). Same semantics and the same std::invalid_argument
// for n = 0 or a temperature that is not finite and > 0 (softmax.hpp).
//
// Range: any double logits and temperature. Targets float32, bfloat16,
// float16 take the fast path (Ziv's strategy, ziv.hpp): a double level with
// relative error <= ~2^-49.7, a double-double level (<= 2^-73 for n <= 2^30)
// for the outputs the double level cannot certify, MPFR for what is left;
// the error analysis is in softmax_cr.cpp next to each test. float64 (the
// exact value rounded to double, what the properties compare kernels with)
// takes the double-double level directly (the double level cannot decide a
// 53-bit rounding). Rows with NaN or +inf, rows fully masked, and rows where logits / theta
// overflows or |max| > 2^50 with theta != 1 go to MPFR whole (exact or
// rare). Time: ~10-20 ns per element per core at the double level.
#pragma once

#include <span>
#include <vector>

#include "reference/ziv.hpp"

namespace sa::ref {

// The values are doubles holding values of format t exactly.
std::vector<double> softmax_rounded(DType t, std::span<const double> logits,
                                    double temperature = 1.0, const CrOptions& options = {});

}  // namespace sa::ref
