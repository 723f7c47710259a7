// Differential properties of the row operations: kernel vs the MPFR reference
// under the named tolerance rules (ulp, t7_apriori, flash_attention_2x,
// pytorch_fudge5, onednn_10eps, vectorised_2x) and the bias gate.
//
// One function per property (issue 30), each judging one row of a case handed
// to it in a DiffCtx. The runner (run_differential) draws each case once from
// the op's seed, calls the kernel once, computes each row's shared work once
// (the row's statistics, the reference values, the naive same-dtype baseline)
// and hands the row to every property's function, each into its own slot of
// one search; differential.bias averages over the run (bias_row, bias_verdict).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <sstream>

#include "core/bfloat16.hpp"
#include "kernels/naive/same_dtype.hpp"
#include "properties/baseline.hpp"
#include "properties/budgets.hpp"
#include "properties/suite_internal.hpp"
#include "reference/softmax.hpp"

#include "properties/checks.hpp"
#include "properties/reference_values.hpp"

namespace sa::props::detail {
namespace {

using budget::u32;

std::string at(std::int64_t r, std::int64_t j) {
  return "row " + std::to_string(r) + " item " + std::to_string(j);
}

double default_atol(DType) { return 1e-5; }
// torch.testing.assert_close's defaults: bfloat16 1.6e-2, float16 1e-3, float32 1.3e-6
// (atol 1e-5 for all three).
double default_rtol(DType t) {
  return t == DType::bfloat16 ? 1.6e-2 : t == DType::float16 ? 1e-3 : 1.3e-6;
}

// The exact values are already rounded to +-inf where they are past the
// output format's range (float16 log-softmax), so a kernel and baseline
// returning that infinity are 0 off, not inf - inf.
double abs_diff(double a, double b) { return a == b ? 0.0 : std::abs(a - b); }

bool all_finite(std::span<const float> row) {
  return std::all_of(row.begin(), row.end(), [](float x) { return std::isfinite(x); });
}

}  // namespace
// FlashAttention's rule measures a low-precision kernel against the naive
// implementation in the same low precision (its tests cover fp16/bf16 only);
// for float32 the "naive same-dtype" baseline is itself a float32 kernel and
// 2x its (often lucky, sub-ulp) error is not a tolerance any convention uses.
const char* const kFaFloat32Note =
    "not applicable to float32: FlashAttention's rule compares a low-precision kernel with the "
    "naive "
    "low-precision implementation (its tests cover fp16/bf16 only)";
namespace {

enum Slot { kUlp, kT7, kFa, kPt, kOnednn, kVec, kSlots };
const char* const kSlotRule[] = {
    "ulp", "t7_apriori", "flash_attention_2x", "pytorch_fudge5", "onednn_10eps", "vectorised_2x"};

bool applies(Op op, int slot) {
  switch (slot) {
    case kUlp:
      return true;
    case kT7:
      return op == Op::softmax;
    case kFa:
      return op != Op::adaptive_softmax;
    case kPt:  // (not entropy: PyTorch has no entropy operator, suite.cpp)
      return op != Op::adaptive_softmax && op != Op::entropy;
    case kOnednn:
    case kVec:
      return op == Op::softmax;
  }
  return false;
}

// The naive same-dtype implementation on one row (FlashAttention's and
// PyTorch's rules measure against it): its outputs, the reference they are
// compared with and its error, computed once for both rules.
struct NaiveBaseline {
  DType out;                  // the type the rules measure in (float32 for lse, entropy)
  std::vector<double> exact;  // the reference, +-inf past the output type's range
  std::vector<double> naive;  // the naive implementation's outputs
  double nerr = 0;            // max |naive - exact|
  double nrel = 0;            // max |naive - exact| / |exact| over finite nonzero exact
};

NaiveBaseline naive_baseline(DType out, std::vector<double> exact, std::vector<double> naive) {
  NaiveBaseline nb{out, std::move(exact), std::move(naive)};
  for (std::size_t i = 0; i < nb.exact.size(); ++i) {
    nb.nerr = std::max(nb.nerr, abs_diff(nb.naive[i], nb.exact[i]));
    if (nb.exact[i] != 0 && std::isfinite(nb.exact[i]))
      nb.nrel = std::max(nb.nrel, abs_diff(nb.naive[i], nb.exact[i]) / std::abs(nb.exact[i]));
  }
  return nb;
}

// One row of one case of one op, as the runner computed it once for every
// property: the logits, their statistics, the kernel's outputs and the
// correctly rounded reference values.
struct DiffCtx {
  DType t;
  Op op;
  double th;                   // the temperature
  std::int64_t r;              // the row
  std::span<const float> row;  // its logits
  std::vector<double> l;       // the logits as doubles
  budget::RowStats st;         // budget::stats(row, th)
  bool finite_data;            // no NaN or infinite logit
  std::string where;           // "row r"
  // The kernel's outputs of the row (its n weights, or one value for
  // logsumexp and entropy), as floats and as doubles, and the reference
  // values (the weights for adaptive_softmax).
  std::span<const float> out;
  std::vector<double> g, e;
  double den = 0;  // softmax: max_j |e_j|, the max-norm relative errors' normaliser
  // adaptive_softmax: the kernel's entropy and beta, and the reference's.
  double H = 0, beta = 0, He = 0, Be = 0;
  // Finite data (not adaptive_softmax): the naive same-dtype baseline.
  std::optional<NaiveBaseline> naive;
};

// The shared work of row r: statistics, reference values and (finite data)
// the naive same-dtype baseline, once for every property.
DiffCtx row_ctx(DType t, Op op, double th, ref::EntropyDefinition def, const RowBatch& b,
                std::int64_t r, const RowOutputs& o) {
  const auto row = b.row(r);
  DiffCtx cx{t,
             op,
             th,
             r,
             row,
             std::vector<double>(row.begin(), row.end()),
             budget::stats(row, th),
             all_finite(row),
             "row " + std::to_string(r)};
  if (op == Op::softmax || op == Op::log_softmax) {
    const bool sm = op == Op::softmax;
    cx.e = sm ? ref_softmax(cx.l, th) : ref_log_softmax(cx.l, th);
    cx.out = std::span<const float>(o.got.data() + r * b.stride, cx.e.size());
    cx.g.assign(cx.out.begin(), cx.out.end());
    if (sm)
      for (double x : cx.e) cx.den = std::max(cx.den, std::abs(x));
    if (cx.finite_data) {
      const std::vector<float> nv = sm ? kernels::same_dtype::softmax(t, row, th)
                                       : kernels::same_dtype::log_softmax(t, row, th);
      // The exact values as the output type holds them past its range (+-inf).
      std::vector<double> ef(cx.e);
      const FloatFormat f = format_of(t);
      const double big = std::ldexp(2.0 - std::ldexp(1.0, -f.precision), f.emax);
      for (double& x : ef)
        if (std::abs(x) >= big) x = std::copysign(INFINITY, x);
      cx.naive = naive_baseline(t, std::move(ef), std::vector<double>(nv.begin(), nv.end()));
    }
  } else if (op == Op::logsumexp || op == Op::entropy) {
    cx.e = {op == Op::logsumexp ? ref_log_sum_exp(cx.l, th) : ref_shannon_entropy(cx.l, th)};
    cx.out = std::span<const float>(o.got.data() + r, 1);
    cx.g = {cx.out[0]};
    if (cx.finite_data)
      cx.naive = naive_baseline(DType::float32, cx.e,
                                {op == Op::logsumexp ? kernels::same_dtype::logsumexp(t, row, th)
                                                     : kernels::same_dtype::entropy(t, row, th)});
  } else if (op == Op::adaptive_softmax) {
    ref::AdaptiveRounded ar = ref_adaptive(cx.l, th, def);
    cx.He = ar.entropy;
    cx.Be = ar.beta;
    cx.e = std::move(ar.weights);
    cx.out = std::span<const float>(o.got.data() + r * b.stride, cx.l.size());
    cx.g.assign(cx.out.begin(), cx.out.end());
    cx.H = o.H[static_cast<std::size_t>(r)];
    cx.beta = o.beta[static_cast<std::size_t>(r)];
  }
  return cx;
}

// The ulp budget of softmax / log-softmax element j at temperature theta
// (row stats s, reference ex): softmax_abs / log_softmax_abs (budgets.hpp),
// or 4 u32 |exact| rounded to the output on a row with non-finite logits.
double weight_budget(const DiffCtx& cx, const budget::RowStats& s, double theta,
                     const std::vector<double>& ex, std::size_t j) {
  if (!s.finite)
    return ex[j] == 0 || !std::isfinite(ex[j])
               ? 0.0
               : budget::output_abs(cx.t, ex[j], 4 * u32 * std::abs(ex[j]));
  const double z = cx.l[j] / theta;
  return cx.op == Op::softmax ? budget::softmax_abs(cx.t, s, z, ex[j])
                              : budget::log_softmax_abs(cx.t, s, z, ex[j]);
}

// differential.ulp (every row op): every output within its per-element
// budget of the correctly rounded reference, measured in ulps of the output.
// Bound (budgets.hpp): softmax_abs / log_softmax_abs per weight; lse_abs /
// entropy_abs for one float32 value; for adaptive_softmax entropy_abs on H,
// beta_abs + 1 ulp on beta, and softmax_abs at beta z + 2 |p| delta dB per
// weight; 4 u32 |exact| rounded to the output on rows with non-finite logits.
// A softmax / log-softmax row failing at theta != 1 whose every element is
// within budget of the temperature-1 values names no_temperature.
void ulp(const DiffCtx& cx, Check& out) {
  const DType t = cx.t;
  const budget::RowStats& st = cx.st;
  if (cx.op == Op::softmax || cx.op == Op::log_softmax) {
    Check row_ulp;
    for (std::size_t j = 0; j < cx.e.size(); ++j)
      row_ulp.worst(elem_in_row(st, t, cx.g[j], cx.e[j], weight_budget(cx, st, cx.th, cx.e, j),
                                at(cx.r, static_cast<std::int64_t>(j))));
    // A kernel that ignores the temperature: every element within its
    // budget of the temperature-1 values names no_temperature (undeclared;
    // declared, the suite calls at temperature 1 only).
    if (row_ulp.fails() && row_ulp.convention.empty() && cx.th != 1.0 &&
        !active_conventions().no_temperature) {
      const budget::RowStats s1 = budget::stats(cx.row, 1.0);
      const std::vector<double> e1 =
          cx.op == Op::softmax ? ref_softmax(cx.l, 1.0) : ref_log_softmax(cx.l, 1.0);
      bool holds = true;
      for (std::size_t j = 0; j < e1.size() && holds; ++j)
        holds = cx.g[j] == e1[j] || std::abs(cx.g[j] - e1[j]) <= weight_budget(cx, s1, 1.0, e1, j);
      if (holds) row_ulp.convention = "no_temperature";
    }
    out.worst(row_ulp);
  } else if (cx.op == Op::logsumexp || cx.op == Op::entropy) {
    const double e = cx.e[0], g = cx.g[0];
    double bud;
    if (!st.finite)
      bud = std::isfinite(e) ? budget::output_abs(DType::float32, e, 4 * u32 * std::abs(e)) : 0.0;
    else
      bud = cx.op == Op::logsumexp ? budget::lse_abs(st, e) : budget::entropy_abs(st, e);
    out.worst(elem_in_row(st, DType::float32, g, e, bud, cx.where));
  } else if (cx.op == Op::adaptive_softmax) {
    const double He = cx.He, Be = cx.Be;
    const double dH = st.finite ? budget::entropy_abs(st, He) : 4 * u32 * (1 + std::abs(He));
    const double dB = budget::beta_abs(He, dH);
    out.worst(elem_in_row(st, DType::float32, cx.H, He, dH, cx.where + " entropy"));
    out.worst(elem_in_row(st, DType::float32, cx.beta, Be,
                          std::isfinite(Be) ? dB + budget::ulp(DType::float32, Be) : 0.0,
                          cx.where + " beta"));
    budget::RowStats sb = st;
    if (std::isfinite(Be)) {
      sb.max *= Be, sb.spread *= Be, sb.max_abs *= Be;
      sb.theta_one = false;  // beta * z is rounded like l / theta
    }
    for (std::size_t j = 0; j < cx.l.size(); ++j) {
      const double e = cx.e[j], g = cx.g[j];
      double bud;
      if (!st.finite)
        bud = e == 0 || !std::isfinite(e) ? 0.0 : budget::output_abs(t, e, 4 * u32 * e);
      else
        bud = e == 0 ? 0.0
                     : budget::softmax_abs(t, sb, Be * cx.l[j] / cx.th, e) +
                           2.0 * std::abs(e) * st.spread * dB;
      out.worst(elem_in_row(st, t, g, e, bud, at(cx.r, static_cast<std::int64_t>(j))));
    }
  }
}

// differential.t7_apriori (softmax, rows of finite logits with a live item):
// the max-norm relative error max|g - e| / max|e| within T7's a-priori bound
// (n + 4 + 2 delta + theta term) u32 (docs/theory.md T7) plus the output's one
// rounding to bfloat16/float16 (budget::storage_rel; doubled under a declared
// double_rounding). A failure within one more rounding names double_rounding.
void t7_apriori(const DiffCtx& cx, Check& out) {
  const budget::RowStats& st = cx.st;
  if (cx.op != Op::softmax || !st.finite || !(st.live > 0)) return;
  double num = 0;
  for (std::size_t j = 0; j < cx.e.size(); ++j) {
    num = std::max(num, std::abs(cx.g[j] - cx.e[j]));
    if (std::isnan(cx.g[j])) num = NAN;
  }
  const double den = cx.den;
  // T7 in float32 plus the output's one rounding to bfloat16/float16
  // (budget::storage_rel: u_t, or float16's subnormal floor when every
  // weight is below 2^-14).
  // (A declared double_rounding adds one more u_t.)
  const double bound =
      (double(st.live) + 4.0 + 2.0 * st.spread + budget::theta_term(st)) * u32 +
      budget::storage_rel(cx.t, den) *
          (active_conventions().double_rounding && budget::low_precision(cx.t) ? 2.0 : 1.0);
  Check t7 = make_check(num / den, bound, cx.where + ": max-norm relative error");
  // Within one more rounding to the output type: a double rounding
  // the kernel does not declare (named, not excused).
  if (t7.fails() && !active_conventions().double_rounding && budget::low_precision(cx.t) &&
      num / den <= bound + budget::storage_rel(cx.t, den))
    t7.convention = "double_rounding";
  out.worst(t7);
}

// differential.vectorised_2x (softmax, rows of finite logits with a live
// item): the same max-norm relative error within 2x the worst of float32
// softmaxes summed in 8, 16, 32, 64 lanes (and 1 lane below n = 2^13) on the
// same row, + (4 + 3 sqrt(n)) u + the output's rounding u_t
// (baseline::vectorised_threshold; its constants in properties/baseline.hpp).
void vectorised_2x(const DiffCtx& cx, Check& out) {
  const budget::RowStats& st = cx.st;
  if (cx.op != Op::softmax || !st.finite || !(st.live > 0)) return;
  const double eb = baseline::baseline_error(cx.t, cx.row, cx.th, cx.e);
  const double ek = baseline::max_norm_rel_error(cx.out, cx.e);
  out.worst(make_check(ek, baseline::vectorised_threshold(cx.t, eb, double(st.live), cx.den),
                       cx.where + ": max-norm relative error " + fmt(ek / u32) +
                           " u vs the float32 baselines' (8-64 lanes; 1 lane below n = 2^13) " +
                           fmt(eb / u32) + " u"));
}

// differential.flash_attention_2x (finite data; not adaptive_softmax): the
// max error |out - ref| within 2x the naive same-dtype implementation's error
// + 2 ulp of the output type at the row's largest finite reference value
// (FlashAttention's test rule; float32 is skipped, kFaFloat32Note).
void flash_attention_2x(const DiffCtx& cx, Check& out) {
  if (!cx.naive) return;
  const NaiveBaseline& nb = *cx.naive;
  double err = 0, emax = 0;
  for (std::size_t i = 0; i < nb.exact.size(); ++i) {
    err = std::max(err, abs_diff(cx.g[i], nb.exact[i]));
    if (std::isnan(cx.g[i])) err = NAN;
    if (std::isfinite(nb.exact[i])) emax = std::max(emax, std::abs(nb.exact[i]));
  }
  out.worst(make_check(err, 2.0 * nb.nerr + 2.0 * budget::ulp(nb.out, emax + 0.3),
                       cx.where + ": max|out-ref| vs 2 x naive same-dtype error " + fmt(nb.nerr)));
}

// differential.pytorch_fudge5 (finite data; not adaptive_softmax): every
// |out - ref| <= atol + rtol |ref|, with atol and rtol 5x the naive same-dtype
// implementation's absolute and relative error, at least torch.testing's
// defaults (default_atol, default_rtol); measured as the worst ratio to it.
void pytorch_fudge5(const DiffCtx& cx, Check& out) {
  if (!cx.naive) return;
  const NaiveBaseline& nb = *cx.naive;
  const double atol = 5.0 * std::max(nb.nerr, default_atol(nb.out));
  const double rtol = 5.0 * std::max(nb.nrel, default_rtol(nb.out));
  double worst = 0;
  std::size_t wi = 0;
  for (std::size_t i = 0; i < nb.exact.size(); ++i) {
    double r = abs_diff(cx.g[i], nb.exact[i]);
    if (r != 0) r /= atol + rtol * std::abs(nb.exact[i]);
    if (std::isnan(r)) r = INFINITY;
    if (r > worst) worst = r, wi = i;
  }
  out.worst(make_check(worst, 1.0,
                       cx.where + " item " + std::to_string(wi) +
                           ": |out-ref|/(atol+rtol|ref|), atol " + fmt(atol) + ", rtol " +
                           fmt(rtol)));
}

// differential.onednn_10eps (softmax, rows of finite logits; opt-in): oneDNN's
// rule. float32: each weight's relative error within 10 float32 eps (relative
// to max(|e|, FLT_MIN)); bfloat16 / float16: each weight equal to the float32
// reference, or it scaled by 1 -+ 10 eps, rounded to the output type.
void onednn_10eps(const DiffCtx& cx, Check& out) {
  if (cx.op != Op::softmax || !cx.st.finite) return;
  const DType t = cx.t;
  for (std::size_t j = 0; j < cx.e.size(); ++j) {
    const double g = cx.g[j], e = cx.e[j];
    if (t == DType::float32) {
      out.worst(make_check(
          std::abs(g - e) / std::max(std::abs(e), budget::flt_min),
          10.0 * machine_epsilon(DType::float32),
          at(cx.r, std::int64_t(j)) + ": relative error, got " + fmt(g) + ", exact " + fmt(e)));
    } else {
      const double tol = 10.0 * machine_epsilon(DType::float32);
      const double ok1 = to_dtype(t, static_cast<float>(e)),
                   ok2 = to_dtype(t, static_cast<float>(e * (1 - tol))),
                   ok3 = to_dtype(t, static_cast<float>(e * (1 + tol)));
      const bool ok = g == ok1 || g == ok2 || g == ok3;
      out.worst(make_check(ok ? 0.0 : 1.0, 0.0,
                           at(cx.r, std::int64_t(j)) + ": got " + fmt(g) +
                               ", float32 reference rounded to " + name_of(t) + " " + fmt(ok1)));
    }
  }
}

// differential.bias (softmax, adaptive_softmax), one row: the row's mean
// signed error in ulps of the output over its weights with |exact| >= FLT_MIN
// and a finite output (rows of finite logits), appended to the run's row
// means for bias_verdict.
void bias_row(const DiffCtx& cx, std::vector<double>& row_means) {
  if ((cx.op != Op::softmax && cx.op != Op::adaptive_softmax) || !cx.st.finite) return;
  double bias_sum = 0;
  int bias_n = 0;
  for (std::size_t j = 0; j < cx.e.size(); ++j) {
    const double e = cx.e[j], g = cx.g[j];
    if (std::abs(e) >= budget::flt_min && std::isfinite(g)) {
      bias_sum += (g - e) / budget::ulp(cx.t, e);
      ++bias_n;
    }
  }
  if (bias_n > 0) row_means.push_back(bias_sum / bias_n);
}

// differential.bias, the verdict: the mean of the row means (the generated
// cases' rows, not the shrinking's) is zero within 5 standard errors + 0.1 ulp
// (bfloat16, float16) or + 0.5 ulp (float32); skipped below 10 rows.
Verdict bias_verdict(const Run& run, Op op, DType t, const std::vector<double>& row_bias) {
  Verdict v;
  v.property = "differential.bias";
  v.claim = claim_of(v.property);
  v.rule = rule_by_id("bias");
  v.kernel = run.kernel.name();
  v.op = name_of(op);
  v.dtype = name_of(t);
  const double R = static_cast<double>(row_bias.size());
  if (R < 10) {
    v.outcome = Outcome::skip;
    v.note = "fewer than 10 finite rows to average";
  } else {
    const double mean = std::accumulate(row_bias.begin(), row_bias.end(), 0.0) / R;
    double var = 0;
    for (double x : row_bias) var += (x - mean) * (x - mean);
    const double se = std::sqrt(var / (R - 1) / R);
    v.measured = std::abs(mean);
    v.bound = 5.0 * se + (budget::low_precision(t) ? 0.1 : 0.5);
    v.outcome = v.measured <= v.bound ? Outcome::pass : Outcome::fail;
    v.note = "mean signed error " + fmt(mean) + " ulp over " + std::to_string(row_bias.size()) +
             " rows, standard error " + fmt(se);
    if (v.outcome == Outcome::fail)
      v.counterexample =
          "seed=" + std::to_string(run.seed) + ": all " + std::to_string(row_bias.size()) +
          " generated rows of this run together (a statistical property; rerun with the seed)";
  }
  return v;
}

}  // namespace

// Every differential property of op in dtype t, in the verdict order of the
// slots (then bias): one search whose eval calls the kernel once per case and
// hands each row (row_ctx) to every property's function.
void run_differential(const Run& run, Op op, DType t) {
  const Kernel& k = run.kernel;
  const bool want_bias = (op == Op::softmax || op == Op::adaptive_softmax) &&
                         run.wants_rule("bias") && run.wants_property("differential.bias");
  std::vector<int> slots;
  for (int s = 0; s < kSlots; ++s)
    if (applies(op, s) && run.wants_rule(kSlotRule[s]) &&
        run.wants_property(std::string("differential.") + kSlotRule[s]))
      slots.push_back(s);
  if (t == DType::float32) {
    const auto it = std::find(slots.begin(), slots.end(), int(kFa));
    if (it != slots.end()) {
      slots.erase(it);
      run.emit(skip_verdict(run, "differential.flash_attention_2x",
                            claim_of("differential.flash_attention_2x"),
                            rule_by_id("flash_attention_2x"), op, t, kFaFloat32Note));
    }
  }
  if (slots.empty() && !want_bias) return;
  if (const std::string why = why_unsupported(k, op, t); !why.empty()) {
    for (int s : slots) {
      const std::string id = std::string("differential.") + kSlotRule[s];
      run.emit(skip_verdict(run, id, claim_of(id), rule_by_id(kSlotRule[s]), op, t, why));
    }
    if (want_bias)
      run.emit(skip_verdict(run, "differential.bias", claim_of("differential.bias"),
                            rule_by_id("bias"), op, t, why));
    return;
  }

  RowGenOptions go;
  go.sizes = run.sizes;
  go.distributions = run.dists;
  go.temperatures = run.temperatures({1.0, 0.5, 3.0});
  const auto def = k.adaptive_entropy() == SA_ENTROPY_PAPER_EPS ? ref::EntropyDefinition::paper_eps
                                                                : ref::EntropyDefinition::shannon;
  std::vector<double> row_bias;
  bool collecting = true;
  const std::string prop = std::string("differential[") + name_of(op) + "/" + name_of(t) + "]";

  std::function<std::vector<Check>(const RowParams&)> eval = [&](const RowParams& p) {
    std::vector<Check> cs(kSlots);
    const RowBatch b = materialise(p, t);
    if (run.observer && run.observer->before_case) run.before(prop, describe(p, b, 16));
    const RowOutputs o = call_row_op(k, op, t, b, p.temperature);
    for (std::int64_t r = 0; r < b.rows; ++r) {
      const DiffCtx cx = row_ctx(t, op, p.temperature, def, b, r, o);
      // One function per property (above run_differential), each judging
      // this row into its slot.
      ulp(cx, cs[kUlp]);
      t7_apriori(cx, cs[kT7]);
      vectorised_2x(cx, cs[kVec]);
      flash_attention_2x(cx, cs[kFa]);
      pytorch_fudge5(cx, cs[kPt]);
      onednn_10eps(cx, cs[kOnednn]);
      if (collecting) bias_row(cx, row_bias);
    }
    return cs;
  };

  SearchOptions so;
  so.shrink_pool = &run.shrink_pool;
  so.cases = run.config.cases;
  so.seed = run.seed ^ (static_cast<std::uint64_t>(op) * 0x9e3779b97f4a7c15ull) ^
            (t == DType::bfloat16  ? 0x55
             : t == DType::float16 ? 0xaa
                                   : 0);
  so.on_cases_done = [&] { collecting = false; };
  // The edge rows run first on every seed (generators.hpp), unless the spec
  // restricts sizes or distributions (they have their own).
  const std::vector<RowParams> edges = run.config.sizes.empty() && run.dists.empty()
                                           ? edge_rows(go.temperatures.front())
                                           : std::vector<RowParams>{};
  auto results = search<RowParams>(
      gen_rows(go), kSlots, so, eval,
      [&](const RowParams& p, const std::function<bool(const RowParams&)>& f, int& budget) {
        return shrink_values(p, t, f, budget);
      },
      edges);
  auto show = [&](const RowParams& p) { return describe(p, materialise(p, t)); };
  for (int s : slots) {
    const std::string id = std::string("differential.") + kSlotRule[s];
    Verdict v = slot_verdict<RowParams>(run, id, claim_of(id), rule_by_id(kSlotRule[s]), op, t,
                                        results[static_cast<std::size_t>(s)], show);
    if (s == kUlp && v.note.find("measured and bound in") == std::string::npos)
      v.note += (v.note.empty() ? "" : "; ") +
                std::string("measured and bound in ulps of the output at the worst element");
    run.emit(v);
  }
  if (want_bias) run.emit(bias_verdict(run, op, t, row_bias));
}

}  // namespace sa::props::detail
