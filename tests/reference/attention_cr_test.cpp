// The correctly rounded attention forward reference (reference/attention_cr.hpp)
// against its MPFR-only path: bit-identical on random cases of every feature
// and input type the suite's attention_v2 generator draws
// (properties/attention_cases.hpp), on rows built to sit near rounding
// midpoints of out, lse and the entropy (with and without softcap), on rows
// built to defeat the fast level (they fall back to MPFR and are still
// right), and on the special rows (NaN, masked, sink only, one key, adaptive,
// huge scores).
//
// Claim: attention_rounded(t, c) == attention_rounded(t, c, mpfr_only)
// bit for bit (NaN against NaN) on every field; the MPFR-only path is the
// reference's MPFR row rounded once (round_to). Bound: none, equality; it
// comes from the error analysis in reference/attention_cr.cpp.
//
// The fraction of query rows that fell back to MPFR is printed per test.
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
#include "properties/attention_cases.hpp"
#include "reference/attention_cr.hpp"
#include "reference/attention.hpp"
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

// Cases per RapidCheck case, and the multiply-adds one generator case may
// cost (the MPFR-only path runs at ~0.3 us a multiply-add).
#ifdef SA_CR_LONG
constexpr int kCasesPerProperty = 20;
constexpr double kMaxWork = 1.0e6;
#else
constexpr int kCasesPerProperty = 3;
constexpr double kMaxWork = 1.0e5;
#endif

// "" when the fast and MPFR-only paths agree bit for bit, else the first
// difference.
std::string difference(DType t, const AttentionCase& c, CrStats* stats = nullptr) {
  CrOptions fo;
  fo.stats = stats;
  const auto a = sa::ref::attention_rounded(t, c, fo);
  CrOptions mo;
  mo.path = RefPath::mpfr_only;
  const auto b = sa::ref::attention_rounded(t, c, mo);

  for (const auto& s : {cmp("out", a.out, b.out), cmp("lse", a.lse, b.lse),
                        cmp("entropy", a.entropy, b.entropy), cmp("beta", a.beta, b.beta)})
    if (!s.empty()) return s;
  return "";
}

// Shapes small enough that the MPFR-only path stays quick: lengths from the
// suite's list (properties/attention.cpp) up to 65 x 64 and 2 x 500 in
// the default run, up to 257 x 256, 33 x 2049 and 1 x 8192 under `long`;
// the work cap kMaxWork (batch and heads, then head dims shrink to fit).
sa::props::AttentionShapes small_shapes() {
  sa::props::AttentionShapes s;
  s.lengths = {{1, 1},   {7, 5},   {17, 40}, {40, 17}, {64, 65},
               {65, 64}, {1, 239}, {2, 500}, {3, 300}};
#ifdef SA_CR_LONG
  s.lengths.insert(s.lengths.end(), {{239, 1},
                                     {128, 129},
                                     {113, 203},
                                     {127, 255},
                                     {257, 256},
                                     {799, 3},
                                     {33, 2049},
                                     {2, 4097},
                                     {3, 8191},
                                     {1, 8192}});
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
  if (c.adaptive) f.push_back("adaptive");
  return f;
}

Tally g_random{"every generator"};

}  // namespace

