// The fast level of the row backward references; row_backward_fast.hpp says
// what each function computes. Compiled with -ffp-contract=off: every
// operation written is one IEEE operation (the bounds count them).
//
// Notation: u = 2^-53. fast_arith.hpp's double-double operations have
// relative errors dd_add <= 3u^2 + 13u^3 < 4u^2 = 2^-104, dd_mul <= 4u^2,
// dd_div <= 64u^2 = 2^-100, exp2 <= 2^-97, for results in the normal range.
// Every magnitude below is at least 2^-298 * 2^-160 and at most 2^420, far
// inside it.
#include "reference/row_backward_fast.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "reference/fast_arith.hpp"

namespace sa::ref::detail {
namespace {

using fast::DD;
constexpr double k4u2 = 0x1p-104;    // dd_add, dd_mul
constexpr double k64u2 = 0x1p-100;   // dd_div
constexpr double kExpRel = 0x1p-97;  // exp2

// A computed bound times this is an upper bound of the exact one: every
// bound below is a sum of at most a few products of doubles computed with
// rounding to nearest, each within (1 + u) of exact.
constexpr double kUp = 1.0 + 0x1p-40;

DD neg(DD x) { return {-x.hi, -x.lo}; }

bool theta_ok(double theta) { return theta >= 0x1p-60 && theta <= 0x1p60; }

// The double nearest to v = hi + lo (normalised: |lo| <= ulp(hi) / 2), when
// every real within E of v rounds to it. The neighbours of hi are hi +- ulp
// (hi - ulp / 2 towards zero when |hi| is a power of two), so the rounding
// boundaries are ulp / 2 away, or ulp / 4 towards zero at a power of two; the
// 1 - 2^-20 margin covers the roundings of the test itself.
bool certify_double(DD v, double E, double& out) {
  if (v.hi == 0 || !std::isfinite(v.hi) || !std::isfinite(E)) return false;
  int e = 0;
  const double m = std::frexp(std::abs(v.hi), &e);  // |hi| = m 2^e, m in [0.5, 1)
  const double ulp = std::ldexp(1.0, e - 53);
  const double away = ulp / 2, towards = m == 0.5 ? ulp / 4 : ulp / 2;
  const double s = std::signbit(v.hi) ? -v.lo : v.lo;  // > 0: away from zero
  const double margin = 1 - 0x1p-20;
  if (!(s + E < away * margin) || !(E - s < towards * margin)) return false;
  out = v.hi;
  return true;
}

// The rounding of v = hi + lo in t, when every real within E of v rounds to
// it: a and b, within 2^-50 |hi| more of v than E, enclose [v - E, v + E]
// (each is two roundings of a sum of doubles below 2 |hi|), and rounding to
// nearest is monotone (fast::decided).
bool certify_target(DType t, DD v, double E, double& out) {
  const double w = E + 0x1p-50 * std::abs(v.hi);
  const double a = v.hi + (v.lo - w), b = v.hi + (v.lo + w);
  if (!fast::decided(t, a, b)) return false;
  out = fast::round_double(t, a);
  return true;
}

bool certify(DType t, DD v, double E, double& exact, double& rounded) {
  return certify_double(v, E, exact) && certify_target(t, v, E, rounded);
}

// sum_j terms[j] in double-double and sum_j |terms[j]| rounded up. Each
// dd_add errs by <= 4u^2 of its result, which is <= A (1 + tiny), so the sum
// is within (n + 2) 4u^2 A of exact.
struct Sum {
  DD s;
  double abs_up = 0;  // >= sum |terms|
  double err = 0;     // >= |s - sum terms|
};
template <class Term>
Sum dd_sum(std::size_t n, Term term) {
  Sum r;
  double a = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const double x = term(j);
    r.s = fast::dd_add(r.s, DD{x, 0});
    a += std::abs(x);
  }
  r.abs_up = a * (1 + static_cast<double>(n + 2) * 0x1p-52);
  r.err = static_cast<double>(n + 2) * k4u2 * r.abs_up * kUp;
  return r;
}

bool finite_row(std::span<const float> a) {
  for (float x : a)
    if (!std::isfinite(x)) return false;
  return true;
}

}  // namespace

