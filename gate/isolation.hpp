// Running the suite on a kernel in separate processes, so that the gate never
// dies with the kernel and the kernel never shares a process with the code
// that judges it (docs/isolation.md).
//
// The suite runs in a forked child, the judge. A kernel (plugin, built-in,
// Python; host-memory or CUDA-memory) never runs in the judge: every call goes to a
// kernel host the judge forks (gate/host.hpp), which opens the kernel and
// only executes calls on buffers the judge laid out in shared memory; the
// judge checks what came back. A host that crashes (an out-of-bounds access
// caught by a guard page is named with its buffer and offset, see
// gate/guard.hpp) or does not answer within the case timeout (killed) is
// reported by the judge (host_end), which answers that call with an error
// and goes on with the same run in a fresh host: an op that crashed is
// answered by the gate for the rest of its property, one that hung for the
// rest of the run, and the verdict says so. Canary overruns, input writes,
// NaN outputs for inputs without NaN and a changed floating-point
// environment are reported by the guard in the judge.
//
// Before every kernel call the judge tells the gate, through a pipe, which
// property and which input it is about to run (SuiteObserver::before_case),
// and sends every verdict as a JSON line the moment it exists, stamped for
// this judge (gate/child.hpp). If the judge itself dies or exits without
// finishing (a defect of the suite, not of a hosted kernel) the gate keeps
// everything received so far and, by default, runs every property again on
// its own (Granularity) in a fresh judge, so that such a failure loses only
// the rest of the property it interrupted and names it. The overall deadline
// (IsolationOptions::deadline_s) bounds the whole run: the judge and its
// current host are killed and the properties not run are named.
//
// A device (CUDA) kernel is hosted the same way: its kernel host stages the
// arena's buffers to the device and back (gate/host.hpp). Each kernel host
// creates its own CUDA context; neither the gate nor the judge initialises
// CUDA (a context does not survive fork), and the calling process must not
// either before run_isolated.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gate/guard.hpp"
#include "gate/kernel_source.hpp"
#include "properties/suite.hpp"

namespace sa::gate {

enum class Granularity {
  // One judge runs the whole selection in one run_suite call (the suite
  // shares work between properties); only if the judge itself crashes or
  // hangs (a defect of the suite) is every property run
  // again, one per run_suite call, to name the property that failed and keep
  // every other property's verdicts. The default.
  whole_then_property,
  // One run_suite call per property from the start.
  per_property
};

struct IsolationOptions {
  double case_timeout_s = 60.0;  // longest a kernel call (or opening the kernel) may take
  // The whole run's limit in seconds (0: none). When it passes, the child is
  // killed and every property not yet run is named in a gate.deadline verdict.
  double deadline_s = 0;
  GuardOptions guard;
  bool isolate = true;  // false: run in this process (no crash/hang protection)
  Granularity granularity = Granularity::whole_then_property;
};

struct IsolatedRun {
  std::vector<Verdict> verdicts;  // the suite's verdicts, then the gate's own (gate.*)
  int processes = 0;              // judges and kernel hosts started
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
// The checks every isolated run reports (pass or fail), where they apply.
inline constexpr std::array<const char*, 6> kReportedChecks{
    kNoCrash, kNoHang, kInBounds, kNoNanOutput, kFpEnvironment, kProtocol};

}  // namespace sa::gate
