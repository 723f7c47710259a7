#include "reference/attention_backward_cr.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "reference/attention_cr_score.hpp"
#include "reference/attention.hpp"
#include "reference/mpfr.hpp"
#include "reference/rounding.hpp"

// Error analysis of the fast (double-double) level, u = 2^-53, each written
// operation one IEEE operation rounded to nearest (-ffp-contract=off; fma
// only where written). "The exact value" is the real result of kernel.h's
// formulas on the inputs; the MPFR value is within kMp = 2^-200 of the
// magnitudes summed of it (attention_backward_cr.hpp), and every bound below
// adds kMp times those magnitudes (md, Mg), so an interval certified here
// also holds the MPFR value and rounds like it. dd_add: relative 3u^2 +
// 13u^3 <= 3.01u^2 of the exact sum of its inputs; dd_mul 4u^2 (4.01u^2
// counted), dd_div 64u^2 (fast_arith.hpp). A sum of K terms accumulated by
// dd_add errs by <= 3.02 K u^2 A, A = sum |terms| (each step's error is
// 3.01u^2 of a partial sum, itself <= (1 + 2^-90) A). Every bound is a
// first-order sum of relative errors each < 2^-30: factors 1.01 and kSafe
// cover the products of two of them and the roundings of the bounds'
// own double arithmetic. kFloor = 2^-1000 absolute per operation chain
// covers results near underflow (each double-double operation then errs by
// <= 2^-1070 absolute).
//
// Per query row i (sequence b, head h), row():
//  Scores s_j (double-double, |s^ - s| <= E_j) and, with softcap,
//  t_j = tanh(x_j / c) within et_j: detail::cr::Scorer (the analysis in
//  attention_cr.cpp, "Scores"). The row fails (its outputs go to MPFR)
//  when a score cannot be bounded.
//  Weights, relative to the true score of the largest item jm (hi, then lo;
//  the sink is an item with an exact score), as attention_cr.cpp's level 2:
//  d^_j = s^_j - M, |d^_j - d_j| <= Ed_j = E_j + E_jm + 3.1u^2 (|sh| + |Mh|)
//  (<= 2^-34 required, E_jm <= 2^-40); e_j = exp2(d^_j) (2^-97) within
//  eps_j = 2^-97 + 1.01 Ed_j relative of e^(d_j); e_jm = 1 exactly; items
//  with d^ < -111 are cut: e^(d_j) <= ub_j = exp_upper(d^_j) (< 2^-159).
//  R = sum_(j != jm) e_j by dd_add: err_R = 1.01 sum eps_j e_j + 3.02 K u^2
//  R + sum ub; S = dd_add(1, R): err_S = err_R + 3.01u^2 S (S >= 1).
//  p_j = dd_div(e_j, S): with e^ = e (1 + a), S^ = S (1 + b), the quotient
//  (1 + c): |p^ - p| <= ep_j = 1.01 (eps_j + err_S / S^ + 64u^2) p^ +
//  kFloor; cut items p^ = 0, ep = ub (p <= e^(d) / S <= ub). The sink's
//  p_sink likewise.
//  dp_j = vd sum_x dout_x v_jx: float products exact, dot_dd (8 lanes of
//  Sum2, |dot^ - dot| <= gamma_(dv+8)^2 mag_j, mag_j = sum_x |dout_x v_jx|,
//  as the scores' dot), then dd_mul by vd (exact double): err_dp_j = |vd|
//  1.01 gamma^2 mag_j + 4.01u^2 |dp^_j|.
//  D = sum_j p_j dp_j (= dout . out, the same real number): t_j =
//  dd_mul(p^_j, dp^_j), |t_j - p_j dp_j| <= err_t_j = |dp^_j| ep_j + (p^_j +
//  ep_j) err_dp_j + 4.01u^2 |t_j|; D^ by dd_add: err_D = 1.01 sum err_t_j
//  + 3.02 K u^2 sum |t_j|. Its MPFR magnitude AM = 1.01 |vd| sum_j (p^_j +
//  ep_j) mag_j (>= |vd| sum_x |dout_x| sum_j p_j |v_jx|, and >= sum |t_j|).
//  ds_j = p_j (dp_j - D) g_j, g_j = 1 - t_j^2 with softcap, else 1 (exact):
//  diff = dd_add(dp^_j, -D^), err_diff = err_dp_j + err_D + 3.01u^2 |diff|;
//  pd = dd_mul(p^, diff), err_pd = p^ err_diff + |diff| ep + ep err_diff +
//  4.01u^2 |pd|; tt = dd_mul(t^, t^), |tt - t^2| <= (2|t^| + et) et +
//  4.01u^2 tt; g^ = dd_add(1, -tt), err_g = that + 3.01u^2 g^ + 2^-250
//  (MPFR's g = 1 / cosh^2(x / c) errs by a few 2^-256 relative, <= 2^-250
//  absolute, from its own roundings, and by <= 2 |th| et from the exact
//  one through its argument, which et covers: the Scorer's bound includes
//  MPFR's error on x / c; so err_g also bounds g^'s distance to MPFR's g); ds =
//  dd_mul(pd, g^), err_ds = |pd| err_g + g^ err_pd + err_pd err_g +
//  4.01u^2 |ds| + kFloor. The cancellation in dp_j - D is bounded in
//  absolute terms (err_dp + err_D), from the magnitudes summed, not from
//  |ds|. MPFR's own ds is within 2^-230 md_j of the exact one, md_j =
//  1.01 (p^ + ep)(|dp^| + err_dp + |vd| mag_j + |D^| + err_D + AM)(g^ +
//  err_g).
// Outputs dq(), dk(), dv(): sum_n X_n f_n, X_n a double-double (Xh, Xl),
// |Xl| <= u |Xh|, within eX_n of its exact value (ds for dq and dk, p for
// dv), f_n an exact float input (k, q, dout), K terms, by Dot2
// (Ogita-Rump-Oishi) from +0: p_n + pe_n = Xh f_n exactly (Dekker), S_n =
// two_sum(S_(n-1), p_n) exactly with error e_n, sig += e_n + pe_n +
// RN(Xl f_n). So sum Xh f + Xl f = S + sum (e_n + pe_n + Xl f_n) exactly,
// and with A = sum |p_n|: |e_n| <= u A, sum |pe_n| <= u A, |Xl f| <= 1.01u^2
// |p_n|, so the 3K-term plain sum sig errs by <= gamma_3K (K + 2) u A 1.01
// <= 1.02 3K (K + 2) u^2 A, and RN(Xl f) by 1.01u^2 A in all. The terms'
// own errors add E = sum |f_n| eX_n. Then dd_mul by the exact factor F
// (scale * q_descale * k_descale as a double-double for dq, dk; v_descale
// for dv): err = |F| 1.01 (E + (1.02 3K (K + 2) + 1.01) u^2 A + kFloor (K +
// 2)) + 4.01u^2 |out|, where eX_n also carries kMp times X_n's MPFR
// magnitude (md for ds, p^ + ep for p), so the MPFR value is inside too.
// dsink(): terms T = dd_mul(p_sink, D) (both inexact: |D^| ep_s + (p_s^ +
// ep_s) err_D + 4.01u^2 |T| + kFloor) subtracted by dd_add from +0: E the
// sum of those, A = sum |T|: err = 1.01 (E + 3.02 K u^2 A + kMp Mg + kFloor
// (K + 2)), Mg = sum (p^_s + ep_s) (|D^| + err_D + AM). The exact value lies
// within err of the result, and so does the MPFR value; the rounding test
// (round_dd, ziv_row.hpp) certifies iff the interval [v - err, v + err]
// lies strictly between the rounding boundaries around its rounding, a zero
// only when the whole interval has one sign: an output whose exact value is
// 0 with non-zero terms (its MPFR value a tiny number of either sign) is
// never certified and goes to MPFR. When every term is exactly zero with a
// zero bound (A = E = 0: its float factors f_n are +-0, its X_n exactly 0
// with eX_n = 0 (rows with one live item, below), or nothing is summed), the exact and the MPFR
// sums are both +0 (MPFR's sums start at +0, and +0 plus +-0 is +0): the output is +0 times F,
// exactly.

