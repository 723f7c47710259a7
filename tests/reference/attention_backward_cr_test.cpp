// The correctly rounded attention backward reference
// (reference/attention_backward_cr.hpp): its MPFR gradients against the x87
// reference (reference/backward.hpp) within that reference's stated bound,
// and its fast path against its MPFR-only path, bit for bit, on random cases
// of every feature and input type the suite's attention_backward generator
// draws (properties/attention_backward_cases.hpp), on rows built to put dv,
// dk or dsinks near rounding boundaries (the near ones fall back to MPFR and
// are still right), and on special cases (NaN, inf, masked rows, sink only,
// zero dout, huge and saturated scores, fp8 descales, float64).
//
// Claim: attention_backward_rounded(t, c, dout) ==
// attention_backward_rounded(t, c, dout, mpfr_only) bit for bit (NaN against
// NaN) on dq, dk, dv, dsinks; the MPFR-only path is the MPFR gradients
// rounded once (round_to). Bound: none, equality; it comes from the error
// analysis in reference/attention_backward_cr.cpp. The fraction of outputs
// that fell back to MPFR is printed per test.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/attention_case.hpp"
#include "properties/attention_backward_cases.hpp"
#include "reference/attention_backward_cr.hpp"
#include "reference/attention.hpp"
#include "reference/backward.hpp"
#include "reference/fast_arith.hpp"
#include "reference/mpfr.hpp"
#include "reference/rounding.hpp"
#include "tests/reference/attention_cr_test_util.hpp"

using sa::AttentionCase;
using sa::AttnType;
using sa::DType;
using sa::ref::CrOptions;
using sa::ref::CrStats;
using sa::ref::Mp;
using sa::ref::RefPath;
using sa::test::cmp;
using sa::test::output_dtype;
using sa::test::same;
using sa::test::Tally;

namespace {

#ifdef SA_CR_LONG
constexpr int kCasesPerProperty = 10;
constexpr double kMaxWork = 3.0e5;
#else
constexpr int kCasesPerProperty = 2;
constexpr double kMaxWork = 2.0e4;
#endif

// "" when the fast and MPFR-only paths agree bit for bit, else the first
// difference.
std::string difference(DType t, const AttentionCase& c, const std::vector<float>& dout,
                       CrStats* stats = nullptr, int threads = 0) {
  CrOptions fo;
  fo.stats = stats;
  fo.threads = threads;
  const auto a = sa::ref::attention_backward_rounded(t, c, dout, fo);
  CrOptions mo;
  mo.path = RefPath::mpfr_only;
  const auto b = sa::ref::attention_backward_rounded(t, c, dout, mo);
  for (const auto& s : {cmp("dq", a.dq, b.dq), cmp("dk", a.dk, b.dk), cmp("dv", a.dv, b.dv),
                        cmp("dsinks", a.dsinks, b.dsinks)})
    if (!s.empty()) return s;
  return "";
}

// Lengths of the suite's list (properties/backward.cpp) up to 17 x 40 in the
// default run, with 65 x 64 and 129 x 127 under `long`; the work cap kMaxWork
// (batch and heads, then head dims shrink to fit).
sa::props::AttentionShapes small_shapes() {
  sa::props::AttentionShapes s;
  s.lengths = {{1, 1}, {7, 5}, {5, 7}, {17, 40}, {1, 100}};
#ifdef SA_CR_LONG
  s.lengths.insert(s.lengths.end(), {{65, 64}, {64, 65}, {80, 33}, {129, 127}});
#endif
  s.max_work = kMaxWork;
  return s;
}

std::vector<std::string> features_of(const AttentionCase& c) {
  std::vector<std::string> f;
  f.push_back(name_of(c.qkv));
  if (c.varlen()) f.push_back("varlen");
  if (c.causal) f.push_back("causal");
  if (c.window_left >= 0 || c.window_right >= 0) f.push_back("window");
  if (c.softcap > 0) f.push_back("softcap");
  if (!c.alibi_slopes.empty()) f.push_back("alibi");
  if (!c.sinks.empty()) f.push_back("sinks");
  if (!c.key_padding_mask.empty()) f.push_back("key_padding");
  if (c.heads_q != c.heads_kv) f.push_back("gqa");
  if (c.dv != c.d) f.push_back("unequal_dv");
  return f;
}

Tally g_random{"bwd every generator"};

}  // namespace

