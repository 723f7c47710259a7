#include "gate/isolation.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>

#include "gate/checks.hpp"
#include "gate/child.hpp"
#include "gate/host.hpp"
#include "gate/verdict_json.hpp"

namespace sa::gate {

namespace {

using json = nlohmann::json;

constexpr std::size_t kMaxInput = 64 * 1024;

std::string clip(const std::string& s) {
  if (s.size() <= kMaxInput) return s;
  return s.substr(0, kMaxInput) + " ...(truncated at 64 KiB)";
}

// One run_suite call: these properties (empty = the config's selection),
// restricted to these ops (empty = the config's), with calls to `refuse`
// answered by the gate instead of the kernel.
struct Unit {
  std::vector<std::string> properties;
  std::vector<Op> ops;
  std::string name;
  bool retry = false;      // a property re-run without an op that crashed or hung
  std::vector<Op> refuse;  // ops this unit must not call (the one that crashed in it)
};

std::vector<Op> all_op_list() {
  return std::vector<Op>(std::begin(checked_ops), std::end(checked_ops));
}

// The ops a unit checks: its own list, else the config's, else every op.
std::vector<Op> effective_ops(const Unit& u, const props::SuiteConfig& config) {
  if (!u.ops.empty()) return u.ops;
  if (!config.ops.empty()) return config.ops;
  return all_op_list();
}

bool contains(const std::vector<Op>& v, Op op) {
  return std::find(v.begin(), v.end(), op) != v.end();
}

std::string op_names(const std::set<Op>& ops) {
  std::string s;
  for (Op op : ops) s += (s.empty() ? "" : ", ") + std::string(name_of(op));
  return s;
}

const char* host_event_kind(HostEvent::Kind k) {
  return k == HostEvent::Kind::hang ? "hang" : k == HostEvent::Kind::crash ? "crash" : "protocol";
}

// The judge: runs the suite. It never runs kernel code (a kernel host does,
// gate/host.hpp, for host-memory and CUDA-memory kernels alike), so its
// verdicts cannot be forged from there.
void child_main(const ChildWriter& w, const KernelSource& source, const props::SuiteConfig& config,
                const std::vector<Unit>& units, const std::set<Op>& refused,
                const IsolationOptions& opt, CallBox* box) {
  // Not dumpable: a kernel host (same user) may not read or write this
  // process's memory through /proc/PID/mem.
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  install_fault_handler();
  std::string current_property, current_input;
  GuardedKernel* guarded_now = nullptr;
  std::set<Op> hung, crashed;  // crashed: in the current property only
  std::set<Op> unit_refused = refused;
  auto apply_refusals = [&] {
    if (!guarded_now) return;
    std::set<Op> all = unit_refused;
    all.insert(hung.begin(), hung.end());
    all.insert(crashed.begin(), crashed.end());
    guarded_now->refuse(all);
  };
  std::unique_ptr<KernelHost> host;
  std::optional<Kernel> kernel;
  {
    auto on_event = [&](const HostEvent& e) {
      w.send({{"t", "host_end"},
              {"kind", host_event_kind(e.kind)},
              {"op", e.op},
              {"dtype", e.dtype},
              {"fault", e.fault},
              {"how", e.how},
              {"silent_s", e.silent_s},
              {"property", current_property},
              {"input", clip(current_input)}});
      if (e.op.empty() || e.kind == HostEvent::Kind::protocol) return;
      if (const auto op = parse_op(e.op)) {
        (e.kind == HostEvent::Kind::hang ? hung : crashed).insert(*op);
        apply_refusals();
      }
    };
    try {
      host =
          std::make_unique<KernelHost>(source, HostOptions{opt.case_timeout_s, box}, on_event, [&] {
            w.send({{"t", "host_start"}});
          });
      kernel.emplace(host->kernel());
    } catch (const std::exception& e) {
      w.send({{"t", "error"}, {"what", std::string("opening the kernel: ") + e.what()}});
      w.send({{"t", "done"}});
      _exit(0);
    }
  }
  GuardedKernel guarded(*kernel, opt.guard, [&](const GuardIncident& i) {
    w.send({{"t", "incident"},
            {"kind", i.kind},
            {"op", i.op},
            {"dtype", i.dtype},
            {"detail", i.detail},
            {"property", current_property},
            {"input", clip(current_input)}});
  });
  guarded_now = &guarded;
  props::SuiteObserver obs;
  obs.before_case = [&](const std::string& p, const std::string& in) {
    if (p != current_property && !crashed.empty()) {
      // An op that crashed is answered by the gate for the rest of that
      // property only; the next property calls it again (a fresh host).
      crashed.clear();
      current_property = p;
      apply_refusals();
    }
    current_property = p;
    current_input = in;
    w.send({{"t", "case"}, {"property", p}, {"input", clip(in)}});
  };
  obs.on_verdict = [&](const Verdict& v) { w.send({{"t", "verdict"}, {"v", to_json(v)}}); };
  obs.progress = [&](int done, int total) {
    w.send({{"t", "progress"}, {"done", done}, {"total", total}});
  };
  for (const auto& unit : units) {
    props::SuiteConfig one = config;
    if (!unit.properties.empty()) one.properties = unit.properties;
    std::vector<Op> ops = effective_ops(unit, config);
    unit_refused = refused;
    unit_refused.insert(unit.refuse.begin(), unit.refuse.end());
    // Refused calls are answered by the guard (an error that names the
    // crash or hang): the suite still runs those ops, so each property makes
    // its usual verdicts.
    one.ops = ops;
    crashed.clear();
    apply_refusals();
    current_property = unit.properties.size() == 1 ? unit.properties[0] : std::string();
    current_input.clear();
    try {
      auto vs = props::run_suite(guarded.kernel(), one, &obs);
      // Verdicts travel through on_verdict as they are made; the returned list
      // follows for suites that return verdicts without announcing them.
      json all = json::array();
      for (const auto& v : vs) all.push_back(to_json(v));
      w.send({{"t", "unit_done"}, {"verdicts", all}});
    } catch (const std::exception& e) {
      w.send({{"t", "error"}, {"what", e.what()}});
    }
  }
  guarded_now = nullptr;
  host.reset();  // kills the last host and every process it left
  w.send({{"t", "done"}});
  std::fflush(nullptr);
  _exit(0);  // no destructors: a plugin's cannot change what was reported
}

Verdict gate_verdict(const char* property, const std::string& claim, const std::string& kernel) {
  Verdict v;
  v.property = property;
  v.claim = claim;
  v.kernel = kernel;
  v.rule = {"gate.isolation",
            "softmax_audit/kernel.h: calls are synchronous, return a status, touch only the "
            "buffers and sizes given, leave the floating-point environment as they found it, "
            "and give NaN only for rows holding a NaN"};
  return v;
}

const std::string& claim_of(const std::string& id) { return gate_claim(id); }

const char* incident_property(const std::string& kind) {
  if (kind == "nan_output") return kNoNanOutput;
  if (kind == "protocol") return kProtocol;
  if (kind == "fp_environment") return kFpEnvironment;
  return kInBounds;
}

}  // namespace

std::vector<std::string> planned_properties(const props::SuiteConfig& config) {
  if (!config.properties.empty())  // (a live alias is resolved where the selection is made)
    return props::resolve_aliases(config.properties, config.ops, /*retired_only=*/true);
  std::vector<std::string> ids;
  for (const auto& p : props::properties()) ids.push_back(p.id);
  return ids;
}

namespace {

// What one phase of children produced.
struct Sink {
  std::vector<Verdict> verdicts;  // the suite's
  std::vector<Verdict> findings;  // the gate's (gate.*), one per (check, property, op, dtype)
  std::map<std::string, std::size_t> seen;
  int crashes = 0, hangs = 0, processes = 0;
  int kernel_crashes = 0, kernel_hangs = 0;  // of kernel hosts (the judge went on)
  std::set<Op> refused;                      // ops no longer called: they hung
  bool deadline = false;

