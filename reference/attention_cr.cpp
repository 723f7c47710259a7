#include "reference/attention_cr.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "reference/attention_cr_score.hpp"
#include "reference/attention_row.hpp"
#include "reference/mpfr.hpp"
#include "reference/rounding.hpp"
#include "reference/ziv_row.hpp"

// Error analysis of the fast level, u = 2^-53, each written operation one
// IEEE operation rounded to nearest (-ffp-contract=off; fma only where
// written). "The exact value" below is the real result of kernel.h's
// formulas on the inputs; the MPFR reference (256 bits) is within kMp of
// the magnitudes involved of it (see kMp), which every bound includes, so an
// interval certified here also holds the MPFR value and rounds like it.
//
// Scores (score()). For a visible key j:
//  dot: the products q_c k_c of float inputs are exact in double (<= 48
//  significant bits, exponents >= -298). They are summed in 8 lanes by
//  two_sum (each lane a Sum2, Ogita-Rump-Oishi), the lanes joined by
//  two_sum, the error terms by plain additions, then normalised by an exact
//  two_sum: dot^ = (hi, lo). With K = d + 8 error-free steps, each error
//  term is <= u of a partial sum bounded by (1 + gamma_K) mag (mag = sum |q_c
//  k_c|), and the error terms are added in a tree of K - 1 additions, so
//  |dot^ - dot| <= gamma_(K-1) K u (1 + gamma_K) mag <= gamma_K^2 mag. mag
//  is summed in double (relative gamma_K): the factor 1.01 covers it.
//  scale: sc = scale * q_descale * k_descale; q_descale * k_descale is exact
//  in double (24 + 24 bits) and two_prod makes sc exact as a double-double.
//  x^ = dd_mul(dot^, sc): |x^ - x| <= |sc| gamma_K^2 mag 1.01 + 4.01u^2 |x^|
//  (dd_mul's 4u^2, relative to the exact product of its inputs).
//  softcap c > 0: y^ = dd_div(x^, c): |y^ - x/c| <= |x^ - x|/c + 64.1u^2
//  |y^|. tanh(y^) for a = |y^|:
//   a < 2^-30: t = y^; |tanh a - a| <= a^3/3.
//   a > 55: t = 1; 0 < 1 - tanh a < 2 e^(-2a) <= 2^-157.
//   else E = exp2(-2a) (2^-97 relative; -2a in exp2's range, a double-double
//   argument as dd_div leaves it), N = dd_add(1, -E), D = dd_add(1, E), t =
//   dd_div(N, D): with N* = 1 - e^(-2a) >= 2^-29 (1 - 2^-30), |N - N*| <=
//   2^-97 E + (3u^2 + 13u^3)|N*|, i.e. relative eps_N = 1.01 (2^-97 E / N +
//   3.01u^2) <= 2^-67; D relative 2^-97 + 3.01u^2 (E <= D); the quotient
//   64u^2: |t - tanh a| <= 1.01 (eps_N + 2^-97 + 67.02u^2) |t|.
//   tanh is 1-Lipschitz, so |t - tanh(x/c)| <= that + |y^ - x/c|; s^ =
//   dd_mul(t, c) adds 4.01u^2 |s^|: E_s = c (|t - tanh(x/c)|)(1 + u) +
//   4.01u^2 |s^|.
//  ALiBi: slope * |dist| is exact as a two_prod (24 + 31 bits); s^ = dd_add
//  (s^, -that) adds 3.01u^2 |s^| (relative to the exact sum of its inputs).
//  MPFR's own score is within 2^-220 (|sc| mag + c + |alibi| + |s|) of the
//  exact one (d + 10 roundings at 2^-256): kMp of that is added to E_s.
//  Every double-double operation above is stated for results in the normal
//  range; kFloor = 2^-1000 per score covers results near underflow (each
//  operation then errs by <= 2^-1074 absolute).
//
// Weights (level 1; level 2 is stated next to its code). M = (Mh, Ml) is
// the double-double score of the row's largest item, jmax (by hi, then lo;
// the sink is an item with exact score and no value), within E_jmax of its
// true score s_jmax. Softmax, lse and entropy are invariant under a shift of
// every score, so they are computed relative to the (unknown) real s_jmax:
// d_j = s_j - s_jmax, S = sum e^(d_j), out = vd sum e^(d_j) v_j / S, lse =
// s_jmax + log S, H = log S - T/S, T = sum e^(d_j) d_j. For jmax, d = 0
// and e = 1 exactly. For the others: (a, b) = two_sum(sh, -Mh) is exact,
// d^ = two_sum(a, RN(b + RN(sl - Ml))): |d^ - (s^ - M)| <= u |sl - Ml| + u
// |b + RN(sl - Ml)| <= 3.1u^2 (|sh| + |Mh|); so |d^ - d_j| <= Ed, the max
// over the evaluated items of E_s + E_jmax + 3.1u^2 (|sh| + |Mh|) (E_jmax
// <= 2^-40 and Ed <= 2^-34 are required, else the level fails). Items with
// d^ < -111 are cut off: each has e^(d) <= ub = exp_upper(d^) (a power of
// two, below 2^-159), adds <= ub |v_jx| to a numerator's bound (tail_x), ub
// to S's (tail_S), ub (|d^| + 1) to T's (tail_T). e_j = exp1(d^) (2^-51, fast_arith.hpp): |e_j -
// e^(d_j)| <= eps_e e^(d_j), eps_e = 2^-51 + 1.01 Ed.
//  R = sum_(j != jmax) e_j by Sum2 kept as a double-double (positive terms,
//  K items: |R^ - sum e_j| <= gamma_K^2 sum e_j): |R^ - R| <= err_R = 1.01
//  (eps_e + gamma_K^2) R^ + tail_S. S^ = dd_add(1, R^): err_S = err_R +
//  3.01u^2 S^ (S >= 1).
//  log S: R^ < 2^-20: log1p(R^) = R^ + c, c = R^2 (-1/2 + R/3 - R^2/4 +
//  R^3/5) in double from R^.hi (Horner, <= 4.01u relative on c, |c| <=
//  0.51 R^2; truncation <= R^6/6; R^.lo's effect on c <= u R^2), then
//  dd_add (3.01u^2): |L - log1p(R^)| <= 3.2u R^2 + R^6 + 3.01u^2 |L|;
//  log1p is 1-Lipschitz on R >= 0: plus err_R. R^ >= 2^-20: log_of(S^,
//  err_S / S^) (ziv_row.cpp).
//  lse = dd_add(M, L): err_L + E_jmax + 3.01u^2 |lse| + kMp (|Mh| + 1).
//  Numerators N_x = sum_j e^(d_j) v_jx: P_j = RN(e_j v_jx) (jmax: v_jx
//  exactly), Sum2 kept as a double-double, A_x = sum |P_j| in double
//  (relative gamma_K). |N^ - N| <= err_N = 1.01 ((eps_e + u) 1.02 +
//  gamma_K^2) A_x + tail_x.
//  out = dd_mul(dd_div(N^, S^), vd): |out^ - out| <= |vd| 1.01 (err_N +
//  1.02 A_x err_S) / S^ + 68.1u^2 |out^| + kMp |vd| A_x / S^ (|N| <= 1.02
//  A_x, S^ >= 1). A_x = 0 with nothing cut: every live v_jx is +-0, and the
//  reference's sum (+0 plus +-0 terms) is +0: out = +0 * vd exactly. A cut
//  item's share of tail_x is rounded up (at least 2^-1074 for v_jx != 0),
//  so a row whose only nonzero values sit in cut items is never taken for
//  one with nothing cut: its out is a tiny number of their sign.
//  Entropy: t_j = RN(e_j dh_j), T^ by Sum2 (mixed signs: <= gamma_K^2 B, B
//  = sum |t_j| in double): |t_j - e^(d_j) d_j| <= 1.01 (2u + eps_e)|t_j| +
//  e^(d_j) Ed (dl dropped, |dl| <= u |dh|), so |T^ - T| <= err_T = 1.01
//  ((2u + eps_e) B + Ed (R^ + err_R) + gamma_K^2 B) + tail_T.
//  q = dd_div(-T^, S^): |q - (-T/S)| <= 1.02 (err_T + (1.02 B + err_T)
//  err_S) + 64.1u^2 |q|. H = dd_add(L, q): err_L + err_q + 3.01u^2 |H| +
//  kMp (B + |L| + 1). With two items or more H > 0 (as is the
//  reference's value: log S > 0 and -T > 0 are each accurate to 2^-200
//  relative there): an interval below half the smallest subnormal gives +0.
//  One item alone (nothing else live, nothing cut): the
//  reference's H is log 1 - (1 * 0) / 1 = +0 exactly, lse its score, out
//  (+0 + v_jmax) * vd (the sum starts at +0), all exact.
//  beta = 1 (rows without the adaptive temperature).
// Adaptive temperature (kernel.h: beta = theory::adaptive_beta(H) from the
// entropy at beta = 1, then softmax and lse of beta s): the estimate (Hv,
// err_H) above gives fast::beta_of's b within berr of beta (adaptive_cr.cpp;
// {1, 0} with berr = 0 when beta is surely 1, and then nothing changes);
// beta's output is b's rounding. A second pass of the same level scales
// every argument: d^b = dd_mul(d^, b), |d^b - beta d| <= 1.01 (b E_d + |d^|
// berr) + 4.01u^2 |d^b| (the error now grows with |d|; Ed <= 2^-34 is
// required), items with d^ or d^b below -111 cut off with the same ub
// (beta >= 1, d < 0: e^(beta d) <= e^d); S, log S and the numerators as
// above; lse = beta s_jmax + log S with M b within 1.01 (b E_jmax + |M| berr)
// + 4.01u^2 |M b| of beta s_jmax. The entropy output is the one at beta = 1.
// Each err above is scaled by kSafe (products of two relative errors <=
// 2^-30), and every output is then certified by round_dd (ziv_row.cpp):
// certified iff the interval [v - err, v + err] lies strictly between the
// rounding boundaries around its rounding. A row with any uncertified output
// is recomputed whole in MPFR.

