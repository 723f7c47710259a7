// `softmax-audit audit`: the main job. A full audit of the built-in kernels
// (or of a user's kernel: --plugin, --python) in one command: the gate on
// every kernel, a large-n sweep, the variant property matrix, and the HTML
// report that ties them together. Its exit code is the report's status.
//
// Each step is this same program run as a child process with the step's
// subcommand, so a step that crashes or fails loses nothing the others
// produced, and each step can be re-run by hand with the command printed.
#include <fmt/core.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "core/output_file.hpp"
#include "core/output_lock.hpp"
#include "cli/check_jobs.hpp"
#include "core/shard.hpp"
#include "gate/isolation.hpp"
#include "kernels/builtin.hpp"

namespace sa::cli {
namespace {

struct AuditOptions {
  std::string out = "audit-out";
  // A user's kernel instead of the built-in ones (as `check` takes them).
  std::string plugin, python;
  int kernel_index = -1;
  std::vector<std::string> not_audited;  // NAME:REASON, passed to the report
  int cases = 0;
  std::uint64_t seed = 1;
  int sweep_max_log2 = 20;
  bool no_sweep = false, no_variants = false;
  std::string shard;              // --shard k/N (core/shard.hpp)
  std::uint64_t shard_count = 0;  // --shard-count N (with JOB_COMPLETION_INDEX)
  std::string jobs = "auto";      // --jobs, passed to the gate steps (check_jobs.hpp)
  bool jobs_given = false;        // a shard refuses an explicit --jobs
};

// A sharded audit's plan, in its --out folder: what `merge` needs to unite
// the shards' check and sweep folders and write the report.
constexpr const char* kAuditShardFile = "audit-shard.json";

std::string self_path() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("softmax-audit") : p.string();
}

std::string shell_quote(const std::string& s) {
  if (s.find_first_of(" '\"\\$") == std::string::npos) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// SIGINT or SIGTERM received (0: none), and the step running now (0: none).
volatile sig_atomic_t g_cancel = 0;
volatile pid_t g_child = 0;

// Remembers the signal and passes it on to the running step, which ends as
// it would have ended had the signal reached it directly.
extern "C" void forward_signal(int sig) {
  if (!g_cancel) g_cancel = sig;
  const pid_t c = g_child;
  if (c > 0) kill(c, sig);
}

// Until destroyed, SIGINT and SIGTERM are forwarded to the running step
// instead of ending this process, so that no step outlives the audit and
// writes into a cancelled audit's folder.
struct ForwardSignals {
  struct sigaction old_int = {};
  struct sigaction old_term = {};
  ForwardSignals() {
    g_cancel = 0;
    struct sigaction sa {};
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~ForwardSignals() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
  }
};

// Runs `self args...`, returns its exit code (128 + signal if killed). The
// step dies with the audit even when the audit is killed with SIGKILL
// (PR_SET_PDEATHSIG), and gets SIGINT/SIGTERM forwarded (ForwardSignals).
int run_step(const std::string& title, const std::vector<std::string>& args) {
  if (g_cancel) return 128 + g_cancel;
  std::vector<std::string> argv_s = {self_path()};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::string shown = "softmax-audit";
  for (const auto& a : args) shown += " " + shell_quote(a);
  fmt::print("\n== {}\n   $ {}\n", title, shown);
  std::fflush(stdout);
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  // The signals stay blocked from before the fork until g_child is set, so
  // that a signal arriving in between is forwarded, not lost.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigprocmask(SIG_BLOCK, &block, &old);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(128 + SIGTERM);  // the audit is already gone
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (pid < 0) {
    sigprocmask(SIG_SETMASK, &old, nullptr);
    fmt::print("   could not start {}\n", argv[0]);
    return exit_usage;
  }
  g_child = pid;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  fmt::print("   -> exit {} in {:.1f} s\n", code, s);
  return code;
}

// The worse of two exit codes, worst first: usage (a step could not run) >
// fail > incomplete > pass; any other code counts as usage.
int worse_exit(int worst, int code) {
  auto rank = [](int c) {
    return c == exit_pass ? 0 : c == exit_incomplete ? 1 : c == exit_fail ? 2 : 3;
  };
  const int c =
      code == exit_pass || code == exit_fail || code == exit_incomplete ? code : exit_usage;
  return rank(c) > rank(worst) ? c : worst;
}

int run_audit(const AuditOptions& o) {
  namespace fs = std::filesystem;
  // Which shard, from --shard or a scheduler's variables (core/shard.hpp),
  // resolved once here: the steps get it as --shard k/N, and the variables
  // are removed from their environment so that no step resolves it again.
  std::optional<Shard> shard;
  try {
    shard = resolve_shard(o.shard, o.shard_count);
    if (shard && o.seed == 0)
      throw std::invalid_argument("shard " + shard->text() + " (" + shard->source +
                                  ") with --seed 0 (a drawn seed): expected a fixed seed, the "
                                  "same in every shard, so that all shards draw the same cases");
    parse_jobs(o.jobs);
    if (shard && o.jobs_given && o.jobs != "1")
      throw std::invalid_argument("--jobs " + o.jobs + " with shard " + shard->text() +
                                  ": expected one of them (run more shards side by side)");
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "softmax-audit audit: error: {}\n", e.what());
    return exit_usage;
  }
  for (const char* v : {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN",
                        "JOB_COMPLETION_INDEX", "GTEST_SHARD_INDEX", "GTEST_TOTAL_SHARDS"})
    unsetenv(v);
  std::vector<std::string> shard_args;  // appended to every sharded step
  if (shard) shard_args = {"--shard", shard->text()};
  if (!o.plugin.empty() && !o.python.empty()) {
    fmt::print(stderr,
               "softmax-audit audit: error: --plugin {} and --python {}: expected one kernel, "
               "not both\n",
               o.plugin, o.python);
    return exit_usage;
  }
  if (!o.plugin.empty() && !fs::is_regular_file(o.plugin)) {
    fmt::print(stderr, "softmax-audit audit: error: --plugin {}: no such file\n", o.plugin);
    return exit_usage;
  }
  if (!o.plugin.empty()) {
    // No output may replace an input: the audit replaces files anywhere under --out.
    std::error_code e1, e2;
    const fs::path lib = fs::weakly_canonical(fs::absolute(o.plugin), e1);
    const fs::path out = fs::weakly_canonical(fs::absolute(o.out), e2);
    const fs::path rel = lib.lexically_relative(out);
    if (!e1 && !e2 && !rel.empty() && *rel.begin() != "..") {
      fmt::print(stderr,
                 "softmax-audit audit: error: --plugin {}: inside --out {}, whose files the audit "
                 "replaces; expected the library outside it\n",
                 o.plugin, o.out);
      return exit_usage;
    }
  }
  if (o.kernel_index >= 0 && o.plugin.empty()) {
    fmt::print(stderr, "softmax-audit audit: error: --kernel-index {}: expected with --plugin\n",
               o.kernel_index);
    return exit_usage;
  }
  for (const auto& n : o.not_audited)
    if (const auto colon = n.find(':');
        colon == std::string::npos || colon == 0 || colon + 1 == n.size()) {
      fmt::print(stderr,
                 "softmax-audit audit: error: --not-audited '{}': expected NAME:REASON (e.g. "
                 "'cuda:no CUDA device')\n",
                 n);
      return exit_usage;
    }
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec || access(o.out.c_str(), W_OK) != 0) {
    fmt::print(stderr,
               "softmax-audit audit: error: --out {}: cannot create or write this directory\n",
               o.out);
    return exit_usage;
  }
  std::optional<OutputDirLock> lock;
  try {
    lock.emplace(o.out, "--out");
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "softmax-audit audit: error: {}\n", e.what());
    return exit_usage;
  }
  const ForwardSignals forward;
  // Cancelled (SIGINT, SIGTERM): the running step got the signal and has
  // ended; no other step starts. Every file in the folder is whole (each is
  // written atomically): this run's for the steps that finished, the
  // earlier run's (or none) for the others.
  auto cancelled = [&] {
    fmt::print(stderr,
               "softmax-audit audit: cancelled by {}; the step running then was stopped and no "
               "other step started; {} holds only whole files\n",
               g_cancel == SIGINT ? "SIGINT" : "SIGTERM", o.out);
    return 128 + static_cast<int>(g_cancel);
  };
  const bool user_kernel = !o.plugin.empty() || !o.python.empty();
  const auto kernels = user_kernel ? std::vector<Kernel>{} : builtin_kernels();
  int worst = exit_pass;
  auto note = [&](int code) { worst = worse_exit(worst, code); };

  std::vector<std::string> results, skipped, skipped_why;
  // A sharded audit's check folders: (kernel name, folder under --out).
  std::vector<std::pair<std::string, std::string>> check_dirs;
  for (const auto& k : kernels) {
    if (const std::string why = gate::why_kernel_cannot_run(k); !why.empty()) {
      fmt::print("\n== Gate: built-in kernel '{}' skipped: {}\n", k.name(), why);
      skipped.push_back(k.name());
      skipped_why.push_back(k.name() + ":" + why);
      continue;
    }
    const std::string json = (fs::path(o.out) / ("results-" + k.name() + ".json")).string();
    const std::string junit = (fs::path(o.out) / ("junit-" + k.name() + ".xml")).string();
    const std::string dir = (fs::path(o.out) / ("check-" + k.name())).string();
    std::vector<std::string> args = {"check", "--builtin", k.name(), "--seed",
                                     std::to_string(o.seed)};
    if (shard) {
      args.insert(args.end(), {"--out", dir});
      args.insert(args.end(), shard_args.begin(), shard_args.end());
    } else {
      args.insert(args.end(), {"--json", json, "--junit", junit});
      args.insert(args.end(), {"--jobs", o.jobs});
    }
    if (o.cases > 0) args.insert(args.end(), {"--cases", std::to_string(o.cases)});
    const int code = run_step("Gate: property suite on built-in kernel '" + k.name() + "'" +
                                  (shard ? ", shard " + shard->text() : std::string()),
                              args);
    if (g_cancel) return cancelled();
    note(code);
    if (shard) {
      check_dirs.push_back({k.name(), "check-" + k.name()});
    } else if (fs::exists(json)) {
      results.push_back(json);
    }
  }
  // A user's kernel: the gate as `check --plugin/--python` runs it.
  const std::string user_name =
      !o.plugin.empty() ? fs::path(o.plugin).stem().string() +
                              (o.kernel_index >= 0 ? "-" + std::to_string(o.kernel_index) : "")
                        : o.python;
  std::vector<std::string> user_args;  // --plugin P [--kernel-index K] or --python M:O
  if (!o.plugin.empty()) {
    user_args = {"--plugin", o.plugin};
    if (o.kernel_index >= 0)
      user_args.insert(user_args.end(), {"--kernel-index", std::to_string(o.kernel_index)});
  } else if (!o.python.empty()) {
    user_args = {"--python", o.python};
  }
  if (user_kernel) {
    std::string file = user_name;
    for (char& ch : file)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.')
        ch = '_';
    const std::string json = (fs::path(o.out) / ("results-" + file + ".json")).string();
    const std::string junit = (fs::path(o.out) / ("junit-" + file + ".xml")).string();
    const std::string dir = (fs::path(o.out) / ("check-" + file)).string();
    std::vector<std::string> args = {"check"};
    args.insert(args.end(), user_args.begin(), user_args.end());
    args.insert(args.end(), {"--seed", std::to_string(o.seed)});
    if (shard) {
      args.insert(args.end(), {"--out", dir});
      args.insert(args.end(), shard_args.begin(), shard_args.end());
    } else {
      args.insert(args.end(), {"--json", json, "--junit", junit});
      args.insert(args.end(), {"--jobs", o.jobs});
    }
    if (o.cases > 0) args.insert(args.end(), {"--cases", std::to_string(o.cases)});
    const int code = run_step("Gate: property suite on " + user_name +
                                  (shard ? ", shard " + shard->text() : std::string()),
                              args);
    if (g_cancel) return cancelled();
    note(code);
    if (shard) {
      check_dirs.push_back({user_name, "check-" + file});
    } else if (fs::exists(json)) {
      results.push_back(json);
    }
  }

  std::string sweep, sweep_temperature;
