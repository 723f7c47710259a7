// The built-in variants of docs/variants.md, each registered with one
// SA_REGISTER_VARIANT: its float32 kernel, float64 evaluation and MPFR
// reference (the same template of formulas.hpp), its float32 error bound (in
// units of u = 2^-24, absolute, with the derivation next to it) and theory's
// dispersion prediction where there is one.
//
// Error bounds are first-order (O(u^2) dropped), assume correctly rounded
// + - * / and faithful exp/log/expm1/log1p (error < 1 ulp = 2u relative), and
// inputs that are float32 values (the fuzzer only generates such).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "variants/formulas.hpp"
#include "variants/variant.hpp"

namespace sa::variants {
namespace detail {
int builtins_anchor = 0;
}
namespace {

namespace F = formulas;
using ref::Mp;

// Builds a variant from a generic callable fn(std::span<const R>, std::span<R>).
template <class Fn>
Variant make(std::string name, std::string formula, Fn fn) {
  Variant v;
  v.name = std::move(name);
  v.formula = std::move(formula);
  v.kernel32 = [fn](std::span<const float> l, std::span<float> p) { fn(l, p); };
  v.eval64 = [fn](std::span<const double> l, std::span<double> p) { fn(l, p); };
  v.reference = [fn](std::span<const double> l) {
    std::vector<Mp> z(l.begin(), l.end()), p(l.size());
    fn(std::span<const Mp>(z), std::span<Mp>(p));
    return p;
  };
  return v;
}

std::vector<double> eval(const Variant& v, std::span<const double> l) {
  std::vector<double> p(l.size());
  v.eval64(l, p);
  return p;
}

double max_abs_finite(std::span<const double> z) {
  double a = 0;
  for (double x : z)
    if (std::isfinite(x)) a = std::max(a, std::abs(x));
  return a;
}

double spread(std::span<const double> z) {
  double lo = INFINITY, hi = -INFINITY;
  for (double x : z)
    if (std::isfinite(x)) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  return hi >= lo ? hi - lo : 0.0;
}

double pmax_of(std::span<const double> p) {
  double m = 0;
  for (double x : p)
    if (std::isfinite(x)) m = std::max(m, std::abs(x));
  return m;
}

// Shifted softmax of float32 arguments z that were formed with r roundings
// (relative error r*u each): T7 gives ||p^ - p||_inf <= (n + 2 + 2 spread) u ||p||_inf,
// doubled for a faithful exp; an argument error |dz_i| <= r u |z_i| moves p by
// at most 2 ||p||_inf max|dz| (softmax's Jacobian: dp_i = p_i (dz_i - sum p_j dz_j)).
double softmax_bound(std::span<const double> z, double r, double pmax) {
  const double n = static_cast<double>(z.size());
  return pmax * (2.0 * (n + 2.0 + 2.0 * spread(z)) + 2.0 * r * max_abs_finite(z));
}

// ---- streaming ------------------------------------------------------------------------------
// Online softmax over per-item arguments a_i = arg(l_i, i, n) (float32): the
// state (m, S) = (max a, sum e^{a - m}) of a chunk; merge rescales the side
// with the smaller max. The identity is (-inf, 0); merging with it returns the
// other side unchanged (no exp(-inf - -inf) = NaN). An optional sink logit b
// enters once, at finish: S_total = S e^{m - M} + e^{b - M}, M = max(m, b)
// (starting every chunk at (b, 1) would count it once per chunk). post(l_i, q_i)
// maps the normalised exponential to the weight (SA-Softmax: l_i q_i).
struct OnlineState {
  float m;
  float S;
};

template <class Arg, class Post>
Stream online_softmax_stream(Arg arg, Post post, bool has_sink = false, float sink = 0.0f) {
  auto init = [] { return OnlineState{-INFINITY, 0.0f}; };
  auto push = [arg](OnlineState& s, std::span<const float> c, std::size_t off, std::size_t n) {
    for (std::size_t k = 0; k < c.size(); ++k) {
      const float a = arg(c[k], off + k, n);
      if (a == -INFINITY) continue;
      if (a > s.m) {
        s.S = (s.m == -INFINITY ? 0.0f : s.S * std::exp(s.m - a)) + 1.0f;
        s.m = a;
      } else {
        s.S += std::exp(a - s.m);
      }
    }
  };
  auto merge = [](OnlineState& a, const OnlineState& b) {
    if (b.m == -INFINITY) return;
    if (a.m == -INFINITY) {
      a = b;
      return;
    }
    if (a.m >= b.m) {
      a.S += b.S * std::exp(b.m - a.m);
    } else {
      a.S = a.S * std::exp(a.m - b.m) + b.S;
      a.m = b.m;
    }
  };
  auto finish = [arg, post, has_sink, sink](const OnlineState& s, std::span<const float> l,
                                            std::span<float> p) {
    float M = s.m, S = s.S;
    if (has_sink) {
      M = std::max(s.m, sink);
      S = (s.m == -INFINITY ? 0.0f : s.S * std::exp(s.m - M)) + std::exp(sink - M);
    }
    for (std::size_t i = 0; i < l.size(); ++i) {
      const float a = arg(l[i], i, l.size());
      p[i] = post(l[i], a == -INFINITY ? 0.0f : std::exp(a - M) / S);
    }
  };
  return typed_stream<OnlineState>(StreamKind::bounded, init, push, merge, finish);
}

// Bound of a streamed softmax over arguments z of n terms in k chunks
// (docs/variants.md, "Streamability"), first order, faithful exp (2u), in u:
// a term's path is its own exp and at most R <= n + k - 2 rescales (exp 2u +
// multiply u each), whose arguments sum to at most spread (argument rounding
// u |arg| each); S adds n - 1 additions along any merge tree; finish: exp
// (2u + u spread) and a division. rel <= 4n + 3k + 2 spread - 2, times p_max;
// arguments that carry r roundings add 2 r max|z| p_max (softmax's Jacobian).
double stream_softmax_bound(std::span<const double> z, std::size_t k, double r, double pmax) {
  const double n = static_cast<double>(z.size()), kk = static_cast<double>(k);
  return pmax * (4.0 * n + 3.0 * kk + 2.0 * spread(z) - 2.0) + 2.0 * r * max_abs_finite(z) * pmax;
}

Stream not_streamable(const std::string& why) {
  Stream s;
  s.kind = StreamKind::no;
  s.note = why;
  return s;
}

const auto kIdentityArg = [](float x, std::size_t, std::size_t) { return x; };
const auto kIdentityPost = [](float, float q) { return q; };

Prediction t1() {
  return {Dispersion::to_zero,
          "T1 (Lemma 2.1): p_max <= 1/(1+(n-1)e^{-g/theta}) -> 0 for fixed spread"};
}

Prediction ssmax_prediction(double s, double g) {
  const double sg = s * g;
  const std::string src =
      "SSMax (docs/variants.md): top weight n^{sg}/(n^{sg}+n-1): ->1 if s*g>1, ->1/2 at s*g=1, ->0 "
      "below";
  if (sg > 1) return {Dispersion::to_one, src};
  if (sg == 1) return {Dispersion::bounded, src};
  return {Dispersion::to_zero, src};
}

constexpr double kSsmaxS = 0.5;  // the per-head scalar s of the built-in SSMax
constexpr double kSoftpickEps = 1e-6;

double live_count(std::span<const double> l) {
  double n = 0;
  for (double x : l)
    if (!(std::isinf(x) && x < 0)) n += 1;
  return n;
}

// ---- softmax with temperature -------------------------------------------------------------
Variant softmax_variant(const std::string& name, double theta) {
  Variant v = make(name, "exp(l_i/theta)/sum exp(l_j/theta), theta = " + std::to_string(theta),
                   [theta](auto z, auto p) {
                     using R = typename decltype(p)::value_type;
                     F::softmax_temperature<R>(z, p, R(theta));
                   });
  // z = l/theta: one rounding (r = 1) unless theta is a power of two; T7.
  v.f32_bound = [theta, name](std::span<const double> l) {
    std::vector<double> z(l.begin(), l.end());
    for (auto& x : z) x /= theta;
    std::vector<double> p(l.size());
    F::softmax_temperature<double>(l, p, theta);
    return softmax_bound(z, 1.0, pmax_of(p));
  };
  v.f32_bound_rule = "T7 (shifted softmax, faithful exp) + scaling by 1/theta";
  v.predict = [](double) { return std::optional<Prediction>(t1()); };
  v.citation = "softmax (Bridle 1990); temperature as in Hinton et al. 2015";
  const float th = static_cast<float>(theta);
  v.stream = online_softmax_stream([th](float x, std::size_t, std::size_t) { return x / th; },
                                   kIdentityPost);
  v.stream.bound = [theta](std::span<const double> l, std::size_t k) {
    std::vector<double> z(l.begin(), l.end()), p(l.size());
    for (auto& x : z) x /= theta;
    F::softmax_temperature<double>(l, p, theta);
    return stream_softmax_bound(z, k, 1.0, pmax_of(p));
  };
  v.stream.bound_rule =
      "online softmax 4n + 3k + 2 spread - 2 (docs/variants.md) + scaling by 1/theta";
  return v;
}
SA_REGISTER_VARIANT(softmax, softmax_variant("softmax", 1.0));
SA_REGISTER_VARIANT(softmax_t05, softmax_variant("softmax_theta0.5", 0.5));

// ---- adaptive temperature (T5) ---------------------------------------------------------------
Variant adaptive_variant() {
  Variant v =
      make("adaptive_temperature",
           "softmax(beta(H) l), H = -sum p log(p+1e-9) of softmax(l), beta from docs/theory.md T5",
           [](auto z, auto p) {
             using R = typename decltype(p)::value_type;
             F::adaptive<R>(z, p);
           });
  // Pass 1: |dp| <= E1 = softmax_bound(l) u. Entropy -sum p log(p+1e-9):
  // |dH| <= n E1 (|log 1e-9| + 1) + 2(n+3) u max(H,1) (sum and log rounding).
  // beta = poly(H) has |beta'| <= 3 where beta > 1 (max |poly'| on
  // (0.849, 5.944) is 2.5) plus Horner rounding <= 2 * 8 u sum|c_i| H^i;
  // beta is continuous (poly(0.5) < 1), so branch flips cost nothing more.
  // Pass 2: softmax(beta l) with relative argument error |dbeta|/beta + u.
  v.f32_bound = [](std::span<const double> l) {
    std::vector<double> p1(l.size());
    F::softmax<double>(l, p1);
    const double n = static_cast<double>(l.size());
    const double e1 = softmax_bound(l, 0.0, pmax_of(p1));
    double H = 0;
    for (double q : p1) H -= q * std::log(q + 1e-9);
    const double dH = n * e1 * (std::log(1e9) + 1.0) + 2.0 * (n + 3.0) * std::max(H, 1.0);
    const double Hc = std::min(std::max(H, 0.0), 8.0);
    const double horner = 16.0 * (0.037 * std::pow(Hc, 4) + 0.481 * std::pow(Hc, 3) +
                                  2.3 * Hc * Hc + 4.917 * Hc + 1.791);
    const double beta = sa::theory::adaptive_beta<double>(H);
    const double dbeta = 3.0 * dH + horner;
    std::vector<double> z(l.begin(), l.end()), p(l.size());
    for (auto& x : z) x *= beta;
    F::adaptive<double>(l, p);
    return softmax_bound(z, 1.0 + dbeta / beta, pmax_of(p));
  };
  v.f32_bound_rule = "T7 twice + entropy/beta propagation (|beta'|<=3, Horner rounding)";
  v.predict = [](double) {
    return std::optional<Prediction>(
        Prediction{Dispersion::to_zero,
                   "T5+T1: beta = 1 once H > 5.944 (near-uniform rows, n >~ 380), then T1"});
  };
  v.citation = "docs/theory.md T5 (adaptive temperature, Velickovic et al. 2024, arXiv 2410.01104)";
  v.stream = not_streamable(
      "beta depends on the entropy of the whole row's softmax, and the weights are a second "
      "softmax at that beta: two passes, not one merged state");
  return v;
}
SA_REGISTER_VARIANT(adaptive, adaptive_variant());

// ---- SSMax, log-length scaling, and the wrong SSMax -------------------------------------------
Variant ssmax_variant(const std::string& name, double s, const std::string& formula) {
  Variant v = make(name, formula, [s](auto z, auto p) {
    using R = typename decltype(p)::value_type;
    F::ssmax<R>(z, p, R(s));
  });
  // z = (s * log n) * l: log faithful (2u), times s (u, 0 if s = 1), times l (u).
  const double r = s == 1.0 ? 3.0 : 4.0;
  v.f32_bound = [s, r](std::span<const double> l) {
    std::vector<double> z(l.begin(), l.end()), p(l.size());
    const double c = s * std::log(std::max(live_count(l), 1.0));
    for (auto& x : z) x *= c;
    F::ssmax<double>(l, p, s);
    return softmax_bound(z, r, pmax_of(p));
  };
  v.f32_bound_rule = "T7 (shifted softmax, faithful exp) + argument rounding of (s log n) l";
  v.predict = [s](double g) { return std::optional<Prediction>(ssmax_prediction(s, g)); };
  v.citation = s == 1.0 ? "Chiang & Cholak 2022 (arXiv 2202.12172)"
                        : "Nakanishi 2025, Scalable-Softmax (arXiv 2501.19399)";
  // n is the row length (the query position), known before the first chunk.
  const float sf = static_cast<float>(s);
  v.stream = online_softmax_stream(
      [sf](float x, std::size_t, std::size_t n) {
        return n <= 1 ? x : x * (sf * std::log(static_cast<float>(n)));
      },
      kIdentityPost);
  v.stream.bound = [s, r](std::span<const double> l, std::size_t k) {
    std::vector<double> z(l.begin(), l.end()), p(l.size());
    const double c = l.size() <= 1 ? 1.0 : s * std::log(static_cast<double>(l.size()));
    for (auto& x : z) x *= c;
    F::ssmax<double>(l, p, s);
    return stream_softmax_bound(z, k, r, pmax_of(p));
  };
  v.stream.bound_rule =
      "online softmax 4n + 3k + 2 spread - 2 (docs/variants.md) + argument rounding of (s log n) l";
  return v;
}
SA_REGISTER_VARIANT(ssmax, ssmax_variant("ssmax_s0.5", kSsmaxS, "softmax((s log n) l), s = 0.5"));
SA_REGISTER_VARIANT(log_length,
                    ssmax_variant("log_length", 1.0, "softmax(log n * l) (Chiang & Cholak 2022)"));

Variant ssmax_wrong_variant() {
  Variant v = make("ssmax_wrong_shift",
                   "exp(l_i - s log n)/sum exp(l_j - s log n), s = 0.5 (mis-stated SSMax)",
                   [](auto z, auto p) {
                     using R = typename decltype(p)::value_type;
                     F::ssmax_wrong_shift<R>(z, p, R(kSsmaxS));
                   });
  v.wrong_formulation = true;
  v.wrong_of = "ssmax_s0.5";
  // z_i = l_i - c: one rounding each (the error of c is a common shift and cancels).
  v.f32_bound = [](std::span<const double> l) {
    std::vector<double> z(l.begin(), l.end()), p(l.size());
    const double c = kSsmaxS * std::log(std::max(live_count(l), 1.0));
    for (auto& x : z) x -= c;
    F::ssmax_wrong_shift<double>(l, p, kSsmaxS);
    return softmax_bound(z, 1.0, pmax_of(p));
  };
  v.f32_bound_rule = "T7 (shifted softmax, faithful exp) + one rounding of l - s log n";
  // It claims to be SSMax, so it is held to SSMax's prediction.
  v.predict = [](double g) { return std::optional<Prediction>(ssmax_prediction(kSsmaxS, g)); };
  v.citation = "a mis-statement of Nakanishi 2025 (arXiv 2501.19399)";
  return v;
}
SA_REGISTER_VARIANT(ssmax_wrong, ssmax_wrong_variant());

// ---- softmax-plus-one ---------------------------------------------------------------------------
Variant plus_one_variant() {
  Variant v =
      make("softmax_plus_one", "exp(l_i)/(1 + sum exp(l_j)), m = max(0, max l) (Miller 2023)",
           [](auto z, auto p) {
             using R = typename decltype(p)::value_type;
             F::softmax_plus_one<R>(z, p);
           });
  // T7 over the n + 1 terms (the extra one is exp(0 - m)); no argument rounding.
  v.f32_bound = [](std::span<const double> l) {
    std::vector<double> z(l.begin(), l.end()), p(l.size());
    z.push_back(0.0);
    F::softmax_plus_one<double>(l, p);
    return softmax_bound(z, 0.0, pmax_of(p));
  };
  v.f32_bound_rule = "T7 over n+1 terms (shifted by max(0, max l))";
  v.predict = [](double) {
    return std::optional<Prediction>(
        Prediction{Dispersion::to_zero,
                   "p_max <= e^{max l}/(1 + (n-1)e^{min l}) -> 0 (Theta(1/n), docs/variants.md)"});
  };
  v.citation = "Miller 2023, \"Attention is off by one\" (blog post)";
  v.stream = online_softmax_stream(kIdentityArg, kIdentityPost, true, 0.0f);
  v.stream.bound = [](std::span<const double> l, std::size_t k) {
    std::vector<double> z(l.begin(), l.end()), p(l.size());
    z.push_back(0.0);
    F::softmax_plus_one<double>(l, p);
    return stream_softmax_bound(z, k + 1, 0.0, pmax_of(p));
  };
  v.stream.bound_rule = "online softmax over n+1 terms, the sink one more chunk (docs/variants.md)";
  return v;
}
SA_REGISTER_VARIANT(plus_one, plus_one_variant());

// ---- softpick and the wrong softpick ---------------------------------------------------------
Variant softpick_variant(bool wrong) {
  Variant v =
      make(wrong ? "softpick_wrong_relu_den" : "softpick",
           wrong ? "relu(e^l_i - 1)/(sum relu(e^l_j - 1) + eps) (mis-stated softpick)"
                 : "relu(e^l_i - 1)/(sum |e^l_j - 1| + eps), eps = 1e-6 (Zuhri et al. 2025)",
           [wrong](auto z, auto p) {
             using R = typename decltype(p)::value_type;
             F::softpick_impl<R>(z, p, R(kSoftpickEps), wrong);
           });
  if (wrong) {
    v.wrong_formulation = true;
    v.wrong_of = "softpick";
  }
  v.not_claimed = {"special.neg_inf_mask"};  // |exp(-inf) - 1| = 1 counts (formulas.hpp)
  // a = expm1(l): 2u; |a| summed over n terms plus eps: (n + 2)u relative (all
  // terms >= 0); the division: u; the scaled branch (max l > 64) adds 3u. Relative
  // error <= (n + 8)u on every weight.
  v.f32_bound = [wrong](std::span<const double> l) {
    std::vector<double> p(l.size());
    F::softpick_impl<double>(l, p, kSoftpickEps, wrong);
    return (static_cast<double>(l.size()) + 8.0) * pmax_of(p);
  };
  v.f32_bound_rule = "rounding analysis: relative error (n+8)u (expm1 faithful, nonnegative sum)";
  v.predict = [](double) {
    return std::optional<Prediction>(
        Prediction{Dispersion::to_zero,
                   "logits in [1, 1+g]: p_max <= (e^{1+g}-1)/((n-1)(e-1)) -> 0 (docs/variants.md: "
                   "disperses for bounded positive logits)"});
  };
  v.citation = wrong ? "a mis-statement of Zuhri et al. 2025 (arXiv 2504.20966)"
                     : "Zuhri et al. 2025, softpick (arXiv 2504.20966)";
  return v;
}
SA_REGISTER_VARIANT(softpick, softpick_variant(false));
SA_REGISTER_VARIANT(softpick_wrong, softpick_variant(true));

// Element-wise variants whose only row statistic is n (the unmasked items):
// the state is that count, merged exactly, so the streamed weights equal the
// whole-row kernel bit for bit (the finish is the kernel's arithmetic with the
// merged count in place of the counted one).
struct CountState {
  std::int64_t live;
};
template <class Finish>
Stream count_stream(Finish fin) {
  return typed_stream<CountState>(
      StreamKind::bitwise, [] { return CountState{0}; },
      [](CountState& s, std::span<const float> c, std::size_t, std::size_t) {
        for (float x : c) s.live += !(std::isinf(x) && x < 0);
      },
      [](CountState& a, const CountState& b) { a.live += b.live; },
      [fin](const CountState& s, std::span<const float> l, std::span<float> p) {
        fin(l, p, static_cast<std::size_t>(s.live));
      });
}

// ---- sigmoid attention ------------------------------------------------------------------------
Variant sigmoid_variant() {
  Variant v = make("sigmoid_attention", "sigmoid(l_i + b), b = -log n (Ramapuram et al. 2024)",
                   [](auto z, auto p) {
                     using R = typename decltype(p)::value_type;
                     F::sigmoid_attention<R>(z, p);
                   });
  // x = l + b: |dx| <= u|x| + 2u log n (faithful log); dsigma/dx = p(1-p);
  // evaluating 1/(1+e^{-x}) or e^x/(1+e^x): relative error <= 4u.
  v.f32_bound = [](std::span<const double> l) {
    std::vector<double> p(l.size());
    F::sigmoid_attention<double>(l, p);
    const double logn = std::log(std::max(live_count(l), 1.0));
    double b = 0;
    for (std::size_t i = 0; i < l.size(); ++i) {
      if (!std::isfinite(l[i])) continue;
      const double x = l[i] - logn;
      b = std::max(b, p[i] * (1 - p[i]) * (std::abs(x) + 2 * logn) + 4 * p[i]);
    }
    return b;
  };
  v.f32_bound_rule = "rounding analysis: p(1-p)(|x| + 2 log n) + 4p";
  v.predict = [](double) {
    return std::optional<Prediction>(Prediction{
        Dispersion::to_zero, "sigmoid(l - log n) <= e^{l}/n -> 0 (Theta(1/n), docs/variants.md)"});
  };
  v.citation = "Ramapuram et al. 2024 (arXiv 2409.04431)";
  v.stream = count_stream([](std::span<const float> l, std::span<float> p, std::size_t live) {
    F::sigmoid_attention<float>(l, p, live);
  });
  return v;
}
SA_REGISTER_VARIANT(sigmoid, sigmoid_variant());

// ---- stick-breaking ---------------------------------------------------------------------------
Variant stick_variant() {
  Variant v = make("stick_breaking",
                   "b_j = sigmoid(l_j); w_j = b_j prod_{k>j}(1-b_k), query after the last item "
                   "(Tan et al. 2025)",
                   [](auto z, auto p) {
                     using R = typename decltype(p)::value_type;
                     F::stick_breaking<R>(z, p);
                   });
  // log w_j = -softplus(-l_j) - sum_{k>j} softplus(l_k): each softplus term t has
  // relative error <= 5u (exp 2u, log1p 2u, add u), the suffix sum adds
  // n u sum|t|; exp adds 2u relative: |dw_j| <= w_j ((n + 5) S_j + 2) u with
  // S_j = |t_j| + sum_{k>j} |t_k|.
  v.f32_bound = [](std::span<const double> l) {
    std::vector<double> p(l.size());
    F::stick_breaking<double>(l, p);
    const double n = static_cast<double>(l.size());
    double b = 0, suffix = 0;
    for (std::size_t j = l.size(); j-- > 0;) {
      if (std::isfinite(l[j])) {
        const double S = F::softplus<double>(-l[j]) + suffix;
        b = std::max(b, p[j] * ((n + 5.0) * S + 2.0));
        suffix += F::softplus<double>(l[j]);
      }
    }
    return b;
  };
  v.f32_bound_rule = "rounding analysis of the log-space product: w_j((n+5)S_j + 2)";
  v.predict = [](double) {
    return std::optional<Prediction>(
        Prediction{Dispersion::bounded,
                   "the item nearest the query keeps w = sigmoid(l_last), independent of n "
                   "(docs/variants.md)"});
  };
  v.citation = "Tan et al. 2025, stick-breaking attention (arXiv 2410.17980)";
  return v;
}
SA_REGISTER_VARIANT(stick, stick_variant());

// ---- sparsemax and 1.5-entmax -------------------------------------------------------------------
Variant sparsemax_variant() {
  Variant v = make("sparsemax", "Euclidean projection onto the simplex (Martins & Astudillo 2016)",
                   [](auto z, auto p) {
                     using R = typename decltype(p)::value_type;
                     F::sparsemax<R>(z, p);
                   });
  // tau = (sum_{j<=k} z_(j) - 1)/k: the prefix sum errs by <= k u (k max|z| + 1),
  // so |dtau| <= (n + 2) u (max|z| + 1); p = z - tau adds u|p|. A support flip
  // at a near-tie changes p continuously (the flipped weight is within the
  // same |dtau| of 0).
  v.f32_bound = [](std::span<const double> l) {
    const double a = max_abs_finite(l), n = static_cast<double>(l.size());
    return (n + 3.0) * (a + 1.0) + a + 1.0;
  };
  v.f32_bound_rule = "rounding analysis of tau: (n+3)(max|l|+1) + max|l| + 1";
  v.predict = [](double g) {
    const std::string src =
        "sparsemax: one-hot iff the top leads by >= 1; below, p_top -> g (tau -> 0)";
    return std::optional<Prediction>(
        Prediction{g >= 1.0 ? Dispersion::to_one : Dispersion::bounded, src});
  };
  v.citation = "Martins & Astudillo 2016 (arXiv 1602.02068)";
  v.stream = not_streamable(
      "the threshold tau solves sum (z - tau)_+ = 1 over the whole sorted row; two chunks' "
      "thresholds do not determine the merged one");
  return v;
}
SA_REGISTER_VARIANT(sparsemax, sparsemax_variant());

Variant entmax_variant() {
  Variant v =
      make("entmax15",
           "max(l/2 - tau, 0)^2, sum = 1 (Peters et al. 2019); bisection in float, sort in MPFR",
           [](auto z, auto p) {
             using R = typename decltype(p)::value_type;
             F::entmax15<R>(z, p, std::is_same_v<R, Mp>);
           });
  // Bisection stops where the float f(tau) = sum (x - tau)_+^2 - 1 changes sign:
  // |f error| <= (n + 4)u (sum of n nonnegative terms ~ 1 plus squaring), and
  // |f'| = 2 sum (x - tau)_+ >= 2, so |dtau| <= D u with
  // D = 2(max|x| + 1) + (n + 4) (the first term: ulp of tau itself).
  // q = (x - tau)^2 errs by 2 sqrt(q)(D + |x - tau|) u; renormalising by
  // sum q = 1 + O(2 sqrt(n) D u) shifts every weight by at most that relatively.
  v.f32_bound = [](std::span<const double> l) {
    const double n = static_cast<double>(l.size()), a = max_abs_finite(l) / 2.0;
    const double D = 2.0 * (a + 1.0) + n + 4.0;
    return (2.0 * std::sqrt(n) + 2.0) * D + 2.0 * (2.0 * a + 1.0) + n + 7.0;
  };
  v.f32_bound_rule = "rounding analysis of bisection + renormalisation";
  v.predict = [](double g) {
    const std::string src =
        "1.5-entmax: one-hot iff the top leads by >= 2; below, p_top -> (g/2)^2";
    return std::optional<Prediction>(
        Prediction{g >= 2.0 ? Dispersion::to_one : Dispersion::bounded, src});
  };
  v.citation = "Peters, Niculae & Martins 2019 (arXiv 1905.05702)";
  v.stream = not_streamable(
      "the threshold tau solves sum (z/2 - tau)_+^2 = 1 over the whole row; no fixed-size "
      "state of a chunk determines the merged tau");
  return v;
}
SA_REGISTER_VARIANT(entmax, entmax_variant());

// Hardmax streams exactly: the state is the maximum and how often it occurs
// (exact in any merge order); finish repeats the kernel's arithmetic
// (formulas.hpp topk_softmax with k = 1: frac = 1/c, each top item e^0 frac,
// summed in row order, divided), so the claim is bitwise.
struct MaxCountState {
  float m;
  std::int64_t count;
};
Stream hardmax_stream() {
  return typed_stream<MaxCountState>(
      StreamKind::bitwise,
      [] {
        return MaxCountState{-INFINITY, 0};
      },
      [](MaxCountState& s, std::span<const float> c, std::size_t, std::size_t) {
        for (float x : c) {
          if (x == -INFINITY) continue;
          if (x > s.m) {
            s.m = x;
            s.count = 1;
          } else if (x == s.m) {
            ++s.count;
          }
        }
      },
      [](MaxCountState& a, const MaxCountState& b) {
        if (b.m > a.m)
          a = b;
        else if (b.m == a.m)
          a.count += b.count;
      },
      [](const MaxCountState& s, std::span<const float> l, std::span<float> p) {
        const float frac = s.count > 1 ? 1.0f / static_cast<float>(s.count) : 1.0f;
        float sum = 0.0f;
        for (std::size_t i = 0; i < l.size(); ++i) {
          p[i] = l[i] == s.m ? std::exp(0.0f) * frac : 0.0f;
          sum += p[i];
        }
        for (auto& x : p) x /= sum;
      });
}

// ---- alpha-entmax, alpha = 5/4 -------------------------------------------------------------
Variant entmax_a125_variant() {
  Variant v = make("entmax_a1.25",
                   "alpha-entmax, alpha = 5/4: [z/4 - tau]_+^4, sum = 1 (Peters et al. 2019); "
                   "bisection",
                   [](auto z, auto p) {
                     using R = typename decltype(p)::value_type;
                     F::entmax_a125<R>(z, p);
                   });
  // f(tau) = sum (x - tau)_+^4 - 1 evaluated in float (x = z/4 exact): d =
  // x - tau (u), d^2 (2u + u = 3u), (d^2)^2 (6u + u = 7u) per term, n - 1
  // additions of nonnegative terms totalling ~1: |f error| <= (n + 6)u. At the
  // root every term is <= 1, so sum (x - tau)^3 >= sum (x - tau)^4 = 1 and
  // |f'| >= 4: bisection stops within D u of the root, D = (n + 6)/4 +
  // 2(|tau| + 1) (the last term: ulp of tau, |tau| <= max|z|/4 + 1). A weight
  // d^4 moves by 4 d^3 D u + 7u d^4 <= (4D + 7)u; the renormalisation by the
  // float sum moves every weight by at most ((4D + 7)n + n)u relatively
  // (the weights' errors plus n - 1 additions and the division). Total
  // <= (4D + 7)(n + 1) + n (p <= 1).
  v.f32_bound = [](std::span<const double> l) {
    const double n = static_cast<double>(l.size());
    const double D = (n + 6.0) / 4.0 + 2.0 * (max_abs_finite(l) / 4.0 + 2.0);
    return (4.0 * D + 7.0) * (n + 1.0) + n;
  };
  v.f32_bound_rule = "rounding analysis of bisection + renormalisation (|f'| >= 4 at the root)";
  // Theory: one-hot iff (alpha - 1) g >= 1, i.e. g >= 4; below, the top weight
  // tends to (g/4)^4 > 0, but only as fast as tau, like n^{-1/4}: at n = 2^20
  // the curve has not settled (docs/variants.md), so no class is claimed.
  v.citation = "Peters, Niculae & Martins 2019, alpha-entmax (arXiv 1905.05702), alpha = 5/4";
  v.stream = not_streamable(
      "tau solves sum (z/4 - tau)_+^4 = 1 over the whole row; no fixed-size state of a chunk "
      "determines the merged tau");
  return v;
}
SA_REGISTER_VARIANT(entmax_a125, entmax_a125_variant());

// ---- top-k softmax / hardmax ---------------------------------------------------------------
Variant topk_variant(std::size_t k) {
  Variant v = make(k == 1 ? "hardmax" : "top" + std::to_string(k) + "_softmax",
                   k == 1 ? "argmax, ties split evenly"
                          : "softmax over the " + std::to_string(k) +
                                " largest logits, ties at the k-th split evenly",
                   [k](auto z, auto p) {
                     using R = typename decltype(p)::value_type;
                     F::topk_softmax<R>(z, p, k);
                   });
  // T7 over at most n terms plus the tie fraction (k-g)/c: one rounding, times
  // exp: one more, so +2 p_max.
  v.f32_bound = [k](std::span<const double> l) {
    std::vector<double> p(l.size());
    F::topk_softmax<double>(l, p, k);
    return softmax_bound(l, 0.0, pmax_of(p)) + 2.0 * pmax_of(p);
  };
  v.f32_bound_rule = "T7 (shifted softmax, faithful exp) + tie fraction";
  v.predict = [k](double g) {
    if (k == 1)
      return std::optional<Prediction>(
          Prediction{Dispersion::to_one, "argmax of a unique maximum is one-hot"});
    return std::optional<Prediction>(
        Prediction{Dispersion::bounded, "fixed k: p_top = e^g/(e^g + k - 1) for every n > k"});
  };
  v.citation = k == 1 ? "argmax (hard attention)" : "top-k attention (e.g. Gupta et al. 2021)";
  if (k == 1) v.stream = hardmax_stream();
  return v;
}
SA_REGISTER_VARIANT(top4, topk_variant(4));
SA_REGISTER_VARIANT(hardmax, topk_variant(1));

// ---- ReLU attention -------------------------------------------------------------------------
Variant relu_variant() {
  Variant v = make("relu_attention", "relu(l_i)/n (Wortsman et al. 2023)", [](auto z, auto p) {
    using R = typename decltype(p)::value_type;
    F::relu_attention<R>(z, p);
  });
  v.not_claimed = {"special.pos_inf"};  // the +inf limit of relu(l)/n is +inf (formulas.hpp)
  // One division: relative error u.
  v.f32_bound = [](std::span<const double> l) {
    std::vector<double> p(l.size());
    F::relu_attention<double>(l, p);
    return pmax_of(p);
  };
  v.f32_bound_rule = "one correctly rounded division: u p";
  v.predict = [](double) {
    return std::optional<Prediction>(Prediction{
        Dispersion::to_zero, "relu(l)/n <= max l / n -> 0 (Theta(1/n), docs/variants.md)"});
  };
  v.citation = "Wortsman et al. 2023, ReLU attention (arXiv 2309.08586)";
  v.stream = count_stream([](std::span<const float> l, std::span<float> p, std::size_t live) {
    const float n = static_cast<float>(live);
    for (std::size_t i = 0; i < l.size(); ++i) p[i] = (l[i] > 0.0f) ? l[i] / n : 0.0f;
  });
  return v;
}
SA_REGISTER_VARIANT(relu, relu_variant());

// ============================================================================================
// The normalisations of 2024-2026 (issue 36). Constants a paper fixes are used
// as stated; where a parameter is learned or its published value is not in
// this project's reach, the value chosen here is named in the variant's name
// or formula and in docs/variants.md.

// ---- learnable sink (gpt-oss) -------------------------------------------------------------
// exp(l_i) / (exp(b) + sum exp(l_j)), b a learned per-head logit; b = 1 here.
constexpr double kSinkB = 1.0;
Variant sink_variant() {
  Variant v = make("sink_b1", "exp(l_i)/(exp(b) + sum exp(l_j)), b = 1 (a learned per-head sink)",
                   [](auto z, auto p) {
                     using R = typename decltype(p)::value_type;
                     F::softmax_sink<R>(z, p, R(kSinkB));
                   });
  // T7 over the n + 1 terms (the sink's exp(b - m) one of them); no argument rounding.
  v.f32_bound = [](std::span<const double> l) {
    std::vector<double> z(l.begin(), l.end()), p(l.size());
    z.push_back(kSinkB);
    F::softmax_sink<double>(l, p, kSinkB);
    return softmax_bound(z, 0.0, pmax_of(p));
  };
  v.f32_bound_rule = "T7 over n+1 terms (the sink is one), shifted by max(b, max l)";
  v.predict = [](double) {
    return std::optional<Prediction>(Prediction{
        Dispersion::to_zero, "p_max <= e^{max l}/(e^b + (n-1)e^{min l}) -> 0 (as T1, Theta(1/n))"});
  };
  v.citation =
      "OpenAI 2025, gpt-oss-120b & gpt-oss-20b model card (arXiv 2508.10925, id not checked): "
      "attention sinks";
  v.stream = online_softmax_stream(kIdentityArg, kIdentityPost, true, static_cast<float>(kSinkB));
  v.stream.bound = [](std::span<const double> l, std::size_t k) {
    std::vector<double> z(l.begin(), l.end()), p(l.size());
    z.push_back(kSinkB);
    F::softmax_sink<double>(l, p, kSinkB);
    return stream_softmax_bound(z, k + 1, 0.0, pmax_of(p));
  };
  v.stream.bound_rule = "online softmax over n+1 terms, the sink one more chunk (docs/variants.md)";
  return v;
}
SA_REGISTER_VARIANT(sink, sink_variant());

// ---- position-dependent temperatures ----------------------------------------------------------
// softmax(beta(n) l), n = the query position = the row's unmasked items.
// beta in float: Qwen ln n / ln L (two faithful logs 2u each, a division u),
// Llama 4 1 + a ln(k + 1) (log 2u, a rounded u, product u, sum u: 5u beta);
// then beta * l: one more rounding, so r = 6 roundings of the argument.
template <class Beta>
Variant position_temperature_variant(std::string name, std::string formula, Beta beta,
                                     std::string citation, Prediction (*pred)(double)) {
  Variant v = make(std::move(name), std::move(formula), [beta](auto z, auto p) {
    using R = typename decltype(p)::value_type;
    const auto info = F::inspect<R>(z);
    F::softmax_scaled<R>(z, p, beta.template operator()<R>(info.live));
  });
  auto scaled = [beta](std::span<const double> l) {
    std::vector<double> z(l.begin(), l.end());
    const double b = beta.template operator()<double>(static_cast<std::size_t>(live_count(l)));
    for (auto& x : z)
      if (std::isfinite(x)) x *= b;
    return z;
  };
  v.f32_bound = [scaled, beta](std::span<const double> l) {
    std::vector<double> p(l.size());
    F::softmax_scaled<double>(
        l, p, beta.template operator()<double>(static_cast<std::size_t>(live_count(l))));
    return softmax_bound(scaled(l), 6.0, pmax_of(p));
  };
  v.f32_bound_rule = "T7 (shifted softmax, faithful exp) + 6 roundings of beta(n) l";
  v.predict = [pred](double g) { return std::optional<Prediction>(pred(g)); };
  v.citation = std::move(citation);
  v.stream = online_softmax_stream(
      [beta](float x, std::size_t, std::size_t n) {
        return x * beta.template operator()<float>(n);
      },
      kIdentityPost);
  v.stream.bound = [scaled, beta](std::span<const double> l, std::size_t k) {
    std::vector<double> p(l.size());
    F::softmax_scaled<double>(
        l, p, beta.template operator()<double>(static_cast<std::size_t>(live_count(l))));
    return stream_softmax_bound(scaled(l), k, 6.0, pmax_of(p));
  };
  v.stream.bound_rule =
      "online softmax 4n + 3k + 2 spread - 2 (docs/variants.md) + 6 roundings of beta(n) l";
  return v;
}

constexpr double kQwenL = 2048.0;  // the training length L of log_L n (Qwen-7B's seq_length)
struct QwenBeta {
  template <class R>
  R operator()(std::size_t n) const {
    return F::qwen_logn_beta<R>(n, kQwenL);
  }
};
Prediction qwen_prediction(double g) {
  // For n > L, beta = ln n / ln L: SSMax with s = 1/ln L, so s g > 1 iff g > ln L = 7.62.
  const double sg = g / std::log(kQwenL);
  return {sg > 1 ? Dispersion::to_one : (sg == 1 ? Dispersion::bounded : Dispersion::to_zero),
          "beta = ln n/ln L for n > L is SSMax with s = 1/ln L: top weight n^{sg}/(n^{sg}+n-1), "
          "-> 0 for g < ln L = 7.62"};
}
SA_REGISTER_VARIANT(qwen_logn,
                    position_temperature_variant(
                        "qwen_logn_L2048", "softmax(max(1, log_L n) l), L = 2048", QwenBeta{},
                        "Qwen team 2023, Qwen technical report (arXiv 2309.16609): log-n attention "
                        "scaling (L = 2048 recalled as Qwen-7B's training length, not checked)",
                        qwen_prediction));

constexpr double kLlama4Floor = 8192.0, kLlama4Scale = 0.1;
struct Llama4Beta {
  template <class R>
  R operator()(std::size_t n) const {
    return F::llama4_beta<R>(n, kLlama4Floor, kLlama4Scale);
  }
};
Prediction llama4_prediction(double g) {
  // beta = 1 + a ln(floor(n/F) + 1) ~ a ln n: SSMax with s = a asymptotically; a g <= 0.3 here.
  const double sg = kLlama4Scale * g;
  return {sg > 1 ? Dispersion::to_one : Dispersion::to_zero,
          "beta ~ a ln n for n >> F: SSMax with s = a = 0.1: -> 0 for g < 1/a = 10"};
}
SA_REGISTER_VARIANT(
    llama4,
    position_temperature_variant(
        "llama4_step", "softmax((1 + a ln(floor(n/F) + 1)) l), F = 8192, a = 0.1", Llama4Beta{},
        "Meta 2025, Llama 4 attention temperature tuning (floor_scale = 8192, attn_scale = 0.1 "
        "recalled from the released configuration, not checked)",
        llama4_prediction));

// YaRN: logits scaled by 1/t with sqrt(1/t) = 0.1 ln s + 1, s the context
// extension factor (a constant, not a position); s = 4 here.
constexpr double kYarnS = 4.0;
Variant yarn_variant() {
  const double beta = std::pow(0.1 * std::log(kYarnS) + 1.0, 2.0);
  Variant v = make("yarn_s4", "softmax((0.1 ln s + 1)^2 l), s = 4", [beta](auto z, auto p) {
    using R = typename decltype(p)::value_type;
    F::softmax_scaled<R>(z, p, R(beta));
  });
  // beta rounded to float (u) and beta * l (u): r = 2.
  v.f32_bound = [beta](std::span<const double> l) {
    std::vector<double> z(l.begin(), l.end()), p(l.size());
    for (auto& x : z) x *= beta;
    F::softmax_scaled<double>(l, p, beta);
    return softmax_bound(z, 2.0, pmax_of(p));
  };
  v.f32_bound_rule = "T7 (shifted softmax, faithful exp) + 2 roundings of beta l";
  v.predict = [](double) { return std::optional<Prediction>(t1()); };
  v.citation =
      "Peng et al. 2023, YaRN (arXiv 2309.00071), attention scaling sqrt(1/t) = 0.1 ln s + 1";
  const float bf = static_cast<float>(beta);
  v.stream = online_softmax_stream([bf](float x, std::size_t, std::size_t) { return x * bf; },
                                   kIdentityPost);
  v.stream.bound = [beta](std::span<const double> l, std::size_t k) {
    std::vector<double> z(l.begin(), l.end()), p(l.size());
    for (auto& x : z) x *= beta;
    F::softmax_scaled<double>(l, p, beta);
    return stream_softmax_bound(z, k, 2.0, pmax_of(p));
  };
  v.stream.bound_rule = "online softmax 4n + 3k + 2 spread - 2 (docs/variants.md) + 2 roundings";
  return v;
}
SA_REGISTER_VARIANT(yarn, yarn_variant());

// ---- StableMax -----------------------------------------------------------------------------
Variant stablemax_variant() {
  Variant v = make("stablemax", "s(l_i)/sum s(l_j), s(x) = x + 1 (x >= 0), 1/(1 - x) (x < 0)",
                   [](auto z, auto p) {
                     using R = typename decltype(p)::value_type;
                     F::stablemax<R>(z, p);
                   });
  // s(x): at most 2 roundings (2u relative); the sum of n positive terms
  // (n - 1)u; the division u: relative error (n + 4)u on every weight.
  v.f32_bound = [](std::span<const double> l) {
    std::vector<double> p(l.size());
    F::stablemax<double>(l, p);
    return (static_cast<double>(l.size()) + 4.0) * pmax_of(p);
  };
  v.f32_bound_rule = "rounding analysis: relative error (n+4)u (positive terms)";
  v.predict = [](double) {
    return std::optional<Prediction>(Prediction{
        Dispersion::to_zero, "logits in [1, 1+g]: p_max <= (2+g)/(2(n-1)) -> 0 (Theta(1/n))"});
  };
  v.citation = "Prieto et al. 2025, Grokking at the edge of numerical stability (arXiv 2501.04697)";
  // The state is the sum of s(l): any merge tree adds the same n terms with
  // n - 1 additions, so the kernel's (n + 4)u holds for every split.
  struct SumState {
    float S;
  };
  v.stream = typed_stream<SumState>(
      StreamKind::bounded, [] { return SumState{0.0f}; },
      [](SumState& s, std::span<const float> c, std::size_t, std::size_t) {
        for (float x : c)
          if (x != -INFINITY) s.S += F::stablemax_s(x);
      },
      [](SumState& a, const SumState& b) { a.S += b.S; },
      [](const SumState& s, std::span<const float> l, std::span<float> p) {
        for (std::size_t i = 0; i < l.size(); ++i)
          p[i] = l[i] == -INFINITY ? 0.0f : F::stablemax_s(l[i]) / s.S;
      });
  v.stream.bound = [f = v.f32_bound](std::span<const double> l, std::size_t) { return f(l); };
  v.stream.bound_rule = "relative error (n+4)u in any summation order";
  return v;
}
SA_REGISTER_VARIANT(stablemax, stablemax_variant());

// ---- SA-Softmax --------------------------------------------------------------------------
Variant sa_softmax_variant() {
  Variant v = make("sa_softmax", "l_i softmax(l)_i (self-adjusting softmax)", [](auto z, auto p) {
    using R = typename decltype(p)::value_type;
    F::sa_softmax<R>(z, p);
  });
  // |l_i| times the softmax error (T7), plus the product's rounding u |p_i|.
  auto sm_pmax = [](std::span<const double> l) {
    std::vector<double> q(l.size());
    F::softmax<double>(l, q);
    return pmax_of(q);
  };
  v.f32_bound = [sm_pmax](std::span<const double> l) {
    std::vector<double> p(l.size());
    F::sa_softmax<double>(l, p);
    return max_abs_finite(l) * softmax_bound(l, 0.0, sm_pmax(l)) + pmax_of(p);
  };
  v.f32_bound_rule = "max|l| times T7 + one rounding of the product";
  v.predict = [](double) {
    return std::optional<Prediction>(
        Prediction{Dispersion::to_zero, "(1+g) times softmax's top weight, which T1 sends to 0"});
  };
  v.citation =
      "Zheng et al. 2025, Self-Adjust Softmax (SA-Softmax; EMNLP 2025, arXiv 2502.18277; the "
      "abstract checked)";
  v.stream = online_softmax_stream(kIdentityArg,
                                   [](float l, float q) { return l == -INFINITY ? 0.0f : l * q; });
  v.stream.bound = [sm_pmax](std::span<const double> l, std::size_t k) {
    std::vector<double> p(l.size());
    F::sa_softmax<double>(l, p);
    return max_abs_finite(l) * stream_softmax_bound(l, k, 0.0, sm_pmax(l)) + pmax_of(p);
  };
  v.stream.bound_rule = "max|l| times the online softmax bound (docs/variants.md) + the product";
  return v;
}
SA_REGISTER_VARIANT(sa_softmax, sa_softmax_variant());

// ---- power normalisation ------------------------------------------------------------------
Variant power_norm_variant(bool half) {
  Variant v = make(half ? "power_t2_b0.5" : "power_t2_b1",
                   half ? "relu(l_i)^tau/(sum relu(l_j)^tau)^beta, tau = 2, beta = 1/2"
                        : "relu(l_i)^tau/(sum relu(l_j)^tau)^beta, tau = 2, beta = 1",
                   [half](auto z, auto p) {
                     using R = typename decltype(p)::value_type;
                     F::power_norm2<R>(z, p, half);
                   });
  // q_i = (r_i/M)^2: division u, square 2u + u: 3u relative. S = sum q: its
  // terms' 3u plus n - 1 additions of nonnegative terms: (n + 2)u. beta = 1:
  // p = q/S: 3 + (n + 2) + 1 = (n + 6)u relative. beta = 1/2: sqrt(S) halves
  // S's error and adds u; M q (u) and the division (u):
  // 3 + 1 + 1 + (n + 2)/2 + 1 = (n/2 + 7)u relative.
  v.f32_bound = [half](std::span<const double> l) {
    std::vector<double> p(l.size());
    F::power_norm2<double>(l, p, half);
    const double n = static_cast<double>(l.size());
    return (half ? n / 2.0 + 7.0 : n + 6.0) * pmax_of(p);
  };
  v.f32_bound_rule = half ? "rounding analysis: relative error (n/2 + 7)u"
                          : "rounding analysis: relative error (n + 6)u";
  v.predict = [half](double) {
    return std::optional<Prediction>(Prediction{
        Dispersion::to_zero,
        half ? "logits in [1, 1+g]: p_top = (1+g)^2/((1+g)^2 + n - 1)^{1/2} -> 0 as n^{-1/2} "
               "(the total mass grows as n^{1/2})"
             : "logits in [1, 1+g]: p_top = (1+g)^2/((1+g)^2 + n - 1) -> 0 (Theta(1/n))"});
  };
  v.citation =
      "power normalisation ReLU(s)^tau/(sum ReLU(s)^tau)^beta (the issue-36 overflow and "
      "anti-dispersion probe; tau and beta chosen here)";
  // Streamed as (M, S) = (max relu, sum (relu/M)^2), merged by rescaling the
  // side with the smaller M by (M_small/M)^2: no r^2 is ever formed. The
  // identity (0, 0) is also the state of a chunk without a positive logit.
  struct PowerState {
    float M;
    float S;
  };
  v.stream = typed_stream<PowerState>(
      StreamKind::bounded,
      [] {
        return PowerState{0.0f, 0.0f};
      },
      [](PowerState& s, std::span<const float> c, std::size_t, std::size_t) {
        for (float x : c) {
          if (!(x > 0.0f)) continue;
          if (x > s.M) {
            const float q = s.M / x;
            s.S = s.S * (q * q) + 1.0f;
            s.M = x;
          } else {
            const float q = x / s.M;
            s.S += q * q;
          }
        }
      },
      [](PowerState& a, const PowerState& b) {
        if (!(b.M > 0.0f)) return;
        if (!(a.M > 0.0f)) {
          a = b;
          return;
        }
        if (a.M >= b.M) {
          const float q = b.M / a.M;
          a.S += b.S * (q * q);
        } else {
          const float q = a.M / b.M;
          a.S = a.S * (q * q) + b.S;
          a.M = b.M;
        }
      },
      [half](const PowerState& s, std::span<const float> l, std::span<float> p) {
        const float den = half ? std::sqrt(s.S) : s.S;
        for (std::size_t i = 0; i < l.size(); ++i) {
          if (!(l[i] > 0.0f) || !(s.M > 0.0f)) {
            p[i] = 0.0f;
            continue;
          }
          const float q = l[i] / s.M;
          p[i] = half ? s.M * (q * q) / den : (q * q) / den;
        }
      });
  // A term: its own (r/M)^2 (3u), at most R <= n + k - 2 rescales by a squared
  // ratio times S (the ratio u, its square 2u + u, the product u: 4u each),
  // n - 1 additions: S is
  // within 4R + n + 2 units relatively. Finish: q^2 (3u) and the division (u):
  // beta = 1: 5n + 4k - 2. beta = 1/2: sqrt halves S's error and adds u, M q^2
  // adds u: 3 + 1 + 1 + 1 + (4R + n + 2)/2 = 2.5n + 2k + 3.
  v.stream.bound = [half](std::span<const double> l, std::size_t k) {
    std::vector<double> p(l.size());
    F::power_norm2<double>(l, p, half);
    const double n = static_cast<double>(l.size()), kk = static_cast<double>(k);
    return (half ? 2.5 * n + 2.0 * kk + 3.0 : 5.0 * n + 4.0 * kk - 2.0) * pmax_of(p);
  };
  v.stream.bound_rule = half ? "online (max, sum of squared ratios): (2.5n + 2k + 3)u relative"
                             : "online (max, sum of squared ratios): (5n + 4k - 2)u relative";
  return v;
}
SA_REGISTER_VARIANT(power_b1, power_norm_variant(false));
SA_REGISTER_VARIANT(power_b05, power_norm_variant(true));

// ---- Cog attention (signed weights) -----------------------------------------------------------
Variant cog_variant() {
  Variant v =
      make("cog_signed", "sign(l_i) e^{|l_i|}/sum e^{|l_j|} (signed weights)", [](auto z, auto p) {
        using R = typename decltype(p)::value_type;
        F::cog_signed<R>(z, p);
      });
  // T7 over |l| (|.| and the sign flip are exact).
  auto abs_row = [](std::span<const double> l) {
    std::vector<double> a(l.begin(), l.end());
    for (auto& x : a)
      if (!std::isinf(x)) x = std::abs(x);
    return a;
  };
  v.f32_bound = [abs_row](std::span<const double> l) {
    std::vector<double> p(l.size());
    F::cog_signed<double>(l, p);
    return softmax_bound(abs_row(l), 0.0, pmax_of(p));
  };
  v.f32_bound_rule = "T7 over |l| (the sign is exact)";
  v.predict = [](double) {
    return std::optional<Prediction>(
        Prediction{Dispersion::to_zero, "positive logits: softmax of |l| = l, T1"});
  };
  v.citation =
      "Lv et al. 2024, Cog attention: more expressive attention with negative weights (arXiv "
      "2411.07176, id not checked)";
  v.stream = online_softmax_stream(
      [](float x, std::size_t, std::size_t) { return x == -INFINITY ? x : std::abs(x); },
      [](float l, float q) { return l < 0.0f && l != -INFINITY ? -q : (l == 0.0f ? 0.0f : q); });
  v.stream.bound = [abs_row](std::span<const double> l, std::size_t k) {
    std::vector<double> p(l.size());
    F::cog_signed<double>(l, p);
    return stream_softmax_bound(abs_row(l), k, 0.0, pmax_of(p));
  };
  v.stream.bound_rule = "online softmax over |l| (docs/variants.md)";
  return v;
}
SA_REGISTER_VARIANT(cog, cog_variant());

// ---- Forgetting Transformer (FoX) --------------------------------------------------------------
// The query attends from the last item; forget gate f constant (15/16 here;
// FoX learns f_t = sigmoid(w^T x_t + b) per token and head). The float32
// kernel forms Lambda by a running float32 sum and differences it, as a
// kernel does; the reference uses the exact (n - 1 - j) log f.
Variant fox_variant() {
  Variant v = make("fox_f15_16",
                   "softmax_j(l_j + Lambda_{n-1} - Lambda_j), Lambda = cumsum log f, f = 15/16",
                   [](auto z, auto p) {
                     using R = typename decltype(p)::value_type;
                     const R log_f = hd::log(R(15) / R(16));
                     F::fox<R>(z, p, log_f, std::is_same_v<R, float>);
                   });
  // The running sum Lambda_j errs by <= sum_{k<=j} u |Lambda_k| + 2u j |log f|
  // <= (j^2/2 + 2j) u |log f|; a difference of two: <= (n^2 + 4n) u |log f|.
  // The argument l_j + bias adds u |z_j|; softmax's Jacobian turns an argument
  // error into 2 p_max max|dz|.
  v.f32_bound = [](std::span<const double> l) {
    const double lf = std::log(15.0 / 16.0), n = static_cast<double>(l.size());
    std::vector<double> z(l.begin(), l.end()), p(l.size());
    for (std::size_t j = 0; j < l.size(); ++j) z[j] += static_cast<double>(l.size() - 1 - j) * lf;
    F::fox<double>(l, p, lf, false);
    return softmax_bound(z, 1.0, pmax_of(p)) + 2.0 * pmax_of(p) * (n * n + 4.0 * n) * std::abs(lf);
  };
  v.f32_bound_rule = "T7 + one rounding of l + bias + the float32 cumsum's (n^2 + 4n) u |log f|";
  v.not_claimed = {"special.neg_inf_mask"};  // a masked key keeps its place in the decay
  v.predict = [](double g) {
    (void)g;
    return std::optional<Prediction>(Prediction{
        Dispersion::bounded,
        "items at distance d weigh e^{-d/15.5}: p_top -> e^g/(e^g + 1/(16/15 - 1)) (geometric "
        "decay, independent of n)"});
  };
  v.citation = "Lin et al. 2025, Forgetting Transformer (FoX, ICLR 2025, arXiv 2503.02130)";
  // Streamed with the bias of item i formed directly as (n - 1 - i) log f (the
  // chunk knows its offset and the row length), so no cumsum crosses chunks.
  // Argument error: log f faithful (2u), the product (u), the sum (u):
  // |dz_i| <= u |z_i| + 3u |bias_i|; softmax's Jacobian: 2 p_max max|dz|.
  const float lf = std::log(15.0f / 16.0f);
  v.stream = online_softmax_stream(
      [lf](float x, std::size_t i, std::size_t n) {
        return x == -INFINITY ? x : x + static_cast<float>(n - 1 - i) * lf;
      },
      kIdentityPost);
  v.stream.bound = [](std::span<const double> l, std::size_t k) {
    const double lf64 = std::log(15.0 / 16.0);
    std::vector<double> z(l.begin(), l.end()), p(l.size());
    for (std::size_t j = 0; j < l.size(); ++j) z[j] += static_cast<double>(l.size() - 1 - j) * lf64;
    F::fox<double>(l, p, lf64, false);
    const double max_bias = static_cast<double>(l.size() - 1) * std::abs(lf64);
    return stream_softmax_bound(z, k, 1.0, pmax_of(p)) + 6.0 * pmax_of(p) * max_bias;
  };
  v.stream.bound_rule =
      "online softmax 4n + 3k + 2 spread - 2 (docs/variants.md) + argument rounding of l + (n-1-i) "
      "log f";
  return v;
}
SA_REGISTER_VARIANT(fox, fox_variant());

// ---- ASEntmax (adaptive-scalable entmax) ----------------------------------------------------
// alpha-entmax of length-scaled logits, entmax_alpha((delta + beta (ln n)^gamma) l). The paper
// (Vasylenko, Pitorro, Martins & Treviso, ICLR 2026, arXiv 2506.16640) learns beta per query
// (softplus of a projection of the query); delta, gamma and alpha here are ASSUMED (alpha = 1.5,
// delta = 1, gamma = 1, as a third-party implementation states them; not checked against the
// paper) and beta = 1/2 is chosen: docs/variants.md says what is assumed.
constexpr double kAsBeta = 0.5, kAsDelta = 1.0, kAsGamma = 1.0;

// The entmax15 bisection bound (entmax_variant above) on logits l.
double entmax15_bound(std::span<const double> l) {
  const double n = static_cast<double>(l.size()), a = max_abs_finite(l) / 2.0;
  const double D = 2.0 * (a + 1.0) + n + 4.0;
  return (2.0 * std::sqrt(n) + 2.0) * D + 2.0 * (2.0 * a + 1.0) + n + 7.0;
}

template <class R>
R as_scale(std::size_t live) {
  using std::log;
  using std::pow;
  const R ln = live > 1 ? R(log(R(static_cast<double>(live)))) : R(0);
  return R(kAsDelta) + R(kAsBeta) * (kAsGamma == 1.0 ? ln : R(pow(ln, R(kAsGamma))));
}

Variant asentmax_variant() {
  Variant v = make("asentmax_b0.5",
                   "1.5-entmax((delta + beta (ln n)^gamma) l), n = unmasked items; beta = 0.5 "
                   "chosen, delta = 1, gamma = 1, alpha = 1.5 assumed",
                   [](auto z, auto p) {
                     using R = typename decltype(p)::value_type;
                     const auto info = F::inspect<R>(z);
                     const R c = as_scale<R>(info.live);
                     std::vector<R> s(z.begin(), z.end());
                     for (auto& x : s)
                       if (!F::is_minf(x) && !F::is_pinf(x) && !F::is_nan(x)) x *= c;
                     F::entmax15<R>(s, p, std::is_same_v<R, Mp>);
                   });
  // c = delta + beta ln n in float: ln faithful (2u), times beta (exact, 1/2), plus delta (u):
  // c errs by <= 3u relatively; the product c l adds u: every argument carries <= 4u |c l_i|.
  // 1.5-entmax's Jacobian (diag(s) - s s^T / sum s) / 2, s_i = sqrt(p_i) on the support, has
  // infinity norm <= max s_i <= 1, so argument errors add 4 max|c l|; the bisection bound is
  // entmax15's on the scaled logits.
  v.f32_bound = [](std::span<const double> l) {
    const double c = as_scale<double>(static_cast<std::size_t>(live_count(l)));
    std::vector<double> z(l.begin(), l.end());
    for (auto& x : z) x *= c;
    return entmax15_bound(z) + 4.0 * max_abs_finite(z);
  };
  v.f32_bound_rule =
      "1.5-entmax bisection bound on the scaled logits + 4u argument error (Jacobian norm <= 1)";
  v.predict = [](double g) {
    return std::optional<Prediction>(Prediction{
        Dispersion::to_one,
        "1.5-entmax is one-hot once the scaled gap (1 + beta ln n) g >= 2, i.e. for n >= "
        "e^{(2/g - 1)/beta} (403 at g = 0.5, beta = 0.5): every g > 0 sharpens"});
  };
  v.citation =
      "Vasylenko, Pitorro, Martins & Treviso, Long-Context Generalization with Sparse Attention "
      "(ICLR 2026, arXiv 2506.16640); scale form delta + beta (log n)^gamma with delta = gamma = "
      "1, "
      "alpha = 1.5 ASSUMED from a third-party implementation, beta learned there (0.5 here)";
  v.stream = not_streamable(
      "tau solves sum (c z/2 - tau)_+^2 = 1 over the whole row (c depends on n too); no "
      "fixed-size state of a chunk determines the merged tau");
  return v;
}
SA_REGISTER_VARIANT(asentmax, asentmax_variant());

// ---- two-row variants (variant.h ABI 3) -------------------------------------------------------
// Their MPFR references are written here, apart from formulas.hpp, so that the
// reference shares no code with the float32 kernels it judges.

// Softmax of one row in MPFR: NaN -> all NaN, all masked -> zeros, +inf items share the mass.
std::vector<Mp> ref_softmax(std::span<const double> z) {
  std::vector<Mp> p(z.size(), Mp(0));
  std::size_t live = 0, pinf = 0;
  double m = -INFINITY;
  for (double x : z) {
    if (std::isnan(x)) return std::vector<Mp>(z.size(), Mp(NAN));
    if (x == -INFINITY) continue;
    ++live;
    if (x == INFINITY) ++pinf;
    m = std::max(m, x);
  }
  if (live == 0) return p;
  if (pinf > 0) {
    for (std::size_t i = 0; i < z.size(); ++i)
      if (z[i] == INFINITY) p[i] = Mp(1) / Mp(static_cast<double>(pinf));
    return p;
  }
  Mp sum(0);
  for (std::size_t i = 0; i < z.size(); ++i)
    if (z[i] != -INFINITY) {
      p[i] = exp(Mp(z[i]) - Mp(m));
      sum += p[i];
    }
  for (auto& x : p) x /= sum;
  return p;
}

double pmax_softmax(std::span<const double> z) {
  std::vector<double> q(z.size());
  F::softmax<double>(z, q);
  return pmax_of(q);
}

// ---- normalised SA-Softmax ----------------------------------------------------------------------
// Zheng et al. 2025, the abstract's normalised variant (arXiv 2502.18277v1 and EMNLP 2025):
// w_i = (l_i - a) / (b - a) softmax(l)_i, a = min(min l, 0), b = max(0, max l). The all-zero
// row (b - a = 0) gives w = 0: this project's choice (formulas.hpp).
std::vector<Mp> ref_sa_softmax_norm(std::span<const double> l) {
  auto p = ref_softmax(l);
  double lo = 0, hi = 0;  // a = min(min l, 0), b = max(0, max l)
  bool special = false;
  for (double x : l) {
    if (std::isnan(x) || x == INFINITY) special = true;  // ref_softmax's NaN / share of +inf
    if (std::isfinite(x)) {
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
  }
  if (special) return p;
  const Mp d = Mp(hi) - Mp(lo);
  for (std::size_t i = 0; i < l.size(); ++i)
    p[i] = (hi == lo || l[i] == -INFINITY) ? Mp(0) : (Mp(l[i]) - Mp(lo)) / d * p[i];
  return p;
}

// Online state: the softmax's (m, S) and the running min and max of the logits.
struct NormState {
  float m, S, lo, hi;
};

Variant sa_softmax_norm_variant() {
  Variant v = make("sa_softmax_norm",
                   "(l_i - min(min l, 0)) / (max(0, max l) - min(min l, 0)) softmax(l)_i "
                   "(normalised SA-Softmax; all-zero row -> 0, chosen here)",
                   [](auto z, auto p) {
                     using R = typename decltype(p)::value_type;
                     F::sa_softmax_norm<R>(z, p);
                   });
  v.reference = ref_sa_softmax_norm;
  auto wmax = [](std::span<const double> l) {
    std::vector<double> w(l.size());
    F::sa_softmax_norm<double>(l, w);
    return pmax_of(w);
  };
  // |w^ - w| <= f^ |p^ - p| + p |f^ - f| + u w^: f^ <= 1 (rounding is monotone and
  // l_i - a <= b - a), f's three roundings (l_i - a, b - a, the quotient; a and b are
  // members of the row or 0, exact) give 3u f, the product u: T7 + 4 max w.
  v.f32_bound = [wmax](std::span<const double> l) {
    return softmax_bound(l, 0.0, pmax_softmax(l)) + 4.0 * wmax(l);
  };
  v.f32_bound_rule = "T7 of softmax(l) + 3 roundings of the factor (in [0, 1]) + the product";
  v.predict = [](double) {
    return std::optional<Prediction>(Prediction{
        Dispersion::to_zero, "w_i <= softmax(l)_i (the factor is in [0, 1]); T1 sends it to 0"});
  };
  v.citation =
      "Zheng et al. 2025, Self-Adjust Softmax (EMNLP 2025, arXiv 2502.18277): the normalised "
      "variant of the abstract; the all-zero row's 0/0 is not established there, w = 0 is this "
      "project's choice";
  auto init = [] { return NormState{-INFINITY, 0.0f, INFINITY, -INFINITY}; };
  auto push = [](NormState& s, std::span<const float> c, std::size_t, std::size_t) {
    for (float x : c) {
      if (x == -INFINITY) continue;
      s.lo = std::min(s.lo, x);
      s.hi = std::max(s.hi, x);
      if (x > s.m) {
        s.S = (s.m == -INFINITY ? 0.0f : s.S * std::exp(s.m - x)) + 1.0f;
        s.m = x;
      } else {
        s.S += std::exp(x - s.m);
      }
    }
  };
  auto merge = [](NormState& a, const NormState& b) {
    if (b.m == -INFINITY) return;
    a.lo = std::min(a.lo, b.lo);
    a.hi = std::max(a.hi, b.hi);
    if (a.m == -INFINITY) {
      a.m = b.m;
      a.S = b.S;
    } else if (a.m >= b.m) {
      a.S += b.S * std::exp(b.m - a.m);
    } else {
      a.S = a.S * std::exp(a.m - b.m) + b.S;
      a.m = b.m;
    }
  };
  auto finish = [](const NormState& s, std::span<const float> l, std::span<float> w) {
    const float a = std::min(s.lo, 0.0f), b = std::max(0.0f, s.hi), d = b - a;
    for (std::size_t i = 0; i < l.size(); ++i)
      w[i] = (l[i] == -INFINITY || !(d > 0.0f)) ? 0.0f
                                                : ((l[i] - a) / d) * (std::exp(l[i] - s.m) / s.S);
  };
  v.stream = typed_stream<NormState>(StreamKind::bounded, init, push, merge, finish);
  // The online softmax's bound (docs/variants.md) in place of T7, the factor's as above.
  v.stream.bound = [wmax](std::span<const double> l, std::size_t k) {
    return stream_softmax_bound(l, k, 0.0, pmax_softmax(l)) + 4.0 * wmax(l);
  };
  v.stream.bound_rule =
      "online softmax bound (docs/variants.md) + 3 roundings of the factor + the product";
  return v;
}
SA_REGISTER_VARIANT(sa_softmax_norm, sa_softmax_norm_variant());

// ---- streaming with a second row (variant.h ABI 4) ----------------------------------------------
// One online-softmax step and merge on an (m, S) state, as online_softmax_stream's.
void online_add(OnlineState& s, float a) {
  if (a == -INFINITY) return;
  if (a > s.m) {
    s.S = (s.m == -INFINITY ? 0.0f : s.S * std::exp(s.m - a)) + 1.0f;
    s.m = a;
  } else {
    s.S += std::exp(a - s.m);
  }
}
void online_merge(OnlineState& a, const OnlineState& b) {
  if (b.m == -INFINITY) return;
  if (a.m == -INFINITY) {
    a = b;
  } else if (a.m >= b.m) {
    a.S += b.S * std::exp(b.m - a.m);
  } else {
    a.S = a.S * std::exp(a.m - b.m) + b.S;
    a.m = b.m;
  }
}
struct TwoStates {
  OnlineState a, b;
};
const auto kTwoInit = [] { return TwoStates{{-INFINITY, 0.0f}, {-INFINITY, 0.0f}}; };
const auto kTwoMerge = [](TwoStates& x, const TwoStates& y) {
  online_merge(x.a, y.a);
  online_merge(x.b, y.b);
};

// ---- differential attention ------------------------------------------------------------------
// Ye et al. 2024: softmax(A1) - lambda softmax(A2), two logit rows over the same keys. lambda is
// learned in the paper (re-parametrised; lambda_init = 0.8 - 0.6 exp(-0.3 (layer - 1)), recalled);
// lambda = 1/2 is chosen here (exact in float32, so lambda * p2 is exact).
constexpr double kDiffLambda = 0.5;

template <class R>
void diff_attention(std::span<const R> a1, std::span<const R> a2, std::span<R> out) {
  std::vector<R> p1(a1.size()), p2(a2.size());
  F::softmax<R>(a1, p1);
  F::softmax<R>(a2, p2);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = p1[i] - R(kDiffLambda) * p2[i];
}

Variant diff_variant() {
  Variant v;
  v.name = "diff_l0.5";
  v.formula = "softmax(A1)_i - lambda softmax(A2)_i, lambda = 0.5 (A2: the second row)";
  v.in2_kind = In2Kind::logits;
  v.in2 = "A2, the second logit row of the differential pair (same keys, masked with A1)";
  v.kernel32_2 = [](std::span<const float> a, std::span<const float> b, std::span<float> o) {
    diff_attention<float>(a, b, o);
  };
  v.eval64_2 = [](std::span<const double> a, std::span<const double> b, std::span<double> o) {
    diff_attention<double>(a, b, o);
  };
  v.reference_2 = [](std::span<const double> a, std::span<const double> b) {
    auto p1 = ref_softmax(a);
    const auto p2 = ref_softmax(b);
    for (std::size_t i = 0; i < p1.size(); ++i) p1[i] -= Mp(kDiffLambda) * p2[i];
    return p1;
  };
  // T7 for each softmax (lambda times the second: lambda * p2 is exact), plus the
  // subtraction's rounding u/2 |out| <= u/2.
  v.f32_bound_2 = [](std::span<const double> a, std::span<const double> b) {
    return softmax_bound(a, 0.0, pmax_softmax(a)) +
           kDiffLambda * softmax_bound(b, 0.0, pmax_softmax(b)) + 0.5;
  };
  v.f32_bound_rule = "T7(A1) + lambda T7(A2) + the subtraction's rounding";
  v.dispersion_in2 = 1.0;  // A2 uniform over the sweep's keys (its base logit)
  v.predict = [](double) {
    return std::optional<Prediction>(Prediction{
        Dispersion::to_zero, "T1 on softmax(A1); with A2 uniform the top weight is p1 - lambda/n"});
  };
  v.citation =
      "Ye et al. 2024, Differential Transformer (ICLR 2025, arXiv 2410.05258); lambda learned "
      "there (lambda_init = 0.8 - 0.6 e^{-0.3 (layer - 1)}, recalled), 0.5 chosen here";
  // Two online softmax states, (m1, S1) over A1 and (m2, S2) over A2.
  v.stream = typed_stream2<TwoStates>(
      StreamKind::bounded, kTwoInit,
      [](TwoStates& s, std::span<const float> c, std::span<const float> c2, std::size_t,
         std::size_t) {
        for (std::size_t k = 0; k < c.size(); ++k) {
          online_add(s.a, c[k]);
          online_add(s.b, c2[k]);
        }
      },
      kTwoMerge,
      [](const TwoStates& s, std::span<const float> a, std::span<const float> b,
         std::span<float> o) {
        for (std::size_t i = 0; i < o.size(); ++i) {
          const float p1 = a[i] == -INFINITY ? 0.0f : std::exp(a[i] - s.a.m) / s.a.S;
          const float p2 = b[i] == -INFINITY ? 0.0f : std::exp(b[i] - s.b.m) / s.b.S;
          o[i] = p1 - float(kDiffLambda) * p2;
        }
      });
  // The online softmax bound (docs/variants.md) for each row, lambda times the second, and the
  // subtraction's rounding.
  v.stream.bound2 = [](std::span<const double> a, std::span<const double> b, std::size_t k) {
    return stream_softmax_bound(a, k, 0.0, pmax_softmax(a)) +
           kDiffLambda * stream_softmax_bound(b, k, 0.0, pmax_softmax(b)) + 0.5;
  };
  v.stream.bound_rule =
      "online softmax bound of A1 + lambda times that of A2 + the subtraction's rounding";
  return v;
}
SA_REGISTER_VARIANT(diff_attention, diff_variant());

// ---- selective attention -----------------------------------------------------------------------
// Leviathan et al. 2024: softmax_j(l_j - F_ij), F_ij = sum_{k<i} ReLU(s_kj), s the selection
// logits of earlier queries k. The second row is s for a single earlier query (the paper's F for
// query i = 1), or an already accumulated F (>= 0, where the ReLU is the identity).
template <class R>
void selective(std::span<const R> l, std::span<const R> s, std::span<R> out) {
  std::vector<R> z(l.begin(), l.end());
  for (std::size_t i = 0; i < z.size(); ++i) {
    using std::max;
    z[i] = l[i] - max(R(0), s[i]);  // -inf, +inf and NaN pass through (s is finite)
  }
  F::softmax<R>(z, out);
}

Variant selective_variant() {
  Variant v;
  v.name = "selective";
  v.formula = "softmax_j(l_j - ReLU(s_j)) (s: the second row)";
  v.in2_kind = In2Kind::per_key;
  v.in2 =
      "s: selection logits of an earlier query for each key, or the accumulated F_ij = "
      "sum_{k<i} ReLU(s_kj) (>= 0)";
  v.kernel32_2 = [](std::span<const float> a, std::span<const float> b, std::span<float> o) {
    selective<float>(a, b, o);
  };
  v.eval64_2 = [](std::span<const double> a, std::span<const double> b, std::span<double> o) {
    selective<double>(a, b, o);
  };
  v.reference_2 = [](std::span<const double> a, std::span<const double> b) {
    std::vector<double> z(a.begin(), a.end());
    for (std::size_t i = 0; i < z.size(); ++i)
      if (std::isfinite(z[i])) z[i] -= std::max(0.0, b[i]);  // exact: both on the 2^-6 grid
    return ref_softmax(z);
  };
  // z = l - ReLU(s): one rounding (r = 1); T7 on z.
  v.f32_bound_2 = [](std::span<const double> a, std::span<const double> b) {
    std::vector<double> z(a.begin(), a.end());
    for (std::size_t i = 0; i < z.size(); ++i)
      if (std::isfinite(z[i])) z[i] -= std::max(0.0, b[i]);
    return softmax_bound(z, 1.0, pmax_softmax(z));
  };
  v.f32_bound_rule = "T7 on l - ReLU(s) + its one argument rounding";
  v.dispersion_in2 = 0.0;  // no selection: softmax
  v.predict = [](double) {
    return std::optional<Prediction>(
        Prediction{Dispersion::to_zero, "T1: with no selection (s = 0) it is softmax"});
  };
  v.citation =
      "Leviathan, Kalman & Matias 2024, Selective Attention Improves Transformer (arXiv "
      "2410.02703, id not checked); the paper's exemptions (the first token, a token masking "
      "itself) recalled, not modelled: the second row is taken as given";
  // One online softmax state over z = l - ReLU(s), formed item by item in the push.
  auto arg = [](float l, float s) { return l - std::max(0.0f, s); };
  v.stream = typed_stream2<OnlineState>(
      StreamKind::bounded,
      [] {
        return OnlineState{-INFINITY, 0.0f};
      },
      [arg](OnlineState& st, std::span<const float> c, std::span<const float> c2, std::size_t,
            std::size_t) {
        for (std::size_t k = 0; k < c.size(); ++k) online_add(st, arg(c[k], c2[k]));
      },
      online_merge,
      [arg](const OnlineState& st, std::span<const float> a, std::span<const float> b,
            std::span<float> o) {
        for (std::size_t i = 0; i < o.size(); ++i) {
          const float z = arg(a[i], b[i]);
          o[i] = z == -INFINITY ? 0.0f : std::exp(z - st.m) / st.S;
        }
      });
  // The online softmax bound on z with its one argument rounding (r = 1).
  v.stream.bound2 = [](std::span<const double> a, std::span<const double> b, std::size_t k) {
    std::vector<double> z(a.begin(), a.end());
    for (std::size_t i = 0; i < z.size(); ++i)
      if (std::isfinite(z[i])) z[i] -= std::max(0.0, b[i]);
    return stream_softmax_bound(z, k, 1.0, pmax_softmax(z));
  };
  v.stream.bound_rule = "online softmax bound on l - ReLU(s) + its one argument rounding";
  return v;
}
SA_REGISTER_VARIANT(selective, selective_variant());

// ---- LASER -------------------------------------------------------------------------------------
// Duvvuri & Dhillon 2025: attention in exponentiated value space, o = log sum_j p_j e^{v_j},
// p = softmax(l), for one value dimension v (the second row). Computed underflow-safe as the
// difference of two log-sum-exps, each shifted by its own maximum:
//   o = (M - m) + log(T / S),  M = max_j (l_j + v_j), T = sum e^{(l_j + v_j) - M},
//                              m = max_j l_j,         S = sum e^{l_j - m},
// so T and S lie in [1, n] whatever the spreads (the form m_v + log(T/S) with T = sum
// e^{l_j - m} e^{v_j - m_v}, which issue 36 first stated, lets T underflow once spread_l +
// spread_v > 87: docs/variants.md). Masked keys are absent; a fully masked row gives 0; +inf
// logits share the mass (o = log of the mean of e^{v_j} over them).
template <class R>
void laser(std::span<const R> l, std::span<const R> v, std::span<R> out) {
  using std::exp;
  using std::log;
  const auto info = F::inspect<R>(l);
  if (info.nan) {
    out[0] = F::nan_of<R>();
    return;
  }
  if (info.live == 0) {
    out[0] = R(0);
    return;
  }
  if (info.pinf > 0) {  // the +inf items share the mass: o = log mean_{l_j = +inf} e^{v_j}
    R M = -F::inf_of<R>();
    for (std::size_t j = 0; j < l.size(); ++j)
      if (F::is_pinf(l[j]) && v[j] > M) M = v[j];
    R T(0);
    for (std::size_t j = 0; j < l.size(); ++j)
      if (F::is_pinf(l[j])) T += R(exp(R(v[j] - M)));
    out[0] = M + R(log(R(T / R(static_cast<double>(info.pinf)))));
    return;
  }
  R M = -F::inf_of<R>();
  for (std::size_t j = 0; j < l.size(); ++j)
    if (!F::is_minf(l[j]) && R(l[j] + v[j]) > M) M = R(l[j] + v[j]);
  R S(0), T(0);
  for (std::size_t j = 0; j < l.size(); ++j) {
    if (F::is_minf(l[j])) continue;
    S += R(exp(R(l[j] - info.max_finite)));
    T += R(exp(R(R(l[j] + v[j]) - M)));
  }
  out[0] = R(M - info.max_finite) + R(log(R(T / S)));
}

// max_j |l_j + v_j| and the spread of l + v over the unmasked finite keys.
std::pair<double, double> laser_sum_range(std::span<const double> a, std::span<const double> b) {
  double lo = INFINITY, hi = -INFINITY, A = 0;
  for (std::size_t j = 0; j < a.size(); ++j)
    if (std::isfinite(a[j])) {
      const double s = a[j] + b[j];
      lo = std::min(lo, s);
      hi = std::max(hi, s);
      A = std::max(A, std::abs(s));
    }
  return {A, hi >= lo ? hi - lo : 0.0};
}

// The bound of docs/variants.md ("LASER's rounding bound"), in u = 2^-24, first order with
// faithful exp and log (2u), rounded up by 1 for the second-order terms:
//   2n + 4 + A + W + spread_l + 2 ln n + 2 max|v|,
// A = max |l_j + v_j|, W = spread(l + v), over the unmasked keys; for a row with +inf logits
// (k of them) 2k + 4 + 3 max|v| + 2 ln k <= 2n + 4 + 3 max|v| + 2 ln n.
double laser_bound(std::span<const double> a, std::span<const double> b) {
  std::size_t live = 0, pinf = 0;
  for (double x : a) {
    live += x != -INFINITY && !std::isnan(x);
    pinf += x == INFINITY;
  }
  const double n = static_cast<double>(std::max<std::size_t>(live, 1));
  std::vector<double> vl;
  for (std::size_t j = 0; j < a.size(); ++j)
    if (a[j] != -INFINITY) vl.push_back(b[j]);
  const double vmax = max_abs_finite(vl);
  if (pinf > 0) return 2.0 * n + 4.0 + 3.0 * vmax + 2.0 * std::log(n);
  const auto [A, W] = laser_sum_range(a, b);
  return 2.0 * n + 4.0 + A + W + spread(a) + 2.0 * std::log(n) + 2.0 * vmax;
}

// Streamed (k chunks): S's relative error is the online bound 4n + 3k + 2 spread_l - 2, T's the
// same over l + v plus A = max|l + v| for the rounding of l_j + v_j; then, as in laser_bound,
// the quotient u, log 2 ln n, M - m and the final sum max|v| each, rounded up by 1:
//   8n + 6k + 2 spread_l + 2 W + A + 2 ln n + 2 max|v| - 2.
double laser_stream_bound(std::span<const double> a, std::span<const double> b, std::size_t k) {
  std::size_t live = 0;
  std::vector<double> vl;
  for (std::size_t j = 0; j < a.size(); ++j)
    if (a[j] != -INFINITY) {
      ++live;
      vl.push_back(b[j]);
    }
  const double n = static_cast<double>(std::max<std::size_t>(live, 1)), kk = double(k);
  const auto [A, W] = laser_sum_range(a, b);
  return 8.0 * n + 6.0 * kk + 2.0 * spread(a) + 2.0 * W + A + 2.0 * std::log(n) +
         2.0 * max_abs_finite(vl) - 2.0;
}

Variant laser_variant() {
  Variant v;
  v.name = "laser";
  v.formula =
      "log sum_j softmax(l)_j e^{v_j} = (M - m) + log(sum e^{l_j + v_j - M} / sum e^{l_j - m}), "
      "M = max(l + v), m = max l (v: second row)";
  v.in2_kind = In2Kind::per_key;
  v.scalar_output = true;
  v.in2 = "v: one value dimension, a value per key (the output is one number per row)";
  v.kernel32_2 = [](std::span<const float> a, std::span<const float> b, std::span<float> o) {
    laser<float>(a, b, o);
  };
  v.eval64_2 = [](std::span<const double> a, std::span<const double> b, std::span<double> o) {
    laser<double>(a, b, o);
  };
  // Reference: log sum e^{l_j + v_j - M} - log sum e^{l_j - M} in MPFR (an identity of the
  // definition, evaluated without the kernel's m_v split).
  v.reference_2 = [](std::span<const double> a, std::span<const double> b) {
    std::size_t live = 0, pinf = 0;
    double m = -INFINITY;
    for (double x : a) {
      if (std::isnan(x)) return std::vector<Mp>{Mp(NAN)};
      if (x == -INFINITY) continue;
      ++live;
      if (x == INFINITY) ++pinf;
      m = std::max(m, x);
    }
    if (live == 0) return std::vector<Mp>{Mp(0)};
    Mp S(0), T(0);
    for (std::size_t j = 0; j < a.size(); ++j) {
      if (pinf ? a[j] != INFINITY : a[j] == -INFINITY) continue;
      const Mp arg = pinf ? Mp(0) : Mp(a[j]) - Mp(m);
      S += exp(arg);
      T += exp(arg + Mp(b[j]));
    }
    return std::vector<Mp>{log(T) - log(S)};
  };
  v.f32_bound_2 = laser_bound;
  v.f32_bound_rule =
      "LASER, two shifted log-sum-exps: 2n + 4 + max|l + v| + spread(l + v) + spread_l + 2 ln n "
      "+ 2 max|v| (docs/variants.md; no underflow: T, S in [1, n])";
  v.citation =
      "Duvvuri & Dhillon 2025, LASER: Attention with Exponential Transformation (ICML 2025, "
      "arXiv 2411.03493); one value dimension; the paper's log-weighted-sum-exp trick shifts the "
      "values by their max m_v (the form that underflows), this kernel forms two shifted "
      "log-sum-exps instead (the same value)";
  // Two online log-sum-exp states: (m, S) over l and (M, T) over l + v; finish
  // o = (M - m) + log(T / S) as the kernel does.
  v.stream = typed_stream2<TwoStates>(
      StreamKind::bounded, kTwoInit,
      [](TwoStates& s, std::span<const float> c, std::span<const float> c2, std::size_t,
         std::size_t) {
        for (std::size_t k = 0; k < c.size(); ++k) {
          if (c[k] == -INFINITY) continue;  // a masked key is absent from both sums
          online_add(s.a, c[k]);
          online_add(s.b, c[k] + c2[k]);
        }
      },
      kTwoMerge,
      [](const TwoStates& s, std::span<const float>, std::span<const float>, std::span<float> o) {
        o[0] = s.a.m == -INFINITY ? 0.0f : (s.b.m - s.a.m) + std::log(s.b.S / s.a.S);
      });
  v.stream.bound2 = laser_stream_bound;
  v.stream.bound_rule =
      "LASER streamed: the online bound 4n + 3k + 2 spread - 2 (docs/variants.md) for S (over l) "
      "and T (over l + v, + max|l + v| for its argument rounding), then as the kernel's bound";
  return v;
}
SA_REGISTER_VARIANT(laser, laser_variant());

}  // namespace
}  // namespace sa::variants
