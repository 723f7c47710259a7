// interface.sizes: every row size kernel.h allows a caller to pass, in every
// layout it allows, at every power of two and its neighbours from 1 to
// 2^SuiteConfig::max_log2_n (default 2^16; 2^24 in the `long` tests).
//
// Kernels switch paths at cache and tiling thresholds (8 KiB, 32 KiB, 64 KiB of
// a row, a split into chunks) far above the random properties' 4097, so this
// property calls each row operation once per size n in {2^k - 1, 2^k, 2^k + 1},
// cycling through the layouts kernel.h grants: two rows with input stride
// n + 1 and output stride n + 3; two rows in place (in == out, stride n + 2);
// three rows (two past 4097) with input stride n + 3 and a contiguous output.
// Rows cycle through finite generators (gaussian, uniform, fa3_outliers,
// offset). EVERY output element is held to the ulp rule's budget
// (properties/budgets.hpp) against a reference in long double (64-bit
// significand): L = m + log S with S a Neumaier-compensated sum of
// exp(z - m) (terms of one sign), p_j = exp(z_j - m) / S; its relative error
// is below 2^-50 for n <= 2^24, over 26 bits below a float32 ulp, so it cannot
// move a verdict (the same argument as the sweep's, properties/sweep.hpp).
//
// One property, one function (issue 30): run_interface_sizes, which draws
// each size's input (sizes_input), calls the op once (call_row_op) and judges
// every row of the call (judge_row).
#include <algorithm>
#include <cmath>

#include "kernels/call_log.hpp"
#include "properties/budgets.hpp"
#include "properties/checks.hpp"
#include "properties/suite_internal.hpp"
#include "theory/adaptive_temperature.hpp"

