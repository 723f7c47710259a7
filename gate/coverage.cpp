#include "gate/coverage.hpp"

#include "gate/checks.hpp"

#include <algorithm>
#include <set>

namespace sa::gate {

namespace {
bool ran(const Verdict& v) { return v.outcome == Outcome::pass || v.outcome == Outcome::fail; }
bool suite_verdict(const Verdict& v) { return v.property.rfind("gate.", 0) != 0; }
bool excluded_by_definition(const Verdict& v) { return v.note.rfind("not applicable", 0) == 0; }
}  // namespace

Verdict coverage_verdict(const std::vector<Verdict>& verdicts, const GateSpec& spec,
                         const std::string& kernel) {
  Verdict c;
  c.property = kCoverage;
  c.claim = gate_claim(kCoverage);
  c.rule = {"gate.required",
            "the gate spec's `ops`, `dtypes` and `required` keys (docs/gate-spec.md, \"What must "
            "be checked\")"};
  c.kernel = kernel;
  std::vector<std::string> missing;
  int checked = 0;
  for (const auto& v : verdicts)
    if (suite_verdict(v) && ran(v)) ++checked;
  if (checked == 0)
    missing.push_back("no property of the suite was checked (every verdict skipped)");
  for (Op op : spec.suite.ops) {
    const bool any = std::any_of(verdicts.begin(), verdicts.end(), [&](const Verdict& v) {
      return suite_verdict(v) && ran(v) && v.op == name_of(op);
    });
    if (!any) missing.push_back(std::string("op ") + name_of(op) + ": nothing checked");
  }
  for (DType t : spec.suite.dtypes) {
    const bool any = std::any_of(verdicts.begin(), verdicts.end(), [&](const Verdict& v) {
      return suite_verdict(v) && ran(v) && v.dtype == name_of(t);
    });
    if (!any) missing.push_back(std::string("dtype ") + name_of(t) + ": nothing checked");
  }
  for (const auto& id : spec.required) {
    bool any = false;
    std::set<std::string> skipped;
    for (const auto& v : verdicts) {
      if (v.property != id) continue;
      if (ran(v)) any = true;
      if ((v.outcome == Outcome::skip && !excluded_by_definition(v)) ||
          v.outcome == Outcome::incomplete)
        skipped.insert((v.op.empty() ? "" : v.op + "/") + v.dtype + " (" + v.note + ")");
    }
    if (!any) missing.push_back("required " + id + ": no verdict passed or failed");
    for (const auto& s : skipped) missing.push_back("required " + id + " skipped on " + s);
  }
  c.measured = static_cast<double>(missing.size());
  c.bound = 0;
  if (missing.empty()) {
    c.outcome = Outcome::pass;
    c.note = std::to_string(checked) + " suite verdicts passed or failed" +
             (spec.required.empty() ? std::string()
                                    : "; every one of the " + std::to_string(spec.required.size()) +
                                          " required properties ran");
    return c;
  }
  c.outcome = Outcome::incomplete;
  std::string n = "measured = number of requested checks that did not run: ";
  for (std::size_t i = 0; i < missing.size(); ++i) n += (i ? "; " : "") + missing[i];
  c.note = n;
  return c;
}

}  // namespace sa::gate
