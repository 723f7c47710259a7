#include "properties/conventions.hpp"

namespace sa::props {

const std::vector<std::string>& convention_names() {
  static const std::vector<std::string> n = {"double_rounding", "flush_to_zero",
                                             "ieee_special_values", "low_precision_p"};
  return n;
}

bool declare_convention(Conventions& c, std::string_view name) {
  if (name == "double_rounding")
    c.double_rounding = true;
  else if (name == "flush_to_zero")
    c.flush_to_zero = true;
  else if (name == "ieee_special_values")
    c.ieee_special_values = true;
  else if (name == "low_precision_p")
    c.low_precision_p = true;
  else
    return false;
  return true;
}

std::string Conventions::names() const {
  std::string s;
  if (double_rounding) s = "double_rounding";
  if (flush_to_zero) s += std::string(s.empty() ? "" : ", ") + "flush_to_zero";
  if (ieee_special_values) s += std::string(s.empty() ? "" : ", ") + "ieee_special_values";
  if (low_precision_p) s += std::string(s.empty() ? "" : ", ") + "low_precision_p";
  return s;
}

Conventions& active_conventions() {
  thread_local Conventions c;
  return c;
}

}  // namespace sa::props
