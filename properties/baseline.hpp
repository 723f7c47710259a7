// The "vectorised baseline" rule: how accurate a well-implemented float32
// softmax is on a given row, measured by computing one.
//
// Why a measured baseline. The rigorous bounds (the ulp rule's (n-1)u
// summation term, T7's (n + 4 + 2 delta)u) grow like n and stop constraining
// anything at large n: at n = 2^24 they allow 12.4M ulp, while the naive
// kernel's sequential float32 sum is 355,712 ulp off (its row sum 2.9% off)
// where vectorised libraries summing in 8 or 16 float lanes are 5-40x closer. The error that
// actually occurs depends on the summation order and on the row's values (a
// sequential sum of many equal terms rounds the same way at every step), so
// no closed form in n alone is both sharp and safe. FlashAttention's tests
// solve this by comparing with a reference implementation run on the same
// input (theory.md T8: "<= 2x the naive implementation's error"); this rule
// does the same with references that sum the way vectorised libraries do.
//
// The baseline (vectorised_softmax), float32 arithmetic throughout:
//   z_j = fl(l_j / theta), m = max z, d_j = fl(z_j - m),
//   e_j = fl(exp(d_j))                       (correctly rounded exp),
//   S   = L float32 partial sums, lane k summing e_j for j = k mod L
//         sequentially, the lanes then added pairwise,
//   p_j = fl(e_j / S), rounded once more to bfloat16 / float16 for those outputs.
// E(baseline) is the LARGEST max-norm error of this over L in kLaneCounts =
// {8, 16, 32, 64}, and, for rows of fewer than kSequentialBelow = 2^13
// unmasked items, also L = 1 (one sequential float32 sum; see below): the accumulator layouts of
// the calibrated peers (PyTorch's CPU softmax on AVX2 and Eigen's two SSE packets sum in 8 float
// lanes, oneDNN's AVX-512 kernel in 16) and their 2x/4x unrolled forms. One layout alone is not
// enough: on rows of many equal terms the error of an L-lane sum is not monotone in L (measured on
// a spike row of 2^13: 8 lanes 3.4u, 16 lanes 51u; oneDNN 53u), so a peer with another layout would
// fail a single-layout baseline by chance. Sums in double (the built-in cpu kernel), pairwise or
// compensated sums are more accurate than any of them.
//
// The rule (vectorised_threshold): with E(q) = max_j |q_j - p_j| / max_j p_j
// (the max-norm relative error T7 bounds, p the exact weights) and n the
// number of unmasked items,
//   E(kernel) <= kFactor E(baseline) + (kSlack + kLambda sqrt(n)) u  (+ u_t),
// u = 2^-24 (float32's unit roundoff), u_t = 2^-8 for bfloat16 and 2^-11 for
// float16 outputs (budget::storage_rel; for float16 at least 2^-25 / p_max,
// its subnormal floor: see below), 0 for float32.
// Where each constant comes from:
//   kFactor = 2: FlashAttention's factor on the reference implementation's
//     error (theory.md T8). Calibrated peers reach at most 1.0x E(baseline)
//     (docs/calibration.md: Eigen and PyTorch are the 8-lane baseline's
//     layout exactly; oneDNN stays below the worst layout).
//   kSlack = 4: per-element error a correct kernel may have and the
//     baseline does not: a faithful rather than correctly rounded exp (+1.5u
//     relative), a reciprocal multiply instead of a division (+0.5u), and the
//     output's own rounding, <= 1u relative at the row maximum, which the
//     baseline may happen to round exactly. It keeps the smallest rows (n = 1,
//     where the baseline is exact) from failing.
//   kLambda sqrt(n) u, kLambda = 3: the typical error of a plain scalar loop
//     (one sequential float32 sum), the probabilistic bound of Higham & Mary
//     2019 (independent rounding errors: |error| <= lambda sqrt(n) u with
//     probability >= 1 - 2 exp(-lambda^2 / 2), 98% at lambda = 3). It is
//     what separates "summed in another order" from "far worse": a sequential
//     sum is not flagged while its error looks like rounding noise (the naive
//     kernel passes every generator up to n = 2^13), and is flagged once its
//     systematic part (terms below half an ulp of the running sum, equal terms
//     rounding alike), which grows like n, dominates: measured, the naive
//     kernel is flagged from n = 2^14 on spike and FlashAttention-3 outlier
//     rows, from 2^16 on offset and 2^18 on uniform rows, and at 2^22 .. 2^24
//     on gaussian, uniform, spike, offset and masked rows (not on near_ties
//     and onednn_overflow rows, where every kernel is equally accurate, nor on
//     fa3_outliers beyond 2^15, whose sums a few outliers dominate) (docs/calibration.md). It is
//     also why a 3u systematic error is left to the bias rule (statistical, over rows): no per-row
//     bound can see 3u without failing correct kernels.
//   u_bf16: a bfloat16 output rounded twice (float32 result rounded again,
//     e.g. oneDNN) is up to 1 ulp of bfloat16 off, the baseline's single
//     rounding 0.5 ulp, i.e. up to 2^-8 relative at the row maximum; so a
//     double-rounding kernel is not an error under this rule. float16 the
//     same with u_f16 = 2^-11, but never less than half float16's smallest
//     subnormal (2^-25) over the row's largest weight p_max: on rows whose
//     weights are all below 2^-14 (more than 2^14 similar items) every weight
//     is a float16 subnormal, rounded to a multiple of 2^-24, and a single
//     rounding is then up to 2^-25 / p_max relative in the max norm.
// Range: finite rows and rows with -inf masks (masked entries have exact
// weight 0 in both) with at least one unmasked item; rows with NaN or +inf
// and fully masked rows are the special-value properties'.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "core/dtype.hpp"