namespace sa::ref {
namespace {

using detail::cr::bound_product;
using detail::cr::dot_dd;
using detail::cr::exp_upper;
using detail::cr::gamma;
using detail::cr::Item;
using detail::cr::kFloor;
using detail::cr::kMp;
using detail::cr::Scorer;
using detail::cr::Tanh;
using fast::DD;
using fast::dd_add;
using fast::dd_div;
using fast::dd_mul;
using fast::kSafe;
using fast::two_sum;
using fast::u;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

void check(const AttentionCase& c, std::span<const float> dout, const char* what) {
  c.validate();
  if (c.adaptive)
    throw std::invalid_argument(std::string(what) +
                                ": adaptive attention has no backward (kernel.h)");
  if (static_cast<std::int64_t>(dout.size()) != c.total_q() * c.heads_q * c.dv)
    throw std::invalid_argument(std::string(what) + ": dout has " + std::to_string(dout.size()) +
                                " values, expected " +
                                std::to_string(c.total_q() * c.heads_q * c.dv));
}

// Query rows rid = qrow * heads_q + h, key units kid = krow * heads_kv + hk.
struct Layout {
  std::vector<std::int64_t> qb, qi, kb, kj;  // per query row / key row: sequence, index
  explicit Layout(const AttentionCase& c) {
    for (std::int64_t b = 0; b < c.batch; ++b) {
      for (std::int64_t i = 0; i < c.len_q(b); ++i) qb.push_back(b), qi.push_back(i);
      for (std::int64_t j = 0; j < c.len_k(b); ++j) kb.push_back(b), kj.push_back(j);
    }
  }
};

const float* qrow_of(const AttentionCase& c, std::int64_t rid) { return c.q.data() + rid * c.d; }

// ------------------------------------------------------------------ MPFR

// One query row in MPFR: p and ds over the sequence's keys (visible ones).
struct MpRow {
  bool nan = false, live = false, done = false;
  std::vector<unsigned char> vis;
  std::vector<Mp> p, ds;
  Mp p_sink, D;
};

// kernel.h's formulas in the order of reference/backward.hpp's x87 row.
void mp_row(const AttentionCase& c, std::span<const float> dout, std::int64_t b, std::int64_t i,
            std::int64_t h, MpRow& r, Mp* out, Mp* lse) {
  const std::int64_t Lk = c.len_k(b), Lq = c.len_q(b), HQ = c.heads_q, HK = c.heads_kv;
  const std::int64_t hk = c.kv_head(h), off = c.top_left ? 0 : Lk - Lq;
  const auto n = static_cast<std::size_t>(Lk);
  const std::int64_t qrow = c.row_q(b, i);
  const float* q = c.q.data() + (qrow * HQ + h) * c.d;
  const float* go = dout.data() + (qrow * HQ + h) * c.dv;
  r.vis.assign(n, 0);
  r.p.assign(n, Mp(0));
  r.ds.assign(n, Mp(0));
  r.nan = r.live = false;
  r.done = true;
  std::vector<Mp> s(n), g(n);
  const Mp scale = Mp(c.scale) * Mp(c.q_descale) * Mp(c.k_descale);
  const Mp cap(c.softcap), vd(c.v_descale);
  Mp m = -kInf;
  for (std::int64_t j = 0; j < Lk; ++j) {
    r.vis[j] = key_visible(c, b, i, j) ? 1 : 0;
    if (!r.vis[j]) continue;
    const float* k = c.k.data() + (c.row_k(b, j) * HK + hk) * c.d;
    Mp dot = 0;
    for (std::int64_t x = 0; x < c.d; ++x) dot += Mp(q[x]) * Mp(k[x]);
    Mp v = scale * dot;
    g[j] = 1;
    if (c.softcap > 0) {
      // tanh' = 1 - tanh^2 = 1 / cosh^2, in the relative form: 1 - th^2
      // would lose everything below 2^-256 absolute once tanh saturates.
      const Mp y = v / cap;
      const Mp ch = cosh(y);
      v = cap * tanh(y);
      g[j] = 1 / (ch * ch);
    }
    if (!c.alibi_slopes.empty()) {
      const std::int64_t dist = i + off - j;
      v -= Mp(c.alibi_slopes[h]) * Mp(static_cast<double>(dist < 0 ? -dist : dist));
    }
    s[j] = v;
    if (isnan(v)) r.nan = true;
    if (v > m) m = v;
  }
  const bool has_sink = !c.sinks.empty();
  const Mp sink = has_sink ? Mp(c.sinks[h]) : Mp(-kInf);
  if (has_sink && isnan(sink)) r.nan = true;
  if (has_sink && sink > m) m = sink;
  if (r.nan) {
    for (std::size_t j = 0; j < n; ++j)
      if (r.vis[j]) r.p[j] = kNaN, r.ds[j] = kNaN;
    r.p_sink = kNaN;
    r.D = kNaN;
    r.live = true;
    if (lse) *lse = kNaN;
    if (out)
      for (std::int64_t x = 0; x < c.dv; ++x) out[x] = kNaN;
    return;
  }
  if (m == -kInf) {  // fully masked, no sink: out 0, no gradient
    if (lse) *lse = -kInf;
    if (out)
      for (std::int64_t x = 0; x < c.dv; ++x) out[x] = 0;
    return;
  }
  r.live = true;
  Mp S = 0;
  for (std::size_t j = 0; j < n; ++j)
    if (r.vis[j]) {
      r.p[j] = exp(s[j] - m);
      S += r.p[j];
    }
  const Mp ps = has_sink ? Mp(exp(sink - m)) : Mp(0);
  S += ps;
  for (std::size_t j = 0; j < n; ++j)
    if (r.vis[j]) r.p[j] /= S;
  if (lse) *lse = m + log(S);
  r.D = 0;
  for (std::int64_t x = 0; x < c.dv; ++x) {
    Mp acc = 0;
    for (std::size_t j = 0; j < n; ++j)
      if (r.vis[j])
        acc += r.p[j] * Mp(c.v[(c.row_k(b, static_cast<std::int64_t>(j)) * HK + hk) * c.dv + x]);
    const Mp o = acc * vd;
    if (out) out[x] = o;
    r.D += Mp(go[x]) * o;
  }
  r.p_sink = ps / S;
  for (std::size_t j = 0; j < n; ++j) {
    if (!r.vis[j]) continue;
    const float* vj = c.v.data() + (c.row_k(b, static_cast<std::int64_t>(j)) * HK + hk) * c.dv;
    Mp dp = 0;
    for (std::int64_t x = 0; x < c.dv; ++x) dp += Mp(go[x]) * Mp(vj[x]);
    dp *= vd;
    r.ds[j] = r.p[j] * (dp - r.D) * g[j];
  }
}

// The outputs flagged in fq, fk, fv, fs, from the MPFR rows they need, each
// through emit(Mp) into the result vectors.
template <class Emit>
void mpfr_outputs(const AttentionCase& c, std::span<const float> dout, const Layout& L,
                  const std::vector<unsigned char>& fq, const std::vector<unsigned char>& fk,
                  const std::vector<unsigned char>& fv, const std::vector<unsigned char>& fs,
                  std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv,
                  std::vector<double>& dsinks, int nt, Emit emit,
                  std::vector<double>* out = nullptr, std::vector<double>* lse = nullptr) {
  const std::int64_t HQ = c.heads_q, HK = c.heads_kv, d = c.d, dvv = c.dv;
  const std::int64_t nrows = c.total_q() * HQ, nkeys = c.total_k() * HK;
  // The rows each flagged output reads.
  std::vector<unsigned char> need(static_cast<std::size_t>(nrows), out != nullptr ? 1 : 0);
  for (std::int64_t rid = 0; rid < nrows; ++rid)
    for (std::int64_t x = 0; x < d; ++x)
      if (fq[rid * d + x]) need[rid] = 1;
  auto rows_of_key = [&](std::int64_t kid, auto&& f) {  // h in the group, then i
    const std::int64_t krow = kid / HK, hk = kid % HK, b = L.kb[krow];
    for (std::int64_t h = 0; h < HQ; ++h) {
      if (c.kv_head(h) != hk) continue;
      for (std::int64_t i = 0; i < c.len_q(b); ++i) f(c.row_q(b, i) * HQ + h);
    }
  };
  for (std::int64_t kid = 0; kid < nkeys; ++kid) {
    bool any = false;
    for (std::int64_t x = 0; x < d; ++x) any = any || fk[kid * d + x];
    for (std::int64_t x = 0; x < dvv; ++x) any = any || fv[kid * dvv + x];
    if (any) rows_of_key(kid, [&](std::int64_t rid) { need[rid] = 1; });
  }
  for (std::int64_t h = 0; h < static_cast<std::int64_t>(fs.size()); ++h)
    if (fs[h])
      for (std::int64_t qr = 0; qr < c.total_q(); ++qr) need[qr * HQ + h] = 1;
  std::vector<MpRow> rows(static_cast<std::size_t>(nrows));
  const Mp sc = Mp(c.scale) * Mp(c.q_descale) * Mp(c.k_descale);
  const Mp vd(c.v_descale);
#pragma omp parallel num_threads(nt) if (nt > 1)
  {
    std::vector<Mp> o(static_cast<std::size_t>(dvv));
    Mp l;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t rid = 0; rid < nrows; ++rid) {
      if (!need[rid]) continue;
      const std::int64_t qr = rid / HQ;
      mp_row(c, dout, L.qb[qr], L.qi[qr], rid % HQ, rows[rid], out ? o.data() : nullptr,
             lse ? &l : nullptr);
      if (out)
        for (std::int64_t x = 0; x < dvv; ++x) (*out)[rid * dvv + x] = o[x].convert_to<double>();
      if (lse) (*lse)[rid] = l.convert_to<double>();
    }
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t rid = 0; rid < nrows; ++rid) {
      const MpRow& r = rows[rid];
      const std::int64_t qr = rid / HQ, b = L.qb[qr], hk = c.kv_head(rid % HQ);
      for (std::int64_t x = 0; x < d; ++x) {
        if (!fq[rid * d + x]) continue;
        if (r.nan) {
          dq[rid * d + x] = kNaN;
          continue;
        }
        // dq = sc sum_j ds_j k_j. When every visible key holds the same k_x
        // = k_r and there is no softcap, sum_j ds_j = p_sink D exactly (D =
        // sum_j p_j dp_j), so dq = sc k_r p_sink D, which is exactly 0
        // without a sink: computed so (+0), instead of the plain sum whose
        // value is then the working precision's rounding noise, of either
        // sign. Otherwise the plain sum.
        auto kx = [&](std::size_t j) {
          return Mp(c.k[(c.row_k(b, static_cast<std::int64_t>(j)) * HK + hk) * d + x]);
        };
        std::size_t jr = r.vis.size();
        bool same_k = !(c.softcap > 0) && r.live;
        for (std::size_t j = 0; j < r.vis.size() && same_k; ++j)
          if (r.vis[j]) {
            if (jr == r.vis.size()) jr = j;
            same_k = kx(j) == kx(jr);
          }
        Mp acc = 0;
        if (same_k && jr < r.vis.size()) {
          // A zero stays +0, as the plain sum's (it starts at +0).
          const Mp prod = kx(jr) * Mp(r.p_sink * r.D);
          if (prod != 0) acc = prod;
        } else {
          for (std::size_t j = 0; j < r.vis.size(); ++j)
            if (r.vis[j]) acc += r.ds[j] * kx(j);
        }
        dq[rid * d + x] = emit(Mp(sc * acc));
      }
    }
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t kid = 0; kid < nkeys; ++kid) {
      const std::int64_t j = L.kj[kid / HK];
      for (std::int64_t x = 0; x < d; ++x) {
        if (!fk[kid * d + x]) continue;
        Mp acc = 0;
        rows_of_key(kid, [&](std::int64_t rid) {
          const MpRow& r = rows[rid];
          if (r.vis[j]) acc += r.ds[j] * Mp(qrow_of(c, rid)[x]);
        });
        dk[kid * d + x] = emit(Mp(sc * acc));
      }
      for (std::int64_t x = 0; x < dvv; ++x) {
        if (!fv[kid * dvv + x]) continue;
        Mp acc = 0;
        rows_of_key(kid, [&](std::int64_t rid) {
          const MpRow& r = rows[rid];
          if (r.vis[j]) acc += r.p[j] * Mp(dout[rid * dvv + x]);
        });
        dv[kid * dvv + x] = emit(Mp(vd * acc));
      }
    }
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t h = 0; h < static_cast<std::int64_t>(fs.size()); ++h) {
      if (!fs[h]) continue;
      Mp acc = 0;
      for (std::int64_t qr = 0; qr < c.total_q(); ++qr) {
        const MpRow& r = rows[qr * HQ + h];
        if (r.live) acc -= r.p_sink * r.D;
      }
      dsinks[h] = emit(acc);
    }
  }
}

