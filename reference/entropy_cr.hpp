// Correctly rounded Shannon entropy of softmax(logits / theta), H = -sum p_i
// log p_i, rounded to nearest-even in a target format.
//
// Accuracy: the correctly rounded value of the exact H, bit-identical to
// round_to(t, entropy(l, theta, EntropyDefinition::shannon)) (reference/
// softmax.hpp); RefPath::mpfr_only computes exactly that. Same semantics and
// errors as softmax.hpp.
//
// Range: as softmax_cr.hpp (float32, bfloat16, float16 on the fast path;
// float64 and NaN / +inf / fully masked rows through MPFR). H = log S - T/S
// with S = sum e^(d_i), T = sum e^(d_i) d_i (d_i = z_i - max <= 0): both
// terms are >= 0, so no cancellation; each is summed with a relative bound
// (entropy_cr.cpp). H = 0 exactly (one live logit) and values within ~2^-49
// / ~2^-70 of a rounding boundary go to MPFR. The paper's H = -sum p log(p +
// 1e-9) is not on the fast path yet (use reference/softmax.hpp).
#pragma once

#include <span>

#include "reference/ziv.hpp"

namespace sa::ref {

double shannon_entropy_rounded(DType t, std::span<const double> logits, double temperature = 1.0,
                               const CrOptions& options = {});

}  // namespace sa::ref
