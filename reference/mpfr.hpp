// The high-precision real type of the reference: MPFR through
// Boost.Multiprecision, precision chosen at run time.
//
// The default, 256 bits, is far above the 2 x 53 bits needed so that the
// reference's own error cannot change a float32/bfloat16 verdict: every
// reference function is accurate to well under 2^-200 relative for the
// problem sizes the suite uses (each operation adds at most 2^-256 relative
// error, and n <= 2^31 operations accumulate in at most 2^-225).
//
// The precision is a process-wide setting (Boost's MPFR default precision is a
// plain static): set it before starting threads that use the reference.
#pragma once

#include <boost/multiprecision/mpfr.hpp>

namespace sa::ref {

using Mp = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<0>,
                                         boost::multiprecision::et_off>;

constexpr unsigned default_precision_bits = 256;

// Boost counts MPFR precision in decimal digits: the digits that give at least `bits`.
constexpr unsigned digits10_for_bits(unsigned bits) { return bits * 30103u / 100000u + 2u; }

namespace detail {
// Every translation unit that can create an Mp sets the default precision
// before main, so no number is ever made at Boost's own default (~166 bits).
inline const bool default_precision_initialised = [] {
  Mp::default_precision(digits10_for_bits(default_precision_bits));
  return true;
}();
}  // namespace detail

// Sets the working precision of newly created reference numbers, in bits.
void set_precision_bits(unsigned bits);
unsigned precision_bits();

// Restores the previous precision when it goes out of scope.
class PrecisionScope {
 public:
  explicit PrecisionScope(unsigned bits) : saved_(precision_bits()) { set_precision_bits(bits); }
  ~PrecisionScope() { set_precision_bits(saved_); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  unsigned saved_;
};

}  // namespace sa::ref
