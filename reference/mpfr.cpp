#include "reference/mpfr.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace sa::ref {
namespace {
unsigned& current_bits() {
  static unsigned bits = default_precision_bits;  // set before main (mpfr.hpp)
  return bits;
}
}  // namespace

void set_precision_bits(unsigned bits) {
  if (bits < 64 || bits > 1u << 20)
    throw std::invalid_argument("reference precision: " + std::to_string(bits) +
                                " bits requested, expected 64 to 1048576");
  Mp::default_precision(digits10_for_bits(bits));
  current_bits() = bits;
}

unsigned precision_bits() { return current_bits(); }

}  // namespace sa::ref
