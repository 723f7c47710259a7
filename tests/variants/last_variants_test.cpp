// The last parts of issue 36, table-driven: the underflow-safe LASER kernel on
// rows far outside the fuzzer's drawn domain (|l| <= 13), the normalised
// SA-Softmax of the paper's abstract against hand-computed weights, and the
// built-in two-row streams (variant.h ABI 4). Each check has a planted bug
// here that it catches: LASER's first stable form m_v + log(T/S) (T
// underflows), as a kernel and as a stream, a normalised SA-Softmax that
// forgets the clamp at 0, and (in
// two_row_test.cpp) a plugin whose second state's merge does not rescale.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <functional>
#include <iostream>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "variants/fuzz.hpp"

namespace sa::variants {
namespace {

constexpr double kU = 0x1p-24;

const Variant& builtin(const std::string& name) {
  const Variant* v = registry().find(name);
  if (!v) throw std::runtime_error("no built-in " + name);
  return *v;
}

using Kernel2 =
    std::function<void(std::span<const float>, std::span<const float>, std::span<float>)>;

// |kernel - MPFR reference| / u against the variant's own bound; returns the error in u.
struct Measured {
  double err_u, bound_u;
};
Measured laser_error(const Kernel2& k, const std::vector<double>& l, const std::vector<double>& v) {
  const Variant& laser = builtin("laser");
  const std::vector<float> lf(l.begin(), l.end()), vf(v.begin(), v.end());
  std::vector<float> o(1);
  k(lf, vf, o);
  const auto ref = laser.reference_2(l, v);
  const double err = std::isfinite(o[0])
                         ? std::abs((ref::Mp(double(o[0])) - ref[0]).convert_to<double>()) / kU
                         : std::numeric_limits<double>::infinity();
  return {err, laser.f32_bound_2(l, v)};
}

// The planted bug: the stable form issue 36 first stated, o = m_v + log(T / S) with
// T = sum e^{l_j - m} e^{v_j - m_v} (underflows once spread_l + spread_v > 87).
void laser_mv_form(std::span<const float> l, std::span<const float> v, std::span<float> o) {
  float m = -INFINITY, mv = -INFINITY;
  for (std::size_t j = 0; j < l.size(); ++j) {
    m = std::max(m, l[j]);
    mv = std::max(mv, v[j]);
  }
  float S = 0, T = 0;
  for (std::size_t j = 0; j < l.size(); ++j) {
    const float e = std::exp(l[j] - m);
    S += e;
    T += e * std::exp(v[j] - mv);
  }
  o[0] = mv + std::log(T / S);
}

struct LaserRow {
  std::vector<double> l, v;
  bool mv_form_fails;  // does the first stable form leave the bound on this row?
};

// Rows whose every term e^{l_j - m} e^{v_j - m_v} of the first form is below
// e^-87 (float32's smallest normal) fail it; the first is issue 36's example.
const std::vector<LaserRow> kLaserRows = {
    {{0, -100}, {-100, 0}, true},
    {{0, -100, -50}, {-100, 0, -60}, true},  // terms e^-100, e^-100, e^-110
    {{0, -200}, {-200, 0}, true},            // T = 0 in float32: o = -inf
    {{-3, -120, 2}, {-110, 5, -100}, true},  // terms e^-120, e^-122, e^-105
    {{0, -40}, {-40, 0}, false},             // terms e^-40: normal
    {{0, -60}, {-40, 0}, false},             // a term e^-40 keeps T normal
    {{1, 2, 3}, {3, 2, 1}, false},
    {{5, -5, 0.5, 0}, {0, 0, 0, 0}, false},
    {{0}, {-50}, false},
};

TEST(LastVariants, LaserKernelStaysWithinItsBoundWhereTheFirstStableFormUnderflows) {
  const Variant& laser = builtin("laser");
  for (const auto& row : kLaserRows) {
    const Measured safe = laser_error(laser.kernel32_2, row.l, row.v);
    EXPECT_LE(safe.err_u, safe.bound_u) << "l[1] = " << row.l.back();
    const Measured old = laser_error(laser_mv_form, row.l, row.v);
    EXPECT_EQ(old.err_u > old.bound_u, row.mv_form_fails)
        << "first stable form: " << old.err_u << " u against " << old.bound_u << " u";
    std::cout << "laser row " << row.l.size() << " items, l0 = " << row.l[0]
              << ", l1 = " << (row.l.size() > 1 ? row.l[1] : 0.0) << ": safe " << safe.err_u
              << " u, m_v form " << old.err_u << " u, bound " << safe.bound_u << " u\n";
  }
  // Issue 36's example: the m_v form's 2.8e5 u; the bound of the safe form.
  const Measured old = laser_error(laser_mv_form, {0, -100}, {-100, 0});
  EXPECT_GT(old.err_u, 1e5);
}

// The same rows streamed in two chunks (the first key | the rest) through the
// built-in LASER stream ((m, S) over l, (M, T) over l + v), against its stream
// bound of the MPFR reference. The planted bug: a stream of the first form, state
// (m, S, m_v, T) with T = sum e^{l_j - m} e^{v_j - m_v}, finished as m_v + log(T/S).
struct MvState {
  float m, S, mv, T;
};
Stream laser_mv_stream() {
  return typed_stream2<MvState>(
      StreamKind::bounded,
      [] {
        return MvState{-INFINITY, 0.0f, -INFINITY, 0.0f};
      },
      [](MvState& s, std::span<const float> c, std::span<const float> c2, std::size_t,
         std::size_t) {
        for (std::size_t k = 0; k < c.size(); ++k) {  // rows here are finite and unmasked
          const float m = std::max(s.m, c[k]), mv = std::max(s.mv, c2[k]);
          const float r = s.m == -INFINITY ? 0.0f : std::exp(s.m - m);
          const float rv = s.mv == -INFINITY ? 0.0f : std::exp(s.mv - mv);
          s.S = s.S * r + std::exp(c[k] - m);
          s.T = s.T * r * rv + std::exp(c[k] - m) * std::exp(c2[k] - mv);
          s.m = m;
          s.mv = mv;
        }
      },
      [](MvState& a, const MvState& b) {
        if (b.m == -INFINITY) return;
        if (a.m == -INFINITY) {
          a = b;
          return;
        }
        const float m = std::max(a.m, b.m), mv = std::max(a.mv, b.mv);
        const float ra = std::exp(a.m - m), rb = std::exp(b.m - m);
        a.S = a.S * ra + b.S * rb;
        a.T = a.T * ra * std::exp(a.mv - mv) + b.T * rb * std::exp(b.mv - mv);
        a.m = m;
        a.mv = mv;
      },
      [](const MvState& s, std::span<const float>, std::span<const float>, std::span<float> o) {
        o[0] = s.mv + std::log(s.T / s.S);
      });
}

double streamed_error(const Stream& st, const std::vector<double>& l,
                      const std::vector<double>& v) {
  const std::vector<float> lf(l.begin(), l.end()), vf(v.begin(), v.end());
  std::vector<std::max_align_t> a(8), b(8);  // 128 bytes each, aligned
  st.init(a.data());
  st.init(b.data());
  st.push2(a.data(), std::span<const float>(lf).first(1), std::span<const float>(vf).first(1), 0,
           lf.size());
  st.push2(b.data(), std::span<const float>(lf).subspan(1), std::span<const float>(vf).subspan(1),
           1, lf.size());
  st.merge(a.data(), b.data());
  std::vector<float> o(1);
  st.finish2(a.data(), lf, vf, o);
  const auto ref = builtin("laser").reference_2(l, v);
  return std::isfinite(o[0]) ? std::abs((ref::Mp(double(o[0])) - ref[0]).convert_to<double>()) / kU
                             : std::numeric_limits<double>::infinity();
}

TEST(LastVariants, LaserStreamStaysWithinItsBoundWhereTheFirstFormUnderflows) {
  const Variant& laser = builtin("laser");
  ASSERT_LE(laser.stream.state_bytes, 8 * sizeof(std::max_align_t));
  const Stream bug = laser_mv_stream();
  for (const auto& row : kLaserRows) {
    if (row.l.size() < 2) continue;
    const double B = laser.stream.bound2(row.l, row.v, 2);
    const double safe = streamed_error(laser.stream, row.l, row.v);
    EXPECT_LE(safe, B) << "l[1] = " << row.l[1];
    const double old = streamed_error(bug, row.l, row.v);
    EXPECT_EQ(old > B, row.mv_form_fails) << "first form streamed: " << old << " u against " << B;
    std::cout << "laser streamed, l1 = " << row.l[1] << ": safe " << safe << " u, m_v form " << old
              << " u, bound " << B << " u\n";
  }
}

// The normalised SA-Softmax of the abstract, w_i = (l_i - a)/(b - a) softmax(l)_i,
// a = min(min l, 0), b = max(0, max l), by hand.
struct NormRow {
  std::vector<double> l;
  std::vector<double> w;
};
double sm(const std::vector<double>& l, std::size_t i) {
  double s = 0;
  for (double x : l) s += std::exp(x);
  return std::exp(l[i]) / s;
}
std::vector<NormRow> norm_rows() {
  const std::vector<double> r1 = {-1, 1}, r2 = {-2, -1}, r3 = {1, 2}, r4 = {-1, 0, 3};
  return {
      {{0}, {0}},  // b - a = 0: the project's choice
      {{0, 0, 0}, {0, 0, 0}},
      {{2}, {1}},   // a = 0, b = 2: factor 1
      {{-2}, {0}},  // a = -2, b = 0: factor 0
      {r1, {0, sm(r1, 1)}},
      {r2, {0, 0.5 * sm(r2, 1)}},
      {r3, {0.5 * sm(r3, 0), sm(r3, 1)}},  // the clamp at 0: a = 0, not min l = 1
      {r4, {0, 0.25 * sm(r4, 1), sm(r4, 2)}},
      {{-INFINITY, 1, 2}, {0, 0.5 * sm({1, 2}, 0), sm({1, 2}, 1)}},  // a mask is absent
      {{INFINITY, 1, INFINITY}, {0.5, 0, 0.5}},
  };
}

// The planted bug: the factor (l_i - min l)/(max l - min l), without the clamps at 0.
void norm_without_clamp(std::span<const float> l, std::span<float> w) {
  float lo = INFINITY, hi = -INFINITY, s = 0;
  for (float x : l) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  for (float x : l) s += std::exp(x - hi);
  for (std::size_t i = 0; i < l.size(); ++i)
    w[i] = hi > lo ? (l[i] - lo) / (hi - lo) * std::exp(l[i] - hi) / s : 0.0f;
}

// Max |kernel - table| / u on a row, against the variant's bound (finite rows) or
// 2^-20 (+inf rows, as the fuzzer's +inf cell).
bool norm_row_ok(const std::function<void(std::span<const float>, std::span<float>)>& k,
                 const NormRow& row) {
  const Variant& v = builtin("sa_softmax_norm");
  const std::vector<float> lf(row.l.begin(), row.l.end());
  std::vector<float> w(lf.size());
  k(lf, w);
  bool pinf = false;
  for (double x : row.l) pinf = pinf || x == INFINITY;
  const double B = pinf ? 0x1p-20 / kU : v.f32_bound(row.l);
  for (std::size_t i = 0; i < w.size(); ++i)
    if (!(std::abs(double(w[i]) - row.w[i]) / kU <= B + 1.0)) return false;  // + the table's own
  return true;                                                               // double rounding
}

TEST(LastVariants, NormalisedSaSoftmaxMatchesTheAbstractsFormulaByHand) {
  const Variant& v = builtin("sa_softmax_norm");
  for (const auto& row : norm_rows()) {
    EXPECT_TRUE(norm_row_ok(v.kernel32, row)) << "row of " << row.l.size();
    // The MPFR reference (its own code) agrees with the table to double precision.
    const auto ref = v.reference(row.l);
    for (std::size_t i = 0; i < row.w.size(); ++i)
      EXPECT_NEAR(ref[i].convert_to<double>(), row.w[i], 1e-15) << i;
  }
  // The planted bug is caught on the rows where the clamp matters.
  int caught = 0;
  for (const auto& row : norm_rows()) {
    bool finite = true;
    for (double x : row.l) finite = finite && std::isfinite(x);
    if (finite) caught += !norm_row_ok(norm_without_clamp, row);
  }
  EXPECT_EQ(caught, 3);  // [2], [-2, -1], [1, 2]; elsewhere min l <= 0 <= max l
}

// The built-in two-row streams (diff_l0.5: two (m, S); selective: (m, S) over
// l - ReLU(s); LASER: (m, S) over l and (M, T) over l + v) merge to the whole row
// within their stated bounds; normalised SA-Softmax streams (m, S, min, max).
TEST(LastVariants, BuiltinTwoRowStreamsMerge) {
  FuzzConfig cfg;
  cfg.cases = 60;
  cfg.max_log2_n = 4;
  for (const auto* n : {"diff_l0.5", "selective", "laser", "sa_softmax_norm"}) {
    const auto r = fuzz_variant(builtin(n), cfg);
    const Verdict* c = cell(r, "streamable");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->outcome, Outcome::pass) << describe(*c);
    EXPECT_EQ(streamable_word(r), "yes") << n;
    std::cout << n << " / streamable: " << c->note << "\n";
  }
}

}  // namespace
}  // namespace sa::variants
