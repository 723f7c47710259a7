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

// A row with at least one finite logit, split at its first maximum m:
// S = 1 + rest with rest = sum over the other finite items of e^{z_i - m}, and
// T = sum of e^{z_i - m} (z_i - m) (the maximum adds 0). Functions of the row
// are formed from rest with log1p, so they keep full relative accuracy when
// rest is far below the working precision (logits (0, -185): rest = e^-185,
// which 1 + rest would lose even at 256 bits).
struct Split {
  Mp m;
  std::size_t top = 0;
  Mp rest = 0;
  Mp T = 0;
};

Split split_at_max(std::span<const Mp> z) {
  Split s;
  s.m = max_finite(z);
  while (!(z[s.top] == s.m)) ++s.top;
  for (std::size_t i = 0; i < z.size(); ++i) {
    if (i == s.top || isinf(z[i])) continue;
    const Mp d = z[i] - s.m;
    const Mp e = exp(d);
    s.rest += e;
    s.T += e * d;
  }
  return s;
}

// -p log(p + 1e-9) summed with the top item's term formed from rest:
// p_top = 1/(1 + rest), log(p_top + eps) = log1p(eps (1 + rest)) - log1p(rest).
Mp paper_entropy_split(std::span<const Mp> z, const Split& s, const Mp& eps) {
  const Mp S = Mp(1) + s.rest;
  Mp H = -(log1p(eps * S) - log1p(s.rest)) / S;
  for (std::size_t i = 0; i < z.size(); ++i) {
    if (i == s.top || isinf(z[i])) continue;
    const Mp p = exp(z[i] - s.m) / S;
    if (p > 0) H -= p * log(p + eps);
  }
  return H;
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
  // (z_i - m) - log1p(rest): the top item's log-weight -log1p(rest) keeps its
  // relative accuracy however small rest is.
  const Split sp = split_at_max(s.z);
  const Mp l1p = log1p(sp.rest);
  for (std::size_t i = 0; i < s.z.size(); ++i)
    if (!isinf(s.z[i])) out[i] = (s.z[i] - sp.m) - l1p;
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
  const Split sp = split_at_max(s.z);
  return sp.m + log1p(sp.rest);
}

namespace {
// Entropy of softmax(z) from the split row: Shannon H = log1p(rest) - T/(1 + rest)
// (both terms >= 0), the paper's form through paper_entropy_split.
Mp entropy_of_scaled(const Scaled& s, EntropyDefinition def) {
  switch (s.kind) {
    case RowKind::has_nan:
      return nan_mp();
    case RowKind::fully_masked:
      return Mp(0);
    case RowKind::has_pos_inf: {
      const std::vector<Mp> p = softmax_of(s.z);
      return def == EntropyDefinition::shannon ? shannon_entropy_of(p) : paper_entropy_of(p);
    }
    case RowKind::finite_or_masked:
      break;
  }
  const Split sp = split_at_max(s.z);
  if (def == EntropyDefinition::shannon) return log1p(sp.rest) - sp.T / (Mp(1) + sp.rest);
  return paper_entropy_split(s.z, sp, Mp(1) / Mp(1000000000));
}
}  // namespace

Mp entropy(std::span<const double> logits, double temperature, EntropyDefinition def) {
  check_row(logits, temperature, "entropy");
  return entropy_of_scaled(scale(logits, temperature), def);
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
  AdaptiveResult r;
  r.entropy = entropy_of_scaled(s, def);
  r.beta = theory::adaptive_beta(r.entropy);
  if (s.kind == RowKind::finite_or_masked) {
    for (auto& x : s.z)
      if (!isinf(x)) x *= r.beta;
  }
  r.weights = softmax_of(s.z);
  return r;
}

}  // namespace sa::ref