namespace sa::ref {
namespace {

using fast::DD;
using fast::dd_add;
using fast::dd_div;
using fast::dd_mul;
using fast::kSafe;
using fast::two_prod;
using fast::two_sum;
using fast::u;

constexpr double kInf = std::numeric_limits<double>::infinity();
// attention_rounded: rows run on the OpenMP team only from this many
// key-by-dimension products (about 0.2-0.5 ms of the fast path's double-double
// work; waking a passive team costs tens of microseconds).
constexpr std::int64_t kParallelMinWork = std::int64_t(1) << 14;
using detail::cr::bound_product;
using detail::cr::dot_dd;
using detail::cr::exp_upper;
using detail::cr::gamma;
using detail::cr::Item;
using detail::cr::kFloor;
using detail::cr::kMp;

struct Scratch {
  std::vector<Item> it;           // visible keys' scores
  std::vector<std::int64_t> key;  // their key index j
  std::vector<double> e, el;      // the items' weights (level 2: hi and lo)
  std::vector<double> Ns, Nsig, A, tail;
  DD S{}, L{};                  // the row's denominator S (shift: its largest item), log S,
  double err_S = 0, err_L = 0;  // and their bounds
  detail::RowScratch<Mp> mp;
  detail::RowValuesT<Mp> mpv;
};

struct Row {
  std::int64_t b, i, h;
};

class FastAttention {
 public:
  FastAttention(DType t, const AttentionCase& c) : t_(t), c_(c), scorer_(c) {
    sc_ = two_prod(c.scale, static_cast<double>(c.q_descale) * static_cast<double>(c.k_descale));
    vd_ = static_cast<double>(c.v_descale);
    cap_ = c.softcap;
    const double qk = static_cast<double>(c.q_descale) * static_cast<double>(c.k_descale);
    const bool exact_sc = std::isfinite(qk) &&
                          std::fma(static_cast<double>(c.q_descale), c.k_descale, -qk) == 0 &&
                          (sc_.hi == 0 || std::abs(sc_.hi) >= 0x1p-900);
    ok_ =
        t != DType::float64 && std::isfinite(vd_) && vd_ != 0 && std::isfinite(sc_.hi) && exact_sc;
    const FloatFormat f = format_of(t);
    half_min_ = std::ldexp(1.0, f.emin - f.precision);
  }
  bool ok() const { return ok_; }