namespace sa::props::baseline {

constexpr int kLanes = 8;
constexpr int kLaneCounts[] = {8, 16, 32, 64};
constexpr double kFactor = 2.0;
constexpr double kSlack = 4.0;
constexpr double kLambda = 3.0;
// Below this many unmasked items a sequential float32 sum (L = 1) is one of
// the baselines. Why: the sqrt(n) term assumes independent rounding errors,
// and rows of many equal terms break that assumption at any size: the
// property search, which shrinks towards such rows, found the naive kernel's
// sequential sum 1.006-1.03x over the threshold at n = 212 .. 2754 on spike
// rows (`check --builtin naive` with only differential.vectorised_2x, seeds
// 2, 4, 5, 6, 7, 8 of 1-8 at 300 cases; still seeds 4, 5, 8 at n = 752 ..
// 3713 with kLambda = 6),
// so sqrt(n) alone cannot separate "summed in another order" from "far
// worse". Below 2^13 a textbook loop is an accepted implementation (its
// rigorous bound, (n - 1) u, is below 2^-11 relative there, and every size the
// gate draws by default is below it); from 2^13 on a kernel is held to the
// vectorised sums, which is where docs/calibration.md shows the sequential
// sum's systematic error taking over (flagged from 2^14 on).
constexpr std::size_t kSequentialBelow = std::size_t(1) << 13;

// The baseline's softmax weights for one row (values of dtype t), as floats
// (already rounded to bfloat16 / float16 for those t).
// `lanes` (a power of two) other than kLanes is for calibration only.
std::vector<float> vectorised_softmax(DType t, std::span<const float> row, double theta,
                                      int lanes = kLanes);

// E(baseline): the largest max-norm relative error of vectorised_softmax
// over the lane counts kLaneCounts, against exact weights p of the row.
double baseline_error(DType t, std::span<const float> row, double theta, std::span<const double> p);

// Max-norm relative error E(q) of weights q against exact weights p (doubles);
// NaN when some q_j is NaN. 0 when every p_j is 0.
double max_norm_rel_error(std::span<const float> q, std::span<const double> p);

// The rule's threshold on E(kernel) given E(baseline) for a row of dtype t
// with `live` unmasked items and largest exact weight max_weight.
double vectorised_threshold(DType t, double baseline_error, double live, double max_weight = 1.0);

}  // namespace sa::props::baseline
