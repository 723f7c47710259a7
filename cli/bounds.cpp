// `softmax-audit bounds`: the paper's dispersion results for a given spread.
//
// Given a logit spread delta (directly, from logits, or bounded from weight
// matrices by T3), a temperature and data types, prints T1's tight bounds on
// every coefficient at a range of sizes and T2's n*: the size past which every
// coefficient is below the type's unit roundoff.
#include <fmt/core.h>
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "core/dtype.hpp"
#include "core/output_file.hpp"
#include "theory/critical_size.hpp"
#include "theory/dispersion.hpp"
#include "theory/spread_bound.hpp"

namespace sa::cli {
namespace {

struct Options {
  std::optional<double> spread;
  std::string logits;
  std::string q_file, k_file, query_file, items_file;
  double scale = 1.0;
  std::string preset;
  double temperature = 1.0;
  std::vector<std::string> dtypes = {"float32", "bfloat16", "float16"};
  std::vector<double> sizes;
  std::string json;  // --json FILE ("-": stdout, instead of the tables)
};

// Whitespace/comma separated numbers, one matrix row per line; '#' starts a comment.
Eigen::MatrixXd read_matrix(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("{} file '{}' cannot be opened", what, path));
  std::vector<std::vector<double>> rows;
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    for (char& c : line)
      if (c == ',') c = ' ';
    std::istringstream ls(line);
    std::vector<double> row;
    std::string tok;
    while (ls >> tok) {
      try {
        std::size_t used = 0;
        row.push_back(std::stod(tok, &used));
        if (used != tok.size()) throw std::invalid_argument("trailing");
      } catch (const std::exception&) {
        throw std::invalid_argument(
            fmt::format("{} file '{}' line {}: '{}' is not a number", what, path, lineno, tok));
      }
      if (!std::isfinite(row.back()))
        throw std::invalid_argument(fmt::format(
            "{} file '{}' line {}: '{}': expected a finite number", what, path, lineno, tok));
    }
    if (row.empty()) continue;
    if (!rows.empty() && row.size() != rows.front().size())
      throw std::invalid_argument(
          fmt::format("{} file '{}' line {}: {} values, expected {} like the first row", what, path,
                      lineno, row.size(), rows.front().size()));
    rows.push_back(std::move(row));
  }
  if (rows.empty())
    throw std::invalid_argument(fmt::format("{} file '{}' holds no numbers", what, path));
  Eigen::MatrixXd m(rows.size(), rows.front().size());
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < rows[i].size(); ++j) m(i, j) = rows[i][j];
  return m;
}

std::vector<double> parse_list(const std::string& s, const char* what) {
  std::vector<double> v;
  std::string tok;
  std::istringstream in(s);
  while (std::getline(in, tok, ',')) {
    const auto b = tok.find_first_not_of(" \t"), e = tok.find_last_not_of(" \t");
    if (b == std::string::npos) continue;
    tok = tok.substr(b, e - b + 1);
    if (tok == "-inf" || tok == "-Inf") {
      v.push_back(-std::numeric_limits<double>::infinity());
      continue;
    }
    try {
      std::size_t used = 0;
      v.push_back(std::stod(tok, &used));
      if (used != tok.size()) throw std::invalid_argument("trailing");
    } catch (const std::exception&) {
      throw std::invalid_argument(fmt::format("{}: '{}' is not a number", what, tok));
    }
    if (!std::isfinite(v.back()))
      throw std::invalid_argument(
          fmt::format("{}: '{}': expected a finite number or -inf (a masked logit)", what, tok));
  }
  return v;
}

struct SpreadCase {
  std::string label;
  double spread;
  std::string source;
};

std::string human(double x) {
  if (!std::isfinite(x)) return x > 0 ? "inf" : "-inf";
  if (x >= 1e15) return fmt::format("{:.4g}", x);
  if (x >= 100) return fmt::format("{:.1f}", x);
  return fmt::format("{:.6g}", x);
}