// ------------------------------------------------------------- fast level

// One (query row, key) pair: p (hi, lo) within ep; ds (hi, lo) within ed;
// md, ds's MPFR magnitude.
struct Pair {
  double ph = 0, pl = 0, ep = 0, dh = 0, dl = 0, ed = 0, md = 0;
};

struct FastRow {
  bool ok = false, live = false;
  std::vector<unsigned char> vis;
  std::vector<Pair> pr;
  DD ps{}, D{};
  double eps = 0, eD = 0, mD = 0;
};

class FastBackward {
 public:
  FastBackward(DType t, const AttentionCase& c, std::span<const float> dout, const Layout& L)
      : t_(t), c_(c), dout_(dout), L_(L), scorer_(c) {
    sc_ = scorer_.sc();
    vd_ = static_cast<double>(c.v_descale);
    const double qk = static_cast<double>(c.q_descale) * static_cast<double>(c.k_descale);
    const bool exact_sc = std::isfinite(qk) &&
                          std::fma(static_cast<double>(c.q_descale), c.k_descale, -qk) == 0 &&
                          std::abs(sc_.hi) >= 0x1p-900;
    ok_ = t != DType::float64 && std::isfinite(vd_) && vd_ != 0 && std::isfinite(sc_.hi) &&
          exact_sc && finite(c.q) && finite(c.k) && finite(c.v) && finite(dout) &&
          finite(c.sinks) && finite(c.alibi_slopes);
  }
  bool ok() const { return ok_; }

