#include "gate/isolation.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
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

[[noreturn]] void child_main(int fd, const Kernel& kernel, const props::SuiteConfig& config,
                             const std::vector<std::string>& todo, const IsolationOptions& opt,
                             CallBox* box) {
  install_fault_handler();
  set_call_box(box);
  std::string current_property, current_input;
  GuardedKernel guarded(kernel, opt.guard, [&](const GuardIncident& i) {
    send(fd, {{"t", "incident"}, {"kind", i.kind}, {"op", i.op}, {"dtype", i.dtype},
              {"detail", i.detail}, {"property", current_property}, {"input", clip(current_input)}});
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
  for (const auto& id : todo) {
    props::SuiteConfig one = config;
    one.properties = {id};
    current_property = id;
    current_input.clear();
    try {
      // Verdicts travel through on_verdict as they are made; the returned list
      // is sent only for those the observer did not see (counted by the parent).
      auto vs = props::run_suite(guarded.kernel(), one, &obs);
      send(fd, {{"t", "property_done"}, {"id", id}, {"count", vs.size()}});
      // Fallback for suites that return verdicts without calling on_verdict.
      json all = json::array();
      for (const auto& v : vs) all.push_back(to_json(v));
      send(fd, {{"t", "returned"}, {"id", id}, {"verdicts", all}});
    } catch (const std::exception& e) {
      send(fd, {{"t", "error"}, {"property", id}, {"what", e.what()}});
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

IsolatedRun run_isolated(const Kernel& kernel, const props::SuiteConfig& config,
                         const IsolationOptions& opt, props::SuiteObserver* observer) {
  IsolatedRun run;
  const std::vector<std::string> plan = planned_properties(config);
  std::deque<std::string> remaining(plan.begin(), plan.end());
  const int total_props = static_cast<int>(plan.size());

  // Gate findings, one verdict per (check, suite property, op, dtype), first input kept.
  std::map<std::string, std::size_t> seen;  // key -> index into findings
  std::vector<Verdict> findings;
  auto add_finding = [&](Verdict v, const std::string& during) {
    const std::string key = v.property + "|" + during + "|" + v.op + "|" + v.dtype;
    if (auto it = seen.find(key); it != seen.end()) {
      Verdict& f = findings[it->second];
      f.measured += 1;
      return;
    }
    v.measured = 1;
    v.bound = 0;
    v.outcome = Outcome::fail;
    seen[key] = findings.size();
    findings.push_back(std::move(v));
  };

  if (!opt.isolate) {
    GuardedKernel guarded(kernel, opt.guard, [&](const GuardIncident& i) {
      Verdict v = gate_verdict(i.kind == "nan_output" ? kNoNanOutput : kInBounds,
                               claim_of(i.kind == "nan_output" ? kNoNanOutput : kInBounds), kernel);
      v.op = i.op;
      v.dtype = i.dtype;
      v.note = i.detail;
      add_finding(std::move(v), "");
    });
    run.verdicts = props::run_suite(guarded.kernel(), config, observer);
  }

  // Shared with the children: the call in progress and any fault text.
  void* shm = opt.isolate ? mmap(nullptr, sizeof(CallBox), PROT_READ | PROT_WRITE,
                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0)
                          : MAP_FAILED;
  if (opt.isolate && shm == MAP_FAILED) throw std::runtime_error("gate: cannot map shared memory");
  auto* box = static_cast<CallBox*>(shm);

  int props_done = 0;
  while (opt.isolate && !remaining.empty()) {
    std::memset(box, 0, sizeof *box);
    int fds[2];
    if (pipe(fds) != 0) throw std::runtime_error(std::string("gate: pipe: ") + std::strerror(errno));
    std::fflush(nullptr);
    const std::vector<std::string> todo(remaining.begin(), remaining.end());
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(std::string("gate: fork: ") + std::strerror(errno));
    if (pid == 0) {
      close(fds[0]);
      child_main(fds[1], kernel, config, todo, opt, box);
    }
    ++run.processes;
    close(fds[1]);
    const int fd = fds[0];

    std::string buffer, last_input, last_property = remaining.front();
    bool finished = false, hung = false;
    std::map<std::string, int> seen_verdicts;  // property -> verdicts received via on_verdict
    auto last_message = Clock::now();
    std::vector<char> chunk(1 << 16);

    auto handle = [&](const json& m) {
      const std::string t = m.value("t", "");
      if (t == "case") {
        last_property = m.value("property", "");
        last_input = m.value("input", "");
        if (observer && observer->before_case) observer->before_case(last_property, last_input);
      } else if (t == "verdict") {
        Verdict v = verdict_from_json(m.at("v"));
        ++seen_verdicts[remaining.empty() ? "" : remaining.front()];
        if (observer && observer->on_verdict) observer->on_verdict(v);
        run.verdicts.push_back(std::move(v));
      } else if (t == "returned") {
        // Verdicts the suite returned without announcing them through on_verdict.
        const auto& all = m.at("verdicts");
        const int announced = seen_verdicts[m.value("id", "")];
        for (std::size_t i = static_cast<std::size_t>(announced); i < all.size(); ++i) {
          Verdict v = verdict_from_json(all[i]);
          if (observer && observer->on_verdict) observer->on_verdict(v);
          run.verdicts.push_back(std::move(v));
        }
      } else if (t == "property_done") {
        if (!remaining.empty()) remaining.pop_front();
        ++props_done;
        last_input.clear();
        if (observer && observer->progress) observer->progress(props_done * 1000, total_props * 1000);
      } else if (t == "progress") {
        const int done = m.value("done", 0), total = m.value("total", 0);
        if (observer && observer->progress && total > 0)
          observer->progress(props_done * 1000 + static_cast<int>(1000.0 * done / total),
                             total_props * 1000);
      } else if (t == "incident") {
        const std::string kind = m.value("kind", "");
        const char* id = kind == "nan_output" ? kNoNanOutput : kInBounds;
        Verdict v = gate_verdict(id, claim_of(id), kernel);
        v.op = m.value("op", "");
        v.dtype = m.value("dtype", "");
        const std::string during = m.value("property", "");
        v.counterexample = "during property " + during + ", input: " + m.value("input", "");
        v.note = m.value("detail", "");
        add_finding(std::move(v), during);
      } else if (t == "error") {
        Verdict v = gate_verdict("gate.suite_error", "the suite runs the property to the end", kernel);
        v.outcome = Outcome::error;
        v.note = "property " + m.value("property", "") + " stopped with an exception: " +
                 m.value("what", "");
        run.verdicts.push_back(std::move(v));
        if (!remaining.empty()) remaining.pop_front();
        ++props_done;
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
          run.verdicts.push_back(std::move(v));
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

    // The child did not finish: attribute it to the property it was running.
    const std::string during = remaining.empty() ? last_property : remaining.front();
    const bool in_call = box->in_call != 0;
    const std::string fault(box->fault, strnlen(box->fault, sizeof box->fault));
    Verdict v;
    if (hung) {
      ++run.hangs;
      v = gate_verdict(kNoHang, claim_of(kNoHang), kernel);
      v.outcome = Outcome::fail;
      v.measured = silent;
      v.bound = opt.case_timeout_s;
      v.rule = {"gate.timeout", "the case timeout (--timeout or the spec's 'timeout', seconds)"};
      v.note = std::string("no answer for ") + std::to_string(silent) + " s" +
               (in_call ? std::string(" inside a kernel call") : " (not inside a kernel call)") +
               "; the process was killed and the remaining cases of " + during + " were not run";
    } else {
      ++run.crashes;
      const bool guard_hit = fault.find("buffer '") != std::string::npos;
      v = gate_verdict(guard_hit ? kInBounds : kNoCrash, claim_of(guard_hit ? kInBounds : kNoCrash),
                       kernel);
      v.outcome = Outcome::fail;
      v.measured = 1;
      v.bound = 0;
      std::string how = WIFSIGNALED(status)
                            ? "killed by " + signal_text(WTERMSIG(status))
                            : "exited with status " + std::to_string(WEXITSTATUS(status)) +
                                  " before finishing";
      if (!fault.empty()) how += ": " + fault;
      if (!in_call) {
        v.outcome = Outcome::error;
        how += " — outside any kernel call, so the suite or the gate, not necessarily the kernel, "
               "is at fault";
      }
      v.note = "the kernel's process was " + how + "; the remaining cases of " + during +
               " were not run; the gate went on with the next property in a fresh process";
    }
    if (in_call) {
      v.op = box->op;
      v.dtype = box->dtype;
    }
    v.counterexample = "during property " + during + ", input: " +
                       (last_input.empty() ? std::string("(no case announced yet)") : last_input);
    if (observer && observer->on_verdict) observer->on_verdict(v);
    findings.push_back(std::move(v));
    if (!remaining.empty()) remaining.pop_front();
    ++props_done;
  }
  if (shm != MAP_FAILED) munmap(shm, sizeof(CallBox));

  // The gate's own checks: a failing verdict per finding, a passing one per check without any.
  for (const char* id : {kNoCrash, kNoHang, kInBounds, kNoNanOutput}) {
    bool any = false;
    for (const auto& f : findings) any = any || f.property == id;
    if (any) continue;
    if (!opt.isolate && (std::string(id) == kNoCrash || std::string(id) == kNoHang)) continue;
    if (std::string(id) == kInBounds && (!opt.guard.guard_buffers || kernel.memory() != SA_MEMORY_HOST))
      continue;
    if (std::string(id) == kNoNanOutput && (!opt.guard.check_nan || kernel.memory() != SA_MEMORY_HOST))
      continue;
    Verdict v = gate_verdict(id, claim_of(id), kernel);
    v.outcome = Outcome::pass;
    v.measured = 0;
    v.bound = 0;
    v.note = "over every kernel call of this run (" + std::to_string(plan.size()) + " properties)";
    findings.push_back(std::move(v));
  }
  for (auto& f : findings) {
    if (f.property == kInBounds || f.property == kNoNanOutput)
      if (f.outcome == Outcome::fail && std::isfinite(f.measured) && f.measured > 1)
        f.note += " (seen in " + std::to_string(static_cast<long long>(f.measured)) +
                  " calls; the first input is shown)";
    run.verdicts.push_back(std::move(f));
  }
  return run;
}

}  // namespace sa::gate
