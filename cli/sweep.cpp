// `softmax-audit sweep`: large-n sweeps of one kernel (properties/sweep.hpp).
//
// Writes DIR/sweep.csv (the resumable table: kill the command at any point
// and run it again to continue, no row lost or repeated) and DIR/sweep.json
// ({"rows": [...], "series": [...]}: every row, and the series the audit
// report draws, each with the bound it is held to).
#include <fmt/core.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "cli/commands.hpp"
#include "kernels/builtin.hpp"
#include "properties/sweep.hpp"

namespace sa::cli {
namespace {

struct SweepOptions {
  std::string builtin = "cpu", plugin, out = "sweep-out";
  int min_log2 = 4, max_log2 = 24;
  std::vector<std::string> distributions, dtypes;
  std::vector<double> temperatures;
  std::int64_t seed = 1;
  int samples = 64;
};

nlohmann::json num(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  return x;
}

// Turns rows into the series the report draws (x = n), few enough to read:
//   softmax_max_rel_error        per dtype and distribution (the report draws T7's bound itself);
//   max_weight                   float32, per distribution, with T1's upper bound at the row's
//   spread; streamed_entropy_abs_error   per dtype and distribution.
// Every other column (ulp errors and their budgets, sums, lse) stays in rows.json and the CSV.
nlohmann::json series_of(const std::vector<props::SweepRow>& rows) {
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
      {"softmax_max_rel_error", &props::SweepRow::rel_err_sampled, nullptr, false},
      {"max_weight", &props::SweepRow::pmax_kernel, &props::SweepRow::t1_upper, true},
      {"streamed_entropy_abs_error", &props::SweepRow::H_err, nullptr, false},
  };
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, rs] : groups) {
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
  return out;
}

int run_sweep_command(const SweepOptions& o) {
  namespace fs = std::filesystem;
  std::optional<Kernel> kernel;
  try {
    if (!o.plugin.empty()) {
      kernel.emplace(load_plugin(o.plugin));
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
  std::error_code ec;
  fs::create_directories(o.out, ec);
  props::SweepConfig c;
  for (int k = o.min_log2; k <= o.max_log2; ++k) c.log2_sizes.push_back(k);
  c.distributions = o.distributions;
  c.temperatures = o.temperatures;
  for (const auto& d : o.dtypes) {
    auto t = parse_dtype(d);
    if (!t) {
      fmt::print(stderr, "softmax-audit sweep: error: --dtype '{}': expected float32 or bfloat16\n",
                 d);
      return exit_usage;
    }
    c.dtypes.push_back(*t);
  }
  c.seed = static_cast<std::uint64_t>(o.seed);
  c.samples = o.samples;
  c.csv_path = (fs::path(o.out) / "sweep.csv").string();
  int done = 0;
  const bool tty = isatty(STDERR_FILENO) != 0;
  c.on_row = [&](const std::string& key) {
    ++done;
    if (tty) fmt::print(stderr, "\r  row {:4d}  {:<60}", done, key);
  };
  fmt::print(stderr, "softmax-audit sweep: kernel '{}', n = 2^{}..2^{}, table {}\n", kernel->name(),
             o.min_log2, o.max_log2, c.csv_path);
  try {
    props::run_sweep(*kernel, c);
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "\nsoftmax-audit sweep: error: {}\n", e.what());
    return exit_usage;
  }
  if (tty) fmt::print(stderr, "\n");
  const auto rows = props::read_sweep_csv(c.csv_path);
  nlohmann::json j;
  j["kernel"] = kernel->name();
  j["series"] = series_of(rows);
  const std::string rows_json = (fs::path(o.out) / "rows.json").string();
  props::write_sweep_json(rows, rows_json);
  j["rows_file"] = "rows.json";
  const std::string path = (fs::path(o.out) / "sweep.json").string();
  std::ofstream f(path, std::ios::trunc);
  f << j.dump(1) << "\n";
  if (!f) {
    fmt::print(stderr, "softmax-audit sweep: error: cannot write {}\n", path);
    return exit_usage;
  }
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
      rows.size(), c.csv_path, over, over_vec, elements, path);
  return over == 0 ? exit_pass : exit_fail;
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* c = app.add_subcommand(
      "sweep", "Large-n sweep of one kernel: errors, dispersion and entropy against n (resumable)");
  c->add_option("--builtin", o->builtin, "Built-in kernel to sweep")->capture_default_str();
  c->add_option("--plugin", o->plugin, "Kernel library (.so) to sweep instead of a built-in");
  c->add_option("--out", o->out, "Directory for sweep.csv (resumable) and sweep.json")
      ->capture_default_str();
  c->add_option("--min-log2-n", o->min_log2, "Smallest size as log2 n")->capture_default_str();
  c->add_option("--max-log2-n", o->max_log2, "Largest size as log2 n")->capture_default_str();
  c->add_option("--distribution", o->distributions,
                "Generators (default gaussian, uniform, spike, fa3_outliers)");
  c->add_option("--dtype", o->dtypes,
                "float32 and/or bfloat16 (default: those the kernel supports)");
  c->add_option("--temperature", o->temperatures, "Temperatures (default 1)");
  c->add_option("--seed", o->seed, "Seed of every row")->capture_default_str();
  c->add_option("--samples", o->samples, "Sampled items per row for per-element errors")
      ->capture_default_str();
  c->callback([o] { exit_code() = run_sweep_command(*o); });
}

}  // namespace sa::cli
