// What `sweep` and `merge` both write from a sweep's rows (cli/sweep.cpp):
// sweep.json (the report's series) and the verdict line with its exit code.
#pragma once

#include <string>
#include <vector>

#include "properties/sweep.hpp"

namespace sa::cli {

// DIR/sweep.json's text: format, version, kernel, the series and "rows_file".
std::string sweep_json_text(const std::vector<props::SweepRow>& rows, const std::string& kernel,
                            bool temperature_series_only);

// Prints the summary table and the verdict line ("N rows in CSV (...)"); returns
// exit_fail when a row is over its bound, else exit_pass.
int print_sweep_verdict(const std::vector<props::SweepRow>& rows, const std::string& csv_path,
                        const std::string& json_path);

// The shard file a sharded sweep writes beside its table (DIR/shard.json),
// read back by `merge`.
inline constexpr const char* kShardFile = "shard.json";

}  // namespace sa::cli