int run(const Options& o) {
  if (o.json != "-") {
    refuse_overlapping_paths({{"--weights-q", o.q_file},
                              {"--weights-k", o.k_file},
                              {"--query", o.query_file},
                              {"--items", o.items_file}},
                             {{"--json", o.json}});
    check_output(o.json, "--json");
  }
  if (!(o.temperature > 0) || !std::isfinite(o.temperature))
    throw std::invalid_argument(
        fmt::format("--temperature {} is not a finite number > 0", o.temperature));
  if (!(o.scale > 0) || !std::isfinite(o.scale))
    throw std::invalid_argument(fmt::format("--scale {} is not a finite number > 0", o.scale));
  std::vector<DType> types;
  for (const auto& s : o.dtypes) {
    auto t = parse_dtype(s);
    if (!t)
      throw std::invalid_argument(
          fmt::format("--dtype '{}': expected float32, bfloat16, float16 or float64", s));
    types.push_back(*t);
  }

  std::vector<SpreadCase> cases;
  const int given = (o.spread ? 1 : 0) + (!o.logits.empty() ? 1 : 0) + (!o.q_file.empty() ? 1 : 0) +
                    (!o.preset.empty() ? 1 : 0);
  if (given != 1)
    throw std::invalid_argument(
        "give exactly one of --spread, --logits, --weights-q (with --weights-k, --query, --items) "
        "or --preset");
  if (o.spread) {
    if (!(*o.spread >= 0) || !std::isfinite(*o.spread))
      throw std::invalid_argument(
          fmt::format("--spread {} is not a finite number >= 0", *o.spread));
    cases.push_back({"given", *o.spread, "--spread"});
  } else if (!o.logits.empty()) {
    const auto l = parse_list(o.logits, "--logits");
    double lo = INFINITY, hi = -INFINITY;
    for (double x : l)
      if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
    if (!(hi >= lo)) throw std::invalid_argument("--logits: no finite logit given");
    cases.push_back({"logits", hi - lo, fmt::format("max - min of {} logits", l.size())});
  } else if (!o.q_file.empty()) {
    if (o.k_file.empty() || o.query_file.empty() || o.items_file.empty())
      throw std::invalid_argument("--weights-q needs --weights-k, --query and --items too");
    const Eigen::MatrixXd Q = read_matrix(o.q_file, "--weights-q"),
                          K = read_matrix(o.k_file, "--weights-k");
    const Eigen::MatrixXd ym = read_matrix(o.query_file, "--query");
    const Eigen::MatrixXd items = read_matrix(o.items_file, "--items");  // one item per row
    Eigen::VectorXd y = Eigen::Map<const Eigen::VectorXd>(ym.data(), ym.size());
    const double bound = theory::spread_bound(Q, K, y, items.transpose(), o.scale);
    const Eigen::VectorXd l = theory::dot_product_logits(Q, K, y, items.transpose(), o.scale);
    cases.push_back(
        {"T3 bound", bound, "2 scale sigma_max(Q) sigma_max(K) ||y|| max||x|| (Proposition 3.1)"});
    cases.push_back(
        {"actual", l.maxCoeff() - l.minCoeff(), "spread of the logits these weights produce"});
  } else {
    // Spreads measured over all attention heads (docs/theory.md T2; values as reported
    // by secondary copies of the paper).
    if (o.preset == "gemma-2b") {
      cases = {{"Gemma 2B min", 2.28, "paper"},
               {"Gemma 2B mean", 5.69, "paper"},
               {"Gemma 2B max", 14.78, "paper"}};
    } else if (o.preset == "gemma-7b") {
      cases = {{"Gemma 7B min", 0.09, "paper"},
               {"Gemma 7B mean", 5.82, "paper"},
               {"Gemma 7B max", 32.74, "paper"}};
    } else {
      throw std::invalid_argument(
          fmt::format("--preset '{}': expected gemma-2b or gemma-7b", o.preset));
    }
  }

  std::vector<double> sizes = o.sizes;
  if (sizes.empty())
    for (double n = 16; n <= 16777216; n *= 16) sizes.push_back(n);
  for (double n : sizes)
    if (!(n >= 1) || n != std::floor(n) || n > 9007199254740992.0)
      throw std::invalid_argument(
          fmt::format("--n {}: expected an integer in [1, 2^53 = 9007199254740992]", n));

  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : cases) {
    const double t = c.spread / o.temperature;
    nlohmann::json jc = {{"label", c.label},
                         {"spread", c.spread},
                         {"source", c.source},
                         {"temperature", o.temperature}};
    if (o.json != "-") {
      fmt::print("\n{}: spread delta = {} ({}), temperature theta = {}, delta/theta = {}\n",
                 c.label, human(c.spread), c.source, o.temperature, human(t));
      fmt::print(
          "\n  n* = 1 + (1/eps - 1) e^(delta/theta): past it every coefficient is < eps (Theorem "
          "2.2)\n");
      fmt::print("  {:<10} {:>14} {:>16} {:>18}\n", "dtype", "eps", "n*", "first dispersed n");
    }
    for (DType ty : types) {
      const double eps = unit_roundoff(ty);
      const double ns = theory::critical_size(eps, c.spread, o.temperature);
      jc["critical_size"][name_of(ty)] = {
          {"eps", eps}, {"n_star", ns}, {"first_dispersed_n", theory::first_dispersed_size(ns)}};
      if (o.json != "-")
        fmt::print(
            "  {:<10} {:>14} {:>16} {:>18}\n", name_of(ty),
            fmt::format("2^{} = {:.3e}", -format_of(ty).precision, eps), human(ns),
            // An integer below 2^63 (first_dispersed_size): printed exactly, as a
            // shortened decimal can fall below n* once n* > 2^53.
            !std::isfinite(theory::first_dispersed_size(ns))
                ? std::string("> 2^63")
                : fmt::format("{}", static_cast<long long>(theory::first_dispersed_size(ns))));
    }
    if (o.json != "-") {
      fmt::print(
          "\n  Every coefficient p_k of n logits with this spread lies in [lower, upper] (Lemma "
          "2.1, tight)\n");
      fmt::print("  {:>10} {:>14} {:>14} {:>18}\n", "n", "lower", "upper", "paper: e^(d/t)/n");
    }
    for (double n : sizes) {
      const auto b = theory::dispersion_bounds(n, c.spread, o.temperature);
      const auto pb = theory::dispersion_bounds_paper(n, c.spread, o.temperature);
      jc["bounds"].push_back({{"n", n},
                              {"lower", b.lower},
                              {"upper", b.upper},
                              {"paper_lower", pb.lower},
                              {"paper_upper", pb.upper}});
      if (o.json != "-")
        fmt::print("  {:>10} {:>14.6e} {:>14.6e} {:>18.6e}\n", static_cast<long long>(n), b.lower,
                   b.upper, std::min(pb.upper, 1.0));
    }
    out.push_back(jc);
  }
  if (o.json == "-") {
    fmt::print("{}\n", out.dump(2));
  } else if (!o.json.empty()) {
    write_file_atomically(o.json, out.dump(2) + "\n");  // whole or not at all
  }
  return exit_pass;
}

}  // namespace