// Every input type (float32, bfloat16, float16, fp8 e4m3 and e5m2 with
// descales) and every feature the suite's generator draws (varlen with empty
// sequences, GQA/MQA, causal both alignments, windows, softcap, ALiBi,
// sinks, key padding, unequal dv; layouts do not reach the reference), on
// its three distributions (gaussian, fa3_outliers, small_int), a third of
// the cases with the adaptive temperature added; each case against its
// output type and one more target.
RC_GTEST_PROP(AttentionCorrectlyRounded, BitIdenticalToMpfrOnEveryGenerator, ()) {
  const auto shapes = small_shapes();
  bool any_mpfr = false;
  for (int k = 0; k < kCasesPerProperty; ++k) {
    const AttnType in = *rc::gen::element(AttnType::float32, AttnType::bfloat16, AttnType::float16,
                                          AttnType::fp8_e4m3, AttnType::fp8_e5m2);
    const auto p = *sa::props::detail::gen_attention(sa::is_fp8(in), shapes);
    AttentionCase c = sa::props::detail::materialise(p, in);
    // The suite's generator does not draw the adaptive temperature; a third
    // of the cases here add it.
    c.adaptive = *rc::gen::inRange(0, 3) == 0;
    const DType other = *rc::gen::element(DType::float32, DType::bfloat16, DType::float16);
    for (DType t : {output_dtype(c.out_type), other}) {
      CrStats st;
      const std::string d = difference(t, c, &st);
      if (!d.empty())
        RC_FAIL(d + " on " + c.describe() + " (" + sa::props::detail::describe(p) + "), target " +
                sa::name_of(t));
      g_random.st += st;
      // Features are tallied over the real-valued distributions; small_int
      // (sparse exact values: outputs that cancel to exactly 0 go to MPFR)
      // on its own line.
      auto features = features_of(c);
      if (p.dist == "small_int") features.clear();
      features.push_back("dist " + p.dist);
      for (const auto& f : features) {
        auto& n = g_random.by_feature[f];
        n.first += st.elements;
        n.second += st.mpfr;
      }
      any_mpfr = any_mpfr || st.mpfr > 0;
    }
  }
  RC_TAG(any_mpfr ? "a row through MPFR" : "every row certified");
}

// The masks of interface 2's appendix (attn_mask, attn_bias, block_mask,
// tree_mask, every broadcast kind the generator draws) on top of every other
// feature: the correctly rounded path (the bias added exactly to the
// double-double score, its error bound) against MPFR's.
RC_GTEST_PROP(AttentionCorrectlyRounded, BitIdenticalToMpfrWithMasks, ()) {
  const auto shapes = small_shapes();
  sa::props::detail::AttnDomain dom;
  dom.features = sa::props::detail::kClassicFeatures | SA_ATTN_BOOL_MASK | SA_ATTN_BIAS |
                 SA_ATTN_BLOCK_MASK | SA_ATTN_TREE_MASK;
  for (int k = 0; k < kCasesPerProperty; ++k) {
    const AttnType in = *rc::gen::element(AttnType::float32, AttnType::bfloat16, AttnType::float16,
                                          AttnType::fp8_e4m3);
    const auto p = *sa::props::detail::gen_attention(sa::is_fp8(in), shapes, dom);
    const AttentionCase c = sa::props::detail::materialise(p, in);
    CrStats st;
    const std::string d = difference(output_dtype(c.out_type), c, &st);
    if (!d.empty())
      RC_FAIL(d + " on " + c.describe() + " (" + sa::props::detail::describe(p) + ")");
  }
}

