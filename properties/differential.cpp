// Differential properties of the row operations: kernel vs the MPFR reference
// under the named tolerance rules (ulp, t7_apriori, flash_attention_2x,
// pytorch_fudge5, onednn_10eps) and the bias gate.
#include <algorithm>
#include <cmath>
#include <numeric>
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

// FlashAttention and PyTorch rules for one set of outputs (finite data).
void baseline_rules(DType out_t, std::span<const double> got, std::span<const double> exact,
                    std::span<const double> naive, Check& fa, Check& pt, const std::string& where) {
  // exact: already rounded to +-inf where it is past the output format's range
  // (float16 log-softmax), so a kernel and baseline returning that infinity
  // are 0 off (diff), not inf - inf.
  auto diff = [](double a, double b) { return a == b ? 0.0 : std::abs(a - b); };
  double err = 0, nerr = 0, nrel = 0, emax = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    err = std::max(err, diff(got[i], exact[i]));
    if (std::isnan(got[i])) err = NAN;
    nerr = std::max(nerr, diff(naive[i], exact[i]));
    if (exact[i] != 0 && std::isfinite(exact[i]))
      nrel = std::max(nrel, diff(naive[i], exact[i]) / std::abs(exact[i]));
    if (std::isfinite(exact[i])) emax = std::max(emax, std::abs(exact[i]));
  }
  fa.worst(make_check(err, 2.0 * nerr + 2.0 * budget::ulp(out_t, emax + 0.3),
                      where + ": max|out-ref| vs 2 x naive same-dtype error " + fmt(nerr)));
  const double atol = 5.0 * std::max(nerr, default_atol(out_t));
  const double rtol = 5.0 * std::max(nrel, default_rtol(out_t));
  double worst = 0;
  std::size_t wi = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    double r = diff(got[i], exact[i]);
    if (r != 0) r /= atol + rtol * std::abs(exact[i]);
    if (std::isnan(r)) r = INFINITY;
    if (r > worst) worst = r, wi = i;
  }
  pt.worst(make_check(worst, 1.0,
                      where + " item " + std::to_string(wi) +
                          ": |out-ref|/(atol+rtol|ref|), atol " + fmt(atol) + ", rtol " +
                          fmt(rtol)));
}

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
    case kPt:
      return op != Op::adaptive_softmax;
    case kOnednn:
    case kVec:
      return op == Op::softmax;
  }
  return false;
}

}  // namespace

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
    const double th = p.temperature;
    std::vector<float> got, beta, H;
    switch (op) {
      case Op::softmax:
        got = k.softmax(t, b, th);
        break;
      case Op::log_softmax:
        got = k.log_softmax(t, b, th);
        break;
      case Op::logsumexp:
        got = k.logsumexp(t, b, th);
        break;
      case Op::entropy:
        got = k.entropy(t, b, th);
        break;
      case Op::adaptive_softmax: {
        AdaptiveOutput a = k.adaptive_softmax(t, b, th);
        got = std::move(a.weights);
        beta = std::move(a.beta);
        H = std::move(a.entropy);
        break;
      }
      default:
        break;
    }
    for (std::int64_t r = 0; r < b.rows; ++r) {
      const auto row = b.row(r);
      const std::vector<double> l(row.begin(), row.end());
      const budget::RowStats st = budget::stats(row, th);
      const bool finite_data = all_finite(row);
      const std::string where = "row " + std::to_string(r);
      auto g_at = [&](std::int64_t j) {
        return static_cast<double>(got[static_cast<std::size_t>(r * b.stride + j)]);
      };
      if (op == Op::softmax || op == Op::log_softmax) {
        const bool sm = op == Op::softmax;
        const std::vector<double> e = sm ? ref_softmax(l, th) : ref_log_softmax(l, th);
        std::vector<double> g(e.size());
        for (std::size_t j = 0; j < e.size(); ++j) g[j] = g_at(static_cast<std::int64_t>(j));
        double bias_sum = 0;
        int bias_n = 0;
        // Each element's budget at temperature theta (the row's stats s).
        auto budget_at = [&](const budget::RowStats& s, double theta, const std::vector<double>& ex,
                             std::size_t j) {
          if (!s.finite)
            return ex[j] == 0 || !std::isfinite(ex[j])
                       ? 0.0
                       : budget::output_abs(t, ex[j], 4 * u32 * std::abs(ex[j]));
          const double z = l[j] / theta;
          return sm ? budget::softmax_abs(t, s, z, ex[j]) : budget::log_softmax_abs(t, s, z, ex[j]);
        };
        Check row_ulp;
        for (std::size_t j = 0; j < e.size(); ++j)
          row_ulp.worst(elem_in_row(st, t, g[j], e[j], budget_at(st, th, e, j),
                                    at(r, static_cast<std::int64_t>(j))));
        // A kernel that ignores the temperature: every element within its
        // budget of the temperature-1 values names no_temperature (undeclared;
        // declared, the suite calls at temperature 1 only).
        if (row_ulp.fails() && row_ulp.convention.empty() && th != 1.0 &&
            !active_conventions().no_temperature) {
          const budget::RowStats s1 = budget::stats(row, 1.0);
          const std::vector<double> e1 = sm ? ref_softmax(l, 1.0) : ref_log_softmax(l, 1.0);
          bool holds = true;
          for (std::size_t j = 0; j < e1.size() && holds; ++j)
            holds = g[j] == e1[j] || std::abs(g[j] - e1[j]) <= budget_at(s1, 1.0, e1, j);
          if (holds) row_ulp.convention = "no_temperature";
        }
        cs[kUlp].worst(row_ulp);
        for (std::size_t j = 0; j < e.size(); ++j) {
          if (sm && st.finite && std::abs(e[j]) >= budget::flt_min && std::isfinite(g[j])) {
            bias_sum += (g[j] - e[j]) / budget::ulp(t, e[j]);
            ++bias_n;
          }
        }
        if (sm && collecting && bias_n > 0) row_bias.push_back(bias_sum / bias_n);
        if (sm && st.finite && st.live > 0) {
          double num = 0, den = 0;
          for (std::size_t j = 0; j < e.size(); ++j) {
            num = std::max(num, std::abs(g[j] - e[j]));
            if (std::isnan(g[j])) num = NAN;
            den = std::max(den, std::abs(e[j]));
          }
          // T7 in float32 plus the output's one rounding to bfloat16/float16
          // (budget::storage_rel: u_t, or float16's subnormal floor when every
          // weight is below 2^-14).
          // (A declared double_rounding adds one more u_t.)
          const double bound =
              (double(st.live) + 4.0 + 2.0 * st.spread + budget::theta_term(st)) * u32 +
              budget::storage_rel(t, den) *
                  (active_conventions().double_rounding && budget::low_precision(t) ? 2.0 : 1.0);
          Check t7 = make_check(num / den, bound, where + ": max-norm relative error");
          // Within one more rounding to the output type: a double rounding
          // the kernel does not declare (named, not excused).
          if (t7.fails() && !active_conventions().double_rounding && budget::low_precision(t) &&
              num / den <= bound + budget::storage_rel(t, den))
            t7.convention = "double_rounding";
          cs[kT7].worst(t7);
          // vectorised_2x (properties/baseline.hpp): the same max-norm error
          // against 2x the worst of float32 softmaxes summed in 8, 16, 32, 64
          // lanes, + 4u.
          const double eb = baseline::baseline_error(t, row, th, e);
          const double ek = baseline::max_norm_rel_error(
              std::span<const float>(got.data() + r * b.stride, e.size()), e);
          cs[kVec].worst(
              make_check(ek, baseline::vectorised_threshold(t, eb, double(st.live), den),
                         where + ": max-norm relative error " + fmt(ek / u32) +
                             " u vs the float32 baselines' (8-64 lanes; 1 lane below n = 2^13) " +
                             fmt(eb / u32) + " u"));
        }
        if (finite_data) {
          const std::vector<float> nv = sm ? kernels::same_dtype::softmax(t, row, th)
                                           : kernels::same_dtype::log_softmax(t, row, th);
          const std::vector<double> n(nv.begin(), nv.end());
          // The exact values as the output type holds them past its range (+-inf).
          std::vector<double> ef(e);
          const FloatFormat f = format_of(t);
          const double big = std::ldexp(2.0 - std::ldexp(1.0, -f.precision), f.emax);
          for (double& x : ef)
            if (std::abs(x) >= big) x = std::copysign(INFINITY, x);
          baseline_rules(t, g, ef, n, cs[kFa], cs[kPt], where);
        }
        if (sm && st.finite) {
          for (std::size_t j = 0; j < e.size(); ++j) {
            if (t == DType::float32) {
              cs[kOnednn].worst(
                  make_check(std::abs(g[j] - e[j]) / std::max(std::abs(e[j]), budget::flt_min),
                             10.0 * machine_epsilon(DType::float32),
                             at(r, std::int64_t(j)) + ": relative error, got " + fmt(g[j]) +
                                 ", exact " + fmt(e[j])));
            } else {
              const double tol = 10.0 * machine_epsilon(DType::float32);
              const double ok1 = to_dtype(t, static_cast<float>(e[j])),
                           ok2 = to_dtype(t, static_cast<float>(e[j] * (1 - tol))),
                           ok3 = to_dtype(t, static_cast<float>(e[j] * (1 + tol)));
              const bool ok = g[j] == ok1 || g[j] == ok2 || g[j] == ok3;
              cs[kOnednn].worst(make_check(ok ? 0.0 : 1.0, 0.0,
                                           at(r, std::int64_t(j)) + ": got " + fmt(g[j]) +
                                               ", float32 reference rounded to " + name_of(t) +
                                               " " + fmt(ok1)));
            }
          }
        }
      } else if (op == Op::logsumexp || op == Op::entropy) {
        const double e = op == Op::logsumexp ? ref_log_sum_exp(l, th) : ref_shannon_entropy(l, th);
        const double g = got[static_cast<std::size_t>(r)];
        double bud;
        if (!st.finite)
          bud =
              std::isfinite(e) ? budget::output_abs(DType::float32, e, 4 * u32 * std::abs(e)) : 0.0;
        else
          bud = op == Op::logsumexp ? budget::lse_abs(st, e) : budget::entropy_abs(st, e);
        cs[kUlp].worst(elem_in_row(st, DType::float32, g, e, bud, where));
        if (finite_data) {
          const double n = op == Op::logsumexp ? kernels::same_dtype::logsumexp(t, row, th)
                                               : kernels::same_dtype::entropy(t, row, th);
          const double gg[] = {g}, ee[] = {e}, nn[] = {n};
          baseline_rules(DType::float32, gg, ee, nn, cs[kFa], cs[kPt], where);
        }
      } else if (op == Op::adaptive_softmax) {
        const ref::AdaptiveRounded ar = ref_adaptive(l, th, def);
        const double He = ar.entropy, Be = ar.beta;
        const double dH = st.finite ? budget::entropy_abs(st, He) : 4 * u32 * (1 + std::abs(He));
        const double dB = budget::beta_abs(He, dH);
        cs[kUlp].worst(elem_in_row(st, DType::float32, H[static_cast<std::size_t>(r)], He, dH,
                                   where + " entropy"));
        cs[kUlp].worst(elem_in_row(st, DType::float32, beta[static_cast<std::size_t>(r)], Be,
                                   std::isfinite(Be) ? dB + budget::ulp(DType::float32, Be) : 0.0,
                                   where + " beta"));
        budget::RowStats sb = st;
        if (std::isfinite(Be)) {
          sb.max *= Be, sb.spread *= Be, sb.max_abs *= Be;
          sb.theta_one = false;  // beta * z is rounded like l / theta
        }
        double bias_sum = 0;
        int bias_n = 0;
        for (std::size_t j = 0; j < l.size(); ++j) {
          const double e = ar.weights[j], g = g_at(static_cast<std::int64_t>(j));
          double bud;
          if (!st.finite)
            bud = e == 0 || !std::isfinite(e) ? 0.0 : budget::output_abs(t, e, 4 * u32 * e);
          else
            bud = e == 0 ? 0.0
                         : budget::softmax_abs(t, sb, Be * l[j] / th, e) +
                               2.0 * std::abs(e) * st.spread * dB;
          cs[kUlp].worst(elem_in_row(st, t, g, e, bud, at(r, static_cast<std::int64_t>(j))));
          if (st.finite && std::abs(e) >= budget::flt_min && std::isfinite(g)) {
            bias_sum += (g - e) / budget::ulp(t, e);
            ++bias_n;
          }
        }
        if (collecting && bias_n > 0) row_bias.push_back(bias_sum / bias_n);
      }
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
  if (want_bias) {
    Verdict v;
    v.property = "differential.bias";
    v.claim = claim_of(v.property);
    v.rule = rule_by_id("bias");
    v.kernel = k.name();
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
    run.emit(v);
  }
}

}  // namespace sa::props::detail
