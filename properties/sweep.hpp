// Large-n sweeps: one row of n = 2^k logits per (dtype, distribution,
// temperature, k) through a kernel, measured against an exact-enough
// reference, written as a resumable table (CSV, and JSON at the end).
//
// What is measured per row (columns of SweepRow):
//  - softmax per-element error in ulps and the ulp-rule budget
//    (budgets.hpp), on SAMPLED items only: `samples` items drawn uniformly
//    (seeded) plus the arg-max and arg-min item. Their exact weights come
//    from MPFR (128 bits) as exp(z_j - L) with L the row's log-sum-exp below.
//  - the row's log-sum-exp L, exact H, sum of weights: over the WHOLE row in
//    double with Neumaier-compensated sums of exp(z - max) and
//    exp(z - max)(z - max) (all terms of one sign, so no cancellation):
//    relative error <= 2 u_double + n u_double^2 ~ 1e-15 for n <= 2^24,
//    eight orders below a float32 ulp: exact enough for every verdict here.
//  - the max-norm relative error over the sampled items (which include the
//    arg-max, i.e. ||p||inf) vs theory T7's bound (n + 4 + 2 delta) u.
//  - EVERY element (elements_checked = n): its error in ulps against the
//    ulp-rule budget, and the max-norm relative error against the
//    vectorised_2x rule (properties/baseline.hpp: 2x that of a float32
//    softmax summed in 8 lanes, + 4u), all with exact weights exp(z_j - m)/S
//    in double (relative error ~1e-14, far below any bound here).
//  - every element (checked_fraction = 1) against the correctly rounded
//    weight (reference/softmax_cr.hpp, every core): the largest distance in
//    ulps and the fraction exactly equal; fallback_fraction is the fraction
//    of elements that reference had to compute with MPFR.
//  - the kernel's largest weight vs T1's upper bound, T2's n* for the
//    dtype's unit roundoff (and whether n > n*: every weight must then be
//    below u), the kernel's entropy vs the exact H and log n (T4), and the
//    streamed-entropy error |H_kernel - H| vs n (T6).
//
// Resumability: the CSV is append-only; each row is one line written with a
// single write() and fsync()'d, and starts with a unique key. A restarted
// sweep truncates a partial last line (a kill mid-write), skips every key
// already present, and appends the rest: killed at any point, no row is lost
// or repeated.
//
// Shards (issue 34, docs/scale-out.md): with shard_count N > 1 a sweep runs
// only the rows whose case id (core/case_id.hpp: the kernel's identity,
// "sweep", dtype, {n}, distribution, temperature, level, seed, index 0) is
// shard_index mod N; its table is that shard's journal (its identity line
// ends "; shard=k/N"). `softmax-audit merge` unites the shards' tables into
// the table the unsharded sweep writes, byte for byte when timing is off.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "kernels/kernel.hpp"