// dx_i = y_i (dy_i - S) / theta, S = <y, dy>.
// - y_j dy_j is exact in double (two 24-bit significands; >= 2^-298).
// - S: dd_sum, error errS = (n + 2) 4u^2 A, A = sum |y_j dy_j|.
// - D = dd_add(dy_i, -S): error errS + 4u^2 (|dy_i| + A).
// - P = dd_mul(y_i, D): |y_i| times that, plus 4u^2 |y_i| |D|.
// - Q = dd_div(P, theta): that / theta, plus 64u^2 |Q|.
// y_i = 0 gives an exact zero whose sign is y_i's times D's, when D's sign is
// certain (|D| > its error). A value whose error interval holds a rounding
// boundary (an exact tie, as short bfloat16 and float16 products make) is
// left to MPFR.
bool softmax_backward_fast(DType t, std::span<const float> y, std::span<const float> dy,
                           double theta, RowGradient& out) {
  const std::size_t n = y.size();
  if (!theta_ok(theta) || !finite_row(y) || !finite_row(dy)) return false;
  const Sum S = dd_sum(n, [&](std::size_t j) { return double(y[j]) * double(dy[j]); });
  out.exact.resize(n);
  out.rounded.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const DD D = fast::dd_add(DD{dy[i], 0}, neg(S.s));
    const double errD = (S.err + k4u2 * (std::abs(double(dy[i])) + S.abs_up)) * kUp;
    if (y[i] == 0) {
      if (!(std::abs(D.hi) > 2 * errD)) return false;
      const bool negative = std::signbit(y[i]) != std::signbit(D.hi);
      out.exact[i] = out.rounded[i] = negative ? -0.0 : 0.0;
      continue;
    }
    if (D.hi == 0) {
      // dd_add errs by at most 4u^2 of the exact |D|: with S exact (a row of
      // one item) a computed 0 is an exact 0, +0 for a nonzero dy_i (MPFR's
      // x - x), and dx = y_i (+0) / theta has y_i's sign.
      if (n != 1 || dy[i] == 0) return false;
      out.exact[i] = out.rounded[i] = std::signbit(y[i]) ? -0.0 : 0.0;
      continue;
    }
    const DD P = fast::dd_mul(DD{y[i], 0}, D);
    const double ay = std::abs(double(y[i]));
    const double errP = (ay * errD + k4u2 * ay * std::abs(D.hi) * 2) * kUp;
    const DD Q = theta == 1.0 ? P : fast::dd_div(P, DD{theta, 0});
    const double E =
        theta == 1.0 ? errP : (errP / theta * (1 + 0x1p-50) + k64u2 * std::abs(Q.hi) * 2) * kUp;
    if (!certify(t, Q, E, out.exact[i], out.rounded[i])) return false;
  }
  return true;
}