#ifdef SA_CLI_HAVE_SWEEP
  // `sweep` takes a built-in kernel or a plugin; a Python kernel is gated only.
  if (!o.no_sweep && !o.python.empty())
    fmt::print("\n== Sweep: skipped (sweep takes a C plugin or a built-in kernel, not --python)\n");
  if (!o.no_sweep && o.python.empty()) {
    const std::string dir = (fs::path(o.out) / "sweep").string();
    std::vector<std::string> sargs = {"sweep", "--out", dir, "--max-log2-n",
                                      std::to_string(o.sweep_max_log2)};
    sargs.insert(sargs.end(), user_args.begin(), user_args.end());
    sargs.insert(sargs.end(), shard_args.begin(), shard_args.end());
    const int code = run_step(
        "Sweep: errors and dispersion against n up to 2^" + std::to_string(o.sweep_max_log2),
        sargs);
    if (g_cancel) return cancelled();
    note(code);
    if (fs::exists(fs::path(dir) / "sweep.json")) sweep = (fs::path(dir) / "sweep.json").string();
    if (shard) sweep = "sweep";  // a shard's folder, merged by `merge`
    // The paper's Figure 5 on the kernel's own entropy: H against the temperature.
    const std::string tdir = (fs::path(o.out) / "sweep-temperature").string();
    std::vector<std::string> targs = {
        "sweep",          "--out",    tdir,      "--min-log2-n", "10",
        "--max-log2-n",   "10",       "--dtype", "float32",      "--temperature-series-only",
        "--distribution", "gaussian", "uniform", "spike",        "--temperature"};
    for (const char* t : {"0.05", "0.1", "0.25", "0.5", "1", "2", "4", "10"}) targs.push_back(t);
    targs.insert(targs.end(), user_args.begin(), user_args.end());
    targs.insert(targs.end(), shard_args.begin(), shard_args.end());
    note(run_step("Sweep: entropy against temperature at n = 2^10 (T4, the paper's Figure 5)",
                  targs));
    if (g_cancel) return cancelled();
    if (fs::exists(fs::path(tdir) / "sweep.json"))
      sweep_temperature = (fs::path(tdir) / "sweep.json").string();
    if (shard) sweep_temperature = "sweep-temperature";
  }
