// `softmax-audit check`: the CI gate. Loads a kernel (plugin, built-in, or a
// Python kernel named by --python, cli/python_kernel.hpp),
// runs the property suite on it in an isolated process (gate/isolation.hpp),
// writes JUnit/JSON, prints a summary, and exits 0 (pass), 1 (a property
// failed), 2 (usage or load error).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "cli/case_file.hpp"
#include "cli/check_jobs.hpp"
#include "cli/check_shard.hpp"
#include "cli/commands.hpp"
#include "cli/python_kernel.hpp"
#include "cli/sweep_outputs.hpp"
#include "core/output_file.hpp"
#include "core/output_lock.hpp"
#include "core/preempt.hpp"
#include "core/shard.hpp"
#include "gate/checks.hpp"
#include "gate/coverage.hpp"
#include "gate/isolation.hpp"
#include "gate/kernel_source.hpp"
#include "gate/provenance.hpp"
#include "gate/results.hpp"
#include "gate/spec.hpp"
#include "kernels/builtin.hpp"
#include "properties/conventions.hpp"

namespace sa::cli {

namespace {

struct CheckOptions {
  std::string plugin, builtin, python, spec, junit, json, summary_md, cases_dir;
  int kernel_index = -1;
  // Given on the command line (they override the spec); validated before any work.
  std::optional<double> timeout, deadline;
  std::optional<std::uint64_t> seed;  // any printed seed, 0 .. 2^64 - 1
  std::optional<std::int64_t> cases;
  std::vector<std::string> dtypes;      // --dtype, repeatable: replaces the spec's `dtypes`
  std::vector<std::string> properties;  // --property, repeatable: narrows the spec's selection
  bool no_isolation = false, no_guard = false, quiet = false, list = false, markdown = false,
       per_property = false;
  bool github_annotations = false;  // also when GITHUB_ACTIONS=true
  std::string shard;                // --shard k/N (core/shard.hpp)
  std::uint64_t shard_count = 0;    // --shard-count N (with JOB_COMPLETION_INDEX)
  std::string out;                  // --out DIR: a shard's plan and journal
  // --jobs N|auto (check_jobs.hpp). auto by default; a shard or --no-isolation
  // runs one process unless --jobs is given (then refused, below).
  std::string jobs = "auto";
  bool jobs_given = false;
  bool no_timing = false;  // seconds 0, no command line, processes 0
};

// A usage, input or load error: the message names the input and what was
// expected; the command ends with exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
[[noreturn]] void usage_error(const std::string& msg) { throw UsageError(msg); }

// Armed while an unisolated run (--no-isolation) runs kernel code in this
// process: exit() or quick_exit() from the kernel then ends the command with
// one line and exit 1 (a check failed), never with the kernel's own status.
std::atomic<bool> g_exit_guard_armed{false};
extern "C" void exit_guard_handler() {
  if (!g_exit_guard_armed.load()) return;
  static const char msg[] =
      "softmax-audit check: FAIL: the kernel ended the process (exit or quick_exit) during an "
      "unisolated run (--no-isolation); no verdict was reached\n";
  (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
  _exit(exit_fail);
}
struct ExitGuard {
  bool armed;
  explicit ExitGuard(bool arm) : armed(arm) {
    if (!arm) return;
    static const bool registered = [] {
      std::atexit(exit_guard_handler);
      std::at_quick_exit(exit_guard_handler);
      return true;
    }();
    (void)registered;
    g_exit_guard_armed = true;
  }
  ~ExitGuard() {
    if (armed) g_exit_guard_armed = false;
  }
};

// The kernel to check. A plugin is probed in a child process (its constructors
// and entry function never run in this one); `timeout_s` bounds the probe.
gate::KernelSource pick_kernel(const CheckOptions& o, double timeout_s) {
  if (!o.python.empty()) {
    // Validated before the plugin/builtin choice, and before any work.
    if (const std::string why = python_kernel_name_error(o.python); !why.empty())
      usage_error("--python " + o.python + ": " + why);
  }
  if (int(!o.plugin.empty()) + int(!o.builtin.empty()) + int(!o.python.empty()) != 1)
    usage_error(
        "give exactly one of --plugin PATH (a kernel library built against "
        "softmax_audit/kernel.h), --builtin NAME or --python package.module:kernel");
  if (!o.python.empty()) {
    if (!python_kernel_hook()) exec_python_check();  // does not return
    return python_kernel_hook()(o.python, timeout_s);
  }
  if (!o.plugin.empty()) {
    if (access(o.plugin.c_str(), R_OK) != 0)
      usage_error("plugin " + o.plugin +
                  ": no such readable file; expected a shared library (.so) "
                  "exporting sa_kernel_entry (see include/softmax_audit/kernel.h)");
    return gate::KernelSource::probe_plugin(o.plugin, o.kernel_index, timeout_s);
  }
  std::string names;
  for (auto& k : builtin_kernels()) {
    if (k.name() == o.builtin) return gate::KernelSource(k);
    names += (names.empty() ? "" : ", ") + k.name();
  }
  usage_error("--builtin " + o.builtin + ": no built-in kernel of that name; expected one of: " +
              (names.empty() ? std::string("(none in this build)") : names));
}

// Command-line values get the spec's ranges (gate/spec.hpp), with the option named.
void validate_options(const CheckOptions& o) {
  using L = gate::SpecLimits;
  auto real = [](const char* name, const std::optional<double>& v, double min, double max) {
    if (v && (!(*v >= min) || !std::isfinite(*v) || *v > max)) {
      std::ostringstream m;
      m << name << " " << *v << ": expected a number of seconds >= " << min << " and <= " << max;
      usage_error(m.str());
    }
  };
  real("--timeout", o.timeout, L::min_timeout_s, L::max_timeout_s);
  real("--deadline", o.deadline, L::min_deadline_s, L::max_deadline_s);
  if (o.cases && (*o.cases < 1 || *o.cases > L::max_cases))
    usage_error("--cases " + std::to_string(*o.cases) + ": expected an integer in [1, " +
                std::to_string(L::max_cases) + "]");
  if (o.kernel_index < -1)
    usage_error("--kernel-index " + std::to_string(o.kernel_index) + ": expected an index >= 0");
  for (const auto& d : o.dtypes) {
    const auto t = parse_dtype(d);
    if (!t || *t == DType::float64)
      usage_error("--dtype '" + d +
                  "': expected float32, bfloat16 or float16 (the types the kernel interface "
                  "carries)");
  }
}

// --property: run only those of the spec's properties that these ids or
// "prefix.*" patterns select (the spec's `required` narrowed alike).
void narrow_properties(gate::GateSpec& spec, const std::vector<std::string>& patterns) {
  std::vector<std::string> selected;
  for (const auto& p : patterns) {
    const auto ids = gate::select_properties(p, spec.suite.ops);
    if (ids.empty())
      usage_error("--property '" + p + "': no such property (check --list names them)");
    selected.insert(selected.end(), ids.begin(), ids.end());
  }
  auto in = [](const std::vector<std::string>& v, const std::string& id) {
    return std::find(v.begin(), v.end(), id) != v.end();
  };
  std::vector<std::string> keep;
  for (const auto& id : gate::planned_properties(spec.suite))
    if (in(selected, id)) keep.push_back(id);
  if (keep.empty()) usage_error("--property: selects none of the properties the spec runs");
  spec.suite.properties = keep;
  std::erase_if(spec.required, [&](const std::string& id) { return !in(keep, id); });
}

std::string ops_text(const std::vector<Op>& ops) {
  std::string s;
  for (Op op : ops) {
    if (!s.empty()) s += ", ";
    s += name_of(op);
  }
  return s;
}

// --list --markdown: docs/properties.md, every row of the registry (the
// docs.registry test compares the committed file with this output).
int list_markdown() {
  std::cout << "# The properties and the gate's checks\n\n"
               "<!-- Generated by `softmax-audit check --list --markdown` from the registry "
               "(properties/suite.cpp properties(), families(); gate/checks.cpp); the "
               "docs.registry test fails when this file differs. Do not edit by hand. -->\n\n"
               "A property's id is `family.name`; a spec's `properties` key takes ids, "
               "families and prefixes ending in `.*`. Each property gives one verdict per op "
               "and element type it judges; its measured value and bound are in the unit "
               "shown. The rules' sources are listed by `softmax-audit check --list`.\n\n"
               "## Families\n\n"
               "| family | runner | one search for all its properties | what |\n"
               "|---|---|---|---|\n";
  for (const auto& f : props::families())
    std::cout << "| " << f.name << " | " << f.source << " | " << (f.shared_search ? "yes" : "no")
              << " | " << f.what << " |\n";
  auto cell = [](std::string x) {  // a table cell: '|' escaped
    for (std::size_t at = 0; (at = x.find('|', at)) != std::string::npos; at += 2)
      x.replace(at, 1, "\\|");
    return x.empty() ? std::string("—") : x;
  };
  std::cout << "\n## Properties\n\n"
               "| id | claim | ops | needs | rule | unit | judged by (properties/) |\n"
               "|---|---|---|---|---|---|---|\n";
  for (const auto& p : props::properties())
    std::cout << "| `" << p.id << "` | " << cell(p.claim) << " | " << cell(ops_text(p.ops)) << " | "
              << cell(p.needs) << " | `" << p.rule << "` | " << cell(p.measure) << " | "
              << cell(p.runner) << " |\n";
  std::cout
      << "\n## Aliases\n\n"
         "Old ids a spec's `properties`, `required` and `check --property` still take: each "
         "selects the ids it moved to when the spec's `ops` name one of those shown (a retired "
         "id also without `ops`; a retired id only by its name, not by its family).\n\n"
         "| id | selects | for ops | retired | what |\n|---|---|---|---|---|\n";
  for (const auto& a : props::property_aliases()) {
    std::string to;
    for (const auto& t : a.to) to += (to.empty() ? "" : ", ") + ("`" + t + "`");
    std::cout << "| `" << a.id << "` | " << to << " | " << cell(ops_text(a.ops)) << " | "
              << (a.retired ? "yes" : "no") << " | " << cell(a.what) << " |\n";
  }
  std::cout << "\n## The gate's own checks\n\n"
               "Reported by every isolated run (`gate.coverage` and `gate.deadline` where a "
               "spec or deadline applies).\n\n"
               "| id | claim | rule | unit |\n|---|---|---|---|\n";
  for (const auto& g : gate::gate_checks())
    std::cout << "| `" << g.id << "` | " << cell(g.claim) << " | `" << g.rule << "` | "
              << cell(g.measure) << " |\n";
  return 0;
}

// --list: the names a gate spec may use.
int list_names() {
  std::cout << "properties (spec key 'properties'; a family or a prefix ending in \".*\" "
               "selects several; docs/properties.md):\n";
  for (const auto& p : props::properties())
    std::cout << "  " << p.id << "  — " << p.claim << " [rule " << p.rule << "; ops "
              << ops_text(p.ops) << "; unit " << p.measure
              << (p.needs.empty() ? std::string() : "; needs " + p.needs) << "; judged by "
              << p.runner << "]\n";
  std::cout << "aliases (old ids a spec may still name; each also selects the ids after '->' "
               "when the spec's ops name one in brackets; a retired one also without ops):\n";
  for (const auto& a : props::property_aliases()) {
    std::string to;
    for (const auto& t : a.to) to += (to.empty() ? "" : ", ") + t;
    std::cout << "  " << a.id << " -> " << to << " [ops " << ops_text(a.ops) << "]"
              << (a.retired ? " (retired)" : "") << "  — " << a.what << "\n";
  }
  std::cout << "gate checks (always reported):\n";
  for (const auto& g : gate::gate_checks())
    std::cout << "  " << g.id << "  — " << g.claim << " [" << g.rule << "]\n";
  std::cout << "distributions:\n";
  for (const auto& d : props::distributions()) std::cout << "  " << d << "\n";
  std::cout << "rules:\n";
  for (const auto& r : props::rules()) std::cout << "  " << r.id << "  — " << r.source << "\n";
  std::cout << "ops:\n";
  for (Op op : checked_ops) std::cout << "  " << name_of(op) << "\n";
  std::cout << "dtypes:\n  float32\n  bfloat16\n  float16\n";
  std::cout << "conventions (spec key 'conventions', or kernel.h SA_CAP_* flags; "
               "docs/conventions.md):\n";
  for (const auto& c : props::convention_names())
    std::cout << "  " << c << std::string(c.size() < 20 ? 20 - c.size() : 1, ' ')
              << props::convention_summary(c) << "\n";
  std::cout << "attention (spec table [attention], for op attention_v2):\n"
               "  dtypes      float32, bfloat16, float16, fp8_e4m3, fp8_e5m2, fp4_e2m1, int8\n"
               "  head_dims   integers in [1, "
            << gate::SpecLimits::max_head_dim
            << "]\n"
               "  lengths     [queries, keys] pairs, each in [1, "
            << gate::SpecLimits::max_attention_length
            << "]\n"
               "  gqa_ratios  integers in [1, "
            << gate::SpecLimits::max_gqa_ratio
            << "]\n"
               "  features   ";
  for (const auto& f : props::attention_features()) std::cout << " " << f;
  std::cout << "\n  max_work    multiply-adds per case (default 8e6)\n"
               "  pair_cases  cases each declared feature and feature pair must be in, per "
               "input type (attention_v2.coverage), an integer in [0, 100] (default "
            << props::AttentionShapes{}.pair_cases << ")\n";
  std::cout << "determinism (spec table [determinism], for determinism.* properties):\n"
               "  repeats     identical calls per input of determinism.bitwise, an integer in ["
            << gate::SpecLimits::min_repeats << ", " << gate::SpecLimits::max_repeats
            << "] (default " << props::SuiteConfig{}.determinism_repeats
            << "; attention: a fifth of it, at least 10)\n";
  return 0;
}

// Where failing counterexamples' case files go: --cases-dir, else beside
// the --json (or --junit) file when it is, or will be, a regular file:
// gate.json -> gate.cases/. None when every output goes to standard output
// or nowhere.
std::string cases_dir_of(const CheckOptions& o) {
  if (!o.cases_dir.empty()) return o.cases_dir;
  for (const std::string& f : {o.json, o.junit}) {
    if (f.empty() || is_stdout_path(f)) continue;
    std::error_code ec;
    const auto st = std::filesystem::symlink_status(f, ec);
    if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) continue;
    const std::filesystem::path p(f);
    return (p.parent_path() / (p.stem().string() + ".cases")).string();
  }
  return "";
}

// Whether a file name is one write_case_file gives (a property id, a dot,
// ..., .npz or .json): such a file in the cases directory is replaced.
bool case_file_like(const std::string& name) {
  if (!name.ends_with(".npz") && !name.ends_with(".json")) return false;
  for (const auto& p : props::properties())
    if (name.rfind(p.id + ".", 0) == 0) return true;
  return false;
}

// Refuses an input or another output in the cases directory with a name a
// case file could take, and a cases directory that is an existing file.
void refuse_case_collisions(const std::string& dir, const CheckOptions& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (is_stdout_path(dir))
    usage_error(
        "--cases-dir -: expected a directory (case files are several files each, so "
        "standard output cannot hold them)");
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    usage_error("--cases-dir " + dir + ": exists and is not a directory; expected a directory " +
                "for the case files of failing counterexamples");
  const fs::path d = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  for (const auto& [opt, f] :
       std::vector<std::pair<std::string, std::string>>{{"--plugin", o.plugin},
                                                        {"--spec", o.spec},
                                                        {"--json", o.json},
                                                        {"--junit", o.junit},
                                                        {"--summary-md", o.summary_md}}) {
    if (f.empty() || is_stdout_path(f)) continue;
    const fs::path p = fs::weakly_canonical(fs::absolute(f, ec), ec);
    if (p.parent_path() == d && case_file_like(p.filename().string()))
      usage_error(opt + " " + f + ": lies in the cases directory " + dir +
                  ", where a case file could replace it; expected it elsewhere (or another "
                  "--cases-dir)");
  }
}

int run_check(const CheckOptions& o) {
  if (o.markdown && !o.list) usage_error("--markdown: expected together with --list");
  if (o.list) return o.markdown ? list_markdown() : list_names();
  validate_options(o);
  namespace fs = std::filesystem;
  // Which shard, from --shard or a scheduler's variables (the same sources and
  // conflict rules as the sweep's, core/shard.hpp); refused before any work.
  std::optional<Shard> shard;
  try {
    shard = resolve_shard(o.shard, o.shard_count);
  } catch (const std::invalid_argument& e) {
    usage_error(e.what());
  }
  int jobs = 1;
  try {
    jobs = parse_jobs(o.jobs);
  } catch (const std::invalid_argument& e) {
    usage_error(e.what());
  }
  if (!o.jobs_given && (shard || o.no_isolation))
    jobs = 1;  // the default (auto) where it cannot apply
  if (jobs > 1 && shard)
    usage_error("--jobs " + o.jobs + " with shard " + shard->text() +
                ": expected one of them (a shard runs its units one after another; run more "
                "shards side by side instead)");
  if (jobs > 1 && o.no_isolation)
    usage_error("--jobs " + o.jobs +
                " with --no-isolation: expected --jobs 1 (without isolation the kernel runs in "
                "this one process)");
  if (shard && o.out.empty())
    usage_error("shard " + shard->text() + " (" + shard->source +
                "): a sharded check keeps its plan and journal in a folder; expected --out DIR "
                "(one folder per shard, which `softmax-audit merge` reads)");
  if (!shard && !o.out.empty())
    usage_error("--out " + o.out +
                ": only a sharded check writes a folder; expected --shard k/N with it (or "
                "--json/--junit for an unsharded check)");
  const std::string plan_path = shard ? (fs::path(o.out) / kShardFile).string() : std::string();
  const std::string journal_path =
      shard ? (fs::path(o.out) / kCheckJournal).string() : std::string();
  if (const std::string d = cases_dir_of(o); !d.empty()) refuse_case_collisions(d, o);
  // No output may replace an input or another output (`--junit k.so` deleted the plugin).
  try {
    refuse_overlapping_paths({{"--plugin", o.plugin}, {"--spec", o.spec}},
                             {{"--junit", o.junit},
                              {"--json", o.json},
                              {"--summary-md", o.summary_md},
                              {"--out", plan_path},
                              {"--out", journal_path}});
  } catch (const std::invalid_argument& e) {
    usage_error(e.what());
  }
  if (!o.python.empty())
    if (const std::string why = python_kernel_name_error(o.python); !why.empty())
      usage_error("--python " + o.python + ": " + why);
  gate::GateSpec spec;
  try {
    if (!o.spec.empty()) spec = gate::load_gate_spec(o.spec);
  } catch (const gate::SpecError& e) {
    usage_error(std::string("gate spec ") + e.what());
  }
  if (o.timeout) spec.timeout_s = *o.timeout;
  if (o.deadline) spec.deadline_s = *o.deadline;
  if (o.seed) spec.suite.seed = *o.seed;
  if (o.cases) spec.suite.cases = static_cast<int>(*o.cases);
  if (!o.properties.empty()) narrow_properties(spec, o.properties);
  if (!o.dtypes.empty()) {
    spec.suite.dtypes.clear();
    for (const auto& d : o.dtypes) spec.suite.dtypes.push_back(*parse_dtype(d));
  }
  // Every shard must draw the same cases: a drawn seed would differ between them.
  if (shard && spec.suite.seed == 0)
    usage_error("shard " + shard->text() +
                ": no seed given; expected --seed S (or the spec's seed), the same for every "
                "shard, so that all shards and the unsharded run draw the same cases");
  // One seed for the whole run, drawn here when none was given: printed, written
  // to the JSON, and RapidCheck's own seed line (if any) agrees with it.
  if (spec.suite.seed == 0)
    spec.suite.seed = ((std::uint64_t(std::random_device{}()) << 32) | std::random_device{}()) | 1;
  share_seed_with_rapidcheck(spec.suite.seed);

  // Outputs: writable, and no earlier run's file left to be mistaken for this one's.
  try {
    prepare_output(o.junit, "--junit");
    prepare_output(o.json, "--json");
    prepare_output(o.summary_md, "--summary-md");
  } catch (const std::invalid_argument& e) {
    usage_error(e.what());
  }

  // Case files: --cases-dir is made now (an error if it cannot be); the
  // default directory beside --json only when a case is written. An earlier
  // run's case files there (named after a property) are removed first, so
  // that none is mistaken for this run's.
  std::string cases_dir = cases_dir_of(o);
  if (!cases_dir.empty()) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!o.cases_dir.empty()) {
      fs::create_directories(cases_dir, ec);
      if (ec || access(cases_dir.c_str(), W_OK) != 0)
        usage_error("--cases-dir " + cases_dir + ": cannot create or write it (" +
                    (ec ? ec.message() : std::string("not writable")) +
                    "); expected a writable directory");
    }
    if (fs::is_directory(cases_dir, ec))
      for (const auto& e : fs::directory_iterator(cases_dir, ec)) {
        if (e.is_regular_file(ec) && case_file_like(e.path().filename().string()))
          fs::remove(e.path(), ec);
      }
  }
  if (!cases_dir.empty()) {
    // The judge (a child of this process) writes each failing counterexample's
    // calls there as it emits the verdict (kernels/call_log.hpp).
    call_log::set_sink([cases_dir](const Verdict& v, const std::vector<call_log::Call>& calls) {
      try {
        std::error_code ec;
        std::filesystem::create_directories(cases_dir, ec);
        write_case_file(cases_dir, v, calls);
      } catch (const std::exception& e) {
        std::cerr << "softmax-audit check: warning: no case file for " << v.property << " [" << v.op
                  << "/" << v.dtype << "]: " << e.what() << "\n";
      }
    });
  }
  // A case file written from here on is this run's. File times come from the
  // kernel's coarse clock, which lags the clock read here by up to a
  // scheduler tick (10 ms at HZ = 100): a file written right after this line
  // could read as older and lose its place in the JSON (seen under load), so
  // the boundary is 100 ms earlier.
  const auto cases_since =
      std::filesystem::file_time_type::clock::now() - std::chrono::milliseconds(100);