// Every input type of the backward generator (float32, bfloat16, float16)
// and every feature it draws (varlen with empty sequences, GQA/MQA, causal
// both alignments, windows, softcap, ALiBi, sinks, key padding with fully
// masked rows, unequal dv), each case against its output type and one more
// target.
RC_GTEST_PROP(AttentionBackwardCorrectlyRounded, BitIdenticalToMpfrOnEveryGenerator, ()) {
  const auto shapes = small_shapes();
  for (int k = 0; k < kCasesPerProperty; ++k) {
    const AttnType in = *rc::gen::element(AttnType::float32, AttnType::bfloat16, AttnType::float16);
    const auto p = *sa::props::detail::gen_bwd(shapes);
    std::vector<float> dout;
    const AttentionCase c = sa::props::detail::make_case(p, in, &dout);
    const DType other = *rc::gen::element(DType::float32, DType::bfloat16, DType::float16);
    for (DType t : {output_dtype(c.out_type), other}) {
      CrStats st;
      const std::string d = difference(t, c, dout, &st);
      if (!d.empty())
        RC_FAIL(d + " on " + c.describe() + " (" + sa::props::detail::describe(p) + "), target " +
                sa::name_of(t));
      g_random.st += st;
      for (const auto& f : features_of(c)) {
        auto& n = g_random.by_feature[f];
        n.first += st.elements;
        n.second += st.mpfr;
      }
    }
  }
}

namespace {

// Magnitudes summed by each gradient (double, from the x87 reference's
// weights): for dq |scale| sum_j m_ij |k_jx|, m_ij = p_ij (|vd| sum_x |dout_ix
// v_jx| + sum_j' p_ij' |vd| sum_x |dout_ix v_j'x|) (ds_ij's own magnitude:
// |softcap'| <= 1), for dk |scale| sum_i m_ij |q_ix|, for dv |vd| sum_i p_ij
// |dout_ix|, for dsinks sum_i p_sink,i (sum_j p_ij |vd| sum_x |dout_ix v_jx|).
sa::ref::AttentionGradients magnitudes(const AttentionCase& c, const std::vector<float>& dout,
                                       const sa::ref::AttentionGradients& x87) {
  const std::int64_t HQ = c.heads_q, HK = c.heads_kv, d = c.d, dv = c.dv;
  sa::ref::AttentionGradients m;
  m.dq.assign(static_cast<std::size_t>(c.total_q() * HQ * d), 0.0);
  m.dk.assign(static_cast<std::size_t>(c.total_k() * HK * d), 0.0);
  m.dv.assign(static_cast<std::size_t>(c.total_k() * HK * dv), 0.0);
  m.dsinks.assign(c.sinks.size(), 0.0);
  const double sc = std::abs(c.scale * c.q_descale * c.k_descale), vd = std::abs(c.v_descale);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < HQ; ++h)
      for (std::int64_t i = 0; i < c.len_q(b); ++i) {
        const std::int64_t rid = c.row_q(b, i) * HQ + h, hk = c.kv_head(h);
        const double lse = x87.lse[rid];
        if (!std::isfinite(lse)) continue;
        const float* q = c.q.data() + rid * d;
        const float* go = dout.data() + rid * dv;
        std::vector<double> p(c.len_k(b), 0.0), a(c.len_k(b), 0.0);
        double Da = 0;
        const std::int64_t off = c.top_left ? 0 : c.len_k(b) - c.len_q(b);
        for (std::int64_t j = 0; j < c.len_k(b); ++j) {
          if (!sa::ref::key_visible(c, b, i, j)) continue;
          const std::int64_t kr = c.row_k(b, j) * HK + hk;
          long double s = 0;
          for (std::int64_t x = 0; x < d; ++x)
            s += static_cast<long double>(q[x]) * c.k[kr * d + x];
          s *= c.scale * c.q_descale * c.k_descale;
          if (c.softcap > 0) s = c.softcap * std::tanh(s / c.softcap);
          if (!c.alibi_slopes.empty()) s -= c.alibi_slopes[h] * std::abs(i + off - j);
          p[j] = static_cast<double>(std::exp(s - lse));
          for (std::int64_t x = 0; x < dv; ++x) a[j] += std::abs(go[x] * c.v[kr * dv + x]);
          a[j] *= vd;
          Da += p[j] * a[j];
        }
        for (std::int64_t j = 0; j < c.len_k(b); ++j) {
          if (p[j] == 0) continue;
          const std::int64_t kr = c.row_k(b, j) * HK + hk;
          const double mij = p[j] * (a[j] + Da);
          for (std::int64_t x = 0; x < d; ++x) {
            m.dq[rid * d + x] += sc * mij * std::abs(c.k[kr * d + x]);
            m.dk[kr * d + x] += sc * mij * std::abs(q[x]);
          }
          for (std::int64_t x = 0; x < dv; ++x) m.dv[kr * dv + x] += vd * p[j] * std::abs(go[x]);
        }
        if (!c.sinks.empty()) m.dsinks[h] += std::exp(c.sinks[h] - lse) * Da;
      }
  return m;
}

