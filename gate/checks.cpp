#include "gate/checks.hpp"

namespace sa::gate {

const std::vector<props::PropertyInfo>& gate_checks() {
  static const std::vector<props::PropertyInfo> rows = {
      {"gate.no_crash",
       "every kernel call returns (the process is not killed by a signal)",
       "gate.isolation",
       {},
       "occurrences",
       ""},
      {"gate.no_hang",
       "every case finishes within the case timeout",
       "gate.isolation",
       {},
       "seconds without progress",
       ""},
      {"gate.in_bounds",
       "the kernel reads and writes only inside the buffers it is given",
       "gate.isolation",
       {},
       "occurrences",
       ""},
      {"gate.no_nan_output",
       "outputs are NaN only for rows whose inputs hold a NaN",
       "gate.isolation",
       {},
       "occurrences",
       ""},
      {"gate.fp_environment",
       "every kernel call leaves the floating-point environment (rounding mode, flush-to-zero, "
       "denormals-are-zero) as it found it",
       "gate.isolation",
       {},
       "occurrences",
       ""},
      {"gate.protocol",
       "only the gate writes the gate's messages: the kernel neither writes to the gate's pipe "
       "nor forks a copy of the process running the suite",
       "gate.isolation",
       {},
       "occurrences",
       ""},
      {"gate.deadline",
       "the whole run finishes within the overall deadline",
       "gate.deadline",
       {},
       "seconds",
       ""},
      {"gate.coverage",
       "every requested check ran: at least one property was checked, every op and dtype the "
       "spec names and every property its `required` list selects got a verdict that passed or "
       "failed",
       "gate.required",
       {},
       "checks not run",
       ""},
  };
  return rows;
}

const props::PropertyInfo* find_gate_check(const std::string& id) {
  for (const auto& r : gate_checks())
    if (r.id == id) return &r;
  return nullptr;
}

const std::string& gate_claim(const std::string& id) {
  static const std::string none;
  const props::PropertyInfo* r = find_gate_check(id);
  return r ? r->claim : none;
}

}  // namespace sa::gate
