// Running the suite on a kernel in a separate process, so that the gate never
// dies with the kernel.
//
// The kernel runs in a forked child. Before every kernel call the child tells
// the parent, through a pipe, which property and which input it is about to
// run (SuiteObserver::before_case), and sends every verdict as a JSON line the
// moment it exists. The parent therefore keeps everything computed so far
// when the child
//   - dies on a signal (crash; an out-of-bounds access caught by a guard page
//     is named with its buffer and offset, see gate/guard.hpp),
//   - stays silent longer than the case timeout (hang: the child is killed),
//   - exits without finishing;
// each of these becomes a failing verdict naming the property and the input
// that caused it, and a fresh child continues with the remaining properties.
// Canary overruns and NaN outputs for inputs without NaN are reported by the
// guard without stopping the child. Granularity: the child runs the selected
// properties one at a time, so a crash loses only the rest of the property it
// interrupted (the verdicts already sent are kept).
//
// CUDA: each child creates its own CUDA context on first use. The calling
// process must not initialise CUDA before run_isolated (a context does not
// survive fork); nothing in the gate does.
#pragma once

#include <string>
#include <vector>

#include "gate/guard.hpp"
#include "properties/suite.hpp"

namespace sa::gate {

struct IsolationOptions {
  double case_timeout_s = 60.0;  // longest silence allowed from the child (one case)
  GuardOptions guard;
  bool isolate = true;           // false: run in this process (no crash/hang protection)
};

struct IsolatedRun {
  std::vector<Verdict> verdicts;  // the suite's verdicts, then the gate's own (gate.*)
  int processes = 0;              // children started
  int crashes = 0, hangs = 0;
};

// Property ids the run will cover: config.properties, or every property.
std::vector<std::string> planned_properties(const props::SuiteConfig& config);

IsolatedRun run_isolated(const Kernel& kernel, const props::SuiteConfig& config,
                         const IsolationOptions& options, props::SuiteObserver* observer = nullptr);

// Ids of the gate's own checks (always reported, pass or fail).
inline constexpr const char* kNoCrash = "gate.no_crash";
inline constexpr const char* kNoHang = "gate.no_hang";
inline constexpr const char* kInBounds = "gate.in_bounds";
inline constexpr const char* kNoNanOutput = "gate.no_nan_output";

}  // namespace sa::gate