  // The score of visible key j for query row r; false when it cannot be
  // bounded (non-finite inputs, or an error above 2^-40).
  bool score(const Row& r, std::int64_t j, Item& out) const {
    return scorer_.score(r.b, r.i, r.h, j, out);
  }

  // One query row: the level (1 or 2) that certified every output, whose
  // rounded values are written; 0 when neither did (nothing useful written).
  int row(const Row& r, Scratch& w, double* out, double& lse, double& H, double& beta) const {
    const AttentionCase& c = c_;
    const std::int64_t Lk = c.len_k(r.b);
    const std::int64_t dv = c.dv;
    const std::int64_t hk = c.kv_head(r.h);
    w.it.clear();
    w.key.clear();
    for (std::int64_t j = 0; j < Lk; ++j) {
      if (!key_visible(c, r.b, r.h, r.i, j)) continue;
      Item s;
      if (!score(r, j, s)) return false;
      w.it.push_back(s);
      w.key.push_back(j);
    }
    const bool has_sink = !c.sinks.empty();
    if (has_sink) {
      const double sk = c.sinks[static_cast<std::size_t>(r.h)];
      if (!std::isfinite(sk)) return false;
      w.it.push_back({sk, 0, 0});  // the sink: last, no value
    }
    const std::size_t n = w.it.size(), nkeys = w.key.size();
    const auto dvs = static_cast<std::size_t>(dv);
    if (n == 0) {  // every key masked, no sink
      for (std::size_t x = 0; x < dvs; ++x) out[x] = 0;
      lse = -kInf;
      H = 0;
      beta = 1;
      return true;
    }
    // The shift: the largest item.
    std::size_t jm = 0;
    for (std::size_t j = 1; j < n; ++j)
      if (w.it[j].sh > w.it[jm].sh || (w.it[j].sh == w.it[jm].sh && w.it[j].sl > w.it[jm].sl))
        jm = j;
    const double Mh = w.it[jm].sh, Ml = w.it[jm].sl, Em = w.it[jm].E;
    auto vrow = [&](std::size_t j) {
      return c.v.data() + (c.row_k(r.b, w.key[j]) * c.heads_kv + hk) * dv;
    };
    if (n == 1) {  // one item alone: exact (see above)
      for (std::size_t x = 0; x < dvs; ++x) {
        const double v = nkeys == 1 ? static_cast<double>(vrow(0)[x]) : 0.0;
        out[x] = fast::round_double(t_, (0.0 + v) * vd_);
      }
      lse = fast::round_dd(t_, DD{Mh, Ml}, Em);
      H = 0;
      beta = 1;  // adaptive: beta(0) = 1
      return !std::isnan(lse);
    }
    for (int level = 1; level <= 2; ++level)
      if (finish(level, r, w, jm, out, lse, H, beta)) return level;
    return 0;
  }