  void add_finding(Verdict v, const std::string& during) {
    const std::string key = v.property + "|" + during + "|" + v.op + "|" + v.dtype;
    if (auto it = seen.find(key); it != seen.end()) {
      findings[it->second].measured += 1;
      return;
    }
    v.measured = 1;
    v.bound = 0;
    v.outcome = Outcome::fail;
    seen[key] = findings.size();
    findings.push_back(std::move(v));
  }
};

// Runs `units` in order in children, starting a fresh child after a crash or
// hang (which abandons the unit it happened in, or retries a one-property
// unit with the op that failed answered by the gate). Every restart makes
// progress: the unit after it is a later one, or the same one calling the
// kernel for strictly fewer ops, so the loop ends after at most (units x ops)
// children. Progress is reported as units done out of `units.size()`.
Sink run_units(const KernelSource& source, const props::SuiteConfig& config,
               const IsolationOptions& opt, props::SuiteObserver* observer, bool forward_verdicts,
               std::vector<Unit> units, CallBox* box, double deadline, std::set<Op> refused) {
  Sink sink;
  sink.refused = std::move(refused);
  const std::string kname = source.name();
  std::size_t next = 0;  // first unit not finished
  const int total_units = static_cast<int>(units.size());
  std::set<std::string> emitted;  // property|op|dtype of the suite's verdicts so far
  std::set<std::string> violations;
  while (next < units.size()) {
    std::memset(box, 0, sizeof *box);
    const std::vector<Unit> todo(units.begin() + static_cast<long>(next), units.end());
    const std::set<Op> refused_now = sink.refused;
    ChildChannel child(
        [&](const ChildWriter& w) { child_main(w, source, config, todo, refused_now, opt, box); });
    ++sink.processes;

    std::string last_input, last_case_property;
    bool finished = false;
    int announced = 0;  // verdicts of the current unit received through on_verdict

    auto emit = [&](Verdict v) {
      const std::string key = v.property + "|" + v.op + "|" + v.dtype;
      // A retried property repeats the verdicts its first attempt already sent.
      if (!emitted.insert(key).second && next < units.size() && units[next].retry) return;
      if (forward_verdicts && observer && observer->on_verdict) observer->on_verdict(v);
      sink.verdicts.push_back(std::move(v));
    };
    // A kernel host that crashed, hung or sent something that is not a
    // reply; the judge answered that call with an error and went on.
    auto host_end = [&](const json& m) {
      const std::string kind = m.value("kind", ""), op = m.value("op", ""),
                        dtype = m.value("dtype", ""), during = m.value("property", ""),
                        input = m.value("input", "");
      const std::string where =
          "during property " +
          (during.empty() ? units[std::min(next, units.size() - 1)].name : during) +
          ", input: " + (input.empty() ? std::string("(no case announced yet)") : input);
      if (kind == "protocol") {
        const std::string what = m.value("how", "");
        if (!violations.insert(what.substr(0, 60)).second) return;
        Verdict v = gate_verdict(kProtocol, claim_of(kProtocol), kname);
        v.counterexample = where;
        v.note = "the gate saw " + what + "; it was ignored";
        sink.add_finding(std::move(v), "");
        return;
      }
      const bool in_call = !op.empty();
      const std::string fault = m.value("fault", "");
      Verdict v;
      if (kind == "hang") {
        ++sink.kernel_hangs;
        const double silent = m.value("silent_s", 0.0);
        v = gate_verdict(kNoHang, claim_of(kNoHang), kname);
        v.outcome = Outcome::fail;
        v.measured = silent;
        v.bound = opt.case_timeout_s;
        v.rule = {"gate.timeout", "the case timeout (--timeout or the spec's 'timeout', seconds)"};
        v.note =
            "no answer for " + std::to_string(silent) + " s " +
            (in_call ? "inside a kernel call" : "while the kernel's process opened the kernel") +
            "; the process was killed and the call answered with an error";
        if (const auto failed = parse_op(op)) {
          sink.refused.insert(*failed);
          v.note += "; the gate calls " + op +
                    " no more in this run (every later call of it is answered with an error "
                    "verdict)";
        }
      } else {
        ++sink.kernel_crashes;
        const bool guard_hit = fault.find("buffer '") != std::string::npos;
        const char* id = guard_hit ? kInBounds : kNoCrash;
        v = gate_verdict(id, claim_of(id), kname);
        v.outcome = Outcome::fail;
        v.measured = 1;
        v.bound = 0;
        std::string how = m.value("how", "");
        if (!fault.empty()) how += ": " + fault;
        v.note = "the kernel's process was " + how +
                 (in_call ? "; the gate answered that call with an error, and the property's "
                            "further " +
                                op + " calls itself, and went on in a fresh process"
                          : " while opening the kernel");
      }
      v.op = op;
      v.dtype = dtype;
      v.counterexample = where;
      sink.findings.push_back(std::move(v));
    };
    auto handle = [&](const json& m) {
      const std::string t = m.value("t", "");
      if (finished) return;  // nothing counts after "done"
      if (t == "case") {
        last_case_property = m.value("property", "");
        last_input = m.value("input", "");
        if (observer && observer->before_case)
          observer->before_case(last_case_property, last_input);
      } else if (t == "verdict") {
        emit(verdict_from_json(m.at("v")));
        ++announced;
      } else if (t == "unit_done") {
        if (next >= units.size()) return;
        const auto& all = m.at("verdicts");
        for (std::size_t i = static_cast<std::size_t>(announced); i < all.size(); ++i)
          emit(verdict_from_json(all[i]));
        announced = 0;
        ++next;
        last_input.clear();
        if (observer && observer->progress)
          observer->progress(static_cast<int>(next) * 1000, total_units * 1000);
      } else if (t == "progress") {
        const int done = m.value("done", 0), total = m.value("total", 0);
        if (observer && observer->progress && total > 0)
          observer->progress(
              static_cast<int>(next) * 1000 + static_cast<int>(1000.0 * done / total),
              total_units * 1000);
      } else if (t == "incident") {
        const char* id = incident_property(m.value("kind", ""));
        Verdict v = gate_verdict(id, claim_of(id), kname);
        v.op = m.value("op", "");
        v.dtype = m.value("dtype", "");
        const std::string during = m.value("property", "");
        v.counterexample = "during property " + during + ", input: " + m.value("input", "");
        v.note = m.value("detail", "");
        sink.add_finding(std::move(v), during);
      } else if (t == "host_start") {
        ++sink.processes;
      } else if (t == "host_end") {
        host_end(m);
      } else if (t == "error") {
        Verdict v =
            gate_verdict("gate.suite_error", "the suite runs every property to the end", kname);
        v.outcome = Outcome::error;
        v.note = (next < units.size() ? "run_suite for " + units[next].name : "the run") +
                 " stopped with an exception: " + m.value("what", "");
        emit(std::move(v));
        announced = 0;
        if (next < units.size()) ++next;
      } else if (t == "done") {
        finished = true;
      }
    };
    auto on_violation = [&](const std::string& what) {
      if (!violations.insert(what.substr(0, 60)).second) return;
      Verdict v = gate_verdict(kProtocol, claim_of(kProtocol), kname);
      v.counterexample =
          "during property " +
          (last_case_property.empty() ? std::string("(none yet)") : last_case_property) +
          ", input: " + (last_input.empty() ? std::string("(no case announced yet)") : last_input);
      v.note = "the gate saw " + what + "; it was ignored";
      sink.add_finding(std::move(v), "");
    };
    // The case timeout bounds kernel calls: while the judge runs the suite's
    // own code (between calls: the reference, the checks) its silence is not
    // a hang, only the deadline bounds it (measured: one attention case's
    // reference took over 60 s under ASan on a loaded 2-core machine, and
    // the naive kernel was failed for it).
    const ChildEnd end = child.run(
        opt.case_timeout_s, deadline,
        [&](const json& m) {
          try {
            handle(m);
          } catch (const std::exception& e) {
            on_violation(std::string("an unreadable gate message (") + e.what() + ")");
          }
        },
        on_violation, [&] { return box->in_call == 0; });

    // A kernel host the judge left behind (the judge was killed at the
    // deadline, or died): its process group goes too.
    if (const pid_t left = box->host_pid; left > 0) kill_group(left);
    if (finished && end.exited && end.status == 0) break;
    if (next >= units.size()) break;  // died after its last unit: nothing was lost

    if (end.deadline) {
      // Out of time: the unit in progress and every later one were not run.
      sink.deadline = true;
      Verdict v = gate_verdict(kDeadline, claim_of(kDeadline), kname);
      v.outcome = Outcome::incomplete;
      v.measured = opt.deadline_s;
      v.bound = opt.deadline_s;
      v.rule = {"gate.deadline",
                "the run's overall deadline (--deadline or the spec's "
                "'deadline', seconds)"};
      std::string names;
      for (std::size_t i = next; i < units.size(); ++i)
        for (const auto& id :
             units[i].properties.empty() ? planned_properties(config) : units[i].properties)
          names += (names.empty() ? "" : ", ") + id;
      v.note =
          "the deadline passed; the kernel's process was killed and these were not run: " + names;
      sink.findings.push_back(std::move(v));
      break;
    }

    // The child did not finish: attribute it to the unit it was running.
    const std::string during = units[next].name;
    const bool in_call = box->in_call != 0;
    const std::string fault(box->fault, strnlen(box->fault, sizeof box->fault));
    const std::optional<Op> failed_op =
        in_call ? parse_op(std::string(box->op, strnlen(box->op, sizeof box->op))) : std::nullopt;
    Verdict v;
    if (end.timed_out) {
      ++sink.hangs;
      v = gate_verdict(kNoHang, claim_of(kNoHang), kname);
      v.outcome = Outcome::fail;
      v.measured = end.silent_s;
      v.bound = opt.case_timeout_s;
      v.rule = {"gate.timeout", "the case timeout (--timeout or the spec's 'timeout', seconds)"};
      v.note = std::string("no answer for ") + std::to_string(end.silent_s) + " s" +
               (in_call ? std::string(" inside a kernel call") : " (not inside a kernel call)") +
               "; the process was killed and the remaining cases of " + during + " were not run";
      if (failed_op) {
        sink.refused.insert(*failed_op);
        v.note += "; the gate calls " + std::string(name_of(*failed_op)) +
                  " no more in this run (every later call of it is answered with an error "
                  "verdict)";
      }
    } else {
      ++sink.crashes;
      const bool guard_hit = fault.find("buffer '") != std::string::npos;
      const char* id = guard_hit ? kInBounds : kNoCrash;
      v = gate_verdict(id, claim_of(id), kname);
      v.outcome = Outcome::fail;
      v.measured = 1;
      v.bound = 0;
      std::string how =
          end.exited ? "exited with status " + std::to_string(end.status) + " before finishing"
                     : end.describe();
      if (!fault.empty()) how += ": " + fault;
      if (!in_call) {
        v.outcome = Outcome::error;
        how +=
            " — outside any kernel call, so the suite or the gate, not necessarily the kernel, "
            "is at fault";
      }
      v.note = "the kernel's process was " + how + "; the remaining cases of " + during +
               " were not run";
    }
    if (in_call) {
      v.op = std::string(box->op, strnlen(box->op, sizeof box->op));
      v.dtype = std::string(box->dtype, strnlen(box->dtype, sizeof box->dtype));
    }
    v.counterexample =
        "during property " + (last_case_property.empty() ? during : last_case_property) +
        ", input: " + (last_input.empty() ? std::string("(no case announced yet)") : last_input);
    // Go on in a fresh process: with the same property, the op that failed
    // answered by the gate from now on (the property still makes its
    // verdicts for that op, each an error that names the crash, so the run's
    // verdict names are those of a run where the kernel behaves), if that op
    // was one the unit checks; else with the next unit. Either way the next
    // judge calls the kernel for strictly fewer ops than this one did.
    const std::vector<Op> ops = effective_ops(units[next], config);
    if (failed_op && units[next].properties.size() == 1 && contains(ops, *failed_op)) {
      Unit retry = units[next];
      retry.ops = ops;
      retry.retry = true;
      retry.refuse.push_back(*failed_op);
      retry.name =
          units[next].properties[0] + " (" + op_names({*failed_op}) + " answered by the gate)";
      units[next] = retry;
      v.note += "; the gate went on with the property in a fresh process, answering its further " +
                op_names({*failed_op}) + " calls itself";
    } else {
      ++next;
      v.note += "; the gate went on with the next property in a fresh process";
    }
    sink.findings.push_back(std::move(v));
  }
  return sink;
}

}  // namespace

IsolatedRun run_isolated(const Kernel& kernel, const props::SuiteConfig& config,
                         const IsolationOptions& opt, props::SuiteObserver* observer) {
  return run_isolated(KernelSource(kernel), config, opt, observer);
}

IsolatedRun run_isolated(const KernelSource& source, const props::SuiteConfig& config_in,
                         const IsolationOptions& opt, props::SuiteObserver* observer) {
  IsolatedRun run;
  // One seed for every process, so that the whole run is one reproducible run.
  props::SuiteConfig config = config_in;
  if (config.seed == 0)
    config.seed = (std::uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  const std::vector<std::string> plan = planned_properties(config);
  const std::string kname = source.name();
  const double deadline = opt.deadline_s > 0 ? steady_seconds() + opt.deadline_s : 0;

  Sink sink;
  if (!opt.isolate) {
    const Kernel kernel = source.open();
    GuardedKernel guarded(kernel, opt.guard, [&](const GuardIncident& i) {
      const char* id = incident_property(i.kind);
      Verdict v = gate_verdict(id, claim_of(id), kname);
      v.op = i.op;
      v.dtype = i.dtype;
      v.note = i.detail;
      sink.add_finding(std::move(v), "");
    });
    sink.verdicts = props::run_suite(guarded.kernel(), config, observer);
  } else {
    // While kernel hosts live, no process of this user may read or write the
    // gate's memory (through /proc/PID/mem; the hosts also lose the
    // capability that would override this).
    struct NotDumpable {
      int was = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
      NotDumpable() { prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }
      ~NotDumpable() {
        if (was > 0) prctl(PR_SET_DUMPABLE, was, 0, 0, 0);
      }
    } not_dumpable;
    void* shm =
        mmap(nullptr, sizeof(CallBox), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) throw std::runtime_error("gate: cannot map shared memory");
    auto* box = static_cast<CallBox*>(shm);
    std::vector<Unit> per_property;
    for (const auto& id : plan) per_property.push_back(Unit{{id}, {}, id, false, {}});
    const bool whole_first = opt.granularity == Granularity::whole_then_property && plan.size() > 1;
    bool done = false;
    std::set<Op> refused;
    std::vector<Verdict> carried;  // gate findings of the first phase that the second keeps
    if (whole_first) {
      // Fast path: the whole selection in one run_suite call (the suite shares
      // work between properties). Verdicts are held back until it succeeds.
      Sink whole =
          run_units(source, config, opt, observer, false,
                    {Unit{{}, {}, "(all selected properties)", false, {}}}, box, deadline, {});
      run.processes += whole.processes;
      if ((whole.crashes == 0 && whole.hangs == 0) || whole.deadline) {
        sink = std::move(whole);
        if (observer && observer->on_verdict)
          for (const auto& v : sink.verdicts) observer->on_verdict(v);
        done = true;
      } else {
        // The kernel crashed or hung: every property is run again, one per
        // unit (same seed, so the same inputs), which names the property that
        // failed and keeps every other property's verdicts. An op that hung
        // is not called again: its hang is kept from this phase.
        refused = whole.refused;
        for (auto& f : whole.findings)
          if (f.property == kNoHang || f.property == kProtocol) carried.push_back(f);
        run.hangs += whole.hangs;
      }
    }
    if (!done) {
      sink = run_units(source, config, opt, observer, true, per_property, box, deadline, refused);
      run.processes += sink.processes;
      sink.findings.insert(sink.findings.begin(), carried.begin(), carried.end());
    }
    munmap(shm, sizeof(CallBox));
  }
  run.crashes += sink.crashes + sink.kernel_crashes;
  run.hangs += sink.hangs + sink.kernel_hangs;
  run.verdicts = std::move(sink.verdicts);

  // A destructor that misbehaved when the probe closed the plugin.
  if (!source.unload_problem().empty()) {
    Verdict v = gate_verdict(kNoCrash, claim_of(kNoCrash), kname);
    v.outcome = Outcome::fail;
    v.measured = 1;
    v.bound = 0;
    v.counterexample = "closing the library (no kernel call)";
    v.note = source.unload_problem();
    sink.findings.push_back(std::move(v));
  }

  // The gate's own checks: a failing verdict per finding, a passing one per check without any.
  auto& findings = sink.findings;
  for (const char* id : kReportedChecks) {
    bool any = false;
    for (const auto& f : findings) any = any || f.property == id;
    if (any) continue;
    // Every isolated call goes through the guard (a kernel host's, for
    // host-memory and device kernels alike); in this process
    // (--no-isolation) a device kernel's calls are not wrapped.
    const bool host = opt.isolate || source.memory() == SA_MEMORY_HOST;
    const std::string sid = id;
    if (!opt.isolate && (sid == kNoCrash || sid == kNoHang || sid == kProtocol)) continue;
    if (sid == kInBounds && (!opt.guard.guard_buffers || !host)) continue;
    if (sid == kNoNanOutput && (!opt.guard.check_nan || !host)) continue;
    if (sid == kFpEnvironment && !host) continue;
    if (sink.deadline && sid != kProtocol) continue;  // not every call was seen
    Verdict v = gate_verdict(id, claim_of(id), kname);
    v.outcome = Outcome::pass;
    v.measured = 0;
    v.bound = 0;
    v.note = "over every kernel call of this run (" + std::to_string(plan.size()) +
             " properties, seed " + std::to_string(config.seed) + ")";
    findings.push_back(std::move(v));
  }
  for (auto& f : findings) {
    if (f.property == kInBounds || f.property == kNoNanOutput || f.property == kFpEnvironment ||
        f.property == kProtocol)
      if (f.outcome == Outcome::fail && std::isfinite(f.measured) && f.measured > 1)
        f.note += " (seen " + std::to_string(static_cast<long long>(f.measured)) +
                  " times; the first is shown)";
    if (observer && observer->on_verdict) observer->on_verdict(f);
    run.verdicts.push_back(std::move(f));
  }
  if (!sink.refused.empty()) run.refused_ops = op_names(sink.refused);
  run.seed = config.seed;
  return run;
}

std::string why_kernel_cannot_run(const Kernel& kernel) {
  if (kernel.memory() != SA_MEMORY_CUDA) return "";
  int fds[2];
  if (pipe(fds) != 0) return "cannot create a pipe to probe for a CUDA device";
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return "cannot fork to probe for a CUDA device";
  }
  if (pid == 0) {
    close(fds[0]);
    const DeviceMemory& dm = device_memory();
    const std::string why =
        dm.alloc ? "" : (dm.why_unavailable ? dm.why_unavailable() : "no CUDA device");
    if (!why.empty() && write(fds[1], why.data(), why.size()) < 0) _exit(2);
    _exit(why.empty() ? 0 : 1);
  }
  close(fds[1]);
  std::string why;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;)
    why.append(buf, static_cast<std::size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  if (why.empty()) why = "the CUDA device probe did not finish normally";
  return "kernel '" + kernel.name() +
         "' works on CUDA device memory, but no CUDA device is usable here (" + why + ")";
}

}  // namespace sa::gate
