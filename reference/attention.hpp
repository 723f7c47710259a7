// Reference for batched attention forward with every feature of interface v2
// (include/softmax_audit/kernel.h, sa_attention_v2_args: GQA/MQA, varlen,
// causal in both alignments, sliding window, softcap, ALiBi, sinks, key
// padding, fp8 descales, lse, entropy, adaptive temperature, the boolean,
// additive, block-sparse and tree masks). It follows the
// header's semantics exactly; core/attention_case.hpp says how a case is
// stored.
//
// Two precisions, one algorithm:
//   attention_exact  MPFR (reference/mpfr.hpp's working precision). Cost
//                       about 1 us per multiply-add: small cases only. A
//                       row with saturated softcap scores whose double
//                       rounding that precision leaves open is computed
//                       again at the precision its saturation needs
//                       (attention_row.hpp, row_precision_bits).
//   attention_v2        x87 extended precision (64-bit significand, long
//                       double). Inputs are float32 values or narrower, so
//                       every product q_c k_c is exact; a dot product of d
//                       terms is within d * 2^-64 * sum |q_c k_c| of exact;
//                       exp, log and tanh are within a few 2^-64 relative.
//                       Every output is therefore within (n_k + d + 16) *
//                       2^-63 of exact relative to the magnitudes involved
//                       (sum_j p_j |v_j| for out; |lse| + 1 for lse; log n_k + 1
//                       for the entropy), which is below 2^-40 of those
//                       magnitudes for n_k, d <= 2^20, far under float32's
//                       2^-24 unit roundoff. The test
//                       AttentionReference.ExtendedAgreesWithMpfr measures
//                       the agreement on random cases of every feature.
// Both return values rounded once to double.
#pragma once

#include <vector>

#include "core/attention_case.hpp"

namespace sa::ref {

struct AttentionValues {
  std::vector<double> out;                 // total_q x heads_q x dv
  std::vector<double> lse, entropy, beta;  // total_q x heads_q
};

AttentionValues attention_v2(const AttentionCase& c);
AttentionValues attention_exact(const AttentionCase& c);

// Whether query i of sequence b sees key j, by causal, window and key padding
// (kernel.h's step 4); the same test the reference uses.
bool key_visible(const AttentionCase& c, std::int64_t b, std::int64_t i, std::int64_t j);

// Whether query i of sequence b, query head h sees key j: key_visible and
// kernel.h's attn_mask, block_mask and tree_mask (step 4, all by AND).
bool key_visible(const AttentionCase& c, std::int64_t b, std::int64_t h, std::int64_t i,
                 std::int64_t j);

// kernel.h's step 3b: attn_bias of (b, h, i, j), 0 without one.
float score_bias(const AttentionCase& c, std::int64_t b, std::int64_t h, std::int64_t i,
                 std::int64_t j);

}  // namespace sa::ref
