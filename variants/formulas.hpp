// The variants' formulas, written once as templates over the real type:
// instantiated for float (the float32 kernels under test), double (the
// dispersion sweep to n = 2^20) and sa::ref::Mp (the MPFR reference).
//
// Every function maps one row z[0..n) to weights p[0..n) and follows the
// special-value semantics of include/softmax_audit/variant.h:
//   NaN anywhere -> every weight NaN; -inf is a mask (weight 0, others as if the
//   item were absent; "n" of length-dependent variants counts unmasked items);
//   all -inf -> all zeros; +inf -> the limit as those logits grow (for the
//   normalised variants the +inf items share the mass evenly).
// Two exceptions are deliberate, because the published formula says so and
// the fuzzer should show it: softpick's denominator counts |exp(-inf) - 1| = 1
// for a masked item, and ReLU attention's +inf limit is +inf.
//
// Accuracy: each function is the straightforward stable evaluation; its
// float32 rounding-error bound is stated next to its registration
// (builtins.cpp). In Mp (256 bits) every result is exact to ~2^-240.
#pragma once

#include "core/host_device.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>
#include <span>
#include <vector>

#include "theory/adaptive_temperature.hpp"

namespace sa::variants::formulas {

template <class R>
R inf_of() {
  return R(std::numeric_limits<double>::infinity());
}
template <class R>
R nan_of() {
  return R(std::numeric_limits<double>::quiet_NaN());
}
template <class R>
bool is_nan(const R& x) {
  return !(x == x);
}
template <class R>
bool is_pinf(const R& x) {
  return x == inf_of<R>();
}
template <class R>
bool is_minf(const R& x) {
  return x == -inf_of<R>();
}

template <class R>
R r_log1p(const R& x) {
  using std::log1p;
  return log1p(x);
}
template <class R>
R r_expm1(const R& x) {
  using std::expm1;
  return expm1(x);
}
template <class R>
R r_sqrt(const R& x) {
  using std::sqrt;
  return sqrt(x);
}

template <class R>
struct RowInfo {
  bool nan = false;
  std::size_t live = 0;  // not -inf (includes +inf)
  std::size_t pinf = 0;  // +inf count
  R max_finite = -inf_of<R>();
};

template <class R>
RowInfo<R> inspect(std::span<const R> z) {
  RowInfo<R> r;
  for (const R& x : z) {
    if (is_nan(x)) {
      r.nan = true;
      continue;
    }
    if (is_minf(x)) continue;
    ++r.live;
    if (is_pinf(x)) {
      ++r.pinf;
      continue;
    }
    if (x > r.max_finite) r.max_finite = x;
  }
  return r;
}

// Handles NaN, fully masked and (when share_pinf) +inf rows; returns true when
// the row is finished.
template <class R>
bool special_row(std::span<const R> z, std::span<R> p, const RowInfo<R>& info, bool share_pinf) {
  if (info.nan) {
    std::fill(p.begin(), p.end(), nan_of<R>());
    return true;
  }
  if (info.live == 0) {
    std::fill(p.begin(), p.end(), R(0));
    return true;
  }
  if (share_pinf && info.pinf > 0) {
    const R share = R(1) / R(static_cast<double>(info.pinf));
    for (std::size_t i = 0; i < z.size(); ++i) p[i] = is_pinf(z[i]) ? share : R(0);
    return true;
  }
  return false;
}

// Shifted softmax of z (already scaled): exp(z_i - max) / sum. Theory T7.
template <class R>
void softmax(std::span<const R> z, std::span<R> p) {
  const RowInfo<R> info = inspect(z);
  if (special_row(z, p, info, true)) return;
  R sum(0);
  for (std::size_t i = 0; i < z.size(); ++i) {
    p[i] = is_minf(z[i]) ? R(0) : hd::exp(R(z[i] - info.max_finite));
    sum += p[i];
  }
  for (auto& x : p) x /= sum;
}

// softmax(z / theta).
template <class R>
void softmax_temperature(std::span<const R> z, std::span<R> p, const R& theta) {
  std::vector<R> s(z.begin(), z.end());
  for (auto& x : s) x /= theta;
  softmax<R>(s, p);
}

// docs/theory.md T5 with the paper's entropy -sum p log(p + 1e-9).
template <class R>
void adaptive(std::span<const R> z, std::span<R> p, R* beta_out = nullptr) {
  softmax<R>(z, p);
  const RowInfo<R> info = inspect(z);
  if (info.nan || info.live == 0) return;
  const R eps = R(1) / R(1000000000);
  R H(0);
  for (const R& q : p) H -= q * hd::log(R(q + eps));
  const R beta = sa::theory::adaptive_beta<R>(H);
  if (beta_out) *beta_out = beta;
  std::vector<R> s(z.begin(), z.end());
  for (auto& x : s)
    if (!is_minf(x) && !is_pinf(x)) x *= beta;
  softmax<R>(s, p);
}

// SSMax: softmax((s log n) z), n = unmasked items (Nakanishi 2025).
template <class R>
void ssmax(std::span<const R> z, std::span<R> p, const R& s) {
  const RowInfo<R> info = inspect(z);
  if (special_row(z, p, info, true)) return;
  if (info.live == 1) {  // log 1 = 0: the one live item has weight 1 (0 * z would be NaN-prone)
    for (std::size_t i = 0; i < z.size(); ++i) p[i] = is_minf(z[i]) ? R(0) : R(1);
    return;
  }
  const R c = s * hd::log(R(static_cast<double>(info.live)));
  std::vector<R> w(z.begin(), z.end());
  for (auto& x : w)
    if (!is_minf(x)) x *= c;
  softmax<R>(w, p);
}

// The WRONG statement of SSMax found in write-ups: exp(z_i - s log n) / sum,
// which is softmax(z) (a constant shift cancels).
template <class R>
void ssmax_wrong_shift(std::span<const R> z, std::span<R> p, const R& s) {
  const RowInfo<R> info = inspect(z);
  if (special_row(z, p, info, true)) return;
  const R c = s * hd::log(R(static_cast<double>(info.live)));
  std::vector<R> w(z.begin(), z.end());
  for (auto& x : w)
    if (!is_minf(x)) x -= c;
  softmax<R>(w, p);
}

// Softmax with a sink logit b (gpt-oss's learnable per-head sink):
// exp(z_i) / (exp(b) + sum exp(z_j)), shifted by m = max(b, max z).
template <class R>
void softmax_sink(std::span<const R> z, std::span<R> p, const R& b) {
  const RowInfo<R> info = inspect(z);
  if (special_row(z, p, info, true)) return;
  const R m = info.max_finite > b ? info.max_finite : b;
  R sum = hd::exp(R(b - m));
  for (std::size_t i = 0; i < z.size(); ++i) {
    p[i] = is_minf(z[i]) ? R(0) : hd::exp(R(z[i] - m));
    sum += p[i];
  }
  for (auto& x : p) x /= sum;
}

// Softmax-plus-one: exp(z_i) / (1 + sum exp(z_j)), with m = max(0, max z):
// the sink with b = 0.
template <class R>
void softmax_plus_one(std::span<const R> z, std::span<R> p) {
  softmax_sink<R>(z, p, R(0));
}

// softmax(c z): c > 0 a row-level scale (a temperature depending on the row
// length or on the query position); masks and +inf stay as they are.
template <class R>
void softmax_scaled(std::span<const R> z, std::span<R> p, const R& c) {
  std::vector<R> w(z.begin(), z.end());
  for (auto& x : w)
    if (!is_minf(x) && !is_pinf(x) && !is_nan(x)) x *= c;
  softmax<R>(w, p);
}

// Qwen's log-n attention scaling: beta = max(1, log_L n) = max(1, ln n / ln L),
// n = the query position (here: the unmasked items of the row).
template <class R>
R qwen_logn_beta(std::size_t n, double L) {
  if (n <= 1) return R(1);
  const R b = hd::log(R(static_cast<double>(n))) / hd::log(R(L));
  return b > R(1) ? b : R(1);
}

// Llama 4's attention temperature tuning, a step function of the position:
// beta = 1 + a ln(floor(n / F) + 1).
template <class R>
R llama4_beta(std::size_t n, double F, double a) {
  const double steps = std::floor(static_cast<double>(n) / F);
  return R(1) + R(a) * hd::log(R(steps + 1.0));
}

// StableMax (Prieto et al. 2025): s(x) = x + 1 (x >= 0), 1 / (1 - x) (x < 0),
// p_i = s(z_i) / sum s(z_j). s(-inf) = 0 masks; +inf items share the mass.
template <class R>
R stablemax_s(const R& x) {
  return x >= R(0) ? R(x + R(1)) : R(R(1) / R(R(1) - x));
}
template <class R>
void stablemax(std::span<const R> z, std::span<R> p) {
  const RowInfo<R> info = inspect(z);
  if (special_row(z, p, info, true)) return;
  R sum(0);
  for (std::size_t i = 0; i < z.size(); ++i) {
    p[i] = is_minf(z[i]) ? R(0) : stablemax_s(z[i]);
    sum += p[i];
  }
  for (auto& x : p) x /= sum;
}

// SA-Softmax (self-adjusting softmax, 2025): z_i softmax(z)_i. A masked item
// weighs 0; a +inf item's limit is +inf.
template <class R>
void sa_softmax(std::span<const R> z, std::span<R> p) {
  const RowInfo<R> info = inspect(z);
  softmax<R>(z, p);
  if (info.nan) return;
  for (std::size_t i = 0; i < z.size(); ++i) {
    if (is_minf(z[i]))
      p[i] = R(0);
    else if (is_pinf(z[i]))
      p[i] = inf_of<R>();
    else
      p[i] = z[i] * p[i];
  }
}

// Normalised SA-Softmax (Zheng et al. 2025, the abstract's "normalized
// variant"): w_i = (z_i - a) / (b - a) * softmax(z)_i with a = min(min z, 0),
// b = max(0, max z) over the unmasked items. The factor lies in [0, 1]; b - a
// is 0 only on a row whose unmasked logits are all 0, where this project
// CHOOSES w = 0 (the paper's handling of that 0/0 is not established; 0 is the
// limit of any (b - a + eps) regularisation). +inf items: factor 1, they
// share the mass; the rest 0.
template <class R>
void sa_softmax_norm(std::span<const R> z, std::span<R> p) {
  const RowInfo<R> info = inspect(z);
  softmax<R>(z, p);
  if (info.nan || info.live == 0 || info.pinf > 0) return;
  R lo = inf_of<R>();
  for (const R& x : z)
    if (!is_minf(x) && x < lo) lo = x;
  const R a = lo < R(0) ? lo : R(0);
  const R b = info.max_finite > R(0) ? info.max_finite : R(0);
  const R d = b - a;
  for (std::size_t i = 0; i < z.size(); ++i)
    p[i] = (d == R(0) || is_minf(z[i])) ? R(0) : R((z[i] - a) / d) * p[i];
}

// Power normalisation with tau = 2: r_i^2 / (sum r_j^2)^beta, r = relu(z),
// beta in {1, 1/2}; evaluated as M^{2(1-beta)} q_i / (sum q)^beta with
// q_i = (r_i / M)^2, M = max r (no overflow of r^2). A row with no positive
// logit has every weight 0. +inf: beta = 1 shares the mass among the +inf
// items; beta = 1/2 sends them to +inf and the rest to 0.
template <class R>
void power_norm2(std::span<const R> z, std::span<R> p, bool half_beta) {
  const RowInfo<R> info = inspect(z);
  if (info.nan || info.live == 0) {
    special_row(z, p, info, false);
    return;
  }
  if (info.pinf > 0) {
    if (!half_beta) {
      special_row(z, p, info, true);
      return;
    }
    for (std::size_t i = 0; i < z.size(); ++i) p[i] = is_pinf(z[i]) ? inf_of<R>() : R(0);
    return;
  }
  const R M = info.max_finite > R(0) ? info.max_finite : R(0);
  if (!(M > R(0))) {
    std::fill(p.begin(), p.end(), R(0));
    return;
  }
  R sum(0);
  for (std::size_t i = 0; i < z.size(); ++i) {
    const R r = z[i] > R(0) ? R(z[i] / M) : R(0);
    p[i] = r * r;
    sum += p[i];
  }
  if (half_beta) {
    const R den = r_sqrt(sum);
    for (auto& x : p) x = M * x / den;
  } else {
    for (auto& x : p) x /= sum;
  }
}

// Cog attention (signed weights): sign(z_i) e^{|z_i|} / sum e^{|z_j|}.
template <class R>
void cog_signed(std::span<const R> z, std::span<R> p) {
  const RowInfo<R> info = inspect(z);
  if (info.nan || info.live == 0) {
    special_row(z, p, info, false);
    return;
  }
  std::vector<R> a(z.size());
  for (std::size_t i = 0; i < z.size(); ++i)
    a[i] = is_minf(z[i]) ? z[i] : (z[i] < R(0) ? R(-z[i]) : z[i]);
  softmax<R>(a, p);
  for (std::size_t i = 0; i < z.size(); ++i)
    if (z[i] < R(0) && !is_minf(z[i]))
      p[i] = -p[i];
    else if (z[i] == R(0))
      p[i] = R(0);
}

// Forgetting Transformer (FoX) attention for the query at the last item:
// softmax_j(z_j + Lambda_{n-1} - Lambda_j), Lambda_j = sum_{k<=j} log f_k,
// here with a constant forget gate f. float_cumsum: Lambda as a running sum
// in R (what a kernel does); otherwise the exact difference (n-1-j) log f.
template <class R>
void fox(std::span<const R> z, std::span<R> p, const R& log_f, bool float_cumsum) {
  const RowInfo<R> info = inspect(z);
  // +inf items: as they grow together their biases still differ, so the limit
  // is the softmax of the +inf items' biases (not an even share).
  if (special_row(z, p, info, false)) return;
  const std::size_t n = z.size();
  std::vector<R> lam(n), w(z.begin(), z.end());
  R acc(0);
  for (std::size_t j = 0; j < n; ++j) {
    if (j > 0) acc += log_f;
    lam[j] = acc;
  }
  for (std::size_t j = 0; j < n; ++j) {
    if (is_minf(w[j])) continue;
    const R bias =
        float_cumsum ? R(lam[n - 1] - lam[j]) : R(R(static_cast<double>(n - 1 - j)) * log_f);
    if (info.pinf > 0)
      w[j] = is_pinf(w[j]) ? bias : -inf_of<R>();
    else
      w[j] += bias;
  }
  softmax<R>(w, p);
}

// Softpick: relu(exp(z_i) - 1) / (sum |exp(z_j) - 1| + eps) (Zuhri et al. 2025).
// Stable form: scale numerator and denominator by e^{-m}, m = max(0, max z),
// with exp(z - m) - exp(-m) = exp(z - m) * (-expm1(-z)); expm1 directly when
// m is small. `wrong` = the mis-statement relu(.)/(sum relu(.) + eps).
template <class R>
void softpick_impl(std::span<const R> z, std::span<R> p, const R& eps, bool wrong) {
  const RowInfo<R> info = inspect(z);
  if (info.nan) {
    std::fill(p.begin(), p.end(), nan_of<R>());
    return;
  }
  if (info.pinf > 0) {
    special_row(z, p, info, true);
    return;
  }
  const R m = info.max_finite > R(0) ? info.max_finite : R(0);
  const bool scaled = m > R(64);
  const R em = scaled ? hd::exp(R(-m)) : R(1);
  R den(0);
  for (std::size_t i = 0; i < z.size(); ++i) {
    R a;
    if (is_minf(z[i]))
      a = -em;  // exp(-inf) - 1 = -1, scaled
    else if (!scaled)
      a = r_expm1(z[i]);
    else
      a = hd::exp(R(z[i] - m)) * (-r_expm1(R(-z[i])));
    p[i] = a > R(0) ? a : R(0);
    den += wrong ? p[i] : (a < R(0) ? R(-a) : a);
  }
  den += eps * em;
  for (auto& x : p) x /= den;
}

// Sigmoid attention: sigmoid(z_i + b), b = -log n (Ramapuram et al. 2024).
// live: the n to use (the unmasked items when 0).
template <class R>
void sigmoid_attention(std::span<const R> z, std::span<R> p, std::size_t live_n = 0) {
  RowInfo<R> info = inspect(z);
  if (live_n > 0) info.live = live_n;
  if (info.nan) {
    std::fill(p.begin(), p.end(), nan_of<R>());
    return;
  }
  if (info.live == 0) {
    std::fill(p.begin(), p.end(), R(0));
    return;
  }
  const R b = -hd::log(R(static_cast<double>(info.live)));
  for (std::size_t i = 0; i < z.size(); ++i) {
    if (is_minf(z[i])) {
      p[i] = R(0);
      continue;
    }
    if (is_pinf(z[i])) {
      p[i] = R(1);
      continue;
    }
    const R x = z[i] + b;
    if (x >= R(0))
      p[i] = R(1) / (R(1) + hd::exp(R(-x)));
    else {
      const R e = hd::exp(x);
      p[i] = e / (R(1) + e);
    }
  }
}

// softplus(x) = log(1 + e^x), stable, exact limits at +-inf.
template <class R>
R softplus(const R& x) {
  if (is_pinf(x)) return x;
  if (is_minf(x)) return R(0);
  const R ax = x < R(0) ? R(-x) : x;
  return (x > R(0) ? x : R(0)) + r_log1p(hd::exp(R(-ax)));
}

// Stick-breaking (Tan et al. 2025): items in order 0..n-1, the query after
// the last; b_j = sigmoid(z_j); w_j = b_j * prod_{k>j} (1 - b_k). In log space:
// log w_j = -softplus(-z_j) - sum_{k>j} softplus(z_k).
template <class R>
void stick_breaking(std::span<const R> z, std::span<R> p) {
  const RowInfo<R> info = inspect(z);
  if (info.nan) {
    std::fill(p.begin(), p.end(), nan_of<R>());
    return;
  }
  R suffix(0);
  for (std::size_t jj = z.size(); jj-- > 0;) {
    p[jj] = is_minf(z[jj]) ? R(0) : hd::exp(R(-softplus(R(-z[jj])) - suffix));
    suffix += softplus(z[jj]);
  }
}

// Sparsemax (Martins & Astudillo 2016): sort, support k, tau, max(z - tau, 0).
template <class R>
void sparsemax(std::span<const R> z, std::span<R> p) {
  const RowInfo<R> info = inspect(z);
  if (special_row(z, p, info, true)) return;
  std::vector<R> s;
  s.reserve(info.live);
  for (const R& x : z)
    if (!is_minf(x)) s.push_back(x);
  std::sort(s.begin(), s.end(), [](const R& a, const R& b) { return a > b; });
  R cum(0), tau(0);
  for (std::size_t k = 1; k <= s.size(); ++k) {
    cum += s[k - 1];
    if (R(1) + R(static_cast<double>(k)) * s[k - 1] > cum)
      tau = (cum - R(1)) / R(static_cast<double>(k));
    else
      break;
  }
  for (std::size_t i = 0; i < z.size(); ++i)
    p[i] = is_minf(z[i]) ? R(0) : (z[i] > tau ? R(z[i] - tau) : R(0));
}

// 1.5-entmax (Peters et al. 2019): p = max(z/2 - tau, 0)^2 with sum p = 1.
// exact_sort: closed form on the sorted prefix (used for Mp); otherwise
// bisection on tau in [max - 1, max - n^{-1/2}] followed by renormalisation.
template <class R>
void entmax15(std::span<const R> z, std::span<R> p, bool exact_sort) {
  const RowInfo<R> info = inspect(z);
  if (special_row(z, p, info, true)) return;
  std::vector<R> x;
  x.reserve(info.live);
  for (const R& v : z)
    if (!is_minf(v)) x.push_back(v / R(2));
  const R top = info.max_finite / R(2);
  R tau;
  if (exact_sort) {
    std::sort(x.begin(), x.end(), [](const R& a, const R& b) { return a > b; });
    R s1(0), s2(0);
    tau = top - R(1);
    for (std::size_t k = 1; k <= x.size(); ++k) {
      s1 += x[k - 1];
      s2 += x[k - 1] * x[k - 1];
      const R kk(static_cast<double>(k));
      const R mean = s1 / kk;
      const R delta = (R(1) - kk * (s2 / kk - mean * mean)) / kk;
      if (delta < R(0)) break;
      const R t = mean - r_sqrt(delta);
      if (t < x[k - 1])
        tau = t;
      else
        break;
    }
  } else {
    R lo = top - R(1);
    R hi = top - R(1) / r_sqrt(R(static_cast<double>(x.size())));
    for (int it = 0; it < 200; ++it) {
      const R mid = (lo + hi) / R(2);
      if (!(mid > lo && mid < hi)) break;
      R f(0);
      for (const R& v : x)
        if (v > mid) f += (v - mid) * (v - mid);
      if (f >= R(1))
        lo = mid;
      else
        hi = mid;
    }
    tau = lo;
  }
  R sum(0);
  for (std::size_t i = 0; i < z.size(); ++i) {
    if (is_minf(z[i])) {
      p[i] = R(0);
      continue;
    }
    const R d = z[i] / R(2) - tau;
    p[i] = d > R(0) ? R(d * d) : R(0);
    sum += p[i];
  }
  if (!exact_sort)
    for (auto& v : p) v /= sum;
}

// alpha-entmax with alpha = 5/4 (Peters et al. 2019): p_i = [(alpha - 1) z_i -
// tau]_+^{1/(alpha-1)} = [z_i/4 - tau]_+^4 with tau such that sum p = 1.
// Bisection on tau in [top - 1, top - n^{-1/4}] (top = max z / 4): at the
// lower end the top term alone is 1, at the upper end every term is <= 1/n.
// iterations: 300 for Mp (256 bits), until adjacent values otherwise; then
// renormalised by the sum.
template <class R>
void entmax_a125(std::span<const R> z, std::span<R> p) {
  const RowInfo<R> info = inspect(z);
  if (special_row(z, p, info, true)) return;
  std::vector<R> x;
  x.reserve(info.live);
  for (const R& v : z)
    if (!is_minf(v)) x.push_back(v / R(4));
  const R top = info.max_finite / R(4);
  R lo = top - R(1);
  R hi = top - R(1) / r_sqrt(r_sqrt(R(static_cast<double>(x.size()))));
  auto f = [&](const R& t) {
    R s(0);
    for (const R& v : x)
      if (v > t) {
        const R d2 = (v - t) * (v - t);
        s += d2 * d2;
      }
    return s;
  };
  for (int it = 0; it < 300; ++it) {
    const R mid = (lo + hi) / R(2);
    if (!(mid > lo && mid < hi)) break;
    if (f(mid) >= R(1))
      lo = mid;
    else
      hi = mid;
  }
  R sum(0);
  for (std::size_t i = 0; i < z.size(); ++i) {
    if (is_minf(z[i])) {
      p[i] = R(0);
      continue;
    }
    const R d = z[i] / R(4) - lo;
    const R d2 = d > R(0) ? R(d * d) : R(0);
    p[i] = d2 * d2;
    sum += p[i];
  }
  for (auto& v : p) v /= sum;
}

// Top-k softmax: softmax over the k largest logits, others 0; items tied at
// the k-th value share the remaining slots evenly (k = 1: argmax, ties split).
template <class R>
void topk_softmax(std::span<const R> z, std::span<R> p, std::size_t k) {
  const RowInfo<R> info = inspect(z);
  if (special_row(z, p, info, true)) return;
  std::vector<R> s;
  for (const R& x : z)
    if (!is_minf(x)) s.push_back(x);
  if (s.size() <= k) {
    softmax<R>(z, p);
    return;
  }
  std::nth_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(k - 1), s.end(),
                   [](const R& a, const R& b) { return a > b; });
  const R t = s[k - 1];
  std::size_t greater = 0, equal = 0;
  for (const R& x : z) {
    if (is_minf(x)) continue;
    if (x > t)
      ++greater;
    else if (x == t)
      ++equal;
  }
  const R frac = R(static_cast<double>(k - greater)) / R(static_cast<double>(equal));
  R sum(0);
  for (std::size_t i = 0; i < z.size(); ++i) {
    if (is_minf(z[i]) || z[i] < t)
      p[i] = R(0);
    else if (z[i] > t)
      p[i] = hd::exp(R(z[i] - info.max_finite));
    else
      p[i] = hd::exp(R(t - info.max_finite)) * frac;
    sum += p[i];
  }
  for (auto& x : p) x /= sum;
}

// ReLU attention (Wortsman et al. 2023): relu(z_i) / n, n = unmasked items.
template <class R>
void relu_attention(std::span<const R> z, std::span<R> p) {
  const RowInfo<R> info = inspect(z);
  if (info.nan) {
    std::fill(p.begin(), p.end(), nan_of<R>());
    return;
  }
  if (info.live == 0) {
    std::fill(p.begin(), p.end(), R(0));
    return;
  }
  const R n(static_cast<double>(info.live));
  for (std::size_t i = 0; i < z.size(); ++i) p[i] = (z[i] > R(0)) ? R(z[i] / n) : R(0);
}

}  // namespace sa::variants::formulas