#endif

  std::string variants;
#ifdef SA_CLI_HAVE_FUZZ
  // Sharded: the variant matrix (seconds, one process) is shard 0's alone.
  if (!o.no_variants && (!shard || shard->index == 0)) {
    const std::string json = (fs::path(o.out) / "variants.json").string();
    const int code =
        run_step("Variants: property matrix of every built-in softmax variant",
                 {"fuzz", "--variant", "all", "--json", json, "--seed", std::to_string(o.seed)});
    if (g_cancel) return cancelled();
    note(code);  // 1: a variant failed a property it claims (fuzz's exit codes)
    if (fs::exists(json)) variants = json;
  }
#endif

  if (shard) {
    // No report from one shard: its plan says what `merge` unites.
    nlohmann::json plan = {{"format", "softmax-audit-audit-shard"},
                           {"version", 1},
                           {"shard", {{"index", shard->index}, {"count", shard->count}}},
                           {"seed", std::to_string(o.seed)},
                           {"cases", o.cases},
                           {"title", user_kernel ? "softmax-audit: " + user_name
                                                 : std::string("softmax-audit: built-in kernels")},
                           {"checks", nlohmann::json::array()},
                           {"sweeps", nlohmann::json::array()},
                           {"variants", variants.empty() ? "" : "variants.json"},
                           {"not_audited", nlohmann::json::array()}};
    for (const auto& [name, dir] : check_dirs)
      plan["checks"].push_back({{"kernel", name}, {"dir", dir}});
    for (const auto& d : {sweep, sweep_temperature})
      if (!d.empty()) plan["sweeps"].push_back(d);
    for (const auto& n : skipped_why) plan["not_audited"].push_back(n);
    for (const auto& n : o.not_audited) plan["not_audited"].push_back(n);
    write_file_atomically((fs::path(o.out) / kAuditShardFile).string(), plan.dump(2) + "\n");
    fmt::print(
        "\nAudit shard {} written to {}/ ({}). After every shard: softmax-audit merge OUT "
        "FOLDER... unites them and writes the report.\n",
        shard->text(), o.out, kAuditShardFile);
    return worst;
  }
  if (results.empty()) {
    fmt::print(stderr,
               "softmax-audit audit: error: no gate results were produced; nothing to report\n");
    return exit_usage;
  }
  const std::string html = (fs::path(o.out) / "report.html").string();
  std::vector<std::string> args = {
      "report", "--html", html, "--title",
      user_kernel ? "softmax-audit: " + user_name : std::string("softmax-audit: built-in kernels")};
  for (const auto& r : results) args.insert(args.end(), {"--results", r});
  if (!sweep.empty()) args.insert(args.end(), {"--sweep", sweep});
  if (!sweep_temperature.empty()) args.insert(args.end(), {"--sweep", sweep_temperature});
  if (!variants.empty()) args.insert(args.end(), {"--variants", variants});
  for (const auto& s : skipped_why) args.insert(args.end(), {"--not-audited", s});
  for (const auto& s : o.not_audited) args.insert(args.end(), {"--not-audited", s});
  note(run_step("Report: one self-contained HTML file and its JSON twin", args));
  if (g_cancel) return cancelled();
  // The exit code says what the report says: a report that is INCOMPLETE (a
  // kernel not audited here, e.g. CUDA without a device) or FAIL is never exit 0.
  std::string status;
  try {
    std::ifstream f(fs::path(o.out) / "report.json");
    status = nlohmann::json::parse(f).value("status", "");
  } catch (const std::exception&) {
  }
  if (status == "incomplete") note(exit_incomplete);
  if (status == "fail") note(exit_fail);

  if (!skipped.empty())
    fmt::print("\nNot audited here (no device): {}\n", fmt::join(skipped, ", "));
  fmt::print(
      "\nAudit written to {}/ (report.html, report.json, results-*.json, junit-*.xml{}{}). "
      "Verdict: {}\n",
      o.out, sweep.empty() ? "" : ", sweep/", variants.empty() ? "" : ", variants.json",
      worst == exit_pass   ? std::string("every claim holds")
      : worst == exit_fail ? std::string("some claims FAILED (see report)")
      : worst == exit_incomplete
          ? (skipped.empty() && o.not_audited.empty()
                 ? std::string("INCOMPLETE: a requested check could not run")
                 : "INCOMPLETE: every claim checked holds, but not everything was audited (" +
                       fmt::format("{}", fmt::join(skipped, ", ")) +
                       (skipped.empty() || o.not_audited.empty() ? "" : ", ") +
                       fmt::format("{}", fmt::join(o.not_audited, ", ")) + "; see report)")
          : std::string("a step could not run"));
  return worst;
}

}  // namespace

