// Past 2^31 elements (bug class "large sizes": 32-bit index overflow, grid
// limits). Needs a GPU with ~10 GB free and ~32 GB of host memory (the
// sa::Kernel handle stages host float buffers); otherwise each test skips
// with the reason. Label "long" (excluded from the default run).
//
// The inputs are chosen so that the float32 arithmetic is exact and every
// output is known bit for bit: logits 0 (exp(0) = 1 exactly, every partial
// sum an integer multiple of the 8192-logit chunk below 2^37, so exact in
// float32) with -inf masks, so S is an exact integer and each weight is the
// correctly rounded 1/S (IEEE division) rounded again to bfloat16. Any index
// wrap, skipped chunk or mis-addressed row changes some output.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>

#include "core/bfloat16.hpp"
#include "kernels/cuda/cuda_kernel.hpp"
#include "kernels/kernel.hpp"

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::int64_t host_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  std::int64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

class CudaLong : public ::testing::Test {
 protected:
  void SetUp() override {
    if (sa::device_memory().alloc == nullptr)
      GTEST_SKIP() << "no CUDA device: " << sa::device_memory().why_unavailable();
    std::size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess || free_b < (std::size_t{10} << 30))
      GTEST_SKIP() << "needs 10 GiB of free device memory, has " << (free_b >> 20) << " MiB";
    if (host_available_bytes() < (std::int64_t{34} << 30))
      GTEST_SKIP() << "needs 34 GiB of available host memory, has "
                   << (host_available_bytes() >> 20) << " MiB";
  }
  const sa::Kernel k{sa::kernels::cuda_kernel(), "built-in"};
};

TEST_F(CudaLong, OneRowLongerThan2To31) {
  // n = 2^31 + 3 * 8192 + 67: the last 67 logits (a chunk tail past 2^31) are
  // masked, the rest 0, so S = 2^31 + 24576 exactly.
  const std::int64_t n = (std::int64_t{1} << 31) + 3 * 8192 + 67;
  sa::RowBatch b;
  b.rows = 1;
  b.n = b.stride = n;
  b.data.assign(static_cast<std::size_t>(n), 0.f);
  for (std::int64_t i = n - 67; i < n; ++i) b.data[static_cast<std::size_t>(i)] = -kInf;
  const double S = static_cast<double>(n - 67);
  const float want = sa::round_to_bf16(1.f / static_cast<float>(S));  // IEEE float division
  const auto w = k.softmax(sa::DType::bfloat16, b);
  std::int64_t bad = 0, first_bad = -1;
  for (std::int64_t i = 0; i < n; ++i) {
    const float e = i < n - 67 ? want : 0.f;
    if (w[static_cast<std::size_t>(i)] != e) {
      if (first_bad < 0) first_bad = i;
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0) << "first wrong weight at index " << first_bad << ": "
                    << (first_bad >= 0 ? w[static_cast<std::size_t>(first_bad)] : 0.f)
                    << ", expected " << want;
  // lse = log S (m = 0): logf is within 1 ulp (2u relative) of log of the exact S.
  const auto lse = k.logsumexp(sa::DType::bfloat16, b);
  EXPECT_LE(std::abs(lse[0] - std::log(S)), 2.0 * 0x1p-24 * std::log(S) * 1.01) << lse[0];
}

TEST_F(CudaLong, ManyRowsPast2To31Elements) {
  // 2^21 + 1 rows of 1024 (warp path, 2^31 + 1024 elements): row r has logit
  // r mod 1024 masked, so every weight is round_bf16(1/1023) except that one (0).
  const std::int64_t rows = (std::int64_t{1} << 21) + 1, n = 1024;
  sa::RowBatch b;
  b.rows = rows;
  b.n = b.stride = n;
  b.data.assign(static_cast<std::size_t>(rows * n), 0.f);
  for (std::int64_t r = 0; r < rows; ++r) b.data[static_cast<std::size_t>(r * n + r % n)] = -kInf;
  const float want = sa::round_to_bf16(1.f / 1023.f);
  const auto w = k.softmax(sa::DType::bfloat16, b);
  std::int64_t bad = 0, first_bad = -1;
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0; i < n; ++i) {
      const float e = i == r % n ? 0.f : want;
      if (w[static_cast<std::size_t>(r * n + i)] != e) {
        if (first_bad < 0) first_bad = r * n + i;
        ++bad;
      }
    }
  EXPECT_EQ(bad, 0) << "first wrong weight at flat index " << first_bad;
}

}  // namespace
