// Spot checks of the formulas against hand-derived values, and of the two
// 1.5-entmax algorithms (sort-based in MPFR, bisection in float64) against
// each other.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "reference/mpfr.hpp"
#include "variants/formulas.hpp"

namespace F = sa::variants::formulas;
using sa::ref::Mp;

namespace {

std::vector<double> run(void (*f)(std::span<const double>, std::span<double>),
                        std::vector<double> l) {
  std::vector<double> p(l.size());
  f(l, p);
  return p;
}

TEST(Formulas, SparsemaxHandValues) {
  // z = (1, 0.5, 0): support 2, tau = (1.5 - 1)/2 = 0.25 -> (0.75, 0.25, 0).
  const auto p = run(&F::sparsemax<double>, {1.0, 0.5, 0.0});
  EXPECT_DOUBLE_EQ(p[0], 0.75);
  EXPECT_DOUBLE_EQ(p[1], 0.25);
  EXPECT_DOUBLE_EQ(p[2], 0.0);
  // gap exactly 1: one-hot.
  const auto q = run(&F::sparsemax<double>, {2.0, 1.0, 1.0});
  EXPECT_EQ(q[0], 1.0);
  EXPECT_EQ(q[1], 0.0);
}

TEST(Formulas, StickBreakingHandValues) {
  // all logits 0: b = 1/2; w = (1/8, 1/4, 1/2) from far to near the query.
  const auto p = run(&F::stick_breaking<double>, {0.0, 0.0, 0.0});
  EXPECT_DOUBLE_EQ(p[0], 0.125);
  EXPECT_DOUBLE_EQ(p[1], 0.25);
  EXPECT_DOUBLE_EQ(p[2], 0.5);
}

TEST(Formulas, TopKTiesSplitEvenly) {
  std::vector<double> l = {3, 1, 1, 1, 0}, p(5);
  F::topk_softmax<double>(l, p, 2);  // 3 is in; one slot among three tied 1s
  const double e = std::exp(-2.0) / 3.0, s = 1.0 + 3 * e;
  EXPECT_NEAR(p[0], 1.0 / s, 1e-15);
  EXPECT_NEAR(p[1], e / s, 1e-15);
  EXPECT_EQ(p[4], 0.0);
}

TEST(Formulas, SsmaxSingleLiveItemAndInfinities) {
  std::vector<double> l = {-INFINITY, INFINITY}, p(2);
  F::ssmax<double>(l, p, 0.5);  // n = 1 live item: log 1 = 0 must not give 0 * inf
  EXPECT_EQ(p[0], 0.0);
  EXPECT_EQ(p[1], 1.0);
}

TEST(Formulas, EntmaxSortAndBisectionAgree) {
  sa::ref::precision_bits();
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-6, 6);
  for (int t = 0; t < 200; ++t) {
    const int n = 1 + static_cast<int>(rng() % 20);
    std::vector<double> l(n), p(n);
    for (auto& x : l) x = u(rng);
    F::entmax15<double>(l, p, false);
    std::vector<Mp> z(l.begin(), l.end()), q(n);
    F::entmax15<Mp>(z, q, true);
    Mp s(0);
    for (const auto& x : q) s += x;
    // The closed form's support rule is right iff its weights sum to 1 and agree with bisection.
    EXPECT_LT(abs(s - 1).convert_to<double>(), 1e-60);
    for (int i = 0; i < n; ++i)
      EXPECT_NEAR(p[i], q[i].convert_to<double>(), 1e-13) << t << " " << i;
  }
}

}  // namespace

// The Forgetting Transformer's float32 hazard (issue 36): Lambda = cumsum log f
// as a running float32 sum loses the increments' low bits once |Lambda| is
// large (at |Lambda| ~ 2^16 the ulp is 2^-7 and log(15/16) = -0.0645 rounds to
// a multiple of it), so the decay the last items see is wrong at long length,
// while short rows are accurate. With all logits 0 the exact top weight is
// (1 - 15/16) / (1 - (15/16)^n) -> 1/16.
namespace {
double fox_top_error(std::size_t n) {
  std::vector<float> l32(n, 0.0f), p32(n);
  F::fox<float>(l32, p32, std::log(15.0f / 16.0f), true);
  std::vector<double> l64(n, 0.0), p64(n);
  F::fox<double>(l64, p64, std::log(15.0 / 16.0), false);
  std::printf("FoX n = %zu: float32 cumsum top weight %.7f, exact %.7f\n", n, p32[n - 1],
              p64[n - 1]);
  return std::abs(static_cast<double>(p32[n - 1]) - p64[n - 1]);
}
}  // namespace

TEST(Formulas, FoxFloat32CumsumDriftsAtLongLengthOnly) {
  EXPECT_LT(fox_top_error(1u << 10), 1e-5);
  // The finding: at 2^20 the top weight is off by more than 1% of its 1/16.
  EXPECT_GT(fox_top_error(1u << 20), 0.01 / 16.0);
}
