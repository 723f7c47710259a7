// The gate's own checks (gate.*): the registry rows of what the gate itself
// judges about a run, beside the suite's properties (props::properties()).
// Isolation (gate/isolation.cpp), coverage (gate/coverage.cpp), the report's
// units and `check --list` read their claims and units from here.
#pragma once

#include <string>
#include <vector>

#include "properties/suite.hpp"

namespace sa::gate {

// One row per gate check, in the order the gate reports them. `rule` names
// the gate's rule ("gate.isolation", "gate.deadline", "gate.required").
const std::vector<props::PropertyInfo>& gate_checks();

// The row of a gate check's id, or nullptr.
const props::PropertyInfo* find_gate_check(const std::string& id);

// The claim of a gate check (its row's claim; "" for an unknown id).
const std::string& gate_claim(const std::string& id);

}  // namespace sa::gate
