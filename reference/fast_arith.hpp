// The fast levels of the correctly rounded references (Ziv's strategy): double
// and double-double ("dd") arithmetic whose error is bounded by a proof, and the
// exact rounding of a double to a target format.
//
// u = 2^-53 throughout. Every function below states its accuracy and its range;
// the proofs are next to the code (fast_arith.cpp). Compiled with
// -ffp-contract=off: each operation written is one IEEE operation rounded to
// nearest (the analyses count them), no fused multiply-add unless written.
//
//  two_sum(a, b)        s + e == a + b exactly (Knuth), for finite a + b.
//  round_double(t, x)   x rounded to nearest-even in format t (float32,
//                       bfloat16, float16; float64 returns x), gradual
//                       underflow, overflow to +-inf: exact, every double x.
//  exp1(dh, dl)         exp(dh + dl) in double, relative error <= 2^-51
//                       (exp1_rel_error), for -111 <= dh <= 111 and |dl| <=
//                       u |dh| (a double-double argument, as two_sum makes;
//                       the rows use dh <= 0, the logarithms of ziv_row.cpp
//                       and entropy_cr.cpp exp(-y0) with -y0 <= 21).
//  exp2(dh, dl)         the same as a double-double, relative error <= 2^-97
//                       (exp2_rel_error), same range.
//  dd_add, dd_mul,      double-double sum, product and quotient, relative
//  dd_div               error <= 3u^2 + 13u^3, <= 4u^2 and <= 64u^2 (Joldes,
//                       Muller, Popescu, "Tight and rigorous error bounds for
//                       basic building blocks of double-word arithmetic",
//                       ACM TOMS 2017: Algorithms 6, 12 and 17), for results
//                       in the normal range (everything here is >= 2^-200).
#pragma once

#include <bit>
#include <cmath>
#include <algorithm>
#include <cstdint>
#include <limits>

#include "core/dtype.hpp"

namespace sa::ref::fast {

constexpr double u = 0x1p-53;
constexpr double exp1_rel_error = 0x1p-51;
constexpr double exp2_rel_error = 0x1p-97;  // see exp2 in fast_arith.cpp
// Arguments below this are not evaluated: exp(d) < e^-111 < 2^-160, which
// rounds to +0 in every target format (the smallest half-subnormal is
// float32's 2^-150) and is below 2^-130 of any sum of >= 1 when added up to
// 2^30 times.
constexpr double exp_cutoff = -111.0;

struct DD {
  double hi = 0, lo = 0;
};

inline DD two_sum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  const double e = (a - (s - bb)) + (b - bb);
  return {s, e};
}

inline DD two_prod(double a, double b) {
  const double p = a * b;
  return {p, std::fma(a, b, -p)};
}

// Joldes-Muller-Popescu Algorithm 6 (AccurateDWPlusDW): relative error <= 3u^2 + 13u^3.
inline DD dd_add(DD x, DD y) {
  DD s = two_sum(x.hi, y.hi);
  const DD t = two_sum(x.lo, y.lo);
  s.lo += t.hi;
  s = two_sum(s.hi, s.lo);
  s.lo += t.lo;
  return two_sum(s.hi, s.lo);
}

// Algorithm 12 (DWTimesDW3, with FMA): relative error <= 4u^2.
inline DD dd_mul(DD x, DD y) {
  DD c = two_prod(x.hi, y.hi);
  const double tl0 = x.lo * y.lo;
  const double tl1 = std::fma(x.hi, y.lo, tl0);
  const double cl2 = std::fma(x.lo, y.hi, tl1);
  const double cl3 = c.lo + cl2;
  return two_sum(c.hi, cl3);
}

// Algorithm 17 (DWDivDW2), relative error <= 15u^2 + 56u^3 there; here the
// product y * th is formed by dd_mul (more accurate than the paper's
// DWTimesFP); we use the looser 64u^2 = 2^-100 in every bound.
inline DD dd_div(DD x, DD y) {
  const double th = x.hi / y.hi;
  const DD r = dd_mul(y, DD{th, 0});
  const double pih = x.hi - r.hi;
  const double dl = x.lo - r.lo;
  const double d = pih + dl;
  const double tl = d / y.hi;
  return two_sum(th, tl);
}

// 2^e for -1022 <= e <= 1023, exactly.
inline double pow2(int e) {
  return std::bit_cast<double>(static_cast<std::uint64_t>(e + 1023) << 52);
}

