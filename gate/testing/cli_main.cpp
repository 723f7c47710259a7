// A stand-in softmax-audit main for the gate's own tests, built only when the
// real CLI (target softmax-audit, cli/main.cpp) is not part of the build. It
// keeps cli/main.cpp's contract: subcommands set exit_code(); CLI11's own
// parse errors are usage errors (2).
#include "cli/commands.hpp"

namespace sa::cli {
int& exit_code() {
  static int code = exit_pass;
  return code;
}
}  // namespace sa::cli

int main(int argc, char** argv) {
  CLI::App app{"softmax-audit (gate test driver)"};
  app.require_subcommand(1);
  sa::cli::add_check_command(app);
  sa::cli::add_report_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : sa::cli::exit_usage;
  }
  return sa::cli::exit_code();
}
