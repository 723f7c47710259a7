// The "vectorised baseline" rule: how accurate a well-implemented float32
// softmax is on a given row, measured by computing one.
//
// Why a measured baseline. The rigorous bounds (the ulp rule's (n-1)u
// summation term, T7's (n + 4 + 2 delta)u) grow like n and stop constraining
// anything at large n: at n = 2^24 they allow 12.4M ulp, while the naive
// kernel's sequential float32 sum is 355,712 ulp off (its row sum 2.9% off) and
// every vectorised library is orders of magnitude closer. The error that
// actually occurs depends on the summation order and on the row's values (a
// sequential sum of many equal terms rounds the same way at every step), so
// no closed form in n alone is both sharp and safe. FlashAttention's tests
// solve this by comparing with a reference implementation run on the same
// input (theory.md T8: "<= 2x the naive implementation's error"); this rule
// does the same with a reference that sums the way vectorised libraries do.
//
// The baseline (vectorised_softmax), float32 arithmetic throughout:
//   z_j = fl(l_j / theta), m = max z, d_j = fl(z_j - m),
//   e_j = fl(exp(d_j))                       (correctly rounded exp),
//   S   = kLanes float32 partial sums, lane k summing e_j for j = k mod kLanes
//         sequentially, the lanes then added pairwise,
//   p_j = fl(e_j / S), rounded once more to bfloat16 for bfloat16 outputs.
// kLanes = 8 is the narrowest vector accumulator of the calibrated peers
// (PyTorch's CPU softmax on AVX2 and Eigen's two SSE packets both sum in 8
// float lanes; oneDNN's AVX-512 kernel in 16); wider sums, double sums (the
// built-in cpu kernel) and pairwise sums are more accurate than the baseline.
//
// The rule (vectorised_threshold): with E(q) = max_j |q_j - p_j| / max_j p_j
// (the max-norm relative error T7 bounds, p the exact weights),
//     E(kernel) <= kFactor * E(baseline) + kSlack * u  (+ u_bf16 for bfloat16),
// u = 2^-24 (float32's unit roundoff), u_bf16 = 2^-8. Constants:
//   kFactor = 2: FlashAttention's factor on the reference implementation's
//     error (theory.md T8). It also covers summation orders luckier or
//     unluckier than the baseline's: calibrated peers stay below 1.0x the
//     baseline's summation error at every size (README, "Calibration").
//   kSlack = 4: per-element error a correct kernel may have and the
//     baseline does not: a faithful rather than correctly rounded exp (+1.5u
//     relative), a reciprocal multiply instead of a division (+0.5u), and the
//     max-norm measuring an element of relative error r at pmax in [0.5, 1)
//     as up to r (the output's own 0.5-ulp rounding is <= u relative). This is
//     what keeps small rows (n = 1, where the baseline is exact) from failing.
//   u_bf16: a bfloat16 output rounded twice (float32 result rounded again,
//     e.g. oneDNN) is up to 1 ulp of bfloat16 off; the baseline's single
//     rounding is <= 0.5 ulp, so its 2x covers the rest only when some element
//     of the row is near a rounding boundary: the extra u_bf16 covers it
//     always (declared "double rounding" is therefore not an error here).
// Range: finite rows and rows with -inf masks (masked entries have exact
// weight 0 in both); rows with NaN or +inf are the special-value properties'.
#pragma once

#include <span>
#include <vector>

#include "core/dtype.hpp"

namespace sa::props::baseline {

constexpr int kLanes = 8;
constexpr int kLaneCounts[] = {8, 16, 32, 64};
constexpr double kFactor = 2.0;
constexpr double kSlack = 4.0;
constexpr double kLambda = 3.0;

// The baseline's softmax weights for one row (values of dtype t), as floats
// (already rounded to bfloat16 for t == bfloat16).
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
// with `live` unmasked items.
double vectorised_threshold(DType t, double baseline_error, double live);

}  // namespace sa::props::baseline
