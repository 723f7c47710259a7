#include "gate/spec.hpp"

#include <toml++/toml.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <fstream>
#include <set>
#include <sstream>

namespace sa::gate {

namespace {

std::string where(const std::string& origin, const toml::node& n) {
  const auto& s = n.source();
  if (s.begin.line == 0) return origin;
  return origin + ":" + std::to_string(s.begin.line);
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + v[i];
  return out;
}

[[noreturn]] void fail(const std::string& at, const std::string& key, const std::string& what) {
  throw SpecError(at + ": key '" + key + "': " + what);
}

// An array of strings (a single string is accepted as a one-element array).
std::vector<std::string> strings(const std::string& origin, const std::string& key,
                                 const toml::node& n) {
  std::vector<std::string> out;
  if (auto s = n.value<std::string>()) {
    out.push_back(*s);
    return out;
  }
  const toml::array* a = n.as_array();
  if (!a) fail(where(origin, n), key, "expected an array of strings, e.g. [\"a\", \"b\"]");
  for (const auto& e : *a) {
    auto s = e.value<std::string>();
    if (!s) fail(where(origin, e), key, "expected every element to be a string");
    out.push_back(*s);
  }
  return out;
}

template <class Known>
void check_names(const std::string& at, const std::string& key, const std::vector<std::string>& got,
                 const Known& known) {
  for (const auto& g : got)
    if (std::find(known.begin(), known.end(), g) == known.end())
      fail(at, key, "unknown name \"" + g + "\"; expected one of: " + join(known));
}

std::int64_t integer(const std::string& origin, const std::string& key, const toml::node& n,
                     std::int64_t min, std::int64_t max) {
  auto v = n.value_exact<std::int64_t>();
  if (!v) fail(where(origin, n), key, "expected an integer");
  if (*v < min || *v > max)
    fail(where(origin, n), key,
         "expected an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " +
             std::to_string(*v));
  return *v;
}

double positive_real(const std::string& origin, const std::string& key, const toml::node& n,
                     double max) {
  auto v = n.value<double>();  // integers convert
  if (!v) fail(where(origin, n), key, "expected a number");
  if (!(*v > 0) || !std::isfinite(*v) || *v > max) {
    std::ostringstream m;
    m << "expected a finite number > 0 and <= " << max << ", got " << *v;
    fail(where(origin, n), key, m.str());
  }
  return *v;
}

}  // namespace

std::vector<std::string> select_properties(const std::string& pattern) {
  std::vector<std::string> out;
  const bool prefix = pattern.size() >= 2 && pattern.compare(pattern.size() - 2, 2, ".*") == 0;
  const std::string stem =
      prefix ? pattern.substr(0, pattern.size() - 1) : pattern;  // keeps the dot
  for (const auto& p : props::properties())
    if (prefix ? p.id.rfind(stem, 0) == 0 : p.id == pattern) out.push_back(p.id);
  return out;
}

GateSpec parse_gate_spec(const std::string& text, const std::string& origin) {
  toml::table t;
  try {
    t = toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    throw SpecError(origin + ":" + std::to_string(e.source().begin.line) + ":" +
                    std::to_string(e.source().begin.column) +
                    ": not valid TOML: " + std::string(e.description()));
  }
  GateSpec spec;
  spec.source = origin;
  static const std::vector<std::string> keys = {
      "ops",   "dtypes", "sizes",   "distributions", "rules",   "properties",
      "cases", "seed",   "timeout", "temperature",   "deadline",      "required"};
  for (auto&& [k, node] : t) {
    const std::string key(k.str());
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      fail(where(origin, node), key, "unknown key; expected one of: " + join(keys));
  }
  auto& cfg = spec.suite;
  if (auto n = t.get("ops")) {
    std::vector<std::string> known;
    for (Op op : all_ops) known.push_back(name_of(op));
    auto names = strings(origin, "ops", *n);
    check_names(where(origin, *n), "ops", names, known);
    for (const auto& s : names) cfg.ops.push_back(*parse_op(s));
  }
  if (auto n = t.get("dtypes")) {
    static const std::vector<std::string> known = {"float32", "bfloat16"};
    auto names = strings(origin, "dtypes", *n);
    check_names(where(origin, *n), "dtypes", names, known);
    for (const auto& s : names) cfg.dtypes.push_back(*parse_dtype(s));
  }
  if (auto n = t.get("sizes")) {
    const toml::array* a = n->as_array();
    if (!a) fail(where(origin, *n), "sizes", "expected an array of integers >= 1, e.g. [16, 1024]");
    if (static_cast<std::int64_t>(a->size()) > SpecLimits::max_sizes)
      fail(where(origin, *n), "sizes",
           "expected at most " + std::to_string(SpecLimits::max_sizes) + " sizes, got " +
               std::to_string(a->size()));
    for (const auto& e : *a)
      cfg.sizes.push_back(integer(origin, "sizes", e, 1, SpecLimits::max_size));
  }
  if (auto n = t.get("distributions")) {
    auto names = strings(origin, "distributions", *n);
    check_names(where(origin, *n), "distributions", names, props::distributions());
    cfg.distributions = names;
  }
  if (auto n = t.get("rules")) {
    std::vector<std::string> known;
    for (const auto& r : props::rules()) known.push_back(r.id);
    auto names = strings(origin, "rules", *n);
    check_names(where(origin, *n), "rules", names, known);
    cfg.rules = names;
  }
  if (auto n = t.get("properties")) {
    std::vector<std::string> known;
    for (const auto& p : props::properties()) known.push_back(p.id);
    std::set<std::string> seen;
    for (const auto& pattern : strings(origin, "properties", *n)) {
      auto ids = select_properties(pattern);
      if (ids.empty())
        fail(where(origin, *n), "properties",
             "\"" + pattern +
                 "\" selects no property; expected an id or a prefix ending in \".*\" "
                 "from: " +
                 join(known));
      for (auto& id : ids)
        if (seen.insert(id).second) cfg.properties.push_back(id);
    }
  }
  if (auto n = t.get("required")) {
    for (const auto& pattern : strings(origin, "required", *n)) {
      auto ids = select_properties(pattern);
      if (ids.empty())
        fail(where(origin, *n), "required",
             "\"" + pattern +
                 "\" selects no property; expected an id or a prefix ending in \".*\" (see "
                 "`softmax-audit check --list`)");
      for (auto& id : ids)
        if (std::find(spec.required.begin(), spec.required.end(), id) == spec.required.end())
          spec.required.push_back(id);
    }
    // A required property must also be run.
    if (!cfg.properties.empty())
      for (const auto& id : spec.required)
        if (std::find(cfg.properties.begin(), cfg.properties.end(), id) == cfg.properties.end())
          fail(where(origin, *n), "required",
               "\"" + id + "\" is required but not selected by 'properties'; add it there");
  }
  if (auto n = t.get("cases"))
    cfg.cases = static_cast<int>(integer(origin, "cases", *n, 1, SpecLimits::max_cases));
  if (auto n = t.get("seed"))
    cfg.seed = static_cast<std::uint64_t>(
        integer(origin, "seed", *n, 0, std::numeric_limits<std::int64_t>::max()));
  if (auto n = t.get("timeout"))
    spec.timeout_s = positive_real(origin, "timeout", *n, SpecLimits::max_timeout_s);
  if (auto n = t.get("deadline"))
    spec.deadline_s = positive_real(origin, "deadline", *n, SpecLimits::max_deadline_s);
  if (auto n = t.get("temperature")) {
    cfg.temperature = positive_real(origin, "temperature", *n, SpecLimits::max_temperature);
    cfg.temperature_only = true;  // the spec's theta restricts every random case to it
  }
  return spec;
}

GateSpec load_gate_spec(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw SpecError(path + ": not a regular file; expected a TOML file (see docs/gate-spec.md)");
  if (std::filesystem::file_size(path, ec) > (1u << 20) && !ec)
    throw SpecError(path + ": larger than 1 MiB; expected a small TOML file (docs/gate-spec.md)");
  std::ifstream in(path);
  if (!in)
    throw SpecError(path +
                    ": cannot read the gate spec; expected a TOML file (see docs/gate-spec.md)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_gate_spec(ss.str(), path);
}

}  // namespace sa::gate
