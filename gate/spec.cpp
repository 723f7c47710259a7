#include "gate/spec.hpp"

#include "core/seed.hpp"

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

// A finite number in (0, max], or in [min, max] when min > 0.
double positive_real(const std::string& origin, const std::string& key, const toml::node& n,
                     double max, double min = 0) {
  auto v = n.value<double>();  // integers convert
  if (!v) fail(where(origin, n), key, "expected a number");
  if (!(*v > 0) || !std::isfinite(*v) || *v > max || *v < min) {
    std::ostringstream m;
    if (min > 0)
      m << "expected a finite number >= " << min << " and <= " << max << ", got " << *v;
    else
      m << "expected a finite number > 0 and <= " << max << ", got " << *v;
    fail(where(origin, n), key, m.str());
  }
  return *v;
}

// ---------------------------------------------------------------- screening --
// toml++ 3.3.0 (Debian 12's) is not safe on every input: fuzzing it compiled
// with its own assertions on (fuzz/toml_parser, fuzz/gate_spec) found inputs
// on which its parser goes on where its code says it cannot be, i.e. fails a
// TOML_ASSERT_ASSUME: parse_value() called at a value terminator
// (`a = [1,}]`), parse_key() called at a character that cannot start a key
// (`[$a]`), and parse_time() called at a non-digit (`a = 1979-05-27T)7:32`). A debug build of
// toml++ aborts there; an optimised one compiled with an assume-capable compiler may do anything;
// Debian's library (gcc, where the assumption is a no-op) happens to answer with a parse error
// today. The project does not rely on that: before toml++ sees a spec, screen_toml() refuses, with
// a one-line error naming the file and line, everything a gate spec never needs and every input of
// the classes found:
//  - more than kMaxSpecBytes bytes;
//  - a control character other than tab, CR, LF (TOML forbids them too), or a
//    byte >= 0x80 outside a comment: toml++ asks is_non_ascii_horizontal_whitespace()
//    about such characters where it scans for whitespace, and that function
//    reaches TOML_UNREACHABLE for U+00A1..U+049A (undefined behaviour in every
//    build, Debian's included; found by fuzz/gate_spec); gate spec values are
//    ASCII names anyway;
//  - brackets nested deeper than kMaxSpecNesting outside strings and comments;
//  - a value expected (after '=', or after '[' or ',' inside an array) but a
//    value terminator (',', ']' except to close an array, '}') or the end of
//    the line found instead;
//  - a key expected (at the start of a line, after '[' or '[[' of a table
//    header, after '{' or ',' in an inline table, after '.' in a key) but
//    something other than a bare-key character or a quote found instead;
//  - a date or time value (a gate spec has none): ':' outside a string or
//    comment, or '-' inside an unquoted value other than its sign or an
//    exponent's;
//  - inside an unquoted value, a character other than [A-Za-z0-9_+.-] before
//    its terminator; inside a bare key, one other than [A-Za-z0-9_-] before
//    blanks, '.', '=' or ']' (so that the screen and toml++ agree where every
//    string and comment starts).
// It refuses no valid TOML file within those limits (tests/gate/spec_screen_test.cpp).
constexpr std::size_t kMaxSpecBytes = 64 * 1024;
constexpr std::size_t kMaxSpecNesting = 8;

bool bare_key_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

