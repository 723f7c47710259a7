// Metamorphic properties: relations between the kernel's own outputs that
// need no reference (sum to one, shift invariance, permutation equivariance,
// monotonicity, T1 bounds, entropy range and temperature monotonicity (T4),
// adaptive beta (T5), streamed vs two-pass entropy and merge algebra (T6)).
// Each bound is the sum of the ulp-rule budgets (budgets.hpp) of the runs
// compared, evaluated at the kernel's own outputs.
//
// One function per property (issue 30), each judging one case handed to it
// in a MetaCtx; the runner (row_property) draws each case once from the
// property's own seed, materialises it once, calls the function and shrinks.
// (metamorphic.split_kv is judged with attention, properties/attention.cpp.)
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

#include "core/case_id.hpp"
#include "properties/budgets.hpp"
#include "properties/suite_internal.hpp"
#include "reference/rounding.hpp"
#include "reference/softmax.hpp"
#include "theory/adaptive_temperature.hpp"
#include "theory/dispersion.hpp"
#include "theory/streamed_entropy.hpp"

#include "properties/checks.hpp"
#include "properties/reference_values.hpp"

namespace sa::props::detail {
namespace {

using budget::u32;

Check same(DType out, double got, double expect, double abs_budget, const std::string& where) {
  const std::string w = where + ": " + fmt(got) + " vs " + fmt(expect);
  if (!std::isfinite(expect) || !std::isfinite(got)) {
    const bool ok = (std::isnan(expect) && std::isnan(got)) || got == expect;
    return make_check(ok ? 0.0 : INFINITY, 0.0, w);
  }
  const double u = budget::ulp(out, expect);
  return make_check(std::abs(got - expect) / u, abs_budget / u, w);
}

bool has_nan(std::span<const float> r) {
  return std::any_of(r.begin(), r.end(), [](float x) { return std::isnan(x); });
}

double out_round(DType t, double x) {
  return budget::ulp(DType::float32, x) + budget::store_half_ulp(t, x) +
         (active_conventions().double_rounding ? budget::double_rounding_extra(t, x) : 0.0);
}

// One case of one metamorphic property: drawn (from the property's own seed)
// and materialised once by row_property, then handed to the property's
// function, which judges it into one Check.
struct MetaCtx {
  const Run& run;
  const Kernel& k;
  DType t;
  Op op;               // the operation judged (a property has one verdict per op)
  const RowParams& p;  // the drawn case
  const RowBatch& b;   // materialise(p, t): the logits of the case
};

// metamorphic.sum_to_one (softmax, adaptive_softmax): each row's weights sum
// to one (exactly zero for a fully masked row). Bound: the weights' relative
// error 4 + summation(n) + beta (delta/theta + theta term) [adaptive: + 2 beta
// max|z| for forming beta z] times |sum|, plus each weight's rounding to the
// output type (zero_floor for a live weight that underflowed) and n FLT_MIN
// (budgets.hpp); a failure within one more rounding of each weight names the
// double_rounding convention.
void sum_to_one(const MetaCtx& cx, Check& out) {
  const Kernel& k = cx.k;
  const DType t = cx.t;
  const Op op = cx.op;
  const RowParams& p = cx.p;
  const RowBatch& b = cx.b;
  std::vector<float> w, beta;
  if (op == Op::softmax)
    w = k.softmax(t, b, p.temperature);
  else {
    auto a = k.adaptive_softmax(t, b, p.temperature);
    w = std::move(a.weights);
    beta = std::move(a.beta);
  }
  for (std::int64_t r = 0; r < b.rows; ++r) {
    const auto row = b.row(r);
    if (has_nan(row)) continue;
    const budget::RowStats st = budget::stats(row, p.temperature);
    const double bt = beta.empty() ? 1.0 : std::max(1.0, double(beta[static_cast<std::size_t>(r)]));
    double sum = 0, round = 0, dr_extra = 0;
    for (std::int64_t j = 0; j < b.n; ++j) {
      const double x = w[static_cast<std::size_t>(r * b.stride + j)];
      sum += x;
      if (x != 0) {
        round += out_round(t, x);
        dr_extra += budget::double_rounding_extra(t, x);
      } else if (row[static_cast<std::size_t>(j)] != -INFINITY) {
        round += budget::zero_floor(t);  // a live weight that underflowed to 0
      }
    }
    const std::string where = "row " + std::to_string(r) + " sum";
    if (const Check ic = ieee_special_row(st, std::isnan(sum), where); ic.applicable) {
      out.worst(ic);
      continue;
    }
    if (st.live == 0) {
      out.worst(make_check(std::abs(sum), 0.0, where + " of a fully masked row: " + fmt(sum)));
      continue;
    }
    double rel =
        4.0 + budget::summation(double(st.live)) + bt * st.spread + bt * budget::theta_term(st);
    if (op == Op::adaptive_softmax) rel += 2.0 * bt * st.max_abs;  // rounding of beta * z
    const double bound = st.finite
                             ? rel * u32 * std::abs(sum) + round + double(st.live) * budget::flt_min
                             : round + 4 * u32;
    Check sc = make_check(std::abs(sum - 1.0), bound, where + " = " + fmt(sum));
    // Within one more rounding of each weight to the output type: a
    // double rounding the kernel does not declare (named, not excused).
    if (sc.fails() && !active_conventions().double_rounding && budget::low_precision(t) &&
        std::abs(sum - 1.0) <= bound + dr_extra)
      sc.convention = "double_rounding";
    out.worst(sc);
  }
}

// metamorphic.shift_invariance (softmax, log_softmax, logsumexp, entropy):
// adding a constant c exact in the dtype to every logit (logits snapped to a
// grid where every shifted value is exact; huge logits not applicable)
// changes no weight, log-weight or entropy, and moves lse by exactly c.
// Bound: twice the per-item budget (softmax_abs / log_softmax_abs), or the
// sum of the two runs' lse_abs / entropy_abs (budgets.hpp).
void shift_invariance(const MetaCtx& cx, Check& out) {
  const Kernel& k = cx.k;
  const DType t = cx.t;
  const Op op = cx.op;
  const RowParams& p = cx.p;
  RowBatch b = cx.b;
  // Shifts exact in the dtype for the generated logits (low precision: small ones).
  const double cs_f32[] = {1e4, -1e4, 64.0}, cs_low[] = {8.0, -8.0, 64.0};
  const double c = (budget::low_precision(t) ? cs_low : cs_f32)[p.aux % 3];
  double M = 0;
  for (float x : b.data)
    if (std::isfinite(x)) M = std::max(M, double(std::abs(x)));
  if (M > 1e6) return;  // not applicable: no exact shift of huge logits
  const double q = budget::ulp(t, 2.0 * (std::abs(c) + M + 1.0));
  RowBatch s = b;
  for (std::size_t i = 0; i < b.data.size(); ++i) {
    float& x = b.data[i];
    if (!std::isfinite(x)) {
      s.data[i] = x;
      continue;
    }
    x = static_cast<float>(std::round(double(x) / q) * q);
    s.data[i] = static_cast<float>(double(x) + c);
    if (to_dtype(t, double(x) + c) != double(x) + c || to_dtype(t, x) != x) return;
  }
  // restore the NaN padding semantics of both batches (pads are NaN already)
  const std::string cw = " (shift c = " + fmt(c) + ")";
  if (op == Op::softmax || op == Op::log_softmax) {
    const auto g0 = op == Op::softmax ? k.softmax(t, b) : k.log_softmax(t, b);
    const auto g1 = op == Op::softmax ? k.softmax(t, s) : k.log_softmax(t, s);
    for (std::int64_t r = 0; r < b.rows; ++r) {
      const budget::RowStats st = budget::stats(b.row(r), 1.0);
      for (std::int64_t j = 0; j < b.n; ++j) {
        const std::size_t x = static_cast<std::size_t>(r * b.stride + j);
        const double z = b.data[x];
        const double ref_v = std::abs(g0[x]) > std::abs(g1[x]) ? g0[x] : g1[x];
        double bud = 0;
        if (st.finite && std::isfinite(ref_v))
          bud = 2.0 * (op == Op::softmax ? budget::softmax_abs(t, st, z, ref_v)
                                         : budget::log_softmax_abs(t, st, z, ref_v));
        else if (std::isfinite(ref_v) && ref_v != 0)
          bud = 2.0 * out_round(t, ref_v);
        out.worst(same(t, g1[x], g0[x], bud,
                       "row " + std::to_string(r) + " item " + std::to_string(j) + cw));
      }
    }
  } else {
    const auto g0 = op == Op::logsumexp ? k.logsumexp(t, b) : k.entropy(t, b);
    const auto g1 = op == Op::logsumexp ? k.logsumexp(t, s) : k.entropy(t, s);
    for (std::int64_t r = 0; r < b.rows; ++r) {
      const budget::RowStats st = budget::stats(b.row(r), 1.0);
      const double v0 = g0[static_cast<std::size_t>(r)], v1 = g1[static_cast<std::size_t>(r)];
      const double expect = op == Op::logsumexp ? v0 + c : v0;
      double bud = 0;
      if (std::isfinite(expect)) {
        bud = st.finite ? (op == Op::logsumexp
                               ? budget::lse_abs(st, v0) + budget::lse_abs(st, v1)
                               : budget::entropy_abs(st, v0) + budget::entropy_abs(st, v1))
                        : 2.0 * out_round(DType::float32, expect);
      }
      out.worst(same(DType::float32, v1, expect, bud, "row " + std::to_string(r) + cw));
    }
  }
}

// metamorphic.permutation (softmax, logsumexp, entropy): permuting each row's
// logits (one permutation from the case's aux) permutes the weights and
// leaves lse and entropy unchanged. Bound: twice the budget of the larger
// output (softmax_abs, lse_abs, entropy_abs; budgets.hpp).
void permutation(const MetaCtx& cx, Check& out) {
  const Kernel& k = cx.k;
  const DType t = cx.t;
  const Op op = cx.op;
  const RowParams& p = cx.p;
  const RowBatch& b = cx.b;
  std::vector<std::int64_t> perm(static_cast<std::size_t>(b.n));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(p.aux);
  std::shuffle(perm.begin(), perm.end(), rng);
  RowBatch s = b;
  for (std::int64_t r = 0; r < b.rows; ++r)
    for (std::int64_t i = 0; i < b.n; ++i)
      s.data[static_cast<std::size_t>(r * b.stride + i)] =
          b.data[static_cast<std::size_t>(r * b.stride + perm[static_cast<std::size_t>(i)])];
  const double th = p.temperature;
  if (op == Op::softmax) {
    const auto g0 = k.softmax(t, b, th), g1 = k.softmax(t, s, th);
    for (std::int64_t r = 0; r < b.rows; ++r) {
      const budget::RowStats st = budget::stats(b.row(r), th);
      for (std::int64_t i = 0; i < b.n; ++i) {
        const std::size_t x1 = static_cast<std::size_t>(r * b.stride + i),
                          x0 = static_cast<std::size_t>(r * b.stride +
                                                        perm[static_cast<std::size_t>(i)]);
        const double v = std::max(std::abs(g0[x0]), std::abs(g1[x1]));
        double bud = 0;
        if (st.finite && std::isfinite(v))
          bud = 2.0 * budget::softmax_abs(t, st, b.data[x0] / th, v);
        else if (std::isfinite(v) && v != 0)
          bud = 2.0 * out_round(t, v);
        out.worst(same(t, g1[x1], g0[x0], bud,
                       "row " + std::to_string(r) + " item " + std::to_string(i) + " (from item " +
                           std::to_string(perm[static_cast<std::size_t>(i)]) + ")"));
      }
    }
  } else {
    const auto g0 = op == Op::logsumexp ? k.logsumexp(t, b, th) : k.entropy(t, b, th);
    const auto g1 = op == Op::logsumexp ? k.logsumexp(t, s, th) : k.entropy(t, s, th);
    for (std::int64_t r = 0; r < b.rows; ++r) {
      const budget::RowStats st = budget::stats(b.row(r), th);
      const double v0 = g0[static_cast<std::size_t>(r)], v1 = g1[static_cast<std::size_t>(r)];
      double bud = 0;
      if (std::isfinite(v0))
        bud = st.finite ? 2.0 * (op == Op::logsumexp ? budget::lse_abs(st, v0)
                                                     : budget::entropy_abs(st, v0))
                        : 2.0 * out_round(DType::float32, v0);
      out.worst(same(DType::float32, v1, v0, bud, "row " + std::to_string(r)));
    }
  }
}

// metamorphic.monotonicity (softmax): raising one logit (the case's aux picks
// it; by max(0.5, |x|/8), rounded to the dtype) does not lower its weight and
// does not raise any other. Bound: the sum of the two runs' softmax_abs of
// each weight (budgets.hpp); IEEE special rows by ieee_special_row.
void monotonicity(const MetaCtx& cx, Check& out) {
  const Kernel& k = cx.k;
  const DType t = cx.t;
  const RowParams& p = cx.p;
  const RowBatch& b = cx.b;
  RowBatch s = b;
  const std::int64_t kk = static_cast<std::int64_t>(p.aux % static_cast<std::uint64_t>(b.n));
  for (std::int64_t r = 0; r < b.rows; ++r) {
    float& x = s.data[static_cast<std::size_t>(r * b.stride + kk)];
    if (!std::isfinite(x)) continue;
    const float up = to_dtype(t, double(x) + std::max(0.5, std::abs(double(x)) / 8.0));
    if (std::isfinite(up) && up > x) x = up;
  }
  const double th = p.temperature;
  const auto g0 = k.softmax(t, b, th), g1 = k.softmax(t, s, th);
  for (std::int64_t r = 0; r < b.rows; ++r) {
    if (has_nan(b.row(r))) continue;
    const budget::RowStats s0 = budget::stats(b.row(r), th), s1 = budget::stats(s.row(r), th);
    if (!s0.finite) continue;
    {
      bool nan_out = false;
      for (std::int64_t j = 0; j < b.n; ++j) {
        const std::size_t x = static_cast<std::size_t>(r * b.stride + j);
        nan_out = nan_out || std::isnan(g0[x]) || std::isnan(g1[x]);
      }
      const Check ic =
          ieee_special_row(s0.live == 0 ? s0 : s1, nan_out, "row " + std::to_string(r));
      if (ic.applicable) {
        out.worst(ic);
        continue;
      }
    }
    for (std::int64_t j = 0; j < b.n; ++j) {
      const std::size_t x = static_cast<std::size_t>(r * b.stride + j);
      const double v = std::max(std::abs(g0[x]), std::abs(g1[x]));
      const double slack = budget::softmax_abs(t, s0, b.data[x] / th, v) +
                           budget::softmax_abs(t, s1, s.data[x] / th, v);
      const double viol = j == kk ? g0[x] - g1[x] : g1[x] - g0[x];
      out.worst(make_check(
          std::max(viol, 0.0), slack,
          "row " + std::to_string(r) + " item " + std::to_string(j) +
              (j == kk ? " (raised from " + fmt(b.data[x]) + " to " + fmt(s.data[x]) + ")" : "") +
              ": weight " + fmt(g0[x]) + " -> " + fmt(g1[x])));
    }
  }
}

// metamorphic.t1_bounds (softmax): every weight of the kernel's own softmax
// lies within the dispersion bounds of Lemma 2.1 (theory/dispersion.hpp, T1)
// for the row's live count and spread delta/theta. Bound: the weight's
// softmax_abs at the larger of it and the upper bound (budgets.hpp).
void t1_bounds(const MetaCtx& cx, Check& out) {
  const Kernel& k = cx.k;
  const DType t = cx.t;
  const RowParams& p = cx.p;
  const RowBatch& b = cx.b;
  const double th = p.temperature;
  const auto g = k.softmax(t, b, th);
  for (std::int64_t r = 0; r < b.rows; ++r) {
    const budget::RowStats st = budget::stats(b.row(r), th);
    if (!st.finite || st.live == 0) continue;
    const auto bd = theory::dispersion_bounds<double>(double(st.live), st.spread, 1.0);
    for (std::int64_t j = 0; j < b.n; ++j) {
      const std::size_t x = static_cast<std::size_t>(r * b.stride + j);
      if (b.data[x] == -INFINITY) continue;
      const double v = g[x];
      const double slack = budget::softmax_abs(t, st, b.data[x] / th, std::max(v, bd.upper));
      const double viol = std::max(v - bd.upper, bd.lower - v);
      out.worst(make_check(std::isnan(v) ? NAN : std::max(viol, 0.0), slack,
                           "row " + std::to_string(r) + " item " + std::to_string(j) + ": weight " +
                               fmt(v) + " vs T1 [" + fmt(bd.lower) + ", " + fmt(bd.upper) +
                               "] (n=" + std::to_string(st.live) +
                               ", delta/theta=" + fmt(st.spread) + ")"));
    }
  }
}

// metamorphic.entropy_range (entropy): 0 <= H <= log(live items) (T4), and
// H = 0 exactly for a fully masked row. Bound: entropy_abs (budgets.hpp);
// rows with infinite logits: H's float32 rounding + 4 u.
void entropy_range(const MetaCtx& cx, Check& out) {
  const Kernel& k = cx.k;
  const DType t = cx.t;
  const RowParams& p = cx.p;
  const RowBatch& b = cx.b;
  const auto H = k.entropy(t, b, p.temperature);
  for (std::int64_t r = 0; r < b.rows; ++r) {
    if (has_nan(b.row(r))) continue;
    const budget::RowStats st = budget::stats(b.row(r), p.temperature);
    const double h = H[static_cast<std::size_t>(r)];
    const std::string w = "row " + std::to_string(r) + ": H = " + fmt(h) +
                          ", log n = " + fmt(std::log(double(std::max<std::int64_t>(1, st.live))));
    if (st.live == 0) {
      out.worst(make_check(h == 0 ? 0.0 : INFINITY, 0.0, w + " (fully masked: H must be 0)"));
      continue;
    }
    const double viol = std::max(-h, h - std::log(double(st.live)));
    const double bud =
        st.finite ? budget::entropy_abs(st, h) : out_round(DType::float32, h) + 4 * u32;
    out.worst(make_check(std::isnan(h) ? NAN : std::max(viol, 0.0), bud, w));
  }
}

// metamorphic.entropy_temperature (entropy): H at theta does not exceed H at
// 1.5 theta (T4: entropy rises with the temperature). Bound: the sum of the
// two runs' entropy_abs (budgets.hpp). Not applicable to a kernel declaring
// no_temperature (run_metamorphic emits the skip).
void entropy_temperature(const MetaCtx& cx, Check& out) {
  const Kernel& k = cx.k;
  const DType t = cx.t;
  const RowParams& p = cx.p;
  const RowBatch& b = cx.b;
  const double t1 = p.temperature, t2 = p.temperature * 1.5;
  const auto H1 = k.entropy(t, b, t1), H2 = k.entropy(t, b, t2);
  for (std::int64_t r = 0; r < b.rows; ++r) {
    if (has_nan(b.row(r))) continue;
    const budget::RowStats s1 = budget::stats(b.row(r), t1), s2 = budget::stats(b.row(r), t2);
    const double h1 = H1[static_cast<std::size_t>(r)], h2 = H2[static_cast<std::size_t>(r)];
    const double bud = s1.finite ? budget::entropy_abs(s1, h1) + budget::entropy_abs(s2, h2)
                                 : 2 * out_round(DType::float32, h1);
    out.worst(make_check(std::isnan(h1) || std::isnan(h2) ? NAN : std::max(h1 - h2, 0.0), bud,
                         "row " + std::to_string(r) + ": H(theta=" + fmt(t1) + ") = " + fmt(h1) +
                             " > H(theta=" + fmt(t2) + ") = " + fmt(h2)));
  }
}

// metamorphic.adaptive_beta (adaptive_softmax): beta >= 1 and beta = 1 when
// H <= 0.5 (exactly), and beta = beta(H) of the kernel's own H (T5,
// theory/adaptive_temperature.hpp). Bound: beta_abs at one float32 ulp of H
// (budgets.hpp) plus one ulp of beta(H).
void adaptive_beta(const MetaCtx& cx, Check& out) {
  const Kernel& k = cx.k;
  const DType t = cx.t;
  const RowParams& p = cx.p;
  const RowBatch& b = cx.b;
  const auto a = k.adaptive_softmax(t, b, p.temperature);
  for (std::int64_t r = 0; r < b.rows; ++r) {
    if (has_nan(b.row(r))) continue;
    const double be = a.beta[static_cast<std::size_t>(r)],
                 h = a.entropy[static_cast<std::size_t>(r)];
    const std::string w = "row " + std::to_string(r) + ": beta = " + fmt(be) + ", H = " + fmt(h);
    out.worst(make_check(std::isnan(be) ? NAN : std::max(1.0 - be, 0.0), 0.0, w + " (beta >= 1)"));
    if (h <= 0.5) out.worst(make_check(std::abs(be - 1.0), 0.0, w + " (H <= 0.5 so beta = 1)"));
    const double bh = theory::adaptive_beta(h);
    out.worst(make_check(
        std::abs(be - bh),
        budget::beta_abs(h, budget::ulp(DType::float32, h)) + budget::ulp(DType::float32, bh),
        w + " (beta(H) = " + fmt(bh) + ")"));
  }
}

// metamorphic.streamed_entropy (entropy, needs softmax): the entropy of the
// kernel's returned (m,S,T) state equals its returned H (within 4 u (1 + |H|)
// + 2 ulps), and H equals -sum p log p of its own softmax (T6,
// theory/streamed_entropy.hpp). Bound: (|log p| + 1) times each weight's
// softmax_abs (zero_floor terms for underflowed live weights) plus H's
// entropy_abs (budgets.hpp).
void streamed_entropy(const MetaCtx& cx, Check& out) {
  const Kernel& k = cx.k;
  const DType t = cx.t;
  const RowParams& p = cx.p;
  const RowBatch& b = cx.b;
  const double th = p.temperature;
  std::vector<sa_entropy_state> states;
  const auto H = k.entropy(t, b, th, &states);
  const auto w = k.softmax(t, b, th);
  for (std::int64_t r = 0; r < b.rows; ++r) {
    const budget::RowStats st = budget::stats(b.row(r), th);
    const double h = H[static_cast<std::size_t>(r)];
    const auto& s = states[static_cast<std::size_t>(r)];
    const double hs = theory::entropy_of(theory::EntropyState<double>{s.m, s.S, s.T});
    const std::string wr = "row " + std::to_string(r);
    out.worst(same(
        DType::float32, hs, h,
        std::isfinite(h) ? 4 * u32 * (1 + std::abs(h)) + 2 * budget::ulp(DType::float32, h) : 0.0,
        wr + ": entropy of the returned (m,S,T) state vs the returned entropy"));
    if (has_nan(b.row(r))) continue;
    double h2 = 0, slack = 0;
    for (std::int64_t j = 0; j < b.n; ++j) {
      const std::size_t x = static_cast<std::size_t>(r * b.stride + j);
      const double pj = w[x];
      if (pj > 0) {
        h2 -= pj * std::log(pj);
        slack += (std::abs(std::log(pj)) + 1.0) *
                 (st.finite ? budget::softmax_abs(t, st, b.data[x] / th, pj) : out_round(t, pj));
      } else if (b.data[x] != -INFINITY && budget::zero_floor(t) > 0) {
        // A live weight that underflowed to 0 in the storage type (float16:
        // exact p <= 2^-25): its -p log p, at most q |log q| + q for p <= q.
        const double q = budget::zero_floor(t);
        slack += q * (std::abs(std::log(q)) + 1.0);
      }
    }
    slack += st.finite ? budget::entropy_abs(st, h) : out_round(DType::float32, h) + 4 * u32;
    out.worst(same(DType::float32, h, h2, slack,
                   wr + ": streamed entropy vs -sum p log p of the kernel's softmax"));
  }
}

// metamorphic.merge_algebra (merge_entropy_states; float32 cases of one row):
// the row cut in three parts (cuts from the case's aux), each part's exact
// state rounded to float32: merging is associative and commutative, the
// identity (-inf,0,0) is a no-op (bitwise), and the merged parts give the
// whole row's exact H and lse (T6). Bound: k 8 u (1 + |v| + spread of the
// parts' maxima) + 2 ulps, k = 4 (associativity), 2 (commutativity), 3
// (against the exact whole row).
void merge_algebra(const MetaCtx& cx, Check& out) {
  const Kernel& k = cx.k;
  const RowParams& p = cx.p;
  const RowBatch& b = cx.b;  // materialised in float32 (the property's only dtype)
  const auto row = b.row(0);
  const std::int64_t n = b.n;
  std::int64_t c1 = static_cast<std::int64_t>(p.aux % static_cast<std::uint64_t>(n + 1));
  std::int64_t c2 = static_cast<std::int64_t>((p.aux / 7919) % static_cast<std::uint64_t>(n + 1));
  if (c1 > c2) std::swap(c1, c2);
  auto state_of = [&](std::int64_t lo, std::int64_t hi) {
    if (lo >= hi) return sa_entropy_state{-INFINITY, 0.0f, 0.0f};
    const std::vector<double> l(row.begin() + lo, row.begin() + hi);
    const auto s = ref::entropy_state(l, 1.0);
    return sa_entropy_state{static_cast<float>(ref::round_to(DType::float32, s.m)),
                            static_cast<float>(ref::round_to(DType::float32, s.S)),
                            static_cast<float>(ref::round_to(DType::float32, s.T))};
  };
  const sa_entropy_state a = state_of(0, c1), bb = state_of(c1, c2), c = state_of(c2, n);
  const sa_entropy_state id{-INFINITY, 0.0f, 0.0f};
  auto merge = [&](sa_entropy_state x, sa_entropy_state y) {
    const sa_entropy_state xs[] = {x}, ys[] = {y};
    return k.merge_entropy_states(xs, ys)[0];
  };
  const auto ab = merge(a, bb), ba = merge(bb, a), bc = merge(bb, c);
  const auto x = merge(ab, c), y = merge(a, bc);
  auto H = [](const sa_entropy_state& s) {
    return theory::entropy_of(theory::EntropyState<double>{s.m, s.S, s.T});
  };
  auto L = [](const sa_entropy_state& s) {
    return theory::log_sum_exp_of(theory::EntropyState<double>{s.m, s.S, s.T});
  };
  double mlo = INFINITY, mhi = -INFINITY;
  for (const auto& s : {a, bb, c})
    if (std::isfinite(s.m)) mlo = std::min(mlo, double(s.m)), mhi = std::max(mhi, double(s.m));
  const double dm = mhi > mlo ? mhi - mlo : 0.0;
  const std::vector<double> l(row.begin(), row.end());
  const double Hr = ref_shannon_entropy(l), Lr = ref_log_sum_exp(l);
  const std::string w =
      "cuts at " + std::to_string(c1) + ", " + std::to_string(c2) + " of n=" + std::to_string(n);
  auto hb = [&](double h, double k2) {
    return std::isfinite(h)
               ? k2 * 8 * u32 * (1 + std::abs(h) + dm) + 2 * budget::ulp(DType::float32, h)
               : 0.0;
  };
  out.worst(same(DType::float32, H(x), H(y), hb(H(y), 4), w + ": H((a.b).c) vs H(a.(b.c))"));
  out.worst(same(DType::float32, L(x), L(y), hb(L(y), 4), w + ": lse((a.b).c) vs lse(a.(b.c))"));
  out.worst(same(DType::float32, H(ab), H(ba), hb(H(ab), 2), w + ": H(a.b) vs H(b.a)"));
  out.worst(same(DType::float32, H(x), Hr, hb(Hr, 3),
                 w + ": H of the merged parts vs the whole row's exact H"));
  out.worst(same(DType::float32, L(x), Lr, hb(Lr, 3),
                 w + ": lse of the merged parts vs the whole row's exact lse"));
  for (const auto& s : {a, bb, c}) {
    const auto m1 = merge(s, id), m2 = merge(id, s);
    const bool nan = std::isnan(s.m);
    const bool ok1 = nan ? std::isnan(m1.m) : (m1.m == s.m && m1.S == s.S && m1.T == s.T);
    const bool ok2 = nan ? std::isnan(m2.m) : (m2.m == s.m && m2.S == s.S && m2.T == s.T);
    out.worst(make_check(ok1 && ok2 ? 0.0 : INFINITY, 0.0,
                         w + ": merging the identity (-inf,0,0) with (" + fmt(s.m) + "," +
                             fmt(s.S) + "," + fmt(s.T) + ") gave (" + fmt(m1.m) + "," + fmt(m1.S) +
                             "," + fmt(m1.T) + ") and (" + fmt(m2.m) + "," + fmt(m2.S) + "," +
                             fmt(m2.T) + ")"));
  }
}

// The runner of one property on one op: skips it (and says why) when the
// kernel lacks the op, an op it needs or the dtype; otherwise searches cases
// from the property's own seed, materialises each case once, judges it with
// `judge` (one slot) and emits the verdict, shrinking a failure.
void row_property(const Run& run, const std::string& id, Op op, DType t, std::vector<Op> needs,
                  RowGenOptions go, void (*judge)(const MetaCtx&, Check&), int cases,
                  const std::string& claim_suffix = {}) {
  if (!run.wants_property(id) || !run.wants_op(op)) return;
  const Kernel& k = run.kernel;
  needs.push_back(op);
  for (Op n : needs)
    if (!k.supports(n)) {
      run.emit(skip_verdict(run, id, claim_of(id), rule_of(id), op, t,
                            "kernel does not implement " + std::string(name_of(n))));
      return;
    }
  if (!k.supports(t)) {
    run.emit(skip_verdict(run, id, claim_of(id), rule_of(id), op, t,
                          "kernel does not support " + std::string(name_of(t))));
    return;
  }
  if (go.sizes.empty()) go.sizes = run.sizes;
  if (go.distributions.empty()) go.distributions = run.dists;
  std::function<std::vector<Check>(const RowParams&)> eval = [&](const RowParams& p) {
    const RowBatch b = materialise(p, t);
    if (run.observer && run.observer->before_case) run.before(id, describe(p, b, 16));
    Check c;
    judge(MetaCtx{run, k, t, op, p, b}, c);
    return std::vector<Check>{c};
  };
  SearchOptions so;
  so.shrink_pool = &run.shrink_pool;
  so.cases = cases;
  // The search's seed from the property, op and dtype by a specified hash
  // (core/case_id.hpp), not std::hash, whose values differ between standard
  // libraries: a shard built with another toolchain draws the same cases.
  const std::uint64_t h = splitmix64_hash(id + name_of(op) + name_of(t));
  so.seed = run.seed ^ h;
  auto res =
      search<RowParams>(gen_rows(go), 1, so, eval,
                        [&](const RowParams& p, const std::function<bool(const RowParams&)>& f,
                            int& b) { return shrink_values(p, t, f, b); });
  run.emit(
      slot_verdict<RowParams>(run, id, claim_of(id) + claim_suffix, rule_of(id), op, t, res[0],
                              [&](const RowParams& p) { return describe(p, materialise(p, t)); }));
}

}  // namespace

// Every metamorphic property of this file on dtype t, in the verdict order
// of the registry: one row_property per (property, op), each with the
// generator options (temperatures, sizes) its cases are drawn from.
void run_metamorphic(const Run& run, DType t) {
  const int cases = run.config.cases;

  for (Op op : {Op::softmax, Op::adaptive_softmax}) {
    RowGenOptions go;
    go.temperatures = run.temperatures({1.0, 0.5});
    row_property(run, "metamorphic.sum_to_one", op, t, {}, go, sum_to_one, cases);
  }
  for (Op op : {Op::softmax, Op::log_softmax, Op::logsumexp, Op::entropy}) {
    RowGenOptions go;
    go.temperatures = {1.0};
    row_property(run, "metamorphic.shift_invariance", op, t, {}, go, shift_invariance, cases);
  }
  for (Op op : {Op::softmax, Op::logsumexp, Op::entropy}) {
    RowGenOptions go;
    go.temperatures = run.temperatures({});
    row_property(run, "metamorphic.permutation", op, t, {}, go, permutation, cases);
  }
  {
    RowGenOptions go;
    go.temperatures = run.temperatures({});
    row_property(run, "metamorphic.monotonicity", Op::softmax, t, {}, go, monotonicity, cases);
  }
  {
    RowGenOptions go;
    go.temperatures = run.temperatures({0.5});
    row_property(run, "metamorphic.t1_bounds", Op::softmax, t, {}, go, t1_bounds, cases);
  }
  {
    RowGenOptions go;
    go.temperatures = run.temperatures({0.5, 2.0});
    row_property(run, "metamorphic.entropy_range", Op::entropy, t, {}, go, entropy_range, cases);
    if (active_conventions().no_temperature) {
      if (run.wants_property("metamorphic.entropy_temperature") && run.wants_op(Op::entropy))
        run.emit(skip_verdict(run, "metamorphic.entropy_temperature",
                              claim_of("metamorphic.entropy_temperature"),
                              rule_of("metamorphic.entropy_temperature"), Op::entropy, t,
                              "not applicable: the kernel declares no_temperature (it is called "
                              "at temperature 1 only, and this property compares two)"));
    } else
      row_property(run, "metamorphic.entropy_temperature", Op::entropy, t, {}, go,
                   entropy_temperature, cases);
  }
  {
    RowGenOptions go;
    go.temperatures = run.temperatures({0.5, 2.0});
    row_property(run, "metamorphic.adaptive_beta", Op::adaptive_softmax, t, {}, go, adaptive_beta,
                 cases);
  }
  {
    RowGenOptions go;
    go.temperatures = run.temperatures({0.5});
    row_property(run, "metamorphic.streamed_entropy", Op::entropy, t, {Op::softmax}, go,
                 streamed_entropy, cases);
  }
  if (t == DType::float32) {
    RowGenOptions go;
    go.temperatures = {1.0};
    go.max_rows = 1;
    go.sizes = {1, 2, 3, 5, 9, 17, 33, 65, 200};
    row_property(run, "metamorphic.merge_algebra", Op::merge_entropy_states, t, {}, go,
                 merge_algebra, cases);
  }
}

}  // namespace sa::props::detail
