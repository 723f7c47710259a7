// `softmax-audit sweep`: large-n sweeps of one kernel (properties/sweep.hpp).
//
// Writes DIR/sweep.csv (the resumable table: kill the command at any point
// and run it again to continue, no row lost or repeated) and DIR/sweep.json
// ({"rows": [...], "series": [...]}: every row, and the series the audit
// report draws, each with the bound it is held to).
//
// --shard k/N (or a scheduler's variables, core/shard.hpp) runs one shard:
// DIR/sweep.csv is then that shard's journal and DIR/shard.json its plan
// (every case of the sweep, with its id and shard), which `merge` reads.
// SIGTERM: the row in progress is abandoned (or finished, if it is being
// written), exit 143; the same command resumes (core/preempt.hpp).
#include <fmt/core.h>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <tuple>

#include "cli/commands.hpp"
#include "cli/split_rows.hpp"
#include "cli/sweep_outputs.hpp"
#include "core/case_id.hpp"
#include "core/output_file.hpp"
#include "core/output_lock.hpp"
#include "core/preempt.hpp"
#include "core/shard.hpp"
#include "gate/provenance.hpp"
#include "gate/kernel_source.hpp"
#include "kernels/builtin.hpp"
#include "properties/generators.hpp"
#include "properties/sweep.hpp"

namespace sa::cli {
namespace {

struct SweepOptions {
  std::string builtin = "cpu", plugin, out = "sweep-out";
  int min_log2 = 4, max_log2 = 24;
  int kernel_index = -1;
  std::vector<std::string> distributions, dtypes;
  std::vector<double> temperatures;
  std::uint64_t seed = 1;
  int samples = 64;
  double max_memory_gib = 0;  // 0: the memory available now (/proc/meminfo)
  bool temperature_series_only = false;
  bool powers_of_two_only = false;
  std::string shard;              // --shard k/N
  std::uint64_t shard_count = 0;  // --shard-count N (with JOB_COMPLETION_INDEX)
  bool no_timing = false;
  std::int64_t row_chunks = -1;  // --row-chunks C (rows larger than one machine); -1: not given
  std::string state;             // --state FILE: their phase 2
};

// MemAvailable from /proc/meminfo, in bytes (0 when unknown).
double available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

nlohmann::json num(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  return x;
}

// Turns rows into the series the report draws (x = n), few enough to read:
//   softmax_max_rel_error        per dtype and distribution, with T7's bound at each row's spread;
//   max_weight                   float32, per distribution, with T1's upper bound at the row's
//   spread; streamed_entropy_abs_error   per dtype and distribution;
//   entropy (x = temperature)    with several temperatures: per dtype and distribution at the
//   largest n, the kernel's entropy and (as "bound") the exact one.
// Every other column (ulp errors and their budgets, sums, lse) stays in rows.json and the CSV.
nlohmann::json series_of(const std::vector<props::SweepRow>& rows, bool temperature_only) {
  using Key = std::tuple<std::string, std::string, std::string, double>;
  std::map<Key, std::vector<const props::SweepRow*>> groups;
  for (const auto& r : rows)
    groups[{r.kernel, r.dtype, r.distribution, r.temperature}].push_back(&r);
  struct Metric {
    const char* name;
    double props::SweepRow::*y;
    double props::SweepRow::*bound;  // may be null
    bool float32_only;
  };
  const Metric metrics[] = {
      {"softmax_max_rel_error", &props::SweepRow::rel_err_sampled, &props::SweepRow::t7_bound,
       false},
      {"max_weight", &props::SweepRow::pmax_kernel, &props::SweepRow::t1_upper, true},
      {"streamed_entropy_abs_error", &props::SweepRow::H_err, nullptr, false},
  };
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, rs] : groups) {
    if (temperature_only) break;
    const auto& [kernel, dtype, dist, theta] = key;
    for (const Metric& m : metrics) {
      if (m.float32_only && dtype != "float32") continue;
      nlohmann::json s = {{"kernel", kernel},     {"dtype", dtype},   {"distribution", dist},
                          {"temperature", theta}, {"metric", m.name}, {"x", "n"}};
      s["label"] = m.float32_only ? fmt::format("{} {}", kernel, dist)
                                  : fmt::format("{} {} {}", kernel, dtype, dist);
      if (theta != 1) s["label"] = s["label"].get<std::string>() + fmt::format(" θ={}", theta);
      for (const auto* r : rs) {
        s["points"].push_back({r->n, num(r->*m.y)});
        if (m.bound) s["bound"].push_back({r->n, num(r->*m.bound)});
      }
      out.push_back(std::move(s));
    }
  }
  // Entropy against temperature (the paper's Figure 5, on the kernel's own
  // entropy), when the sweep has several temperatures: per kernel, dtype and
  // distribution at its largest n, the kernel's H and the exact H at each theta.
  using Group = std::tuple<std::string, std::string, std::string>;
  std::map<Group, std::int64_t> largest;
  for (const auto& r : rows) {
    auto& n = largest[{r.kernel, r.dtype, r.distribution}];
    n = std::max(n, r.n);
  }
  for (const auto& [g, n] : largest) {
    const auto& [kernel, dtype, dist] = g;
    std::map<double, const props::SweepRow*> by_theta;
    for (const auto& r : rows)
      if (r.kernel == kernel && r.dtype == dtype && r.distribution == dist && r.n == n)
        by_theta[r.temperature] = &r;
    if (by_theta.size() < 2) continue;
    nlohmann::json s = {{"kernel", kernel},
                        {"dtype", dtype},
                        {"distribution", dist},
                        {"n", n},
                        {"metric", "entropy"},
                        {"x", "temperature"},
                        {"label", fmt::format("{} {} {} n={}", kernel, dtype, dist, n)}};
    for (const auto& [theta, r] : by_theta) {
      s["points"].push_back({theta, num(r->H_kernel)});
      s["bound"].push_back({theta, num(r->H_exact)});
    }
    out.push_back(std::move(s));
  }
  return out;
}