 private:
  // The sums of one level with every argument scaled by beta (b, within
  // berr of it; b = 1 and berr = 0 for rows without the adaptive
  // temperature), and their bounds.
  struct Sums {
    DD R{}, T{};
    double err_R = 0, err_T = 0, B = 0, kN = 0;
  };

  // Level `level` of the row at beta, then lse and out (and, at beta = 1,
  // the entropy, and for adaptive rows beta and a second pass at beta).
  bool finish(int level, const Row& r, Scratch& w, std::size_t jm, double* out, double& lse,
              double& H, double& beta) const {
    Sums s;
    if (!sums(level, r, w, jm, DD{1, 0}, 0.0, s)) return false;
    if (!denominator(w, s)) return false;
    const fast::Estimate He = entropy(w, s);
    H = fast::round_estimate(t_, He);
    // H > 0 (two items or more) below half the smallest subnormal: +0.
    if (std::isnan(H) && He.v.hi + std::abs(He.v.lo) + He.err < half_min_) H = 0;
    if (std::isnan(H)) return false;
    beta = 1;
    if (c_.adaptive) {
      const fast::Estimate Be = fast::beta_of(He);
      beta = fast::round_estimate(t_, Be);
      if (std::isnan(beta)) return false;
      if (!(Be.err == 0 && Be.v.hi == 1 && Be.v.lo == 0)) {  // beta > 1 possibly
        if (!sums(level, r, w, jm, Be.v, Be.err, s) || !denominator(w, s)) return false;
        return lse_of(w, w.it[jm], Be.v, Be.err, lse) && outputs(w, s.kN, out);
      }
    }
    return lse_of(w, w.it[jm], DD{1, 0}, 0.0, lse) && outputs(w, s.kN, out);
  }

  const float* vrow(const Row& r, const Scratch& w, std::size_t j) const {
    const AttentionCase& c = c_;
    return c.v.data() + (c.row_k(r.b, w.key[j]) * c.heads_kv + c.kv_head(r.h)) * c.dv;
  }

