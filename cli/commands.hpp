// Subcommands of the softmax-audit CLI. Each lives in its own file and adds
// itself to the app; main.cpp only wires them together.
#pragma once

#include <CLI/CLI.hpp>

namespace sa::cli {

// Exit codes shared by every subcommand: 0 all claims hold, 1 a claim failed,
// 2 usage, input or load error (the message names the input and what was expected).
constexpr int exit_pass = 0;
constexpr int exit_fail = 1;
constexpr int exit_usage = 2;

void add_bounds_command(CLI::App& app);
void add_check_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_fuzz_command(CLI::App& app);
void add_sweep_command(CLI::App& app);
void add_audit_command(CLI::App& app);

// Set by a subcommand's callback; main returns it.
int& exit_code();

}  // namespace sa::cli
