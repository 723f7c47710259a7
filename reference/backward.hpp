// References for the backward operations of interface v2
// (include/softmax_audit/kernel.h: softmax_backward, log_softmax_backward,
// attention_backward).
//
// Row operations, correctly rounded. For rows y (the forward's output, as
// given) and dy, each of n float values (float32, bfloat16 or float16 values
// carried as float), with temperature theta:
//   softmax_backward      dx_i = y_i (dy_i - <dy, y>) / theta
//   log_softmax_backward  dx_i = (dy_i - exp(y_i) sum_j dy_j) / theta
// `exact` holds each value rounded once to double; `rounded` the value
// correctly rounded (nearest-even) in the output type t.
//   softmax: every product of two float values is exact in 48 bits and a sum
//   of n <= 2^31 of them is exact in 640 bits (terms are multiples of 2^-298
//   below 2^256), so at 1024 bits everything up to the division by theta is
//   exact; a quotient x / theta (x <= 700 significant bits, theta a double)
//   that is not a rounding midpoint is at least 2^-800 relative away from
//   one, so rounding the 1024-bit quotient is correct rounding.
//   log-softmax: exp is irrational for y_i != 0 (Lindemann), so Ziv's
//   strategy: evaluate at 256 bits with an absolute error bound, round if the
//   whole error interval rounds to one value, else repeat at 1024 and 4096
//   bits (y_i = 0 is exact).
// NaN in a row's y or dy makes the whole row's dx NaN (the header's rule).
// Cost: a double-double pass with certified rounding (row_backward_fast.hpp);
// a row it cannot certify, O(n) MPFR operations at 1024 bits (log-softmax:
// 256, then 1024 and 4096 where needed).
//
// Attention backward in extended precision (long double, the forward
// reference's arithmetic, reference/attention.hpp), from the case alone:
// it recomputes the exact weights and output (it does not read a kernel's out
// or lse) and applies kernel.h's formulas. Accuracy: every value is within
// (n_k + n_q + d + dv + 32) 2^-63 of exact relative to the magnitudes summed
// (e.g. |scale| sum_j |ds_ij| |k_j| for dq), below 2^-40 of them for the
// suite's sizes, far under float32's 2^-24. Adaptive cases are refused
// (std::invalid_argument): kernel.h gives adaptive attention no backward.
#pragma once

#include <span>
#include <vector>

#include "core/attention_case.hpp"
#include "core/dtype.hpp"
#include "reference/ziv.hpp"

namespace sa::ref {

struct RowGradient {
  std::vector<double> exact;    // rounded once to double
  std::vector<double> rounded;  // correctly rounded in the output type
};

// One row each; y, dy of equal length n >= 1, theta > 0 finite. Computed in
// double-double with a proven error bound and certified rounding
// (row_backward_fast.hpp); a row with an output it cannot certify is computed
// as below in MPFR, which RefPath::mpfr_only does for every row: the results
// are the same bits on either path.
RowGradient softmax_backward(DType t, std::span<const float> y, std::span<const float> dy,
                             double theta = 1.0, RefPath path = RefPath::fast);
RowGradient log_softmax_backward(DType t, std::span<const float> y, std::span<const float> dy,
                                 double theta = 1.0, RefPath path = RefPath::fast);

// A directional derivative and a bound on its error: |value - exact| <= error.
struct DirectionalDerivative {
  double value = 0;
  double error = 0;
};

// d/de <dy, softmax((x + e v) / theta)> (or log_softmax) at e = 0,
// independent of the backward formula it checks. RefPath::fast: forward-mode
// automatic differentiation in double-double (row_backward_fast.hpp states
// its error bound), about 100x cheaper than MPFR; where it does not apply (a
// NaN or +inf in x, a non-finite dy or v, no live item, theta outside
// [2^-60, 2^60]) and on RefPath::mpfr_only: a central difference at e = 2^-90
// in 320-bit MPFR, truncation error below 2^-170 and cancellation error below
// 2^-200 relative to the terms, so the value is the directional derivative to
// ~2^-150 (error: 2^-140 times the terms' magnitude).
DirectionalDerivative softmax_directional_derivative(std::span<const float> x,
                                                     std::span<const float> dy,
                                                     std::span<const double> v, double theta,
                                                     bool log_softmax,
                                                     RefPath path = RefPath::fast);

struct AttentionGradients {
  std::vector<double> dq;      // total_q x heads_q x d (packed BSHD)
  std::vector<double> dk;      // total_k x heads_kv x d
  std::vector<double> dv;      // total_k x heads_kv x dv
  std::vector<double> dsinks;  // heads_q (empty without sinks)
  std::vector<double> out;     // the exact forward output (total_q x heads_q x dv)
  std::vector<double> lse;     // the exact forward lse (total_q x heads_q)
};

// dout: total_q x heads_q x dv (packed BSHD), float values.
AttentionGradients attention_backward(const AttentionCase& c, std::span<const float> dout);

}  // namespace sa::ref