  // The shifted argument of item j != jm, beta (d_j) with beta = b +- berr
  // (b >= 1), and its bound E (against the true score of the largest item,
  // Em away from M; the analysis above): false when cut off, with ub, the
  // bound on its weight.
  //  beta != 1 (adaptive rows): d^b = dd_mul(d^, b): |d^b - beta d| <= 4.01u^2
  //  |d^b| + |d^| berr + b E (b, |d^| rounded up by 1.01); cut off when
  //  d^b < -111, with the same ub (beta >= 1 and d < 0: e^(beta d) <= e^d).
  static bool shifted(const Item& s, double Mh, double Ml, double Em, const DD& b, double berr,
                      DD& d, double& E, double& ub) {
    const DD a = two_sum(s.sh, -Mh);
    d = two_sum(a.hi, a.lo + (s.sl - Ml));
    E = s.E + Em + 3.1 * u * u * (std::abs(s.sh) + std::abs(Mh));
    if (!(d.hi >= fast::exp_cutoff)) {
      ub = exp_upper(d.hi);
      return false;
    }
    if (b.hi != 1 || b.lo != 0 || berr != 0) {
      const DD db = dd_mul(d, b);
      E = 1.01 * (b.hi * E + std::abs(d.hi) * berr) + 4.01 * u * u * std::abs(db.hi);
      if (!(db.hi >= fast::exp_cutoff)) {
        ub = exp_upper(d.hi);
        return false;
      }
      d = db;
    }
    return true;
  }

  bool sums(int level, const Row& r, Scratch& w, std::size_t jm, const DD& b, double berr,
            Sums& s) const {
    return level == 1 ? sums1(r, w, jm, b, berr, s) : sums2(r, w, jm, b, berr, s);
  }

  // Level 1: exp1, Sum2 in double (the analysis above); numerators into w
  // (N as hi/lo in Ns/Nsig, A, tail).
  bool sums1(const Row& r, Scratch& w, std::size_t jm, const DD& b, double berr, Sums& sm) const {
    const std::size_t n = w.it.size(), nkeys = w.key.size();
    const auto dvs = static_cast<std::size_t>(c_.dv);
    const double Mh = w.it[jm].sh, Ml = w.it[jm].sl, Em = w.it[jm].E;
    w.e.resize(n), w.el.resize(n);
    double Ed = 0, tailS = 0, tailT = 0;
    const fast::ExpTables& T = fast::exp_tables();
    double Rs = 0, Rsig = 0, Ts = 0, Tsig = 0, B = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if (j == jm) {
        w.e[j] = 1;
        continue;
      }
      DD d;
      double E, ub;
      if (!shifted(w.it[j], Mh, Ml, Em, b, berr, d, E, ub)) {
        w.e[j] = 0, w.el[j] = ub;  // el: the cut item's bound
        tailS += ub, tailT += ub * (std::abs(d.hi) + 1);
        continue;
      }
      Ed = std::max(Ed, E);
      const double e = fast::exp1(T, d.hi, d.lo);
      w.e[j] = e;
      DD p = two_sum(Rs, e);
      Rs = p.hi, Rsig += p.lo;
      const double tj = e * d.hi;
      p = two_sum(Ts, tj);
      Ts = p.hi, Tsig += p.lo;
      B += std::abs(tj);
    }
    if (!(Ed <= 0x1p-34) || !(Em <= 0x1p-40)) return false;
    const double K = static_cast<double>(n);
    const double g2 = gamma(K) * gamma(K);
    const double eps_e = (fast::exp1_rel_error + 1.01 * Ed) * kSafe;
    sm.R = two_sum(Rs, Rsig);
    sm.err_R = (1.01 * (eps_e + g2) * sm.R.hi + tailS) * kSafe;
    sm.T = two_sum(Ts, Tsig);
    sm.err_T = (1.01 * ((2 * u + eps_e) * B + Ed * (sm.R.hi + sm.err_R) + g2 * B) + tailT) * kSafe;
    sm.B = B;
    sm.kN = 1.01 * ((eps_e + u) * 1.02 + g2);
    // Numerators.
    w.Ns.assign(dvs, 0.0), w.Nsig.assign(dvs, 0.0), w.A.assign(dvs, 0.0), w.tail.assign(dvs, 0.0);
    double* Ns = w.Ns.data();
    double* Nsig = w.Nsig.data();
    double* A = w.A.data();
    for (std::size_t j = 0; j < nkeys; ++j) {
      const float* v = vrow(r, w, j);
      const double e = w.e[j];
      if (e == 0) {  // cut off
        double* tl = w.tail.data();
        const double ub = w.el[j];
        for (std::size_t x = 0; x < dvs; ++x)
          tl[x] += bound_product(ub, std::abs(static_cast<double>(v[x])));
        continue;
      }
      for (std::size_t x = 0; x < dvs; ++x) {
        const double P = e * static_cast<double>(v[x]);
        const double s = Ns[x] + P;
        const double bb = s - Ns[x];
        Nsig[x] += (Ns[x] - (s - bb)) + (P - bb);
        Ns[x] = s;
        A[x] += std::abs(P);
      }
    }
    for (std::size_t x = 0; x < dvs; ++x) {
      const DD N = two_sum(Ns[x], Nsig[x]);
      Ns[x] = N.hi, Nsig[x] = N.lo;
    }
    return true;
  }

