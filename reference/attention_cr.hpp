// Correctly rounded attention forward (interface v2, every feature of
// reference/attention.hpp): each output (out, lse, entropy, beta) rounded
// to nearest-even in a target format.
//
// Accuracy: bit-identical to rounding the MPFR reference's value once: for
// every query row, every field equals round_to(t, x) (reference/rounding.hpp)
// with x the row's value in MPFR before any rounding to double (the row
// computation of attention_exact, reference/attention_row.hpp);
// RefPath::mpfr_only computes exactly that. A row with saturated softcap
// scores (|x / c| > 64) whose rounding 256 bits leave within 2^-200 of a
// boundary is computed again at the precision its saturation needs
// (detail::row_precision_bits: 2 log2(e) max |x / c| bits more), so that
// scores tanh rounds together at 256 bits keep their order (issue 31). NaN
// where the reference gives NaN. Same semantics and the same std::invalid_argument (validate()) as
// attention_v2.hpp.
//
// Fast path (Ziv's strategy, ziv.hpp), one query row at a time: scores q.k
// as double-double dot products (the products of float inputs are exact in
// double, compensated sums), scale and fp8 descales, softcap c tanh(s/c)
// (tanh from the double-double exp), ALiBi, masks and the sink exactly as
// kernel.h; weights by the double exp (exp1) relative to the row's largest
// score held as a double-double; compensated sums for the denominator, each
// numerator sum_j e_j v_j and the entropy's sum_j e_j d_j; lse and entropy
// through log1p / log_of; with the adaptive temperature, the entropy's
// estimate gives beta's (fast::beta_of) and a second pass at beta gives lse
// and out. Each output carries an a-posteriori bound on its error (the
// analysis is in attention_cr.cpp, next to the test); a row whose outputs
// the double level cannot all certify is retried at a double-double level
// (exp2, double-double sums), then recomputed whole in MPFR. Targets
// float32, bfloat16, float16 take the fast path; float64, rows with
// non-finite inputs, a non-finite or zero v_descale, and rows whose scores
// carry more than 2^-40 of absolute error (|scores| beyond ~2^60) go to
// MPFR whole. Rows run in parallel (OpenMP, CrOptions::threads).
#pragma once

#include <vector>

#include "core/attention_case.hpp"
#include "reference/ziv.hpp"

namespace sa::ref {

// Values of format t as doubles, laid out as AttentionValues.
struct AttentionRounded {
  std::vector<double> out;                 // total_q x heads_q x dv
  std::vector<double> lse, entropy, beta;  // total_q x heads_q
};

// CrStats counts dv + 3 outputs per query row (out, lse, entropy, beta);
// a row that falls back counts all of them as MPFR.
AttentionRounded attention_rounded(DType t, const AttentionCase& c, const CrOptions& options = {});

}  // namespace sa::ref
