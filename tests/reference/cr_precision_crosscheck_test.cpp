// An independent-precision cross-check of every correctly rounded reference
// (issue 31): each output of the default path (Ziv's fast levels, MPFR at
// 256 bits for what they leave) against the MPFR-only path evaluated at 512
// bits, bit for bit, on the suite's generators: softmax, log-softmax,
// log-sum-exp, both entropies and the adaptive softmax on every row
// generator (properties/generators.hpp), attention forward on the
// attention_v2 generator (every input type and feature, a third adaptive),
// attention backward on the backward generator.
//
// Claim: round_to(t, x_256) == round_to(t, x_512) wherever the references
// claim correct rounding, i.e. 256 bits were enough for every output drawn.
// A reference whose value depends on the last bits of its working precision
// (a saturated tanh, a tie decided by rounding noise, an absolute error
// where a relative one is needed) differs here. Bound: none, equality.
//
// Label `long` (reference_cr_crosscheck_test in tests/reference/CMakeLists.txt).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>

#include "core/attention_case.hpp"
#include "properties/attention_backward_cases.hpp"
#include "properties/attention_cases.hpp"
#include "properties/generators.hpp"
#include "reference/adaptive_cr.hpp"
#include "reference/attention_backward_cr.hpp"
#include "reference/attention_cr.hpp"
#include "reference/entropy_cr.hpp"
#include "reference/log_softmax_cr.hpp"
#include "reference/mpfr.hpp"
#include "reference/softmax_cr.hpp"
#include "tests/reference/attention_cr_test_util.hpp"

using sa::AttentionCase;
using sa::AttnType;
using sa::DType;
using sa::ref::CrOptions;
using sa::ref::RefPath;
using sa::test::cmp;
using sa::test::output_dtype;
using sa::test::same;

namespace {

constexpr unsigned kHigh = 512;
constexpr DType kAllTargets[] = {DType::float32, DType::bfloat16, DType::float16, DType::float64};

CrOptions mpfr_only() {
  CrOptions o;
  o.path = RefPath::mpfr_only;
  return o;
}

std::string cmp1(const char* what, double a, double b) {
  return cmp(what, std::vector<double>{a}, std::vector<double>{b});
}

// "" when every row function agrees at 256 (default path) and 512 bits.
std::string rows_differ(DType t, const std::vector<double>& l, double theta) {
  std::string d;
  auto note = [&](const std::string& s) {
    if (d.empty()) d = s;
  };
  const auto s256 = sa::ref::softmax_rounded(t, l, theta);
  const auto ls256 = sa::ref::log_softmax_rounded(t, l, theta);
  const double lse256 = sa::ref::log_sum_exp_rounded(t, l, theta);
  const double h256 = sa::ref::shannon_entropy_rounded(t, l, theta);
  const double hp256 = sa::ref::paper_entropy_rounded(t, l, theta);
  const auto a256 = sa::ref::adaptive_softmax_rounded(t, l, theta);
  const sa::ref::PrecisionScope prec(kHigh);
  note(cmp("softmax", s256, sa::ref::softmax_rounded(t, l, theta, mpfr_only())));
  note(cmp("log_softmax", ls256, sa::ref::log_softmax_rounded(t, l, theta, mpfr_only())));
  note(cmp1("log_sum_exp", lse256, sa::ref::log_sum_exp_rounded(t, l, theta, mpfr_only())));
  note(cmp1("shannon_entropy", h256, sa::ref::shannon_entropy_rounded(t, l, theta, mpfr_only())));
  note(cmp1("paper_entropy", hp256, sa::ref::paper_entropy_rounded(t, l, theta, mpfr_only())));
  const auto a512 = sa::ref::adaptive_softmax_rounded(
      t, l, theta, sa::ref::EntropyDefinition::paper_eps, mpfr_only());
  note(cmp("adaptive.weights", a256.weights, a512.weights));
  note(cmp1("adaptive.beta", a256.beta, a512.beta));
  note(cmp1("adaptive.entropy", a256.entropy, a512.entropy));
  return d;
}

sa::props::AttentionShapes shapes(double max_work) {
  sa::props::AttentionShapes s;
  s.lengths = {{1, 1}, {7, 5}, {17, 40}, {40, 17}, {65, 64}, {1, 239}, {2, 500}};
  s.max_work = max_work;
  return s;
}

}  // namespace

