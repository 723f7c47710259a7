// The gate's attention_v2 properties catch a bug in the CUDA kernel's own
// tile code, on the host SIMT emulator: sa_kernel_cuda_emu_mutant is
// kernels/cuda/attention_v2.cu with its key-tile loop stopping before a
// partial last tile (`t0 + Bc <= hi` for `t0 < hi`, tests/cuda/CMakeLists.txt),
// so the tail keys of every row whose visible keys do not end on a 64- or
// 128-key boundary are dropped. The correct kernel passes the same run
// (cuda_emulation_v2_test's GateProperties: same seed, same float32 cases).
#include <gtest/gtest.h>

#include <iostream>

#include "kernels/cuda/cuda_kernel.hpp"
#include "kernels/kernel.hpp"
#include "properties/suite.hpp"

namespace {

TEST(CudaEmulatedV2Mutant, DroppedTailTileIsCaughtWithACounterexample) {
  const sa::Kernel k(sa::kernels::cuda_kernel(), "built-in");
  sa::props::SuiteConfig cfg;
  cfg.ops = {sa::Op::attention_v2};
  cfg.properties = {"attention_v2.rounding"};
  cfg.dtypes = {sa::DType::float32};
  cfg.cases = 48;
  cfg.seed = 20261123;
  const auto verdicts = sa::props::run_suite(k, cfg);
  ASSERT_EQ(verdicts.size(), 1u);
  const sa::Verdict& v = verdicts[0];
  std::cout << sa::describe(v) << "\n";
  EXPECT_EQ(v.outcome, sa::Outcome::fail);
  EXPECT_FALSE(v.counterexample.empty());
}

}  // namespace
