// `softmax-audit check`: the CI gate. Loads a kernel (plugin or built-in),
// runs the property suite on it in an isolated process (gate/isolation.hpp),
// writes JUnit/JSON, prints a summary, and exits 0 (pass), 1 (a property
// failed), 2 (usage or load error).
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>

#include "cli/commands.hpp"
#include "gate/isolation.hpp"
#include "gate/results.hpp"
#include "gate/spec.hpp"
#include "kernels/builtin.hpp"

namespace sa::cli {

namespace {

struct CheckOptions {
  std::string plugin, builtin, spec, junit, json;
  int kernel_index = -1;
  double timeout = 0;  // 0: from the spec (default 60 s)
  std::int64_t seed = -1;
  int cases = 0;
  bool no_isolation = false, no_guard = false, quiet = false, list = false, per_property = false;
};

// A usage, input or load error: the message names the input and what was
// expected; the command ends with exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void usage_error(const std::string& msg) { throw UsageError(msg); }

Kernel pick_kernel(const CheckOptions& o) {
  if (o.plugin.empty() == o.builtin.empty())
    usage_error(
        "give exactly one of --plugin PATH (a kernel library built against "
        "softmax_audit/kernel.h) or --builtin NAME");
  if (!o.plugin.empty()) {
    if (access(o.plugin.c_str(), R_OK) != 0)
      usage_error("plugin " + o.plugin +
                  ": no such readable file; expected a shared library (.so) "
                  "exporting sa_kernel_entry (see include/softmax_audit/kernel.h)");
    return load_plugin(o.plugin, o.kernel_index);
  }
  std::string names;
  for (auto& k : builtin_kernels()) {
    if (k.name() == o.builtin) return k;
    names += (names.empty() ? "" : ", ") + k.name();
  }
  usage_error("--builtin " + o.builtin + ": no built-in kernel of that name; expected one of: " +
              (names.empty() ? std::string("(none in this build)") : names));
}

// --list: the names a gate spec may use.
int list_names() {
  std::cout << "properties (spec key 'properties'; a prefix ending in \".*\" selects several):\n";
  for (const auto& p : props::properties())
    std::cout << "  " << p.id << "  — " << p.claim << " [" << p.rule << "]\n";
  std::cout << "distributions:\n";
  for (const auto& d : props::distributions()) std::cout << "  " << d << "\n";
  std::cout << "rules:\n";
  for (const auto& r : props::rules()) std::cout << "  " << r.id << "  — " << r.source << "\n";
  std::cout << "ops:\n";
  for (Op op : all_ops) std::cout << "  " << name_of(op) << "\n";
  std::cout << "dtypes:\n  float32\n  bfloat16\n";
  return 0;
}

int run_check(const CheckOptions& o) {
  if (o.list) return list_names();
  gate::GateSpec spec;
  try {
    if (!o.spec.empty()) spec = gate::load_gate_spec(o.spec);
  } catch (const gate::SpecError& e) {
    usage_error(std::string("gate spec ") + e.what());
  }
  if (o.timeout > 0) spec.timeout_s = o.timeout;
  if (o.seed >= 0) spec.suite.seed = static_cast<std::uint64_t>(o.seed);
  if (o.cases > 0) spec.suite.cases = o.cases;

  std::optional<Kernel> kernel;
  try {
    kernel.emplace(pick_kernel(o));
  } catch (const std::invalid_argument& e) {
    usage_error(e.what());
  }
  // A CUDA kernel with no device checks nothing: say so, never report a pass.
  if (const std::string why = gate::why_kernel_cannot_run(*kernel); !why.empty())
    usage_error(why + "; nothing was checked");
  // Output files must be writable before minutes are spent on the suite.
  for (const std::string* path : {&o.junit, &o.json})
    if (!path->empty()) {
      std::ofstream probe(*path, std::ios::app);
      if (!probe) usage_error(*path + ": cannot write this output file");
    }

  const bool tty = isatty(STDERR_FILENO) != 0;
  gate::ProgressBar bar(std::cerr, !o.quiet, tty);
  std::string current;
  props::SuiteObserver obs;
  obs.before_case = [&](const std::string& p, const std::string&) { current = p; };
  obs.progress = [&](int done, int total) { bar.update(done, total, current); };

  gate::IsolationOptions iso;
  iso.case_timeout_s = spec.timeout_s;
  iso.isolate = !o.no_isolation;
  iso.guard.guard_buffers = !o.no_guard;
  if (o.per_property) iso.granularity = gate::Granularity::per_property;

  const auto t0 = std::chrono::steady_clock::now();
  gate::IsolatedRun run;
  try {
    run = gate::run_isolated(*kernel, spec.suite, iso, &obs);
  } catch (const std::exception& e) {
    bar.finish();
    usage_error(std::string("the gate itself failed: ") + e.what());
  }
  bar.finish();

  gate::RunRecord rec;
  rec.kernel = kernel->name();
  rec.origin = kernel->origin();
  rec.description = kernel->description();
  rec.config = gate::config_to_json(spec);
  rec.config["seed"] = run.seed;  // the seed actually used (drawn when none was given)
  rec.processes = run.processes;
  rec.crashes = run.crashes;
  rec.hangs = run.hangs;
  rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rec.verdicts = std::move(run.verdicts);

  if (!o.junit.empty()) {
    std::ofstream f(o.junit, std::ios::trunc);
    gate::write_junit(f, {rec});
    if (!f) usage_error(o.junit + ": writing the JUnit file failed");
  }
  if (!o.json.empty()) {
    std::ofstream f(o.json, std::ios::trunc);
    f << gate::results_to_json({rec}).dump(2) << "\n";
    if (!f) usage_error(o.json + ": writing the JSON file failed");
  }
  if (!o.quiet)
    gate::write_summary(std::cout, rec,
                        isatty(STDOUT_FILENO) != 0 && std::getenv("NO_COLOR") == nullptr);
  return gate::tally(rec.verdicts).ok() ? exit_pass : exit_fail;
}

}  // namespace

void add_check_command(CLI::App& app) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* c = app.add_subcommand(
      "check",
      "Gate a kernel: run the property suite on it in an isolated process; exit 0 pass, "
      "1 a property failed, 2 usage or load error");
  c->add_option("--plugin", o->plugin, "Kernel library (.so) built against softmax_audit/kernel.h");
  std::string builtin_names;
  for (const Kernel& k : builtin_kernels())
    builtin_names += (builtin_names.empty() ? "" : ", ") + k.name();
  c->add_option("--builtin", o->builtin,
                "A built-in kernel by name instead of a plugin: " + builtin_names);
  c->add_option("--kernel-index", o->kernel_index,
                "Which kernel of a multi-kernel plugin (sa_kernel_entry_at index)");
  c->add_option("--spec", o->spec,
                "Gate spec (TOML, docs/gate-spec.md); defaults without it. --list shows "
                "every name a spec may use");
  c->add_option("--junit", o->junit, "Write JUnit XML here");
  c->add_option("--json", o->json, "Write every verdict as JSON here");
  c->add_option(
      "--timeout", o->timeout,
      "Seconds one case may take before the kernel's process is killed (overrides the spec)");
  c->add_option("--seed", o->seed,
                "Random seed (overrides the spec; 0 = random, printed in verdicts)");
  c->add_option("--cases", o->cases, "Random cases per property (overrides the spec)");
  c->add_flag("--no-isolation", o->no_isolation,
              "Run the kernel in this process (debugging; a crash then kills the gate)");
  c->add_flag("--no-guard", o->no_guard, "Do not put guard pages and canaries around buffers");
  c->add_flag("--per-property", o->per_property,
              "Run each property in its own run_suite call from the start (slower; the default "
              "does so only after a crash or hang)");
  c->add_flag("-q,--quiet", o->quiet, "No summary and no progress bar");
  c->add_flag(
      "--list", o->list,
      "List the properties, distributions, rules, ops and dtypes a spec may name, and exit");
  c->callback([o] {
    try {
      exit_code() = run_check(*o);
    } catch (const UsageError& e) {
      std::cerr << "softmax-audit check: error: " << e.what() << "\n";
      exit_code() = exit_usage;
    }
  });
}

}  // namespace sa::cli
