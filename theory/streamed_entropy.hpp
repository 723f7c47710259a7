// docs/theory.md T6 — Streamed entropy (the paper's Appendix G).
//
// Claim: the Shannon entropy of softmax(l) can be computed in one pass over
// the logits with O(1) state per row, like the online softmax normaliser
// (Milakov & Gimelshein 2018). State: m (running max), S = sum exp(l_i - m),
// T = sum exp(l_i - m)(l_i - m). Then
//
//     H = log S - T / S        (T <= 0: both terms >= 0, no cancellation)
//     log-sum-exp = m + log S
//
// push (one logit x):  m' = max(m, x), a = exp(m - m'),
//                      S' = a S + exp(x - m'), T' = a (T + (m - m') S) + exp(x - m')(x - m')
// merge (two parts):   m = max(m_a, m_b), a = exp(m_a - m), b = exp(m_b - m),
//                      S = a S_a + b S_b,
//                      T = a (T_a + (m_a - m) S_a) + b (T_b + (m_b - m) S_b)
//
// The merge is associative and commutative in exact arithmetic.
//
// Special values, handled explicitly (never through inf - inf or 0 * inf):
// - identity (empty or fully masked part): (m, S, T) = (-inf, 0, 0); pushing
//   -inf leaves a state unchanged; merging with the identity is a no-op.
// - +inf logits: the limit of softmax as those logits grow; the state becomes
//   (+inf, k, 0) with k the number of +inf logits, so H = log k and the
//   +inf items share the weight equally.
// - NaN: the state becomes (NaN, NaN, NaN) and stays so.
//
// This header is host-and-device code: the same arithmetic runs in the CPU
// kernels, the CUDA kernels, and (with Real = MPFR) the reference.
#pragma once

#include <limits>

#include "core/host_device.hpp"

namespace sa::theory {

template <class Real>
struct EntropyState {
  Real m;
  Real S;
  Real T;
};

template <class Real>
SA_HD inline Real neg_infinity() {
  return -std::numeric_limits<Real>::infinity();
}

template <class Real>
SA_HD inline EntropyState<Real> entropy_identity() {
  return {neg_infinity<Real>(), Real(0), Real(0)};
}

template <class Real>
SA_HD inline bool is_identity(const EntropyState<Real>& s) {
  return s.m == neg_infinity<Real>();
}

template <class Real>
SA_HD inline EntropyState<Real> entropy_nan_state() {
  const Real q = std::numeric_limits<Real>::quiet_NaN();
  return {q, q, q};
}

// The state of a single logit x: (x, 1, 0), with the special values above.
template <class Real>
SA_HD inline EntropyState<Real> entropy_state_of(Real x) {
  if (hd::is_nan(x)) return entropy_nan_state<Real>();
  if (x == neg_infinity<Real>()) return entropy_identity<Real>();
  return {x, Real(1), Real(0)};
}

// Merge two partial states (docs/theory.md T6).
template <class Real>
SA_HD inline EntropyState<Real> entropy_merge(const EntropyState<Real>& x,
                                              const EntropyState<Real>& y) {
  const Real inf = -neg_infinity<Real>();
  if (hd::is_nan(x.m) || hd::is_nan(y.m)) return entropy_nan_state<Real>();
  if (is_identity(x)) return y;
  if (is_identity(y)) return x;
  if (x.m == inf || y.m == inf) {
    // Only the +inf items keep weight: count them.
    Real k = Real(0);
    if (x.m == inf) k = k + x.S;
    if (y.m == inf) k = k + y.S;
    return {inf, k, Real(0)};
  }
  if (x.m >= y.m) {
    const Real d = y.m - x.m;  // <= 0
    const Real b = hd::exp(d);
    if (b == Real(0)) return x;  // y's weight underflowed; also avoids 0 * (d * S = -inf)
    return {x.m, x.S + b * y.S, x.T + b * (y.T + d * y.S)};
  }
  const Real d = x.m - y.m;  // < 0
  const Real a = hd::exp(d);
  if (a == Real(0)) return y;  // x's weight underflowed; also avoids 0 * (d * S = -inf)
  return {y.m, a * x.S + y.S, a * (x.T + d * x.S) + y.T};
}

// Add one logit. Equivalent to entropy_merge(s, entropy_state_of(x)).
template <class Real>
SA_HD inline EntropyState<Real> entropy_push(const EntropyState<Real>& s, Real x) {
  return entropy_merge(s, entropy_state_of(x));
}

// H = log S - T / S; the identity (fully masked) has entropy 0 by convention.
template <class Real>
SA_HD inline Real entropy_of(const EntropyState<Real>& s) {
  if (hd::is_nan(s.m)) return s.m;
  if (is_identity(s)) return Real(0);
  return hd::log(s.S) - s.T / s.S;
}

// log-sum-exp = m + log S; -inf for the identity, +inf with +inf logits.
template <class Real>
SA_HD inline Real log_sum_exp_of(const EntropyState<Real>& s) {
  if (hd::is_nan(s.m)) return s.m;
  if (is_identity(s)) return neg_infinity<Real>();
  if (s.m == -neg_infinity<Real>()) return s.m;
  return s.m + hd::log(s.S);
}

}  // namespace sa::theory
