// Correctly rounded adaptive softmax (docs/theory.md T5, the paper's adaptive
// temperature): H = entropy of softmax(l / theta) under `def`, beta =
// beta(H) (theory/adaptive_temperature.hpp), weights = softmax(beta l /
// theta); each output rounded to nearest-even in a target format.
//
// Accuracy: bit-identical to rounding each field of the MPFR reference's
// adaptive_softmax(l, theta, def) (reference/softmax.hpp) with round_to();
// RefPath::mpfr_only computes exactly that. Same semantics and errors as
// softmax.hpp.
//
// Range: as softmax_cr.hpp. H comes from the entropy levels (entropy_cr.cpp);
// beta from the paper's polynomial on H in double-double with a bound from
// |poly'| (adaptive_cr.cpp); the weights from softmax's levels on the row of
// d_i = beta (z_i - m), whose argument error carries beta's (ziv_row.cpp). A
// beta certified to be exactly 1 (H outside the correction interval, about
// (0.849, 5.944)) gives softmax(z) itself. The double level's beta is good
// to ~2^-44, the double-double level's to ~2^-85: outputs the first cannot
// decide are retried with the second, then MPFR (the whole reference, once).
#pragma once

#include <span>
#include <vector>

#include "reference/softmax.hpp"
#include "reference/ziv.hpp"

namespace sa::ref {

struct AdaptiveRounded {
  std::vector<double> weights;  // values of format t, as doubles
  double beta = 0;
  double entropy = 0;
};

// CrStats counts n + 2 outputs: the weights, beta and the entropy.
AdaptiveRounded adaptive_softmax_rounded(DType t, std::span<const double> logits,
                                         double temperature = 1.0,
                                         EntropyDefinition def = EntropyDefinition::paper_eps,
                                         const CrOptions& options = {});

}  // namespace sa::ref
