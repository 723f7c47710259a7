#include "reference/entropy_cr.hpp"

#include <omp.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/rounding.hpp"
#include "reference/softmax.hpp"
#include "reference/ziv_row.hpp"

namespace sa::ref {

namespace {

using fast::DD;
using fast::u;

double gamma(double k) { return k * u / (1 - k * u); }
// The cut-off tail of T: |e^d d| <= 111 e^-111 <= 2^-153 for d < -111, times n <= 2^30.
constexpr double kTailT = 0x1p-122;

}  // namespace

double shannon_entropy_rounded(DType t, std::span<const double> l, double theta,
                               const CrOptions& o) {
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
    return finish(round_to(t, entropy(l, theta, EntropyDefinition::shannon)));
  };
  if (o.path == RefPath::mpfr_only || t == DType::float64) return mpfr();
  fast::RowSums row(l, theta, o);
  if (!row.fast_ok()) return mpfr();
  const std::size_t n = l.size();
  const int nt = row.threads();
  const double g = gamma(static_cast<double>(n) + nt);

  // Level 1. t_i = RN(e_i dh_i): |t_i - e^(d_i) d_i| <= (eps_e + 2.01u) |e^(d_i)
  // d_i| + 1.01 e^(d_i) arg_error (dl dropped: |dl| <= u |dh|). Sum2 of these
  // same-sign terms: (1.01u + gamma^2) relative. So |T1 - T| <= eps_T |T| +
  // 1.01 delta S + kTailT, eps_T = eps_e + 3.02u + gamma^2. q = RN(-T1 / S1)
  // is within q (eps_T + eps_S + u) 1.01 + 1.02 delta + kTailT of -T/S (S >=
  // 1 - 2^-40). H = L + (-T/S): v = dd_add(L^, q) adds 3.01u^2 |v|.
  {
    std::vector<double> e(n);
    row.level1(e.data());
    double s = 0, sigma = 0;
    for (std::size_t i = 0; i < n; ++i) {
      if (e[i] == 0) continue;
      double dh, dl;
      row.arg(i, dh, dl);
      const DD a = fast::two_sum(s, e[i] * dh);
      s = a.hi;
      sigma += a.lo;
    }
    const double T1 = s + sigma;
    const double eps_T = row.eps_e + 3.02 * u + g * g;
    const double q = -T1 / row.S1;
    const fast::LogS ls = fast::log_of(DD{row.S1, 0.0}, row.eps_S);
    const DD v = fast::dd_add(ls.L, DD{q, 0.0});
    const double err = (ls.eta + 1.01 * q * (eps_T + row.eps_S + u) + 1.02 * row.delta() + kTailT +
                        3.01 * u * u * std::abs(v.hi)) *
                       fast::kSafe;
    const double r =
        std::isfinite(err) ? fast::round_dd(t, v, err) : std::numeric_limits<double>::quiet_NaN();
    if (!std::isnan(r)) {
      st.level1 = 1;
      return finish(r);
    }
  }
  // Level 2. t_i = dd_mul(exp2(d_i), (dh, dl)): relative eps_e2 + 4u^2 plus
  // 1.01 e^(d_i) arg_error; dd_add accumulation: 3.02 (n + nt) u^2 relative
  // (same-sign terms). q = dd_div(-T2, S2) adds 64u^2. The rest as above.
  if (o.fast_levels >= 2) {
    row.level2();
    const fast::ExpTables& T = fast::exp_tables();
    DD T2{0, 0};
    for (std::size_t i = 0; i < n; ++i) {
      double dh, dl;
      if (!row.arg(i, dh, dl)) continue;
      T2 = fast::dd_add(T2, fast::dd_mul(fast::exp2(T, dh, dl), DD{dh, dl}));
    }
    const double eps_T2 = row.eps_e2 + 4 * u * u + 3.02 * (static_cast<double>(n) + nt) * u * u;
    const DD q = fast::dd_div(DD{-T2.hi, -T2.lo}, row.S2);
    const fast::LogS ls = fast::log_of(row.S2, row.eps_S2);
    const DD v = fast::dd_add(ls.L, q);
    const double err = (ls.eta + 1.01 * q.hi * (eps_T2 + row.eps_S2 + 64 * u * u) +
                        1.02 * row.delta() + kTailT + 3.01 * u * u * std::abs(v.hi)) *
                       fast::kSafe;
    const double r =
        std::isfinite(err) ? fast::round_dd(t, v, err) : std::numeric_limits<double>::quiet_NaN();
    if (!std::isnan(r)) {
      st.level2 = 1;
      return finish(r);
    }
  }
  return mpfr();
}

}  // namespace sa::ref
