// One query row of the v2 attention reference (reference/attention.hpp),
// shared by its two precisions (x87 long double, MPFR) and by the correctly
// rounded reference's MPFR level (reference/attention_cr.cpp): kernel.h's
// steps 1-4, the sink, then softmax, lse, entropy, adaptive beta, out, all in
// the real type T, with no rounding to double. Internal to sa_reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/attention_case.hpp"
#include "theory/adaptive_temperature.hpp"

namespace sa::ref {

bool key_visible(const AttentionCase& c, std::int64_t b, std::int64_t h, std::int64_t i,
                 std::int64_t j);
float score_bias(const AttentionCase& c, std::int64_t b, std::int64_t h, std::int64_t i,
                 std::int64_t j);

namespace detail {

// The outputs of one query row in T: out (dv values), lse, entropy, beta.
template <class T>
struct RowValuesT {
  std::vector<T> out;
  T lse{}, entropy{}, beta{};
};

// Scratch for attention_row: scores and visibility of len_k entries.
template <class T>
struct RowScratch {
  std::vector<T> s, w;
  std::vector<unsigned char> vis;
  std::vector<std::int64_t> order;  // live keys by decreasing weight (the out sums)
};

// The working precision (bits) row (b, i, h) needs so that its softcap
// scores keep their distances when tanh saturates: c tanh(y) = c (1 - tau)
// with tau = 2 / (e^(2|y|) + 1) < 2 e^(-2|y|), so distinct saturated scores
// differ by less than 2^(-2.885 |y| + 1) c, and a precision of `base` bits
// holds that difference to 2^-base relative only with about 2|y| log2(e)
// bits more. Returns base when every visible |y| = |x / c| is at most 64 (or
// there is no softcap), else base + 64 + ceil(2 log2(e) max |y|), at most
// 2^20 (reference/mpfr.cpp's limit: scores beyond |y| ~ 3.6e5 are then not
// fully resolved). x is estimated in double, which is ample for a count of
// bits.
inline unsigned row_precision_bits(const AttentionCase& c, std::int64_t b, std::int64_t h,
                                   std::int64_t i, unsigned base) {
  if (!(c.softcap > 0)) return base;
  const float* q = c.q.data() + (c.row_q(b, i) * c.heads_q + h) * c.d;
  const double sc = static_cast<double>(c.scale) * c.q_descale * c.k_descale / c.softcap;
  double ymax = 0;
  for (std::int64_t j = 0; j < c.len_k(b); ++j) {
    if (!key_visible(c, b, h, i, j)) continue;
    const float* k = c.k.data() + (c.row_k(b, j) * c.heads_kv + c.kv_head(h)) * c.d;
    double dot = 0;
    for (std::int64_t x = 0; x < c.d; ++x) dot += static_cast<double>(q[x]) * k[x];
    const double y = std::abs(sc * dot);
    if (y > ymax) ymax = y;  // NaN skipped
  }
  if (!(ymax > 64)) return base;
  const double bits = static_cast<double>(base) + 64 + std::ceil(2.8853900817779268 * ymax);
  return bits >= 0x1p20 ? 1u << 20 : static_cast<unsigned>(bits);
}

// Query i of sequence b, query head h: kernel.h's steps 1-4, the sink, then
// softmax, lse, entropy, adaptive beta, out. r.out gets dv values.
template <class T>
void attention_row(const AttentionCase& c, std::int64_t b, std::int64_t h, std::int64_t i,
                   RowScratch<T>& sc, RowValuesT<T>& r) {
  using std::exp;
  using std::log;
  using std::tanh;
  const std::int64_t Lk = c.len_k(b), Lq = c.len_q(b);
  const std::int64_t hk = c.kv_head(h);
  const std::int64_t qrow = c.row_q(b, i);
  const std::int64_t off = c.top_left ? 0 : Lk - Lq;
  const auto n = static_cast<std::size_t>(Lk);
  if (sc.s.size() < n) sc.s.resize(n), sc.vis.resize(n), sc.w.resize(n);
  auto& s = sc.s;
  auto& vis = sc.vis;
  auto& w = sc.w;
  r.out.assign(static_cast<std::size_t>(c.dv), T(0));
  const T scale = T(c.scale) * T(c.q_descale) * T(c.k_descale);
  const T cap = T(c.softcap);
  const float* q = c.q.data() + (qrow * c.heads_q + h) * c.d;
  bool any_nan = false;
  T m = -std::numeric_limits<T>::infinity();
  for (std::int64_t j = 0; j < Lk; ++j) {
    vis[j] = key_visible(c, b, h, i, j) ? 1 : 0;
    if (!vis[j]) continue;
    const float* k = c.k.data() + (c.row_k(b, j) * c.heads_kv + hk) * c.d;
    T dot = 0;
    for (std::int64_t x = 0; x < c.d; ++x) dot += T(q[x]) * T(k[x]);
    T v = scale * dot;
    if (c.softcap > 0) v = cap * tanh(v / cap);
    if (!c.alibi_slopes.empty()) {
      const std::int64_t dist = i + off - j;
      v -= T(c.alibi_slopes[h]) * T(static_cast<double>(dist < 0 ? -dist : dist));
    }
    if (c.attn_bias.used()) v += T(score_bias(c, b, h, i, j));
    s[j] = v;
    if (v != v) any_nan = true;
    if (v > m) m = v;
  }
  const bool has_sink = !c.sinks.empty();
  const T sink = has_sink ? T(c.sinks[h]) : T(0);
  if (has_sink && sink != sink) any_nan = true;
  if (any_nan) {
    const T nan = T(std::numeric_limits<double>::quiet_NaN());
    for (auto& x : r.out) x = nan;
    r.lse = r.entropy = r.beta = nan;
    return;
  }
  if (has_sink && sink > m) m = sink;
  if (m == -std::numeric_limits<T>::infinity()) {  // every key masked, no sink
    r.lse = -std::numeric_limits<T>::infinity();
    r.entropy = 0;
    r.beta = 1;
    return;
  }
  // +inf scores (only reachable without softcap): the k keys at +inf share
  // the weight, as for the row operations. w gets the unnormalised weights
  // e_j; S their sum with the sink's, Sk without it.
  auto weights_and_lse = [&](const T& beta, T& lse, T& H, T& S, T& Sk) {
    const T mb = m == std::numeric_limits<T>::infinity() ? m : beta * m;
    S = 0;
    T TT = 0;  // sum e * (z - mb)
    if (mb == std::numeric_limits<T>::infinity()) {
      T cnt = 0;
      for (std::int64_t j = 0; j < Lk; ++j) w[j] = vis[j] && s[j] == m ? T(1) : T(0), cnt += w[j];
      Sk = cnt;
      if (has_sink && sink == m) cnt += 1;
      S = cnt;
      lse = mb;
      H = log(cnt);
      return;
    }
    for (std::int64_t j = 0; j < Lk; ++j) {
      if (!vis[j] || s[j] == -std::numeric_limits<T>::infinity()) {
        w[j] = 0;
        continue;
      }
      const T z = beta * s[j] - mb;
      w[j] = exp(z);
      S += w[j];
      TT += w[j] * z;
    }
    Sk = S;
    if (has_sink) {
      const T z = beta * sink - mb;
      const T e = exp(z);
      S += e;
      TT += e * z;
    }
    lse = mb + log(S);
    H = log(S) - TT / S;  // -sum p log p with log p = z - log S
  };
  T lse, H, S, Sk;
  weights_and_lse(T(1), lse, H, S, Sk);
  T beta = 1;
  if (c.adaptive) {
    beta = theory::adaptive_beta(H);
    T H2;
    weights_and_lse(beta, lse, H2, S, Sk);
  }
  // out = vd N / S with N = sum_j e_j v_j, divided once. For finite values:
  //  - every live key holds the same v: N / S = v Sk / S, so out is vd v
  //    exactly without a sink (Sk = S) or vd v Sk / S rounded once: an exact
  //    result on a rounding midpoint of the target is computed exactly (the
  //    sum of rounded weights p_j v_j would leave it to the last bits of the
  //    working precision);
  //  - else the live keys are taken in groups of equal weight e (equal
  //    scores) and each group's values summed first, which is exact: N is
  //    then exactly 0 when every group's values cancel, which for rational
  //    scores is exactly when the real N is 0 (exponentials of distinct
  //    rationals are linearly independent over the rationals,
  //    Lindemann-Weierstrass), and out is +0 vd rather than the sign of the
  //    working precision's rounding noise.
  // Values all +-0: +0 vd (the sum starts at +0). A non-finite value: the
  // plain sum of p_j v_j, whose IEEE special cases the header's formula has.
  const T vd = T(c.v_descale);
  auto& order = sc.order;  // live keys by decreasing weight, then index
  order.clear();
  for (std::int64_t j = 0; j < Lk; ++j)
    if (vis[j] && w[j] > 0) order.push_back(j);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b2) { return w[a] > w[b2]; });
  auto vval = [&](std::int64_t j, std::int64_t x) {
    return T(c.v[(c.row_k(b, j) * c.heads_kv + hk) * c.dv + x]);
  };
  for (std::int64_t x = 0; x < c.dv; ++x) {
    bool finite = true, all_zero = true;
    for (std::int64_t j = 0; j < Lk; ++j) {
      if (!vis[j]) continue;  // masked values are never read
      const float vx = c.v[(c.row_k(b, j) * c.heads_kv + hk) * c.dv + x];
      finite = finite && std::isfinite(vx);
      all_zero = all_zero && vx == 0;
    }
    T o;
    if (!finite || order.empty()) {
      T acc = 0;
      for (std::int64_t j = 0; j < Lk; ++j)
        if (vis[j]) acc += (w[j] / S) * vval(j, x);
      o = acc * vd;
    } else if (all_zero) {
      o = T(0) * vd;
    } else {
      const T vr = vval(order[0], x);
      bool same_v = true;
      for (std::int64_t j : order) same_v = same_v && vval(j, x) == vr;
      if (same_v) {
        o = Sk == S ? T(vd * vr) : T(vd * vr * Sk / S);
      } else {
        T N = 0;
        for (std::size_t g = 0; g < order.size();) {
          const T& e = w[order[g]];
          T V = 0;
          std::size_t h = g;
          for (; h < order.size() && w[order[h]] == e; ++h) V += vval(order[h], x);
          if (V != 0) N += e * V;
          g = h;
        }
        o = N == 0 ? T(T(0) * vd) : T(vd * N / S);
      }
    }
    r.out[static_cast<std::size_t>(x)] = o;
  }
  r.lse = lse;
  r.entropy = H;
  r.beta = beta;
}

}  // namespace detail
}  // namespace sa::ref
