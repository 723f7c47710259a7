#include "reference/entropy_cr.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/rounding.hpp"
#include "reference/softmax.hpp"
#include "reference/ziv_row.hpp"

namespace sa::ref::fast {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double gamma(double k) { return k * u / (1 - k * u); }
// The cut-off tail of T: |e^d d| <= 111 e^-111 <= 2^-153 for d < -111, times n <= 2^30.
constexpr double kTailT = 0x1p-122;

// The paper's eps = 1e-9 (the exact decimal) as a double-double: hi =
// RN(1e-9), lo = RN(1e-9 - hi), so |hi - 1e-9| <= u 1e-9 and |hi + lo -
// 1e-9| <= u^2 1e-9.
const DD& paper_eps() {
  static const DD e = [] {
    PrecisionScope prec(256);
    const Mp x = Mp(1) / Mp(1000000000);
    const double hi = x.convert_to<double>();
    return DD{hi, Mp(x - Mp(hi)).convert_to<double>()};
  }();
  return e;
}

// The cut-off tail of the paper's H: an item with d_i < -111 has p_i <=
// 2^-160 and 0 <= -p_i log(p_i + 1e-9) <= 20.8 p_i <= 2^-155.6; <= 2^30 of
// them add <= 2^-125.6.
constexpr double kTailH = 0x1p-125;

}  // namespace

Estimate shannon_entropy_estimate(RowSums& row, int level) {
  const std::size_t n = row.size();
  const int nt = row.threads();
  const double g = gamma(static_cast<double>(n) + nt);

  // Level 1. t_i = RN(e_i dh_i): |t_i - e^(d_i) d_i| <= (eps_e + 2.01u) |e^(d_i)
  // d_i| + 1.01 e^(d_i) arg_error (dl dropped: |dl| <= u |dh|). Sum2 of these
  // same-sign terms: (1.01u + gamma^2) relative. So |T1 - T| <= eps_T |T| +
  // 1.01 delta S + kTailT, eps_T = eps_e + 3.02u + gamma^2. q = RN(-T1 / S1)
  // is within q (eps_T + eps_S + u) 1.01 + 1.02 delta + kTailT of -T/S (S >=
  // 1 - 2^-40). H = L + (-T/S): v = dd_add(L^, q) adds 3.01u^2 |v|.
  if (level == 1) {
    std::vector<double> e(n);
    row.level1(e.data());
    double s = 0, sigma = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (e[i] == 0) continue;
      double dh, dl;
      row.arg(i, dh, dl);
      const DD a = two_sum(s, e[i] * dh);
      s = a.hi;
      sigma += a.lo;
    }
    const double T1 = s + sigma;
    const double eps_T = row.eps_e + 3.02 * u + g * g;
    const double q = -T1 / row.S1;
    const LogS ls = log_of(DD{row.S1, 0.0}, row.eps_S);
    const DD v = dd_add(ls.L, DD{q, 0.0});
    const double err = (ls.eta + 1.01 * q * (eps_T + row.eps_S + u) + 1.02 * row.delta() + kTailT +
                        3.01 * u * u * std::abs(v.hi)) *
                       kSafe;
    return {v, err};
  }
  // Level 2. t_i = dd_mul(exp2(d_i), (dh, dl)): relative eps_e2 + 4u^2 plus
  // 1.01 e^(d_i) arg_error; dd_add accumulation: 3.02 (n + nt) u^2 relative
  // (same-sign terms). q = dd_div(-T2, S2) adds 64u^2. The rest as above.
  {
    row.level2();
    const ExpTables& T = exp_tables();
    DD T2{0, 0};
    for (std::size_t i = 0; i < n; ++i) {
      double dh, dl;
      if (!row.arg(i, dh, dl)) continue;
      T2 = dd_add(T2, dd_mul(exp2(T, dh, dl), DD{dh, dl}));
    }
    const double eps_T2 = row.eps_e2 + 4 * u * u + 3.02 * (static_cast<double>(n) + nt) * u * u;
    const DD q = dd_div(DD{-T2.hi, -T2.lo}, row.S2);
    const LogS ls = log_of(row.S2, row.eps_S2);
    const DD v = dd_add(ls.L, q);
    const double err = (ls.eta + 1.01 * q.hi * (eps_T2 + row.eps_S2 + 64 * u * u) +
                        1.02 * row.delta() + kTailT + 3.01 * u * u * std::abs(v.hi)) *
                       kSafe;
    return {v, err};
  }
}