// dx_i = (dy_i - e_i S) / theta, e_i = exp(y_i), S = sum_j dy_j.
// - S: dd_sum, error errS = (n + 2) 4u^2 A, A = sum |dy_j| (floats: exact terms).
// - e_i: 1 for y_i = 0 and 0 for y_i = -inf (exact); exp2's relative 2^-97
//   for -111 <= y_i <= 111; 0 with absolute error < e^-111 < 2^-160 below.
// - P = dd_mul(e_i, S): e_i errS + ee_i A + 4u^2 |P| (ee_i: e_i's error).
// - D = dd_add(dy_i, -P): plus 4u^2 (|dy_i| + |P|).
// - Q = dd_div(D, theta): that / theta, plus 64u^2 |Q|.
// An exact zero (y_i = 0 and dy_i = S, as in every row of one item) is +0
// when S is exact (only claimed for a row of one item: a sum of one term).
bool log_softmax_backward_fast(DType t, std::span<const float> y, std::span<const float> dy,
                               double theta, RowGradient& out) {
  const std::size_t n = y.size();
  if (!theta_ok(theta) || !finite_row(dy)) return false;
  for (float x : y)
    if (std::isnan(x) || x > 111.0f) return false;
  const fast::ExpTables& T = fast::exp_tables();
  const Sum S = dd_sum(n, [&](std::size_t j) { return double(dy[j]); });
  const double errS = n == 1 ? 0.0 : S.err;
  out.exact.resize(n);
  out.rounded.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    DD e{0, 0};
    double ee = 0;  // |e - exp(y_i)|
    if (y[i] == 0) {
      e = DD{1, 0};
    } else if (y[i] == -std::numeric_limits<float>::infinity()) {
      e = DD{0, 0};
    } else if (y[i] < fast::exp_cutoff) {
      ee = 0x1p-160;
    } else {
      e = fast::exp2(T, y[i], 0);
      ee = kExpRel * std::abs(e.hi) * 2;
    }
    const DD P = fast::dd_mul(e, S.s);  // exact for e = 1 and e = 0
    const double errP =
        y[i] == 0 ? errS
                  : (std::abs(e.hi) * 2 * errS + ee * S.abs_up + k4u2 * std::abs(P.hi) * 2) * kUp;
    const DD D = fast::dd_add(DD{dy[i], 0}, neg(P));
    if (D.hi == 0) {
      // dd_add errs by at most 4u^2 of the exact |D|, so with P exact a
      // computed 0 is an exact 0: +0 for a nonzero dy_i (MPFR's x - x);
      // signed zeros of dy_i are left to MPFR.
      if (errP != 0 || dy[i] == 0) return false;
      out.exact[i] = out.rounded[i] = 0.0;
      continue;
    }
    const double errD = (errP + k4u2 * (std::abs(double(dy[i])) + std::abs(P.hi) * 2)) * kUp;
    const DD Q = theta == 1.0 ? D : fast::dd_div(D, DD{theta, 0});
    const double E =
        theta == 1.0 ? errD : (errD / theta * (1 + 0x1p-50) + k64u2 * std::abs(Q.hi) * 2) * kUp;
    if (!certify(t, Q, E, out.exact[i], out.rounded[i])) return false;
  }
  return true;
}

namespace {

// A dual number over double-double: value and derivative along e.
struct Dual {
  DD a, d;
};
Dual operator+(Dual x, Dual y) { return {fast::dd_add(x.a, y.a), fast::dd_add(x.d, y.d)}; }
Dual operator*(Dual x, Dual y) {
  return {fast::dd_mul(x.a, y.a), fast::dd_add(fast::dd_mul(x.d, y.a), fast::dd_mul(x.a, y.d))};
}
// (a, a') / (b, b') = (a / b, (a' - (a / b) b') / b)
Dual operator/(Dual x, Dual y) {
  const DD q = fast::dd_div(x.a, y.a);
  return {q, fast::dd_div(fast::dd_add(x.d, neg(fast::dd_mul(q, y.d))), y.a)};
}
Dual constant(double c) { return {DD{c, 0}, DD{0, 0}}; }

}  // namespace

