// Correct rounding of reference values to the formats kernels produce, and
// error measured in ulps.
//
// round_to(t, x) is x rounded to nearest, ties to even, in format t, with
// gradual underflow and overflow to +-inf exactly as IEEE 754 does it (for
// bfloat16: float32's exponent range, 8-bit significand; for float16: IEEE
// binary16, subnormals k 2^-24, overflow to inf from 65520). Boost's
// convert_to<float>() must not be used for this: it goes through double and
// can round twice.
//
// ulp_at(t, x) = 2^(max(floor(log2 |x|), emin) - p + 1): the spacing of
// format t in the binade of the exact value x (the subnormal spacing below
// the normal range, the smallest subnormal at 0).
//
// ulp_error(t, computed, exact) = |computed - exact| / ulp_at(t, exact), so a
// correctly rounded result measures <= 0.5. Special values: equal infinities
// or NaN against NaN measure 0; any other mismatch with a non-finite value
// measures +inf.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"
#include "reference/mpfr.hpp"

namespace sa::ref {

// The correctly rounded value of x in format t, returned as a double (exact:
// every float64, float32, bfloat16 and float16 value is a double).
double round_to(DType t, const Mp& x);

float round_to_float32(const Mp& x);
std::uint16_t round_to_bfloat16_bits(const Mp& x);

// Whether some real within 2^-bits |x| of x rounds (round_to) differently
// from x: the rounding of a value known to that relative accuracy is not
// decided.
bool rounding_undecided(DType t, const Mp& x, int bits);

double ulp_at(DType t, const Mp& x);
double ulp_error(DType t, double computed, const Mp& exact);

// Number of representable values of format t strictly between a and b plus
// one (0 when equal; 1 for neighbours). a and b must be values of format t
// (float32, bfloat16 or float16). NaN against anything is INT64_MAX.
std::int64_t ulps_apart(DType t, double a, double b);

}  // namespace sa::ref
