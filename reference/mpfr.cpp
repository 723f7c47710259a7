#include "reference/mpfr.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace sa::ref {
namespace {
unsigned& current_bits() {
  static unsigned bits = [] {
    // Boost counts precision in decimal digits; pick the digits that give at
    // least the requested bits.
    Mp::default_precision(static_cast<unsigned>(std::ceil(default_precision_bits * 0.30103)) + 1);
    return default_precision_bits;
  }();
  return bits;
}
}  // namespace

void set_precision_bits(unsigned bits) {
  if (bits < 64 || bits > 1u << 20)
    throw std::invalid_argument("reference precision: " + std::to_string(bits) +
                                " bits requested, expected 64 to 1048576");
  current_bits();
  Mp::default_precision(static_cast<unsigned>(std::ceil(bits * 0.30103)) + 1);
  current_bits() = bits;
}

unsigned precision_bits() { return current_bits(); }

}  // namespace sa::ref
