// High-precision reference for single-head attention forward.
//
// logits s_ij = scale * sum_k q_ik k_jk, masked to -inf where
//   - key_mask is given and key_mask[j] == 0, or
//   - causal and j > i + (nk - nq)   (bottom-right alignment: the last query
//     sees every key, as FlashAttention >= 2.1 does when nq != nk).
// Per query i: H_i = Shannon entropy of softmax(s_i) (before any correction),
// beta_i = adaptive ? beta(H_i) (docs/theory.md T5) : 1,
// p_i = softmax(beta_i s_i), out_i = sum_j p_ij v_j, lse_i = log sum_j exp(beta_i s_ij).
// A fully masked query row gives out 0, lse -inf, H 0, beta 1.
// Matrices are row-major and contiguous: q nq x d, k nk x d, v nk x dv.
#pragma once

#include <cstdint>
#include <vector>

#include "reference/mpfr.hpp"

namespace sa::ref {

struct AttentionProblem {
  std::int64_t nq = 0, nk = 0, d = 0, dv = 0;
  std::vector<double> q, k, v;
  std::vector<std::uint8_t> key_mask;  // empty: no mask; else nk entries, 0 = masked
  double scale = 1.0;
  bool causal = false;
  bool adaptive = false;
};

struct AttentionResult {
  std::vector<Mp> out;                 // nq x dv
  std::vector<Mp> lse, entropy, beta;  // nq each
};

// Throws std::invalid_argument naming the offending field when sizes disagree.
void validate(const AttentionProblem& p);

AttentionResult attention(const AttentionProblem& p);

// Whether query i may see key j under the problem's causal and key masks.
bool key_visible(const AttentionProblem& p, std::int64_t i, std::int64_t j);

}  // namespace sa::ref
