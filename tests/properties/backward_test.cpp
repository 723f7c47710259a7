// The backward and determinism properties on the correct built-in kernels
// (naive and CPU): every verdict passes or is a named skip, and they check
// something. Also the references themselves: the MPFR row gradients against
// an independent MPFR directional derivative, and the attention backward
// reference against central differences of the forward reference.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <random>

#include "kernels/builtin.hpp"
#include "kernels/naive/naive_kernel.hpp"
#include "properties/suite.hpp"
#include "reference/attention.hpp"
#include "reference/backward.hpp"

namespace {

sa::props::SuiteConfig config() {
  sa::props::SuiteConfig c;
  c.properties = {"backward", "attention_backward", "determinism"};
  c.cases = 48;
  c.seed = 20261123;
  c.determinism_repeats = 20;
  return c;
}

void expect_clean(const sa::Kernel& k, int min_pass) {
  int pass = 0;
  for (const auto& v : sa::props::run_suite(k, config())) {
    const bool ok = v.outcome == sa::Outcome::pass || v.outcome == sa::Outcome::skip;
    EXPECT_TRUE(ok) << sa::describe(v);
    if (std::getenv("SA_SUITE_VERBOSE") || !ok) std::cout << sa::describe(v) << "\n";
    pass += v.outcome == sa::Outcome::pass;
  }
  EXPECT_GE(pass, min_pass) << k.name() << ": the run checked (almost) nothing";
}

TEST(BackwardSuite, NaiveKernelPasses) {
  expect_clean(sa::Kernel(sa::kernels::naive_kernel(), "built-in"), 30);
}

TEST(BackwardSuite, CpuKernelPasses) {
  for (const auto& k : sa::builtin_kernels())
    if (k.name() == "cpu") return expect_clean(k, 25);
  GTEST_SKIP() << "no built-in cpu kernel in this build";
}

// The row references against the independent MPFR directional derivative:
// <g(p), v> at the exact weights p equals it to ~2^-60 relative.
TEST(BackwardReference, RowGradientIsTheDirectionalDerivative) {
  std::mt19937_64 g(5);
  std::normal_distribution<double> n01(0.0, 2.0);
  for (bool log : {false, true})
    for (double theta : {1.0, 0.7}) {
      const int n = 37;
      std::vector<float> x(n), dy(n), y(n);
      std::vector<double> v(n);
      for (int i = 0; i < n; ++i)
        x[i] = static_cast<float>(n01(g)), dy[i] = static_cast<float>(n01(g)), v[i] = n01(g);
      long double m = -INFINITY, S = 0;
      for (float xi : x) m = std::max<long double>(m, xi / theta);
      for (float xi : x) S += std::exp(xi / theta - m);
      long double want_dot = 0, sdy = 0, cp = 0;
      std::vector<long double> p(n);
      for (int i = 0; i < n; ++i)
        p[i] = std::exp(x[i] / theta - m) / S, sdy += dy[i], cp += p[i] * dy[i];
      for (int i = 0; i < n; ++i)
        want_dot += v[i] * (log ? dy[i] - p[i] * sdy : p[i] * (dy[i] - cp)) / theta;
      const double dd = sa::ref::softmax_directional_derivative(x, dy, v, theta, log).value;
      EXPECT_NEAR(dd, static_cast<double>(want_dot), 1e-15 * (1 + std::abs(dd))) << log << theta;
      // And the reference at y = p (as exact as float allows) agrees with the formula.
      for (int i = 0; i < n; ++i)
        y[i] = static_cast<float>(log ? x[i] / theta - m - std::log(S) : p[i]);
      const auto r = log ? sa::ref::log_softmax_backward(sa::DType::float32, y, dy, theta)
                         : sa::ref::softmax_backward(sa::DType::float32, y, dy, theta);
      for (int i = 0; i < n; ++i)
        EXPECT_EQ(static_cast<float>(r.rounded[i]), static_cast<float>(r.exact[i]));
    }
}

// The attention backward reference against central differences of the
// forward reference's loss <dout, out>, for every feature.
TEST(BackwardReference, AttentionGradientMatchesFiniteDifferences) {
  for (int feature = 0; feature < 6; ++feature) {
    sa::AttentionCase c;
    c.batch = 2;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.seqlen_q = 5;
    c.seqlen_k = 7;
    c.d = 3;
    c.dv = 2;
    std::mt19937_64 g(11 + feature);
    std::normal_distribution<double> n01(0.0, 1.0);
    for (int i = 0; i < 2 * 5 * 4 * 3; ++i) c.q.push_back(static_cast<float>(n01(g)));
    for (int i = 0; i < 2 * 7 * 2 * 3; ++i) c.k.push_back(static_cast<float>(n01(g)));
    for (int i = 0; i < 2 * 7 * 2 * 2; ++i) c.v.push_back(static_cast<float>(n01(g)));
    c.scale = 0.6;
    if (feature == 1) c.causal = true;
    if (feature == 2) c.softcap = 2.0, c.window_left = 2;
    if (feature == 3)
      c.alibi_slopes = {0.5f, 0.25f, 0.125f, 0.0625f}, c.top_left = true, c.causal = true;
    if (feature == 4) c.sinks = {0.3f, -1.0f, 2.0f, 0.0f};
    if (feature == 5) c.key_padding_mask = {1, 0, 1, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0};
    std::vector<float> dout;
    for (int i = 0; i < 2 * 5 * 4 * 2; ++i) dout.push_back(static_cast<float>(n01(g)));
    const auto r = sa::ref::attention_backward(c, dout);
    auto loss = [&](const sa::AttentionCase& x) {
      const auto o = sa::ref::attention_v2(x);
      long double L = 0;
      for (std::size_t i = 0; i < o.out.size(); ++i) L += dout[i] * o.out[i];
      return L;
    };
    auto check = [&](std::vector<float> sa::AttentionCase::*field, const std::vector<double>& grad,
                     const char* what) {
      for (std::size_t e = 0; e < grad.size(); e += 3) {
        sa::AttentionCase a = c, b = c;
        const float x = (c.*field)[e];
        const float h = std::ldexp(1.0f, -10);
        (a.*field)[e] = x + h;
        (b.*field)[e] = x - h;
        const double fd = static_cast<double>((loss(a) - loss(b)) / (2.0L * h));
        EXPECT_NEAR(grad[e], fd, 2e-5 * (1 + std::abs(fd)))
            << what << "[" << e << "] feature " << feature;
      }
    };
    check(&sa::AttentionCase::q, r.dq, "dq");
    check(&sa::AttentionCase::k, r.dk, "dk");
    check(&sa::AttentionCase::v, r.dv, "dv");
    if (!c.sinks.empty()) {
      for (std::size_t h = 0; h < c.sinks.size(); ++h) {
        sa::AttentionCase a = c, b = c;
        const float hh = std::ldexp(1.0f, -10);
        a.sinks[h] += hh;
        b.sinks[h] -= hh;
        const double fd = static_cast<double>((loss(a) - loss(b)) / (2.0L * hh));
        EXPECT_NEAR(r.dsinks[h], fd, 2e-5 * (1 + std::abs(fd))) << "dsink " << h;
      }
    }
  }
}

}  // namespace
