#include "reference/backward.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "reference/attention.hpp"
#include "reference/mpfr.hpp"
#include "reference/rounding.hpp"
#include "reference/row_backward_fast.hpp"

namespace sa::ref {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void check_row(std::span<const float> y, std::span<const float> dy, double theta,
               const char* what) {
  if (y.empty() || y.size() != dy.size())
    throw std::invalid_argument(std::string(what) + ": y and dy need the same length >= 1 (got " +
                                std::to_string(y.size()) + " and " + std::to_string(dy.size()) +
                                ")");
  if (!(theta > 0) || !std::isfinite(theta))
    throw std::invalid_argument(std::string(what) + ": theta must be finite and > 0");
}

bool any_nan(std::span<const float> a, std::span<const float> b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::isnan(a[i]) || std::isnan(b[i])) return true;
  return false;
}

RowGradient nan_row(std::size_t n) {
  return {std::vector<double>(n, kNaN), std::vector<double>(n, kNaN)};
}

}  // namespace

RowGradient softmax_backward(DType t, std::span<const float> y, std::span<const float> dy,
                             double theta, RefPath path) {
  check_row(y, dy, theta, "softmax_backward reference");
  const std::size_t n = y.size();
  if (any_nan(y, dy)) return nan_row(n);
  if (RowGradient fast;
      path == RefPath::fast && detail::softmax_backward_fast(t, y, dy, theta, fast))
    return fast;
  PrecisionScope prec(1024);
  Mp S = 0;
  for (std::size_t i = 0; i < n; ++i) S += Mp(y[i]) * Mp(dy[i]);  // exact (see the header)
  const Mp th(theta);
  RowGradient r;
  r.exact.resize(n);
  r.rounded.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Mp dx = Mp(y[i]) * (Mp(dy[i]) - S) / th;
    r.exact[i] = dx.convert_to<double>();
    r.rounded[i] = round_to(t, dx);
  }
  return r;
}

RowGradient log_softmax_backward(DType t, std::span<const float> y, std::span<const float> dy,
                                 double theta, RefPath path) {
  check_row(y, dy, theta, "log_softmax_backward reference");
  const std::size_t n = y.size();
  if (any_nan(y, dy)) return nan_row(n);
  if (RowGradient fast;
      path == RefPath::fast && detail::log_softmax_backward_fast(t, y, dy, theta, fast))
    return fast;
  RowGradient r;
  r.exact.resize(n);
  r.rounded.resize(n);
  // Each element at 256 bits, and again at 1024 and 4096 bits while its
  // rounding is not certified. S = sum dy and A = sum |dy| once per precision
  // (not once per element: the row is O(n), not O(n^2), in MPFR operations).
  std::vector<char> certified(n, 0);
  for (unsigned bits : {256u, 1024u, 4096u}) {
    PrecisionScope prec(bits);
    Mp S = 0, A = 0;
    for (std::size_t j = 0; j < n; ++j) S += Mp(dy[j]), A += abs(Mp(dy[j]));  // exact at >= 256
    bool all = true;
    for (std::size_t i = 0; i < n; ++i) {
      if (certified[i]) continue;
      const Mp e = y[i] == 0.0f ? Mp(1) : exp(Mp(y[i]));
      const Mp dx = (Mp(dy[i]) - e * S) / Mp(theta);
      // Error: exp's and the product's relative 2^-(bits-4) of e |S| <= e A, plus the
      // subtraction's and the division's relative 2^-(bits-2) of |dx|.
      const Mp err = y[i] == 0.0f && theta == 1.0
                         ? Mp(0)
                         : ldexp(e * A / Mp(theta) + abs(dx), 8 - static_cast<int>(bits));
      const double lo = round_to(t, dx - err), hi = round_to(t, dx + err);
      r.exact[i] = dx.convert_to<double>();
      r.rounded[i] = round_to(t, dx);
      if (lo == hi || (std::isnan(lo) && std::isnan(hi)))
        certified[i] = 1;
      else
        all = false;
    }
    if (all) break;
  }
  return r;
}

