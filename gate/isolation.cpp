#include "gate/isolation.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
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

#include "gate/verdict_json.hpp"

namespace sa::gate {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxInput = 64 * 1024;

std::string clip(const std::string& s) {
  if (s.size() <= kMaxInput) return s;
  return s.substr(0, kMaxInput) + " ...(truncated at 64 KiB)";
}

// Child side: write one JSON line, whole, to the pipe.
void send(int fd, const json& j) {
  std::string line = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  const char* p = line.data();
  std::size_t left = line.size();
  while (left) {
    const ssize_t w = write(fd, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      _exit(3);  // the parent is gone
    }
    p += w;
    left -= static_cast<std::size_t>(w);
  }
}

// Runs each unit (a list of property ids; empty = the config's selection) as
// one run_suite call, reporting everything through the pipe.
// One run_suite call: these properties (empty = the config's selection),
// restricted to these ops (empty = the config's).
struct Unit {
  std::vector<std::string> properties;
  std::vector<Op> ops;
  std::string name;
  bool retry = false;  // a property re-run without an op that crashed or hung
};

[[noreturn]] void child_main(int fd, const Kernel& kernel, const props::SuiteConfig& config,
                             const std::vector<Unit>& units, const IsolationOptions& opt,
                             CallBox* box) {
  install_fault_handler();
  set_call_box(box);
  std::string current_property, current_input;
  GuardedKernel guarded(kernel, opt.guard, [&](const GuardIncident& i) {
    send(fd, {{"t", "incident"},
              {"kind", i.kind},
              {"op", i.op},
              {"dtype", i.dtype},
              {"detail", i.detail},
              {"property", current_property},
              {"input", clip(current_input)}});
  });
  props::SuiteObserver obs;
  obs.before_case = [&](const std::string& p, const std::string& in) {
    current_property = p;
    current_input = in;
    send(fd, {{"t", "case"}, {"property", p}, {"input", clip(in)}});
  };
  obs.on_verdict = [&](const Verdict& v) { send(fd, {{"t", "verdict"}, {"v", to_json(v)}}); };
  obs.progress = [&](int done, int total) {
    send(fd, {{"t", "progress"}, {"done", done}, {"total", total}});
  };
  for (const auto& unit : units) {
    props::SuiteConfig one = config;
    if (!unit.properties.empty()) one.properties = unit.properties;
    if (!unit.ops.empty()) one.ops = unit.ops;
    current_property = unit.properties.size() == 1 ? unit.properties[0] : std::string();
    current_input.clear();
    try {
      auto vs = props::run_suite(guarded.kernel(), one, &obs);
      // Verdicts travel through on_verdict as they are made; the returned list
      // follows for suites that return verdicts without announcing them.
      json all = json::array();
      for (const auto& v : vs) all.push_back(to_json(v));
      send(fd, {{"t", "unit_done"}, {"verdicts", all}});
    } catch (const std::exception& e) {
      send(fd, {{"t", "error"}, {"what", e.what()}});
    }
  }
  send(fd, {{"t", "done"}});
  close(fd);
  _exit(0);
}

Verdict gate_verdict(const char* property, const std::string& claim, const Kernel& k) {
  Verdict v;
  v.property = property;
  v.claim = claim;
  v.kernel = k.name();
  v.rule = {"gate.isolation",
            "softmax_audit/kernel.h: calls are synchronous, return a status, touch only the "
            "buffers and sizes given, and give NaN only for rows holding a NaN"};
  return v;
}

const char* claim_of(const std::string& id) {
  if (id == kNoCrash) return "every kernel call returns (the process is not killed by a signal)";
  if (id == kNoHang) return "every case finishes within the case timeout";
  if (id == kInBounds) return "the kernel reads and writes only inside the buffers it is given";
  return "outputs are NaN only for rows whose inputs hold a NaN";
}

std::string signal_text(int sig) {
  const char* s = strsignal(sig);
  return "signal " + std::to_string(sig) + (s ? std::string(" (") + s + ")" : std::string());
}

}  // namespace

