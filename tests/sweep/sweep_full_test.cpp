// The full large-n sweep (n = 2^4 .. 2^24) of the naive kernel: every row
// within its bounds (sampled ulp budget, T7, T1, entropy budget, H <= log n).
// Label "sweep" (excluded from the default run). Writes sweep_naive.csv/json
// in the working directory (resumable: rerun continues a killed sweep).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <iostream>

#include "kernels/cpu/cpu_kernel.hpp"
#include "kernels/naive/naive_kernel.hpp"
#include "properties/sweep.hpp"

TEST(SweepFull, NaiveTo2Pow24) {
  const sa::Kernel k(sa::kernels::naive_kernel(), "built-in");
  sa::props::SweepConfig c;
  c.csv_path = "sweep_naive.csv";
  c.json_path = "sweep_naive.json";
  const auto rows = sa::props::run_sweep(k, c);
  EXPECT_EQ(rows.size(), 21u * 4u * 2u);
  std::printf("%-9s %-13s %3s %12s %10s %10s %12s %12s %9s %9s %12s\n", "dtype", "dist", "k",
              "max_ulp", "budget", "rel_err", "t7_bound", "sum-1", "H", "log n", "H_err");
  for (const auto& r : rows) {
    std::printf("%-9s %-13s %3d %12.4g %10.4g %10.3g %12.3g %12.3g %9.4f %9.4f %12.3g\n",
                r.dtype.c_str(), r.distribution.c_str(), r.log2n, r.max_ulp_sampled,
                r.ulp_budget_at_worst, r.rel_err_sampled, r.t7_bound, r.sum_minus_one, r.H_exact,
                r.log_n, r.H_err);
    EXPECT_LE(r.max_ulp_sampled, r.ulp_budget_at_worst) << r.key;
    EXPECT_LE(r.rel_err_sampled, r.t7_bound) << r.key;
    EXPECT_LE(r.pmax_exact, r.t1_upper * (1 + 1e-12)) << r.key;
    EXPECT_LE(r.H_exact, r.log_n + 1e-9) << r.key;
    EXPECT_LE(r.H_err, r.H_budget) << r.key;
  }
}

// The case: `sweep --builtin naive --min-log2-n 22 --max-log2-n 24
// --distribution uniform --dtype float32` must not report 0 rows over their
// bound. Every row is flagged by vectorised_2x (every element checked), while
// the production cpu kernel passes the same rows.
TEST(SweepFull, NaiveFlaggedAt2Pow22To24) {
  for (const sa_kernel* desc : {sa::kernels::naive_kernel(), sa::kernels::cpu_kernel()}) {
    const sa::Kernel k(desc, "built-in");
    sa::props::SweepConfig c;
    c.log2_sizes = {22, 23, 24};
    c.distributions = {"uniform"};
    c.dtypes = {sa::DType::float32};
    c.csv_path = "sweep_large_" + k.name() + ".csv";
    std::remove(c.csv_path.c_str());
    const auto rows = sa::props::run_sweep(k, c);
    ASSERT_EQ(rows.size(), 3u);
    for (const auto& r : rows) {
      std::printf("%s n=2^%d: E %.4g u, baseline %.4g u, threshold %.4g u, sum-1 %.3g\n",
                  k.name().c_str(), r.log2n, r.rel_err_all * 0x1p24, r.baseline_rel_err * 0x1p24,
                  r.vectorised_threshold * 0x1p24, r.sum_minus_one);
      EXPECT_EQ(r.elements_checked, r.n);
      if (k.name() == "naive")
        EXPECT_GT(r.rel_err_all, r.vectorised_threshold) << r.key;
      else
        EXPECT_LE(r.rel_err_all, r.vectorised_threshold) << r.key;
    }
  }
}
