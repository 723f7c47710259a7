#include "reference/attention_v2.hpp"

#include <cmath>
#include <limits>

#include "reference/mpfr.hpp"
#include "theory/adaptive_temperature.hpp"

namespace sa::ref {

bool visible_v2(const AttentionCase& c, std::int64_t b, std::int64_t i, std::int64_t j) {
  if (!c.key_padding_mask.empty() && c.key_padding_mask[c.row_k(b, j)] == 0) return false;
  const std::int64_t off = c.top_left ? 0 : c.len_k(b) - c.len_q(b);
  const std::int64_t diag = i + off;  // the key aligned with query i
  const std::int64_t right = c.causal ? 0 : c.window_right;
  if (right >= 0 && j > diag + right) return false;
  if (c.window_left >= 0 && j < diag - c.window_left) return false;
  return true;
}

namespace {

template <class T>
T to_real(double x) {
  return T(x);
}

template <class T>
double to_double(const T& x) {
  return static_cast<double>(x);
}

// One query row: kernel.h's steps 1-4, the sink, then softmax, lse, entropy,
// adaptive beta, out. `s` is scratch of len_k entries.
template <class T>
void one_row(const AttentionCase& c, std::int64_t b, std::int64_t h, std::int64_t i,
             std::vector<T>& s, std::vector<unsigned char>& vis, AttentionV2Values& r) {
  using std::exp;
  using std::log;
  using std::tanh;
  const std::int64_t Lk = c.len_k(b), Lq = c.len_q(b);
  const std::int64_t hk = c.kv_head(h);
  const std::int64_t qrow = c.row_q(b, i);
  const std::int64_t off = c.top_left ? 0 : Lk - Lq;
  const T scale = to_real<T>(c.scale) * to_real<T>(c.q_descale) * to_real<T>(c.k_descale);
  const T cap = to_real<T>(c.softcap);
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
  const std::size_t o = static_cast<std::size_t>(qrow * c.heads_q + h);
  double* out = r.out.data() + o * c.dv;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (any_nan) {
    for (std::int64_t x = 0; x < c.dv; ++x) out[x] = nan;
    r.lse[o] = r.entropy[o] = r.beta[o] = nan;
    return;
  }
  if (has_sink && sink > m) m = sink;
  if (m == -std::numeric_limits<T>::infinity()) {  // every key masked, no sink
    for (std::int64_t x = 0; x < c.dv; ++x) out[x] = 0;
    r.lse[o] = -std::numeric_limits<double>::infinity();
    r.entropy[o] = 0;
    r.beta[o] = 1;
    return;
  }
  // +inf scores (only reachable without softcap): the k keys at +inf share
  // the weight, as for the row operations.
  auto weights_and_lse = [&](const T& beta, std::vector<T>& w, T& lse, T& H) {
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
  std::vector<T> w(static_cast<std::size_t>(Lk));
  T lse, H;
  weights_and_lse(T(1), w, lse, H);
  T beta = 1;
  if (c.adaptive) {
    beta = theory::adaptive_beta(H);
    T H2;
    weights_and_lse(beta, w, lse, H2);
  }
  const T vd = to_real<T>(c.v_descale);
  for (std::int64_t x = 0; x < c.dv; ++x) {
    T acc = 0;
    for (std::int64_t j = 0; j < Lk; ++j) {
      if (!vis[j]) continue;  // masked values are never read
      acc += w[j] * T(c.v[(c.row_k(b, j) * c.heads_kv + hk) * c.dv + x]);
    }
    out[x] = to_double(acc * vd);
  }
  r.lse[o] = to_double(lse);
  r.entropy[o] = to_double(H);
  r.beta[o] = to_double(beta);
}

template <class T>
AttentionV2Values run(const AttentionCase& c) {
  c.validate();
  AttentionV2Values r;
  const auto rows = static_cast<std::size_t>(c.total_q() * c.heads_q);
  r.out.assign(rows * static_cast<std::size_t>(c.dv), 0.0);
  r.lse.assign(rows, 0.0);
  r.entropy.assign(rows, 0.0);
  r.beta.assign(rows, 1.0);
  std::int64_t max_k = 0;
  for (std::int64_t b = 0; b < c.batch; ++b) max_k = std::max(max_k, c.len_k(b));
  std::vector<T> s(static_cast<std::size_t>(max_k));
  std::vector<unsigned char> vis(static_cast<std::size_t>(max_k));
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t i = 0; i < c.len_q(b); ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h) one_row<T>(c, b, h, i, s, vis, r);
  return r;
}

}  // namespace

AttentionV2Values attention_v2(const AttentionCase& c) { return run<long double>(c); }

AttentionV2Values attention_v2_exact(const AttentionCase& c) {
  precision_bits();
  return run<Mp>(c);
}

}  // namespace sa::ref