namespace sa::props::detail {
namespace {

using LD = long double;

// The exact softmax of one row, computed on demand per element (rows reach
// 2^24 items: nothing of size n is stored).
struct Exact {
  std::span<const float> row;
  LD scale = 1, theta = 1, m = 0, logS = 0;
  LD lse = 0, H = 0, H_eps = 0;
  LD z(std::size_t j) const { return scale * static_cast<LD>(row[j]) / theta; }
  LD logp(std::size_t j) const { return (z(j) - m) - logS; }
  LD p(std::size_t j) const { return std::exp(logp(j)); }
};

// Softmax of z = scale * l / theta in long double (finite rows).
Exact exact_row(std::span<const float> row, double theta, LD scale, bool paper_eps = false) {
  Exact x;
  x.row = row;
  x.scale = scale;
  x.theta = static_cast<LD>(theta);
  const std::size_t n = row.size();
  LD m = -INFINITY;
  for (std::size_t j = 0; j < n; ++j) m = std::max(m, x.z(j));
  x.m = m;
  LD S = 0, cS = 0, T = 0, cT = 0;  // Neumaier sums
  auto add = [](LD& s, LD& c, LD v) {
    const LD t = s + v;
    c += std::fabs(s) >= std::fabs(v) ? (s - t) + v : (v - t) + s;
    s = t;
  };
  for (std::size_t j = 0; j < n; ++j) {
    const LD d = x.z(j) - m, e = std::exp(d);
    add(S, cS, e);
    add(T, cT, e * d);
  }
  S += cS, T += cT;
  x.logS = std::log(S);
  x.lse = m + x.logS;
  x.H = x.logS - T / S;
  if (paper_eps) {
    LD He = 0, cHe = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const LD pj = x.p(j);
      add(He, cHe, -pj * std::log(pj + 1e-9L));
    }
    x.H_eps = He + cHe;
  }
  return x;
}

// The worst element of a long row, held to its budget like elem() does, but
// formatting only that one element (the ratio |got - exact| / budget orders
// elements the same way elem's ulp ratio does).
template <class Got, class Ex, class Bud>
Check worst_element(DType out, std::size_t n, Got got, Ex exact, Bud bud,
                    const std::string& where) {
  std::size_t wj = 0;
  double wr = -1;
  for (std::size_t j = 0; j < n; ++j) {
    const double g = got(j), e = exact(j);
    double r;
    if (overflows_to(out, g, e, bud(j, e))) {
      r = 0.0;
    } else if (!std::isfinite(e) || !std::isfinite(g)) {
      r = ((std::isnan(e) && std::isnan(g)) || g == e) ? 0.0 : INFINITY;
    } else {
      const double err = std::abs(g - e), b = bud(j, e);
      r = b > 0 ? err / b : (err > 0 ? INFINITY : 0.0);
    }
    if (!(r <= wr)) wr = r, wj = j;  // NaN ratios count as worst
  }
  Check c =
      elem(out, got(wj), exact(wj), bud(wj, exact(wj)), where + " item " + std::to_string(wj));
  if (!c.fails() || c.convention.empty()) return c;
  // The worst element holds under a convention the kernel does not declare:
  // an element no convention explains is the one to report, if there is one
  // (an error outranks a policy difference).
  for (std::size_t j = 0; j < n; ++j) {
    const double g = got(j), e = exact(j), b = bud(j, e);
    if (!std::isfinite(g) || !std::isfinite(e) || e == 0.0 || !(std::abs(g - e) > b)) continue;
    if (overflows_to(out, g, e, b)) continue;
    if (budget::convention_allowing(out, g, e, b).empty())
      return elem(out, g, e, b, where + " item " + std::to_string(j));
  }
  return c;
}

// The input of interface.sizes at size index i (n = sizes[i]): rows cycle
// through the finite generators (gaussian, uniform, fa3_outliers, offset)
// and the layouts kernel.h grants: two rows with input stride n + 1 and
// output stride n + 3; two rows in place (stride n + 2); three rows (two
// past 4097) with input stride n + 3 and a contiguous output.
RowParams sizes_input(const Run& run, Op op, std::size_t i, std::int64_t n, double theta) {
  static const char* const dists[] = {"gaussian", "uniform", "fa3_outliers", "offset"};
  RowParams p;
  p.n = n;
  p.dist = dists[i % 4];
  p.level = static_cast<int>(i / 4 % 3);
  p.temperature = theta;
  p.seed = run.seed ^ (0x9e3779b97f4a7c15ull * (i + 1)) ^ (static_cast<std::uint64_t>(op) << 7);
  switch (i % 3) {
    case 0:
      p.rows = 2, p.pad = 1, p.out_pad = 3;
      break;
    case 1:
      p.rows = 2, p.pad = 2, p.in_place = true;
      break;
    default:
      p.rows = p.n <= 4097 ? 3 : 2, p.pad = 3, p.out_pad = 0;
  }
  return p;
}

// Row r of one call's batch b against the long double reference, each
// check handed to `record` in order: softmax / log_softmax, the row's worst
// element within softmax_abs / log_softmax_abs; logsumexp / entropy, the
// row's value within lse_abs / entropy_abs; adaptive softmax (as the
// differential property holds it), entropy within entropy_abs, beta within
// beta_abs plus an ulp, and the worst weight within softmax_abs at beta z
// plus beta's error (budgets.hpp).
template <class Record>
void judge_row(const Kernel& k, Op op, DType t, double theta, const RowBatch& b, std::int64_t r,
               const RowOutputs& o, Record&& record) {
  const auto row = b.row(r);
  const budget::RowStats st = budget::stats(row, theta);
  const Exact x = exact_row(
      row, theta, 1.0L, op == Op::adaptive_softmax && k.adaptive_entropy() == SA_ENTROPY_PAPER_EPS);
  const std::string where = "n=" + std::to_string(b.n) + " row " + std::to_string(r);
  auto g = [&](std::size_t j) {
    return static_cast<double>(o.got[static_cast<std::size_t>(r * b.stride) + j]);
  };
  if (op == Op::softmax || op == Op::log_softmax) {
    // the worst element of the row, recorded once (rows are long)
    const bool sm = op == Op::softmax;
    record(worst_element(
        t, row.size(), g,
        [&](std::size_t j) { return static_cast<double>(sm ? x.p(j) : x.logp(j)); },
        [&](std::size_t j, double e) {
          const double z = static_cast<double>(row[j]) / theta;
          return sm ? (e == 0 ? 0.0 : budget::softmax_abs(t, st, z, e))
                    : budget::log_softmax_abs(t, st, z, e);
        },
        where));
  } else if (op == Op::logsumexp || op == Op::entropy) {
    const double e = static_cast<double>(op == Op::logsumexp ? x.lse : x.H);
    record(elem(DType::float32, o.got[static_cast<std::size_t>(r)], e,
                op == Op::logsumexp ? budget::lse_abs(st, e) : budget::entropy_abs(st, e), where));
  } else {  // adaptive softmax, as the differential property holds it
    const double He =
        static_cast<double>(k.adaptive_entropy() == SA_ENTROPY_PAPER_EPS ? x.H_eps : x.H);
    const double Be = theory::adaptive_beta(He);
    const double dH = budget::entropy_abs(st, He), dB = budget::beta_abs(He, dH);
    record(elem(DType::float32, o.H[static_cast<std::size_t>(r)], He, dH, where + " entropy"));
    record(elem(DType::float32, o.beta[static_cast<std::size_t>(r)], Be,
                dB + budget::ulp(DType::float32, Be), where + " beta"));
    const Exact xb = exact_row(row, theta, static_cast<LD>(Be));
    budget::RowStats sb = st;
    sb.max *= Be, sb.spread *= Be, sb.max_abs *= Be, sb.theta_one = false;
    record(worst_element(
        t, row.size(), g, [&](std::size_t j) { return static_cast<double>(xb.p(j)); },
        [&](std::size_t j, double e) {
          return e == 0 ? 0.0
                        : budget::softmax_abs(t, sb, Be * row[j] / theta, e) +
                              2.0 * std::abs(e) * st.spread * dB;
        },
        where));
  }
}

// What interface.sizes found over its sizes, for its verdict.
struct SizesResult {
  Check worst;
  std::string worst_input, error, first_not_applicable;
  std::vector<call_log::Call> worst_calls;  // the worst input's call (kernels/call_log.hpp)
  int calls = 0, not_applicable = 0;
};

// The verdict of interface.sizes on op and dtype t from what its sizes found.
Verdict sizes_verdict(const Run& run, const std::string& id, const Rule& rule, Op op, DType t,
                      std::size_t size_count, const SizesResult& s) {
  const Check& worst = s.worst;
  Verdict v;
  v.property = id;
  v.claim = claim_of(id);
  v.rule = rule;
  v.kernel = run.kernel.name();
  v.op = name_of(op);
  v.dtype = name_of(t);
  v.measured = worst.measured;
  v.bound = worst.bound;
  const std::string range = std::to_string(size_count) + " sizes from 1 to 2^" +
                            std::to_string(run.config.max_log2_n) + " + 1";
  if (!s.error.empty()) {
    v.outcome = Outcome::error;
    v.note = "kernel call failed: " + s.error;
  } else if (worst.fails()) {
    v.outcome = Outcome::fail;
    v.counterexample =
        "seed=" + std::to_string(run.seed) + " " + s.worst_input + " ; at " + worst.where;
    v.worst_case = v.counterexample;
    call_log::stash(v.counterexample, s.worst_calls);
    v.note = range + "; every element checked";
  } else {
    v.outcome = Outcome::pass;
    v.worst_case = s.worst_input;
    v.note = range + ", " + std::to_string(s.calls) +
             " calls, every element checked; worst: " + worst.where;
  }
  if (!worst.unit.empty()) v.note += "; measured and bound in " + worst.unit;
  if (worst.fails() && !worst.convention.empty())
    v.note += "; " + undeclared_convention_note(worst.convention);
  if (s.not_applicable)
    v.note += "; " + std::to_string(s.not_applicable) + " size(s) not applicable (e.g. " +
              s.first_not_applicable + ")";
  return v;
}

}  // namespace

