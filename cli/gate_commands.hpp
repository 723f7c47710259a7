// The gate's subcommands of the softmax-audit CLI (cli/check.cpp, cli/report.cpp).
//
// Exit codes: a subcommand ends by throwing CLI::RuntimeError(code), which
// CLI::App::exit() returns without printing: 0 all verdicts pass (skips
// allowed), 1 a property failed (or errored), 2 usage or load error (the
// message, naming the file and what was expected, is already on stderr).
// main() should map every other CLI::ParseError (CLI11's own usage errors) to 2.
#pragma once

#include <CLI/CLI.hpp>

namespace sa::cli {
void add_check_command(CLI::App& app);
void add_report_command(CLI::App& app);
}  // namespace sa::cli