namespace {

// The real value half-way between the two values of format t around x: the
// rounding boundary just above round_to(t, x) (x > 0).
Mp midpoint_above(DType t, const Mp& x) {
  const double r = sa::ref::round_to(t, x);
  const sa::FloatFormat f = sa::format_of(t);
  int e;
  std::frexp(r, &e);
  const double ulp = std::ldexp(1.0, std::max(e - 1, f.emin) - f.precision + 1);
  return Mp(r) + Mp(ulp) / 2;
}

// Four floats whose sum is x to ~2^-96 relative: the key of a d = 4 row
// whose query is all ones, so that the score is x almost exactly.
std::vector<float> split4(const Mp& x) {
  std::vector<float> k;
  Mp rest = x;
  for (int i = 0; i < 4; ++i) {
    const float f = static_cast<float>(sa::ref::round_to(DType::float32, rest));
    k.push_back(f);
    rest -= Mp(f);
  }
  return k;
}

// Two keys (scores 0 and x), values 0 and 1, dv = 1, optional softcap c:
// out = sigmoid(x), lse = log(1 + e^x), H = the binary entropy of out.
AttentionCase two_keys(const Mp& x_score, double cap) {
  AttentionCase c;
  c.seqlen_q = 1;
  c.seqlen_k = 2;
  c.d = 4;
  c.dv = 1;
  c.q.assign(4, 1.0f);
  Mp x = x_score;
  if (cap > 0) x = Mp(cap) * atanh(x_score / Mp(cap));  // raw score whose softcap is x_score
  c.k = {0, 0, 0, 0};
  for (float f : split4(x)) c.k.push_back(f);
  c.v = {0.0f, 1.0f};
  c.softcap = cap;
  return c;
}

enum class Aim { out, lse, entropy };

// The score x that puts the chosen output at `target` (a real).
Mp score_for(Aim aim, const Mp& target) {
  switch (aim) {
    case Aim::out:
      return log(target / (1 - target));
    case Aim::lse:
      return log(exp(target) - 1);
    case Aim::entropy: {
      // Binary entropy of sigmoid(x) is decreasing on x >= 0: bisection.
      Mp lo = 0, hi = 60;
      for (int i = 0; i < 230; ++i) {
        const Mp mid = (lo + hi) / 2;
        const Mp p = 1 / (1 + exp(-mid));
        const Mp H = -(p * log(p) + (1 - p) * log1p(-p));
        if (H > target)
          lo = mid;
        else
          hi = mid;
      }
      return (lo + hi) / 2;
    }
  }
  return 0;
}

// A row whose `aim` output lies within about 2^-closeness (relative) of a
// rounding boundary of t, at a random place.
AttentionCase near_midpoint(DType t, Aim aim, double where, int closeness, int side, double cap) {
  Mp target;
  switch (aim) {
    case Aim::out:
      target = Mp(0.02 + 0.96 * where);
      break;
    case Aim::lse:
      target = Mp(0.05 + 6.0 * where);
      break;
    case Aim::entropy:
      target = Mp(0.02 + 0.66 * where);
      break;
  }
  const Mp M = midpoint_above(t, target);
  const Mp aimed = M * (1 + Mp(side) * Mp(std::ldexp(1.0, -closeness)));
  Mp x = score_for(aim, aimed);
  if (cap > 0 && abs(x) >= Mp(cap) * Mp(0.999)) cap = 0;  // out of the softcap's range
  return two_keys(x, cap);
}

Tally g_mid{"near midpoints"};

}  // namespace

// out, lse and the entropy aimed at rounding boundaries of every target at
// distances 2^-20 .. 2^-110: the fast level certifies the far ones, the rest
// go to MPFR, and every answer is bit-identical.
RC_GTEST_PROP(AttentionCorrectlyRounded, BitIdenticalNearRoundingMidpoints, ()) {
  for (int k = 0; k < 4 * kCasesPerProperty; ++k) {
    const DType t = *rc::gen::element(DType::float32, DType::bfloat16, DType::float16);
    const Aim aim = *rc::gen::element(Aim::out, Aim::lse, Aim::entropy);
    const double where = *rc::gen::inRange(0, 1000000) / 1e6;
    const int closeness = *rc::gen::inRange(20, 111);
    const int side = *rc::gen::element(-1, 1);
    const double cap = *rc::gen::element(0.0, 0.0, 20.0, 50.0);
    const AttentionCase c = near_midpoint(t, aim, where, closeness, side, cap);
    CrStats st;
    const std::string d = difference(t, c, &st);
    if (!d.empty())
      RC_FAIL(d + " (closeness 2^-" + std::to_string(closeness) + ", target " + sa::name_of(t) +
              ")");
    g_mid.st += st;
    auto& n = g_mid.by_feature[closeness < 45 ? "far (<2^-45)" : "near"];
    n.first += st.elements;
    n.second += st.mpfr;
  }
}

// Rows whose out, lse or entropy lies within 2^-100 of a rounding boundary:
// no fast bound can decide them; they fall back to MPFR and are right.
TEST(AttentionCorrectlyRounded, RowsBuiltToDefeatTheFastLevelFallBackAndAreRight) {
  CrStats all;
  int n = 0;
  for (DType t : {DType::float32, DType::bfloat16, DType::float16})
    for (Aim aim : {Aim::out, Aim::lse, Aim::entropy})
      for (double cap : {0.0, 30.0})
        for (int side : {-1, 1}) {
          const AttentionCase c = near_midpoint(t, aim, 0.37 + 0.1 * n++ / 36, 100, side, cap);
          CrStats st;
          EXPECT_EQ(difference(t, c, &st), "");
          EXPECT_GT(st.mpfr, 0) << "a row 2^-100 from a boundary was certified by the fast level";
          all += st;
        }
  std::printf("adversarial rows: %lld outputs, fallback fraction %.3f\n",
              static_cast<long long>(all.elements), all.fallback_fraction());
}