  // Level 2: exp2 (2^-97), double-double products and sums (dd_mul 4u^2,
  // dd_add 3u^2 + 13u^3 of the partial sum, <= 3.02u^2 of the sum of
  // magnitudes over K steps, as ziv_row.cpp's level 2):
  //  err_R = 1.01 (eps_e2 + 3.02 K u^2) R + tail_S, eps_e2 = 2^-97 + 1.01
  //  Ed; t_j = dd_mul(e_j, d^_j) (dl kept): |t_j - e^(d_j) d_j| <= 1.01
  //  (eps_e2 + 4.01u^2) |t_j| + e^(d_j) Ed, so err_T = 1.01 ((eps_e2 +
  //  4.01u^2 + 3.02 K u^2) 1.01 B + Ed (R + err_R)) + tail_T (B sums the
  //  hi parts: the factor 1.01); P_j = dd_mul(e_j, v_jx): err_N = 1.01
  //  ((eps_e2 + 4.01u^2) 1.02 + 3.02 K u^2) A_x + tail_x. The rest as level 1.
  bool sums2(const Row& r, Scratch& w, std::size_t jm, const DD& b, double berr, Sums& sm) const {
    const std::size_t n = w.it.size(), nkeys = w.key.size();
    const auto dvs = static_cast<std::size_t>(c_.dv);
    const double Mh = w.it[jm].sh, Ml = w.it[jm].sl, Em = w.it[jm].E;
    w.e.resize(n), w.el.resize(n);
    double Ed = 0, tailS = 0, tailT = 0;
    const fast::ExpTables& T = fast::exp_tables();
    DD R{0, 0}, Tv{0, 0};
    double B = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if (j == jm) {
        w.e[j] = 1, w.el[j] = 0;
        continue;
      }
      DD d;
      double E, ub;
      if (!shifted(w.it[j], Mh, Ml, Em, b, berr, d, E, ub)) {
        w.e[j] = 0, w.el[j] = ub;
        tailS += ub, tailT += ub * (std::abs(d.hi) + 1);
        continue;
      }
      Ed = std::max(Ed, E);
      const DD e = fast::exp2(T, d.hi, d.lo);
      w.e[j] = e.hi, w.el[j] = e.lo;
      R = dd_add(R, e);
      const DD tj = dd_mul(e, d);
      Tv = dd_add(Tv, tj);
      B += std::abs(tj.hi);
    }
    if (!(Ed <= 0x1p-34) || !(Em <= 0x1p-40)) return false;
    const double K = static_cast<double>(n);
    const double a2 = 3.02 * K * u * u;
    const double eps_e = (fast::exp2_rel_error + 1.01 * Ed) * kSafe;
    sm.R = R;
    sm.err_R = (1.01 * (eps_e + a2) * R.hi + tailS) * kSafe;
    sm.T = Tv;
    sm.err_T =
        (1.01 * ((eps_e + 4.01 * u * u + a2) * B * 1.01 + Ed * (R.hi + sm.err_R)) + tailT) * kSafe;
    sm.B = B;
    sm.kN = 1.01 * ((eps_e + 4.01 * u * u) * 1.02 + a2);
    w.Ns.assign(dvs, 0.0), w.Nsig.assign(dvs, 0.0), w.A.assign(dvs, 0.0), w.tail.assign(dvs, 0.0);
    for (std::size_t j = 0; j < nkeys; ++j) {
      const float* v = vrow(r, w, j);
      const DD e{w.e[j], w.el[j]};
      if (e.hi == 0) {  // cut off: el is its bound
        for (std::size_t x = 0; x < dvs; ++x)
          w.tail[x] += bound_product(e.lo, std::abs(static_cast<double>(v[x])));
        continue;
      }
      for (std::size_t x = 0; x < dvs; ++x) {
        const DD P = dd_mul(e, DD{static_cast<double>(v[x]), 0});
        const DD N = dd_add(DD{w.Ns[x], w.Nsig[x]}, P);
        w.Ns[x] = N.hi, w.Nsig[x] = N.lo;
        w.A[x] += std::abs(P.hi);
      }
    }
    return true;
  }