  // The row rid's pairs (the analysis above); r.ok false when it fails.
  void row(std::int64_t rid, FastRow& r) const {
    const AttentionCase& c = c_;
    const std::int64_t HQ = c.heads_q, HK = c.heads_kv, qr = rid / HQ, h = rid % HQ;
    const std::int64_t b = L_.qb[qr], i = L_.qi[qr], hk = c.kv_head(h);
    const std::int64_t Lk = c.len_k(b), dvv = c.dv;
    const auto n = static_cast<std::size_t>(Lk);
    r.ok = r.live = false;
    r.vis.assign(n, 0);
    r.pr.assign(n, Pair{});
    std::vector<Item> it;
    std::vector<Tanh> th;
    std::vector<std::size_t> key;
    for (std::int64_t j = 0; j < Lk; ++j) {
      if (!key_visible(c, b, i, j)) continue;
      r.vis[j] = 1;
      Item s;
      Tanh t{};
      if (!scorer_.score(b, i, h, j, s, &t)) return;
      it.push_back(s);
      th.push_back(t);
      key.push_back(static_cast<std::size_t>(j));
    }
    const bool has_sink = !c.sinks.empty();
    if (has_sink) it.push_back({static_cast<double>(c.sinks[h]), 0, 0});
    const std::size_t ni = it.size(), nk = key.size();
    if (ni == 0) {  // fully masked, no sink: nothing to contribute
      r.ok = true;
      return;
    }
    r.live = true;
    std::size_t jm = 0;
    for (std::size_t j = 1; j < ni; ++j)
      if (it[j].sh > it[jm].sh || (it[j].sh == it[jm].sh && it[j].sl > it[jm].sl)) jm = j;
    const double Mh = it[jm].sh, Ml = it[jm].sl, Em = it[jm].E;
    if (!(Em <= 0x1p-40)) return;
    const fast::ExpTables& T = fast::exp_tables();
    std::vector<DD> e(ni);
    std::vector<double> eps(ni, 0.0), ub(ni, 0.0);
    DD R{0, 0};
    double errR = 0, tail = 0;
    for (std::size_t j = 0; j < ni; ++j) {
      if (j == jm) {
        e[j] = {1, 0};
        continue;
      }
      const DD a = two_sum(it[j].sh, -Mh);
      const DD dd = two_sum(a.hi, a.lo + (it[j].sl - Ml));
      const double Ed = it[j].E + Em + 3.1 * u * u * (std::abs(it[j].sh) + std::abs(Mh));
      if (!(Ed <= 0x1p-34)) return;
      if (!(dd.hi >= fast::exp_cutoff)) {
        e[j] = {0, 0};
        ub[j] = exp_upper(dd.hi);
        tail += ub[j];
        continue;
      }
      e[j] = fast::exp2(T, dd.hi, dd.lo);
      eps[j] = (fast::exp2_rel_error + 1.01 * Ed) * kSafe;
      R = dd_add(R, e[j]);
      errR += eps[j] * e[j].hi;
    }
    const double K = static_cast<double>(ni);
    errR = (1.01 * errR + 3.02 * K * u * u * R.hi + tail) * kSafe;
    const DD S = dd_add(DD{1, 0}, R);
    const double errS = (errR + 3.01 * u * u * S.hi) * kSafe;
    const double rS = errS / S.hi;
    auto weight = [&](std::size_t j, DD& p, double& ep) {
      if (e[j].hi == 0) {
        p = {0, 0};
        ep = ub[j];
        return;
      }
      p = dd_div(e[j], S);
      ep = 1.01 * (eps[j] + rS + 64.1 * u * u) * kSafe * p.hi + kFloor;
    };
    if (has_sink) weight(ni - 1, r.ps, r.eps);
    // dp_j, p_j, and D.
    const float* go = dout_.data() + rid * dvv;
    const double gK = gamma(static_cast<double>(dvv) + 8);
    const double avd = std::abs(vd_);
    std::vector<DD> dp(nk);
    std::vector<double> edp(nk), mag(nk);
    DD D{0, 0};
    double eD = 0, At = 0, AM = 0;
    for (std::size_t k = 0; k < nk; ++k) {
      const float* vj =
          c.v.data() + (c.row_k(b, static_cast<std::int64_t>(key[k])) * HK + hk) * dvv;
      double mg;
      const DD dot = dot_dd(go, vj, dvv, mg);
      dp[k] = dd_mul(dot, DD{vd_, 0});
      edp[k] = (avd * 1.01 * gK * gK * mg + 4.01 * u * u * std::abs(dp[k].hi) + kFloor) * kSafe;
      mag[k] = mg;
      Pair& P = r.pr[key[k]];
      DD p;
      weight(k, p, P.ep);
      P.ph = p.hi, P.pl = p.lo;
      const DD tk = dd_mul(p, dp[k]);
      D = dd_add(D, tk);
      eD += std::abs(dp[k].hi) * P.ep + (p.hi + P.ep) * edp[k] + 4.01 * u * u * std::abs(tk.hi) +
            kFloor;
      At += std::abs(tk.hi);
      AM += (p.hi + P.ep) * mg;
    }
    r.D = D;
    r.eD = (1.01 * eD + 3.02 * K * u * u * At) * kSafe;
    AM = 1.01 * avd * AM * kSafe;
    r.mD = (std::abs(D.hi) + r.eD + AM) * 1.01;
    // ds_j.
    for (std::size_t k = 0; k < nk; ++k) {
      Pair& P = r.pr[key[k]];
      const DD p{P.ph, P.pl};
      const DD diff = dd_add(dp[k], DD{-D.hi, -D.lo});
      const double ediff = (edp[k] + r.eD + 3.01 * u * u * std::abs(diff.hi)) * kSafe;
      const DD pd = dd_mul(p, diff);
      const double epd = (p.hi * ediff + std::abs(diff.hi) * P.ep + P.ep * ediff +
                          4.01 * u * u * std::abs(pd.hi) + kFloor) *
                         kSafe;
      DD ds = pd;
      double eds = epd, g = 1, eg = 0;
      if (c.softcap > 0) {
        const DD t = th[k].t;
        const double et = th[k].err;
        const DD tt = dd_mul(t, t);
        const DD gv = dd_add(DD{1, 0}, DD{-tt.hi, -tt.lo});
        eg = ((2 * std::abs(t.hi) + et) * et * 1.01 + 4.01 * u * u * std::abs(tt.hi) +
              3.01 * u * u * std::abs(gv.hi) + kFloor + 0x1p-250) *
             kSafe;
        g = std::abs(gv.hi);
        ds = dd_mul(pd, gv);
        eds =
            (std::abs(pd.hi) * eg + g * epd + epd * eg + 4.01 * u * u * std::abs(ds.hi) + kFloor) *
            kSafe;
      }
      P.dh = ds.hi, P.dl = ds.lo, P.ed = eds;
      P.md = 1.01 * (p.hi + P.ep) *
             (std::abs(dp[k].hi) + edp[k] + avd * mag[k] + std::abs(D.hi) + r.eD + AM) * (g + eg);
      if (!std::isfinite(P.md) || !std::isfinite(P.ed) || !std::isfinite(P.ep)) return;
    }
    if (ni == 1 && nk == 1 &&
        exact_single(
            go, c.v.data() + (c.row_k(b, static_cast<std::int64_t>(key[0])) * HK + hk) * dvv)) {
      // One live item (one visible key, no sink): p = 1 and ds = 0 exactly,
      // in MPFR too (exact_single).
      Pair& P = r.pr[key[0]];
      P = Pair{1, 0, 0, 0, 0, 0, 0};
    }
    r.ok = std::isfinite(r.eD) && std::isfinite(r.mD) && std::isfinite(r.eps);
  }