void add_bounds_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("bounds",
                                 "Dispersion bounds (Lemma 2.1) and the size n* past which every "
                                 "coefficient is below a type's precision (Theorem 2.2)");
  cmd->add_option("--spread", o->spread, "logit spread delta = max - min");
  cmd->add_option("--logits", o->logits,
                  "comma-separated logits (the spread is taken from them; -inf allowed)");
  cmd->add_option("--weights-q", o->q_file,
                  "query weight matrix Q (text, one row per line) for the T3 bound");
  cmd->add_option("--weights-k", o->k_file, "key weight matrix K");
  cmd->add_option("--query", o->query_file, "query vector y (text)");
  cmd->add_option("--items", o->items_file, "items x_i, one per line");
  cmd->add_option("--scale", o->scale, "logit scale for the T3 bound, e.g. 1/sqrt(d)")
      ->capture_default_str();
  cmd->add_option("--preset", o->preset, "measured spreads from the paper: gemma-2b or gemma-7b");
  cmd->add_option("--temperature,-t", o->temperature, "temperature theta > 0")
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtypes,
                  "data types whose unit roundoff is eps (float32, bfloat16, float16, float64)")
      ->capture_default_str();
  cmd->add_option("--n", o->sizes,
                  "sizes at which to print the bounds (default 16, 256, ..., 2^24)");
  cmd->add_option("--json", o->json,
                  "write the bounds as JSON to FILE; '-', as in every subcommand's --json: "
                  "print the JSON to stdout instead of the tables");
  cmd->callback([o] { exit_code() = run(*o); });
}

}  // namespace sa::cli
