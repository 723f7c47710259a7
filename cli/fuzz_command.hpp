// `softmax-audit fuzz`: property matrix of softmax variants (variants/fuzz.hpp).
#pragma once

namespace CLI {
class App;
}

namespace sa::cli {

// Adds the `fuzz` subcommand to app:
//   fuzz --variant NAME|all [--plugin lib.so]... [--json out.json] [--cases N] [--seed S] [--list]
// Exit status: 0 when it ran and no variant failed a property it claims (other
// failing cells are findings about a formulation, not errors); 1 a variant failed
// a property it claims (variants/fuzz.hpp, claims()); 2 on bad input; 3 nothing
// was checked.
void add_fuzz_command(CLI::App& app);

}  // namespace sa::cli