namespace sa::props {

// Memory a sweep point of n elements takes, measured with /usr/bin/time -v
// (sweep --builtin cpu at n = 2^22: 122 MB resident with the whole-row
// ulp/vectorised_2x check and the correctly rounded check, i.e. 29 bytes per
// element; 32 is used). The CLI refuses sizes whose estimate exceeds the
// memory available, before any work.
inline constexpr double kSweepBytesPerElement = 32.0;
inline constexpr double kSweepBytesFixed = 32.0 * 1024 * 1024;

// Where a sweep stands, after each row: this run's rows (a resumed sweep
// counts only the rows it still has to measure) and their elements (a row's
// cost grows with n, so an estimate of the time left goes by elements).
struct SweepProgress {
  std::string key;
  int row = 0, rows = 0;  // rows measured by this run so far, and in all
  double elements_done = 0, elements_total = 0;
};

// The sizes other than powers of two that a default sweep adds (2^k - 1 and
// 2^k + 2^(k-1) + 1 at k = 5, 10, 15, those within [2^min_log2, 2^max_log2]):
// a kernel whose vector loop forgets the remainder (n not a multiple of its
// width) is right at every power of two. They add under 1% to the elements of
// a 2^4..2^24 sweep.
std::vector<std::int64_t> default_other_sizes(int min_log2, int max_log2);

struct SweepConfig {
  std::vector<int> log2_sizes;  // default 4..24
  // Sizes that are not powers of two (each in [1, 2^30]); none by default.
  // Their rows' key holds "|n<n>" where a power of two's holds "|k<log2 n>",
  // and their log2n column is floor(log2 n); the table format is unchanged.
  std::vector<std::int64_t> other_sizes;
  std::vector<std::string> distributions;  // default gaussian, uniform, spike, fa3_outliers
  int level = 1;                           // generator level (spread/scale), see generators.hpp
  std::vector<double> temperatures;        // default {1}
  std::vector<DType> dtypes;  // default float32, bfloat16, float16 (those the kernel supports)
  std::uint64_t seed = 1;
  int samples = 64;       // sampled items per row for per-element errors
  std::string csv_path;   // required: the resumable table
  std::string json_path;  // optional: written from the whole CSV at the end
  std::function<void(const std::string& key)> on_row;  // after a row is durably written
  // Which rows this run measures: those whose case id mod shard_count is
  // shard_index (all of them by default).
  std::uint64_t shard_index = 0, shard_count = 1;
  // The kernel's identity in case ids: a plugin's SHA-256; "builtin:<name>"
  // when empty.
  std::string kernel_identity;
  // false: the seconds column is written as 0, so that a table is the same
  // bytes on every run (the identity line then ends "; timing=off").
  bool timing = true;
  std::function<void(const SweepProgress&)> on_progress;  // likewise, with the totals
};

struct SweepRow {
  std::string key, kernel, dtype, distribution;
  double temperature = 1;
  int log2n = 0;
  std::int64_t n = 0;
  std::uint64_t seed = 0;
  double spread = 0;               // delta/theta of the row
  double max_ulp_sampled = 0;      // softmax, worst sampled item, in ulps
  double ulp_budget_at_worst = 0;  // its ulp-rule budget (ulps)
  double rel_err_sampled = 0;      // max |p^-p| / ||p||inf over sampled items
  double t7_bound = 0;
  double sum_minus_one = 0;  // sum of the kernel's weights - 1 (whole row)
  double pmax_kernel = 0, pmax_exact = 0, t1_upper = 0;
  double n_star = 0;  // T2 for the dtype's unit roundoff
  int dispersed = 0;  // n > n*
  double H_kernel = NAN, H_exact = 0, log_n = 0, H_err = NAN, H_budget = 0;
  double lse_kernel = NAN, lse_exact = 0, lse_err = NAN;
  double seconds = 0;  // kernel + measurement time of the row
  // Every element of the row (not sampled), against the double reference:
  std::int64_t elements_checked = 0;  // = n
  double max_ulp_all = 0;             // softmax, worst element (largest ulps / budget), in ulps
  double ulp_budget_all = 0;          // its ulp-rule budget (ulps)
  double rel_err_all = 0;             // max |p^-p| / ||p||inf over every element
  double baseline_rel_err = 0;        // the same for properties/baseline.hpp's vectorised softmax
  double vectorised_threshold = 0;    // the vectorised_2x rule's bound on rel_err_all
  // Every element of the row against its correctly rounded weight
  // (reference/softmax_cr.hpp): the fraction of elements checked (1), the
  // fraction the reference had to compute with MPFR, the largest distance
  // in ulps of the dtype (NaN against a number counts as INT64_MAX), and
  // the fraction of kernel weights equal to the correctly rounded one.
  double checked_fraction = 0, fallback_fraction = 0, max_ulps_from_cr = 0, cr_equal_fraction = 0;
};

// One row of a sweep's plan: its key (the table's first column), its case id
// and what it measures.
struct SweepCase {
  std::string key;
  std::uint64_t id = 0;
  DType dtype = DType::float32;
  std::string distribution;
  double temperature = 1;
  std::int64_t n = 0;
  std::string size;  // "|k<log2 n>" or "|n<n>"
};

// Every row of the sweep `config` describes (all shards), in the order the
// unsharded sweep writes them. Throws std::invalid_argument on a bad
// configuration.
std::vector<SweepCase> plan_sweep(const Kernel& kernel, const SweepConfig& config);

// The table's identity line (its first line) for `config`, with its shard
// suffix when shard_count > 1 (`with_shard` false: without it, as the merged
// table has it).
std::string sweep_identity_line(const Kernel& kernel, const SweepConfig& config,
                                bool with_shard = true);

// Runs (or resumes) the sweep; returns every row in the CSV afterwards.
// Throws std::invalid_argument on a bad configuration or an unreadable file.
std::vector<SweepRow> run_sweep(const Kernel& kernel, const SweepConfig& config);

// The CSV's header line and row (de)serialisation.
std::string sweep_csv_header();
std::vector<SweepRow> read_sweep_csv(const std::string& path);
// The table as written: its identity line, and each row with its line (no
// newline) exactly as in the file. A partial last line is left out.
struct SweepTable {
  std::string identity;
  std::vector<SweepRow> rows;
  std::vector<std::string> lines;
};
SweepTable read_sweep_table(const std::string& path);
std::string sweep_csv_line(const SweepRow& row);  // with its newline
void write_sweep_json(const std::vector<SweepRow>& rows, const std::string& path);
std::string sweep_rows_json_text(
    const std::vector<SweepRow>& rows);  // what write_sweep_json writes

// The fields of one line of a sweep table (RFC 4180 quoting, as the sweep
// writes them: a quoted field may hold commas, and "" for a quote).
std::vector<std::string> csv_fields(const std::string& line);

}  // namespace sa::props
