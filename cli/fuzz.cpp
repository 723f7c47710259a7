#include "fuzz_command.hpp"

#include "cli/commands.hpp"

#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "core/output_file.hpp"
#include "variants/fuzz.hpp"
#include "variants/variant.hpp"

namespace sa::cli {
namespace {

struct FuzzOptions {
  std::vector<std::string> variants{"all"};
  std::vector<std::string> plugins;
  std::string json;
  int cases = 100;
  std::uint64_t seed = 1;
  int max_log2_n = 20;
  bool list = false;
};

int run_fuzz(const FuzzOptions& o) {
  using namespace sa::variants;
  {
    std::vector<NamedPath> inputs;
    for (const auto& p : o.plugins) inputs.push_back({"--plugin", p});
    refuse_overlapping_paths(inputs, {{"--json", o.json}});
  }
  std::vector<Variant> plugin_variants;
  for (const auto& path : o.plugins)
    for (auto& v : load_plugin(path)) plugin_variants.push_back(std::move(v));
  std::vector<const Variant*> all;
  for (const auto& v : registry().all()) all.push_back(&v);
  for (const auto& v : plugin_variants) all.push_back(&v);
  if (o.list) {
    for (const Variant* v : all) {
      std::cout << v->name
                << (v->wrong_formulation ? " [wrong_formulation of " + v->wrong_of + "]" : "")
                << "  (" << v->origin << ")\n    " << v->formula << "\n    citation: "
                << (v->citation.empty() ? std::string("none given") : v->citation)
                << "\n    streamable: " << name_of(v->stream.kind);
      if (v->stream.kind == StreamKind::no) std::cout << " (" << v->stream.note << ")";
      if (v->in2_kind != In2Kind::none)
        std::cout << "\n    second row (" << name_of(v->in2_kind) << "): " << v->in2
                  << (v->scalar_output ? "\n    output: one number per row" : "");
      std::cout << "\n";
    }
    return 0;
  }
  std::vector<const Variant*> chosen;
  for (const auto& name : o.variants) {
    if (name == "all") {
      for (const Variant* v : all)
        if (std::find(chosen.begin(), chosen.end(), v) == chosen.end()) chosen.push_back(v);
      continue;
    }
    const Variant* found = nullptr;
    for (const Variant* v : all)
      if (v->name == name) found = v;
    if (!found) {
      std::string names;
      for (const Variant* v : all) names += " " + v->name;
      throw std::invalid_argument("--variant: no variant named '" + name +
                                  "'; expected 'all' or one of:" + names);
    }
    if (std::find(chosen.begin(), chosen.end(), found) == chosen.end()) chosen.push_back(found);
  }
  // The output: writable, and no earlier run's file left behind, before any work.
  prepare_output(o.json, "--json");
  share_seed_with_rapidcheck(o.seed);
  FuzzConfig cfg;
  cfg.cases = o.cases;
  cfg.seed = o.seed;
  cfg.max_log2_n = o.max_log2_n;
  const Matrix m = fuzz_all(chosen, cfg);
  // --json -: the JSON alone on stdout, the table on stderr.
  (is_stdout_path(o.json) ? std::cerr : std::cout) << render_table(m);
  if (!o.json.empty()) {
    // Whole or not at all (temporary file, fsync, rename): a full disk is an
    // error, never a truncated file and exit 0.
    try {
      write_file_atomically(o.json, to_json(m).dump(2) + "\n");
    } catch (const OutputError& e) {
      throw std::runtime_error(std::string("error: --json ") + e.what());
    }
    if (!is_stdout_path(o.json)) std::cout << "JSON written to " << o.json << "\n";
  }
  // A variant failing a property it claims (variants/fuzz.hpp, claims()) fails the run.
  const auto bad = claimed_failures(m);
  for (const auto& b : bad) std::cerr << "softmax-audit fuzz: FAIL " << b << "\n";
  if (!bad.empty()) return 1;
  int checked = 0;
  for (const auto& r : m.rows)
    for (const auto& c : r.cells)
      checked += c.outcome == Outcome::pass || c.outcome == Outcome::fail;
  if (checked == 0) {
    std::cerr << "softmax-audit fuzz: INCOMPLETE: no property of any variant was checked\n";
    return 3;
  }
  return 0;
}

}  // namespace

void add_fuzz_command(CLI::App& app) {
  auto opts = std::make_shared<FuzzOptions>();
  CLI::App* sub =
      app.add_subcommand("fuzz", "Run every property against softmax variants (property matrix)");
  sub->add_option("--variant", opts->variants, "variant name, or 'all' (repeatable)")
      ->capture_default_str();
  sub->add_option("--plugin", opts->plugins,
                  "variant plugin shared library (include/softmax_audit/variant.h)")
      ->check(CLI::ExistingFile);
  sub->add_option("--json", opts->json,
                  "write the matrix as JSON (one sa::Verdict per cell; '-': standard output, the "
                  "table then goes to stderr)");
  sub->add_option("--cases", opts->cases, "random cases per property before shrinking")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  add_seed_option(sub, &opts->seed,
                  "base seed, 0 to 2^64 - 1 (default 1; every cell's own seed is in its note)");
  sub->add_option("--max-log2-n", opts->max_log2_n, "dispersion sweep to n = 2^this")
      ->check(CLI::Range(8, 24))
      ->capture_default_str();
  sub->add_flag("--list", opts->list, "list the variants and exit");
  sub->callback([opts] {
    int rc = 0;
    try {
      rc = run_fuzz(*opts);
    } catch (const std::exception& e) {
      std::cerr << "softmax-audit fuzz: " << e.what() << "\n";
      rc = 2;
    }
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace sa::cli