  // A row with one live item: p = e^0 / 1 = 1 exactly, in MPFR as well, so
  // D = sum_x dout_x (v_x vd) and dp = (sum_x dout_x v_x) vd are the same
  // real. MPFR computes both exactly when every partial sum fits its 256
  // bits: the products dout_x v_x (and dout_x (v_x vd), v_x vd exact) are
  // multiples of 2^(e_min) (e_min the least sum of the factors' ulp
  // exponents, floats: >= -149 each, and vd's) and their magnitudes sum to
  // A < 2^(e_min + 250) (A from double sums, rounded up by 1.01): then dp -
  // D is +-0 and ds = p (dp - D) g is +-0 exactly; its products with k and
  // q are +-0, which add nothing to sums that start at +0. True here too:
  // the fast level takes ds = 0 with a zero bound and p = 1 exactly.
  bool exact_single(const float* go, const float* v) const {
    auto ulp_exp = [](double f) { return std::max(std::ilogb(f) - 23, -149); };
    int emin = 1 << 20;
    double A = 0;
    for (std::int64_t x = 0; x < c_.dv; ++x) {
      const double pr = static_cast<double>(go[x]) * static_cast<double>(v[x]);
      if (pr == 0) continue;
      emin = std::min(emin, ulp_exp(go[x]) + ulp_exp(v[x]));
      A += std::abs(pr);
    }
    if (A == 0) return true;
    emin += ulp_exp(vd_) < 0 ? ulp_exp(vd_) : 0;
    return std::isfinite(A) && 1.01 * A * (std::abs(vd_) + 1) < std::ldexp(1.0, emin + 250);
  }

