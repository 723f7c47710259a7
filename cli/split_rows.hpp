// Rows larger than one machine (issue 34, item 5; docs/scale-out.md, "Rows
// larger than one machine"): `sweep --row-chunks C` cuts each row of the
// sweep into C chunks of consecutive items, spread over shards by the
// chunk's case id, in two phases with a merge after each:
//
//   phase 1  `sweep --row-chunks C --shard k/N --out P1/k`: each chunk's
//            reference state (m, S, T) in MPFR and the kernel's chunk lse and
//            entropy, journaled (P1/k/chunks.txt);
//   merge    `merge STATE P1/*`: the reference's states merged with T6 in
//            MPFR (properties/row_chunks.hpp), the kernel's chunk results with
//            its own merge_entropy_states op, the row's lse and entropy checked
//            against the merged reference; STATE/row-states.json;
//   phase 2  `sweep --row-chunks C --state STATE/row-states.json --shard k/N
//            --out P2/k`: every element of each chunk judged against the
//            row's global (m, S) (P2/k/elements.txt);
//   merge    `merge OUT P2/*`: OUT/split-rows.csv and OUT/row-states.json.
//
// Without --shard and --state, one process runs all four steps into --out
// and writes the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sa::cli {

struct SplitRowsOptions {
  std::string builtin, plugin, out, state;
  int kernel_index = -1;
  int min_log2 = 4, max_log2 = 24;
  std::int64_t chunks = 0;
  std::vector<std::string> distributions, dtypes;
  std::vector<double> temperatures;
  std::uint64_t seed = 1;
  std::string shard;
  std::uint64_t shard_count = 0;
  double max_memory_gib = 0;
};

// `sweep --row-chunks C ...`; returns the exit code.
int run_split_rows(const SplitRowsOptions& o);

// `merge OUT INPUT...` of the --out folders of `sweep --row-chunks` shards
// (phase 1: the row states; phase 2: the final table); returns the exit code.
int run_merge_split_rows(const std::string& out, const std::vector<std::string>& inputs);

// The `command` of such a shard's shard.json.
inline constexpr const char* kSplitRowsCommand = "sweep-row-chunks";

}  // namespace sa::cli
