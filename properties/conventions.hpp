// Numerical conventions a kernel may declare, and exactly what each allows
// (docs/conventions.md). A kernel declares them in its capabilities
// (kernel.h SA_CAP_DOUBLE_ROUNDING, SA_CAP_FLUSH_TO_ZERO) or a gate spec does
// for it (`conventions = [...]`, e.g. for a v1 plugin or a library wrapped by
// someone else). Declared, the element budgets of every property grow by what
// the convention allows (budgets.hpp, output_abs) and verdicts name it;
// undeclared, the same behaviour fails (on every seed: the differential
// properties always run the edge rows that expose it) and the failing
// verdict names the convention that would have allowed it, so a policy
// difference and an error read differently.
//
//   double_rounding  a bfloat16 or float16 output may be rounded to its type
//                    twice: from a value that was itself already rounded to the
//                    output type once (an intermediate stored in the output
//                    type, e.g. exp(x - m) stored in bfloat16 and then divided;
//                    oneDNN's bfloat16 softmax measured 0.6-0.9 ulp). One
//                    extra rounding moves a value by <= u_t |x| (u_t = 2^-8
//                    bfloat16, 2^-11 float16) in the normal range and by half
//                    the smallest subnormal below it; that is the extra budget,
//                    so an element may be off by up to about 1.5 ulp. No effect
//                    on float32 outputs.
//   flush_to_zero    results and intermediate exponentials below 2^-125 in
//                    magnitude may be 0 (float32 arithmetic with FTZ/DAZ, or a
//                    vectorised exp that builds 2^n in two steps and flushes up
//                    to twice the smallest normal 2^-126 = 1.18e-38; hence
//                    2^-125 = 2.35e-38). The extra
//                    budget is |x| for exact values |x| < 2^-125. Undeclared,
//                    gradual underflow is required: a subnormal float32 result
//                    is within one subnormal ulp (2^-149) like any other.
//   ieee_special_values  a row with +inf logits (and no NaN), or whose every
//                    logit is -inf, may give NaN outputs: the IEEE value of
//                    exp(z - max) / sum computed as written, which PyTorch's
//                    documented softmax returns (inf - inf, and 0/0 for a fully
//                    masked row), where kernel.h defines the limits (the +inf
//                    items share weight 1; a fully masked row has weights 0,
//                    log-softmax and lse -inf, entropy 0). Only NaN is allowed
//                    there, and only on such rows; every other row is held to
//                    kernel.h as before.
//   low_precision_p  attention forward with bfloat16 or float16 inputs: the
//                    weights P (normalised or not) are rounded to the input
//                    type before the P V product, as tensor-core kernels
//                    (FlashAttention) do for their matrix units, and the
//                    denominator may be summed from the rounded values. Each
//                    rounding moves p_j by <= u_t p_j (u_t of the input type),
//                    so an output moves by <= u_t sum_j p_j |v_j| through the
//                    product and <= u_t |out| <= u_t sum_j p_j |v_j| through
//                    the denominator: the extra budget is 2 u_t sum_j p_j |v_j|.
//                    No effect on float32 or fp8 inputs (fp8's P quantisation
//                    is always allowed) or on lse and entropy.
//   lse_base2        attention_v2 returns lse in base 2, log2(sum_j 2^(s_j log2 e)) =
//                    lse / ln 2 (FlashInfer's default); attention_backward takes
//                    its lse in base 2 too. Budget: the base-e budget over ln 2,
//                    plus one ulp of the base-2 value for its own rounding.
//   masked_lse_inf   a fully masked attention row (every key masked, no sink)
//                    has lse +inf (FlashAttention 2 and 3 return it) where
//                    kernel.h says -inf; out must still be 0, and the backward
//                    is handed +inf for such rows.
//   no_temperature   the row operations have no temperature parameter
//                    (PyTorch's and ONNX Runtime's softmax): the suite calls
//                    them with temperature 1 only (as a spec with
//                    temperature_only at 1 does), and the one property that
//                    needs two temperatures, metamorphic.entropy_temperature,
//                    is not applicable. Undeclared, a kernel that ignores the
//                    temperature fails, the note naming this convention.
//   alibi_lse_shift  FlashAttention's ALiBi (its alibi.h): on a causal row
//                    without a left window (window_right 0, window_left
//                    unbounded or >= seqlen_k, as its API normalises it) the
//                    bias is +slope_h j instead of -slope_h |i + off - j|.
//                    For every visible key the two differ by the row constant
//                    c = slope_h (i + off), so weights, out, entropy and beta
//                    are kernel.h's and the lse is lse + beta c (beta 1 unless
//                    adaptive); attention_backward is handed that lse. Budget:
//                    the lse budget plus 3u |beta c| (the larger scores' and
//                    sum's roundings) and the ulp of the shifted value. A sink
//                    is not shifted, so a kernel with both changes its out and
//                    fails: the convention covers the lse only.
//   lse_without_sink attention's lse leaves the sink out, log sum_j exp(beta
//                    s_j) over the visible keys only (-inf with none), while
//                    out and entropy still normalise with it; the backward is
//                    handed that lse and must add the sink back. The exact
//                    value is formed from the row's scores in double (its own
//                    error, below 2^-50 of the largest score, joins the budget).
//   finite_mask      masks add (or put) a large finite value instead of -inf
//                    (ONNX Runtime's mask_filter_value = -10000, Hugging Face's
//                    finfo.min): masked positions are read. Which value and
//                    whether it is added once per mask is not declared, so
//                    the gate checks what every such kernel shares: a row
//                    with a visible key is kernel.h's (the masked weights
//                    underflow to exact zeros); a row with every key masked
//                    (no sink) gives out inside the convex hull of its
//                    sequence's values (each coordinate between their min and
//                    max, plus the summation's rounding), an lse and entropy
//                    that are numbers (entropy within [0, log Lk]); and
//                    masked_never_leak poisons masked keys with finite values
//                    of the case's own magnitude (a NaN under a mask reaches
//                    the row through 0 * NaN), skipping rows whose every key
//                    is masked.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/attention_case.hpp"