std::vector<std::int64_t> interface_sizes(int max_log2_n) {
  std::vector<std::int64_t> s;
  for (int k = 0; k <= max_log2_n; ++k)
    for (std::int64_t d : {-1, 0, 1}) {
      const std::int64_t n = (std::int64_t{1} << k) + d;
      if (n >= 1 && std::find(s.begin(), s.end(), n) == s.end()) s.push_back(n);
    }
  std::sort(s.begin(), s.end());
  return s;
}

// interface.sizes (rule ulp): op on dtype t is right at every size
// interface_sizes(max_log2_n) lists, in every layout kernel.h grants: one
// call per size (sizes_input), every output element of every row within
// the ulp rule's budget (budgets.hpp) of the long double reference
// (exact_row, judge_row). A size past the kernel's max_n is not applicable
// and counted; the first call that fails ends the search.
void run_interface_sizes(const Run& run, Op op, DType t) {
  const std::string id = "interface.sizes";
  if (!run.wants_property(id)) return;
  const Kernel& k = run.kernel;
  const Rule& rule = rule_by_id("ulp");
  if (const std::string why = why_unsupported(k, op, t); !why.empty()) {
    run.emit(skip_verdict(run, id, claim_of(id), rule, op, t, why));
    return;
  }
  const double theta = run.config.temperature;
  const auto sizes = interface_sizes(run.config.max_log2_n);
  SizesResult s;
  for (std::size_t i = 0; i < sizes.size() && s.error.empty(); ++i) {
    const RowParams p = sizes_input(run, op, i, sizes[i], theta);
    const RowBatch b = materialise(p, t);
    const std::string input = describe(p, b, 8);
    run.before(id, input);
    ++s.calls;
    RowOutputs o;
    call_log::Capture capture;  // this input's call, for a case file
    try {
      o = call_row_op(k, op, t, b, theta);
    } catch (const NotApplicable& e) {  // n > max_n: not run (kernel.h)
      --s.calls;
      if (s.not_applicable++ == 0) s.first_not_applicable = e.what();
      continue;
    } catch (const std::exception& e) {
      s.error = e.what() + std::string(" (input: ") + input + ")";
      break;
    }
    const std::vector<call_log::Call> calls = capture.take();
    auto record = [&](const Check& c) {
      const Check before = s.worst;
      s.worst.worst(c);  // a failure beats a pass, an outright failure a convention's
      if (s.worst.applicable &&
          (!before.applicable || s.worst.ratio != before.ratio || s.worst.where != before.where)) {
        s.worst_input = input;
        s.worst_calls = calls;
      }
    };
    for (std::int64_t r = 0; r < b.rows; ++r) judge_row(k, op, t, theta, b, r, o, record);
  }
  run.emit(sizes_verdict(run, id, rule, op, t, sizes.size(), s));
}

}  // namespace sa::props::detail
