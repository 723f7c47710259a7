// Helpers shared by the correctly rounded attention references' tests
// (attention_cr_test.cpp, attention_backward_cr_test.cpp): bit-identity of
// two result vectors, the output type of an input type, and the fallback
// tally each test prints when it ends.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/attention_case.hpp"
#include "core/dtype.hpp"
#include "reference/ziv.hpp"

namespace sa::test {

// The same double, bit for bit (every NaN equal to every NaN).
inline bool same(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) ||
         std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

// "" when x and y agree bit for bit, else the first difference.
inline std::string cmp(const char* what, const std::vector<double>& x,
                       const std::vector<double>& y) {
  if (x.size() != y.size()) return std::string(what) + ": sizes differ";
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!same(x[i], y[i])) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%s[%zu]: fast %.17g, MPFR-only %.17g", what, i, x[i], y[i]);
      return buf;
    }
  return "";
}

inline DType output_dtype(AttnType t) {
  return t == AttnType::bfloat16  ? DType::bfloat16
         : t == AttnType::float16 ? DType::float16
                                  : DType::float32;
}

// The fallback fraction of a test, printed when it ends.
struct Tally {
  const char* name;
  ref::CrStats st;
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> by_feature;  // outputs, to MPFR
  ~Tally() {
    if (st.elements == 0) return;
    std::printf("[%s] %lld outputs, fallback (MPFR) fraction %.4f\n", name,
                static_cast<long long>(st.elements), st.fallback_fraction());
    for (const auto& [f, n] : by_feature)
      std::printf(
          "[%s]   %-17s outputs %9lld  to MPFR %.4f\n", name, f.c_str(),
          static_cast<long long>(n.first),
          n.second > 0 ? static_cast<double>(n.second) / static_cast<double>(n.first) : 0.0);
  }
};

}  // namespace sa::test
