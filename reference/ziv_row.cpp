#include "reference/ziv_row.hpp"

#include <omp.h>

#include <cmath>
#include <limits>

namespace sa::ref::fast {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The cut-off tail (d_i < -111) adds < n 2^-160 <= 2^-130 to a sum >= 1 - 2^-40.
constexpr double kTail = 0x1p-129;

// gamma_k = k u / (1 - k u) (Higham).
double gamma(double k) { return k * u / (1 - k * u); }

}  // namespace

RowSums::RowSums(std::span<const double> l, double theta, const CrOptions& o)
    : l_(l), theta_(theta), unit_(theta == 1.0) {
  const std::size_t n = l.size();
  nt_ = n < (1u << 15) ? 1 : (o.threads > 0 ? o.threads : omp_get_max_threads());
  const int nt = nt_;
  const bool unit = unit_;
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
  m_ = m;
  ok_ = !(nan || pos_inf || !live || overflow || !std::isfinite(m) ||
          (!unit && std::abs(m) > 0x1p50));
  delta_ = unit ? 0.0 : 1.01 * u * u * (111.0 + 2.0 * (std::abs(m) + 111.0)) + 0x1p-1070;
}

// The scaled row: d_i = beta b_i with b_i = z_i - m as above (within
// delta_b of the computed (bh, bl) for b_i >= -111). d^ = dd_mul((bh, bl),
// b): |d^ - d_i| <= 4u^2 |b^ b| + |b^| |b - beta| + beta |b^ - b_i| <=
// 4.01u^2 |d^| + |b^| beta_err + beta delta_b. Only items with d^ >= -111
// are evaluated, and then |b^| <= 1.01 * 111 (beta >= 1): delta = 1.01
// (b.hi + beta_err) delta_b + 112.2 beta_err + 4.5u^2 111. Items with b_i <
// -111 have d_i < -111 too (beta >= 1) and are cut off as before.
RowSums::RowSums(std::span<const double> l, double theta, const CrOptions& o, DD b, double beta_err)
    : RowSums(l, theta, o) {
  scaled_ = true;
  beta_ = b;
  beta_err_ = beta_err;
  if (!((b.hi > 1.0 || (b.hi == 1.0 && b.lo >= 0)) && b.hi <= 4.0 && std::abs(b.lo) <= u * b.hi &&
        beta_err >= 0 && beta_err < 0x1p-30))
    ok_ = false;
  delta_ = (1.01 * (b.hi + beta_err) * delta_ + 112.2 * beta_err + 4.5 * u * u * 111.0) * kSafe;
}

// theta = 1: z_i = l_i, and (dh, dl) = two_sum(l_i, -m) is exact.
// theta != 1: q = RN(l/theta); l - q theta is a double (the remainder of a
// correctly rounded quotient, no underflow) formed exactly by the fma, so lo
// = RN((l - q theta)/theta) gives |z - q - lo| <= u |lo| + 2^-1074 <= u^2 |q|
// (1 + 2u) + 2^-1074. Then (s, t) = two_sum(q, -m) is exact and (dh, dl) =
// two_sum(s, RN(t + lo)) adds <= u |t + lo| <= u^2 (|s| + |q|)(1 + 2u). So
// |dh + dl - d_i| <= 1.01 u^2 (|dh| + 2 |q|) + 2^-1070 (arg_error); for |s|
// <= 111, |q| <= |m| + 111: that is delta.
bool RowSums::arg(std::size_t i, double& dh, double& dl, bool cut) const {
  const double x = l_[i];
  if (x == -kInf) return false;
  double q = x, lo = 0;
  if (!unit_) {
    q = x / theta_;
    lo = std::fma(-q, theta_, x) / theta_;
  }
  const DD s = two_sum(q, -m_);
  if (cut && !(s.hi >= exp_cutoff)) return false;  // also -inf from an overflowing q - m
  if (unit_) {
    dh = s.hi, dl = s.lo;
  } else {
    const DD d = two_sum(s.hi, s.lo + lo);
    dh = d.hi, dl = d.lo;
  }
  if (scaled_) {
    const DD d = dd_mul(DD{dh, dl}, beta_);
    if (cut && !(d.hi >= exp_cutoff)) return false;
    dh = d.hi, dl = d.lo;
  }
  return true;
}

double RowSums::arg_error(std::size_t i, double dh) const {
  if (scaled_) return delta_;  // used for d_i >= -111 only
  if (unit_) return 0.0;
  return 1.01 * u * u * (std::abs(dh) + 2.0 * std::abs(l_[i] / theta_)) + 0x1p-1070;
}

