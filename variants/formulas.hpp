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

// Softmax-plus-one: exp(z_i) / (1 + sum exp(z_j)), with m = max(0, max z).
template <class R>
void softmax_plus_one(std::span<const R> z, std::span<R> p) {
  const RowInfo<R> info = inspect(z);
  if (special_row(z, p, info, true)) return;
  const R m = info.max_finite > R(0) ? info.max_finite : R(0);
  R sum = hd::exp(R(-m));
  for (std::size_t i = 0; i < z.size(); ++i) {
    p[i] = is_minf(z[i]) ? R(0) : hd::exp(R(z[i] - m));
    sum += p[i];
  }
  for (auto& x : p) x /= sum;
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
template <class R>
void sigmoid_attention(std::span<const R> z, std::span<R> p) {
  const RowInfo<R> info = inspect(z);
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
