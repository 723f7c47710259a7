#include "cli/gate_commands.hpp"
namespace sa::cli { void add_report_command(CLI::App&) {} }