namespace {

AttentionCase gaussian_case(std::int64_t sq, std::int64_t sk, std::int64_t d, std::int64_t heads,
                            std::uint64_t seed) {
  AttentionCase c;
  c.seqlen_q = sq;
  c.seqlen_k = sk;
  c.d = c.dv = d;
  c.heads_q = c.heads_kv = heads;
  std::mt19937_64 g(seed);
  std::normal_distribution<double> N(0, 1);
  for (std::int64_t i = 0; i < sq * heads * d; ++i) c.q.push_back(static_cast<float>(N(g)));
  for (std::int64_t i = 0; i < sk * heads * d; ++i) c.k.push_back(static_cast<float>(N(g)));
  for (std::int64_t i = 0; i < sk * heads * d; ++i) c.v.push_back(static_cast<float>(N(g)));
  c.scale = static_cast<float>(1 / std::sqrt(static_cast<double>(d)));
  return c;
}

}  // namespace

// The MPFR-only path is attention_exact's row rounded once: against
// attention_exact's doubles rounded again, every feature. They are equal
// but where the double sits on a rounding boundary of t, where rounding it
// again is double rounding: there the MPFR path may give either neighbour.
// Random doubles land there about 2^-29 of the time, but not only at random:
// with adaptive attention and large logits the lse is a half-integer plus a
// term below 2^-53 (seen: exact 136.5 + tiny, bfloat16 137, the double 136.5
// ties to 136), so the boundary is tested, not assumed away.
RC_GTEST_PROP(AttentionCorrectlyRounded, MpfrOnlyPathIsTheExactReferenceRounded, ()) {
  sa::props::AttentionShapes shapes = small_shapes();
  shapes.max_work = 2e4;
  const AttnType in = *rc::gen::element(AttnType::float32, AttnType::bfloat16, AttnType::fp8_e4m3);
  const auto p = *sa::props::detail::gen_attention(sa::is_fp8(in), shapes);
  AttentionCase c = sa::props::detail::materialise(p, in);
  c.adaptive = *rc::gen::inRange(0, 3) == 0;
  const DType t = *rc::gen::element(DType::float32, DType::bfloat16, DType::float16);
  CrOptions mo;
  mo.path = RefPath::mpfr_only;
  const auto a = sa::ref::attention_rounded(t, c, mo);
  const auto e = sa::ref::attention_exact(c);
  auto check = [&](const std::vector<double>& x, const std::vector<double>& y) {
    RC_ASSERT(x.size() == y.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      const double below = sa::ref::fast::round_double(t, std::nextafter(y[i], -INFINITY)),
                   above = sa::ref::fast::round_double(t, std::nextafter(y[i], INFINITY));
      if (std::isfinite(y[i]) && !same(below, above))  // y on a boundary: either side
        RC_ASSERT(same(x[i], below) || same(x[i], above));
      else
        RC_ASSERT(same(x[i], sa::ref::fast::round_double(t, y[i])));
    }
  };
  check(a.out, e.out);
  check(a.lse, e.lse);
  check(a.entropy, e.entropy);
  check(a.beta, e.beta);
}

