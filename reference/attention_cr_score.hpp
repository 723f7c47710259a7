// Internal to the correctly rounded attention references (attention_cr.cpp,
// attention_backward_cr.cpp): the score of one (query row, key) pair as a
// double-double with a proven absolute error bound. The error analysis is in
// attention_cr.cpp ("Scores"); compiled with -ffp-contract=off.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/attention_case.hpp"
#include "reference/fast_arith.hpp"
#include "reference/attention.hpp"
#include "reference/ziv_row.hpp"

namespace sa::ref::detail::cr {

using fast::DD;
using fast::dd_add;
using fast::dd_div;
using fast::dd_mul;
using fast::kSafe;
using fast::two_prod;
using fast::two_sum;
using fast::u;

constexpr double kMp = 0x1p-200;      // MPFR's own error, relative to the magnitudes
constexpr double kFloor = 0x1p-1000;  // absolute, per double-double chain near underflow

inline double gamma(double k) { return k * u / (1 - k * u); }

// An upper bound on e^(d) for a cut-off item (computed d < -111, the true
// one within Ed <= 2^-34 of it): 2^k, k = floor(y) + 2 with y = RN(RN(d
// log2 e) (1 - 2^-30)) >= d log2 e (the factor outweighs the three
// roundings), so 2^k >= 2 e^d >= e^(d + Ed); at least 2^-1074.
inline double exp_upper(double d) {
  const double y = d * 1.4426950408889634 * (1 - 0x1p-30);
  if (!(y >= -1074)) return 0x1p-1074;
  return std::ldexp(1.0, static_cast<int>(std::floor(y)) + 2);
}

// a b for a, b >= 0 as a term of an error bound, rounded up: RN(a b) is
// below a b by under u a b in the normal range (kSafe covers that) and by
// under 2^-1074 when subnormal, an underflow to 0 included. A cut item's
// bound (2^-1074 at the least) times a value below 1 underflows, and a bound
// of 0 would certify a sum of +-0 terms as exactly +0 where the item makes it
// a tiny number of its value's sign (whose rounding is -0 when negative).
inline double bound_product(double a, double b) {
  return a == 0 || b == 0 ? 0.0 : a * b + 0x1p-1074;
}

// dot^ and mag (see the analysis in attention_cr.cpp).
inline DD dot_dd(const float* q, const float* k, std::int64_t d, double& mag) {
  constexpr int L = 8;
  double s[L] = {}, sg[L] = {}, a[L] = {};
  std::int64_t c = 0;
  for (; c + L <= d; c += L)
    for (int l = 0; l < L; ++l) {
      const double p = static_cast<double>(q[c + l]) * static_cast<double>(k[c + l]);
      const double t = s[l] + p;
      const double bb = t - s[l];
      sg[l] += (s[l] - (t - bb)) + (p - bb);
      s[l] = t;
      a[l] += std::abs(p);
    }
  for (int l = 0; c < d; ++c, ++l) {
    const double p = static_cast<double>(q[c]) * static_cast<double>(k[c]);
    const DD t = two_sum(s[l], p);
    s[l] = t.hi;
    sg[l] += t.lo;
    a[l] += std::abs(p);
  }
  double S = 0, sig = 0, A = 0;
  for (int l = 0; l < L; ++l) {
    const DD t = two_sum(S, s[l]);
    S = t.hi;
    sig += t.lo + sg[l];
    A += a[l];
  }
  mag = A;
  return two_sum(S, sig);
}

struct Item {
  double sh, sl, E;  // score (double-double) and its error bound
};

// tanh(x / softcap) of a score's uncapped value x: t within err of it.
struct Tanh {
  DD t;
  double err = 0;
};

class Scorer {
 public:
  explicit Scorer(const AttentionCase& c) : c_(c) {
    sc_ = fast::two_prod(c.scale,
                         static_cast<double>(c.q_descale) * static_cast<double>(c.k_descale));
    cap_ = c.softcap;
  }
  // scale * q_descale * k_descale as a double-double (exact when the
  // caller's checks hold: attention_cr.cpp's FastAttention).
  const DD& sc() const { return sc_; }

