// Attention backward in MPFR, and correctly rounded (interface v2; the
// semantics of include/softmax_audit/kernel.h's attention_backward, as the
// x87 reference reference/backward.hpp computes them): dq, dk, dv and
// dsinks from the case and dout, with the exact forward weights (not a
// kernel's out or lse).
//
// attention_backward_exact: the gradients at MPFR's working precision
// (reference/mpfr.hpp, 256 bits by default), rounded once to double; out
// and lse are the exact forward's. Accuracy: every MPFR quantity is a sum
// of at most n_k + d + dv + 16 terms each through at most 12 operations
// rounded at 2^-256, so each gradient is within (n_k n_q + d + dv + 64)
// 2^-255 < 2^-200 of the exact real value relative to the magnitudes summed
// (e.g. |scale| sum_j |ds_ij| |k_j| for dq, with ds_ij's own magnitude p_ij
// (|dp_ij| + |D_i| + sum_j p_ij |dp_ij|) |softcap'|) for sizes below 2^50:
// 256 bits leave some 2^-190 of those magnitudes between the MPFR value and
// the exact one, far below every target's half-ulp, which is what the
// correctly rounded path's bound (kMp = 2^-200) counts on. The operation
// order is fixed (attention_backward_cr.cpp): sums over keys in key order
// (except dq where every visible key holds the same k_x, without softcap:
// sc k_x p_sink D, its exact value, +0 without a sink, not rounding noise),
// over query rows by query head then row; dsinks[h] = 0 - sum of p_sink D
// term by term. NaN as reference/backward.hpp: a row with a NaN score or sink
// gives NaN dq, NaN dk and dv for its visible keys, NaN dsinks[h]. Fully
// masked rows (no visible key, no sink) contribute nothing; keys no query
// sees get dk = dv = +0 (times the scale's or v_descale's sign). Adaptive
// cases: std::invalid_argument.
//
// attention_backward_rounded: each of dq, dk, dv, dsinks correctly rounded
// (nearest-even) to t, bit-identical to round_to(t, x) of the MPFR value x
// above; RefPath::mpfr_only computes exactly that. The fast path (Ziv's
// strategy) computes every gradient in double-double arithmetic with a
// rigorous absolute error bound (the analysis is in
// attention_backward_cr.cpp, next to the rounding test) and certifies its
// rounding; gradients it cannot certify (intervals that straddle a rounding
// boundary, zeros of uncertain sign) are recomputed in MPFR from the MPFR
// rows they depend on. float64 targets, non-finite inputs, a zero or
// non-finite scale product or v_descale go to MPFR whole. Query rows, key
// rows and heads run in parallel (OpenMP, CrOptions::threads); each output
// is summed by one thread in a fixed order, so results do not depend on the
// thread count. CrStats counts every gradient element; level1 counts the
// double-double level (there is one fast level).
#pragma once

#include <span>
#include <vector>

#include "core/attention_case.hpp"
#include "reference/backward.hpp"
#include "reference/ziv.hpp"

namespace sa::ref {

AttentionGradients attention_backward_exact(const AttentionCase& c, std::span<const float> dout);

// Values of format t as doubles, laid out as AttentionGradients.
struct AttentionBackwardRounded {
  std::vector<double> dq, dk, dv, dsinks;
};

AttentionBackwardRounded attention_backward_rounded(DType t, const AttentionCase& c,
                                                    std::span<const float> dout,
                                                    const CrOptions& options = {});

}  // namespace sa::ref
