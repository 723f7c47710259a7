// Coverage of a gate run: did every check the run was asked for actually run?
//
// A run that checked nothing, or skipped a check the spec requires, is not a
// pass: the gate adds the verdict `gate.coverage` to every run, and the
// command exits 3 ("incomplete", cli/commands.hpp) when it is not a pass.
//
// What is requested (docs/gate-spec.md, "What must be checked"):
//  - always: at least one verdict of the property suite passed or failed;
//  - every op the spec's `ops` names and every dtype its `dtypes` names: at
//    least one suite verdict on it passed or failed;
//  - every property the spec's `required` list selects: it has a verdict
//    that passed or failed, and none of its verdicts is a skip other than one
//    the property's own definition excludes (a skip note starting with
//    "not applicable"). A kernel lacking an op or dtype a required property
//    covers is therefore incomplete, not a pass.
#pragma once

#include <string>
#include <vector>

#include "core/verdict.hpp"
#include "gate/spec.hpp"

namespace sa::gate {

inline constexpr const char* kCoverage = "gate.coverage";

// The gate.coverage verdict of a run's verdicts under its spec: pass, or
// incomplete with a note listing what did not run.
Verdict coverage_verdict(const std::vector<Verdict>& verdicts, const GateSpec& spec,
                         const std::string& kernel);

}  // namespace sa::gate
