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
#include <type_traits>

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
  return v;
}
SA_REGISTER_VARIANT(softpick, softpick_variant(false));
SA_REGISTER_VARIANT(softpick_wrong, softpick_variant(true));

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
  return v;
}
SA_REGISTER_VARIANT(entmax, entmax_variant());

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
  return v;
}
SA_REGISTER_VARIANT(relu, relu_variant());

}  // namespace
}  // namespace sa::variants
