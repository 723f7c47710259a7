// Verdicts as JSON: the one encoding the gate's child process, the --json
// output and the report all use.
//
// Non-finite numbers (JSON has none) are written as the strings "NaN",
// "Infinity", "-Infinity" and read back exactly; a missing number reads as NaN.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/verdict.hpp"

namespace sa::gate {

nlohmann::json number_to_json(double x);
double number_from_json(const nlohmann::json& j);  // NaN when absent or null

nlohmann::json to_json(const Verdict& v);
// Throws std::invalid_argument naming the field when `j` is not a verdict object.
Verdict verdict_from_json(const nlohmann::json& j);

Outcome parse_outcome(const std::string& s);  // throws std::invalid_argument

// Reads a JSON input file with limits stated up front: at most 512 MiB and
// 64 levels of nesting (a deeper document is refused before it is parsed, so
// no input can exhaust the stack). Throws std::invalid_argument naming the
// file and `what` was expected.
nlohmann::json read_json_file(const std::string& path, const std::string& what);
inline constexpr int kMaxJsonDepth = 64;

}  // namespace sa::gate