  // S = 1 + R and log S with their bounds, into w (the analysis above).
  bool denominator(Scratch& w, const Sums& s) const {
    const DD& R = s.R;
    w.S = dd_add(DD{1, 0}, R);
    w.err_S = (s.err_R + 3.01 * u * u * w.S.hi) * kSafe;
    if (R.hi < 0x1p-20) {
      const double p = R.hi;
      const double cc = p * p * (-0.5 + p * (1.0 / 3 + p * (-0.25 + p * 0.2)));
      w.L = dd_add(R, DD{cc, 0});
      w.err_L =
          (3.2 * u * p * p + p * p * p * p * p * p + 3.01 * u * u * std::abs(w.L.hi) + s.err_R) *
          kSafe;
    } else {
      const fast::LogS ls = fast::log_of(w.S, w.err_S / w.S.hi);
      w.L = ls.L;
      w.err_L = ls.eta;
    }
    return std::isfinite(w.err_L);
  }

  // lse = beta s_jmax + log S: the largest item's score M (within Em) times b
  // (within berr of beta; dd_mul 4u^2): |M b - beta s_jmax| <= 1.01 (b Em +
  // |M| berr) + 4.01u^2 |M b|; then dd_add (3.01u^2 |lse|).
  bool lse_of(const Scratch& w, const Item& top, const DD& b, double berr, double& lse) const {
    DD M{top.sh, top.sl};
    double err = top.E;
    if (b.hi != 1 || b.lo != 0 || berr != 0) {
      M = dd_mul(M, b);
      err = 1.01 * (b.hi * top.E + std::abs(top.sh) * berr) + 4.01 * u * u * std::abs(M.hi);
    }
    const DD lv = dd_add(M, w.L);
    lse = fast::round_dd(
        t_, lv,
        (w.err_L + err + 3.01 * u * u * std::abs(lv.hi) + kMp * (std::abs(M.hi) + 1)) * kSafe);
    return !std::isnan(lse);
  }

  // H = log S - T/S at beta = 1 with its bound (the analysis above).
  fast::Estimate entropy(const Scratch& w, const Sums& s) const {
    const DD q = dd_div(DD{-s.T.hi, -s.T.lo}, w.S);
    const double err_q =
        (1.02 * (s.err_T + (1.02 * s.B + s.err_T) * w.err_S) + 64.1 * u * u * std::abs(q.hi)) *
        kSafe;
    const DD Hv = dd_add(w.L, q);
    return {Hv, (w.err_L + err_q + 3.01 * u * u * std::abs(Hv.hi) +
                 kMp * (s.B + std::abs(w.L.hi) + 1)) *
                    kSafe};
  }

  // out from the numerators in w, with err_N = kN A + tail.
  bool outputs(Scratch& w, double kN, double* out) const {
    const auto dvs = static_cast<std::size_t>(c_.dv);
    const DD S = w.S;
    const double err_S = w.err_S;
    const double avd = std::abs(vd_);
    for (std::size_t x = 0; x < dvs; ++x) {
      const double A = w.A[x], tail = w.tail[x];
      if (!std::isfinite(A) || !std::isfinite(tail)) return false;
      if (A == 0 && tail == 0) {
        out[x] = fast::round_double(t_, 0.0 * vd_);
        continue;
      }
      const DD N{w.Ns[x], w.Nsig[x]};
      const double err_N = (kN * A + tail) * kSafe;
      DD o = dd_div(N, S);
      if (vd_ != 1) o = dd_mul(o, DD{vd_, 0});
      const double err = (avd * 1.01 * (err_N + 1.02 * A * err_S) / S.hi +
                          68.1 * u * u * std::abs(o.hi) + kMp * avd * A / S.hi + kFloor) *
                         kSafe;
      out[x] = fast::round_dd(t_, o, err);
      if (std::isnan(out[x])) return false;
    }
    return true;
  }

  DType t_;
  const AttentionCase& c_;
  detail::cr::Scorer scorer_;
  DD sc_{};
  double vd_ = 1, cap_ = 0, half_min_ = 0;
  bool ok_ = false;
};

