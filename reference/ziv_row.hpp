// Internal to the correctly rounded references (softmax_cr, log_softmax_cr):
// the shared first steps of a row, with their proven error bounds.
//
// For a row of logits l and temperature theta, with z_i = l_i / theta and
// m = max_i RN(l_i / theta), every reference works with d_i = z_i - m and
// S = sum_i e^(d_i) (masked logits excluded). RowSums gives
//  - arg(i): d_i as a double-double (dh, dl), |dh + dl - d_i| <= delta_i
//    (arg_error(i)); 0 for theta = 1 (exact); for the scaled row of
//    adaptive softmax, d_i = beta (z_i - m) with delta() covering beta's
//    error;
//  - level1(e): S1 with |S1 - S| <= eps_S S (and e_i = exp1(d_i) stored when
//    asked), in double with Sum2;
//  - level2(): S2, a double-double with |S2 - S| <= eps_S2 S.
// Range: rows the fast path takes (fast_ok): no NaN, no +inf, at least one
// logit > -inf, no finite logit whose quotient by theta overflows, and |m|
// <= 2^50 when theta != 1. Others go to MPFR whole (exact or rare).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "reference/fast_arith.hpp"
#include "reference/ziv.hpp"

namespace sa::ref::fast {

class RowSums {
 public:
  RowSums(std::span<const double> l, double theta, const CrOptions& o);
  // The row of beta * z (adaptive softmax): d_i = beta (z_i - m), with beta
  // known as the double-double b, |b - beta| <= beta_err, beta >= 1 (b.hi in
  // [1, 4], beta_err < 2^-30; otherwise fast_ok() is false).
  RowSums(std::span<const double> l, double theta, const CrOptions& o, DD b, double beta_err);

  bool fast_ok() const { return ok_; }
  std::size_t size() const { return l_.size(); }
  int threads() const { return nt_; }
  double m() const { return m_; }

  // d_i for a live logit (false for a masked one); `cut` also answers false
  // when d_i < -111 (weight < 2^-160, left out of S within eps_S's tail term).
  bool arg(std::size_t i, double& dh, double& dl, bool cut = true) const;
  // |dh + dl - d_i| for the logit at i (0 when theta = 1).
  double arg_error(std::size_t i, double dh) const;
  // Bound on arg_error over the logits with d_i >= -111.
  double delta() const { return delta_; }

  // Level 1: S1 and eps_S; when e is not null, e[i] = exp1(d_i), or 0 for
  // masked and cut-off logits.
  void level1(double* e);
  double S1 = 0, eps_e = 0, eps_S = 0;

  // Level 2: S2 and eps_S2 (and eps_e2, the bound of exp2 on one d_i).
  void level2();
  DD S2{};
  double eps_e2 = 0, eps_S2 = 0;

 private:
  std::span<const double> l_;
  double theta_ = 1, m_ = 0, delta_ = 0;
  bool unit_ = true, ok_ = false;
  bool scaled_ = false;
  DD beta_{1, 0};
  double beta_err_ = 0;
  int nt_ = 1;
};

// Every bound is a first-order sum of relative errors each < 2^-30; kSafe
// covers the products of two of them.
constexpr double kSafe = 1.0 + 0x1p-20;

// Whether the exact value x, known to lie within `err` of the double-double
// v, surely rounds to r in format t: x lies strictly between the rounding
// boundaries around r (and has r's sign when r is a zero). Either sign.
bool rounds_to(DType t, const DD& v, double err, double r);
// The answer for x within err of v, or NaN when the test cannot decide.
double round_dd(DType t, const DD& v, double err);

// log S for S within eps_S S of the double-double Sv: L with |L - log S| <=
// eta (infinite when the bound cannot be established); ziv_row.cpp.
struct LogS {
  DD L;
  double eta;
};
LogS log_of(const DD& Sv, double eps_S);

// log1: log x in double for a double x with |log x| <= 21 (entropy_cr.cpp:
// x = p + 1e-9 in [1e-9, 1 + 2^-29]): y0 = std::log(x) (no accuracy assumed), E =
// exp1(-y0) = e^(-y0) (1 + a), |a| <= 2^-51 = 4u (fast_arith.hpp; -y0 in
// its range). With delta = log x - y0, RN(x E) = e^delta (1 + a)(1 + b),
// |b| <= u; when |c| <= 2^-26 for c = RN(RN(x E) - 1), RN(x E) is in [1/2,
// 2] and the subtraction is exact (Sterbenz): c = e^delta (1 + a)(1 + b) -
// 1, so |c - (e^delta - 1)| <= 1.01 * 5.01u <= 5.1u, |delta| <= 1.01 (|c| +
// 5.1u) =: cm and |e^delta - 1 - delta| <= 0.51 cm^2 <= 1.04u. Hence
// |y0 + c - log x| <= kLog1Err = 6.2u; the caller counts RN(y0 + c) (u
// |L|). Returns false (level failed) when |c| > 2^-26 or |y0| > 21.
constexpr double kLog1Err = 6.2 * u;
bool log1(const ExpTables& T, double x, double& L);  // ziv_row.cpp

// An estimate v of a real x with |v - x| <= err (err = +inf: the level
// could not bound it), and its rounding to t: round_dd, NaN when undecided.
struct Estimate {
  DD v;
  double err;
};
inline double round_estimate(DType t, const Estimate& e) {
  return std::isfinite(e.err) ? round_dd(t, e.v, e.err) : std::numeric_limits<double>::quiet_NaN();
}

// beta = theory::adaptive_beta(H) for every H within H.err of H.v (H >= -0.5):
// v within err of it; {1, 0} with err 0 when beta is surely exactly 1; err
// infinite when H.err is too large to use. Error analysis in adaptive_cr.cpp.
Estimate beta_of(const Estimate& H);

// The entropies of the row at level 1 (double: calls row.level1) or 2
// (double-double: calls row.level2); error analyses in entropy_cr.cpp.
Estimate shannon_entropy_estimate(RowSums& row, int level);
Estimate paper_entropy_estimate(RowSums& row, int level);

// The weights of a row rounded to t: the double level on `row` (skipped,
// every item open, when !row.fast_ok()), the double-double level on row2()
// (nullptr: none) for what it leaves, then mpfr_fill(out, open) for the rest
// (it sets out[i], i in open, to the rounded MPFR weight). Adds its counts
// to st. Error analysis in softmax_cr.cpp next to each test.
using MpfrFill = std::function<void(std::vector<double>&, const std::vector<std::size_t>&)>;
std::vector<double> softmax_levels(DType t, RowSums& row, const std::function<RowSums*()>& row2,
                                   const MpfrFill& mpfr_fill, const CrOptions& o, CrStats& st);

}  // namespace sa::ref::fast
