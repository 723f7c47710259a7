// The row backward references' fast level (reference/row_backward_fast.hpp)
// against their MPFR path: the correctly rounded gradients bit for bit, the
// dual-number directional derivative within both error bounds of the MPFR
// central difference, and the fast level actually taken on the rows the
// suite draws.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reference/backward.hpp"
#include "reference/fast_arith.hpp"
#include "reference/row_backward_fast.hpp"

namespace {

using sa::DType;
constexpr float kInf = std::numeric_limits<float>::infinity();

bool same_bits(double a, double b) {
  return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b) ||
         (std::isnan(a) && std::isnan(b));
}

float in(DType t, double x) { return static_cast<float>(sa::ref::fast::round_double(t, x)); }

struct Row {
  std::vector<float> x, y, dy;  // logits, the forward's output (given), dy
  std::vector<double> v;        // a direction
  double theta = 1;
  std::string kind;
};

// The shapes of row the suite draws and the harder ones: masked items,
// one item, equal dy (softmax's D = dy_i - <y, dy> cancels), logits far
// below the maximum (exp cutoff), long rows, and wide temperatures.
Row make_row(DType t, bool log, int kind, std::mt19937_64& g) {
  std::normal_distribution<double> n01(0.0, 1.0);
  std::uniform_int_distribution<int> len(2, 40);
  Row r;
  const double thetas[] = {1.0, 0.5, 3.0, 0.7};
  r.theta = thetas[g() % 4];
  int n = len(g);
  if (kind == 2) n = 1;
  if (kind == 5) n = 1000;
  r.x.resize(n), r.y.resize(n), r.dy.resize(n), r.v.resize(n);
  for (int i = 0; i < n; ++i) {
    r.x[i] = in(t, 3 * n01(g));
    r.dy[i] = in(t, n01(g));
    r.v[i] = n01(g);
  }
  if (kind == 1)
    for (int i = 0; i < n; i += 3) r.x[i] = -kInf;
  if (kind == 1 && n > 1) r.x[1] = 2;  // a live item
  if (kind == 3)
    for (auto& d : r.dy) d = r.dy[0];
  if (kind == 4 && n > 1) r.x[0] = -300, r.x[1] = in(t, -150 * r.theta);
  double m = -INFINITY;
  for (float x : r.x)
    if (x != -kInf) m = std::max(m, x / r.theta);
  double S = 0;
  for (float x : r.x) S += x == -kInf ? 0.0 : std::exp(x / r.theta - m);
  for (int i = 0; i < n; ++i) {
    if (r.x[i] == -kInf) {
      r.y[i] = log ? -kInf : 0.0f;
      continue;
    }
    const double z = r.x[i] / r.theta - m;
    r.y[i] = in(t, log ? z - std::log(S) : std::exp(z) / S);
  }
  r.kind = "kind " + std::to_string(kind) + " n " + std::to_string(n) + " theta " +
           std::to_string(r.theta);
  return r;
}

TEST(RowBackwardCorrectlyRounded, FastPathIsTheMpfrPathBitForBit) {
  std::mt19937_64 g(20261127);
  for (DType t : {DType::float32, DType::bfloat16, DType::float16})
    for (bool log : {false, true}) {
      int rows = 0, fast = 0;
      for (int rep = 0; rep < 40; ++rep)
        for (int kind = 0; kind < 6; ++kind) {
          const Row r = make_row(t, log, kind, g);
          const auto a = log ? sa::ref::log_softmax_backward(t, r.y, r.dy, r.theta)
                             : sa::ref::softmax_backward(t, r.y, r.dy, r.theta);
          const auto b =
              log ? sa::ref::log_softmax_backward(t, r.y, r.dy, r.theta,
                                                  sa::ref::RefPath::mpfr_only)
                  : sa::ref::softmax_backward(t, r.y, r.dy, r.theta, sa::ref::RefPath::mpfr_only);
          for (std::size_t i = 0; i < r.y.size(); ++i) {
            ASSERT_TRUE(same_bits(a.rounded[i], b.rounded[i]))
                << sa::name_of(t) << (log ? " log" : "") << ", " << r.kind << ", dx[" << i
                << "]: fast " << a.rounded[i] << ", MPFR " << b.rounded[i];
            ASSERT_TRUE(same_bits(a.exact[i], b.exact[i]))
                << sa::name_of(t) << (log ? " log" : "") << ", " << r.kind << ", exact dx[" << i
                << "]: fast " << a.exact[i] << ", MPFR " << b.exact[i];
          }
          sa::ref::RowGradient probe;
          const bool took =
              log ? sa::ref::detail::log_softmax_backward_fast(t, r.y, r.dy, r.theta, probe)
                  : sa::ref::detail::softmax_backward_fast(t, r.y, r.dy, r.theta, probe);
          ++rows;
          fast += took ? 1 : 0;
        }
      // Every shape but the cancelling one is certified on the fast level
      // nearly always; a fast level that gave up would make MPFR pay again.
      EXPECT_GE(fast, rows * 4 / 5) << sa::name_of(t) << (log ? " log" : "");
    }
}