  // The score of visible key j for query i of sequence b, query head h;
  // false when it cannot be bounded (non-finite inputs, or an error above
  // 2^-40). With softcap, *th (when given) gets tanh(x / softcap) and a
  // bound on its distance to the exact value and to MPFR's.
  bool score(std::int64_t rb, std::int64_t ri, std::int64_t rh, std::int64_t j, Item& out,
             Tanh* th = nullptr) const {
    const AttentionCase& c = c_;
    const Row r{rb, ri, rh};
    const float* q = c.q.data() + (c.row_q(r.b, r.i) * c.heads_q + r.h) * c.d;
    const float* k = c.k.data() + (c.row_k(r.b, j) * c.heads_kv + c.kv_head(r.h)) * c.d;
    double mag;
    const DD dot = dot_dd(q, k, c.d, mag);
    if (!std::isfinite(mag) || !std::isfinite(dot.hi)) return false;
    const double gK = cr::gamma(static_cast<double>(c.d) + 8);
    DD s = dd_mul(dot, sc_);
    const double sa = std::abs(sc_.hi) * (1 + 2 * u);
    double E = sa * gK * gK * mag * 1.01 + 4.01 * u * u * std::abs(s.hi);
    double mp_mag = sa * mag * 1.01;
    if (cap_ > 0) {
      const double c_ = cap_;
      const DD y = dd_div(s, DD{c_, 0});
      const double Ey = E / c_ * (1 + 2 * u) + 64.1 * u * u * std::abs(y.hi) + kFloor;
      const double a = std::abs(y.hi);
      const DD ya = y.hi < 0 ? DD{-y.hi, -y.lo} : y;
      DD t;       // tanh(|y^|); the sign is applied below
      double Et;  // |t - tanh(|y^|)|
      if (a < 0x1p-30) {
        t = ya;
        Et = 0.34 * a * a * a;
      } else if (a > 55) {
        t = DD{1, 0};
        Et = 0x1p-157;
      } else {
        const DD Ex = fast::exp2(fast::exp_tables(), -2 * ya.hi, -2 * ya.lo);
        const DD N = dd_add(DD{1, 0}, DD{-Ex.hi, -Ex.lo});
        const DD D = dd_add(DD{1, 0}, Ex);
        t = dd_div(N, D);
        if (!(N.hi > 0)) return false;
        const double epsN = 1.01 * (0x1p-97 * Ex.hi / N.hi + 3.01 * u * u);
        Et = 1.01 * (epsN + 0x1p-97 + 67.02 * u * u) * kSafe * std::abs(t.hi);
      }
      if (y.hi < 0) t = DD{-t.hi, -t.lo};
      // th: also MPFR's own tanh(v / c) is within kMp mp_mag / c of the
      // exact one (its v within 2^-220 mp_mag, tanh 1-Lipschitz).
      if (th) *th = {t, (Et + Ey + kMp * mp_mag / c_) * kSafe};
      s = dd_mul(t, DD{c_, 0});
      E = c_ * (Et + Ey) * (1 + 2 * u) + 4.01 * u * u * std::abs(s.hi);
    }
    if (!c.alibi_slopes.empty()) {
      const std::int64_t off = c.top_left ? 0 : c.len_k(r.b) - c.len_q(r.b);
      const std::int64_t dist = r.i + off - j;
      const DD al = two_prod(static_cast<double>(c.alibi_slopes[static_cast<std::size_t>(r.h)]),
                             static_cast<double>(dist < 0 ? -dist : dist));
      if (!std::isfinite(al.hi)) return false;
      s = dd_add(s, DD{-al.hi, -al.lo});
      E += 3.01 * u * u * std::abs(s.hi);
      mp_mag += std::abs(al.hi);
    }
    if (c.attn_bias.used()) {  // a float32 bias: exact in double
      const double bv = score_bias(c, r.b, r.h, r.i, j);
      s = dd_add(s, DD{bv, 0});
      E += 3.01 * u * u * std::abs(s.hi);
      mp_mag += std::abs(bv);
    }
    E = (E + kMp * (mp_mag + cap_ + std::abs(s.hi)) + kFloor) * kSafe;
    out = {s.hi, s.lo, E};
    return std::isfinite(s.hi) && E <= 0x1p-40;
  }

 private:
  struct Row {
    std::int64_t b, i, h;
  };
  const AttentionCase& c_;
  DD sc_{};
  double cap_ = 0;
};

}  // namespace sa::ref::detail::cr