RC_GTEST_PROP(CorrectlyRoundedAtTwoPrecisions, RowFunctionsOnEveryGenerator, ()) {
  sa::props::RowGenOptions o;
  o.temperatures = {1.0, 0.7, 3.0};
  const auto p = *sa::props::gen_rows(o);
  const DType in = *rc::gen::element(DType::float32, DType::bfloat16);
  const auto b = sa::props::materialise(p, in);
  for (std::int64_t r = 0; r < b.rows; ++r) {
    const auto row = b.row(r);
    const std::vector<double> l(row.begin(), row.end());
    for (DType t : kAllTargets) {
      const std::string d = rows_differ(t, l, p.temperature);
      if (!d.empty())
        RC_FAIL(d + " (256 then 512 bits), row of " + std::to_string(l.size()) + ", target " +
                sa::name_of(t));
    }
  }
}

RC_GTEST_PROP(CorrectlyRoundedAtTwoPrecisions, AttentionForwardOnEveryGenerator, ()) {
  const AttnType in = *rc::gen::element(AttnType::float32, AttnType::bfloat16, AttnType::float16,
                                        AttnType::fp8_e4m3, AttnType::fp8_e5m2);
  const auto p = *sa::props::detail::gen_attention(sa::is_fp8(in), shapes(5e4));
  AttentionCase c = sa::props::detail::materialise(p, in);
  c.adaptive = *rc::gen::inRange(0, 3) == 0;
  const DType other = *rc::gen::element(DType::float32, DType::bfloat16, DType::float16);
  for (DType t : {output_dtype(c.out_type), other}) {
    const auto a = sa::ref::attention_rounded(t, c);
    const sa::ref::PrecisionScope prec(kHigh);
    const auto b = sa::ref::attention_rounded(t, c, mpfr_only());
    for (const auto& s : {cmp("out", a.out, b.out), cmp("lse", a.lse, b.lse),
                          cmp("entropy", a.entropy, b.entropy), cmp("beta", a.beta, b.beta)})
      if (!s.empty())
        RC_FAIL(s + " (256 then 512 bits) on " + c.describe() + " (" +
                sa::props::detail::describe(p) + "), target " + sa::name_of(t));
  }
}

RC_GTEST_PROP(CorrectlyRoundedAtTwoPrecisions, AttentionBackwardOnEveryGenerator, ()) {
  const AttnType in = *rc::gen::element(AttnType::float32, AttnType::bfloat16, AttnType::float16);
  const auto p = *sa::props::detail::gen_bwd(shapes(2e4));
  std::vector<float> dout;
  const AttentionCase c = sa::props::detail::make_case(p, in, &dout);
  const DType other = *rc::gen::element(DType::float32, DType::bfloat16, DType::float16);
  for (DType t : {output_dtype(c.out_type), other}) {
    const auto a = sa::ref::attention_backward_rounded(t, c, dout);
    const sa::ref::PrecisionScope prec(kHigh);
    const auto b = sa::ref::attention_backward_rounded(t, c, dout, mpfr_only());
    for (const auto& s : {cmp("dq", a.dq, b.dq), cmp("dk", a.dk, b.dk), cmp("dv", a.dv, b.dv),
                          cmp("dsinks", a.dsinks, b.dsinks)})
      if (!s.empty()) {
        std::string dbg;
        for (std::size_t i = 0; i < a.dq.size(); ++i)
          if (!same(a.dq[i], b.dq[i])) {
            const auto e512 = sa::ref::attention_backward_exact(c, dout);
            const std::int64_t rid = static_cast<std::int64_t>(i) / c.d,
                               x = static_cast<std::int64_t>(i) % c.d;
            char buf[200];
            std::snprintf(buf, sizeof buf, " exact512 %.17g; k[.,x]:", e512.dq[i]);
            dbg += buf;
            for (std::int64_t j = 0; j < c.total_k(); ++j)
              dbg += " " +
                     std::to_string(c.k[(j * c.heads_kv + c.kv_head(rid % c.heads_q)) * c.d + x]);
            break;
          }
        RC_FAIL(s + dbg + " (256 then 512 bits) on " + c.describe() + " (" +
                sa::props::detail::describe(p) + "), target " + sa::name_of(t));
      }
  }
}
