#include "gate/verdict_json.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace sa::gate {

nlohmann::json number_to_json(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  return x;
}

double number_from_json(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto s = j.get<std::string>();
    if (s == "Infinity" || s == "inf") return INFINITY;
    if (s == "-Infinity" || s == "-inf") return -INFINITY;
    if (s == "NaN" || s == "nan") return NAN;
    throw std::invalid_argument("expected a number or \"NaN\"/\"Infinity\"/\"-Infinity\", got \"" +
                                s + "\"");
  }
  if (j.is_null()) return NAN;
  throw std::invalid_argument("expected a number, got " + j.dump());
}

Outcome parse_outcome(const std::string& s) {
  for (Outcome o :
       {Outcome::pass, Outcome::fail, Outcome::skip, Outcome::error, Outcome::incomplete})
    if (s == name_of(o)) return o;
  throw std::invalid_argument("outcome \"" + s +
                              "\": expected pass, fail, skip, error or incomplete");
}

nlohmann::json to_json(const Verdict& v) {
  nlohmann::json j;
  j["property"] = v.property;
  j["outcome"] = name_of(v.outcome);
  j["claim"] = v.claim;
  j["measured"] = number_to_json(v.measured);
  j["bound"] = number_to_json(v.bound);
  j["rule"] = {{"id", v.rule.id}, {"source", v.rule.source}};
  j["counterexample"] = v.counterexample;
  j["kernel"] = v.kernel;
  j["op"] = v.op;
  j["dtype"] = v.dtype;
  j["note"] = v.note;
  j["worst_case"] = v.worst_case;
  // Wall seconds the suite spent on it (absent when not measured).
  if (std::isfinite(v.seconds)) j["seconds"] = v.seconds;
  // Of those, inside the kernel's calls (absent when not measured).
  if (std::isfinite(v.kernel_seconds)) j["kernel_seconds"] = v.kernel_seconds;
  if (v.cases >= 0) j["cases"] = v.cases;
  // A coverage verdict's table: the cases run per feature and feature pair.
  if (!v.coverage.empty()) {
    j["coverage"] = nlohmann::json::array();
    for (const auto& c : v.coverage)
      j["coverage"].push_back({{"cell", c.cell}, {"cases", c.cases}, {"required", c.required}});
  }
  return j;
}

Verdict verdict_from_json(const nlohmann::json& j) {
  if (!j.is_object())
    throw std::invalid_argument("verdict: expected a JSON object, got " + j.dump());
  auto str = [&](const char* key, bool required) -> std::string {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
      if (required) throw std::invalid_argument(std::string("verdict: missing \"") + key + "\"");
      return {};
    }
    if (!it->is_string())
      throw std::invalid_argument(std::string("verdict: \"") + key + "\" must be a string");
    return it->get<std::string>();
  };
  Verdict v;
  v.property = str("property", true);
  v.outcome = parse_outcome(str("outcome", true));
  v.claim = str("claim", false);
  try {
    v.measured = j.contains("measured") ? number_from_json(j["measured"]) : NAN;
    v.bound = j.contains("bound") ? number_from_json(j["bound"]) : NAN;
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("verdict " + v.property + ": measured/bound: " + e.what());
  }
  if (auto it = j.find("rule"); it != j.end() && it->is_object()) {
    v.rule.id = it->value("id", "");
    v.rule.source = it->value("source", "");
  } else if (it != j.end() && it->is_string()) {
    v.rule.id = it->get<std::string>();
  }
  v.counterexample = str("counterexample", false);
  v.kernel = str("kernel", false);
  v.op = str("op", false);
  v.dtype = str("dtype", false);
  v.note = str("note", false);
  v.worst_case = str("worst_case", false);
  if (auto it = j.find("seconds"); it != j.end() && !it->is_null()) {
    if (!it->is_number())
      throw std::invalid_argument("verdict " + v.property + ": \"seconds\" must be a number");
    v.seconds = it->get<double>();
  }
  if (auto it = j.find("kernel_seconds"); it != j.end() && !it->is_null()) {
    if (!it->is_number())
      throw std::invalid_argument("verdict " + v.property +
                                  ": \"kernel_seconds\" must be a number");
    v.kernel_seconds = it->get<double>();
  }
  if (auto it = j.find("cases"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < 0)
      throw std::invalid_argument("verdict " + v.property +
                                  ": \"cases\" must be a non-negative integer");
    v.cases = it->get<std::int64_t>();
  }
  if (auto it = j.find("coverage"); it != j.end() && !it->is_null()) {
    if (!it->is_array())
      throw std::invalid_argument("verdict " + v.property + ": \"coverage\" must be an array");
    for (const auto& c : *it) {
      if (!c.is_object() || !c.contains("cell") || !c["cell"].is_string() ||
          !c.value("cases", nlohmann::json()).is_number_integer() ||
          !c.value("required", nlohmann::json()).is_number_integer())
        throw std::invalid_argument("verdict " + v.property +
                                    ": a coverage cell must be {\"cell\": string, \"cases\": "
                                    "integer, \"required\": integer}");
      v.coverage.push_back({c["cell"].get<std::string>(), c["cases"].get<std::int64_t>(),
                            c["required"].get<std::int64_t>()});
    }
  }
  return v;
}

nlohmann::json read_json_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw std::invalid_argument(path + ": not a readable file; expected " + what);
  if (std::filesystem::file_size(path, ec) > (std::uintmax_t(512) << 20))
    throw std::invalid_argument(path + ": larger than 512 MiB; expected " + what);
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in && !in.eof()) throw std::invalid_argument(path + ": cannot read; expected " + what);
  // Nesting depth, outside strings.
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth)
        throw std::invalid_argument(path + ": nested deeper than " + std::to_string(kMaxJsonDepth) +
                                    " levels; expected " + what);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(path + ": not valid JSON (" + e.what() + "); expected " + what);
  } catch (const nlohmann::json::exception& e) {
    // e.g. out_of_range for a number beyond double's range (1e999)
    throw std::invalid_argument(path + ": not readable JSON (" + e.what() + "); expected " + what);
  }
}

}  // namespace sa::gate
