#include "reference/adaptive_cr.hpp"

#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "reference/rounding.hpp"
#include "reference/ziv_row.hpp"
#include "theory/adaptive_temperature.hpp"

namespace sa::ref {
namespace {

using fast::DD;
using fast::Estimate;
using fast::u;
constexpr double kInf = std::numeric_limits<double>::infinity();

// The polynomial's coefficients (highest degree first, the exact decimals
// -0.037, 0.481, -2.3, 4.917, -1.791) as double-doubles: hi = RN(c), lo =
// RN(c - hi), |hi + lo - c| <= u^2 |c|.
const std::array<DD, 5>& coefficients() {
  static const std::array<DD, 5> c = [] {
    PrecisionScope prec(256);
    std::array<DD, 5> a{};
    for (int k = 0; k < 5; ++k) {
      const Mp x = theory::adaptive_coefficient<Mp>(k);
      const double hi = x.convert_to<double>();
      a[static_cast<std::size_t>(k)] = DD{hi, Mp(x - Mp(hi)).convert_to<double>()};
    }
    return a;
  }();
  return c;
}

bool exactly_one(const Estimate& b) { return b.err == 0 && b.v.hi == 1 && b.v.lo == 0; }

}  // namespace

// beta for H within H.err of the double-double H.v.
//  The function. theory::adaptive_beta is 1 for H <= 0.5, else max(poly(H),
//  1). poly' = -0.148 H^3 + 1.443 H^2 - 4.6 H + 4.917 is decreasing on [-1,
//  0.85] (poly'' < 0 there: its roots are ~2.8 and ~3.7) and poly'(0.85) >
//  1.9, so poly is increasing there and below its root ~0.849 of poly = 1:
//  poly(H) < 1 on [-1, 0.849]. So beta(H) = max(poly(H), 1) for every H >=
//  -1 (checked: H.v - H.err >= -0.5; the paper's H >= -1e-9, Shannon's >= 0).
//  The value. y = poly(H.v) by Horner in double-double with coefficients
//  within u^2: each of the 4 steps is a dd_mul (4u^2) and a dd_add (3.01u^2),
//  so |y - poly(H.v)| <= (8 * 4.01u^2 * 1.01 + u^2) Pbar(hm) <= 34u^2
//  Pbar(hm), Pbar(h) = sum |c_k| h^k, hm >= |H.v| + H.err. The input:
//  |poly(H.v) - poly(H)| <= max |poly'| H.err <= D(hm) H.err, D(h) = 0.148 h^3
//  + 1.443 h^2 + 4.6 h + 4.917. So |y - poly(H)| <= err (D and Pbar are
//  evaluated in double on positive terms; the factor 1.01 covers that).
//  max(., 1) is 1-Lipschitz, so v = max(y, 1) is within err of beta. When y
//  + err < 1 surely, beta is exactly 1 (returned with err 0).
Estimate fast::beta_of(const Estimate& H) {
  if (!std::isfinite(H.err) || !(H.err < 0x1p-30)) return {DD{1, 0}, kInf};
  const double hm = (std::abs(H.v.hi) + std::abs(H.v.lo) + H.err) * fast::kSafe;
  if (!(H.v.hi - H.err >= -0.5) || !(hm <= 64)) return {DD{1, 0}, kInf};
  const auto& c = coefficients();
  DD y = c[0];
  for (std::size_t k = 1; k < 5; ++k) y = fast::dd_add(fast::dd_mul(y, H.v), c[k]);
  const double D = ((0.148 * hm + 1.443) * hm + 4.6) * hm + 4.917;
  const double Pbar = (((0.037 * hm + 0.481) * hm + 2.3) * hm + 4.917) * hm + 1.791;
  const double err = 1.01 * (D * H.err + 34 * u * u * Pbar) * fast::kSafe;
  if (y.hi + 1.01 * (std::abs(y.lo) + err) + 0x1p-50 * (1 + std::abs(y.hi)) < 1)
    return {DD{1, 0}, 0.0};
  if (y.hi < 1 || (y.hi == 1 && y.lo < 0)) return {DD{1, 0}, err};  // y < 1: max(y, 1) = 1
  return {y, err};
}

AdaptiveRounded adaptive_softmax_rounded(DType t, std::span<const double> l, double theta,
                                         EntropyDefinition def, const CrOptions& o) {
  if (l.empty())
    throw std::invalid_argument("adaptive_softmax: the row has no logits (n = 0); expected n >= 1");
  if (!(theta > 0.0) || !std::isfinite(theta))
    throw std::invalid_argument("adaptive_softmax: temperature " + std::to_string(theta) +
                                " is not a finite number > 0");
  const std::size_t n = l.size();
  CrStats st;
  st.elements = static_cast<std::int64_t>(n) + 2;
  std::optional<AdaptiveResult> mp;  // the MPFR reference, computed at most once
  auto exact = [&]() -> const AdaptiveResult& {
    if (!mp) mp = adaptive_softmax(l, theta, def);
    return *mp;
  };
  AdaptiveRounded r;
  auto finish = [&] {
    if (o.stats) *o.stats += st;
    return std::move(r);
  };
  auto whole = [&] {
    const AdaptiveResult& e = exact();
    r.weights.resize(n);
    for (std::size_t i = 0; i < n; ++i) r.weights[i] = round_to(t, e.weights[i]);
    r.beta = round_to(t, e.beta);
    r.entropy = round_to(t, e.entropy);
    st.mpfr = st.elements;
    return finish();
  };
  if (o.path == RefPath::mpfr_only) return whole();
  fast::RowSums row(l, theta, o);
  if (!row.fast_ok()) return whole();

  auto entropy_at = [&](int level) {
    return def == EntropyDefinition::shannon ? fast::shannon_entropy_estimate(row, level)
                                             : fast::paper_entropy_estimate(row, level);
  };
  const Estimate H1 = entropy_at(1), B1 = fast::beta_of(H1);
  std::optional<Estimate> H2, B2;
  auto level2 = [&] {
    if (!H2) H2 = entropy_at(2), B2 = fast::beta_of(*H2);
  };
  // The entropy and beta: the first level whose estimate decides the
  // rounding (round_dd's test), else MPFR.
  auto decide = [&](const Estimate& a, const std::function<Estimate()>& b,
                    const std::function<const Mp&()>& m) {
    double x = fast::round_estimate(t, a);
    if (!std::isnan(x)) {
      ++st.level1;
      return x;
    }
    if (o.fast_levels >= 2) {
      x = fast::round_estimate(t, b());
      if (!std::isnan(x)) {
        ++st.level2;
        return x;
      }
    }
    ++st.mpfr;
    return round_to(t, m());
  };
  r.entropy = decide(
      H1,
      [&] {
        level2();
        return *H2;
      },
      [&]() -> const Mp& { return exact().entropy; });
  r.beta = decide(
      B1,
      [&] {
        level2();
        return *B2;
      },
      [&]() -> const Mp& { return exact().beta; });

  // The weights: softmax's levels on the row of beta z, with level 1's beta
  // (within B1.err) and level 2's (within B2.err); a beta certified to be
  // exactly 1 uses the row of z itself. An infinite err makes the row
  // refuse the fast path (fast_ok false): its items stay open.
  std::optional<fast::RowSums> r1, r2;
  fast::RowSums* first = &row;
  if (!exactly_one(B1)) first = &r1.emplace(l, theta, o, B1.v, std::min(B1.err, 1.0));
  auto second = [&]() -> fast::RowSums* {
    if (exactly_one(B1)) return &row;
    level2();
    if (exactly_one(*B2)) return &row;
    return &r2.emplace(l, theta, o, B2->v, std::min(B2->err, 1.0));
  };
  r.weights = fast::softmax_levels(
      t, *first, second,
      [&](std::vector<double>& out, const std::vector<std::size_t>& open) {
        const AdaptiveResult& e = exact();
        for (std::size_t i : open) out[i] = round_to(t, e.weights[i]);
      },
      o, st);
  return finish();
}

}  // namespace sa::ref
