// softmax-audit: proves, tests and measures softmax numerics.
#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli/commands.hpp"
#ifdef SA_CLI_HAVE_BUILTINS
#include "kernels/builtin.hpp"
#endif

namespace sa::cli {
int& exit_code() {
  static int code = exit_pass;
  return code;
}
}  // namespace sa::cli

namespace {

// Levenshtein distance: insertions, deletions and substitutions of one character.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The first word of the command line when it names no subcommand: a one-line
// error that suggests the nearest subcommand (at most 3 edits away, and fewer
// edits than the word has characters), else lists them all. Empty when the
// word is a subcommand, or there is none (CLI11 then explains).
std::string unknown_subcommand_error(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  const std::string word = argv[1];
  std::string best, all;
  std::size_t best_d = ~std::size_t(0);
  for (const CLI::App* sub : app.get_subcommands({})) {
    const std::string& name = sub->get_name();
    if (name == word) return "";
    all += (all.empty() ? "" : ", ") + name;
    const std::size_t d = edit_distance(word, name);
    if (d < best_d) best_d = d, best = name;
  }
  std::string msg = "unknown subcommand '" + word + "'";
  if (!best.empty() && best_d <= 3 && best_d < word.size()) msg += "; did you mean '" + best + "'?";
  return msg + " (expected one of: " + all + ")";
}

// OpenMP worker threads wait passively (issue 32). libgomp's default policy
// spins for about 300000 iterations before sleeping: a third of a `check`'s
// samples were such spin-waits, and on a shared machine the spinning threads
// take the cores from the kernel under test. libgomp reads OMP_WAIT_POLICY in
// its library constructor, before main() runs, so setting it here takes a
// fresh image of this program: the process re-executes itself once (same pid,
// arguments and descriptors) with OMP_WAIT_POLICY=passive. A user who set
// OMP_WAIT_POLICY or GOMP_SPINCOUNT keeps their choice; if the re-exec fails,
// the run goes on with the default policy.
void passive_openmp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0) return;
  execv("/proc/self/exe", argv);
}
}  // namespace

int main(int argc, char** argv) {
  passive_openmp_wait(argv);
  CLI::App app{
      "softmax-audit — proves, tests and measures softmax numerics.\n"
      "Checks softmax and attention kernels against high-precision references and the\n"
      "theorems of \"Softmax is not Enough (for Sharp Size Generalisation)\".\n"
      "Exit codes of check, sweep and audit: 0 every requested check ran and held; 1 a check\n"
      "failed; 2 usage, input or load error; 3 incomplete: nothing failed, but a requested\n"
      "check could not run (or nothing was checked). fuzz: 1 only when a variant fails a\n"
      "property it claims. report and bounds judge nothing: 0 once their output is written\n"
      "(a report listing failures included), 2 on bad input."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "softmax-audit " SA_VERSION);
  sa::cli::add_bounds_command(app);
#ifdef SA_CLI_HAVE_CHECK
  sa::cli::add_check_command(app);
  sa::cli::add_replay_command(app);
#endif
#ifdef SA_CLI_HAVE_REPORT
  sa::cli::add_report_command(app);
#endif
#ifdef SA_CLI_HAVE_FUZZ
  sa::cli::add_fuzz_command(app);
#endif
#ifdef SA_CLI_HAVE_SWEEP
  sa::cli::add_sweep_command(app);
#endif
#ifdef SA_CLI_HAVE_MERGE
  sa::cli::add_merge_command(app);
#endif
#ifdef SA_CLI_HAVE_AUDIT
  sa::cli::add_audit_command(app);
#endif
  sa::cli::add_completion_commands(app);
#ifdef SA_CLI_HAVE_BUILTINS
  // An instruction-set limit for the built-in kernels that would be ignored.
  if (const std::string e = sa::builtin_environment_error(); !e.empty()) {
    fmt::print(stderr, "softmax-audit: error: {}\n", e);
    return sa::cli::exit_usage;
  }
#endif
  if (const std::string e = unknown_subcommand_error(app, argc, argv); !e.empty()) {
    fmt::print(stderr, "softmax-audit: error: {}\n", e);
    return sa::cli::exit_usage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a subcommand's own exit code (fuzz: 1, 2 or 3)
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : sa::cli::exit_usage;
  } catch (const std::exception& e) {
    fmt::print(stderr, "softmax-audit: error: {}\n", e.what());
    return sa::cli::exit_usage;
  }
  // End here, without running static destructors: a kernel library loaded in
  // this process (sweep, fuzz) cannot change the exit code from its destructors.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(sa::cli::exit_code());
}
