// What the conventions tests read of a suite run: one property's verdict
// (throws when the run gave none) and every verdict described, for messages.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "properties/suite.hpp"

namespace sa::conventions_test {

inline const sa::Verdict& verdict(const std::vector<sa::Verdict>& vs, const std::string& property) {
  for (const auto& v : vs)
    if (v.property == property) return v;
  throw std::runtime_error("no " + property + " verdict");
}

inline std::string all(const std::vector<sa::Verdict>& vs) {
  std::string s;
  for (const auto& v : vs) s += sa::describe(v) + "\n";
  return s;
}

}  // namespace sa::conventions_test
