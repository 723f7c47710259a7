#include "reference/softmax_cr.hpp"

#include <omp.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "reference/fast_arith.hpp"
#include "reference/rounding.hpp"
#include "reference/softmax.hpp"

namespace sa::ref {
namespace {

using fast::DD;
using fast::u;
constexpr double kInf = std::numeric_limits<double>::infinity();

void check_args(std::span<const double> l, double theta) {
  if (l.empty())
    throw std::invalid_argument("softmax: the row has no logits (n = 0); expected n >= 1");
  if (!(theta > 0.0) || !std::isfinite(theta))
    throw std::invalid_argument("softmax: temperature " + std::to_string(theta) +
                                " is not a finite number > 0");
}

// The MPFR-only path: the reference's weights rounded to t, element by element.
std::vector<double> mpfr_softmax(DType t, std::span<const double> l, double theta) {
  const std::vector<Mp> p = softmax(l, theta);
  std::vector<double> out(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) out[i] = round_to(t, p[i]);
  return out;
}

int thread_count(const CrOptions& o, std::size_t n) {
  if (n < (1u << 15)) return 1;  // not worth a parallel region
  return o.threads > 0 ? o.threads : omp_get_max_threads();
}

// gamma_k = k u / (1 - k u) (Higham).
double gamma(double k) { return k * u / (1 - k * u); }

// The shifted argument d_i = z_i - m of exp, as a double-double, where z_i =
// l_i / theta and m = max_i RN(l_i / theta). Softmax is invariant under any
// common shift, so p_i = e^(d_i) / sum_j e^(d_j) exactly.
//  theta = 1: z_i = l_i, and (dh, dl) = two_sum(l_i, -m) is exact.
//  theta != 1: q = RN(l/theta); l - q theta is a double (the remainder of a
//  correctly rounded quotient, no underflow) formed exactly by the fma, so
//  lo = RN((l - q theta)/theta) gives |z - q - lo| <= u |lo| + 2^-1074 <=
//  u^2 |q| (1 + 2u) + 2^-1074. Then (s, t) = two_sum(q, -m) is exact and
//  (dh, dl) = two_sum(s, RN(t + lo)) adds <= u |t + lo| <= u^2 (|s| + |q|)(1
//  + 2u). For the elements evaluated (|s| <= 111, so |q| <= |m| + 111):
//  |dh + dl - d_i| <= delta = 1.01 u^2 (111 + 2 (|m| + 111)) + 2^-1070.
// Returns false for a masked element or d_i < -111 (weight < e^-111 <
// 2^-160: rounds to +0 in every target; the exact d_i is then < -111 + 2^-40).
struct Arg {
  std::span<const double> l;
  double theta, m;
  bool unit;
  bool operator()(std::size_t i, double& dh, double& dl) const {
    const double x = l[i];
    if (x == -kInf) return false;
    double q = x, lo = 0;
    if (!unit) {
      q = x / theta;
      lo = std::fma(-q, theta, x) / theta;
    }
    const DD s = fast::two_sum(q, -m);
    if (!(s.hi >= fast::exp_cutoff)) return false;  // also -inf from an overflowing q - m
    if (unit) {
      dh = s.hi, dl = s.lo;
    } else {
      const DD d = fast::two_sum(s.hi, s.lo + lo);
      dh = d.hi, dl = d.lo;
    }
    return true;
  }
};

}  // namespace

std::vector<double> softmax_rounded(DType t, std::span<const double> l, double theta,
                                    const CrOptions& o) {
  check_args(l, theta);
  const std::size_t n = l.size();
  CrStats st;
  st.elements = static_cast<std::int64_t>(n);
  auto finish = [&](std::vector<double> out) {
    if (o.stats) *o.stats += st;
    return out;
  };
  auto whole_row_mpfr = [&] {
    st.mpfr = st.elements;
    return finish(mpfr_softmax(t, l, theta));
  };
  if (o.path == RefPath::mpfr_only || t == DType::float64) return whole_row_mpfr();

  const bool unit = theta == 1.0;
  const int nt = thread_count(o, n);
  // Pass 1: the row's kind and m = max RN(l_i / theta).
  double m = -kInf;
  std::int64_t nan = 0, pos_inf = 0, live = 0, overflow = 0;
#pragma omp parallel for num_threads(nt) schedule(static) \
    reduction(max : m) reduction(+ : nan, pos_inf, live, overflow) if (nt > 1)
  for (std::size_t i = 0; i < n; ++i) {
    const double x = l[i];
    if (std::isnan(x)) ++nan;
    if (x == kInf) ++pos_inf;
    if (x != -kInf) ++live;
    const double q = unit ? x : x / theta;
    if (std::isfinite(x) && q == kInf) ++overflow;
    if (q > m) m = q;
  }
  // NaN, +inf and fully masked rows have exact, cheap MPFR answers; the rest
  // are outside the fast path's range (see the header).
  if (nan || pos_inf || !live || overflow || !std::isfinite(m) || (!unit && std::abs(m) > 0x1p50))
    return whole_row_mpfr();
  const Arg arg{l, theta, m, unit};
  const double delta =
      unit ? 0.0 : 1.01 * u * u * (111.0 + 2.0 * (std::abs(m) + 111.0)) + 0x1p-1070;
  // Every bound below is a first-order sum of relative errors each < 2^-30;
  // kSafe covers the products of two of them.
  constexpr double kSafe = 1.0 + 0x1p-20;
  // The skipped tail (d_i < -111) adds < n 2^-160 <= 2^-130 to a sum >= 1 - 2^-40.
  constexpr double kTail = 0x1p-129;

  // out holds e_i until the level-1 test replaces it with the rounded
  // weight; masked and cut-off elements hold +0 throughout (their answer).
  std::vector<double> out(n);
  std::vector<double>& e = out;

  // Level 1: e_i = exp1(d_i), S1 by Sum2 (Ogita, Rump, Oishi 2005) on each
  // thread's block, the blocks' (s, sigma) joined by two_sum in order.
  //  |e_i - e^(d_i)| <= eps_e e^(d_i), eps_e = 2^-51 + 1.01 delta (exp1's bound
  //  and the argument's error delta, e^delta - 1 <= 1.01 delta).
  //  Sum2 with positive terms: the n - 1 + nt two_sums' errors sum to <= (n +
  //  nt) u S (each is <= u of a partial sum <= S); accumulating them in
  //  sigma costs <= gamma_(n+nt) of that; the final RN(s + sigma) <= 1.01u S.
  //  So |S1 - sum e_i| <= (1.01u + gamma_(n+nt)^2) sum e_i and
  //  |S1 - S| <= eps_S S, eps_S = eps_e + 1.01u + gamma_(n+nt)^2 + kTail.
  std::vector<DD> part(static_cast<std::size_t>(nt));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const fast::ExpTables& T = fast::exp_tables();
    const int id = omp_get_thread_num();
    double s = 0, sigma = 0;
#pragma omp for schedule(static)
    for (std::size_t i = 0; i < n; ++i) {
      double dh, dl;
      if (!arg(i, dh, dl)) {
        e[i] = 0;
        continue;
      }
      const double v = fast::exp1(T, dh, dl);
      e[i] = v;
      const DD a = fast::two_sum(s, v);
      s = a.hi;
      sigma += a.lo;
    }
    part[static_cast<std::size_t>(id)] = {s, sigma};
  }
  double s = 0, sigma = 0;
  for (const DD& p : part) {
    const DD a = fast::two_sum(s, p.hi);
    s = a.hi;
    sigma += a.lo + p.lo;
  }
  const double S1 = s + sigma;
  const double g = gamma(static_cast<double>(n) + nt);
  const double eps_e = fast::exp1_rel_error + 1.01 * delta;
  const double eps_S = eps_e + 1.01 * u + g * g + kTail;
  // p^_i = RN(e_i / S1) = p_i (1 + a)(1 + c) / (1 + b), |a| <= eps_e, |b| <=
  // eps_S, |c| <= u: |p^_i - p_i| <= eps1 p_i.
  const double eps1 = (eps_e + eps_S + u) * kSafe;
  // The rounding test (level 1). p_i lies in [p^/(1 + eps1), p^/(1 - eps1)]
  // within [p^ (1 - 2 eps1), p^ (1 + 2 eps1)]; with w = 2 eps1 + 2u,
  // RN(1 - w) <= 1 - 2 eps1 - 1.5u, so lo = RN(p^ RN(1 - w)) <= p^ (1 - 2
  // eps1 - 1.5u)(1 + u) <= p^ (1 - 2 eps1); likewise hi >= p^ (1 + 2 eps1).
  // So [lo, hi] holds p_i, and if lo and hi round alike, so does p_i.
  std::vector<std::vector<std::size_t>> open_parts(static_cast<std::size_t>(nt));
  const bool test1 = eps1 < 0x1p-30;
  const double w = 2 * eps1 + 2 * u;
  const double f_lo = 1 - w, f_hi = 1 + w;
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    auto& mine = open_parts[static_cast<std::size_t>(omp_get_thread_num())];
#pragma omp for schedule(static)
    for (std::size_t i = 0; i < n; ++i) {
      if (e[i] == 0) continue;  // masked, or below e^-111: +0, exact
      const double p = e[i] / S1;
      if (test1 && fast::decided(t, p * f_lo, p * f_hi)) {
        out[i] = fast::round_double(t, p);
      } else {
        mine.push_back(i);
      }
    }
  }
  std::vector<std::size_t> open;  // not yet certified, in index order
  for (const auto& part_open : open_parts)
    open.insert(open.end(), part_open.begin(), part_open.end());
  const auto n_open = static_cast<std::int64_t>(open.size());
  st.level1 = static_cast<std::int64_t>(n) - n_open;
  if (n_open == 0) return finish(std::move(out));

  // Level 2: S2 = sum of exp2(d_i) by dd_add on each block, blocks joined
  // by dd_add. |exp2 - e^(d_i)| <= eps_e2 e^(d_i), eps_e2 = 2^-97 + 1.01
  // delta; each of the n + nt dd_adds errs by <= 3.01u^2 of a partial sum
  // <= S (1 + eps_e2): |S2 - S| <= eps_S2 S, eps_S2 = eps_e2 + 3.02 (n + nt)
  // u^2 + kTail. The quotient by dd_div adds <= 64u^2: |p2 - p_i| <= eps2 p_i.
  std::vector<DD> part2(static_cast<std::size_t>(nt));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const fast::ExpTables& T = fast::exp_tables();
    const int id = omp_get_thread_num();
    DD acc{0, 0};
