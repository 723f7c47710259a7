// T3 (Proposition 3.1): delta <= 2 scale sigma_max(Q) sigma_max(K) ||y|| max ||x_i||.
// The logits are evaluated exactly enough at high precision (MPFR) from the
// double matrices; the bound is evaluated in double with Eigen's JacobiSVD,
// whose sigma_max carries a relative error of a few hundred u at these sizes
// (backward stability of one-sided Jacobi, ~p(n) u) — hence a 1e-12 relative
// slack on the bound, not on the claim.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <random>

#include "reference/mpfr.hpp"
#include "theory/spread_bound.hpp"

using sa::ref::Mp;

namespace {
Mp exact_spread(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K, const Eigen::VectorXd& y,
                const Eigen::MatrixXd& X, double scale) {
  // l_i = scale * sum_a (Qy)_a (K x_i)_a, every product and sum at 256 bits.
  std::vector<Mp> qy(Q.rows(), Mp(0));
  for (int a = 0; a < Q.rows(); ++a)
    for (int b = 0; b < Q.cols(); ++b) qy[a] += Mp(Q(a, b)) * Mp(y(b));
  Mp lo, hi;
  for (int i = 0; i < X.cols(); ++i) {
    Mp l = 0;
    for (int a = 0; a < K.rows(); ++a) {
      Mp kx = 0;
      for (int b = 0; b < K.cols(); ++b) kx += Mp(K(a, b)) * Mp(X(b, i));
      l += qy[a] * kx;
    }
    l *= Mp(scale);
    if (i == 0 || l < lo) lo = l;
    if (i == 0 || l > hi) hi = l;
  }
  return hi - lo;
}
}  // namespace

RC_GTEST_PROP(SpreadBound, HoldsForRandomWeights, ()) {
  const int d_in = *rc::gen::inRange(1, 9), d_out = *rc::gen::inRange(1, 9);
  const int n = *rc::gen::inRange(2, 40);
  const unsigned seed = *rc::gen::arbitrary<unsigned>();
  const double weight_scale = *rc::gen::element(0.1, 1.0, 10.0);
  std::mt19937 rng(seed);
  std::normal_distribution<double> g(0.0, weight_scale);
  auto fill = [&](auto& m) {
    for (int i = 0; i < m.size(); ++i) m.data()[i] = g(rng);
  };
  Eigen::MatrixXd Q(d_out, d_in), K(d_out, d_in), X(d_in, n);
  Eigen::VectorXd y(d_in);
  fill(Q), fill(K), fill(X), fill(y);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d_out));
  const double bound = sa::theory::spread_bound(Q, K, y, X, scale);
  const Mp spread = exact_spread(Q, K, y, X, scale);
  RC_ASSERT(spread <= Mp(bound) * Mp(1 + 1e-12));
}

TEST(SpreadBound, TightInOneDimension) {
  // Scalars q, k, y and items {+a, -a}: spread = 2|q k y| a = the bound.
  Eigen::MatrixXd Q(1, 1), K(1, 1), X(1, 2);
  Eigen::VectorXd y(1);
  Q << 3.0;
  K << -2.0;
  y << 0.5;
  X << 4.0, -4.0;
  const double bound = sa::theory::spread_bound(Q, K, y, X);
  EXPECT_DOUBLE_EQ(bound, 24.0);
  EXPECT_EQ(exact_spread(Q, K, y, X, 1.0), Mp(24));
}

TEST(SpreadBound, RejectsMismatchedShapes) {
  Eigen::MatrixXd Q(2, 3), K(2, 3), X(4, 5);
  Eigen::VectorXd y(3);
  Q.setOnes(), K.setOnes(), X.setOnes(), y.setOnes();
  EXPECT_THROW(sa::theory::spread_bound(Q, K, y, X), std::invalid_argument);
}