// Level 1: e_i = exp1(d_i), S1 by Sum2 (Ogita, Rump, Oishi 2005) on each
// thread's block, the blocks' (s, sigma) joined by two_sum in order.
//  |e_i - e^(d_i)| <= eps_e e^(d_i), eps_e = 2^-51 + 1.01 delta (exp1's bound
//  and the argument's error, e^delta - 1 <= 1.01 delta).
//  Sum2 with positive terms: the n - 1 + nt two_sums' errors sum to <= (n +
//  nt) u S (each is <= u of a partial sum <= S); accumulating them in sigma
//  costs <= gamma_(n+nt) of that; the final RN(s + sigma) <= 1.01u S. So
//  |S1 - sum e_i| <= (1.01u + gamma_(n+nt)^2) sum e_i and |S1 - S| <= eps_S
//  S, eps_S = eps_e + 1.01u + gamma_(n+nt)^2 + kTail.
void RowSums::level1(double* e) {
  const std::size_t n = l_.size();
  const int nt = nt_;
  std::vector<DD> part(static_cast<std::size_t>(nt));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const ExpTables& T = exp_tables();
    const int id = omp_get_thread_num();
    double s = 0, sigma = 0;
#pragma omp for schedule(static)
    for (std::size_t i = 0; i < n; ++i) {
      double dh, dl;
      if (!arg(i, dh, dl)) {
        if (e) e[i] = 0;
        continue;
      }
      const double v = exp1(T, dh, dl);
      if (e) e[i] = v;
      const DD a = two_sum(s, v);
      s = a.hi;
      sigma += a.lo;
    }
    part[static_cast<std::size_t>(id)] = {s, sigma};
  }
  double s = 0, sigma = 0;
  for (const DD& p : part) {
    const DD a = two_sum(s, p.hi);
    s = a.hi;
    sigma += a.lo + p.lo;
  }
  S1 = s + sigma;
  const double g = gamma(static_cast<double>(n) + nt);
  eps_e = exp1_rel_error + 1.01 * delta_;
  eps_S = (eps_e + 1.01 * u + g * g + kTail) * kSafe;
}

// Level 2: S2 = sum of exp2(d_i) by dd_add on each block, blocks joined by
// dd_add. |exp2 - e^(d_i)| <= eps_e2 e^(d_i), eps_e2 = 2^-97 + 1.01 delta;
// each of the n + nt dd_adds errs by <= 3.01u^2 of a partial sum <= S (1 +
// eps_e2): |S2 - S| <= eps_S2 S, eps_S2 = eps_e2 + 3.02 (n + nt) u^2 + kTail.
void RowSums::level2() {
  const std::size_t n = l_.size();
  const int nt = nt_;
  std::vector<DD> part(static_cast<std::size_t>(nt));
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    const ExpTables& T = exp_tables();
    const int id = omp_get_thread_num();
    DD acc{0, 0};
#pragma omp for schedule(static)
    for (std::size_t i = 0; i < n; ++i) {
      double dh, dl;
      if (arg(i, dh, dl)) acc = dd_add(acc, exp2(T, dh, dl));
    }
    part[static_cast<std::size_t>(id)] = acc;
  }
  S2 = DD{0, 0};
  for (const DD& p : part) S2 = dd_add(S2, p);
  eps_e2 = exp2_rel_error + 1.01 * delta_;
  eps_S2 = (eps_e2 + 3.02 * (static_cast<double>(n) + nt) * u * u + kTail) * kSafe;
}

// The rounding test of the double-double levels, exact up to err. With x
// and v made positive (rounding commutes with negation), r is the answer
// iff x lies strictly between the rounding boundaries around r: L, the
// midpoint of r and its predecessor (none when r = 0), and U, that of r and
// its successor (both have <= 25 bits: doubles). For a boundary M, (a, b) =
// two_sum(v.hi, -M) is exact and w = RN(a + RN(b + v.lo)) is within u^2 (|a|
// + |v.hi|) + u |w| of v - M; so if (1 - 2u) w > err + 4u^2 (|v.hi| + |a|),
// x - M > 0 surely (and likewise for M - x). Exact midpoints do not occur for
// the transcendental values these references produce; where a value is
// rational (1/k) it is representable, and an exact 0 fails the test.
//
// float64: the boundaries r +- (half an ulp) have 54 bits, so the test works
// on x - r instead. For a normal r > 0 with v.hi in {r, a neighbour of r},
// a = v.hi - r is exact (Sterbenz) and s = RN(a + v.lo) is within u |s| of
// v - r; so x - r lies within err + 1.01u |s| of s, and r is the answer iff
// that interval lies strictly inside (-h_down, h_up), h_down and h_up the
// half-spacings below and above r (powers of two, exact). r = 0 or
// below 2^-960 fails the test (MPFR decides). The comparisons are made with
// h (1 - 2^-50) (exact products) so that their own roundings (<= u of s +-
// e) cannot turn them.
static bool rounds_to_float64(const DD& v, double err, double r) {
  if (!(r >= 0x1p-960) || std::isinf(r)) return false;
  const double a = v.hi - r;
  if (std::abs(a) > 2 * (std::nextafter(r, kInf) - r)) return false;  // not a neighbour
  const double s = a + v.lo;
  const double e = err + 1.01 * u * std::abs(s);
  const double h_up = (std::nextafter(r, kInf) - r) / 2;
  const double h_down = (r - std::nextafter(r, 0.0)) / 2;
  constexpr double k = 1 - 0x1p-50;
  return s + e < h_up * k && s - e > -h_down * k;
}