// Rows the fast path sends to MPFR by design, and rows it answers exactly:
// NaN inputs, every key masked (with and without a sink), a sink alone, one
// key alone, the adaptive temperature, scores near 1e30, a zero v_descale,
// a float64 target, values all zero, equal scores with cancelling values.
TEST(AttentionCorrectlyRounded, SpecialRowsAreBitIdentical) {
  const AttentionCase base = gaussian_case(3, 5, 4, 2, 7);
  std::vector<std::pair<std::string, AttentionCase>> cases;
  auto add = [&](const std::string& name, auto&& edit) {
    AttentionCase c = base;
    edit(c);
    cases.emplace_back(name, c);
  };
  add("plain", [](AttentionCase&) {});
  add("nan q", [](AttentionCase& c) { c.q[5] = std::numeric_limits<float>::quiet_NaN(); });
  add("inf v", [](AttentionCase& c) { c.v[3] = std::numeric_limits<float>::infinity(); });
  add("all masked", [](AttentionCase& c) { c.key_padding_mask.assign(5, 0); });
  add("all masked, sink", [](AttentionCase& c) {
    c.key_padding_mask.assign(5, 0);
    c.sinks = {0.25f, -3.0f};
  });
  add("one key", [](AttentionCase& c) { c.key_padding_mask = {0, 0, 1, 0, 0}; });
  add("one key, -0 value", [](AttentionCase& c) {
    c.key_padding_mask = {0, 0, 1, 0, 0};
    for (std::size_t i = 0; i < c.v.size(); ++i) c.v[i] = -0.0f;
  });
  add("sink above all", [](AttentionCase& c) { c.sinks = {200.0f, 1.0f}; });
  add("causal top-left", [](AttentionCase& c) {
    c.causal = true;
    c.top_left = true;
  });
  add("adaptive", [](AttentionCase& c) { c.adaptive = true; });
  add("huge scores", [](AttentionCase& c) {
    for (auto& x : c.q) x *= 1e15f;
  });
  add("one dominant key", [](AttentionCase& c) {
    for (std::size_t i = 0; i < 8; ++i) c.k[i] *= 100.0f;
  });
  add("values zero", [](AttentionCase& c) {
    for (auto& x : c.v) x = 0.0f;
  });
  add("equal scores, cancelling values", [](AttentionCase& c) {
    for (auto& x : c.k) x = 0.5f;
    for (std::size_t i = 0; i < c.v.size(); ++i) c.v[i] = (i / 8) % 2 ? -1.5f : 1.5f;
    c.seqlen_k = 4;
    c.k.resize(4 * 2 * 4);
    c.v.resize(4 * 2 * 4);
  });
  add("fp8 descales", [](AttentionCase& c) {
    c.qkv = AttnType::fp8_e4m3;
    c.out_type = AttnType::bfloat16;
    for (auto& x : c.q) x = sa::ref::round_to(DType::bfloat16, Mp(x));  // any float value
    c.q_descale = 0.375f;
    c.k_descale = 2.0f;
    c.v_descale = 0.5f;
  });
  add("zero v_descale", [](AttentionCase& c) {
    c.qkv = AttnType::fp8_e5m2;
    c.v_descale = 0.0f;
  });
  add("softcap tiny scores", [](AttentionCase& c) {
    c.softcap = 50;
    for (auto& x : c.q) x *= 1e-12f;
  });
  add("softcap saturated", [](AttentionCase& c) {
    c.softcap = 2;
    for (auto& x : c.q) x *= 1000.0f;
  });
  add("alibi, window, sinks", [](AttentionCase& c) {
    c.alibi_slopes = {0.5f, 0.0625f};
    c.window_left = 1;
    c.window_right = 0;
    c.sinks = {-1.0f, 2.0f};
  });
  for (const auto& [name, c] : cases)
    for (DType t : {DType::float32, DType::bfloat16, DType::float16, DType::float64})
      EXPECT_EQ(difference(t, c), "") << name << " target " << sa::name_of(t);
}

// On plain gaussian rows nothing falls back: a decoding-like row (1 query x
// 4096 keys x d = 128) and a small prefill, float32 and bfloat16 targets.
TEST(AttentionCorrectlyRounded, NoFallbackOnPlainRows) {
  for (const auto& c : {gaussian_case(1, 4096, 128, 1, 11), gaussian_case(16, 64, 64, 2, 12)})
    for (DType t : {DType::float32, DType::bfloat16}) {
      CrStats st;
      EXPECT_EQ(difference(t, c, &st), "") << c.describe();
      EXPECT_EQ(st.mpfr, 0) << c.describe();
    }
}

// ---------------------------------------------------------------- issue 31
// Regression tests: each case's correctly rounded value is known in closed
// form, and both paths (fast, MPFR-only) must return it.

namespace {

// One query row, d = 1, keys with scores scale * q * k_j, values v (dv = 1).
AttentionCase one_row(float q, std::vector<float> k, std::vector<float> v, double cap) {
  AttentionCase c;
  c.seqlen_q = 1;
  c.seqlen_k = static_cast<std::int64_t>(k.size());
  c.d = c.dv = 1;
  c.q = {q};
  c.k = std::move(k);
  c.v = std::move(v);
  c.softcap = cap;
  c.scale = 1.0;
  return c;
}

sa::ref::AttentionRounded both(DType t, const AttentionCase& c, RefPath path) {
  CrOptions o;
  o.path = path;
  return sa::ref::attention_rounded(t, c, o);
}

}  // namespace

