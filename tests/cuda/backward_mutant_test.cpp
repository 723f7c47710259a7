// The gate's attention_backward properties catch a bug in the CUDA kernel's
// own backward tile code, on the host SIMT emulator:
// sa_kernel_cuda_emu_bwd_mutant is kernels/cuda/backward.cu with its dQ
// pass's key-tile loop stopping before a partial last tile (`kt + Bc <= hi`
// for `kt < hi`, tests/cuda/CMakeLists.txt), so dq misses the tail keys of
// every row whose visible keys do not end on a 64-key boundary. The correct
// kernel passes the same run (cuda_emulation_backward_test: same seed).
#include <gtest/gtest.h>

#include <iostream>

#include "kernels/cuda/cuda_kernel.hpp"
#include "kernels/kernel.hpp"
#include "properties/suite.hpp"

namespace {

TEST(CudaEmulatedBackwardMutant, DroppedDqTailTileIsCaughtWithACounterexample) {
  const sa::Kernel k(sa::kernels::cuda_kernel(), "built-in");
  sa::props::SuiteConfig cfg;
  cfg.ops = {sa::Op::attention_backward};
  cfg.properties = {"attention_backward.rounding"};
  cfg.dtypes = {sa::DType::float32};
  cfg.cases = 48;
  cfg.seed = 20261123;
  const auto verdicts = sa::props::run_suite(k, cfg);
  ASSERT_EQ(verdicts.size(), 1u);
  const sa::Verdict& v = verdicts[0];
  std::cout << sa::describe(v) << "\n";
  EXPECT_EQ(v.outcome, sa::Outcome::fail);
  EXPECT_FALSE(v.counterexample.empty());
  EXPECT_NE(sa::describe(v).find("dq"), std::string::npos) << sa::describe(v);
}

}  // namespace
