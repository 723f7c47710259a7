// The attention reference: agrees with an independent double-precision
// evaluation, uses bottom-right causal alignment, and follows the documented
// fully-masked and adaptive semantics.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <random>

#include "reference/attention.hpp"
#include "theory/adaptive_temperature.hpp"

using sa::ref::Mp;

namespace {
sa::ref::AttentionProblem random_problem(std::int64_t nq, std::int64_t nk, std::int64_t d,
                                         std::int64_t dv, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  sa::ref::AttentionProblem p;
  p.nq = nq, p.nk = nk, p.d = d, p.dv = dv;
  for (auto* v : {&p.q, &p.k}) v->resize(static_cast<std::size_t>((v == &p.q ? nq : nk) * d));
  p.v.resize(static_cast<std::size_t>(nk * dv));
  for (auto* v : {&p.q, &p.k, &p.v})
    for (double& x : *v) x = g(rng);
  p.scale = 1.0 / std::sqrt(static_cast<double>(d));
  return p;
}

// Plain double evaluation for cross-checking (error ~ 1e-14 here).
std::vector<double> attention_double(const sa::ref::AttentionProblem& p) {
  std::vector<double> out(static_cast<std::size_t>(p.nq * p.dv), 0.0);
  for (std::int64_t i = 0; i < p.nq; ++i) {
    std::vector<double> s(static_cast<std::size_t>(p.nk), -INFINITY);
    double m = -INFINITY;
    for (std::int64_t j = 0; j < p.nk; ++j) {
      if (!sa::ref::key_visible(p, i, j)) continue;
      double dot = 0;
      for (std::int64_t c = 0; c < p.d; ++c) dot += p.q[i * p.d + c] * p.k[j * p.d + c];
      s[j] = p.scale * dot;
      m = std::max(m, s[j]);
    }
    if (m == -INFINITY) continue;
    double S = 0;
    for (double& x : s) S += (x = std::exp(x - m));
    for (std::int64_t j = 0; j < p.nk; ++j)
      for (std::int64_t c = 0; c < p.dv; ++c) out[i * p.dv + c] += s[j] / S * p.v[j * p.dv + c];
  }
  return out;
}
}  // namespace

RC_GTEST_PROP(ReferenceAttention, AgreesWithDoubleEvaluation, ()) {
  auto p =
      random_problem(*rc::gen::inRange(1, 12), *rc::gen::inRange(1, 20), *rc::gen::inRange(1, 9),
                     *rc::gen::inRange(1, 6), *rc::gen::arbitrary<unsigned>());
  p.causal = *rc::gen::arbitrary<bool>();
  const auto r = sa::ref::attention(p);
  const auto d = attention_double(p);
  for (std::size_t i = 0; i < d.size(); ++i)
    RC_ASSERT(std::abs(r.out[i].convert_to<double>() - d[i]) < 1e-12);
}

TEST(ReferenceAttention, CausalIsBottomRightAligned) {
  auto p = random_problem(2, 5, 3, 2, 7);
  p.causal = true;
  // nk - nq = 3: query 0 sees keys 0..3, query 1 sees all five.
  EXPECT_TRUE(sa::ref::key_visible(p, 0, 3));
  EXPECT_FALSE(sa::ref::key_visible(p, 0, 4));
  EXPECT_TRUE(sa::ref::key_visible(p, 1, 4));
  // With more queries than keys, early queries see nothing: fully masked rows.
  auto q = random_problem(4, 2, 3, 2, 8);
  q.causal = true;
  const auto r = sa::ref::attention(q);
  EXPECT_TRUE(isinf(r.lse[0]) && r.lse[0] < 0);
  EXPECT_EQ(r.out[0], 0);
  EXPECT_EQ(r.entropy[0], 0);
  EXPECT_EQ(r.beta[0], 1);
  EXPECT_FALSE(isinf(r.lse[3]));
}

TEST(ReferenceAttention, KeyMaskAndAdaptive) {
  auto p = random_problem(3, 8, 4, 4, 11);
  p.key_mask = {1, 0, 1, 1, 0, 1, 1, 1};
  p.adaptive = true;
  const auto r = sa::ref::attention(p);
  for (std::int64_t i = 0; i < p.nq; ++i) {
    EXPECT_EQ(r.beta[i], sa::theory::adaptive_beta(r.entropy[i]));
    EXPECT_GE(r.beta[i], 1);
  }
  // Masked keys carry no weight: changing their values changes nothing.
  auto p2 = p;
  for (std::int64_t c = 0; c < p.dv; ++c) p2.v[1 * p.dv + c] = 1e6;
  const auto r2 = sa::ref::attention(p2);
  for (std::size_t i = 0; i < r.out.size(); ++i) EXPECT_EQ(r.out[i], r2.out[i]);
}

TEST(ReferenceAttention, ValidatesShapes) {
  auto p = random_problem(2, 3, 4, 5, 1);
  p.k.pop_back();
  try {
    sa::ref::attention(p);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("k has"), std::string::npos) << e.what();
  }
}