  std::optional<gate::KernelSource> kernel;
  try {
    kernel.emplace(pick_kernel(o, spec.timeout_s));
  } catch (const std::invalid_argument& e) {
    usage_error(e.what());
  }
  // A CUDA kernel with no device checks nothing: say so, never report a pass.
  if (const std::string why = kernel->why_cannot_run(); !why.empty())
    usage_error(why + "; nothing was checked");

  const bool tty = isatty(STDERR_FILENO) != 0;
  gate::ProgressBar bar(std::cerr, !o.quiet && !shard, tty);
  std::string current;
  props::SuiteObserver obs;
  obs.before_case = [&](const std::string& p, const std::string&) { current = p; };
  obs.progress = [&](int done, int total) { bar.update(done, total, current); };

  gate::IsolationOptions iso;
  iso.case_timeout_s = spec.timeout_s;
  iso.deadline_s = spec.deadline_s;
  iso.isolate = !o.no_isolation;
  iso.guard.guard_buffers = !o.no_guard;
  if (o.per_property) iso.granularity = gate::Granularity::per_property;

  const std::uint64_t seed = spec.suite.seed;
  gate::RunRecord rec;
  rec.kernel = kernel->name();
  rec.origin = kernel->identity().origin;
  rec.description = kernel->identity().description;
  rec.config = gate::config_to_json(spec);
  rec.config["seed"] = std::to_string(seed);  // the seed used (drawn when none was given)
  rec.provenance = gate::base_provenance();
  rec.provenance["seed"] = std::to_string(seed);
  rec.provenance["cases"] = spec.suite.cases;
  rec.provenance["mpfr_precision_bits"] = props::suite_mpfr_bits;
  if (kernel->is_plugin()) {
    rec.provenance["kernel_library"] = {{"path", kernel->path()},
                                        {"sha256", gate::sha256_file(kernel->path())}};
    rec.provenance["simd_target"] = "not exposed by the kernel (kernel.h has no field for it)";
  } else {
    rec.provenance["kernel_library"] = nullptr;  // built into softmax-audit (git_commit)
    const std::string simd = builtin_simd_target(kernel->name());
    rec.provenance["simd_target"] = simd.empty() ? "not exposed by the kernel" : simd;
  }
  if (o.no_timing) rec.provenance.erase("command_line");
  // The properties the run covers: the units of a sharded check, and the order
  // the verdicts are written in (check_shard.hpp, combine_unit_verdicts).
  const std::vector<std::string> plan = gate::planned_properties(spec.suite);

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<Verdict>> unit_verdicts;
  std::size_t shard_units = 0, resumed_units = 0, unit_count = 0;
  // The options of one unit of a sharded or --jobs check: the overall
  // deadline less the time already spent (at least 1 s).
  auto unit_options = [&] {
    gate::IsolationOptions opt = iso;
    if (spec.deadline_s > 0) {
      const double left =
          spec.deadline_s -
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      opt.deadline_s = std::max(1.0, left);
    }
    return opt;
  };
  auto run_one = [&](const props::SuiteConfig& config, const gate::IsolationOptions& opt) {
    try {
      // --no-isolation: the kernel shares this process, so a kernel that calls
      // exit(0) would end it with exit 0 and nothing written; while the suite
      // runs, such an exit prints one line and ends with exit 1 instead.
      const ExitGuard guard(o.no_isolation);
      return gate::run_isolated(*kernel, config, opt, &obs);
    } catch (const std::exception& e) {
      bar.finish();
      usage_error(std::string("the gate itself failed: ") + e.what());
    }
  };
  if (!shard && jobs > 1) {
    // check_jobs.hpp: the units in up to `jobs` gate processes at once.
    const std::vector<JobUnit> units = job_units(plan, spec.suite);
    std::vector<JobResult> results;
    try {
      results = run_jobs(
          units, jobs,
          [&](const JobUnit& u) {
            return gate::run_isolated(*kernel, u.config, unit_options(), nullptr);
          },
          [&](int done, int total, int running) {
            bar.update(done, total,
                       std::to_string(running) + " of " + std::to_string(jobs) + " jobs running");
          });
    } catch (const std::exception& e) {
      bar.finish();
      usage_error(std::string("the gate itself failed: ") + e.what());
    }
    for (auto& r : results) {
      rec.processes += r.run.processes;
      rec.crashes += r.run.crashes;
      rec.hangs += r.run.hangs;
      unit_verdicts.push_back(std::move(r.run.verdicts));
    }
  } else if (!shard) {
    gate::IsolatedRun run = run_one(spec.suite, iso);
    rec.processes = run.processes;
    rec.crashes = run.crashes;
    rec.hangs = run.hangs;
    unit_verdicts.push_back(std::move(run.verdicts));
  } else {
    // A sharded check: the units (properties) whose case id mod N is k, each
    // run alone and journaled when finished; a rerun resumes after the last.
    const std::string identity =
        kernel->is_plugin()
            ? gate::sha256_file(kernel->path())
            : (!o.python.empty() ? "python:" + o.python : "builtin:" + kernel->name());
    nlohmann::json plan_json;
    plan_json["format"] = "softmax-audit-shard";
    plan_json["version"] = 1;
    plan_json["command"] = "check";
    plan_json["shard"] = {{"index", shard->index}, {"count", shard->count}};
    plan_json["kernel_identity"] = identity;
    plan_json["no_timing"] = o.no_timing;
    plan_json["run"] = {{"kernel", rec.kernel},
                        {"origin", rec.origin},
                        {"description", rec.description},
                        {"config", rec.config}};
    plan_json["properties"] = plan;
    nlohmann::json units = nlohmann::json::array();
    std::vector<std::pair<CheckUnit, std::uint64_t>> mine;
    const std::vector<CheckUnit> all_units = check_units(plan);
    for (const auto& u : all_units) {
      const std::uint64_t cid = check_unit_id(identity, u.key, spec.suite.temperature, seed);
      units.push_back({{"key", u.key},
                       {"properties", u.properties},
                       {"id", std::to_string(cid)},
                       {"shard", cid % shard->count}});
      if (shard->owns(cid)) mine.emplace_back(u, cid);
    }
    plan_json["units"] = std::move(units);
    shard_units = mine.size();
    unit_count = all_units.size();
    const std::string plan_text =
        plan_json.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::error_code ec;
    fs::create_directories(o.out, ec);
    if (!fs::is_directory(o.out, ec))
      usage_error("--out " + o.out + ": cannot create this directory");
    std::optional<OutputDirLock> lock;
    std::vector<CheckUnitResult> done;
    try {
      lock.emplace(o.out, "--out");
      // A folder holds one shard of one check: a plan already there is this
      // run's (a resumed shard) or the run is refused before any work.
      std::ifstream old(plan_path, std::ios::binary);
      const std::string before((std::istreambuf_iterator<char>(old)),
                               std::istreambuf_iterator<char>());
      if (old.is_open() && before != plan_text)
        throw std::invalid_argument(
            "--out " + o.out + ": its " + kShardFile +
            " is the plan of another check or shard (other options, another kernel or another "
            "--shard); expected the same command as the run that wrote it, or another --out "
            "(nothing was done)");
      if (!old.is_open()) {
        if (fs::exists(journal_path, ec))
          throw std::invalid_argument("--out " + o.out + ": holds a " + kCheckJournal + " but no " +
                                      kShardFile +
                                      "; expected a new folder or one a sharded check wrote");
        write_file_atomically(plan_path, plan_text);
      }
      done = read_check_journal(journal_path, true);
    } catch (const std::exception& e) {
      usage_error(e.what());
    }
    std::map<std::string, CheckUnitResult> finished;
    for (auto& u : done) {
      const bool ours = std::any_of(mine.begin(), mine.end(),
                                    [&](const auto& m) { return m.first.key == u.key; });
      if (!ours)
        usage_error(journal_path + ": unit " + u.key + " is not one of shard " + shard->text() +
                    "'s; expected the journal this shard wrote");
      finished.emplace(u.key, std::move(u));
    }
    resumed_units = finished.size();
    std::cerr << "softmax-audit check: shard " << shard->text() << " (" << shard->source
              << "): " << mine.size() << " of " << all_units.size() << " units (" << plan.size()
              << " properties)"
              << (resumed_units ? ", " + std::to_string(resumed_units) + " already journaled"
                                : std::string())
              << "; journal " << journal_path << "\n";
    preempt::install();
    for (const auto& [unit, cid] : mine) {
      const std::string& id = unit.key;
      if (finished.count(id)) continue;
      props::SuiteConfig one = spec.suite;
      one.properties = unit.properties;
      const gate::IsolationOptions opt = unit_options();
      const auto u0 = std::chrono::steady_clock::now();
      gate::IsolatedRun run = run_one(one, opt);
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - u0).count();
      if (o.no_timing) {
        for (auto& v : run.verdicts) strip_timing(v);
        run.processes = 0;
        secs = 0;
      }
      nlohmann::json prov = rec.provenance;
      prov.erase("command_line");
      const std::string line = check_unit_line(id, cid, run, secs, prov);
      try {
        append_journal_line(journal_path, line);
      } catch (const std::exception& e) {
        usage_error(e.what());
      }
      finished.emplace(id, parse_check_unit_line(line));
    }
    for (const auto& [unit, cid] : mine) {
      const CheckUnitResult& u = finished.at(unit.key);
      rec.processes += u.processes;
      rec.crashes += u.crashes;
      rec.hangs += u.hangs;
      unit_verdicts.push_back(u.verdict_list);
    }
  }
  bar.finish();
  rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rec.verdicts = combine_unit_verdicts(unit_verdicts, plan, seed);
  if (o.no_timing) {
    for (auto& v : rec.verdicts) strip_timing(v);
    rec.seconds = 0;
    rec.processes = 0;
  }
  // gate.coverage judges the whole run: a shard's is the merge's to write.
  if (!shard) rec.verdicts.push_back(gate::coverage_verdict(rec.verdicts, spec, rec.kernel));

  // The summary first: it is on the terminal even if an output cannot be written.
  // With an output on standard output ('-'), the summary goes to stderr so
  // that stdout holds nothing but that output.
  const bool stdout_taken =
      is_stdout_path(o.junit) || is_stdout_path(o.json) || is_stdout_path(o.summary_md);
  if (!o.quiet)
    gate::write_summary(stdout_taken ? std::cerr : std::cout, rec,
                        isatty(stdout_taken ? STDERR_FILENO : STDOUT_FILENO) != 0 &&
                            std::getenv("NO_COLOR") == nullptr);
  const gate::Tally tally = gate::tally(rec.verdicts);
  int code = !tally.ok() ? exit_fail : tally.incomplete ? exit_incomplete : exit_pass;
  auto write = [&](const std::string& path, const std::string& content) {
    if (path.empty()) return;
    try {
      write_file_atomically(path, content);
    } catch (const OutputError& e) {
      std::cerr << "softmax-audit check: error: " << e.what() << "\n";
      code = exit_usage;
    }
  };
  {
    std::ostringstream junit;
    gate::write_junit(junit, {rec});
    write(o.junit, junit.str());
  }
  // Each failing verdict names its case file (written by the judge during this run).
  nlohmann::json results = gate::results_to_json({rec});
  int case_files = 0;
  std::string first_case;
  if (!cases_dir.empty()) {
    auto& vs = results["runs"][0]["verdicts"];
    for (std::size_t i = 0; i < rec.verdicts.size() && i < vs.size(); ++i) {
      const Verdict& v = rec.verdicts[i];
      if (v.outcome != Outcome::fail) continue;
      const std::string path = cases_dir + "/" + case_file_name(v) + ".npz";
      std::error_code ec;
      const auto when = std::filesystem::last_write_time(path, ec);
      if (ec || when < cases_since) continue;
      vs[i]["case_file"] = path;
      if (case_files++ == 0) first_case = path;
    }
  }
  if (!o.quiet && case_files > 0) {
    std::string how = !o.plugin.empty()    ? "--plugin " + o.plugin
                      : !o.builtin.empty() ? "--builtin " + o.builtin
                                           : "--python " + o.python;
    if (o.kernel_index >= 0) how += " --kernel-index " + std::to_string(o.kernel_index);
    (stdout_taken ? std::cerr : std::cout)
        << case_files << " replayable case file(s) in " << cases_dir
        << "/ (inputs, arguments, expected and got values; numpy.load reads them). Rerun one:\n"
        << "  softmax-audit replay " << first_case << " " << how << "\n";
  } else if (!o.quiet && cases_dir.empty() && !tally.ok()) {
    (stdout_taken ? std::cerr : std::cout)
        << "(give --cases-dir DIR, or --json FILE, to keep each failing counterexample as a "
           "replayable case file)\n";
  }
  write(o.json, results.dump(2) + "\n");
  if (!o.summary_md.empty()) write(o.summary_md, gate::summary_markdown({rec}));
  // GitHub Actions reads workflow commands (::error) from the step's output.
  const char* gha = std::getenv("GITHUB_ACTIONS");
  if (o.github_annotations || (gha && std::string(gha) == "true")) {
    std::ostringstream ann;
    gate::write_github_annotations(ann, {rec});
    (stdout_taken ? std::cerr : std::cout) << ann.str() << std::flush;
  }
  if (shard)
    (stdout_taken ? std::cerr : std::cout)
        << "shard " << shard->text() << ": " << shard_units << " of " << unit_count
        << " units journaled in " << journal_path
        << (resumed_units ? " (" + std::to_string(resumed_units) + " from an earlier run)"
                          : std::string())
        << (shard_units == 0 ? "; none belongs to this shard, and `merge` needs it all the same"
                             : std::string())
        << "; gate.coverage is judged when `softmax-audit merge` unites the shards\n";
  return code;
}

}  // namespace