  // Running sums of terms X f, one per output x (the analysis above: Dot2).
  struct Acc {
    std::vector<double> S, sig, E, A;
    double K = 0;
    explicit Acc(std::int64_t n)
        : S(static_cast<std::size_t>(n), 0.0),
          sig(S.size(), 0.0),
          E(S.size(), 0.0),
          A(S.size(), 0.0) {}
    // Adds X f[x] to output x for every x; eX bounds X's error plus kMp
    // times its MPFR magnitude.
    void add(double Xh, double Xl, double eX, const float* f) {
      const std::size_t n = S.size();
      double* Sp = S.data();
      double* sg = sig.data();
      double* Ep = E.data();
      double* Ap = A.data();
      // Dekker's product with Xh split (Veltkamp) into ah + al, 26 + 27
      // bits, and fx a float (24 bits, its own split): ah fx and al fx are
      // exact, so pe = (ah fx - p) + al fx is Xh fx - p exactly (no fma:
      // the target has none in hardware by default).
      const double sp = 134217729.0 * Xh;
      const double ah = sp - (sp - Xh), al = Xh - ah;
      for (std::size_t x = 0; x < n; ++x) {
        const double fx = static_cast<double>(f[x]);
        const double p = Xh * fx;
        const double pe = (ah * fx - p) + al * fx;
        const double t = Sp[x] + p;
        const double bb = t - Sp[x];
        sg[x] += ((Sp[x] - (t - bb)) + (p - bb)) + pe + Xl * fx;
        Sp[x] = t;
        Ep[x] += bound_product(std::abs(fx), eX);  // rounded up: finish's A = E = 0 is exact
        Ap[x] += std::abs(p);
      }
      K += 1;
    }
  };

