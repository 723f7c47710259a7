// Fuzzes sweep resume (cli/sweep.cpp, properties/sweep.cpp): the bytes are an
// existing DIR/sweep.csv, and `softmax-audit sweep --out DIR` resumes it with
// the naive kernel at one small size, then rereads the table, writes rows.json
// and sweep.json. Any table must be resumed or refused with exit 2; never a
// crash, a sanitizer report or an exception escaping the command.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "fuzz/fuzz_support.hpp"

namespace sa::cli {
int& exit_code() {
  static int code = 0;
  return code;
}
}  // namespace sa::cli

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string dir = sa::fuzz::scratch_dir();
  sa::fuzz::write_scratch("sweep.csv", std::string(reinterpret_cast<const char*>(data), size));
  CLI::App app("fuzz");
  sa::cli::add_sweep_command(app);
  std::vector<std::string> args = {
      "1",        "--samples",    "2", "--dtype",      "float32", "--distribution",
      "gaussian", "--max-log2-n", "3", "--min-log2-n", "3",       "--builtin",
      "naive",    "--out",        dir, "sweep"};  // CLI11 takes them in reverse order
  sa::cli::exit_code() = -1;
  app.parse(args);
  const int rc = sa::cli::exit_code();
  if (rc != 0 && rc != 1 && rc != 2) __builtin_trap();
  return 0;
}