std::vector<std::string> planned_properties(const props::SuiteConfig& config) {
  if (!config.properties.empty()) return config.properties;
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
// hang (which abandons the unit it happened in). `names[i]` names unit i in
// the verdicts. Progress is reported as units done out of `units.size()`.
Sink run_units(const Kernel& kernel, const props::SuiteConfig& config, const IsolationOptions& opt,
               props::SuiteObserver* observer, bool forward_verdicts, std::vector<Unit> units,
               CallBox* box) {
  Sink sink;
  std::size_t next = 0;  // first unit not finished
  const int total_units = static_cast<int>(units.size());
  std::set<std::string> emitted;  // property|op|dtype of the suite's verdicts so far
  while (next < units.size()) {
    std::memset(box, 0, sizeof *box);
    int fds[2];
    if (pipe(fds) != 0)
      throw std::runtime_error(std::string("gate: pipe: ") + std::strerror(errno));
    std::fflush(nullptr);
    const std::vector<Unit> todo(units.begin() + static_cast<long>(next), units.end());
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("gate: fork: ") + std::strerror(errno));
    if (pid == 0) {
      close(fds[0]);
      child_main(fds[1], kernel, config, todo, opt, box);
    }
    ++sink.processes;
    close(fds[1]);
    const int fd = fds[0];

    std::string buffer, last_input, last_case_property;
    bool finished = false, hung = false;
    int announced = 0;  // verdicts of the current unit received through on_verdict
    auto last_message = Clock::now();
    std::vector<char> chunk(1 << 16);

    auto emit = [&](Verdict v) {
      const std::string key = v.property + "|" + v.op + "|" + v.dtype;
      // A retried property repeats the verdicts its first attempt already sent.
      if (!emitted.insert(key).second && next < units.size() && units[next].retry) return;
      if (forward_verdicts && observer && observer->on_verdict) observer->on_verdict(v);
      sink.verdicts.push_back(std::move(v));
    };
    auto handle = [&](const json& m) {
      const std::string t = m.value("t", "");
      if (t == "case") {
        last_case_property = m.value("property", "");
        last_input = m.value("input", "");
        if (observer && observer->before_case)
          observer->before_case(last_case_property, last_input);
      } else if (t == "verdict") {
        emit(verdict_from_json(m.at("v")));
        ++announced;
      } else if (t == "unit_done") {
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
        const std::string kind = m.value("kind", "");
        const char* id = kind == "nan_output" ? kNoNanOutput : kInBounds;
        Verdict v = gate_verdict(id, claim_of(id), kernel);
        v.op = m.value("op", "");
        v.dtype = m.value("dtype", "");
        const std::string during = m.value("property", "");
        v.counterexample = "during property " + during + ", input: " + m.value("input", "");
        v.note = m.value("detail", "");
        sink.add_finding(std::move(v), during);
      } else if (t == "error") {
        Verdict v =
            gate_verdict("gate.suite_error", "the suite runs every property to the end", kernel);
        v.outcome = Outcome::error;
        v.note = "run_suite for " + units[next].name +
                 " stopped with an exception: " + m.value("what", "");
        emit(std::move(v));
        announced = 0;
        ++next;
      } else if (t == "done") {
        finished = true;
      }
    };

    for (;;) {
      const auto waited = std::chrono::duration<double>(Clock::now() - last_message).count();
      const double left = opt.case_timeout_s - waited;
      if (left <= 0) {
        hung = true;
        break;
      }
      pollfd p{fd, POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(std::min(left * 1000.0, 1e9)) + 1);
      if (r < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error(std::string("gate: poll: ") + std::strerror(errno));
      }
      if (r == 0) continue;
      const ssize_t got = read(fd, chunk.data(), chunk.size());
      if (got < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (got == 0) break;  // the child closed the pipe (done or dead)
      last_message = Clock::now();
      buffer.append(chunk.data(), static_cast<std::size_t>(got));
      std::size_t start = 0, nl;
      while ((nl = buffer.find('\n', start)) != std::string::npos) {
        const std::string line = buffer.substr(start, nl - start);
        start = nl + 1;
        try {
          handle(json::parse(line));
        } catch (const std::exception& e) {
          Verdict v = gate_verdict("gate.protocol", "the child's messages are well formed", kernel);
          v.outcome = Outcome::error;
          v.note = std::string("unreadable message from the kernel's process: ") + e.what();
          emit(std::move(v));
        }
      }
      buffer.erase(0, start);
    }
    const double silent = std::chrono::duration<double>(Clock::now() - last_message).count();
    if (hung) kill(pid, SIGKILL);
    close(fd);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (finished && WIFEXITED(status) && WEXITSTATUS(status) == 0) break;
    if (next >= units.size()) break;  // died after its last unit: nothing was lost

    // The child did not finish: attribute it to the unit it was running.
    const std::string during = units[next].name;
    const bool in_call = box->in_call != 0;
    const std::string fault(box->fault, strnlen(box->fault, sizeof box->fault));
    Verdict v;
    if (hung) {
      ++sink.hangs;
      v = gate_verdict(kNoHang, claim_of(kNoHang), kernel);
      v.outcome = Outcome::fail;
      v.measured = silent;
      v.bound = opt.case_timeout_s;
      v.rule = {"gate.timeout", "the case timeout (--timeout or the spec's 'timeout', seconds)"};
      v.note = std::string("no answer for ") + std::to_string(silent) + " s" +
               (in_call ? std::string(" inside a kernel call") : " (not inside a kernel call)") +
               "; the process was killed and the remaining cases of " + during + " were not run";
    } else {
      ++sink.crashes;
      const bool guard_hit = fault.find("buffer '") != std::string::npos;
      v = gate_verdict(guard_hit ? kInBounds : kNoCrash, claim_of(guard_hit ? kInBounds : kNoCrash),
                       kernel);
      v.outcome = Outcome::fail;
      v.measured = 1;
      v.bound = 0;
      std::string how =
          WIFSIGNALED(status)
              ? "killed by " + signal_text(WTERMSIG(status))
              : "exited with status " + std::to_string(WEXITSTATUS(status)) + " before finishing";
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
      v.op = box->op;
      v.dtype = box->dtype;
    }
    v.counterexample =
        "during property " + (last_case_property.empty() ? during : last_case_property) +
        ", input: " + (last_input.empty() ? std::string("(no case announced yet)") : last_input);
    // Go on in a fresh process: with the same property without the op that
    // failed (its other ops still run), else with the next unit.
    std::optional<Op> failed_op = in_call ? parse_op(box->op) : std::nullopt;
    if (failed_op && units[next].properties.size() == 1) {
      std::vector<Op> ops = units[next].ops;
      if (ops.empty()) ops = config.ops;
      if (ops.empty()) ops.assign(std::begin(all_ops), std::end(all_ops));
      ops.erase(std::remove(ops.begin(), ops.end(), *failed_op), ops.end());
      if (!ops.empty()) {
        Unit retry = units[next];
        retry.ops = ops;
        retry.retry = true;
        retry.name = units[next].properties[0] + " (without " + name_of(*failed_op) + ")";
        units[next] = retry;
        v.note += "; the gate went on with the property's other operations in a fresh process";
      } else {
        ++next;
      }
    } else {
      ++next;
      v.note += "; the gate went on with the next property in a fresh process";
    }
    sink.findings.push_back(std::move(v));
  }
  return sink;
}

}  // namespace

