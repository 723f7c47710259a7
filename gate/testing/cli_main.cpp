// A stand-in softmax-audit main for the gate's own tests, built only when the
// real CLI (target softmax-audit, cli/main.cpp) is not part of the build.
// It shows the exit-code contract main() must keep: CLI::RuntimeError carries
// the subcommand's code; every other CLI11 parse error is a usage error (2).
#include <iostream>

#include "cli/gate_commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"softmax-audit (gate test driver)"};
  app.require_subcommand(1);
  sa::cli::add_check_command(app);
  sa::cli::add_report_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    if (e.get_name() == "RuntimeError" || e.get_name() == "CallForHelp" ||
        e.get_name() == "CallForAllHelp" || e.get_name() == "CallForVersion")
      return code;
    return 2;
  }
  return 0;
}
