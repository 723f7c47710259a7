// The fast level of the row backward references (backward.hpp): double-double
// arithmetic (fast_arith.hpp) with an error bound proved next to the code
// (row_backward_fast.cpp), and the rounding certified as ziv.hpp describes.
// Each function returns false when it cannot decide every output (a value
// whose error interval straddles a rounding boundary, an input outside the
// ranges below); the caller then computes the row with MPFR, so the results
// are always the MPFR path's, bit for bit.
//
// Ranges: every y and dy finite; 2^-60 <= theta <= 2^60; log-softmax's y <= 111.
#pragma once

#include <span>

#include "core/dtype.hpp"
#include "reference/backward.hpp"

namespace sa::ref::detail {

// dx_i = y_i (dy_i - <dy, y>) / theta: exact, correctly rounded to double
// (`exact`) and to t (`rounded`), as softmax_backward.
bool softmax_backward_fast(DType t, std::span<const float> y, std::span<const float> dy,
                           double theta, RowGradient& out);

// dx_i = (dy_i - exp(y_i) sum_j dy_j) / theta, as log_softmax_backward.
bool log_softmax_backward_fast(DType t, std::span<const float> y, std::span<const float> dy,
                               double theta, RowGradient& out);

// d/de <dy, f((x + e v) / theta)> at e = 0 by forward-mode automatic
// differentiation: dual numbers (value, derivative) over double-double carry
// the forward computation (exp, sums, one quotient for softmax; the log-sum
// for log-softmax), so the derivative is the chain rule applied by the
// arithmetic, never a written gradient formula. `error` bounds |value -
// exact| (first order, with a factor 4 of slack): (n + 4) 2^-92 M, where M =
// sum_i |dy_i| p_i |g_i| + (sum_i |dy_i| p_i) (sum_j p_j |g_j|) for softmax
// and sum_i |dy_i| |g_i| + (sum_i |dy_i|) (sum_j p_j |g_j|) for log-softmax
// (g = v / theta, p the exact weights), plus (3n + 3) 2^-159 (1 + sum |dy|)
// (1 + sum |g|) when an item's weight is below e^-111 and left out. False
// without a live item or with a non-finite v.
bool directional_derivative_fast(std::span<const float> x, std::span<const float> dy,
                                 std::span<const double> v, double theta, bool log_softmax,
                                 DirectionalDerivative& out);

}  // namespace sa::ref::detail
