// Small helpers shared by the property families: printing a number in a
// counterexample, and holding one output to an absolute budget measured in
// ulps of the output type.
#pragma once

#include <cmath>
#include <sstream>
#include <string>

#include "kernels/kernel.hpp"
#include "properties/budgets.hpp"
#include "properties/search.hpp"
#include "reference/mpfr.hpp"

namespace sa::props::detail {

inline std::string fmt(double x) {
  std::ostringstream os;
  os.precision(9);
  os << x;
  return os.str();
}

inline double d(const ref::Mp& x) { return x.convert_to<double>(); }

// One output against its exact (or expected) value under an absolute budget,
// measured in ulps of `out`. Non-finite values must match exactly.
inline Check elem(DType out, double got, double exact, double abs_budget, const std::string& where,
                  const char* exact_word = "exact") {
  const std::string w = where + ": got " + fmt(got) + ", " + exact_word + " " + fmt(exact);
  if (!std::isfinite(exact) || !std::isfinite(got)) {
    const bool same = (std::isnan(exact) && std::isnan(got)) || got == exact;
    return make_check(same ? 0.0 : INFINITY, 0.0, w);
  }
  if (exact == 0.0) {
    // ulps of 0 are the smallest subnormal's: an error of 1e-6 would read as
    // 1e39 "ulps". Report the absolute error, and say so.
    Check c = make_check(std::abs(got), abs_budget,
                         w + " (the exact value is 0: absolute error, not ulps)");
    c.unit = "absolute";
    return c;
  }
  const double u = budget::ulp(out, exact);
  Check c = make_check(std::abs(got - exact) / u, abs_budget / u, w);
  c.unit = std::string("ulps of ") + name_of(out);
  return c;
}

// Why the kernel cannot run `op` in `t` (empty when it can): the note of the
// skip verdicts every property family emits for it.
inline std::string why_unsupported(const Kernel& k, Op op, DType t) {
  if (!k.supports(op)) return "kernel does not implement " + std::string(name_of(op));
  if (!k.supports(t)) return "kernel does not support " + std::string(name_of(t));
  return "";
}

}  // namespace sa::props::detail