Tally g_x87{"bwd exact vs x87"};

}  // namespace

// The MPFR gradients against the x87 reference: within (n_k + n_q group + d
// + dv + 32) 2^-63 of the magnitudes summed (reference/backward.hpp's stated
// accuracy; n_q counts every query row of the key's group), plus 2^-60 of
// the magnitude for the magnitudes' own double evaluation, plus 2^-53 of
// each value: both references return their values rounded once to double
// (the x87 header's bound is on its long double values); NaN against NaN.
RC_GTEST_PROP(AttentionBackwardCorrectlyRounded, ExactAgreesWithTheX87Reference, ()) {
  const auto shapes = small_shapes();
  const AttnType in = *rc::gen::element(AttnType::float32, AttnType::bfloat16, AttnType::float16);
  const auto p = *sa::props::detail::gen_bwd(shapes);
  std::vector<float> dout;
  const AttentionCase c = sa::props::detail::make_case(p, in, &dout);
  const auto e = sa::ref::attention_backward_exact(c, dout);
  const auto x = sa::ref::attention_backward(c, dout);
  const auto m = magnitudes(c, dout, x);
  std::int64_t maxq = 0, maxk = 0;
  for (std::int64_t b = 0; b < c.batch; ++b)
    maxq = std::max(maxq, c.len_q(b)), maxk = std::max(maxk, c.len_k(b));
  const double n = static_cast<double>(maxk + maxq * (c.heads_q / c.heads_kv) + c.d + c.dv + 32);
  const double k = n * 0x1p-63 + 0x1p-60;
  auto check = [&](const char* what, const std::vector<double>& a, const std::vector<double>& b,
                   const std::vector<double>& mg) {
    RC_ASSERT(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (std::isnan(a[i]) || std::isnan(b[i])) {
        RC_ASSERT(std::isnan(a[i]) == std::isnan(b[i]));
        continue;
      }
      // Both are rounded once to double at the end: 2^-53 of each value.
      const double tol = k * mg[i] + 0x1p-53 * (std::abs(a[i]) + std::abs(b[i])) + 1e-300;
      if (!(std::abs(a[i] - b[i]) <= tol)) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "%s[%zu]: MPFR %.17g, x87 %.17g, magnitude %.3g, bound %.3g",
                      what, i, a[i], b[i], mg[i], tol);
        RC_FAIL(std::string(buf) + " on " + c.describe());
      }
    }
  };
  check("dq", e.dq, x.dq, m.dq);
  check("dk", e.dk, x.dk, m.dk);
  check("dv", e.dv, x.dv, m.dv);
  check("dsinks", e.dsinks, x.dsinks, m.dsinks);
}

