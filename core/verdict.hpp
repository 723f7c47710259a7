// The one vocabulary every check in the suite reports in.
//
// A verdict says what was claimed, what was measured, the bound the
// measurement was held to, the rule the bound comes from (a theorem, a
// rounding analysis, a named convention such as FlashAttention's), and, when
// the claim failed, an input that reproduces the failure.
#pragma once

#include <cmath>
#include <sstream>
#include <cstdint>
#include <string>
#include <vector>
#include <utility>

namespace sa {

// incomplete: a check the run was asked for (a spec's `required` list, an op
// or dtype it names) could not run, or nothing at all was checked. Only the
// gate's coverage verdict (gate.coverage) and the subcommands' run summaries
// use it; a run with one is neither a pass nor a failure (exit code 3).
enum class Outcome { pass, fail, skip, error, incomplete };

inline const char* name_of(Outcome o) {
  switch (o) {
    case Outcome::pass:
      return "pass";
    case Outcome::fail:
      return "fail";
    case Outcome::skip:
      return "skip";
    case Outcome::error:
      return "error";
    case Outcome::incomplete:
      return "incomplete";
  }
  return "?";
}

// Where a bound comes from. `id` is stable (reports and gate specs refer to
// it); `source` cites the theorem, analysis or convention.
struct Rule {
  std::string id;
  std::string source;
};

// One cell of a coverage table: a feature or a pair of features ("varlen",
// "varlen+key_padding"), the cases run that had it, and the cases required.
struct CoverageCell {
  std::string cell;
  std::int64_t cases = 0, required = 0;
};

struct Verdict {
  std::string property;   // stable id, e.g. "T1.upper" or "softmax.ulp"
  std::string claim;      // the statement being checked, in words
  double measured = NAN;  // what was observed
  double bound = NAN;     // what it was held to
  Rule rule;              // where the bound comes from
  Outcome outcome = Outcome::skip;
  std::string counterexample;  // a reproducible failing input (seed and values), empty on pass
  std::string kernel;          // kernel name, or "reference" / "theory"
  std::string op;              // operation (softmax, attention, ...), may be empty
  std::string dtype;           // data type checked, may be empty
  std::string note;            // anything else a reader needs (e.g. skip reason)
  // The input that gave the largest measured/bound ratio (on a pass: what an
  // auditor reads the pass for; on a failure: the counterexample). May be empty.
  std::string worst_case;
  // Wall seconds the property suite spent deciding this verdict (its cases,
  // references and shrinking; properties/suite.cpp); NaN where not measured
  // (verdicts not made by run_suite, results files older than the field).
  double seconds = NAN;
  // Of those, the seconds spent inside the kernel's calls
  // (sa::kernel_call_seconds(); a hosted kernel's calls include the round trip
  // to its host); NaN where not measured. seconds - kernel_seconds is the
  // judge's share: references, generators, comparisons, shrinking.
  double kernel_seconds = NAN;
  // Cases the verdict was decided on (the applicable cases of its search; a
  // coverage verdict: the cases run); -1 where not counted.
  std::int64_t cases = -1;
  // A coverage verdict's table (attention_v2.coverage): empty otherwise.
  std::vector<CoverageCell> coverage;

  bool passed() const { return outcome == Outcome::pass; }
};

// Builds a verdict for a claim of the form `measured <= bound`. NaN measured
// values fail (a NaN never satisfies a bound).
inline Verdict check_at_most(std::string property, std::string claim, double measured, double bound,
                             Rule rule) {
  Verdict v;
  v.property = std::move(property);
  v.claim = std::move(claim);
  v.measured = measured;
  v.bound = bound;
  v.rule = std::move(rule);
  v.outcome = (measured <= bound) ? Outcome::pass : Outcome::fail;
  return v;
}

// One-paragraph rendering used by test failure messages and the terminal.
inline std::string describe(const Verdict& v) {
  std::ostringstream os;
  os.precision(17);
  os << "[" << name_of(v.outcome) << "] " << v.property;
  if (!v.kernel.empty())
    os << " [" << v.kernel << (v.op.empty() ? "" : "/" + v.op)
       << (v.dtype.empty() ? "" : "/" + v.dtype) << "]";
  os << "\n  claim:    " << v.claim << "\n  measured: " << v.measured << "\n  bound:    " << v.bound
     << "\n  rule:     " << v.rule.id;
  if (!v.rule.source.empty()) os << " — " << v.rule.source;
  if (!v.counterexample.empty()) os << "\n  counterexample: " << v.counterexample;
  if (!v.note.empty()) os << "\n  note:     " << v.note;
  if (!v.worst_case.empty() && v.worst_case != v.counterexample)
    os << "\n  worst case: " << v.worst_case;
  return os.str();
}

}  // namespace sa
