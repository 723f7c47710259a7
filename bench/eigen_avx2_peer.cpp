// Eigen's softmax compiled for AVX2 + FMA only (no AVX-512), so that the
// kernel's AVX2 figures (SA_CPU_MAX_ISA=AVX2) have an AVX2 Eigen beside them
// on a machine whose -march=native would give Eigen AVX-512.
#include <Eigen/Core>
#include <cstdint>

namespace sa::bench {

void eigen_softmax_avx2(const float* x, float* y, std::int64_t n) {
  Eigen::Map<const Eigen::ArrayXf> X(x, n);
  Eigen::Map<Eigen::ArrayXf> Y(y, n);
  const float m = X.maxCoeff();
  Y = (X - m).exp();
  const float S = Y.sum();
  Y *= 1.0f / S;
}

}  // namespace sa::bench
