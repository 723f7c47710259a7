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
// guard without stopping the child. Granularity (IsolationOptions): by
// default the whole selection runs in one child; after a crash or hang every
// property is run again on its own (same seed, same inputs), so that a crash
// loses only the rest of the property it interrupted and names it.
//
// Every restart makes progress (a later unit, or the same property with
// fewer ops), so a run ends with a verdict for every unit whatever the kernel
// does; an op that hung is called no more in the run (later calls of it are
// answered by the gate with an error status, and the verdict says so); the
// overall deadline (IsolationOptions::deadline_s) bounds the whole run. The
// child leads its own process group, which is killed after it ends, so that
// helper processes a kernel forked die with it. Messages are stamped by the
// child (gate/child.hpp): a kernel writing to the pipe or forking a copy of
// the suite gives a failing gate.protocol verdict, never a pass. Each kernel
// call starts in the default floating-point environment; a call that changes
// it gives a failing gate.fp_environment verdict (gate/guard.hpp).
//
// CUDA: each child creates its own CUDA context on first use. The calling
// process must not initialise CUDA before run_isolated (a context does not
// survive fork); nothing in the gate does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gate/guard.hpp"
#include "gate/kernel_source.hpp"
#include "properties/suite.hpp"

namespace sa::gate {

enum class Granularity {
  // One child runs the whole selection in one run_suite call (the suite shares
  // work between properties); only if it crashes or hangs is every property
  // run again, one per run_suite call, to name the property that failed and
  // keep every other property's verdicts. The default.
  whole_then_property,
  // One run_suite call per property from the start.
  per_property
};

struct IsolationOptions {
  double case_timeout_s = 60.0;  // longest silence allowed from the child (one case)
  // The whole run's limit in seconds (0: none). When it passes, the child is
  // killed and every property not yet run is named in a gate.deadline verdict.
  double deadline_s = 0;
  GuardOptions guard;
  bool isolate = true;  // false: run in this process (no crash/hang protection)
  Granularity granularity = Granularity::whole_then_property;
};

struct IsolatedRun {
  std::vector<Verdict> verdicts;  // the suite's verdicts, then the gate's own (gate.*)
  int processes = 0;              // children started
  int crashes = 0, hangs = 0;
  std::uint64_t seed = 0;   // the seed every process used (drawn when the config's is 0)
  std::string refused_ops;  // ops the gate stopped calling after they hung ("" if none)
};

// Property ids the run will cover: config.properties, or every property.
std::vector<std::string> planned_properties(const props::SuiteConfig& config);

IsolatedRun run_isolated(const KernelSource& source, const props::SuiteConfig& config,
                         const IsolationOptions& options, props::SuiteObserver* observer = nullptr);
// The same for a kernel this process holds (built in, or linked by a library user).
IsolatedRun run_isolated(const Kernel& kernel, const props::SuiteConfig& config,
                         const IsolationOptions& options, props::SuiteObserver* observer = nullptr);

// Ids of the gate's own checks (always reported, pass or fail).
// Whether a kernel can run here: empty when it can, else why not (a CUDA
// kernel with no usable device). The CUDA probe runs in a short-lived child
// process, so the gate itself never initialises CUDA before it forks the
// kernel's processes (CUDA does not survive a fork).
std::string why_kernel_cannot_run(const Kernel& kernel);

inline constexpr const char* kNoCrash = "gate.no_crash";
inline constexpr const char* kNoHang = "gate.no_hang";
inline constexpr const char* kInBounds = "gate.in_bounds";
inline constexpr const char* kNoNanOutput = "gate.no_nan_output";
inline constexpr const char* kFpEnvironment = "gate.fp_environment";
inline constexpr const char* kProtocol = "gate.protocol";
inline constexpr const char* kDeadline = "gate.deadline";

}  // namespace sa::gate
