// The reference values the properties compare kernels with, as doubles: the
// exact results rounded to double by the correctly rounded references
// (reference/softmax_cr.hpp, log_softmax_cr.hpp, entropy_cr.hpp,
// adaptive_cr.hpp; Ziv's strategy, MPFR only for what the fast levels cannot
// decide). The environment variable SA_REFERENCE selects the path: unset or
// "fast" (the default), or "mpfr" (the MPFR reference alone, then rounded:
// bit-identical values, slower; for cross-checking a surprising verdict).
// Any other value throws std::invalid_argument naming it.
#pragma once

#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/adaptive_cr.hpp"
#include "reference/entropy_cr.hpp"
#include "reference/log_softmax_cr.hpp"
#include "reference/softmax_cr.hpp"

namespace sa::props::detail {

inline ref::CrOptions reference_options() {
  static const ref::RefPath path = [] {
    const char* s = std::getenv("SA_REFERENCE");
    const std::string v = s ? s : "";
    if (v.empty() || v == "fast") return ref::RefPath::fast;
    if (v == "mpfr") return ref::RefPath::mpfr_only;
    throw std::invalid_argument("SA_REFERENCE=" + v + ": expected fast or mpfr");
  }();
  ref::CrOptions o;
  o.path = path;
  return o;
}

inline std::vector<double> ref_softmax(std::span<const double> l, double theta = 1.0) {
  return ref::softmax_rounded(DType::float64, l, theta, reference_options());
}
inline std::vector<double> ref_log_softmax(std::span<const double> l, double theta = 1.0) {
  return ref::log_softmax_rounded(DType::float64, l, theta, reference_options());
}
inline double ref_log_sum_exp(std::span<const double> l, double theta = 1.0) {
  return ref::log_sum_exp_rounded(DType::float64, l, theta, reference_options());
}
inline double ref_shannon_entropy(std::span<const double> l, double theta = 1.0) {
  return ref::shannon_entropy_rounded(DType::float64, l, theta, reference_options());
}
inline ref::AdaptiveRounded ref_adaptive(std::span<const double> l, double theta,
                                         ref::EntropyDefinition def) {
  return ref::adaptive_softmax_rounded(DType::float64, l, theta, def, reference_options());
}

}  // namespace sa::props::detail