void screen_toml(const std::string& text, const std::string& origin) {
  int line = 1;
  auto refuse = [&](const std::string& what) {
    throw SpecError(origin + ":" + std::to_string(line) + ": not a gate spec: " + what +
                    " (docs/gate-spec.md)");
  };
  if (text.size() > kMaxSpecBytes)
    refuse(std::to_string(text.size()) + " bytes; expected at most " +
           std::to_string(kMaxSpecBytes));
  for (std::size_t k = 0; k < text.size(); ++k) {
    const unsigned char c = static_cast<unsigned char>(text[k]);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
      line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + k, '\n'));
      refuse("control character " + std::to_string(c) + " at byte " + std::to_string(k));
    }
    // TOML has CR only in a CRLF line ending; a lone CR reaches a toml++ 3.3.0
    // assertion in parse_key (found by fuzz/gate_spec: "[\r\rs\t\r\r").
    if (c == '\r' && (k + 1 >= text.size() || text[k + 1] != '\n')) {
      line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + k, '\n'));
      refuse("a carriage return not followed by a line feed at byte " + std::to_string(k));
    }
  }
  const std::size_t size = text.size();
  auto at = [&](std::size_t i) { return i < size ? text[i] : '\0'; };
  // Skips the string starting at text[j] (a quote); returns the index after it.
  auto skip_string = [&](std::size_t j) {
    const char q = text[j];
    const bool multi = at(j + 1) == q && at(j + 2) == q;
    j += multi ? 3 : 1;
    while (j < size) {
      const char c = text[j];
      if (c == '\n') {
        if (!multi) return j;  // toml++ reports the unterminated string
        ++line;
      }
      if (static_cast<unsigned char>(c) >= 0x80) refuse("a non-ASCII byte in a string");
      if (q == '"' && c == '\\') {
        if (at(j + 1) == '\n') ++line;
        j += 2;
        continue;
      }
      if (c == q) {
        if (!multi) return j + 1;
        if (at(j + 1) == q && at(j + 2) == q) {
          std::size_t k = j + 3;  // up to two more quotes belong to the string
          while (k < size && k < j + 5 && text[k] == q) ++k;
          return k;
        }
      }
      ++j;
    }
    return j;
  };
  enum class Want { nothing, key, key_or_close, value, value_or_close };
  std::string stack;         // '[' array, '{' inline table, 'h' table header
  Want want = Want::key;     // at the start of the file: a key, a header or nothing
  bool line_start = true;    // only blanks so far on this top-level line
  bool in_key = false;       // inside a key (a '.' asks for another part)
  bool in_scalar = false;    // inside an unquoted value (number, boolean, inf, nan)
  bool in_bare_key = false;  // inside a bare key
  std::size_t i = 0;
  while (i < size) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      in_scalar = in_bare_key = false;
      ++i;
      continue;
    }
    const bool in_array = !stack.empty() && stack.back() == '[';
    if (c == '#' || c == '\n') {
      in_scalar = in_bare_key = false;
      if (want == Want::value || (want == Want::key && !line_start) || want == Want::key_or_close)
        if (!in_array) refuse("expected a key or a value before the end of the line");
      while (c == '#' && i < size && text[i] != '\n') ++i;
      if (i < size && text[i] == '\n') {
        ++line;
        ++i;
      }
      if (stack.empty()) want = Want::key, line_start = true, in_key = false;
      continue;
    }
    if (static_cast<unsigned char>(c) >= 0x80) refuse("a non-ASCII byte outside a comment");
    const Want w = want;
    const bool first_on_line = line_start;
    line_start = false;
    want = Want::nothing;
    if (w == Want::key || w == Want::key_or_close) {
      const bool header_start = first_on_line && stack.empty() && c == '[';
      if (!header_start && !(w == Want::key_or_close && c == '}') && !bare_key_char(c) &&
          c != '"' && c != '\'')
        refuse(std::string("expected a key, found '") + c + "'");
      if (!header_start && c != '}') in_key = true;
      if (bare_key_char(c)) {
        in_bare_key = true;
        ++i;
        continue;
      }
    } else if (in_bare_key) {
      in_bare_key = bare_key_char(c);
      if (!in_bare_key && c != '.' && c != '=' && c != ']')
        refuse(std::string("unexpected '") + c + "' in a key");
    }
    if (w == Want::value || w == Want::value_or_close) {
      if (c == ',' || c == '}' || (c == ']' && w != Want::value_or_close))
        refuse(std::string("expected a value, found '") + c + "'");
      in_scalar = c != '"' && c != '\'' && c != '[' && c != '{' && c != ']';
    } else if (in_scalar && c != ',' && c != ']' && c != '}') {
      if (!bare_key_char(c) && c != '+' && c != '.')
        refuse(std::string("unexpected '") + c + "' in a value");
      if (c == '-' && text[i - 1] != 'e' && text[i - 1] != 'E')
        refuse("a date or '-' inside a number; a gate spec has no dates or times");
    }
    if (c == ':') refuse("':' outside a string; a gate spec has no dates or times");
    switch (c) {
      case '"':
      case '\'':
        i = skip_string(i);
        continue;
      case '=':
        in_key = false;
        if (stack.empty() || stack.back() == '{') want = Want::value;
        break;
      case '.':
        if (in_key) want = Want::key;
        break;
      case '[':
        if (w == Want::key && first_on_line && stack.empty()) {
          stack.push_back('h');  // [table] or [[array of tables]]
          if (at(i + 1) == '[') ++i;
          want = Want::key;
        } else {
          stack.push_back('[');
          want = Want::value_or_close;
        }
        break;
      case '{':
        stack.push_back('{');
        want = Want::key_or_close;
        break;
      case ']':
        in_scalar = false;
        if (!stack.empty()) {
          if (stack.back() == 'h' && at(i + 1) == ']') ++i;
          if (stack.back() == 'h') in_key = false;
          stack.pop_back();
        }
        break;
      case '}':
        in_scalar = false;
        if (!stack.empty()) stack.pop_back();
        break;
      case ',':
        in_scalar = false;
        if (in_array) want = Want::value_or_close;
        if (!stack.empty() && stack.back() == '{') want = Want::key;
        break;
      default:
        break;
    }
    if (stack.size() > kMaxSpecNesting)
      refuse("arrays or tables nested deeper than " + std::to_string(kMaxSpecNesting));
    ++i;
  }
  if (want == Want::value || want == Want::value_or_close || (want == Want::key && !line_start) ||
      want == Want::key_or_close)
    refuse("the file ends where a key or a value was expected");
}