// Softcap of a negative score below 2^-30 in magnitude: the capped score is
// negative. One key, q = -2^-40, k = 1, softcap 1: lse = tanh(-2^-40) rounds
// to -2^-40 in float32 (the fast level returned +2^-40: its small-argument
// branch negated a tanh that already carried the sign).
TEST(AttentionCorrectlyRoundedIssue31, SoftcapTinyNegativeScoreKeepsItsSign) {
  for (RefPath path : {RefPath::fast, RefPath::mpfr_only}) {
    const auto r = both(DType::float32, one_row(-0x1p-40f, {1.0f}, {0.5f}, 1.0), path);
    EXPECT_EQ(r.lse[0], -0x1p-40) << (path == RefPath::fast ? "fast" : "MPFR-only");
    // Two keys, scores -2^-40 and -2^-35 (both capped below 2^-30): lse =
    // log(e^tanh(-2^-40) + e^tanh(-2^-35)), computed here at 512 bits.
    const AttentionCase c2 = one_row(-0x1p-40f, {1.0f, 32.0f}, {0.5f, 2.0f}, 1.0);
    const auto r2 = both(DType::float32, c2, path);
    const sa::ref::PrecisionScope prec(512);
    const Mp s1 = tanh(Mp(-0x1p-40)), s2 = tanh(Mp(-0x1p-35));
    const Mp S = exp(s1) + exp(s2);
    EXPECT_EQ(r2.lse[0], sa::ref::round_to(DType::float32, Mp(log(S))));
    EXPECT_EQ(r2.out[0],
              sa::ref::round_to(DType::float32, Mp((exp(s1) * Mp(0.5) + exp(s2) * Mp(2)) / S)));
  }
}

// Saturated softcap: keys with raw scores 100 and 200, softcap 1, so the
// capped scores are 1 - tau_100 < 1 - tau_200 (tau_y = 2 / (e^(2y) + 1),
// ~2^-288 and ~2^-576: both round to 1 at 256 bits). Values 1 (at 100) and
// 1 + 2^-23 (at 200): out = 1 + 2^-24 + (a positive ~2^-314), just above
// the float32 midpoint 1 + 2^-24, so it rounds to 1 + 2^-23 (the 256-bit
// MPFR row tied the scores and rounded the midpoint to even, 1). Mirrored
// with negative scores -100 and -200, where -100 is now the larger score.
TEST(AttentionCorrectlyRoundedIssue31, SaturatedSoftcapDecidesAMidpointBySaturation) {
  const float one_up = 1.0f + 0x1p-23f;
  for (RefPath path : {RefPath::fast, RefPath::mpfr_only}) {
    const char* p = path == RefPath::fast ? "fast" : "MPFR-only";
    const auto a = both(DType::float32, one_row(1.0f, {100.0f, 200.0f}, {1.0f, one_up}, 1.0), path);
    EXPECT_EQ(a.out[0], static_cast<double>(one_up)) << p;
    const auto b =
        both(DType::float32, one_row(1.0f, {-100.0f, -200.0f}, {one_up, 1.0f}, 1.0), path);
    EXPECT_EQ(b.out[0], static_cast<double>(one_up)) << p;
    // The other side: the larger score holds 1, so out is just below the
    // midpoint and rounds down to 1.
    const auto d = both(DType::float32, one_row(1.0f, {100.0f, 200.0f}, {one_up, 1.0f}, 1.0), path);
    EXPECT_EQ(d.out[0], 1.0) << p;
  }
}

