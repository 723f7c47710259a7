// What every correctly rounded reference (Ziv's strategy) shares: the path
// selector, the per-call statistics, and the rounding test.
//
// A correctly rounded reference returns, for each output, the exact real
// result rounded to nearest-even in the target format (float32, bfloat16,
// float16, float64), bit-identical to rounding the
// MPFR reference (reference/softmax.hpp at 256 bits) with round_to()
// (reference/rounding.hpp). It computes each output at fast levels with a
// proven relative error bound eps (reference/fast_arith.hpp) and certifies
// the rounding: if every real in [v (1 - eps), v (1 + eps)] rounds to the
// same target value, that value is the correctly rounded result (rounding is
// monotone). Outputs the test cannot certify go to the next level, the last
// being MPFR.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"

namespace sa::ref {

enum class RefPath {
  fast,      // Ziv: double, then double-double, then MPFR for what is left (default)
  mpfr_only  // every output from the MPFR reference, then round_to()
};

struct CrStats {
  std::int64_t elements = 0;  // outputs produced
  std::int64_t level1 = 0;    // certified by the double level (includes exact zeros)
  std::int64_t level2 = 0;    // certified by the double-double level
  std::int64_t mpfr = 0;      // computed by MPFR (the fallback, or the whole mpfr_only path)
  double fallback_fraction() const {
    return elements > 0 ? static_cast<double>(mpfr) / static_cast<double>(elements) : 0.0;
  }
  CrStats& operator+=(const CrStats& o) {
    elements += o.elements, level1 += o.level1, level2 += o.level2, mpfr += o.mpfr;
    return *this;
  }
};

struct CrOptions {
  RefPath path = RefPath::fast;
  int threads = 0;           // 0: every core (OpenMP's default); 1: single thread
  CrStats* stats = nullptr;  // when set, this call's counts are added to it
  int fast_levels = 2;       // for tests: 1 sends what the double level leaves to MPFR
};

}  // namespace sa::ref