#pragma omp for schedule(static)
    for (std::size_t i = 0; i < n; ++i) {
      double dh, dl;
      if (arg(i, dh, dl)) acc = fast::dd_add(acc, fast::exp2(T, dh, dl));
    }
    part2[static_cast<std::size_t>(id)] = acc;
  }
  DD S2{0, 0};
  for (const DD& p : part2) S2 = fast::dd_add(S2, p);
  const double eps_e2 = fast::exp2_rel_error + 1.01 * delta;
  const double eps_S2 = eps_e2 + 3.02 * (static_cast<double>(n) + nt) * u * u + kTail;
  const double eps2 = (eps_e2 + eps_S2 + 64 * u * u) * kSafe;
  // The rounding test (level 2), exact up to eps2. p_i is within eps2 p_i <=
  // 2 eps2 ph of ph + pl (|pl| <= u ph). A candidate r is the answer if p_i
  // lies strictly between the rounding boundaries around r: L, the midpoint
  // of r and its predecessor (none when r = 0), and U, that of r and its
  // successor (both have <= 25 bits: doubles). For a boundary M, (a, b) =
  // two_sum(ph, -M) is exact and v = RN(a + RN(b + pl)) is within u^2 (|a|
  // + ph) + u |v| of ph + pl - M; so if (1 - 2u)|v| > 2 eps2 ph + 4u^2 (ph +
  // |a|) = margin, p_i - M has the sign of v. Exact midpoints do not occur:
  // p_i is transcendental unless it is 1/k (k tied maxima, the rest masked).
  std::int64_t n_mpfr = 0;
  if (eps2 < 0x1p-60 && o.fast_levels >= 2) {
    const fast::ExpTables& T = fast::exp_tables();
    const FloatFormat f = format_of(t);
    auto beyond = [&](const DD& p, double M, double sign) {  // sign (p - M) > margin, surely
      const DD a = fast::two_sum(p.hi, -M);
      const double v = sign * (a.hi + (a.lo + p.lo));
      const double margin = 2 * eps2 * p.hi + 4 * u * u * (p.hi + std::abs(a.hi));
      return (1 - 2 * u) * v > margin;
    };
    // Whether p_i surely lies strictly between the boundaries around r.
    auto between = [&](const DD& p, double r) {
      int er = f.emin;
      if (r > 0) {
        std::frexp(r, &er);
        er = std::max(er - 1, f.emin);
      }
      const double up = std::ldexp(1.0, er - f.precision + 1);  // spacing above r
      const bool pow2_normal = r > 0 && er > f.emin && r == std::ldexp(1.0, er);
      const double down = pow2_normal ? up / 2 : up;  // spacing below r
      return beyond(p, r + up / 2, -1.0) && (r == 0 || beyond(p, r - down / 2, 1.0));
    };
    std::vector<std::size_t> still;
    for (std::size_t i : open) {
      double dh, dl;
      arg(i, dh, dl);
      const DD p = fast::dd_div(fast::exp2(T, dh, dl), S2);
      // Candidates: the rounding of ph, and of its neighbour on pl's side
      // (ph may sit on a boundary, in double, with pl deciding the side).
      const double nudged = p.lo > 0   ? std::nextafter(p.hi, kInf)
                            : p.lo < 0 ? std::nextafter(p.hi, -kInf)
                                       : p.hi;
      double r = fast::round_double(t, p.hi);
      bool ok = between(p, r);
      if (!ok) {
        r = fast::round_double(t, nudged);
        ok = between(p, r);
      }
      if (ok) {
        out[i] = r;
      } else {
        still.push_back(i);
      }
    }
    open.swap(still);
  }
  n_mpfr = static_cast<std::int64_t>(open.size());
  st.level2 = n_open - n_mpfr;
  if (n_mpfr == 0) return finish(std::move(out));

  // Level 3: MPFR for the outputs still open.
  st.mpfr = n_mpfr;
  const std::vector<Mp> p = softmax(l, theta);
  for (std::size_t i : open) out[i] = round_to(t, p[i]);
  return finish(std::move(out));
}

}  // namespace sa::ref
