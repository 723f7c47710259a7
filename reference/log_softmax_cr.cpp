#include "reference/log_softmax_cr.hpp"

#include <cmath>
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
constexpr double kInf = std::numeric_limits<double>::infinity();

void check_args(std::span<const double> l, double theta, const char* what) {
  if (l.empty())
    throw std::invalid_argument(std::string(what) +
                                ": the row has no logits (n = 0); expected n >= 1");
  if (!(theta > 0.0) || !std::isfinite(theta))
    throw std::invalid_argument(std::string(what) + ": temperature " + std::to_string(theta) +
                                " is not a finite number > 0");
}

}  // namespace

using fast::log_of;
using fast::LogS;

double log_sum_exp_rounded(DType t, std::span<const double> l, double theta, const CrOptions& o) {
  check_args(l, theta, "log_sum_exp");
  CrStats st;
  st.elements = 1;
  auto finish = [&](double r) {
    if (o.stats) *o.stats += st;
    return r;
  };
  auto mpfr = [&] {
    st.mpfr = 1;
    return finish(round_to(t, log_sum_exp(l, theta)));
  };
  if (o.path == RefPath::mpfr_only) return mpfr();
  fast::RowSums row(l, theta, o);
  if (!row.fast_ok()) return mpfr();
  // lse = m + log S exactly (m is a double); v = dd_add(m, L^) adds <= 3.01
  // u^2 |v|: |lse - v| <= eta + 3.01 u^2 |v.hi|, the error given to the test.
  auto attempt = [&](const DD& Sv, double eps_S) {
    const LogS ls = log_of(Sv, eps_S);
    const DD v = fast::dd_add(DD{row.m(), 0.0}, ls.L);
    const double err = (ls.eta + 3.01 * u * u * std::abs(v.hi)) * fast::kSafe;
    return std::isfinite(err) ? fast::round_dd(t, v, err)
                              : std::numeric_limits<double>::quiet_NaN();
  };
  row.level1(nullptr);
  double r = attempt(DD{row.S1, 0.0}, row.eps_S);
  if (!std::isnan(r)) {
    st.level1 = 1;
    return finish(r);
  }
  if (o.fast_levels >= 2) {
    row.level2();
    r = attempt(row.S2, row.eps_S2);
    if (!std::isnan(r)) {
      st.level2 = 1;
      return finish(r);
    }
  }
  return mpfr();
}

std::vector<double> log_softmax_rounded(DType t, std::span<const double> l, double theta,
                                        const CrOptions& o) {
  check_args(l, theta, "log_softmax");
  const std::size_t n = l.size();
  CrStats st;
  st.elements = static_cast<std::int64_t>(n);
  auto finish = [&](std::vector<double> out) {
    if (o.stats) *o.stats += st;
    return out;
  };
  auto whole_row_mpfr = [&] {
    st.mpfr = st.elements;
    const std::vector<Mp> p = log_softmax(l, theta);
    std::vector<double> out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = round_to(t, p[i]);
    return finish(std::move(out));
  };
  if (o.path == RefPath::mpfr_only) return whole_row_mpfr();
  fast::RowSums row(l, theta, o);
  if (!row.fast_ok()) return whole_row_mpfr();

  // x_i = d_i - log S. v = dd_add(d_i, -L^) adds <= 3.01 u^2 |v|; with the
  // argument's error (RowSums::arg_error) and L^'s (log_of): |x_i - v| <=
  // arg_error + eta + 3.01 u^2 |v.hi|, the error given to the test. A d_i
  // that overflows double (< -1.7e308) makes x_i -inf in every target.
  auto pass = [&](const LogS& ls, const std::vector<std::size_t>* only, std::vector<double>& out,
                  std::vector<std::size_t>& open) {
    auto one = [&](std::size_t i) {
      double dh, dl;
      if (!row.arg(i, dh, dl, false)) {
        out[i] = -kInf;  // masked
        return;
      }
      if (!std::isfinite(dh)) {
        out[i] = -kInf;
        return;
      }
      const DD v = fast::dd_add(DD{dh, dl}, DD{-ls.L.hi, -ls.L.lo});
      const double err =
          (row.arg_error(i, dh) + ls.eta + 3.01 * u * u * std::abs(v.hi)) * fast::kSafe;
      const double r =
          std::isfinite(err) ? fast::round_dd(t, v, err) : std::numeric_limits<double>::quiet_NaN();
      if (std::isnan(r))
        open.push_back(i);
      else
        out[i] = r;
    };
    if (only)
      for (std::size_t i : *only) one(i);
    else
      for (std::size_t i = 0; i < n; ++i) one(i);
  };
  std::vector<double> out(n);
  std::vector<std::size_t> open;
  row.level1(nullptr);
  pass(log_of(DD{row.S1, 0.0}, row.eps_S), nullptr, out, open);
  const auto n_open = static_cast<std::int64_t>(open.size());
  st.level1 = static_cast<std::int64_t>(n) - n_open;
  if (n_open == 0) return finish(std::move(out));
  if (o.fast_levels >= 2) {
    row.level2();
    std::vector<std::size_t> still;
    pass(log_of(row.S2, row.eps_S2), &open, out, still);
    open.swap(still);
  }
  const auto n_mpfr = static_cast<std::int64_t>(open.size());
  st.level2 = n_open - n_mpfr;
  if (n_mpfr == 0) return finish(std::move(out));
  st.mpfr = n_mpfr;
  const std::vector<Mp> p = log_softmax(l, theta);
  for (std::size_t i : open) out[i] = round_to(t, p[i]);
  return finish(std::move(out));
}

}  // namespace sa::ref