void add_check_command(CLI::App& app) {
  auto o = std::make_shared<CheckOptions>();
  CLI::App* c = app.add_subcommand(
      "check",
      "Gate a kernel: run the property suite on it in an isolated process; exit 0 pass, "
      "1 a property failed, 2 usage or load error, 3 incomplete (a requested check could not "
      "run, or nothing was checked)");
  c->add_option("--plugin", o->plugin, "Kernel library (.so) built against softmax_audit/kernel.h");
  c->add_option("--python", o->python,
                "A Python kernel instead of a plugin: package.module:object (imported only in "
                "the gate's isolated processes; docs/python.md)");
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
  c->add_option("--junit", o->junit, "Write JUnit XML here ('-': standard output)");
  c->add_option("--json", o->json,
                "Write every verdict as JSON here ('-': standard output; the summary then goes "
                "to stderr)");
  c->add_option("--summary-md", o->summary_md,
                "Write a short Markdown summary here, one line per root cause (for a CI job "
                "summary page, e.g. $GITHUB_STEP_SUMMARY; '-': standard output)");
  c->add_option("--cases-dir", o->cases_dir,
                "Write each failing counterexample as a replayable case file (.npz + .json: "
                "inputs, arguments, expected and got values) in this directory (default: beside "
                "--json or --junit, e.g. gate.json -> gate.cases/); `softmax-audit replay` reruns "
                "one");
  c->add_flag("--github-annotations", o->github_annotations,
              "Print a GitHub Actions '::error' line per root cause of failure (automatic when "
              "GITHUB_ACTIONS=true)");
  c->add_option(
      "--timeout", o->timeout,
      "Seconds one kernel call (or opening the kernel) may take before the kernel's process is "
      "killed; the suite's own work between calls is bounded by --deadline only (overrides the "
      "spec; default 60, at most 86400)");
  c->add_option("--deadline", o->deadline,
                "Seconds the whole run may take; properties not run by then are named in a "
                "gate.deadline verdict (overrides the spec; default 3600)");
  add_seed_option(c, &o->seed,
                  "Random seed, 0 to 2^64 - 1 (overrides the spec; 0 = random, printed in "
                  "verdicts)");
  c->add_option("--dtype", o->dtypes,
                "Element type to check: float32, bfloat16 or float16; repeat for several "
                "(overrides the spec's dtypes; default: float32, bfloat16, and float16 when the "
                "kernel declares it)");
  c->add_option("--property", o->properties,
                "Run only these of the spec's properties: an id or a prefix ending in \".*\"; "
                "repeat for several (--list names them)");
  c->add_option("--cases", o->cases,
                "Random cases per property (overrides the spec; 1 to 1000000)");
  c->add_flag("--no-isolation", o->no_isolation,
              "Run the kernel in this process (debugging; a crash then kills the gate)");
  c->add_flag("--no-guard", o->no_guard, "Do not put guard pages and canaries around buffers");
  c->add_flag("--per-property", o->per_property,
              "Run each property in its own run_suite call from the start (slower; the default "
              "does so only after a crash or hang)");
  c->add_option("--shard", o->shard,
                "Run shard k of N (k/N, k from 0): the units (a property, or a family sharing "
                "its searches) whose case id mod N is k, "
                "journaled in --out DIR; also read from SLURM_ARRAY_TASK_ID/COUNT, "
                "JOB_COMPLETION_INDEX (with --shard-count) and GTEST_SHARD_INDEX/"
                "GTEST_TOTAL_SHARDS. Needs a fixed --seed. `merge` unites the shards' folders")
      ->type_name("K/N");
  c->add_option("--shard-count", o->shard_count,
                "Number of shards, for JOB_COMPLETION_INDEX (a Kubernetes Indexed Job's "
                "completions)");
  c->add_option("--out", o->out,
                "A shard's folder: its plan (shard.json) and journal (journal.jsonl, one fsync'd "
                "line per finished unit; a rerun resumes from it)");
  c->add_flag("--no-timing", o->no_timing,
              "Write every seconds field and the process count as 0 and leave the command line "
              "out: the output is then the same bytes on every run (and a merge of shards the "
              "unsharded run's bytes)");
  c->add_option("--jobs", o->jobs,
                "Gate processes at once: an integer from 1 to 64, or auto (the CPUs this process "
                "may use, at most 8). The check's units (a family whose properties share one "
                "search, attention per element type, or a property) run side by side; the "
                "verdicts are the same as with 1 (default auto; 1 with --shard or "
                "--no-isolation)")
      ->each([o](const std::string&) { o->jobs_given = true; });
  c->add_flag("-q,--quiet", o->quiet, "No summary and no progress bar");
  c->add_flag(
      "--list", o->list,
      "List the properties, distributions, rules, ops and dtypes a spec may name, and exit");
  c->add_flag("--markdown", o->markdown,
              "With --list: the registry of properties and gate checks as Markdown "
              "(docs/properties.md)");
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
