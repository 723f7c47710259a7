#include "reference/attention.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "reference/softmax.hpp"
#include "theory/adaptive_temperature.hpp"

namespace sa::ref {
namespace {
void expect_size(const char* field, std::size_t got, std::int64_t want, const char* shape) {
  if (static_cast<std::int64_t>(got) != want)
    throw std::invalid_argument(std::string("attention: ") + field + " has " + std::to_string(got) +
                                " values, expected " + shape + " = " + std::to_string(want));
}
}  // namespace

void validate(const AttentionProblem& p) {
  if (p.nq < 1 || p.nk < 1 || p.d < 1 || p.dv < 1)
    throw std::invalid_argument("attention: nq, nk, d and dv must all be >= 1 (got nq=" +
                                std::to_string(p.nq) + " nk=" + std::to_string(p.nk) +
                                " d=" + std::to_string(p.d) + " dv=" + std::to_string(p.dv) + ")");
  expect_size("q", p.q.size(), p.nq * p.d, "nq*d");
  expect_size("k", p.k.size(), p.nk * p.d, "nk*d");
  expect_size("v", p.v.size(), p.nk * p.dv, "nk*dv");
  if (!p.key_mask.empty()) expect_size("key_mask", p.key_mask.size(), p.nk, "nk");
  if (!std::isfinite(p.scale))
    throw std::invalid_argument("attention: scale " + std::to_string(p.scale) + " is not finite");
}

bool key_visible(const AttentionProblem& p, std::int64_t i, std::int64_t j) {
  if (!p.key_mask.empty() && p.key_mask[static_cast<std::size_t>(j)] == 0) return false;
  if (p.causal && j > i + (p.nk - p.nq)) return false;
  return true;
}

AttentionResult attention(const AttentionProblem& p) {
  precision_bits();
  validate(p);
  const Mp neg_inf(-std::numeric_limits<double>::infinity());
  const Mp scale(p.scale);
  AttentionResult r;
  r.out.assign(static_cast<std::size_t>(p.nq * p.dv), Mp(0));
  r.lse.resize(static_cast<std::size_t>(p.nq));
  r.entropy.resize(static_cast<std::size_t>(p.nq));
  r.beta.resize(static_cast<std::size_t>(p.nq));
  std::vector<Mp> s(static_cast<std::size_t>(p.nk));
  for (std::int64_t i = 0; i < p.nq; ++i) {
    for (std::int64_t j = 0; j < p.nk; ++j) {
      if (!key_visible(p, i, j)) {
        s[j] = neg_inf;
        continue;
      }
      Mp dot = 0;
      for (std::int64_t c = 0; c < p.d; ++c) dot += Mp(p.q[i * p.d + c]) * Mp(p.k[j * p.d + c]);
      s[j] = scale * dot;
    }
    const std::vector<Mp> p0 = softmax_of(s);
    const Mp H = shannon_entropy_of(p0);
    const Mp beta = p.adaptive ? theory::adaptive_beta(H) : Mp(1);
    std::vector<Mp> z = s;
    for (auto& x : z)
      if (!isinf(x)) x *= beta;
    const std::vector<Mp> w = softmax_of(z);
    // lse of the logits actually used (NaN row -> NaN; fully masked -> -inf; +inf logit -> +inf)
    Mp lse = neg_inf;
    if (isnan(H)) {
      lse = H;
    } else {
      Mp m = neg_inf;
      for (const auto& x : z)
        if (x > m) m = x;
      if (isinf(m)) {
        lse = m;
      } else {
        Mp S = 0;
        for (const auto& x : z)
          if (!isinf(x)) S += exp(x - m);
        lse = m + log(S);
      }
    }
    for (std::int64_t j = 0; j < p.nk; ++j) {
      if (w[j] == 0) continue;
      for (std::int64_t c = 0; c < p.dv; ++c) r.out[i * p.dv + c] += w[j] * Mp(p.v[j * p.dv + c]);
    }
    r.lse[i] = lse;
    r.entropy[i] = H;
    r.beta[i] = beta;
  }
  return r;
}

}  // namespace sa::ref