bool is_audit_shard(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::is_regular_file(std::filesystem::path(dir) / kAuditShardFile, ec);
}

// `merge OUT FOLDER...` of a sharded audit: every shard's plan must be of one
// audit (the same shard count, seed, cases, title, checks and sweeps); each
// check and sweep is merged by `merge` as its own shards are (a child
// process per step, as the audit runs its steps), then `report` writes
// OUT/report.html and its JSON twin from the merged results, shard 0's
// variant matrix and the plans' not-audited list. A missing shard is named
// and the merged audit is INCOMPLETE (exit 3); the exit code otherwise is the
// report's status, as the unsharded audit's.
int run_merge_audit(const std::string& out, const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  auto usage = [](const std::string& why) {
    fmt::print(stderr, "softmax-audit merge: error: {}\n", why);
    return exit_usage;
  };
  struct In {
    std::string dir;
    nlohmann::json plan;
    std::uint64_t index = 0, count = 0;
  };
  std::vector<In> ins;
  for (const auto& dir : inputs) {
    const std::string path = (fs::path(dir) / kAuditShardFile).string();
    In in;
    in.dir = dir;
    try {
      std::ifstream f(path);
      if (!f) throw std::invalid_argument("cannot be read");
      in.plan = nlohmann::json::parse(f);
      if (in.plan.value("format", "") != "softmax-audit-audit-shard" ||
          in.plan.value("version", 0) != 1)
        throw std::invalid_argument("not an audit shard's plan of version 1");
      in.index = in.plan.at("shard").at("index").get<std::uint64_t>();
      in.count = in.plan.at("shard").at("count").get<std::uint64_t>();
      if (in.count < 1 || in.index >= in.count) throw std::invalid_argument("bad shard index");
    } catch (const std::exception& e) {
      return usage("INPUT " + dir + ": " + path + ": " + e.what() +
                   "; expected the --out folder of an `audit --shard k/N`");
    }
    ins.push_back(std::move(in));
  }
  // No output may replace an input: OUT is none of the folders and in none.
  std::error_code e1;
  const fs::path o = fs::weakly_canonical(fs::absolute(out), e1);
  for (const In& in : ins) {
    std::error_code e2;
    const fs::path d = fs::weakly_canonical(fs::absolute(in.dir), e2);
    const fs::path a = o.lexically_relative(d), b = d.lexically_relative(o);
    if ((!a.empty() && *a.begin() != "..") || (!b.empty() && *b.begin() != ".."))
      return usage("OUT " + out + " and INPUT " + in.dir +
                   ": one holds the other, and merge writes under OUT; expected separate folders");
  }
  const nlohmann::json& first = ins.front().plan;
  for (const In& in : ins)
    for (const char* field : {"seed", "cases", "title", "checks", "sweeps"})
      if (in.plan.at(field) != first.at(field) || in.count != ins.front().count)
        return usage("INPUT " + in.dir + ": its audit-shard.json differs from " + ins.front().dir +
                     "'s in '" + field + "' (or the shard count); expected shards of one audit");
  const std::uint64_t count = ins.front().count;
  std::set<std::uint64_t> have;
  for (const In& in : ins)
    if (!have.insert(in.index).second)
      return usage("INPUT " + in.dir + ": shard " + std::to_string(in.index) +
                   " is given twice; expected each shard once");
  std::vector<std::string> missing;
  for (std::uint64_t k = 0; k < count; ++k)
    if (!have.count(k)) missing.push_back(std::to_string(k) + "/" + std::to_string(count));
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec || access(out.c_str(), W_OK) != 0)
    return usage("OUT " + out + ": cannot create or write this directory");
  std::optional<OutputDirLock> lock;
  try {
    lock.emplace(out, "OUT");
  } catch (const std::invalid_argument& e) {
    return usage(e.what());
  }
  const ForwardSignals forward;
  int worst = exit_pass;
  auto note = [&](int code) { worst = worse_exit(worst, code); };
  auto merge_step = [&](const std::string& title, const std::string& sub) {
    std::vector<std::string> args = {"merge", (fs::path(out) / sub).string()};
    for (const In& in : ins) args.push_back((fs::path(in.dir) / sub).string());
    note(run_step(title, args));
    return (fs::path(out) / sub).string();
  };
  std::vector<std::string> results, sweeps;
  for (const auto& c : first.at("checks")) {
    const std::string dir =
        merge_step("Merge: the gate's shards on " + c.at("kernel").get<std::string>(),
                   c.at("dir").get<std::string>());
    if (g_cancel) return 128 + static_cast<int>(g_cancel);
    if (fs::exists(fs::path(dir) / "gate.json"))
      results.push_back((fs::path(dir) / "gate.json").string());
  }
  for (const auto& d : first.at("sweeps")) {
    const std::string dir = merge_step("Merge: the sweep's shards (" + d.get<std::string>() + ")",
                                       d.get<std::string>());
    if (g_cancel) return 128 + static_cast<int>(g_cancel);
    if (fs::exists(fs::path(dir) / "sweep.json"))
      sweeps.push_back((fs::path(dir) / "sweep.json").string());
  }
  if (results.empty()) return usage("no shard's gate results could be merged; nothing to report");
  std::vector<std::string> args = {"report", "--html", (fs::path(out) / "report.html").string(),
                                   "--title", first.value("title", "softmax-audit")};
  for (const auto& r : results) args.insert(args.end(), {"--results", r});
  for (const auto& w : sweeps) args.insert(args.end(), {"--sweep", w});
  for (const In& in : ins)
    if (const std::string v = in.plan.value("variants", ""); !v.empty())
      args.insert(args.end(), {"--variants", (fs::path(in.dir) / v).string()});
  for (const auto& n : first.at("not_audited"))
    args.insert(args.end(), {"--not-audited", n.get<std::string>()});
  for (const auto& m : missing)
    args.insert(args.end(), {"--not-audited", "shard " + m + ":its folder was not given to merge"});
  note(run_step("Report: one self-contained HTML file and its JSON twin", args));
  if (g_cancel) return 128 + static_cast<int>(g_cancel);
  std::string status;
  try {
    std::ifstream f(fs::path(out) / "report.json");
    status = nlohmann::json::parse(f).value("status", "");
  } catch (const std::exception&) {
  }
  if (status == "incomplete") note(exit_incomplete);
  if (status == "fail") note(exit_fail);
  if (!missing.empty()) {
    fmt::print(stderr, "softmax-audit merge: INCOMPLETE: shard{} {} not given\n",
               missing.size() == 1 ? "" : "s", fmt::join(missing, ", "));
    note(exit_incomplete);
  }
  fmt::print("\nMerged audit of {} shard{} written to {}/ (report.html, report.json)\n", ins.size(),
             ins.size() == 1 ? "" : "s", out);
  return worst;
}