DirectionalDerivative softmax_directional_derivative(std::span<const float> x,
                                                     std::span<const float> dy,
                                                     std::span<const double> v, double theta,
                                                     bool log_softmax, RefPath path) {
  if (x.size() != dy.size() || x.size() != v.size() || x.empty())
    throw std::invalid_argument("softmax_directional_derivative: x, dy, v need one length >= 1");
  DirectionalDerivative out;
  if (path == RefPath::fast &&
      detail::directional_derivative_fast(x, dy, v, theta, log_softmax, out))
    return out;
  // The terms' magnitude: every term of the derivative is at most
  // |dy_i| (|v_i| + max |v|) / theta.
  double sdy = 0, sv = 0;
  for (std::size_t i = 0; i < x.size(); ++i) sdy += std::abs(double(dy[i])), sv += std::abs(v[i]);
  out.error = 0x1p-140 * (1 + sdy) * (1 + 2 * sv / theta);
  PrecisionScope prec(320);
  const Mp e = ldexp(Mp(1), -90);
  auto L = [&](const Mp& eps) {
    std::vector<Mp> z(x.size());
    Mp m = -std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < x.size(); ++i) {
      z[i] = (Mp(x[i]) + eps * Mp(v[i])) / Mp(theta);
      if (z[i] > m) m = z[i];
    }
    Mp S = 0;
    for (const Mp& zi : z) S += exp(zi - m);
    const Mp lse = m + log(S);
    Mp acc = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      // A masked item (x = -inf) has weight 0 and log-softmax -inf - lse: its
      // term's finite part, -dy_i lse, still moves with x (kernel.h's sum dy
      // counts every item).
      if (std::isinf(x[i]) && x[i] < 0) {
        if (log_softmax) acc -= Mp(dy[i]) * lse;
        continue;
      }
      acc += Mp(dy[i]) * (log_softmax ? z[i] - lse : exp(z[i] - lse));
    }
    return acc;
  };
  out.value = ((L(e) - L(-e)) / (2 * e)).convert_to<double>();
  out.error += 0x1p-53 * std::abs(out.value);  // the rounding to double
  return out;
}