// The forward computation as the MPFR central difference does it, on dual
// numbers: z_i = (x_i + e v_i) / theta - m / theta (m the largest live x; a
// constant shift changes no derivative), w_i = exp(z_i) = (exp(z_i), exp(z_i)
// z_i'), S = sum w_i, and
//   softmax:     <dy, w / S> = (sum dy_i w_i) / S,
//   log-softmax: sum_i dy_i (z_i - log S), whose derivative part is
//                sum_i dy_i z_i' - (sum_i dy_i) (log S)', (log S)' = S' / S
//                (the chain rule for log; log S's value is never needed).
// Items with x = -inf have weight 0 and no z' (their log-softmax term's
// finite part -dy_i log S still counts in sum dy_i).
// Error: exp2's 2^-97 and the argument's 64u^2 |z| <= 2^-93 make each w_i
// relative 2^-92; each product and sum adds 4u^2 per operation, so S, S',
// N = sum dy_i w_i and N' are within (n + 4) 2^-95 of their absolute sums;
// the quotient rule's five terms (each at most the magnitude M with S >= 1,
// the largest live item's w being exactly 1) give <= 4 (n + 4) 2^-95 M plus
// the quotients' 2^-98 M, below (n + 4) 2^-92 M. A left-out item (z_i <
// -111, w_i < 2^-160) changes S, S', N and N' by at most 2^-160 (1, |g_i|,
// |dy_i|, |dy_i g_i|), which moves the result by at most (3n + 3) 2^-160
// (1 + sum |dy|)(1 + sum |g|).
bool directional_derivative_fast(std::span<const float> x, std::span<const float> dy,
                                 std::span<const double> v, double theta, bool log_softmax,
                                 DirectionalDerivative& out) {
  const std::size_t n = x.size();
  if (!theta_ok(theta) || !finite_row(dy)) return false;
  double m = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isnan(x[i]) || x[i] == std::numeric_limits<float>::infinity() || !std::isfinite(v[i]))
      return false;
    if (x[i] != -std::numeric_limits<float>::infinity()) m = std::max(m, double(x[i]));
  }
  if (!std::isfinite(m)) return false;
  const fast::ExpTables& T = fast::exp_tables();
  const DD th{theta, 0};
  Dual S = constant(0), N = constant(0);
  DD sum_dy{0, 0}, dyg{0, 0};  // log-softmax: sum dy_i, sum dy_i z_i'
  double Sa = 0, Na = 0, Sga = 0, Nga = 0, dya = 0, ga = 0, dyga = 0;
  bool cut = false;
  for (std::size_t i = 0; i < n; ++i) {
    dya += std::abs(double(dy[i]));
    sum_dy = fast::dd_add(sum_dy, DD{dy[i], 0});
    if (x[i] == -std::numeric_limits<float>::infinity()) continue;
    const DD g = theta == 1.0 ? DD{v[i], 0} : fast::dd_div(DD{v[i], 0}, th);
    ga += std::abs(g.hi);
    dyga += std::abs(double(dy[i]) * g.hi);
    dyg = fast::dd_add(dyg, fast::dd_mul(DD{dy[i], 0}, g));
    const DD diff = fast::two_sum(double(x[i]), -m);  // exact: two floats
    const DD z = theta == 1.0 ? diff : fast::dd_div(diff, th);
    if (z.hi < fast::exp_cutoff) {
      cut = true;
      continue;
    }
    const DD e = z.hi == 0 && z.lo == 0 ? DD{1, 0} : fast::exp2(T, z.hi, z.lo);
    const Dual w{e, fast::dd_mul(e, g)};
    S = S + w;
    N = N + constant(dy[i]) * w;
    Sa += e.hi, Na += std::abs(double(dy[i])) * e.hi;
    Sga += e.hi * std::abs(g.hi), Nga += std::abs(double(dy[i])) * e.hi * std::abs(g.hi);
  }
  double M = 0;
  if (log_softmax) {
    const DD dlog = fast::dd_div(S.d, S.a);  // (log S)'
    const DD r = fast::dd_add(dyg, neg(fast::dd_mul(sum_dy, dlog)));
    out.value = r.hi + r.lo;
    M = dyga + dya * Sga / Sa;
  } else {
    const Dual L = N / S;
    out.value = L.d.hi + L.d.lo;
    M = Nga / Sa + (Na / Sa) * (Sga / Sa);
  }
  const double fn = static_cast<double>(n);
  out.error = ((fn + 4) * 0x1p-92 * M * 1.01 +
               (cut ? (3 * fn + 3) * 0x1p-159 * (1 + dya) * (1 + ga) : 0.0) +
               0x1p-53 * std::abs(out.value)) *
              kUp;  // the last term: value's rounding to double
  return std::isfinite(out.value) && std::isfinite(out.error);
}

}  // namespace sa::ref::detail