void add_audit_command(CLI::App& app) {
  auto o = std::make_shared<AuditOptions>();
  CLI::App* c = app.add_subcommand(
      "audit",
      "Full audit of the built-in kernels (or of --plugin/--python): gate, large-n sweep, "
      "variant matrix and HTML report; the exit code is the report's status (0 PASS, 1 FAIL, "
      "3 INCOMPLETE)");
  c->add_option("--out", o->out, "Directory for the report and every result file")
      ->capture_default_str();
  auto* plugin = c->add_option("--plugin", o->plugin,
                               "Audit this kernel library (.so, softmax_audit/kernel.h) instead "
                               "of the built-in kernels");
  c->add_option("--kernel-index", o->kernel_index,
                "Which kernel of a multi-kernel plugin (sa_kernel_entry_at index)");
  c->add_option("--python", o->python,
                "Audit a Python kernel, package.module:object, instead of the built-in kernels "
                "(the gate only: sweep takes no Python kernel)")
      ->excludes(plugin);
  c->add_option("--not-audited", o->not_audited,
                "NAME:REASON of something this audit could not check (repeatable), e.g. "
                "'cuda:no CUDA device'; the report is then INCOMPLETE (exit 3)");
  c->add_option("--cases", o->cases, "Random cases per property (default: the suite's)");
  c->add_option("--jobs", o->jobs,
                "Gate processes at once in each gate step (check --jobs): an integer from 1 to "
                "64, or auto (default auto; a shard runs one)")
      ->each([o](const std::string&) { o->jobs_given = true; });
  add_seed_option(c, &o->seed, "Random seed for every step, 0 to 2^64 - 1 (0 = random; default 1)");
  c->add_option("--sweep-max-log2-n", o->sweep_max_log2, "Largest sweep size as log2 n (<= 24)")
      ->check(CLI::Range(4, 24))
      ->capture_default_str();
  c->add_flag("--no-sweep", o->no_sweep, "Skip the sweep");
  c->add_flag("--no-variants", o->no_variants, "Skip the variant matrix");
  c->add_option("--shard", o->shard,
                "Run shard k of N (k/N) of the gate and sweep steps into --out, no report; also "
                "from SLURM_ARRAY_TASK_ID/COUNT, JOB_COMPLETION_INDEX (with --shard-count) and "
                "GTEST_SHARD_INDEX/GTEST_TOTAL_SHARDS. `merge OUT FOLDER...` unites the shards "
                "and writes the report (docs/scale-out.md)");
  c->add_option("--shard-count", o->shard_count,
                "N for a Kubernetes Indexed Job (JOB_COMPLETION_INDEX gives k)");
  c->callback([o] { exit_code() = run_audit(*o); });
}

}  // namespace sa::cli
