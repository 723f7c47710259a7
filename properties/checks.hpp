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

// Whether `got` is the infinity an exact finite value past the output
// format's range rounds to (IEEE 754: overflow to +-inf from (2 - 2^-p)
// 2^emax, float16's 65520 = 65504 + half an ulp), allowing the value's budget:
// e.g. a float16 log-softmax of -65594 is correctly -inf.
inline bool overflows_to(DType out, double got, double exact, double abs_budget) {
  if (!std::isinf(got) || !std::isfinite(exact) || (got > 0) != (exact > 0)) return false;
  const FloatFormat f = format_of(out);
  const double threshold = std::ldexp(2.0 - std::ldexp(1.0, -f.precision), f.emax);
  return std::abs(exact) + abs_budget >= threshold;
}

// One output against its exact (or expected) value under an absolute budget,
// measured in ulps of `out`. Non-finite values must match exactly, except the
// infinity a finite exact value past the format's range rounds to.
inline Check elem(DType out, double got, double exact, double abs_budget, const std::string& where,
                  const char* exact_word = "exact") {
  const std::string w = where + ": got " + fmt(got) + ", " + exact_word + " " + fmt(exact);
  if (overflows_to(out, got, exact, abs_budget))
    return make_check(0.0, abs_budget / budget::ulp(out, exact),
                      w + " (past " + name_of(out) + "'s range: the rounded value is infinite)");
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
  if (c.fails()) c.convention = budget::convention_allowing(out, got, exact, abs_budget);
  return c;
}

// elem() for an output of a row with statistics `st`: on a row kernel.h gives a
// limit where IEEE arithmetic gives NaN (st.ieee_special), a NaN output is
// allowed when the kernel declares ieee_special_values, and named as that
// convention when it does not.
inline Check elem_in_row(const budget::RowStats& st, DType out, double got, double exact,
                         double abs_budget, const std::string& where) {
  if (st.ieee_special && std::isnan(got) && !std::isnan(exact)) {
    if (active_conventions().ieee_special_values)
      return make_check(0.0, 0.0,
                        where + ": got nan, kernel.h's limit " + fmt(exact) +
                            " (NaN allowed: ieee_special_values)");
    Check c = elem(out, got, exact, abs_budget, where);
    c.convention = "ieee_special_values";
    return c;
  }
  return elem(out, got, exact, abs_budget, where);
}

// For a property that checks a whole row: when the row is one kernel.h gives
// limits for but IEEE arithmetic makes NaN (st.ieee_special) and the kernel's
// outputs there hold a NaN, the check of that row: a pass when the kernel
// declares ieee_special_values, else a failure naming that convention. Not
// applicable (applicable == false) otherwise: the row is checked as usual.
inline Check ieee_special_row(const budget::RowStats& st, bool outputs_have_nan,
                              const std::string& where) {
  if (!st.ieee_special || !outputs_have_nan) return Check{};
  if (active_conventions().ieee_special_values)
    return make_check(0.0, 0.0, where + ": NaN outputs allowed (ieee_special_values)");
  Check c = make_check(INFINITY, 0.0, where + ": NaN outputs where kernel.h defines the limits");
  c.convention = "ieee_special_values";
  return c;
}

// Why the kernel cannot run `op` in `t` (empty when it can): the note of the
// skip verdicts every property family emits for it.
inline std::string why_unsupported(const Kernel& k, Op op, DType t) {
  if (!k.supports(op)) return "kernel does not implement " + std::string(name_of(op));
  if (!k.supports(t)) return "kernel does not support " + std::string(name_of(t));
  // SA_DTYPE_F16 covers the row operations; attention in float16 (inputs and
  // budgets) is checked through attention_v2's arguments.
  if (op == Op::attention && t == DType::float16)
    return "not applicable: the single-head attention op is checked in float32 and bfloat16; "
           "float16 attention is checked through attention_v2";
  return "";
}

}  // namespace sa::props::detail
