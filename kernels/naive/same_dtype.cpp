#include "kernels/naive/same_dtype.hpp"

#include <cmath>
#include <limits>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"

namespace sa::kernels::same_dtype {
namespace {

// Rounds a float32 result to the storage type (identity for float32).
struct R {
  DType t;
  float operator()(float x) const {
    return t == DType::bfloat16 ? round_to_bf16(x) : t == DType::float16 ? round_to_f16(x) : x;
  }
};

R rounder(DType t) { return R{t}; }

std::vector<float> scaled(R r, std::span<const float> row, double temperature) {
  std::vector<float> z(row.begin(), row.end());
  const float th = r(static_cast<float>(temperature));
  if (th != 1.0f)
    for (auto& x : z) x = r(x / th);
  return z;
}

float row_max(std::span<const float> z) {
  float m = -std::numeric_limits<float>::infinity();
  for (float x : z) m = x > m ? x : m;
  return m;
}

}  // namespace

std::vector<float> softmax(DType t, std::span<const float> row, double temperature) {
  const R r = rounder(t);
  std::vector<float> z = scaled(r, row, temperature);
  const float m = row_max(z);
  float S = 0.0f;
  for (auto& x : z) {
    x = r(std::exp(r(x - m)));
    S = r(S + x);
  }
  for (auto& x : z) x = r(x / S);
  return z;
}

std::vector<float> log_softmax(DType t, std::span<const float> row, double temperature) {
  const R r = rounder(t);
  std::vector<float> z = scaled(r, row, temperature);
  const float m = row_max(z);
  float S = 0.0f;
  for (float x : z) S = r(S + r(std::exp(r(x - m))));
  const float ls = r(std::log(S));
  for (auto& x : z) x = r(r(x - m) - ls);
  return z;
}

float logsumexp(DType t, std::span<const float> row, double temperature) {
  const R r = rounder(t);
  std::vector<float> z = scaled(r, row, temperature);
  const float m = row_max(z);
  float S = 0.0f;
  for (float x : z) S = r(S + r(std::exp(r(x - m))));
  return r(m + r(std::log(S)));
}

float entropy(DType t, std::span<const float> row, double temperature) {
  // Two-pass -sum p log p in the storage type, the textbook formula.
  const R r = rounder(t);
  const std::vector<float> p = softmax(t, row, temperature);
  float H = 0.0f;
  for (float x : p)
    if (x > 0.0f) H = r(H - r(x * r(std::log(x))));
  return H;
}

}  // namespace sa::kernels::same_dtype