  // The rounding of F times output x's sum, NaN when not certified.
  double finish(const Acc& a, std::size_t x, const DD& F) const {
    const double A = a.A[x], E = a.E[x], K = a.K;
    if (A == 0 && E == 0) return fast::round_double(t_, 0.0 * F.hi);  // every term exactly 0
    const DD v = two_sum(a.S[x], a.sig[x]);
    const double pre = E + (1.02 * 3 * K * (K + 2) + 1.01) * u * u * A + kFloor * (K + 2);
    // First in double: oh = RN(v.hi F.hi) is within u |oh| + |v.lo| |F.hi|
    // + (|v.hi| + |v.lo|) |F.lo| of v F (1.01 for the bound's roundings).
    const double oh = v.hi * F.hi;
    const double aF = std::abs(F.hi) * (1 + 2 * u);
    const double eq =
        (aF * 1.01 * pre + 1.01 * (u * std::abs(oh) + std::abs(v.lo) * std::abs(F.hi) +
                                   (std::abs(v.hi) + std::abs(v.lo)) * std::abs(F.lo))) *
        kSafe;
    if (std::isfinite(eq) && std::isfinite(oh)) {
      const double e2 = eq + 2.01 * u * (std::abs(oh) + eq);
      if (fast::decided(t_, oh - e2, oh + e2)) return fast::round_double(t_, oh + e2);
    }
    const DD o = F.hi == 1 && F.lo == 0 ? v : dd_mul(v, F);
    const double err = (aF * 1.01 * pre + 4.01 * u * u * std::abs(o.hi)) * kSafe;
    if (!std::isfinite(err) || !std::isfinite(o.hi)) return kNaN;
    return round_checked(o, err);
  }

  // round_dd(t, o, err), first tried on the double interval [lo, hi] with
  // lo = RN(o.hi - E'), hi = RN(o.hi + E'), E' = E + 2.01u (|o.hi| + E), E
  // = err + |o.lo|: each RN moves by <= u (|o.hi| + E'), so [lo, hi] holds
  // [o - err, o + err]; when lo and hi round alike (fast::decided: bit for
  // bit, so a zero's sign too), every real between them does (rounding is
  // monotone) and that is the answer.
  double round_checked(const DD& o, double err) const {
    const double E = err + std::abs(o.lo);
    const double E2 = E + 2.01 * u * (std::abs(o.hi) + E);
    const double lo = o.hi - E2, hi = o.hi + E2;
    if (fast::decided(t_, lo, hi)) return fast::round_double(t_, hi);
    return fast::round_dd(t_, o, err);
  }

  // dq[rid][x] for every x: NaN entries go to MPFR.
  void dq(const std::vector<FastRow>& rows, std::int64_t rid, double* res) const {
    const AttentionCase& c = c_;
    const std::int64_t d = c.d, HK = c.heads_kv, qr = rid / c.heads_q;
    const std::int64_t b = L_.qb[qr], hk = c.kv_head(rid % c.heads_q);
    const FastRow& r = rows[rid];
    if (!r.ok) {
      for (std::int64_t x = 0; x < d; ++x) res[x] = kNaN;
      return;
    }
    Acc a(d);
    for (std::size_t j = 0; j < r.vis.size(); ++j) {
      if (!r.vis[j]) continue;
      const Pair& P = r.pr[j];
      a.add(P.dh, P.dl, P.ed + kMp * P.md,
            c.k.data() + (c.row_k(b, static_cast<std::int64_t>(j)) * HK + hk) * d);
    }
    for (std::int64_t x = 0; x < d; ++x) res[x] = finish(a, static_cast<std::size_t>(x), sc_);
  }

  // dk and dv of key unit kid.
  void dkv(const std::vector<FastRow>& rows, std::int64_t kid, double* rk, double* rv) const {
    const AttentionCase& c = c_;
    const std::int64_t d = c.d, dvv = c.dv, HQ = c.heads_q, HK = c.heads_kv;
    const std::int64_t krow = kid / HK, hk = kid % HK, b = L_.kb[krow], j = L_.kj[krow];
    Acc ak(d), av(dvv);
    bool ok = true;
    for (std::int64_t h = 0; h < HQ && ok; ++h) {
      if (c.kv_head(h) != hk) continue;
      for (std::int64_t i = 0; i < c.len_q(b); ++i) {
        const std::int64_t rid = c.row_q(b, i) * HQ + h;
        const FastRow& r = rows[rid];
        if (!r.ok) {
          ok = false;
          break;
        }
        if (!r.vis[j]) continue;
        const Pair& P = r.pr[j];
        ak.add(P.dh, P.dl, P.ed + kMp * P.md, qrow_of(c, rid));
        av.add(P.ph, P.pl, P.ep + kMp * (P.ph + P.ep), dout_.data() + rid * dvv);
      }
    }
    for (std::int64_t x = 0; x < d; ++x)
      rk[x] = ok ? finish(ak, static_cast<std::size_t>(x), sc_) : kNaN;
    for (std::int64_t x = 0; x < dvv; ++x)
      rv[x] = ok ? finish(av, static_cast<std::size_t>(x), DD{vd_, 0}) : kNaN;
  }

  // dsinks[h] = 0 - sum_i p_sink,i D_i.
  double dsink(const std::vector<FastRow>& rows, std::int64_t h) const {
    const AttentionCase& c = c_;
    DD s{0, 0};
    double E = 0, A = 0, Mg = 0, K = 0;
    for (std::int64_t qr = 0; qr < c.total_q(); ++qr) {
      const FastRow& r = rows[qr * c.heads_q + h];
      if (!r.ok) return kNaN;
      // A row without visible keys (the sink alone): D = 0 exactly, in MPFR
      // a sum of +-0 terms from +0, so its term is exactly +0: nothing.
      if (!r.live || (r.D.hi == 0 && r.eD == 0)) continue;
      const DD Tn = dd_mul(r.ps, r.D);
      const double eT = std::abs(r.D.hi) * r.eps + (r.ps.hi + r.eps) * r.eD +
                        4.01 * u * u * std::abs(Tn.hi) + kFloor;
      s = dd_add(s, DD{-Tn.hi, -Tn.lo});
      E += eT;
      A += std::abs(Tn.hi);
      Mg += (r.ps.hi + r.eps) * r.mD;
      K += 1;
    }
    if (K == 0) return fast::round_double(t_, 0.0);
    const double err = (1.01 * (E + 3.02 * K * u * u * A + kMp * Mg + kFloor * (K + 2))) * kSafe;
    if (!std::isfinite(err)) return kNaN;
    return fast::round_dd(t_, s, err);
  }

