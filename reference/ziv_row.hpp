// Internal to the correctly rounded references (softmax_cr, log_softmax_cr):
// the shared first steps of a row, with their proven error bounds.
//
// For a row of logits l and temperature theta, with z_i = l_i / theta and
// m = max_i RN(l_i / theta), every reference works with d_i = z_i - m and
// S = sum_i e^(d_i) (masked logits excluded). RowSums gives
//  - arg(i): d_i as a double-double (dh, dl), |dh + dl - d_i| <= delta_i
//    (arg_error(i)); 0 for theta = 1 (exact);
//  - level1(e): S1 with |S1 - S| <= eps_S S (and e_i = exp1(d_i) stored when
//    asked), in double with Sum2;
//  - level2(): S2, a double-double with |S2 - S| <= eps_S2 S.
// Range: rows the fast path takes (fast_ok): no NaN, no +inf, at least one
// logit > -inf, no finite logit whose quotient by theta overflows, and |m|
// <= 2^50 when theta != 1. Others go to MPFR whole (exact or rare).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "reference/fast_arith.hpp"
#include "reference/ziv.hpp"

namespace sa::ref::fast {

class RowSums {
 public:
  RowSums(std::span<const double> l, double theta, const CrOptions& o);

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

}  // namespace sa::ref::fast
