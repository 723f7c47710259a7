// `softmax-audit fuzz`: property matrix of softmax variants (variants/fuzz.hpp).
#pragma once

namespace CLI {
class App;
}

namespace sa::cli {

// Adds the `fuzz` subcommand to app:
//   fuzz --variant NAME|all [--plugin lib.so]... [--json out.json] [--cases N] [--seed S] [--list]
// Exit status: 0 when it ran (failing cells are findings, not errors); 2 on bad input.
void add_fuzz_command(CLI::App& app);

}  // namespace sa::cli