// Every visible key holds the same value v: out = v * v_descale exactly,
// whatever the weights. fp8 e5m2, v = 0.75, v_descale = 1.7f: 0.75 * 1.7f
// = 21390951 * 2^-24 (25 bits), a float32 midpoint between mantissas
// 10695475 and 10695476; ties to even gives 10695476. (The MPFR row summed
// the rounded weights p_j v_j and left the tie to its last bits: 10695475.)
TEST(AttentionCorrectlyRoundedIssue31, EqualValuesGiveTheExactProductWithTheDescale) {
  const Mp exact = Mp(0.75) * Mp(1.7f);
  const double want = sa::ref::round_to(DType::float32, exact);
  int e;
  EXPECT_EQ(std::ldexp(std::frexp(want, &e), 24), 10695476.0);
  for (int keys : {2, 3, 5, 9})
    for (bool sink : {false, true}) {
      AttentionCase c;
      c.qkv = AttnType::fp8_e5m2;
      c.out_type = AttnType::float32;
      c.seqlen_q = 2;
      c.seqlen_k = keys;
      c.d = 2;
      c.dv = 3;
      c.q = {0.5f, -1.0f, 1.5f, 0.25f};
      for (int j = 0; j < keys; ++j) {
        c.k.push_back(static_cast<float>(j % 4) - 1.5f);
        c.k.push_back(j % 3 == 0 ? 0.75f : -0.5f);
        for (int x = 0; x < 3; ++x) c.v.push_back(0.75f);
      }
      c.v_descale = 1.7f;
      c.q_descale = 1.25f;
      if (sink) c.sinks = {-3.0f};
      for (RefPath path : {RefPath::fast, RefPath::mpfr_only}) {
        const auto r = both(DType::float32, c, path);
        const char* p = path == RefPath::fast ? "fast" : "MPFR-only";
        for (std::size_t i = 0; i < r.out.size(); ++i) {
          if (!sink) {
            EXPECT_EQ(r.out[i], want) << p << " keys " << keys << " element " << i;
            continue;
          }
          // With a sink the keys share 1 - p_sink: out = 1.275 (1 - p_sink).
          const auto x = sa::ref::attention_exact(c);
          EXPECT_EQ(r.out[i], sa::ref::fast::round_double(DType::float32, x.out[i]))
              << p << " keys " << keys << " element " << i << " (with a sink)";
        }
      }
    }
}

// Equal scores and a sink level with them: the n keys share n / (n + 1) of
// the weight exactly (every e = 1), so out = v_descale v n / (n + 1), which
// is a float32 midpoint for these values: n = 2, v = 1.25, v_descale =
// 3m 2^-23 with m = 3355445 gives 5m 2^-24 (5m = 16777225, 25 bits, odd);
// n = 4, v = 1.75, v_descale = 5m 2^-23 with m = 2396747 gives 7m 2^-24
// (7m = 16777229); m + 2 likewise. (The former sum of p_j v_j with p_j =
// 1/3 or 1/5 rounded passed these too: its last product snapped onto the
// short midpoint. This guards the exact formulation, it is not a
// regression test.)
TEST(AttentionCorrectlyRoundedIssue31, EqualScoresWithASinkShareTheWeightExactly) {
  struct Row {
    int n;
    float v, vd;
  };
  // Each n twice, with the tie going down to even and up to even (m's
  // residue mod 4), so that a computation that lands on either side of the
  // midpoint by rounding noise fails one of them.
  for (const Row& w : {Row{2, 1.25f, std::ldexp(3.0f * 3355445.0f, -23)},
                       Row{2, 1.25f, std::ldexp(3.0f * 3355447.0f, -23)},
                       Row{4, 1.75f, std::ldexp(5.0f * 2396747.0f, -23)},
                       Row{4, 1.75f, std::ldexp(5.0f * 2396749.0f, -23)}}) {
    const int n = w.n;
    AttentionCase c;
    c.qkv = AttnType::fp8_e5m2;
    c.out_type = AttnType::float32;
    c.seqlen_q = 1;
    c.seqlen_k = n;
    c.d = c.dv = 1;
    c.q = {1.0f};
    c.k.assign(static_cast<std::size_t>(n), 0.5f);
    c.v.assign(static_cast<std::size_t>(n), w.v);
    c.v_descale = w.vd;
    c.sinks = {0.5f};  // equal to every score
    const Mp exact = Mp(w.v) * Mp(w.vd) * Mp(n) / Mp(n + 1);
    const double want = sa::ref::round_to(DType::float32, exact);
    EXPECT_TRUE(sa::ref::rounding_undecided(DType::float32, exact, 200))
        << "n = " << n << ": not a midpoint, the test would not test anything";
    for (RefPath path : {RefPath::fast, RefPath::mpfr_only})
      EXPECT_EQ(both(DType::float32, c, path).out[0], want)
          << "n = " << n << (path == RefPath::fast ? " fast" : " MPFR-only");
  }
}

