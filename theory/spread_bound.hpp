// docs/theory.md T3 — Logit spread is bounded by weight norms (the paper's
// Proposition 3.1).
//
// Claim: for dot-product logits l_i = scale * (Q y)^T (K x_i) with query y,
// items x_i and weight matrices Q, K,
//
//     delta = max l - min l  <=  2 * scale * sigma_max(Q) * sigma_max(K) * ||y||_2 * max_i
//     ||x_i||_2
//
// Proof: |l_i - l_j| = scale |(Qy)^T K (x_i - x_j)| <= scale sigma_Q ||y|| sigma_K ||x_i - x_j||
// and ||x_i - x_j|| <= 2 max ||x||. Sharp attention therefore needs large weights.
//
// Layout: Q and K are (d_out x d_in); y is d_in; items are the columns of X
// (d_in x n). sigma_max comes from Eigen's JacobiSVD, accurate to a few ulp
// relative to sigma_max (one-sided Jacobi is backward stable).
#pragma once

#include <Eigen/Dense>
#include <Eigen/SVD>
#include <algorithm>
#include <stdexcept>

namespace sa::theory {

template <class Derived>
double largest_singular_value(const Eigen::MatrixBase<Derived>& A) {
  if (A.size() == 0) return 0.0;
  Eigen::JacobiSVD<Eigen::MatrixXd> svd(A.template cast<double>());
  return svd.singularValues()(0);
}

inline double spread_bound(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K,
                           const Eigen::VectorXd& y, const Eigen::MatrixXd& X, double scale = 1.0) {
  if (Q.cols() != y.size())
    throw std::invalid_argument("spread bound: Q has " + std::to_string(Q.cols()) +
                                " columns but the query has " + std::to_string(y.size()) +
                                " entries");
  if (K.cols() != X.rows())
    throw std::invalid_argument("spread bound: K has " + std::to_string(K.cols()) +
                                " columns but items have " + std::to_string(X.rows()) + " entries");
  if (Q.rows() != K.rows())
    throw std::invalid_argument("spread bound: Q and K must have the same number of rows");
  double max_item = 0.0;
  for (Eigen::Index j = 0; j < X.cols(); ++j) max_item = std::max(max_item, X.col(j).norm());
  return 2.0 * std::abs(scale) * largest_singular_value(Q) * largest_singular_value(K) * y.norm() *
         max_item;
}

// The logits l_i = scale (Qy)^T (K x_i), evaluated in double.
inline Eigen::VectorXd dot_product_logits(const Eigen::MatrixXd& Q, const Eigen::MatrixXd& K,
                                          const Eigen::VectorXd& y, const Eigen::MatrixXd& X,
                                          double scale = 1.0) {
  const Eigen::VectorXd qy = Q * y;
  return scale * (X.transpose() * (K.transpose() * qy));
}

}  // namespace sa::theory