AttentionGradients attention_backward(const AttentionCase& c, std::span<const float> dout) {
  using T = long double;
  c.validate();
  if (c.adaptive)
    throw std::invalid_argument(
        "attention_backward reference: adaptive attention has no backward (kernel.h)");
  const std::int64_t HQ = c.heads_q, HK = c.heads_kv, d = c.d, dvv = c.dv;
  if (static_cast<std::int64_t>(dout.size()) != c.total_q() * HQ * dvv)
    throw std::invalid_argument("attention_backward reference: dout has " +
                                std::to_string(dout.size()) + " values, expected " +
                                std::to_string(c.total_q() * HQ * dvv));
  AttentionGradients g;
  std::vector<T> dq(static_cast<std::size_t>(c.total_q() * HQ * d), 0),
      dk(static_cast<std::size_t>(c.total_k() * HK * d), 0),
      dv(static_cast<std::size_t>(c.total_k() * HK * dvv), 0), dsink(c.sinks.size(), 0);
  g.out.assign(static_cast<std::size_t>(c.total_q() * HQ * dvv), 0.0);
  g.lse.assign(static_cast<std::size_t>(c.total_q() * HQ), 0.0);
  const T scale = T(c.scale) * T(c.q_descale) * T(c.k_descale);
  const T cap = T(c.softcap);
  const T inf = std::numeric_limits<T>::infinity();
  std::vector<T> s, grad_cap, p, o(static_cast<std::size_t>(dvv));
  std::vector<unsigned char> vis;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t Lq = c.len_q(b), Lk = c.len_k(b);
    const std::int64_t off = c.top_left ? 0 : Lk - Lq;
    s.assign(static_cast<std::size_t>(Lk), 0);
    grad_cap.assign(s.size(), 1);
    p.assign(s.size(), 0);
    vis.assign(s.size(), 0);
    for (std::int64_t h = 0; h < HQ; ++h) {
      const std::int64_t hk = c.kv_head(h);
      for (std::int64_t i = 0; i < Lq; ++i) {
        const std::int64_t qrow = c.row_q(b, i);
        const float* q = c.q.data() + (qrow * HQ + h) * d;
        const float* go = dout.data() + (qrow * HQ + h) * dvv;
        bool nan = false;
        T m = -inf;
        for (std::int64_t j = 0; j < Lk; ++j) {
          vis[j] = key_visible(c, b, i, j) ? 1 : 0;
          if (!vis[j]) continue;
          const float* k = c.k.data() + (c.row_k(b, j) * HK + hk) * d;
          T dot = 0;
          for (std::int64_t x = 0; x < d; ++x) dot += T(q[x]) * T(k[x]);
          T v = scale * dot;
          grad_cap[j] = 1;
          if (c.softcap > 0) {
            // 1 / cosh^2, not 1 - th^2: relative accuracy once tanh saturates.
            const T y = v / cap, ch = std::cosh(y);
            v = cap * std::tanh(y);
            grad_cap[j] = 1 / (ch * ch);
          }
          if (!c.alibi_slopes.empty()) {
            const std::int64_t dist = i + off - j;
            v -= T(c.alibi_slopes[h]) * T(dist < 0 ? -dist : dist);
          }
          s[j] = v;
          if (v != v) nan = true;
          if (v > m) m = v;
        }
        const bool has_sink = !c.sinks.empty();
        const T sink = has_sink ? T(c.sinks[h]) : -inf;
        if (has_sink && sink > m) m = sink;
        const std::size_t row = static_cast<std::size_t>(qrow * HQ + h);
        if (nan || (has_sink && sink != sink)) {
          // NaN in the row's inputs: every gradient it touches is NaN.
          for (std::int64_t x = 0; x < d; ++x) dq[row * d + x] = NAN;
          for (std::int64_t j = 0; j < Lk; ++j) {
            if (!vis[j]) continue;
            const std::size_t kr = static_cast<std::size_t>(c.row_k(b, j) * HK + hk);
            for (std::int64_t x = 0; x < d; ++x) dk[kr * d + x] = NAN;
            for (std::int64_t x = 0; x < dvv; ++x) dv[kr * dvv + x] = NAN;
          }
          if (has_sink) dsink[h] = NAN;
          g.lse[row] = NAN;
          for (std::int64_t x = 0; x < dvv; ++x) g.out[row * dvv + x] = NAN;
          continue;
        }
        if (m == -inf) {  // fully masked, no sink: out 0, no gradient
          g.lse[row] = -INFINITY;
          continue;
        }
        T S = 0;
        for (std::int64_t j = 0; j < Lk; ++j)
          if (vis[j]) S += std::exp(s[j] - m);
        const T p_sink = has_sink ? std::exp(sink - m) : T(0);
        S += p_sink;
        for (std::int64_t j = 0; j < Lk; ++j) p[j] = vis[j] ? std::exp(s[j] - m) / S : T(0);
        g.lse[row] = static_cast<double>(m + std::log(S));
        T D = 0;
        for (std::int64_t x = 0; x < dvv; ++x) {
          T acc = 0;
          for (std::int64_t j = 0; j < Lk; ++j)
            if (vis[j]) acc += p[j] * T(c.v[(c.row_k(b, j) * HK + hk) * dvv + x]);
          o[x] = acc;
          g.out[row * dvv + x] = static_cast<double>(acc * T(c.v_descale));
          D += T(go[x]) * acc * T(c.v_descale);
        }
        if (has_sink) dsink[h] -= p_sink / S * D;
        for (std::int64_t j = 0; j < Lk; ++j) {
          if (!vis[j]) continue;
          const std::size_t kr = static_cast<std::size_t>(c.row_k(b, j) * HK + hk);
          const float* vj = c.v.data() + kr * dvv;
          const float* kj = c.k.data() + kr * d;
          T dp = 0;
          for (std::int64_t x = 0; x < dvv; ++x) {
            dp += T(go[x]) * T(vj[x]) * T(c.v_descale);
            dv[kr * dvv + x] += p[j] * T(go[x]) * T(c.v_descale);
          }
          const T ds = p[j] * (dp - D) * grad_cap[j];
          for (std::int64_t x = 0; x < d; ++x) {
            dq[row * d + x] += scale * ds * T(kj[x]);
            dk[kr * d + x] += scale * ds * T(q[x]);
          }
        }
      }
    }
  }
  auto to_d = [](const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); };
  g.dq = to_d(dq);
  g.dk = to_d(dk);
  g.dv = to_d(dv);
  g.dsinks = to_d(dsink);
  return g;
}

}  // namespace sa::ref
