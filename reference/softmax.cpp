#include "reference/softmax.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "theory/adaptive_temperature.hpp"

namespace sa::ref {
namespace {

Mp nan_mp() { return Mp(std::numeric_limits<double>::quiet_NaN()); }
Mp inf_mp() { return Mp(std::numeric_limits<double>::infinity()); }

enum class RowKind { finite_or_masked, fully_masked, has_pos_inf, has_nan };

struct Scaled {
  std::vector<Mp> z;
  RowKind kind;
  std::size_t pos_inf = 0;
};

void check_row(std::span<const double> l, double temperature, const char* what) {
  precision_bits();
  if (l.empty())
    throw std::invalid_argument(std::string(what) +
                                ": the row has no logits (n = 0); expected n >= 1");
  if (!(temperature > 0.0) || !std::isfinite(temperature))
    throw std::invalid_argument(std::string(what) + ": temperature " + std::to_string(temperature) +
                                " is not a finite number > 0");
}

RowKind classify(std::span<const Mp> z, std::size_t* pos_inf) {
  bool any_live = false;
  std::size_t k = 0;
  for (const Mp& x : z) {
    if (isnan(x)) return RowKind::has_nan;
    if (isinf(x) && x > 0) ++k;
    if (!(isinf(x) && x < 0)) any_live = true;
  }
  if (pos_inf) *pos_inf = k;
  if (k > 0) return RowKind::has_pos_inf;
  return any_live ? RowKind::finite_or_masked : RowKind::fully_masked;
}

Scaled scale(std::span<const double> l, double temperature) {
  Scaled s;
  s.z.reserve(l.size());
  const Mp theta(temperature);
  for (double x : l) s.z.push_back(std::isfinite(x) ? Mp(x) / theta : Mp(x));
  s.kind = classify(s.z, &s.pos_inf);
  return s;
}

Mp max_finite(std::span<const Mp> z) {
  Mp m = -inf_mp();
  for (const Mp& x : z)
    if (x > m) m = x;
  return m;
}

}  // namespace

const char* name_of(EntropyDefinition d) {
  return d == EntropyDefinition::shannon ? "shannon" : "paper_eps";
}

std::vector<Mp> softmax_of(std::span<const Mp> z) {
  std::size_t k = 0;
  const RowKind kind = classify(z, &k);
  std::vector<Mp> p(z.size(), Mp(0));
  switch (kind) {
    case RowKind::has_nan:
      for (auto& x : p) x = nan_mp();
      return p;
    case RowKind::fully_masked:
      return p;
    case RowKind::has_pos_inf: {
      const Mp share = Mp(1) / Mp(static_cast<double>(k));
      for (std::size_t i = 0; i < z.size(); ++i)
        if (isinf(z[i]) && z[i] > 0) p[i] = share;
      return p;
    }
    case RowKind::finite_or_masked:
      break;
  }
  const Mp m = max_finite(z);
  Mp S = 0;
  for (std::size_t i = 0; i < z.size(); ++i) {
    if (isinf(z[i])) continue;  // -inf: weight 0
    p[i] = exp(z[i] - m);
    S += p[i];
  }
  for (auto& x : p) x /= S;
  return p;
}

Mp shannon_entropy_of(std::span<const Mp> w) {
  Mp H = 0;
  for (const Mp& p : w) {
    if (isnan(p)) return nan_mp();
    if (p > 0) H -= p * log(p);
  }
  return H;
}

Mp paper_entropy_of(std::span<const Mp> w) {
  const Mp eps = Mp(1) / Mp(1000000000);
  Mp H = 0;
  for (const Mp& p : w) {
    if (isnan(p)) return nan_mp();
    if (p > 0) H -= p * log(p + eps);
  }
  return H;
}

std::vector<Mp> softmax(std::span<const double> logits, double temperature) {
  check_row(logits, temperature, "softmax");
  return softmax_of(scale(logits, temperature).z);
}

std::vector<Mp> log_softmax(std::span<const double> logits, double temperature) {
  check_row(logits, temperature, "log_softmax");
  Scaled s = scale(logits, temperature);
  std::vector<Mp> out(s.z.size(), -inf_mp());
  switch (s.kind) {
    case RowKind::has_nan:
      for (auto& x : out) x = nan_mp();
      return out;
    case RowKind::fully_masked:
      return out;
    case RowKind::has_pos_inf: {
      const Mp share = -log(Mp(static_cast<double>(s.pos_inf)));
      for (std::size_t i = 0; i < s.z.size(); ++i)
        if (isinf(s.z[i]) && s.z[i] > 0) out[i] = share;
      return out;
    }
    case RowKind::finite_or_masked:
      break;
  }
  const Mp lse = log_sum_exp(logits, temperature);
  for (std::size_t i = 0; i < s.z.size(); ++i)
    if (!isinf(s.z[i])) out[i] = s.z[i] - lse;
  return out;
}

Mp log_sum_exp(std::span<const double> logits, double temperature) {
  check_row(logits, temperature, "log_sum_exp");
  Scaled s = scale(logits, temperature);
  switch (s.kind) {
    case RowKind::has_nan:
      return nan_mp();
    case RowKind::fully_masked:
      return -inf_mp();
    case RowKind::has_pos_inf:
      return inf_mp();
    case RowKind::finite_or_masked:
      break;
  }
  const Mp m = max_finite(s.z);
  Mp S = 0;
  for (const Mp& x : s.z)
    if (!isinf(x)) S += exp(x - m);
  return m + log(S);
}

Mp entropy(std::span<const double> logits, double temperature, EntropyDefinition def) {
  const std::vector<Mp> p = softmax(logits, temperature);
  return def == EntropyDefinition::shannon ? shannon_entropy_of(p) : paper_entropy_of(p);
}

theory::EntropyState<Mp> entropy_state(std::span<const double> logits, double temperature) {
  check_row(logits, temperature, "entropy_state");
  Scaled s = scale(logits, temperature);
  auto st = theory::entropy_identity<Mp>();
  for (const Mp& x : s.z) st = theory::entropy_push(st, x);
  return st;
}

Mp streamed_entropy(std::span<const double> logits, double temperature) {
  return theory::entropy_of(entropy_state(logits, temperature));
}

AdaptiveResult adaptive_softmax(std::span<const double> logits, double temperature,
                                EntropyDefinition def) {
  check_row(logits, temperature, "adaptive_softmax");
  Scaled s = scale(logits, temperature);
  const std::vector<Mp> p = softmax_of(s.z);
  AdaptiveResult r;
  r.entropy = def == EntropyDefinition::shannon ? shannon_entropy_of(p) : paper_entropy_of(p);
  r.beta = theory::adaptive_beta(r.entropy);
  if (s.kind == RowKind::finite_or_masked) {
    for (auto& x : s.z)
      if (!isinf(x)) x *= r.beta;
  }
  r.weights = softmax_of(s.z);
  return r;
}

}  // namespace sa::ref