// The [attention] table: shapes and features of the attention_v2 cases.
void parse_attention(const std::string& origin, const toml::node& node, props::SuiteConfig& cfg) {
  const toml::table* tab = node.as_table();
  if (!tab)
    fail(where(origin, node), "attention",
         "expected a table ([attention] with keys dtypes, head_dims, lengths, gqa_ratios, "
         "features, max_work, pair_cases)");
  static const std::vector<std::string> keys = {"dtypes",   "head_dims", "lengths",   "gqa_ratios",
                                                "features", "max_work",  "pair_cases"};
  for (auto&& [k, n] : *tab) {
    const std::string key(k.str());
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      fail(where(origin, n), "attention." + key, "unknown key; expected one of: " + join(keys));
  }
  // The table shapes attention_v2 and attention_backward cases: refused
  // where none would run.
  if (!cfg.ops.empty() &&
      std::find(cfg.ops.begin(), cfg.ops.end(), Op::attention_v2) == cfg.ops.end() &&
      std::find(cfg.ops.begin(), cfg.ops.end(), Op::attention_backward) == cfg.ops.end())
    fail(where(origin, node), "attention",
         "the table shapes attention_v2 and attention_backward cases, but 'ops' names neither; "
         "add one there or remove the table");
  props::AttentionShapes& a = cfg.attention;
  auto ints = [&](const char* key, std::int64_t lo, std::int64_t hi) {
    std::vector<std::int64_t> out;
    const toml::node* n = tab->get(key);
    if (!n) return out;
    const toml::array* arr = n->as_array();
    const std::string k = std::string("attention.") + key;
    if (!arr || arr->empty())
      fail(where(origin, *n), k, "expected a non-empty array of integers, e.g. [64, 128]");
    if (static_cast<std::int64_t>(arr->size()) > SpecLimits::max_sizes)
      fail(where(origin, *n), k,
           "expected at most " + std::to_string(SpecLimits::max_sizes) + " entries, got " +
               std::to_string(arr->size()));
    for (const auto& e : *arr) out.push_back(integer(origin, k, e, lo, hi));
    return out;
  };
  if (auto n = tab->get("dtypes")) {
    static const std::vector<std::string> known = {"float32",  "bfloat16", "float16", "fp8_e4m3",
                                                   "fp8_e5m2", "fp4_e2m1", "int8"};
    auto names = strings(origin, "attention.dtypes", *n);
    check_names(where(origin, *n), "attention.dtypes", names, known);
    for (const auto& s : names) {
      const auto i = std::find(known.begin(), known.end(), s) - known.begin();
      const AttnType ty = static_cast<AttnType>(i);  // known[] is in AttnType's order
      if (std::find(a.types.begin(), a.types.end(), ty) == a.types.end()) a.types.push_back(ty);
    }
  }
  a.head_dims = ints("head_dims", 1, SpecLimits::max_head_dim);
  a.gqa_ratios = ints("gqa_ratios", 1, SpecLimits::max_gqa_ratio);
  if (auto n = tab->get("lengths")) {
    const toml::array* arr = n->as_array();
    const char* expected =
        "expected a non-empty array of [queries, keys] pairs, e.g. [[1, 239], [1023, 1024]]";
    if (!arr || arr->empty()) fail(where(origin, *n), "attention.lengths", expected);
    if (static_cast<std::int64_t>(arr->size()) > SpecLimits::max_sizes)
      fail(where(origin, *n), "attention.lengths",
           "expected at most " + std::to_string(SpecLimits::max_sizes) + " pairs, got " +
               std::to_string(arr->size()));
    for (const auto& e : *arr) {
      const toml::array* pair = e.as_array();
      if (!pair || pair->size() != 2) fail(where(origin, e), "attention.lengths", expected);
      a.lengths.emplace_back(
          integer(origin, "attention.lengths", *pair->get(0), 1, SpecLimits::max_attention_length),
          integer(origin, "attention.lengths", *pair->get(1), 1, SpecLimits::max_attention_length));
    }
  }
  if (auto n = tab->get("features")) {
    // [] (no feature) means plain dense attention.
    const auto names = strings(origin, "attention.features", *n);
    check_names(where(origin, *n), "attention.features", names, props::attention_features());
    a.features = names;
  }
  if (auto n = tab->get("max_work"))
    a.max_work = positive_real(origin, "attention.max_work", *n, SpecLimits::max_attention_work);
  if (auto n = tab->get("pair_cases"))
    a.pair_cases = static_cast<int>(integer(origin, "attention.pair_cases", *n, 0, 100));
}