namespace sa::props {

struct Conventions {
  bool double_rounding = false;
  bool flush_to_zero = false;
  bool ieee_special_values = false;
  bool low_precision_p = false;
  bool lse_base2 = false;
  bool masked_lse_inf = false;
  bool no_temperature = false;
  bool alibi_lse_shift = false;
  bool lse_without_sink = false;
  bool finite_mask = false;
  bool any() const {
    return double_rounding || flush_to_zero || ieee_special_values || low_precision_p ||
           lse_base2 || masked_lse_inf || no_temperature || alibi_lse_shift || lse_without_sink ||
           finite_mask;
  }
  // "double_rounding, flush_to_zero" (empty when none).
  std::string names() const;
};

// Every convention's name, in a stable order: "double_rounding", "flush_to_zero",
// "ieee_special_values", "low_precision_p", "lse_base2", "masked_lse_inf",
// "no_temperature".
const std::vector<std::string>& convention_names();
// Sets the named convention in `c`; false when the name is not a convention.
bool declare_convention(Conventions& c, std::string_view name);
// The conventions that kernel.h SA_CAP_* bits in `flags` declare.
Conventions conventions_of_flags(std::uint32_t flags);
// Every SA_CAP_* bit that declares a convention.
std::uint32_t convention_flags();
// The SA_CAP_* bit that declares the named convention; 0 for no convention.
std::uint32_t convention_flag(std::string_view name);
// kernel.h's name of that bit ("SA_CAP_FLUSH_TO_ZERO"), and a one-line
// summary of what the convention allows; "" for no convention.
std::string convention_flag_name(std::string_view name);
std::string convention_summary(std::string_view name);

// alibi_lse_shift's row constant c = slope_h (i + off) for query i of sequence
// b, head h: nonzero only on a causal row without a left window (window_right
// 0; window_left -1 or at least the largest key length, which FlashAttention's
// API turns into -1) of a case with ALiBi. Exact in double (a float times an
// integer below 2^31).
inline double alibi_lse_shift_of(const AttentionCase& c, std::int64_t b, std::int64_t i,
                                 std::int64_t h) {
  if (c.alibi_slopes.empty()) return 0.0;
  const std::int64_t right = c.causal ? 0 : c.window_right;
  if (right != 0) return 0.0;
  std::int64_t max_k = 0;
  for (std::int64_t x = 0; x < c.batch; ++x) max_k = std::max(max_k, c.len_k(x));
  if (c.window_left >= 0 && c.window_left < max_k) return 0.0;
  const std::int64_t off = c.top_left ? 0 : c.len_k(b) - c.len_q(b);
  return static_cast<double>(c.alibi_slopes[static_cast<std::size_t>(h)]) *
         static_cast<double>(i + off);
}

// Magnitudes below which flush_to_zero allows a 0 (2^-125, see above).
constexpr double kFlushBelow = 0x1p-125;

// The conventions the budgets of this thread's running suite honour
// (set by run_suite and run_sweep for the kernel under test; none by default).
Conventions& active_conventions();

// Sets active_conventions() for a scope and restores the previous ones after.
class ConventionScope {
 public:
  explicit ConventionScope(const Conventions& c) : saved_(active_conventions()) {
    active_conventions() = c;
  }
  ~ConventionScope() { active_conventions() = saved_; }
  ConventionScope(const ConventionScope&) = delete;
  ConventionScope& operator=(const ConventionScope&) = delete;

 private:
  Conventions saved_;
};

}  // namespace sa::props
