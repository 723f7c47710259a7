// Fuzzes sweep resume (cli/sweep.cpp, properties/sweep.cpp): the bytes are an
// existing DIR/sweep.csv, and `softmax-audit sweep --out DIR` resumes it with
// the naive kernel at one small size, then rereads the table, writes rows.json
// and sweep.json. Any table must be resumed or refused with exit 2; never a
// crash, a sanitizer report or an exception escaping the command.
#include <CLI/CLI.hpp>
#include <algorithm>
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
  std::vector<std::string> args = {"sweep",   "--out",          dir,        "--builtin",
                                   "naive",   "--min-log2-n",   "3",        "--max-log2-n",
                                   "3",       "--distribution", "gaussian", "--dtype",
                                   "float32", "--samples",      "2"};
  std::reverse(args.begin(), args.end());  // CLI11's parse(vector) takes them last first
  sa::cli::exit_code() = -1;
  app.parse(args);
  const int rc = sa::cli::exit_code();
  if (rc != 0 && rc != 1 && rc != 2) __builtin_trap();
  return 0;
}
