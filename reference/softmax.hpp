// High-precision reference for softmax and everything derived from one row of
// logits. Inputs are doubles (every float32 and bfloat16 input is one,
// exactly); results are MPFR numbers at the working precision (mpfr.hpp).
//
// Semantics (identical to the kernel interface, include/softmax_audit/kernel.h):
//   logits are divided by the temperature theta (> 0, finite) first;
//   -inf logit          weight 0 (a mask), log-weight -inf;
//   all logits -inf     fully masked row: weights 0, log-softmax -inf,
//                       lse -inf, entropy 0, adaptive beta 1;
//   +inf logits         the limit as they grow: the k items at +inf share
//                       weight 1/k, the rest 0; lse +inf; entropy log k;
//   NaN anywhere        every output of the row is NaN;
//   n = 0, theta <= 0 or non-finite: std::invalid_argument naming the input.
#pragma once

#include <span>
#include <vector>

#include "reference/mpfr.hpp"
#include "theory/streamed_entropy.hpp"

namespace sa::ref {

enum class EntropyDefinition {
  shannon,   // H = -sum p log p
  paper_eps  // H = -sum p log(p + 1e-9), the paper's JAX code (1e-9 as an exact decimal)
};

const char* name_of(EntropyDefinition d);

std::vector<Mp> softmax(std::span<const double> logits, double temperature = 1.0);
std::vector<Mp> log_softmax(std::span<const double> logits, double temperature = 1.0);
Mp log_sum_exp(std::span<const double> logits, double temperature = 1.0);

// Entropy of softmax(logits / theta), computed from the weights directly.
Mp entropy(std::span<const double> logits, double temperature = 1.0,
           EntropyDefinition def = EntropyDefinition::shannon);

// docs/theory.md T6: the (m, S, T) state of the row after pushing every logit in
// order, at high precision, and the entropy it gives.
theory::EntropyState<Mp> entropy_state(std::span<const double> logits, double temperature = 1.0);
Mp streamed_entropy(std::span<const double> logits, double temperature = 1.0);

// docs/theory.md T5: H of softmax(l/theta) under `def`, beta(H), out = softmax(beta l / theta).
struct AdaptiveResult {
  std::vector<Mp> weights;
  Mp beta;
  Mp entropy;
};
AdaptiveResult adaptive_softmax(std::span<const double> logits, double temperature = 1.0,
                                EntropyDefinition def = EntropyDefinition::paper_eps);

// Softmax of already-scaled high-precision logits (used by attention and tests).
std::vector<Mp> softmax_of(std::span<const Mp> z);
Mp shannon_entropy_of(std::span<const Mp> weights);
Mp paper_entropy_of(std::span<const Mp> weights);

}  // namespace sa::ref
