// Stand-alone driver for the fuzz subcommand (the full CLI is cli/main.cpp).
#include <CLI/CLI.hpp>

#include "fuzz_command.hpp"

int main(int argc, char** argv) {
  CLI::App app{"softmax-audit (fuzz only)"};
  app.require_subcommand(1);
  sa::cli::add_fuzz_command(app);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