 private:
  template <class V>
  static bool finite(const V& v) {
    for (const auto& x : v)
      if (!std::isfinite(x)) return false;
    return true;
  }

  DType t_;
  const AttentionCase& c_;
  std::span<const float> dout_;
  const Layout& L_;
  Scorer scorer_;
  DD sc_{};
  double vd_ = 1;
  bool ok_ = false;
};

}  // namespace

AttentionGradients attention_backward_exact(const AttentionCase& c, std::span<const float> dout) {
  check(c, dout, "attention_backward_exact");
  const Layout L(c);
  const std::int64_t nrows = c.total_q() * c.heads_q, nkeys = c.total_k() * c.heads_kv;
  AttentionGradients g;
  g.dq.assign(static_cast<std::size_t>(nrows * c.d), 0.0);
  g.dk.assign(static_cast<std::size_t>(nkeys * c.d), 0.0);
  g.dv.assign(static_cast<std::size_t>(nkeys * c.dv), 0.0);
  g.dsinks.assign(c.sinks.size(), 0.0);
  g.out.assign(static_cast<std::size_t>(nrows * c.dv), 0.0);
  g.lse.assign(static_cast<std::size_t>(nrows), 0.0);
  const std::vector<unsigned char> fq(g.dq.size(), 1), fk(g.dk.size(), 1), fv(g.dv.size(), 1),
      fs(g.dsinks.size(), 1);
  mpfr_outputs(
      c, dout, L, fq, fk, fv, fs, g.dq, g.dk, g.dv, g.dsinks, omp_get_max_threads(),
      [](const Mp& x) { return x.convert_to<double>(); }, &g.out, &g.lse);
  return g;
}

AttentionBackwardRounded attention_backward_rounded(DType t, const AttentionCase& c,
                                                    std::span<const float> dout,
                                                    const CrOptions& o) {
  check(c, dout, "attention_backward_rounded");
  const Layout L(c);
  const std::int64_t HQ = c.heads_q, HK = c.heads_kv;
  const std::int64_t nrows = c.total_q() * HQ, nkeys = c.total_k() * HK;
  AttentionBackwardRounded res;
  res.dq.assign(static_cast<std::size_t>(nrows * c.d), 0.0);
  res.dk.assign(static_cast<std::size_t>(nkeys * c.d), 0.0);
  res.dv.assign(static_cast<std::size_t>(nkeys * c.dv), 0.0);
  res.dsinks.assign(c.sinks.size(), 0.0);
  std::vector<unsigned char> fq(res.dq.size(), 1), fk(res.dk.size(), 1), fv(res.dv.size(), 1),
      fs(res.dsinks.size(), 1);
  // Small cases on one thread (an OpenMP team costs more than their work).
  double work = 0;
  for (std::int64_t b = 0; b < c.batch; ++b)
    work += static_cast<double>(c.len_q(b)) * static_cast<double>(c.len_k(b));
  work *= static_cast<double>(HQ) * static_cast<double>(c.d + c.dv);
  const int nt = work < 0x1p14 ? 1 : (o.threads > 0 ? o.threads : omp_get_max_threads());
  const FastBackward fb(t, c, dout, L);
  if (o.path == RefPath::fast && fb.ok()) {
    std::vector<FastRow> rows(static_cast<std::size_t>(nrows));
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t rid = 0; rid < nrows; ++rid) fb.row(rid, rows[rid]);
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t rid = 0; rid < nrows; ++rid) fb.dq(rows, rid, res.dq.data() + rid * c.d);
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t kid = 0; kid < nkeys; ++kid)
        fb.dkv(rows, kid, res.dk.data() + kid * c.d, res.dv.data() + kid * c.dv);
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t h = 0; h < static_cast<std::int64_t>(res.dsinks.size()); ++h)
        res.dsinks[h] = fb.dsink(rows, h);
    }
    // NaN marks an output the fast level did not certify (inputs are finite
    // there, so no gradient is NaN).
    auto mark = [](const std::vector<double>& v, std::vector<unsigned char>& f) {
      for (std::size_t k = 0; k < v.size(); ++k) f[k] = std::isnan(v[k]) ? 1 : 0;
    };
    mark(res.dq, fq), mark(res.dk, fk), mark(res.dv, fv), mark(res.dsinks, fs);
  }
  std::int64_t nm = 0;
  for (const auto* f : {&fq, &fk, &fv, &fs})
    for (unsigned char x : *f) nm += x;
  if (nm > 0)
    mpfr_outputs(c, dout, L, fq, fk, fv, fs, res.dq, res.dk, res.dv, res.dsinks, nt,
                 [t](const Mp& x) { return round_to(t, x); });
  if (o.stats) {
    CrStats st;
    st.elements = static_cast<std::int64_t>(res.dq.size() + res.dk.size() + res.dv.size() +
                                            res.dsinks.size());
    st.mpfr = nm;
    st.level1 = st.elements - nm;
    *o.stats += st;
  }
  return res;
}

}  // namespace sa::ref