void print_summary(const std::vector<props::SweepRow>& rows);

}  // namespace

std::string sweep_json_text(const std::vector<props::SweepRow>& rows, const std::string& kernel,
                            bool temperature_series_only) {
  nlohmann::json j;
  j["format"] = "softmax-audit-sweep";
  j["version"] = 2;  // docs/schema/sweep.schema.json
  j["kernel"] = kernel;
  j["series"] = series_of(rows, temperature_series_only);
  j["rows_file"] = "rows.json";
  return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

int print_sweep_verdict(const std::vector<props::SweepRow>& rows, const std::string& csv_path,
                        const std::string& json_path) {
  print_summary(rows);
  // A sweep measures; its verdicts are the suite's. Say how many rows exceeded a bound.
  // Every element of every row is checked (elements_checked = n; the MPFR
  // columns *_sampled are the extra, sampled, correctly rounded check).
  int over = 0, over_vec = 0;
  std::int64_t elements = 0;
  for (const auto& r : rows) {
    const bool vec = !(r.rel_err_all <= r.vectorised_threshold);
    over_vec += vec ? 1 : 0;
    if (vec || r.max_ulp_sampled > r.ulp_budget_at_worst || !(r.max_ulp_all <= r.ulp_budget_all) ||
        r.H_err > r.H_budget)
      ++over;
    elements += r.elements_checked;
  }
  fmt::print(
      "{} rows in {} ({} over their bound, {} of them over vectorised_2x); every element "
      "checked ({} elements, fraction 1); series for the report in {}\n",
      rows.size(), csv_path, over, over_vec, elements, json_path);
  return over > 0 ? exit_fail : exit_pass;
}

namespace {

// "ETA 1h02m", "ETA 3m07s", "ETA 12s": the time left, taking a row's cost
// as proportional to its n; "ETA --" until a row is done.
std::string sweep_eta(double elapsed_s, double done, double total) {
  if (!(done > 0) || !(elapsed_s >= 0)) return "ETA --";
  const double left = std::max(0.0, elapsed_s * (total - done) / done);
  const long s = std::lround(left);
  if (s >= 3600) return fmt::format("ETA {}h{:02d}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("ETA {}m{:02d}s", s / 60, s % 60);
  return fmt::format("ETA {}s", s);
}

int run_sweep_command(const SweepOptions& o) {
  namespace fs = std::filesystem;
  if (o.row_chunks != -1 || !o.state.empty()) {
    if (o.row_chunks == -1) {
      fmt::print(stderr,
                 "softmax-audit sweep: error: --state {}: expected --row-chunks C with it (the "
                 "states are phase 1's of a split sweep)\n",
                 o.state);
      return exit_usage;
    }
    if (o.temperature_series_only || o.powers_of_two_only || o.samples != 64) {
      fmt::print(stderr,
                 "softmax-audit sweep: error: --row-chunks {}: expected none of "
                 "--temperature-series-only, --powers-of-two-only and --samples with it (a split "
                 "sweep has rows of 2^k items only and checks every element)\n",
                 o.row_chunks);
      return exit_usage;
    }
    SplitRowsOptions s;
    s.builtin = o.builtin, s.plugin = o.plugin, s.out = o.out, s.state = o.state;
    s.kernel_index = o.kernel_index;
    s.min_log2 = o.min_log2, s.max_log2 = o.max_log2;
    s.chunks = o.row_chunks;
    s.distributions = o.distributions, s.dtypes = o.dtypes, s.temperatures = o.temperatures;
    s.seed = static_cast<std::uint64_t>(o.seed);
    s.shard = o.shard, s.shard_count = o.shard_count;
    s.max_memory_gib = o.max_memory_gib;
    return run_split_rows(s);
  }
  std::optional<Kernel> kernel;
  std::optional<Shard> shard;
  try {
    shard = resolve_shard(o.shard, o.shard_count);
    // The plugin is none of the outputs (checked before it is even opened).
    refuse_overlapping_paths({{"--plugin", o.plugin}},
                             {{"--out", (fs::path(o.out) / "sweep.csv").string()},
                              {"--out", (fs::path(o.out) / "rows.json").string()},
                              {"--out", (fs::path(o.out) / "sweep.json").string()},
                              {"--out", (fs::path(o.out) / kShardFile).string()}});
    if (!o.plugin.empty()) {
      // Probe it in a child first, so that a constructor that exits, crashes or
      // hangs is a load error (exit 2) and not the end of this process.
      const auto probed = gate::KernelSource::probe_plugin(o.plugin, o.kernel_index, 60);
      if (const std::string why = probed.why_cannot_run(); !why.empty())
        throw std::invalid_argument(why + "; nothing was swept");
      kernel.emplace(load_plugin(probed.path(), o.kernel_index));
    } else {
      std::string names;
      for (auto& k : builtin_kernels()) {
        if (k.name() == o.builtin) kernel.emplace(k);
        names += (names.empty() ? "" : ", ") + k.name();
      }
      if (!kernel)
        throw std::invalid_argument("--builtin " + o.builtin +
                                    ": no built-in kernel of that name; expected one of: " + names);
    }
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "softmax-audit sweep: error: {}\n", e.what());
    return exit_usage;
  }
  if (o.min_log2 < 0 || o.max_log2 > 30 || o.min_log2 > o.max_log2) {
    fmt::print(stderr,
               "softmax-audit sweep: error: sizes 2^{}..2^{}: expected 0 <= min <= max <= 30\n",
               o.min_log2, o.max_log2);
    return exit_usage;
  }
  if (o.samples < 0 || o.samples > 1 << 20) {
    fmt::print(stderr,
               "softmax-audit sweep: error: --samples {}: expected 0 <= samples <= 1048576\n",
               o.samples);
    return exit_usage;
  }
  for (double th : o.temperatures)
    if (!(th > 0) || !std::isfinite(th)) {
      fmt::print(stderr,
                 "softmax-audit sweep: error: --temperature {}: expected a finite number "
                 "> 0\n",
                 th);
      return exit_usage;
    }
  // Memory, stated and enforced before any work.
  const double need =
      props::kSweepBytesFixed + props::kSweepBytesPerElement * std::ldexp(1.0, o.max_log2);
  const double avail =
      o.max_memory_gib > 0 ? o.max_memory_gib * (1 << 30) : available_memory_bytes();
  if (avail > 0 && need > avail) {
    fmt::print(stderr,
               "softmax-audit sweep: error: --max-log2-n {}: a row of 2^{} elements needs about "
               "{:.1f} GiB ({} bytes per element), and {:.1f} GiB are available{}; "
               "expected --max-log2-n <= {}\n",
               o.max_log2, o.max_log2, need / (1 << 30), props::kSweepBytesPerElement,
               avail / (1 << 30), o.max_memory_gib > 0 ? " (--max-memory)" : "",
               static_cast<int>(std::floor(
                   std::log2((avail - props::kSweepBytesFixed) / props::kSweepBytesPerElement))));
    return exit_usage;
  }
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (!fs::is_directory(o.out, ec)) {
    fmt::print(stderr, "softmax-audit sweep: error: --out {}: cannot create this directory\n",
               o.out);
    return exit_usage;
  }
  // One run at a time writes this folder.
  std::optional<OutputDirLock> lock;
  try {
    lock.emplace(o.out, "--out");
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "softmax-audit sweep: error: {}\n", e.what());
    return exit_usage;
  }
  props::SweepConfig c;
  for (int k = o.min_log2; k <= o.max_log2; ++k) c.log2_sizes.push_back(k);
  c.distributions = o.distributions;
  c.temperatures = o.temperatures;
  for (const auto& d : o.dtypes) {
    auto t = parse_dtype(d);
    if (!t || *t == DType::float64) {
      fmt::print(stderr,
                 "softmax-audit sweep: error: --dtype '{}': expected float32, bfloat16 or float16 "
                 "(the kernel interface carries no other type)\n",
                 d);
      return exit_usage;
    }
    c.dtypes.push_back(*t);
  }
  // A requested dtype the kernel lacks is a requested check that cannot run.
  std::vector<std::string> lacking;
  for (DType t : c.dtypes)
    if (!kernel->supports(t)) lacking.push_back(name_of(t));
  c.seed = static_cast<std::uint64_t>(o.seed);
  c.samples = o.samples;
  c.csv_path = (fs::path(o.out) / "sweep.csv").string();
  if (!o.powers_of_two_only) c.other_sizes = props::default_other_sizes(o.min_log2, o.max_log2);
  c.timing = !o.no_timing;
  c.kernel_identity = o.plugin.empty() ? "builtin:" + kernel->name() : gate::sha256_file(o.plugin);
  if (shard) {
    c.shard_index = shard->index;
    c.shard_count = shard->count;
  }
  // A shard's plan: every case of the sweep with its id and shard, and what
  // the merged table is (merge checks that its inputs are shards of one sweep).
  std::size_t shard_rows = 0;
  if (shard) {
    nlohmann::json plan;
    plan["format"] = "softmax-audit-shard";
    plan["version"] = 1;
    plan["command"] = "sweep";
    plan["shard"] = {{"index", shard->index}, {"count", shard->count}};
    plan["kernel"] = kernel->name();
    plan["kernel_identity"] = c.kernel_identity;
    plan["table_identity"] = props::sweep_identity_line(*kernel, c, false);
    plan["temperature_series_only"] = o.temperature_series_only;
    plan["lacking_dtypes"] = lacking;
    nlohmann::json cases = nlohmann::json::array();
    try {
      for (const auto& sc : props::plan_sweep(*kernel, c)) {
        cases.push_back(
            {{"key", sc.key}, {"id", std::to_string(sc.id)}, {"shard", sc.id % shard->count}});
        if (shard->owns(sc.id)) ++shard_rows;
      }
      plan["cases"] = std::move(cases);
      const std::string plan_path = (fs::path(o.out) / kShardFile).string();
      const std::string text =
          plan.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
      // A folder holds one shard of one sweep: a plan already there is this
      // run's (a resumed shard) or the run is refused before any work.
      std::ifstream old(plan_path, std::ios::binary);
      const std::string before((std::istreambuf_iterator<char>(old)),
                               std::istreambuf_iterator<char>());
      if (old.is_open() && before != text)
        throw std::invalid_argument(
            "--out " + o.out + ": its " + kShardFile +
            " is the plan of another sweep or shard (other options or another --shard); expected "
            "the same command as the run that wrote it, or another --out (nothing was done)");
      if (!old.is_open()) write_file_atomically(plan_path, text);
    } catch (const std::exception& e) {
      fmt::print(stderr, "softmax-audit sweep: error: {}\n", e.what());
      return exit_usage;
    }
  }
  preempt::install();
  const bool tty = isatty(STDERR_FILENO) != 0;
  // Off a terminal (CI logs), a plain line every 10 s instead of the redrawn one.
  const auto start = std::chrono::steady_clock::now();
  auto last_line = start;
  c.on_progress = [&](const props::SweepProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    const std::string line =
        fmt::format("row {} of {}  {}", p.row, p.rows,
                    sweep_eta(std::chrono::duration<double>(now - start).count(), p.elements_done,
                              p.elements_total));
    if (tty) {
      fmt::print(stderr, "\r  {:<34}  {:<60}", line, p.key);
    } else if (now - last_line > std::chrono::seconds(10)) {
      last_line = now;
      fmt::print(stderr, "  {}  {}\n", line, p.key);
    }
  };
  fmt::print(stderr, "softmax-audit sweep: kernel '{}', n = 2^{}..2^{}{}, table {}{}\n",
             kernel->name(), o.min_log2, o.max_log2,
             c.other_sizes.empty() ? std::string()
                                   : fmt::format(" and {}", fmt::join(c.other_sizes, ", ")),
             c.csv_path,
             shard
                 ? fmt::format("; shard {} ({}): {} rows", shard->text(), shard->source, shard_rows)
                 : std::string());
  try {
    props::run_sweep(*kernel, c);
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "\nsoftmax-audit sweep: error: {}\n", e.what());
    return exit_usage;
  }
  if (tty) fmt::print(stderr, "\n");
  const auto rows = props::read_sweep_csv(c.csv_path);
  const std::string rows_json = (fs::path(o.out) / "rows.json").string();
  const std::string path = (fs::path(o.out) / "sweep.json").string();
  try {
    // A SIGTERM now stops the run once both files are whole (no stray temporary file).
    const preempt::JournalWrite outputs;
    props::write_sweep_json(rows, rows_json);
    write_file_atomically(path, sweep_json_text(rows, kernel->name(), o.temperature_series_only));
  } catch (const OutputError& e) {
    fmt::print(stderr, "softmax-audit sweep: error: {}\n", e.what());
    return exit_usage;
  }
  if (print_sweep_verdict(rows, c.csv_path, path) == exit_fail) return exit_fail;
  if (shard && shard_rows == 0 && lacking.empty()) {
    fmt::print("shard {}: no case of this sweep belongs to it; `merge` needs it all the same\n",
               shard->text());
    return exit_pass;
  }
  if (rows.empty() || !lacking.empty()) {
    fmt::print(stderr, "softmax-audit sweep: INCOMPLETE: {}\n",
               rows.empty() ? std::string("no row was measured; nothing was checked")
                            : "kernel '" + kernel->name() + "' does not support --dtype " +
                                  fmt::format("{}", fmt::join(lacking, ", ")) +
                                  "; those rows were not measured");
    return exit_incomplete;
  }
  return exit_pass;
}

