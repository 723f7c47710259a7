// The gate spec: a TOML file choosing what `softmax-audit check` runs.
// Documented in docs/gate-spec.md. Every key is optional; no file at all
// means the suite's defaults (every applicable property, op and dtype).
//
// Validation is strict: an unknown key, a wrong type, an unknown name or a
// value outside its stated range is an error naming the file, the key and
// what was expected (SpecError), before any work. The ranges (kLimits below)
// are what the suite can run on this project's machine kind in a CI job.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "properties/suite.hpp"

namespace sa::gate {

struct GateSpec {
  props::SuiteConfig suite;  // ops, dtypes, sizes, distributions, rules, properties, cases, seed,
                             // temperature, [attention], [determinism] repeats
  // Property ids that must be checked (the `required` key, patterns expanded):
  // a skip of any of them makes the run incomplete (gate/coverage.hpp).
  std::vector<std::string> required;
  double timeout_s = 60.0;     // longest silence allowed from the kernel's process (one case)
  double deadline_s = 3600.0;  // the whole run's limit (gate.deadline)
  std::string source = "(defaults)";  // the file it came from
};

// The accepted ranges of the numeric keys (also the CLI's --cases, --timeout, --deadline).
struct SpecLimits {
  static constexpr std::int64_t max_size = std::int64_t(1) << 24;  // row length n
  static constexpr std::int64_t max_sizes = 64;                    // entries of 'sizes'
  static constexpr std::int64_t max_cases = 1000000;
  // timeout and deadline: at least 10 ms (a smaller one is a typo or an
  // underflow, e.g. 1e-300, that would time out the kernel's constructor).
  static constexpr double min_timeout_s = 0.01;
  static constexpr double max_timeout_s = 86400;
  static constexpr double min_deadline_s = 0.01;
  static constexpr double max_deadline_s = 7 * 86400;
  static constexpr double max_temperature = 1e6;
  // [attention]: head dims and sequence lengths a case may have, GQA ratios,
  // and the multiply-adds one case may cost the reference.
  static constexpr std::int64_t max_head_dim = 512;
  static constexpr std::int64_t max_attention_length = std::int64_t(1) << 17;
  static constexpr std::int64_t max_gqa_ratio = 64;
  static constexpr double max_attention_work = 1e12;
  // [determinism] repeats: identical calls per input of determinism.bitwise
  // (at least two to compare; attention runs a fifth of it, at least 10).
  static constexpr std::int64_t min_repeats = 2;
  static constexpr std::int64_t max_repeats = 100000;
};

class SpecError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Reads and validates a spec file. Names (ops, dtypes, distributions, rules,
// properties) are checked against the suite's own lists.
GateSpec load_gate_spec(const std::string& path);
// The same from TOML text; `origin` names it in errors.
GateSpec parse_gate_spec(const std::string& toml_text, const std::string& origin);

// Property selection: an id, or a prefix ending in ".*" (e.g. "metamorphic.*").
// Returns the ids of props::properties() that `pattern` selects, with the
// aliases it names resolved for a run of `ops` (props::resolve_aliases: an
// old id selects the checks that replaced it).
std::vector<std::string> select_properties(const std::string& pattern,
                                           const std::vector<Op>& ops = {});

}  // namespace sa::gate