// The MPFR-only path is attention_backward_exact's value rounded once:
// against its doubles rounded again (equal but for double rounding, ~2^-29
// of outputs: none expected here).
RC_GTEST_PROP(AttentionBackwardCorrectlyRounded, MpfrOnlyPathIsTheExactReferenceRounded, ()) {
  sa::props::AttentionShapes shapes = small_shapes();
  shapes.max_work = 1e4;
  const AttnType in = *rc::gen::element(AttnType::float32, AttnType::bfloat16, AttnType::float16);
  const auto p = *sa::props::detail::gen_bwd(shapes);
  std::vector<float> dout;
  const AttentionCase c = sa::props::detail::make_case(p, in, &dout);
  const DType t = *rc::gen::element(DType::float32, DType::bfloat16, DType::float16);
  CrOptions mo;
  mo.path = RefPath::mpfr_only;
  const auto a = sa::ref::attention_backward_rounded(t, c, dout, mo);
  const auto e = sa::ref::attention_backward_exact(c, dout);
  auto check = [&](const std::vector<double>& x, const std::vector<double>& y) {
    RC_ASSERT(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      RC_ASSERT(same(x[i], sa::ref::fast::round_double(t, y[i])));
  };
  check(a.dq, e.dq);
  check(a.dk, e.dk);
  check(a.dv, e.dv);
  check(a.dsinks, e.dsinks);
}

namespace {

// The rounding boundary just above round_to(t, x) (x > 0).
Mp midpoint_above(DType t, const Mp& x) {
  const double r = sa::ref::round_to(t, x);
  const sa::FloatFormat f = sa::format_of(t);
  int e;
  std::frexp(r, &e);
  const double ulp = std::ldexp(1.0, std::max(e - 1, f.emin) - f.precision + 1);
  return Mp(r) + Mp(ulp) / 2;
}

// Eight floats whose sum is x to ~2^-190 relative: the key of a d = 8 row
// whose query is all ones, so that the score is x almost exactly.
std::vector<float> split8(const Mp& x) {
  std::vector<float> k;
  Mp rest = x;
  for (int i = 0; i < 8; ++i) {
    const float f = static_cast<float>(sa::ref::round_to(DType::float32, rest));
    k.push_back(f);
    rest -= Mp(f);
  }
  return k;
}

enum class Aim { dv, dk, dsink };

// One query (all ones, d = 8, scale 1), dout = 1, dv = 1:
//  dv: keys with scores 0 and x, values 0 and 1, optional softcap: dv_1 =
//      sigmoid(x);
//  dk: the same without softcap: ds_1 = p (1 - p), dk_1 = ds_1 q = p (1 - p);
//  dsink: one key (score x, value 1) and a sink at 0: dsinks = -p (1 - p).
AttentionCase aimed_case(Aim aim, const Mp& target, double cap, std::vector<float>& dout) {
  AttentionCase c;
  c.seqlen_q = 1;
  c.d = 8;
  c.dv = 1;
  c.q.assign(8, 1.0f);
  Mp p = target;  // the weight of the key at x
  if (aim != Aim::dv) p = (1 - sqrt(1 - 4 * target)) / 2;
  Mp x = log(p / (1 - p));
  if (aim != Aim::dv || abs(x) >= Mp(cap) * Mp(0.999)) cap = 0;
  if (cap > 0) x = Mp(cap) * atanh(x / Mp(cap));
  c.softcap = cap;
  if (aim == Aim::dsink) {
    c.seqlen_k = 1;
    c.k = split8(x);
    c.v = {1.0f};
    c.sinks = {0.0f};
  } else {
    c.seqlen_k = 2;
    c.k.assign(8, 0.0f);
    for (float f : split8(x)) c.k.push_back(f);
    c.v = {0.0f, 1.0f};
  }
  dout = {1.0f};
  return c;
}

// A case whose `aim` output lies within about 2^-closeness (relative) of a
// rounding boundary of t.
AttentionCase near_boundary(DType t, Aim aim, double where, int closeness, int side, double cap,
                            std::vector<float>& dout) {
  const Mp target = aim == Aim::dv ? Mp(0.02 + 0.96 * where) : Mp(0.01 + 0.23 * where);
  const Mp M = midpoint_above(t, target);
  const Mp aimed = M * (1 + Mp(side) * Mp(std::ldexp(1.0, -closeness)));
  return aimed_case(aim, aimed, cap, dout);
}

Tally g_mid{"bwd near boundaries"};

}  // namespace

// dv, dk and dsinks aimed at rounding boundaries of every target at
// distances 2^-20 .. 2^-110: the fast level certifies the far ones, the rest
// go to MPFR, and every answer is bit-identical.
RC_GTEST_PROP(AttentionBackwardCorrectlyRounded, BitIdenticalNearRoundingBoundaries, ()) {
  for (int k = 0; k < 4 * kCasesPerProperty; ++k) {
    const DType t = *rc::gen::element(DType::float32, DType::bfloat16, DType::float16);
    const Aim aim = *rc::gen::element(Aim::dv, Aim::dk, Aim::dsink);
    const double where = *rc::gen::inRange(0, 1000000) / 1e6;
    const int closeness = *rc::gen::inRange(20, 111);
    const int side = *rc::gen::element(-1, 1);
    const double cap = *rc::gen::element(0.0, 0.0, 20.0, 50.0);
    std::vector<float> dout;
    const AttentionCase c = near_boundary(t, aim, where, closeness, side, cap, dout);
    CrStats st;
    const std::string d = difference(t, c, dout, &st);
    if (!d.empty())
      RC_FAIL(d + " (closeness 2^-" + std::to_string(closeness) + ", target " + sa::name_of(t) +
              ")");
    g_mid.st += st;
    auto& n = g_mid.by_feature[closeness < 45 ? "far (<2^-45)" : "near"];
    n.first += st.elements;
    n.second += st.mpfr;
  }
}

// Outputs within 2^-105 of a rounding boundary: no fast bound can decide
// them; they fall back to MPFR and are right; at 2^-30 the same cases are
// certified.
TEST(AttentionBackwardCorrectlyRounded, RowsBuiltToDefeatTheFastLevelFallBackAndAreRight) {
  CrStats all;
  int n = 0;
  for (DType t : {DType::float32, DType::bfloat16, DType::float16})
    for (Aim aim : {Aim::dv, Aim::dk, Aim::dsink})
      for (double cap : {0.0, 30.0})
        for (int side : {-1, 1}) {
          const double where = 0.37 + 0.1 * n++ / 36;
          std::vector<float> dout;
          const AttentionCase c = near_boundary(t, aim, where, 105, side, cap, dout);
          CrStats st;
          EXPECT_EQ(difference(t, c, dout, &st), "");
          EXPECT_GT(st.mpfr, 0) << "an output 2^-105 from a boundary was certified";
          all += st;
          const AttentionCase far = near_boundary(t, aim, where, 30, side, cap, dout);
          CrStats sf;
          EXPECT_EQ(difference(t, far, dout, &sf), "");
          EXPECT_EQ(sf.mpfr, 0) << "an output 2^-30 from a boundary fell back";
        }
  std::printf("bwd adversarial rows: %lld outputs, fallback fraction %.3f\n",
              static_cast<long long>(all.elements), all.fallback_fraction());
}

namespace {

AttentionCase gaussian_case(std::int64_t sq, std::int64_t sk, std::int64_t d, std::int64_t hq,
                            std::int64_t hkv, std::uint64_t seed, std::vector<float>& dout) {
  AttentionCase c;
  c.seqlen_q = sq;
  c.seqlen_k = sk;
  c.d = c.dv = d;
  c.heads_q = hq;
  c.heads_kv = hkv;
  std::mt19937_64 g(seed);
  std::normal_distribution<double> N(0, 1);
  for (std::int64_t i = 0; i < sq * hq * d; ++i) c.q.push_back(static_cast<float>(N(g)));
  for (std::int64_t i = 0; i < sk * hkv * d; ++i) c.k.push_back(static_cast<float>(N(g)));
  for (std::int64_t i = 0; i < sk * hkv * d; ++i) c.v.push_back(static_cast<float>(N(g)));
  c.scale = static_cast<float>(1 / std::sqrt(static_cast<double>(d)));
  dout.clear();
  for (std::int64_t i = 0; i < sq * hq * d; ++i) dout.push_back(static_cast<float>(N(g)));
  return c;
}

}  // namespace

// Cases the fast path sends to MPFR by design, and ones it answers exactly.
TEST(AttentionBackwardCorrectlyRounded, SpecialCasesAreBitIdentical) {
  std::vector<float> base_dout;
  const AttentionCase base = gaussian_case(3, 5, 4, 2, 2, 7, base_dout);
  struct Named {
    std::string name;
    AttentionCase c;
    std::vector<float> dout;
  };
  std::vector<Named> cases;
  auto add = [&](const std::string& name, auto&& edit) {
    Named n{name, base, base_dout};
    edit(n.c, n.dout);
    cases.push_back(n);
  };
  using V = std::vector<float>;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  add("plain", [](AttentionCase&, V&) {});
  add("nan q", [&](AttentionCase& c, V&) { c.q[5] = nan; });
  add("nan dout", [&](AttentionCase&, V& o) { o[3] = nan; });
  add("inf v", [&](AttentionCase& c, V&) { c.v[3] = inf; });
  add("nan sink", [&](AttentionCase& c, V&) { c.sinks = {nan, 1.0f}; });
  add("all masked", [](AttentionCase& c, V&) { c.key_padding_mask.assign(5, 0); });
  add("all masked, sink", [](AttentionCase& c, V&) {
    c.key_padding_mask.assign(5, 0);
    c.sinks = {0.25f, -3.0f};
  });
  add("some keys unseen", [](AttentionCase& c, V&) { c.key_padding_mask = {1, 0, 1, 0, 1}; });
  add("one key", [](AttentionCase& c, V&) { c.key_padding_mask = {0, 0, 1, 0, 0}; });
  add("sink above all", [](AttentionCase& c, V&) { c.sinks = {200.0f, 1.0f}; });
  add("causal top-left", [](AttentionCase& c, V&) {
    c.causal = true;
    c.top_left = true;
  });
  add("gqa", [](AttentionCase& c, V&) {
    c.heads_kv = 1;
    c.k.resize(5 * 4);
    c.v.resize(5 * 4);
  });
  add("huge scores", [](AttentionCase& c, V&) {
    for (auto& x : c.q) x *= 1e15f;
  });
  add("one dominant key", [](AttentionCase& c, V&) {
    for (std::size_t i = 0; i < 8; ++i) c.k[i] *= 100.0f;
  });
  add("dout zero", [](AttentionCase&, V& o) {
    for (auto& x : o) x = 0.0f;
  });
  add("dout -0", [](AttentionCase&, V& o) {
    for (auto& x : o) x = -0.0f;
  });
  add("values equal (ds = 0)", [](AttentionCase& c, V&) {
    for (auto& x : c.v) x = 0.75f;
  });
  add("q zero", [](AttentionCase& c, V&) {
    for (auto& x : c.q) x = 0.0f;
  });
  add("negative scale", [](AttentionCase& c, V&) { c.scale = -0.3; });
  add("fp8 descales", [](AttentionCase& c, V&) {
    c.qkv = AttnType::fp8_e4m3;
    c.out_type = AttnType::bfloat16;
    c.q_descale = 0.375f;
    c.k_descale = 2.0f;
    c.v_descale = 0.5f;
    c.scale = 0.1;  // scale * q_descale * k_descale not a double: a double-double
  });
  add("softcap tiny scores", [](AttentionCase& c, V&) {
    c.softcap = 50;
    for (auto& x : c.q) x *= 1e-12f;
  });
  add("softcap saturated", [](AttentionCase& c, V&) {
    c.softcap = 2;
    for (auto& x : c.q) x *= 1000.0f;
  });
  add("alibi, window, sinks", [](AttentionCase& c, V&) {
    c.alibi_slopes = {0.5f, 0.0625f};
    c.window_left = 1;
    c.window_right = 0;
    c.sinks = {-1.0f, 2.0f};
  });
  add("varlen, empty sequences", [](AttentionCase& c, V& o) {
    c.batch = 3;
    c.seqlen_q = c.seqlen_k = 0;
    c.cu_q = {0, 2, 2, 3};
    c.cu_k = {0, 3, 5, 5};
    o.resize(3 * 2 * 4);
  });
  for (const auto& n : cases)
    for (DType t : {DType::float32, DType::bfloat16, DType::float16, DType::float64}) {
      CrStats st;
      EXPECT_EQ(difference(t, n.c, n.dout, &st), "") << n.name << " target " << sa::name_of(t);
      // Answered exactly by the fast path: no fallback.
      if (t != DType::float64 && (n.name == "all masked" || n.name == "all masked, sink" ||
                                  n.name == "plain" || n.name == "gqa"))
        EXPECT_EQ(st.mpfr, 0) << n.name << " target " << sa::name_of(t);
    }
}

// On plain gaussian cases nothing falls back, and the result does not
// depend on the thread count: a decoding-like case (1 query x 1024 keys x d
// = 128, GQA 4) and a small prefill, float32 and bfloat16 targets.
TEST(AttentionBackwardCorrectlyRounded, NoFallbackOnPlainCases) {
  std::vector<float> o1, o2;
  const AttentionCase a = gaussian_case(1, 1024, 128, 4, 1, 11, o1);
  const AttentionCase b = gaussian_case(16, 64, 64, 2, 2, 12, o2);
  for (const auto* cp : {&a, &b}) {
    const auto& dout = cp == &a ? o1 : o2;
    for (DType t : {DType::float32, DType::bfloat16}) {
      CrStats st;
      EXPECT_EQ(difference(t, *cp, dout, &st), "") << cp->describe();
      EXPECT_EQ(st.mpfr, 0) << cp->describe();
      CrOptions one;
      one.threads = 1;
      const auto r1 = sa::ref::attention_backward_rounded(t, *cp, dout, one);
      const auto rn = sa::ref::attention_backward_rounded(t, *cp, dout);
      EXPECT_EQ(cmp("dq", r1.dq, rn.dq) + cmp("dk", r1.dk, rn.dk) + cmp("dv", r1.dv, rn.dv), "");
    }
  }
}

// Issue 31: the softcap's derivative where tanh saturates. Keys with capped
// scores tanh(100) and 0 (softcap 1), values 1 and 0, dout 1: ds_1 = p_1
// (1 - p_1) / cosh^2(100) and dq = scale k_1 ds_1 = 100 / q ds_1. With q =
// 2^-149 that is ~7.7e-41 (a float32 subnormal); the MPFR row computed the
// derivative as 1 - th^2, which is 0 at 256 bits (th = 1 - ~2^-288), and
// returned dq = 0. The closed form is evaluated here at 1024 bits.
TEST(AttentionBackwardCorrectlyRoundedIssue31, SaturatedSoftcapDerivativeIsRelative) {
  AttentionCase c;
  c.seqlen_q = 1;
  c.seqlen_k = 2;
  c.d = c.dv = 1;
  c.q = {0x1p-149f};
  c.k = {100.0f * 0x1p70f, 0.0f};
  c.v = {1.0f, 0.0f};
  c.scale = 0x1p79;  // scale q k_1 = 100
  c.softcap = 1.0;
  const std::vector<float> dout = {1.0f};
  double want, exact;
  {
    const sa::ref::PrecisionScope prec(1024);
    const Mp s1 = tanh(Mp(100));
    const Mp p1 = exp(s1) / (exp(s1) + 1);
    const Mp ch = cosh(Mp(100));
    const Mp dq = Mp(0x1p79) * Mp(100.0f * 0x1p70f) * p1 * (1 - p1) / (ch * ch);
    want = sa::ref::round_to(DType::float32, dq);
    exact = dq.convert_to<double>();
  }
  ASSERT_GT(want, 0.0);
  for (RefPath path : {RefPath::fast, RefPath::mpfr_only}) {
    CrOptions o;
    o.path = path;
    const auto r = sa::ref::attention_backward_rounded(DType::float32, c, dout, o);
    EXPECT_EQ(r.dq[0], want) << (path == RefPath::fast ? "fast" : "MPFR-only");
  }
  // The x87 reference (long double) had the same 1 - th^2.
  const auto g = sa::ref::attention_backward(c, dout);
  EXPECT_NEAR(g.dq[0], exact, 1e-15 * exact);
}

// Issue 31 (found by the 256/512-bit cross-check,
// cr_precision_crosscheck_test.cpp): dq_x = scale sum_j ds_j k_jx is exactly
// 0 when every visible key holds the same k_x and there is no sink or
// softcap (sum_j ds_j = sum_j p_j dp_j - D = 0). The MPFR row summed ds_j
// k_jx as written and returned the sign of its rounding noise (-0 at 512
// bits on a generator case where 256 gave +0). Forty random rows with k_0x =
// k_1x: dq_x must be +0 on both paths, at 256 and at 512 bits.
TEST(AttentionBackwardCorrectlyRoundedIssue31, DqThatCancelsExactlyIsPlusZero) {
  std::mt19937_64 g(31);
  std::normal_distribution<double> N(0, 1);
  auto f = [&] { return static_cast<float>(N(g)); };
  int checked = 0;
  for (int trial = 0; trial < 40; ++trial) {
    AttentionCase c;
    c.seqlen_q = 1;
    c.seqlen_k = 2;
    c.d = c.dv = 2;
    c.q = {f(), f()};
    const float shared = f();
    c.k = {shared, f(), shared, f()};
    c.v = {f(), f(), f(), f()};
    c.scale = 0.7;
    const std::vector<float> dout = {f(), f()};
    for (DType t : {DType::float32, DType::float16}) {
      for (RefPath path : {RefPath::fast, RefPath::mpfr_only}) {
        CrOptions o;
        o.path = path;
        const auto r = sa::ref::attention_backward_rounded(t, c, dout, o);
        EXPECT_TRUE(same(r.dq[0], 0.0)) << "trial " << trial << ": dq_0 = " << r.dq[0];
        const sa::ref::PrecisionScope prec(512);
        const auto r2 = sa::ref::attention_backward_rounded(t, c, dout, o);
        EXPECT_TRUE(same(r2.dq[0], 0.0)) << "trial " << trial << " (512 bits): dq_0 = " << r2.dq[0];
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 160);
}

// The backward's counterpart of AKeyCutOffFarBelowGivesOutItsSign
// (attention_cr_test.cpp): a key 2048 below the other has weight e^-2048,
// whose bound (2^-1074) times |dout_x| < 1 underflowed in the fast level's
// error sum, so dv of that key was certified +0 where the true dv is a
// tiny number of dout_x's sign (times v_descale's), rounded -0 when
// negative.
TEST(AttentionBackwardCorrectlyRoundedIssue31, DvOfAKeyCutOffFarBelowKeepsItsSign) {
  int checked = 0;
  for (const float g : {-0.5f, 0.25f, -0x1p-9f})
    for (const float vd : {1.0f, -2.0f}) {
      AttentionCase c;
      c.seqlen_q = 1;
      c.seqlen_k = 2;
      c.d = 1;
      c.dv = 1;
      c.qkv = sa::AttnType::fp8_e4m3;  // descales apply to quantised inputs
      c.q = {8.0f};
      c.k = {0.0f, -256.0f};
      c.v = {1.0f, 3.0f};
      c.v_descale = vd;
      const std::vector<float> dout = {g};
      const bool negative = (g < 0) != (vd < 0);
      for (DType t : {DType::float32, DType::bfloat16})
        for (RefPath path : {RefPath::fast, RefPath::mpfr_only}) {
          CrOptions o;
          o.path = path;
          const auto r = sa::ref::attention_backward_rounded(t, c, dout, o);
          EXPECT_TRUE(same(r.dv[1], negative ? -0.0 : 0.0))
              << "dout " << g << " vd " << vd << " " << sa::name_of(t) << ": " << r.dv[1];
          ++checked;
        }
    }
  EXPECT_EQ(checked, 24);
}
