// One query row of the v2 attention reference (reference/attention_v2.hpp),
// shared by its two precisions (x87 long double, MPFR) and by the correctly
// rounded reference's MPFR level (reference/attention_cr.cpp): kernel.h's
// steps 1-4, the sink, then softmax, lse, entropy, adaptive beta, out, all in
// the real type T, with no rounding to double. Internal to sa_reference.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/attention_case.hpp"
#include "theory/adaptive_temperature.hpp"

namespace sa::ref {

bool visible_v2(const AttentionCase& c, std::int64_t b, std::int64_t i, std::int64_t j);

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
};

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
    vis[j] = visible_v2(c, b, i, j) ? 1 : 0;
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
  // the weight, as for the row operations.
  auto weights_and_lse = [&](const T& beta, T& lse, T& H) {
    const T mb = m == std::numeric_limits<T>::infinity() ? m : beta * m;
    T S = 0, TT = 0;  // sum e, sum e * (z - mb)
    if (mb == std::numeric_limits<T>::infinity()) {
      T cnt = 0;
      for (std::int64_t j = 0; j < Lk; ++j) w[j] = vis[j] && s[j] == m ? T(1) : T(0), cnt += w[j];
      if (has_sink && sink == m) cnt += 1;
      for (std::int64_t j = 0; j < Lk; ++j) w[j] /= cnt;
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
    if (has_sink) {
      const T z = beta * sink - mb;
      const T e = exp(z);
      S += e;
      TT += e * z;
    }
    for (std::int64_t j = 0; j < Lk; ++j) w[j] /= S;
    lse = mb + log(S);
    H = log(S) - TT / S;  // -sum p log p with log p = z - log S
  };
  T lse, H;
  weights_and_lse(T(1), lse, H);
  T beta = 1;
  if (c.adaptive) {
    beta = theory::adaptive_beta(H);
    T H2;
    weights_and_lse(beta, lse, H2);
  }
  const T vd = T(c.v_descale);
  for (std::int64_t x = 0; x < c.dv; ++x) {
    T acc = 0;
    for (std::int64_t j = 0; j < Lk; ++j) {
      if (!vis[j]) continue;  // masked values are never read
      acc += w[j] * T(c.v[(c.row_k(b, j) * c.heads_kv + hk) * c.dv + x]);
    }
    r.out[static_cast<std::size_t>(x)] = acc * vd;
  }
  r.lse = lse;
  r.entropy = H;
  r.beta = beta;
}

}  // namespace detail
}  // namespace sa::ref