// The MPFR row, rounded once to t. Returns whether the row must be
// computed again at a higher precision: some output lies within 2^-200 of
// a rounding boundary of t while saturated softcap scores make 256 bits too
// few to separate them (detail::row_precision_bits).
bool mpfr_row(DType t, const AttentionCase& c, const Row& r, Scratch& w, double* out, double& lse,
              double& H, double& beta) {
  detail::attention_row<Mp>(c, r.b, r.h, r.i, w.mp, w.mpv);
  bool undecided = false;
  auto emit = [&](const Mp& x) {
    undecided = undecided || rounding_undecided(t, x, 200);
    return round_to(t, x);
  };
  for (std::int64_t x = 0; x < c.dv; ++x) out[x] = emit(w.mpv.out[static_cast<std::size_t>(x)]);
  lse = emit(w.mpv.lse);
  H = emit(w.mpv.entropy);
  beta = emit(w.mpv.beta);
  return undecided &&
         detail::row_precision_bits(c, r.b, r.h, r.i, precision_bits()) > precision_bits();
}

}  // namespace

AttentionRounded attention_rounded(DType t, const AttentionCase& c, const CrOptions& o) {
  c.validate();
  std::vector<Row> rows;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t i = 0; i < c.len_q(b); ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h) rows.push_back({b, i, h});
  const auto nr = static_cast<std::int64_t>(rows.size());
  AttentionRounded res;
  res.out.assign(static_cast<std::size_t>(nr * c.dv), 0.0);
  res.lse.assign(static_cast<std::size_t>(nr), 0.0);
  res.entropy.assign(static_cast<std::size_t>(nr), 0.0);
  res.beta.assign(static_cast<std::size_t>(nr), 1.0);
  const FastAttention fa(t, c);
  const bool fast_path = o.path == RefPath::fast && fa.ok();
  // A thread team only for enough work (issue 32): the property suite calls
  // this on cases of a few rows of a few keys, where waking the team costs
  // more than the rows. Work: the key-by-dimension products of every row.
  std::int64_t work = 0;
  for (const Row& r : rows) work += c.len_k(r.b) * (c.d + c.dv);
  const int nt = nr < 2 || (o.threads <= 0 && work < kParallelMinWork)
                     ? 1
                     : (o.threads > 0 ? o.threads : omp_get_max_threads());
  std::int64_t n_fast = 0, n_fast2 = 0, n_mpfr = 0;
  std::vector<unsigned char> again(static_cast<std::size_t>(nr), 0);
#pragma omp parallel num_threads(nt) if (nt > 1) reduction(+ : n_fast, n_fast2, n_mpfr)
  {
    Scratch w;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t k = 0; k < nr; ++k) {
      const Row& r = rows[static_cast<std::size_t>(k)];
      const auto o_ = static_cast<std::size_t>(c.row_q(r.b, r.i) * c.heads_q + r.h);
      double* out = res.out.data() + o_ * static_cast<std::size_t>(c.dv);
      const int level =
          fast_path ? fa.row(r, w, out, res.lse[o_], res.entropy[o_], res.beta[o_]) : 0;
      if (level > 0) {
        ++(level == 1 ? n_fast : n_fast2);
      } else {
        if (mpfr_row(t, c, r, w, out, res.lse[o_], res.entropy[o_], res.beta[o_]))
          again[static_cast<std::size_t>(k)] = 1;
        ++n_mpfr;
      }
    }
  }
  // Rows whose rounding 256 bits left open under saturated softcap scores:
  // again, one at a time (the precision is process-wide), at the precision
  // their scores need. Their values then round as the exact ones do.
  for (std::int64_t k = 0; k < nr; ++k) {
    if (!again[static_cast<std::size_t>(k)]) continue;
    const Row& r = rows[static_cast<std::size_t>(k)];
    const auto o_ = static_cast<std::size_t>(c.row_q(r.b, r.i) * c.heads_q + r.h);
    const PrecisionScope prec(detail::row_precision_bits(c, r.b, r.h, r.i, precision_bits()));
    Scratch w;
    mpfr_row(t, c, r, w, res.out.data() + o_ * static_cast<std::size_t>(c.dv), res.lse[o_],
             res.entropy[o_], res.beta[o_]);
  }
  if (o.stats) {
    CrStats st;
    const std::int64_t per = c.dv + 3;
    st.elements = nr * per;
    st.level1 = n_fast * per;
    st.level2 = n_fast2 * per;
    st.mpfr = n_mpfr * per;
    *o.stats += st;
  }
  return res;
}

}  // namespace sa::ref