// One line per (dtype, distribution) over every n of the table: the figures
// docs/measurements.md quotes (spread range, largest weight and T1's upper bound at the
// smallest and largest n, the largest log n - H, the largest entropy error of
// the kernel's streamed entropy, the worst sampled softmax error in ulps).
void print_summary(const std::vector<props::SweepRow>& rows) {
  struct Acc {
    double spread_lo = INFINITY, spread_hi = -INFINITY, gap = 0, h_err = 0, ulp = 0;
    const props::SweepRow *first = nullptr, *last = nullptr;
  };
  std::map<std::pair<std::string, std::string>, Acc> acc;
  for (const auto& r : rows) {
    if (r.temperature != 1.0) continue;
    Acc& a = acc[{r.dtype, r.distribution}];
    a.spread_lo = std::min(a.spread_lo, r.spread);
    a.spread_hi = std::max(a.spread_hi, r.spread);
    a.gap = std::max(a.gap, r.log_n - r.H_exact);
    if (std::isfinite(r.H_err)) a.h_err = std::max(a.h_err, std::abs(r.H_err));
    a.ulp = std::max(a.ulp, r.max_ulp_sampled);
    if (!a.first || r.n < a.first->n) a.first = &r;
    if (!a.last || r.n > a.last->n) a.last = &r;
  }
  if (acc.empty()) return;
  fmt::print("{:<9} {:<13} {:>13} {:>26} {:>26} {:>10} {:>9} {:>8}\n", "dtype", "distribution",
             "spread", "p_max at smallest n", "p_max at largest n", "log n - H", "|H err|",
             "max ulp");
  for (const auto& [k, a] : acc)
    fmt::print("{:<9} {:<13} {:>13} {:>26} {:>26} {:>10.3g} {:>9.3g} {:>8.3g}\n", k.first, k.second,
               fmt::format("{:.3g}-{:.3g}", a.spread_lo, a.spread_hi),
               fmt::format("{:.3g} (T1 {:.3g}, n={})", a.first->pmax_kernel, a.first->t1_upper,
                           a.first->n),
               (a.last->n & (a.last->n - 1)) == 0
                   ? fmt::format("{:.3g} (T1 {:.3g}, n=2^{})", a.last->pmax_kernel,
                                 a.last->t1_upper, a.last->log2n)
                   : fmt::format("{:.3g} (T1 {:.3g}, n={})", a.last->pmax_kernel, a.last->t1_upper,
                                 a.last->n),
               a.gap, a.h_err, a.ulp);
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* c = app.add_subcommand(
      "sweep", "Large-n sweep of one kernel: errors, dispersion and entropy against n (resumable)");
  std::string builtin_names, dist_names;
  for (const Kernel& k : builtin_kernels())
    builtin_names += (builtin_names.empty() ? "" : ", ") + k.name();
  for (const std::string& d : props::distribution_names())
    dist_names += (dist_names.empty() ? "" : ", ") + d;
  c->add_option("--builtin", o->builtin, "Built-in kernel to sweep: " + builtin_names)
      ->capture_default_str();
  c->add_option("--plugin", o->plugin, "Kernel library (.so) to sweep instead of a built-in");
  c->add_option("--kernel-index", o->kernel_index,
                "Which kernel of a multi-kernel plugin (sa_kernel_entry_at index)");
  c->add_option("--out", o->out, "Directory for sweep.csv (resumable) and sweep.json")
      ->capture_default_str();
  c->add_flag("--temperature-series-only", o->temperature_series_only,
              "sweep.json gets only the entropy-against-temperature series (the rows keep "
              "everything): what `audit` draws as the paper's Figure 5");
  c->add_option("--min-log2-n", o->min_log2, "Smallest size as log2 n")->capture_default_str();
  c->add_option("--max-log2-n", o->max_log2, "Largest size as log2 n")->capture_default_str();
  c->add_flag("--powers-of-two-only", o->powers_of_two_only,
              "Only n = 2^k; by default the sweep adds 2^k - 1 and 2^k + 2^(k-1) + 1 at k = 5, "
              "10, 15 within the range (a remainder-loop bug passes every power of two)");
  c->add_option("--distribution", o->distributions,
                "Generators (default gaussian, uniform, spike, fa3_outliers): " + dist_names);
  c->add_option("--dtype", o->dtypes,
                "float32, bfloat16 and/or float16 (default: those the kernel supports)");
  c->add_option("--temperature", o->temperatures, "Temperatures (default 1)");
  add_seed_option(c, &o->seed, "Seed of every row, 0 to 2^64 - 1 (default 1)");
  c->add_option("--samples", o->samples, "Sampled items per row for per-element errors")
      ->capture_default_str();
  c->add_option("--shard", o->shard,
                "Run shard k of N (k/N, k from 0): the rows whose case id mod N is k; also read "
                "from SLURM_ARRAY_TASK_ID/COUNT, JOB_COMPLETION_INDEX (with --shard-count) and "
                "GTEST_SHARD_INDEX/GTEST_TOTAL_SHARDS. `merge` unites the shards' --out folders")
      ->type_name("K/N");
  c->add_option("--shard-count", o->shard_count,
                "Number of shards, for JOB_COMPLETION_INDEX (a Kubernetes Indexed Job's "
                "completions)");
  c->add_flag("--no-timing", o->no_timing,
              "Write the seconds column as 0: the table is then the same bytes on every run "
              "(and a merge of shards the same bytes as the unsharded sweep)");
  c->add_option("--row-chunks", o->row_chunks,
                "Cut every row into C chunks spread over shards (rows to 2^32): phase 1 journals "
                "each chunk's state, `merge` combines them (T6), phase 2 (--state) checks every "
                "element against the row's merged state; docs/scale-out.md")
      ->type_name("C");
  c->add_option("--state", o->state,
                "With --row-chunks: phase 2, against the row-states.json that `merge` wrote from "
                "phase 1's shards")
      ->type_name("FILE");
  c->add_option("--max-memory", o->max_memory_gib,
                "GiB the sweep may use (default: the memory available now); sizes whose estimate "
                "(32 bytes per element) exceeds it are refused before any work");
  c->callback([o] { exit_code() = run_sweep_command(*o); });
}

}  // namespace sa::cli
