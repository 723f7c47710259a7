// Correctly rounded log-softmax and log-sum-exp: z_i - lse and lse =
// log sum_j e^(z_j), z = logits / theta, rounded to nearest-even in a target
// format.
//
// Accuracy: every output is the correctly rounded value of the exact real
// result, bit-identical to rounding the MPFR reference (reference/softmax.hpp)
// with round_to(): log_softmax_rounded(t, l, theta)[i] == round_to(t,
// log_softmax(l, theta)[i]) and log_sum_exp_rounded(t, l, theta) ==
// round_to(t, log_sum_exp(l, theta)); RefPath::mpfr_only computes exactly
// that. Same semantics and errors as softmax.hpp.
//
// Range: as softmax_cr.hpp (float32, bfloat16, float16, and float64 from
// the double-double level, on the fast path; NaN / +inf / fully masked rows
// through MPFR). log S comes from
// std::log corrected by one Newton step on the proven exp2, so its error is
// bounded a posteriori (log_softmax_cr.cpp). An output that is exactly 0
// (the maximum of a row whose other logits are all masked) and outputs
// within ~2^-50 (double level) / ~2^-73 (double-double level) of a rounding
// boundary go to MPFR, which recomputes the whole row: rows where one logit
// dominates the rest by > ~35 nats make the maximum's output -log S tiny
// and send it there.
#pragma once

#include <span>
#include <vector>

#include "reference/ziv.hpp"

namespace sa::ref {

std::vector<double> log_softmax_rounded(DType t, std::span<const double> logits,
                                        double temperature = 1.0, const CrOptions& options = {});

double log_sum_exp_rounded(DType t, std::span<const double> logits, double temperature = 1.0,
                           const CrOptions& options = {});

}  // namespace sa::ref
