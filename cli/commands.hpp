// Subcommands of the softmax-audit CLI. Each lives in its own file and adds
// itself to the app; main.cpp only wires them together.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/seed.hpp"

namespace sa::cli {

// Exit codes shared by every subcommand: 0 all claims hold (and every requested
// check ran), 1 a claim failed, 2 usage, input or load error (the message names
// the input and what was expected), 3 incomplete: nothing failed, but a
// requested check could not run or nothing was checked at all.
constexpr int exit_pass = 0;
constexpr int exit_fail = 1;
constexpr int exit_usage = 2;
constexpr int exit_incomplete = 3;

void add_bounds_command(CLI::App& app);
void add_check_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_fuzz_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_audit_command(CLI::App& app);
void add_merge_command(CLI::App& app);   // needs sweep
void add_replay_command(CLI::App& app);  // cli/replay.cpp (with check)
// `completion bash|zsh` and `man`, from the app's own tables: add them last.
void add_completion_commands(CLI::App& app);
// `merge OUT FOLDER...` of a sharded audit (folders holding audit-shard.json,
// cli/audit.cpp): merges each step's shards and writes the report; returns
// the exit code. `is_audit_shard` tells such a folder.
bool is_audit_shard(const std::string& dir);
int run_merge_audit(const std::string& out, const std::vector<std::string>& inputs);

// Makes RapidCheck use `seed` too (RC_PARAMS gains seed=N unless it names one),
// so that RapidCheck's own "Using configuration: seed=..." line, when it prints
// one, names the seed the command prints. Call before any property runs.
inline void share_seed_with_rapidcheck(unsigned long long seed) {
  const char* old = std::getenv("RC_PARAMS");
  std::string params = old ? old : "";
  if (params.find("seed=") != std::string::npos) return;  // the user's own choice stands
  params += (params.empty() ? "" : " ") + std::string("seed=") + std::to_string(seed);
  setenv("RC_PARAMS", params.c_str(), 1);
}

// --seed for a subcommand: any seed the tool prints is accepted back exactly;
// anything else is a one-line usage error naming the value (exit 2).
// `out`: a std::uint64_t, or a std::optional<std::uint64_t> (set when given).
template <class Seed>
CLI::Option* add_seed_option(CLI::App* c, Seed* out, const std::string& help) {
  return c
      ->add_option_function<std::string>(
          "--seed",
          [out](const std::string& s) {
            unsigned long long v = 0;
            if (!parse_seed(s, v))
              throw CLI::ValidationError(
                  "--seed",
                  "'" + s + "': expected a decimal integer from 0 to " + std::to_string(~0ull));
            *out = static_cast<std::uint64_t>(v);
          },
          help)
      ->type_name("UINT64");
}

// Set by a subcommand's callback; main returns it.
int& exit_code();

}  // namespace sa::cli
