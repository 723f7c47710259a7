// Helpers shared by the tests of theory/ and reference/.
#pragma once

#include <rapidcheck.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "reference/mpfr.hpp"

namespace sa::testing {

// Relative difference |a - b| / max(|a|, |b|, tiny), as a double.
inline double rel_diff(const ref::Mp& a, const ref::Mp& b) {
  ref::Mp scale = abs(a) > abs(b) ? abs(a) : abs(b);
  if (scale == 0) return 0.0;
  return (abs(a - b) / scale).convert_to<double>();
}

// 2^-200: the agreement two high-precision evaluations at the default 256 bits
// must reach (each carries at most ~n * 2^-256 relative error, n < 2^40 here).
inline double mp_tolerance() { return std::ldexp(1.0, -200); }

// Logits drawn uniformly from [lo, lo + spread], as doubles.
inline rc::Gen<std::vector<double>> bounded_logits(int max_n, double lo, double spread) {
  return rc::gen::mapcat(rc::gen::inRange(1, max_n + 1), [=](int n) {
    return rc::gen::container<std::vector<double>>(
        static_cast<std::size_t>(n), rc::gen::map(rc::gen::inRange(0, 1 << 20), [=](int k) {
          return lo + spread * (static_cast<double>(k) / static_cast<double>(1 << 20));
        }));
  });
}

inline std::string show(const std::vector<double>& v) {
  std::ostringstream os;
  os.precision(17);
  os << "[";
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << "]";
  return os.str();
}

}  // namespace sa::testing