bool rounds_to(DType t, const DD& v0, double err, double r) {
  DD v = v0;
  if (v.hi < 0 || (v.hi == 0 && std::signbit(r))) v = {-v.hi, -v.lo}, r = -r;
  if (std::isnan(r) || r < 0 || std::isinf(r)) return false;
  if (t == DType::float64) return rounds_to_float64(v, err, r);
  const FloatFormat f = format_of(t);
  auto beyond = [&](double M, double sign) {
    const DD a = two_sum(v.hi, -M);
    const double w = sign * (a.hi + (a.lo + v.lo));
    return (1 - 2 * u) * w > err + 4 * u * u * (std::abs(v.hi) + std::abs(a.hi));
  };
  int er = f.emin;
  if (r > 0) {
    std::frexp(r, &er);
    er = std::max(er - 1, f.emin);
  }
  const double up = std::ldexp(1.0, er - f.precision + 1);  // spacing above r
  const bool pow2_normal = r > 0 && er > f.emin && r == std::ldexp(1.0, er);
  const double down = pow2_normal ? up / 2 : up;  // spacing below r
  // r = 0 needs x > 0 surely too: -0 is the answer for tiny negative x.
  return beyond(r + up / 2, -1.0) && beyond(r == 0 ? 0.0 : r - down / 2, 1.0);
}

// Candidates: the rounding of v.hi, and of its neighbour on v.lo's side
// (v.hi may sit on a boundary, in double, with v.lo deciding the side).
double round_dd(DType t, const DD& v, double err) {
  const double r1 = round_double(t, v.hi);
  if (rounds_to(t, v, err, r1)) return r1;
  const double nudged = v.lo > 0   ? std::nextafter(v.hi, kInf)
                        : v.lo < 0 ? std::nextafter(v.hi, -kInf)
                                   : v.hi;
  const double r2 = round_double(t, nudged);
  if (r2 != r1 && rounds_to(t, v, err, r2)) return r2;
  return std::numeric_limits<double>::quiet_NaN();
}

// L = log S for S within eps_S S of the double-double Sv, with an absolute
// error bound eta: |L - log S| <= eta (infinite when the step fails).
//  y0 = std::log(Sv.hi) (no bound assumed); with delta = log Sv - y0,
//  Sv e^(-y0) = e^delta and c = Sv e^(-y0) - 1 = e^delta - 1. exp2 (2^-97),
//  dd_mul (4u^2) and dd_add (3u^2 + 13u^3 of |c|) give c^ within kappa =
//  2^-96 of c (Sv e^(-y0) <= 1.01). L^ = y0 + c^ by dd_add (3.01u^2 |L|).
//  L^ - log Sv = (c - delta) + (c^ - c), and for |delta| <= 0.01,
//  |e^delta - 1 - delta| <= 0.51 delta^2 with |delta| <= 1.01 |c| <= 1.02
//  |c^.hi| + 1.01 kappa =: cm. So |L^ - log Sv| <= 0.51 cm^2 + kappa + 3.01
//  u^2 |L^|, and |log S - log Sv| <= 1.01 eps_S (|log(1 + x)| <= 1.01 |x|).
//  exp2's range: -y0 is in [-21, 2^-40] for a sum S (n <= 2^30, 1 - 2^-40
//  <= S <= n) and in [-2^-29, 20.8] for p + 1e-9 (entropy_cr.cpp); |y0| > 21
//  is refused.
LogS log_of(const DD& Sv, double eps_S) {
  const double y0 = std::log(Sv.hi);
  const DD e = exp2(exp_tables(), -y0, 0.0);
  const DD c = dd_add(dd_mul(Sv, e), DD{-1.0, 0.0});
  const DD L = dd_add(DD{y0, 0.0}, c);
  constexpr double kappa = 0x1p-96;
  const double cm = 1.02 * std::abs(c.hi) + 1.01 * kappa;
  if (!(cm <= 0.01) || !(std::abs(y0) <= 21.0)) return {L, kInf};
  const double eta =
      (0.51 * cm * cm + kappa + 3.01 * u * u * std::abs(L.hi) + 1.01 * eps_S) * kSafe;
  return {L, eta};
}

// log1: the error analysis is in ziv_row.hpp.
bool log1(const ExpTables& T, double x, double& L) {
  const double y0 = std::log(x);
  if (!(std::abs(y0) <= 21.0)) return false;
  const double c = x * exp1(T, -y0, 0.0) - 1.0;
  if (!(std::abs(c) <= 0x1p-26)) return false;
  L = y0 + c;
  return true;
}

}  // namespace sa::ref::fast