// Exact, on the bits: for |x| = 1.f 2^E (a normal double) the target's
// quantum is 2^q, q = max(E, emin) - p + 1. With sh = E - q (0..52 low bits
// of the double's significand below the quantum, the implicit bit kept in
// the exponent field), adding 2^(sh-1) - 1 plus the quantum's last bit and
// clearing the sh low bits rounds to nearest, ties to even; a carry out of
// the significand moves into the exponent field, which is the rounding up to
// the next power of two. |x| in [2^(q-1), 2^q) rounds to 2^q, or to 0 when
// exactly 2^(q-1) (a tie to even 0); smaller |x| rounds to 0. Past the
// largest finite value: +-inf. Subnormal doubles are far below every
// target's quantum (2^-149 at least) and round to 0.
inline double round_double_generic(DType t, double x) {
  if (t == DType::float64 || x == 0 || !std::isfinite(x)) return x;
  const FloatFormat f = format_of(t);  // constexpr
  std::uint64_t b = std::bit_cast<std::uint64_t>(x);
  const std::uint64_t sign = b & 0x8000000000000000ull;
  b &= ~sign;
  const int E = static_cast<int>(b >> 52) - 1023;
  const int q = std::max(E, f.emin) - f.precision + 1;
  const int sh = 52 - (E - q);  // low significand bits below the quantum
  double r;
  if (E < q - 1) {
    r = 0;
  } else if (E == q - 1) {
    r = (b & ((1ull << 52) - 1)) == 0 ? 0.0 : pow2(q);
  } else if (sh <= 0) {
    r = std::bit_cast<double>(b);
  } else {
    const std::uint64_t m = (b & ((1ull << 52) - 1)) | (1ull << 52);  // implicit bit at 52
    const std::uint64_t half = (1ull << (sh - 1)) - 1 + ((m >> sh) & 1);
    r = std::bit_cast<double>((b + half) & ~((1ull << sh) - 1));
  }
  const double max_finite = (2.0 - pow2(1 - f.precision)) * pow2(f.emax);
  if (r > max_finite) r = std::numeric_limits<double>::infinity();
  return std::bit_cast<double>(std::bit_cast<std::uint64_t>(r) | sign);
}

inline double round_double(DType t, double x) {
  if (t == DType::float32) return static_cast<double>(static_cast<float>(x));  // IEEE: one RN
  return round_double_generic(t, x);
}

// The rounding test: every real in [lo, hi] (lo <= hi) rounds to the same
// value of format t iff lo and hi do (rounding to nearest is monotone).
// Compared bit for bit: -0 and +0 differ.
inline bool decided(DType t, double lo, double hi) {
  if (t == DType::float32)
    return std::bit_cast<std::uint32_t>(static_cast<float>(lo)) ==
           std::bit_cast<std::uint32_t>(static_cast<float>(hi));
  return std::bit_cast<std::uint64_t>(round_double(t, lo)) ==
         std::bit_cast<std::uint64_t>(round_double(t, hi));
}

// The tables and constants of exp1/exp2, built once (from MPFR) on first use.
struct ExpTables {
  double inv_c;       // 64 / ln 2, rounded
  double c1, c2, c3;  // ln 2 / 64 = c1 + c2 + c3 + O(2^-137); c1, c2 have <= 38 bits
  DD t[64];           // 2^(j/64) as hi + lo, |error| <= u^2 2^(j/64)
  DD coef[12];        // 1/k! as double-doubles, |error| <= u^2 / k!
  double q[6];        // 1, 1/2, 1/6, ..., 1/720 in double (exp1's polynomial)
};
const ExpTables& exp_tables();

// nearbyint(x) (ties to even) for |x| < 2^51 under the default rounding
// mode: adding 1.5 * 2^52 leaves the integer part in the last bit places.
inline double round_int(double x) {
  constexpr double shifter = 0x1.8p52;
  return (x + shifter) - shifter;
}

inline double exp1(const ExpTables& T, double dh, double dl) {
  const double k = round_int(dh * T.inv_c);
  const int ki = static_cast<int>(k);
  const int j = ki & 63, e = (ki - j) / 64;
  const double a = dh - k * T.c1;  // exact (Sterbenz, see fast_arith.cpp)
  const double r = (a - k * T.c2) + (dl - k * T.c3);
  const double* q = T.q;
  const double t = q[1] + r * (q[2] + r * (q[3] + r * (q[4] + r * q[5])));
  const double p = r * (q[0] + r * t);
  return (T.t[j].hi * (1.0 + p)) * pow2(e);
}

DD exp2(const ExpTables& T, double dh, double dl);

}  // namespace sa::ref::fast
