#include "properties/baseline.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "properties/budgets.hpp"

namespace sa::props::baseline {

std::vector<float> vectorised_softmax(DType t, std::span<const float> row, double theta,
                                      int lanes) {
  const std::size_t n = row.size();
  std::vector<float> e(n);
  const float th = static_cast<float>(theta);
  float m = -std::numeric_limits<float>::infinity();
  for (std::size_t j = 0; j < n; ++j) {
    e[j] = th == 1.0f ? row[j] : row[j] / th;
    m = std::max(m, e[j]);
  }
  if (m == -std::numeric_limits<float>::infinity()) return std::vector<float>(n, 0.0f);
  std::vector<float> lane(static_cast<std::size_t>(std::max(lanes, 1)), 0.0f);
  const std::size_t L = lane.size();
  for (std::size_t j = 0; j < n; ++j) {
    const float dj = e[j] - m;  // -inf for a mask: exp gives exactly 0
    e[j] = static_cast<float>(std::exp(static_cast<double>(dj)));
    lane[j % L] += e[j];
  }
  for (std::size_t w = L / 2; w >= 1; w /= 2)
    for (std::size_t k = 0; k < w; ++k) lane[k] += lane[k + w];
  const float S = lane[0];
  for (float& x : e) {
    x /= S;
    if (t == DType::bfloat16) x = round_to_bf16(x);
    if (t == DType::float16) x = round_to_f16(x);
  }
  return e;
}

double max_norm_rel_error(std::span<const float> q, std::span<const double> p) {
  double num = 0, den = 0;
  for (std::size_t j = 0; j < p.size(); ++j) {
    const double err = std::abs(static_cast<double>(q[j]) - p[j]);
    if (std::isnan(err)) return NAN;
    num = std::max(num, err);
    den = std::max(den, std::abs(p[j]));
  }
  return den > 0 ? num / den : 0.0;
}

double baseline_error(DType t, std::span<const float> row, double theta,
                      std::span<const double> p) {
  double e = 0;
  for (int lanes : kLaneCounts)
    e = std::max(e, max_norm_rel_error(vectorised_softmax(t, row, theta, lanes), p));
  std::size_t live = 0;
  for (float x : row) live += x != -std::numeric_limits<float>::infinity();
  if (live < kSequentialBelow)
    e = std::max(e, max_norm_rel_error(vectorised_softmax(t, row, theta, 1), p));
  return e;
}

double vectorised_threshold(DType t, double baseline_error, double live, double max_weight) {
  return kFactor * baseline_error + (kSlack + kLambda * std::sqrt(std::max(live, 0.0))) * 0x1p-24 +
         budget::storage_rel(t, max_weight);
}

}  // namespace sa::props::baseline
