#include "properties/conventions.hpp"

namespace sa::props {

const std::vector<std::string>& convention_names() {
  static const std::vector<std::string> n = {"double_rounding", "flush_to_zero",
                                             "ieee_special_values"};
  return n;
}

bool declare_convention(Conventions& c, std::string_view name) {
  if (name == "double_rounding")
    c.double_rounding = true;
  else if (name == "flush_to_zero")
    c.flush_to_zero = true;
  else if (name == "ieee_special_values")
    c.ieee_special_values = true;
  else
    return false;
  return true;
}

std::string Conventions::names() const {
  std::string s;
  if (double_rounding) s = "double_rounding";
  if (flush_to_zero) s += std::string(s.empty() ? "" : ", ") + "flush_to_zero";
  if (ieee_special_values) s += std::string(s.empty() ? "" : ", ") + "ieee_special_values";
  return s;
}

Conventions& active_conventions() {
  thread_local Conventions c;
  return c;
}

}  // namespace sa::props
