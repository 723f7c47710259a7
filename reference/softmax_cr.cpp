#include "reference/softmax_cr.hpp"

#include <omp.h>

#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>

#include "reference/rounding.hpp"
#include "reference/softmax.hpp"
#include "reference/ziv_row.hpp"

namespace sa::ref {
namespace {

using fast::DD;
using fast::u;

void check_args(std::span<const double> l, double theta) {
  if (l.empty())
    throw std::invalid_argument("softmax: the row has no logits (n = 0); expected n >= 1");
  if (!(theta > 0.0) || !std::isfinite(theta))
    throw std::invalid_argument("softmax: temperature " + std::to_string(theta) +
                                " is not a finite number > 0");
}

// The MPFR-only path: the reference's weights rounded to t, element by element.
std::vector<double> mpfr_softmax(DType t, std::span<const double> l, double theta) {
  const std::vector<Mp> p = softmax(l, theta);
  std::vector<double> out(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) out[i] = round_to(t, p[i]);
  return out;
}

}  // namespace

std::vector<double> softmax_rounded(DType t, std::span<const double> l, double theta,
                                    const CrOptions& o) {
  check_args(l, theta);
  CrStats st;
  st.elements = static_cast<std::int64_t>(l.size());
  auto finish = [&](std::vector<double> out) {
    if (o.stats) *o.stats += st;
    return out;
  };
  if (o.path == RefPath::mpfr_only) {
    st.mpfr = st.elements;
    return finish(mpfr_softmax(t, l, theta));
  }
  fast::RowSums row(l, theta, o);
  if (!row.fast_ok()) {
    st.mpfr = st.elements;
    return finish(mpfr_softmax(t, l, theta));
  }
  return finish(fast::softmax_levels(
      t, row, [&] { return &row; },
      [&](std::vector<double>& out, const std::vector<std::size_t>& open) {
        const std::vector<Mp> p = softmax(l, theta);
        for (std::size_t i : open) out[i] = round_to(t, p[i]);
      },
      o, st));
}

}  // namespace sa::ref

namespace sa::ref::fast {

std::vector<double> softmax_levels(DType t, RowSums& row, const std::function<RowSums*()>& row2,
                                   const MpfrFill& mpfr_fill, const CrOptions& o, CrStats& st) {
  const std::size_t n = row.size();
  const int nt = row.threads();
  std::vector<double> out(n);
  std::vector<std::size_t> open;  // not yet certified, in index order
  if (!row.fast_ok()) {
    for (std::size_t i = 0; i < n; ++i) open.push_back(i);
  } else {
    // Level 1. out holds e_i = exp1(d_i) until the test replaces it with the
    // rounded weight; masked and cut-off elements hold +0 throughout (their
    // answer: weight < 2^-160 rounds to +0 in float32, bfloat16 and float16;
    // not in float64, where the cut-off ones stay open and reach MPFR: the
    // exp levels are proven for d >= -111 only).
    row.level1(out.data());
    const double S1 = row.S1;
    // p^_i = RN(e_i / S1) = p_i (1 + a)(1 + c) / (1 + b), |a| <= eps_e, |b| <=
    // eps_S, |c| <= u (RowSums): |p^_i - p_i| <= eps1 p_i.
    const double eps1 = (row.eps_e + row.eps_S + u) * kSafe;
    // The rounding test (level 1). p_i lies in [p^/(1 + eps1), p^/(1 - eps1)]
    // within [p^ (1 - 2 eps1), p^ (1 + 2 eps1)]; with w = 2 eps1 + 2u,
    // RN(1 - w) <= 1 - 2 eps1 - 1.5u, so lo = RN(p^ RN(1 - w)) <= p^ (1 - 2
    // eps1 - 1.5u)(1 + u) <= p^ (1 - 2 eps1); likewise hi >= p^ (1 + 2 eps1).
    // So [lo, hi] holds p_i, and if lo and hi round alike, so does p_i.
    std::vector<std::vector<std::size_t>> open_parts(static_cast<std::size_t>(nt));
    const bool test1 = eps1 < 0x1p-30 && t != DType::float64;  // float64: level 2
    const double w = 2 * eps1 + 2 * u;
    const double f_lo = 1 - w, f_hi = 1 + w;
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
      auto& mine = open_parts[static_cast<std::size_t>(omp_get_thread_num())];
#pragma omp for schedule(static)
      for (std::size_t i = 0; i < n; ++i) {
        if (out[i] == 0) {  // masked, or below e^-111: +0, exact (float64: see below)
          double dh, dl;
          if (t == DType::float64 && row.arg(i, dh, dl, false)) mine.push_back(i);
          continue;
        }
        const double p = out[i] / S1;
        if (test1 && decided(t, p * f_lo, p * f_hi)) {
          out[i] = round_double(t, p);
        } else {
          mine.push_back(i);
        }
      }
    }
    for (const auto& part : open_parts) open.insert(open.end(), part.begin(), part.end());
  }
  const auto n_open = static_cast<std::int64_t>(open.size());
  st.level1 += static_cast<std::int64_t>(n) - n_open;
  if (n_open == 0) return out;

  // Level 2 (on row2(): the same row for softmax, adaptive softmax's row with
  // a sharper beta): p2 = dd_div(exp2(d_i), S2); |exp2 - e^(d_i)| <= eps_e2
  // e^(d_i), |S2 - S| <= eps_S2 S, the quotient adds <= 64u^2: |p2 - p_i| <=
  // eps2 p_i <= 2 eps2 p2.hi, the error given to the test (round_dd). An
  // item row2 cuts off (d_i < -111) has weight < 2^-160: +0 (float64: open).
  RowSums* r2 = o.fast_levels >= 2 ? row2() : nullptr;
  if (r2 && r2->fast_ok()) {
    r2->level2();
    const double eps2 = (r2->eps_e2 + r2->eps_S2 + 64 * u * u) * kSafe;
    if (eps2 < 0x1p-60) {
      const ExpTables& T = exp_tables();
      std::vector<std::size_t> still;
      for (std::size_t i : open) {
        double dh, dl;
        if (!r2->arg(i, dh, dl)) {
          if (t == DType::float64 && r2->arg(i, dh, dl, false))
            still.push_back(i);
          else
            out[i] = 0;
          continue;
        }
        const DD p = dd_div(exp2(T, dh, dl), r2->S2);
        const double r = round_dd(t, p, 2 * eps2 * p.hi);
        if (std::isnan(r))
          still.push_back(i);
        else
          out[i] = r;
      }
      open.swap(still);
    }
  }
  const auto n_mpfr = static_cast<std::int64_t>(open.size());
  st.level2 += n_open - n_mpfr;
  if (n_mpfr == 0) return out;

  // Level 3: MPFR for the outputs still open.
  st.mpfr += n_mpfr;
  mpfr_fill(out, open);
  return out;
}

}  // namespace sa::ref::fast