// Exact zeros and their signs, where the fast level decides them itself:
// softmax's y_i = +-0 (sign of y_i times that of dy_i - <y, dy>), and
// log-softmax's one-item row (dy - dy = +0).
TEST(RowBackwardCorrectlyRounded, ExactZerosHaveMpfrsSigns) {
  const std::vector<float> y = {0.0f, -0.0f, 0.75f, 0.25f}, dy = {1, -2, 0.5f, 3};
  for (double theta : {1.0, 0.5}) {
    const auto a = sa::ref::softmax_backward(DType::float32, y, dy, theta);
    const auto b =
        sa::ref::softmax_backward(DType::float32, y, dy, theta, sa::ref::RefPath::mpfr_only);
    for (std::size_t i = 0; i < y.size(); ++i) EXPECT_TRUE(same_bits(a.rounded[i], b.rounded[i]));
    sa::ref::RowGradient probe;
    EXPECT_TRUE(sa::ref::detail::softmax_backward_fast(DType::float32, y, dy, theta, probe));
  }
  for (float d : {1.5f, -3.0f}) {
    const std::vector<float> y1 = {0.0f}, dy1 = {d};
    sa::ref::RowGradient probe;
    ASSERT_TRUE(sa::ref::detail::log_softmax_backward_fast(DType::bfloat16, y1, dy1, 2.0, probe));
    const auto b =
        sa::ref::log_softmax_backward(DType::bfloat16, y1, dy1, 2.0, sa::ref::RefPath::mpfr_only);
    EXPECT_TRUE(same_bits(probe.rounded[0], b.rounded[0])) << probe.rounded[0];
    EXPECT_TRUE(same_bits(probe.rounded[0], 0.0));
  }
}

// The dual-number derivative and the MPFR central difference agree within
// the sum of their stated errors, and the stated error is far below the
// property's budgets (2^-24 of the terms): a derivative off by 2^-60 of its
// magnitude would be told apart.
TEST(RowBackwardCorrectlyRounded, DualNumberDerivativeIsTheCentralDifference) {
  std::mt19937_64 g(7);
  int fast = 0, rows = 0;
  for (bool log : {false, true})
    for (int rep = 0; rep < 25; ++rep)
      for (int kind = 0; kind < 6; ++kind) {
        if (kind == 5 && rep > 2) continue;  // 1000 items: the MPFR side is slow
        Row r = make_row(DType::float32, log, kind, g);
        for (std::size_t i = 0; i < r.x.size(); ++i)
          if (r.x[i] == -kInf) r.v[i] = 0;
        const auto a = sa::ref::softmax_directional_derivative(r.x, r.dy, r.v, r.theta, log);
        const auto b = sa::ref::softmax_directional_derivative(r.x, r.dy, r.v, r.theta, log,
                                                               sa::ref::RefPath::mpfr_only);
        double mag = 0;
        for (std::size_t i = 0; i < r.x.size(); ++i)
          mag += std::abs(double(r.dy[i])) * (std::abs(r.v[i]) + 1) / r.theta;
        EXPECT_LE(std::abs(a.value - b.value), a.error + b.error)
            << (log ? "log, " : "") << r.kind << ": dual " << a.value << " +- " << a.error
            << ", MPFR " << b.value << " +- " << b.error;
        EXPECT_LE(a.error, 0x1p-60 * mag + 0x1p-52 * std::abs(a.value)) << r.kind;
        sa::ref::DirectionalDerivative probe;
        fast += sa::ref::detail::directional_derivative_fast(r.x, r.dy, r.v, r.theta, log, probe);
        ++rows;
      }
  EXPECT_EQ(fast, rows);  // every row drawn here is in the fast level's range
}

// Outside its range the fast level declines and MPFR answers: +inf and NaN
// logits, a row with no live item.
TEST(RowBackwardCorrectlyRounded, FastLevelDeclinesWhatItCannotDo) {
  const std::vector<double> v = {1, -1, 0.5};
  const std::vector<float> dy = {1, 2, 3};
  sa::ref::DirectionalDerivative probe;
  for (const std::vector<float>& x :
       {std::vector<float>{1, kInf, 0}, std::vector<float>{1, std::nanf(""), 0},
        std::vector<float>{-kInf, -kInf, -kInf}})
    EXPECT_FALSE(sa::ref::detail::directional_derivative_fast(x, dy, v, 1.0, false, probe));
  sa::ref::RowGradient row;
  const std::vector<float> big = {200.0f, 0.0f, -1.0f};
  EXPECT_FALSE(sa::ref::detail::log_softmax_backward_fast(DType::float32, big, dy, 1.0, row));
  const auto a = sa::ref::log_softmax_backward(DType::float32, big, dy, 1.0);
  const auto b =
      sa::ref::log_softmax_backward(DType::float32, big, dy, 1.0, sa::ref::RefPath::mpfr_only);
  for (std::size_t i = 0; i < big.size(); ++i) EXPECT_TRUE(same_bits(a.rounded[i], b.rounded[i]));
}

}  // namespace
