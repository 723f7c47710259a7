#include "reference/fast_arith.hpp"

#include <mpfr.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

#include "reference/mpfr.hpp"

namespace sa::ref::fast {
namespace {

double mp_d(const Mp& x) { return x.convert_to<double>(); }  // mpfr_get_d, RN

DD mp_dd(const Mp& x) {  // hi = RN(x), lo = RN(x - hi): |x - hi - lo| <= u |lo| <= u^2 |x|
  const double hi = mp_d(x);
  return {hi, mp_d(x - Mp(hi))};
}

ExpTables build() {
  PrecisionScope prec(256);
  ExpTables T{};
  const Mp C = log(Mp(2)) / 64;
  T.inv_c = mp_d(Mp(64) / log(Mp(2)));
  // c1 = C rounded to a multiple of 2^-44 (C < 2^-6, so <= 38 significant
  // bits), c2 = the rest rounded to a multiple of 2^-83 (|C - c1| <= 2^-45,
  // so <= 38 bits), c3 = RN(C - c1 - c2), |c3| <= 2^-84: |C - c1 - c2 - c3| <= 2^-137.
  T.c1 = std::ldexp(std::nearbyint(mp_d(C * Mp(std::ldexp(1.0, 44)))), -44);
  T.c2 = std::ldexp(std::nearbyint(mp_d((C - Mp(T.c1)) * Mp(std::ldexp(1.0, 83)))), -83);
  T.c3 = mp_d(C - Mp(T.c1) - Mp(T.c2));
  for (int j = 0; j < 64; ++j) T.t[j] = mp_dd(exp(Mp(j) * C));  // 2^(j/64) = e^(jC)
  Mp f = 1;
  for (int k = 0; k < 12; ++k) {
    if (k > 0) f *= k;
    T.coef[k] = mp_dd(Mp(1) / f);
    if (k < 6) T.q[k] = mp_d(Mp(1) / (f * (k + 1)));  // 1/(k+1)!
  }
  return T;
}

}  // namespace

const ExpTables& exp_tables() {
  static const ExpTables T = build();
  return T;
}

// exp1 (inline in the header): error analysis, u = 2^-53, d = dh + dl.
//  Reduction. k = nearbyint(RN(dh * inv_c)); RN(dh inv_c) is within 2u |dh|/C
//  <= 2^-38 of dh/C for |dh| <= 111, so |d - kC| <= C (1/2 + 2^-38) + |dl|
//  <= 0.00542 and |k| <= 10250 < 2^14. k c1 and k c2 are exact (14 + 38 bits).
//  a = dh - k c1 is exact: for k != 0, dh and k c1 have the same sign and
//  |dh - k c1| <= 0.51 C <= |k c1| / 1.9, so k c1 / 2 <= dh <= 2 k c1
//  (Sterbenz); for k = 0 it is dh. Then r = RN(RN(a - k c2) + RN(dl -
//  RN(k c3))): the three roundings cost <= u 0.00542 + u (|dl| + 2^-70) +
//  u 0.00542 and |k (C - c1 - c2 - c3)| <= 2^-123, so |r - (d - kC)| <=
//  0.0109u + 2^-98 <= 0.011u, a relative error <= 0.0111u on exp.
//  Polynomial. P(r) = r + r^2/2 + ... + r^6/720 (Taylor): |e^r - 1 - P| <=
//  |r|^7/7! e^|r| <= 2^-64.9. Horner in double: the inner value t (~1/2) and
//  1 + r t carry relative error <= 1.02u (each step adds a term < 0.006 of
//  the partial sum, the coefficients are RN), p = RN(r (1 + r t)) relative
//  <= 2.03u, i.e. absolute <= 0.012u; RN(1 + p) adds <= 1.006u: 1 + p is
//  within 1.03u e^r of e^r (e^r >= 0.9945).
//  Table and product: T.t[j].hi = 2^(j/64)(1 + a), |a| <= u; the product is
//  one RN (<= u); the scaling by 2^e is exact (result in [2^-161, 2^161],
//  normal). Every step above depends on |dh| only, not on its sign.
//  Total: (1 + u)(1 + 1.031u)(1 + u)(1 + 0.0111u) - 1 <= 3.05u < 4u = 2^-51.

// exp2: the same reduction in double-double, Taylor degree 11 by Horner in
// double-double, error analysis:
//  r = two_sum(a, -k c2) (exact) plus c = RN(dl - RN(k c3)) added by
//  RN(s.lo + c) and two_sum: |dl| <= u 111 = 2^-46.2, so each of the two
//  roundings is <= u 2^-46.1 = 2^-99.1; with C's split (2^-123) |r - (d -
//  kC)| <= 2^-98.1: relative error <= 2^-98.1 (1 + 2^-90) on exp.
//  Truncation: |r|^12/12! e^|r| <= 2^-119.
//  Horner: y_k = c_k + r y_{k+1}; dd_mul 4u^2, dd_add 3u^2 + 13u^3, the
//  coefficients 1/k! to u^2 relative; |r y_{k+1}| <= 0.006 |y_k|, so the
//  errors of inner steps shrink by 0.006 each: y_0 within 4.1u^2 of e^r;
//  table 2^(j/64) to u^2; the product 4u^2; the scaling exact.
//  Total <= 2^-98.1 + 9.2u^2 + 2^-119 <= 2^-97.9 < 2^-97.
DD exp2(const ExpTables& T, double dh, double dl) {
  const double k = round_int(dh * T.inv_c);
  const int ki = static_cast<int>(k);
  const int j = ki & 63, e = (ki - j) / 64;
  const double a = dh - k * T.c1;
  const DD s = two_sum(a, -(k * T.c2));
  const double c = dl - k * T.c3;
  const DD r = two_sum(s.hi, s.lo + c);
  DD y = T.coef[11];
  for (int i = 10; i >= 0; --i) y = dd_add(T.coef[i], dd_mul(r, y));
  y = dd_mul(T.t[j], y);
  const double sc = pow2(e);
  return {y.hi * sc, y.lo * sc};
}

}  // namespace sa::ref::fast
