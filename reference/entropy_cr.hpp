// Correctly rounded Shannon entropy of softmax(logits / theta), H = -sum p_i
// log p_i, rounded to nearest-even in a target format.
//
// Accuracy: the correctly rounded value of the exact H, bit-identical to
// round_to(t, entropy(l, theta, EntropyDefinition::shannon)) (reference/
// softmax.hpp); RefPath::mpfr_only computes exactly that. Same semantics and
// errors as softmax.hpp.
//
// Range: as softmax_cr.hpp (float32, bfloat16, float16, and float64 from
// the double-double level, on the fast path; NaN / +inf / fully masked rows
// through MPFR). H = log S - T/S
// with S = sum e^(d_i), T = sum e^(d_i) d_i (d_i = z_i - max <= 0): both
// terms are >= 0, so no cancellation; each is summed with a relative bound
// (entropy_cr.cpp). H = 0 exactly (one live logit) and values within ~2^-49
// / ~2^-70 of a rounding boundary go to MPFR.
//
// paper_entropy_rounded: the paper's definition H = -sum p_i log(p_i + 1e-9)
// (1e-9 the exact decimal, EntropyDefinition::paper_eps), bit-identical to
// round_to(t, entropy(l, theta, EntropyDefinition::paper_eps)). Each term's
// logarithm is formed with an absolute error bound (log(p + 1e-9) is in
// [-20.8, 1e-9]), so the bound on H is absolute: ~2^-46 at the double level,
// ~2^-90 at the double-double level. H is negative (down to -1e-9) when one
// weight is within ~1e-9 of 1; values of H within the bound of a rounding
// boundary, and H near its zero crossing (the top weight's negative term
// cancelling the rest), go to MPFR.
#pragma once

#include <span>

#include "reference/ziv.hpp"

namespace sa::ref {

double shannon_entropy_rounded(DType t, std::span<const double> logits, double temperature = 1.0,
                               const CrOptions& options = {});

double paper_entropy_rounded(DType t, std::span<const double> logits, double temperature = 1.0,
                             const CrOptions& options = {});

}  // namespace sa::ref