// The [determinism] table: how many identical calls determinism.bitwise makes.
void parse_determinism(const std::string& origin, const toml::node& node, props::SuiteConfig& cfg) {
  const toml::table* tab = node.as_table();
  if (!tab)
    fail(where(origin, node), "determinism",
         "expected a table ([determinism] with key repeats, e.g. repeats = 250)");
  static const std::vector<std::string> keys = {"repeats"};
  for (auto&& [k, n] : *tab) {
    const std::string key(k.str());
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      fail(where(origin, n), "determinism." + key, "unknown key; expected one of: " + join(keys));
  }
  // The table shapes determinism.* runs: refused where none would run.
  if (!cfg.properties.empty() &&
      std::none_of(cfg.properties.begin(), cfg.properties.end(),
                   [](const std::string& id) { return id.rfind("determinism.", 0) == 0; }))
    fail(where(origin, node), "determinism",
         "the table sets determinism.bitwise's repeats, but 'properties' selects no "
         "determinism.* property; add one there or remove the table");
  if (auto n = tab->get("repeats"))
    cfg.determinism_repeats = static_cast<int>(integer(
        origin, "determinism.repeats", *n, SpecLimits::min_repeats, SpecLimits::max_repeats));
}

}  // namespace

std::vector<std::string> select_properties(const std::string& pattern, const std::vector<Op>& ops) {
  std::vector<std::string> out;
  const bool prefix = pattern.size() >= 2 && pattern.compare(pattern.size() - 2, 2, ".*") == 0;
  const std::string stem =
      prefix ? pattern.substr(0, pattern.size() - 1) : pattern;  // keeps the dot
  for (const auto& p : props::properties())
    if (prefix ? p.id.rfind(stem, 0) == 0 : p.id == pattern) out.push_back(p.id);
  for (const auto& a : props::property_aliases())  // a retired id selects its replacements
    if (a.retired && a.id == pattern) out.push_back(pattern);
  return props::resolve_aliases(out, ops);
}