// Issue 31 (found by the 256/512-bit cross-check at 400 cases, small_int
// with sinks): out is exactly 0 when the values of each group of keys with
// equal scores cancel (here two groups, values a, -a and b, -b, and a
// sink). Summing e_j v_j term by term left the sign of the result to the
// working precision's rounding noise (+0 or -0, differing between 256 and
// 512 bits); out must be +0, on both paths and at both precisions.
TEST(AttentionCorrectlyRoundedIssue31, OutThatCancelsExactlyIsPlusZero) {
  std::mt19937_64 g(31);
  std::uniform_int_distribution<int> I(-6, 6);
  int checked = 0;
  for (int trial = 0; trial < 40; ++trial) {
    AttentionCase c;
    c.seqlen_q = 1;
    c.seqlen_k = 4;
    c.d = 1;
    c.dv = 2;
    c.q = {1.0f};
    const float k1 = static_cast<float>(I(g)) / 4, k2 = static_cast<float>(I(g)) / 4 + 0.125f;
    c.k = {k1, k2, k1, k2};  // groups {0, 2} and {1, 3}
    const float a = static_cast<float>(I(g)) + 0.5f, b = static_cast<float>(I(g)) - 0.25f;
    c.v = {a, 1.0f, b, 2.0f, -a, -1.0f, -b, -2.0f};
    c.sinks = {static_cast<float>(I(g)) / 3};
    for (DType t : {DType::float32, DType::bfloat16})
      for (RefPath path : {RefPath::fast, RefPath::mpfr_only})
        for (unsigned bits : {256u, 512u}) {
          const sa::ref::PrecisionScope prec(bits);
          const auto r = both(t, c, path);
          for (int x = 0; x < 2; ++x)
            EXPECT_TRUE(same(r.out[static_cast<std::size_t>(x)], 0.0))
                << "trial " << trial << " x " << x << " " << bits << " bits: " << r.out[x];
          ++checked;
        }
  }
  EXPECT_EQ(checked, 320);
}

// CI (stop 47, a random small_int case, fp8 e5m2 with block scales): the
// row's live keys all had v_x = 0, and one key, 1.4e5 below the top score,
// v_x < 0. Its weight's bound (2^-1074) times |v_x| underflowed to 0, so the
// fast level took the row for one with nothing cut and certified out = +0;
// the true out is a negative number far below the smallest subnormal, whose
// rounding is -0 (the MPFR-only path's answer). Each cut key's share of the
// bound is now rounded up. Here: three live keys with v_0 = 0 and a key
// 2052 below the top (its bound is 2^-1074), v of either sign, vd of either
// sign (out_1 = vd exactly checks the rest of the row).
TEST(AttentionCorrectlyRoundedIssue31, AKeyCutOffFarBelowGivesOutItsSign) {
  int checked = 0;
  for (const float v1 : {-0.5f, 0.25f, -0x1p-9f})
    for (const float vd : {1.0f, -2.0f}) {
      AttentionCase c;
      c.seqlen_q = 1;
      c.seqlen_k = 4;
      c.d = 1;
      c.dv = 2;
      c.qkv = sa::AttnType::fp8_e4m3;  // descales apply to quantised inputs
      c.q = {8.0f};
      c.k = {0.25f, 0.5f, -0.125f, -256.0f};
      // out_0: only the cut key's v is nonzero.
      c.v = {0.0f, 1.0f, 0.0f, 1.0f, 0.0f, 1.0f, v1, 1.0f};
      c.v_descale = vd;
      const bool negative = (v1 < 0) != (vd < 0);
      for (DType t : {DType::float32, DType::bfloat16, DType::float16})
        for (RefPath path : {RefPath::fast, RefPath::mpfr_only}) {
          const auto r = both(t, c, path);
          EXPECT_TRUE(same(r.out[0], negative ? -0.0 : 0.0))
              << "v " << v1 << " vd " << vd << " " << sa::name_of(t) << ": " << r.out[0];
          EXPECT_EQ(r.out[1], static_cast<double>(vd));
          ++checked;
        }
    }
  EXPECT_EQ(checked, 36);
}