// The paper's entropy H = -sum_i p_i log(p_i + eps), eps = 1e-9 exactly.
// Terms are mixed in sign (only the top weight's, when p > 1 - eps, is
// negative, and then >= -eps), so the bounds are absolute, stated with B =
// sum |term_i| as computed (B >= |H|, B <= H + 2 eps).
Estimate paper_entropy_estimate(RowSums& row, int level) {
  const std::size_t n = row.size();
  const int nt = row.threads();
  const double g = gamma(static_cast<double>(n) + nt);
  const DD eps = paper_eps();
  struct Part {
    double s = 0, sigma = 0, B = 0, E = 0;
    DD acc{};
    bool ok = true;
  };

  // Level 1 (double), per live item with e_i = exp1(d_i) > 0:
  //  p^ = RN(e_i / S1), |p^ - p| <= eps_p p, eps_p = eps_e + eps_S + u (as
  //  softmax_cr.cpp). x^ = RN(p^ + RN(eps)): |x^ - x| <= eps_p p + u eps + u
  //  x^ <= (eps_p + 2.01u) x, so |log x^ - log x| <= zeta1 = 1.01 (eps_p +
  //  2.01u). L^ = RN(y0 + c) from log1: |L^ - log x| <= kLog1Err + zeta1 + u
  //  |L^|. t^ = RN(p^ L^): |t^ - p log x| <= u |t^| + |p^ - p| |L^| + p |L^
  //  - log x| <= p (kLog1Err + zeta1) + (1.02 eps_p + 2.02u) |t^|. Summed
  //  over the items (sum p <= 1): (kLog1Err + zeta1) + (1.02 eps_p + 2.02u)
  //  B. Sum2 of the t^ (per-thread blocks joined by two_sum, n + nt error-
  //  free steps, mixed signs; Ogita-Rump-Oishi Prop. 4.5): <= 1.01u |Sum| +
  //  gamma_(n+nt)^2 B. Plus kTailH. B is summed in double (<= gamma_(n+nt)
  //  2^-22 relative, within the factor 1.01).
  if (level == 1) {
    std::vector<double> e(n);
    row.level1(e.data());
    const double eps_p = (row.eps_e + row.eps_S + u) * kSafe;
    const double zeta1 = 1.01 * (eps_p + 2.01 * u);
    const double S1 = row.S1;
    std::vector<Part> part(static_cast<std::size_t>(nt));
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
      const ExpTables& T = exp_tables();
      Part my;
#pragma omp for schedule(static)
      for (std::size_t i = 0; i < n; ++i) {
        if (e[i] == 0) continue;  // masked (term 0) or cut off (kTailH)
        const double p = e[i] / S1;
        double L;
        if (!log1(T, p + eps.hi, L)) {
          my.ok = false;
          continue;
        }
        const double term = p * L;
        const DD a = two_sum(my.s, term);
        my.s = a.hi;
        my.sigma += a.lo;
        my.B += std::abs(term);
      }
      part[static_cast<std::size_t>(omp_get_thread_num())] = my;
    }
    double s = 0, sigma = 0, B = 0;
    bool ok = eps_p < 0x1p-30;
    for (const Part& p : part) {
      const DD a = two_sum(s, p.s);
      s = a.hi;
      sigma += a.lo + p.sigma;
      B += p.B;
      ok = ok && p.ok;
    }
    const double sum = s + sigma;
    const double err = ((kLog1Err + zeta1) + 1.01 * (1.02 * eps_p + 2.02 * u + g * g) * B +
                        1.01 * u * std::abs(sum) + kTailH) *
                       kSafe;
    return {DD{-sum, 0.0}, ok ? err : kInf};
  }
  // Level 2 (double-double), per live item with d_i >= -111:
  //  p = dd_div(exp2(d_i), S2): |p - p_i| <= eps_p2 p_i, eps_p2 = eps_e2 +
  //  eps_S2 + 64u^2 (as softmax_cr.cpp). x = dd_add(p, eps as hi + lo):
  //  |x - x_i| <= eps_p2 p_i + u^2 eps + 3.01u^2 x <= eps_x x_i, eps_x =
  //  1.01 (eps_p2 + 4.01u^2). L = log_of(x, eps_x) (ziv_row.cpp): |L - log
  //  x_i| <= eta_i. term = dd_mul(p, L): |term - p_i log x_i| <= 4u^2 |p L|
  //  + |p - p_i| |L| + p_i eta_i <= (4.04u^2 + 1.01 eps_p2) |term| + 1.01 p
  //  eta_i. dd_add accumulation (blocks, then joined): n + nt steps, each <=
  //  (3u^2 + 13u^3) of a partial sum <= 1.01 B: <= 3.02 (n + nt) u^2 B. E =
  //  sum p.hi eta_i and B in double (the factors 1.03 and 1.01 cover their
  //  roundings). Plus kTailH.
  {
    row.level2();
    const double eps_p2 = (row.eps_e2 + row.eps_S2 + 64 * u * u) * kSafe;
    const double eps_x = 1.01 * (eps_p2 + 4.01 * u * u);
    const DD S2 = row.S2;
    std::vector<Part> part(static_cast<std::size_t>(nt));
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
      const ExpTables& T = exp_tables();
      Part my;
#pragma omp for schedule(static)
      for (std::size_t i = 0; i < n; ++i) {
        double dh, dl;
        if (!row.arg(i, dh, dl)) continue;
        const DD p = dd_div(exp2(T, dh, dl), S2);
        const LogS ls = log_of(dd_add(p, eps), eps_x);
        if (!std::isfinite(ls.eta)) {
          my.ok = false;
          continue;
        }
        const DD term = dd_mul(p, ls.L);
        my.acc = dd_add(my.acc, term);
        my.B += std::abs(term.hi);
        my.E += p.hi * ls.eta;
      }
      part[static_cast<std::size_t>(omp_get_thread_num())] = my;
    }
    DD acc{0, 0};
    double B = 0, E = 0;
    bool ok = eps_p2 < 0x1p-60;
    for (const Part& p : part) {
      acc = dd_add(acc, p.acc);
      B += p.B;
      E += p.E;
      ok = ok && p.ok;
    }
    const double err =
        (1.03 * E +
         1.01 * (1.01 * eps_p2 + 4.04 * u * u + 3.02 * (static_cast<double>(n) + nt) * u * u) * B +
         kTailH) *
        kSafe;
    return {DD{-acc.hi, -acc.lo}, ok ? err : kInf};
  }
}

}  // namespace sa::ref::fast