IsolatedRun run_isolated(const Kernel& kernel, const props::SuiteConfig& config_in,
                         const IsolationOptions& opt, props::SuiteObserver* observer) {
  IsolatedRun run;
  // One seed for every process, so that the whole run is one reproducible run.
  props::SuiteConfig config = config_in;
  if (config.seed == 0)
    config.seed = (std::uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  const std::vector<std::string> plan = planned_properties(config);

  Sink sink;
  if (!opt.isolate) {
    GuardedKernel guarded(kernel, opt.guard, [&](const GuardIncident& i) {
      const char* id = i.kind == "nan_output" ? kNoNanOutput : kInBounds;
      Verdict v = gate_verdict(id, claim_of(id), kernel);
      v.op = i.op;
      v.dtype = i.dtype;
      v.note = i.detail;
      sink.add_finding(std::move(v), "");
    });
    sink.verdicts = props::run_suite(guarded.kernel(), config, observer);
  } else {
    void* shm =
        mmap(nullptr, sizeof(CallBox), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shm == MAP_FAILED) throw std::runtime_error("gate: cannot map shared memory");
    auto* box = static_cast<CallBox*>(shm);
    std::vector<Unit> per_property;
    for (const auto& id : plan) per_property.push_back(Unit{{id}, {}, id, false});
    const bool whole_first = opt.granularity == Granularity::whole_then_property && plan.size() > 1;
    bool done = false;
    if (whole_first) {
      // Fast path: the whole selection in one run_suite call (the suite shares
      // work between properties). Verdicts are held back until it succeeds.
      Sink whole = run_units(kernel, config, opt, observer, false,
                             {Unit{{}, {}, "(all selected properties)", false}}, box);
      run.processes += whole.processes;
      if (whole.crashes == 0 && whole.hangs == 0) {
        sink = std::move(whole);
        if (observer && observer->on_verdict)
          for (const auto& v : sink.verdicts) observer->on_verdict(v);
        done = true;
      }
      // Else: the kernel crashed or hung; every property is run again, one per
      // unit (same seed, so the same inputs), which names the property that
      // failed and keeps every other property's verdicts.
    }
    if (!done) {
      sink = run_units(kernel, config, opt, observer, true, per_property, box);
      run.processes += sink.processes;
    }
    munmap(shm, sizeof(CallBox));
  }
  run.crashes = sink.crashes;
  run.hangs = sink.hangs;
  run.verdicts = std::move(sink.verdicts);

  // The gate's own checks: a failing verdict per finding, a passing one per check without any.
  auto& findings = sink.findings;
  for (const char* id : {kNoCrash, kNoHang, kInBounds, kNoNanOutput}) {
    bool any = false;
    for (const auto& f : findings) any = any || f.property == id;
    if (any) continue;
    if (!opt.isolate && (std::string(id) == kNoCrash || std::string(id) == kNoHang)) continue;
    if (std::string(id) == kInBounds &&
        (!opt.guard.guard_buffers || kernel.memory() != SA_MEMORY_HOST))
      continue;
    if (std::string(id) == kNoNanOutput &&
        (!opt.guard.check_nan || kernel.memory() != SA_MEMORY_HOST))
      continue;
    Verdict v = gate_verdict(id, claim_of(id), kernel);
    v.outcome = Outcome::pass;
    v.measured = 0;
    v.bound = 0;
    v.note = "over every kernel call of this run (" + std::to_string(plan.size()) +
             " properties, seed " + std::to_string(config.seed) + ")";
    findings.push_back(std::move(v));
  }
  for (auto& f : findings) {
    if (f.property == kInBounds || f.property == kNoNanOutput)
      if (f.outcome == Outcome::fail && std::isfinite(f.measured) && f.measured > 1)
        f.note += " (seen in " + std::to_string(static_cast<long long>(f.measured)) +
                  " calls; the first input is shown)";
    if (observer && observer->on_verdict) observer->on_verdict(f);
    run.verdicts.push_back(std::move(f));
  }
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
