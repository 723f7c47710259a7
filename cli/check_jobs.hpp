// `check --jobs N`: the units of a check (check_shard.hpp's units, with the
// per-type searches of attention_v2 and attention_backward split into one
// unit per element type) run in up to N gate processes at once, each unit
// one run_isolated call in a child of the gate (forked before any thread
// exists), its result written to a private temporary file as the journal
// line `check --shard` writes. The verdicts are combined exactly as a merge
// of shards combines them (combine_unit_verdicts), so the output is the
// serial run's (byte for byte under --no-timing; the test
// cli.check_jobs_equal_serial checks it).
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sched.h>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/check_shard.hpp"
#include "properties/plan.hpp"

namespace sa::cli {

// --jobs: "auto" (the CPUs this process may run on, at most 8) or 1..64.
// Throws std::invalid_argument with what was expected.
inline int parse_jobs(const std::string& text) {
  if (text == "auto") {
    cpu_set_t set;
    int n = 1;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
    return std::clamp(n, 1, 8);
  }
  std::size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || n < 1 || n > 64)
    throw std::invalid_argument("--jobs " + text +
                                ": expected an integer from 1 to 64, or auto (the CPUs this "
                                "process may use, at most 8)");
  return n;
}

// One unit of a parallel check: the properties it runs and the config
// restricted to them (and to one element type where the family's searches
// are per type).
struct JobUnit {
  std::string key;  // "attention_v2[float16]", a family, or a property
  props::SuiteConfig config;
  double weight = 1;  // relative cost, for longest-first scheduling
};

// The units of `plan` under `config`: check_units(plan), with attention_v2
// split per input type and attention_backward per element type (their
// searches are per type and seeded per type, so a type run alone draws the
// same cases), in the order the serial run emits their verdicts.
inline std::vector<JobUnit> job_units(const std::vector<std::string>& plan,
                                      const props::SuiteConfig& config) {
  std::vector<JobUnit> out;
  for (const CheckUnit& u : check_units(plan)) {
    JobUnit base{u.key, config, 1.0};
    base.config.properties = u.properties;
    if (u.key == "attention_v2") {
      for (AttnType t : props::attention_types(config)) {
        JobUnit j = base;
        j.key = u.key + "[" + name_of(t) + "]";
        j.config.attention.types = {t};
        j.weight = 8;
        out.push_back(std::move(j));
      }
    } else if (u.key == "attention_backward") {
      for (AttnType t : props::attention_backward_types(config)) {
        JobUnit j = base;
        j.key = u.key + "[" + name_of(t) + "]";
        j.config.dtypes = {props::dtype_of(t)};
        j.weight = 4;
        out.push_back(std::move(j));
      }
    } else {
      base.weight = u.key == "differential" || u.key == "backward" ? 3 : 1;
      out.push_back(std::move(base));
    }
  }
  return out;
}

// What one unit's child produced.
struct JobResult {
  gate::IsolatedRun run;
};

// Runs every unit in up to `jobs` child processes, longest first; returns
// the results in the units' order. `run_unit` runs in the child (a fresh
// fork of this single-threaded gate). `progress(done, total, running)` after
// each start and end. Throws std::runtime_error naming the unit when a child
// failed (the gate itself, not the kernel: the kernel's crashes are
// run_isolated's verdicts).
inline std::vector<JobResult> run_jobs(
    const std::vector<JobUnit>& units, int jobs,
    const std::function<gate::IsolatedRun(const JobUnit&)>& run_unit,
    const std::function<void(int, int, int)>& progress) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string tmpl = (fs::temp_directory_path(ec) / "softmax-audit-jobs-XXXXXX").string();
  if (ec) tmpl = "/tmp/softmax-audit-jobs-XXXXXX";
  if (!mkdtemp(tmpl.data()))
    throw std::runtime_error("cannot create a temporary folder " + tmpl + ": " +
                             std::strerror(errno));
  const fs::path dir(tmpl);
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  std::vector<std::size_t> order(units.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return units[a].weight > units[b].weight; });
  const pid_t gate = getpid();
  std::map<pid_t, std::size_t> running;
  std::vector<JobResult> results(units.size());
  std::size_t next = 0;
  int done = 0;
  const int total = static_cast<int>(units.size());
  auto kill_all = [&] {
    for (const auto& [pid, i] : running) kill(pid, SIGKILL);
    for (const auto& [pid, i] : running) waitpid(pid, nullptr, 0);
    running.clear();
  };
  while (next < order.size() || !running.empty()) {
    while (next < order.size() && static_cast<int>(running.size()) < jobs) {
      const std::size_t i = order[next++];
      std::fflush(nullptr);
      const pid_t pid = fork();
      if (pid < 0) {
        kill_all();
        throw std::runtime_error(std::string("cannot fork a gate process: ") +
                                 std::strerror(errno));
      }
      if (pid == 0) {
        // The unit's own gate process: it dies with the gate.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != gate) _exit(120);
        const fs::path file = dir / ("unit-" + std::to_string(i) + ".json");
        try {
          const auto u0 = std::chrono::steady_clock::now();
          const gate::IsolatedRun run = run_unit(units[i]);
          const double secs =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - u0).count();
          std::ofstream f(file.string() + ".part", std::ios::binary);
          f << check_unit_line(units[i].key, 0, run, secs, nlohmann::json::object()) << "\n";
          f.close();
          if (!f || std::rename((file.string() + ".part").c_str(), file.c_str()) != 0) _exit(3);
          _exit(0);
        } catch (const std::exception& e) {
          std::ofstream(file.string() + ".err") << e.what();
          _exit(4);
        } catch (...) {
          _exit(5);
        }
      }
      running.emplace(pid, i);
      if (progress) progress(done, total, static_cast<int>(running.size()));
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      kill_all();
      throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
    }
    const auto it = running.find(pid);
    if (it == running.end()) continue;  // not one of ours
    const std::size_t i = it->second;
    running.erase(it);
    const fs::path file = dir / ("unit-" + std::to_string(i) + ".json");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::string why;
      std::ifstream err(file.string() + ".err");
      if (err) why.assign(std::istreambuf_iterator<char>(err), std::istreambuf_iterator<char>());
      kill_all();
      throw std::runtime_error("the gate process of unit " + units[i].key + " " +
                               (WIFSIGNALED(status)
                                    ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                    : "exited " + std::to_string(WEXITSTATUS(status))) +
                               (why.empty() ? std::string() : ": " + why));
    }
    std::ifstream f(file, std::ios::binary);
    std::string line;
    std::getline(f, line);
    const CheckUnitResult r = parse_check_unit_line(line);
    results[i].run.verdicts = r.verdict_list;
    results[i].run.processes = r.processes;
    results[i].run.crashes = r.crashes;
    results[i].run.hangs = r.hangs;
    ++done;
    if (progress) progress(done, total, static_cast<int>(running.size()));
  }
  return results;
}

}  // namespace sa::cli