namespace sa::ref {
namespace {

double entropy_rounded(DType t, std::span<const double> l, double theta, const CrOptions& o,
                       EntropyDefinition def) {
  if (l.empty())
    throw std::invalid_argument("entropy: the row has no logits (n = 0); expected n >= 1");
  if (!(theta > 0.0) || !std::isfinite(theta))
    throw std::invalid_argument("entropy: temperature " + std::to_string(theta) +
                                " is not a finite number > 0");
  CrStats st;
  st.elements = 1;
  auto finish = [&](double r) {
    if (o.stats) *o.stats += st;
    return r;
  };
  auto mpfr = [&] {
    st.mpfr = 1;
    return finish(round_to(t, entropy(l, theta, def)));
  };
  if (o.path == RefPath::mpfr_only) return mpfr();
  fast::RowSums row(l, theta, o);
  if (!row.fast_ok()) return mpfr();
  for (int level = 1; level <= std::min(o.fast_levels, 2); ++level) {
    const fast::Estimate e = def == EntropyDefinition::shannon
                                 ? fast::shannon_entropy_estimate(row, level)
                                 : fast::paper_entropy_estimate(row, level);
    const double r = fast::round_estimate(t, e);
    if (!std::isnan(r)) {
      (level == 1 ? st.level1 : st.level2) = 1;
      return finish(r);
    }
  }
  return mpfr();
}

}  // namespace

double shannon_entropy_rounded(DType t, std::span<const double> l, double theta,
                               const CrOptions& o) {
  return entropy_rounded(t, l, theta, o, EntropyDefinition::shannon);
}

double paper_entropy_rounded(DType t, std::span<const double> l, double theta, const CrOptions& o) {
  return entropy_rounded(t, l, theta, o, EntropyDefinition::paper_eps);
}

}  // namespace sa::ref