GateSpec parse_gate_spec(const std::string& text, const std::string& origin) {
  screen_toml(text, origin);  // before toml++ sees a byte
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
      "ops",        "dtypes",   "sizes",     "distributions", "rules",
      "properties", "cases",    "seed",      "timeout",       "temperature",
      "deadline",   "required", "attention", "determinism",   "conventions"};
  for (auto&& [k, node] : t) {
    const std::string key(k.str());
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      fail(where(origin, node), key, "unknown key; expected one of: " + join(keys));
  }
  auto& cfg = spec.suite;
  if (auto n = t.get("ops")) {
    std::vector<std::string> known;
    for (Op op : checked_ops) known.push_back(name_of(op));
    auto names = strings(origin, "ops", *n);
    check_names(where(origin, *n), "ops", names, known);
    for (const auto& s : names) cfg.ops.push_back(*parse_op(s));
  }
  if (auto n = t.get("dtypes")) {
    static const std::vector<std::string> known = {"float32", "bfloat16", "float16"};
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
      auto ids = select_properties(pattern, cfg.ops);
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
      auto ids = select_properties(pattern, cfg.ops);
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
  if (auto n = t.get("seed")) {
    // A seed past 2^63 - 1 (half of all drawn seeds) is no TOML integer: it
    // is written as a string of digits, which is read back exactly.
    if (auto str = n->value_exact<std::string>()) {
      unsigned long long v = 0;
      if (!parse_seed(*str, v))
        fail(where(origin, *n), "seed",
             "expected an integer, or a string of decimal digits from \"0\" to \"" +
                 std::to_string(~0ull) + "\", got \"" + *str + "\"");
      cfg.seed = v;
    } else {
      cfg.seed = static_cast<std::uint64_t>(
          integer(origin, "seed", *n, 0, std::numeric_limits<std::int64_t>::max()));
    }
  }
  if (auto n = t.get("timeout"))
    spec.timeout_s =
        positive_real(origin, "timeout", *n, SpecLimits::max_timeout_s, SpecLimits::min_timeout_s);
  if (auto n = t.get("deadline"))
    spec.deadline_s = positive_real(origin, "deadline", *n, SpecLimits::max_deadline_s,
                                    SpecLimits::min_deadline_s);
  if (auto n = t.get("temperature")) {
    cfg.temperature = positive_real(origin, "temperature", *n, SpecLimits::max_temperature);
    cfg.temperature_only = true;  // the spec's theta restricts every random case to it
  }
  if (auto n = t.get("attention")) parse_attention(origin, *n, cfg);
  if (auto n = t.get("determinism")) parse_determinism(origin, *n, cfg);
  if (auto n = t.get("conventions")) {
    auto names = strings(origin, "conventions", *n);
    check_names(where(origin, *n), "conventions", names, props::convention_names());
    cfg.conventions = names;
    // no_temperature: the kernel is called at temperature 1 only, so another
    // temperature in the same spec contradicts it (refused before any work).
    if (cfg.temperature != 1.0 &&
        std::find(names.begin(), names.end(), "no_temperature") != names.end())
      throw SpecError(where(origin, *n) + ": conventions names no_temperature, but temperature = " +
                      std::to_string(cfg.temperature) + "; expected temperature 1 (or none)");
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
