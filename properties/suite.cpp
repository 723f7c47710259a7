#include "properties/suite.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <stdexcept>

#include "properties/reference_values.hpp"
#include "kernels/call_log.hpp"
#include "properties/suite_internal.hpp"
#include "reference/mpfr.hpp"

namespace sa::props {
namespace detail {

const std::string& claim_of(const std::string& id) {
  static const std::string none;
  const PropertyInfo* p = find_property(id);
  return p ? p->claim : none;
}

const Rule& rule_of(const std::string& id) {
  const PropertyInfo* p = find_property(id);
  return rule_by_id(p ? p->rule : "unknown");
}

const Rule& rule_by_id(const std::string& id) {
  static const std::vector<Rule> all = rules();
  for (const Rule& r : all)
    if (r.id == id) return r;
  static const Rule unknown{"unknown", "no such rule"};
  return unknown;
}

bool Run::wants_rule(const std::string& id) const {
  if (config.rules.empty())  // opt-in conventions: see rules()
    return id != "onednn_10eps" && id != "cudnn_frontend_bwd";
  return std::find(config.rules.begin(), config.rules.end(), id) != config.rules.end();
}
bool Run::wants_property(const std::string& id) const {
  if (config.properties.empty()) return true;
  for (const auto& p : config.properties)
    if (id == p || id.rfind(p + ".", 0) == 0) return true;  // "metamorphic" selects the family
  return false;
}
bool Run::wants_op(Op op) const {
  return config.ops.empty() ||
         std::find(config.ops.begin(), config.ops.end(), op) != config.ops.end();
}
std::vector<double> Run::temperatures(std::initializer_list<double> extra) const {
  std::vector<double> out = {config.temperature};
  if (config.temperature_only) return out;
  for (double th : extra)
    if (std::find(out.begin(), out.end(), th) == out.end()) out.push_back(th);
  return out;
}
void Run::emit(Verdict v) const {
  // Every judged verdict of a kernel with declared conventions names them: its
  // element budgets were widened by them (budgets.hpp, output_abs).
  if (const std::string c = active_conventions().names();
      !c.empty() && (v.outcome == Outcome::pass || v.outcome == Outcome::fail))
    v.note += (v.note.empty() ? "" : "; ") + std::string("under the declared conventions: ") + c;
  const auto now = std::chrono::steady_clock::now();
  const double kernel_now = kernel_call_seconds();
  if (std::isnan(v.seconds)) v.seconds = std::chrono::duration<double>(now - last_emit).count();
  if (std::isnan(v.kernel_seconds))
    v.kernel_seconds = std::min(v.seconds, kernel_now - last_emit_kernel);
  last_emit = now;
  last_emit_kernel = kernel_now;
  // A failing verdict's recorded calls go to the case-file sink (kernels/call_log.hpp).
  if (v.outcome == Outcome::fail && !v.counterexample.empty())
    call_log::publish(v, call_log::claim(v.counterexample));
  if (observer && observer->on_verdict) observer->on_verdict(v);
  out.push_back(std::move(v));
}
void Run::tick(int units) const { progress_to(std::min(done + units, family_end)); }
void Run::progress_to(int unit) const {
  unit = std::min(unit, total);
  if (unit <= done) return;
  done = unit;
  if (observer && observer->progress) observer->progress(done, total);
}

RowOutputs call_row_op(const Kernel& k, Op op, DType t, const RowBatch& b, double theta) {
  RowOutputs o;
  switch (op) {
    case Op::softmax:
      o.got = k.softmax(t, b, theta);
      break;
    case Op::log_softmax:
      o.got = k.log_softmax(t, b, theta);
      break;
    case Op::logsumexp:
      o.got = k.logsumexp(t, b, theta);
      break;
    case Op::entropy:
      o.got = k.entropy(t, b, theta);
      break;
    case Op::adaptive_softmax: {
      AdaptiveOutput a = k.adaptive_softmax(t, b, theta);
      o.got = std::move(a.weights);
      o.beta = std::move(a.beta);
      o.H = std::move(a.entropy);
      break;
    }
    default:
      break;
  }
  return o;
}

Verdict skip_verdict(const Run& run, const std::string& property, const std::string& claim,
                     const Rule& rule, Op op, DType t, const std::string& why) {
  Verdict v;
  v.property = property;
  v.claim = claim;
  v.rule = rule;
  v.kernel = run.kernel.name();
  v.op = name_of(op);
  v.dtype = name_of(t);
  v.outcome = Outcome::skip;
  v.note = why;
  return v;
}

RowParams shrink_values(const RowParams& start, DType t,
                        const std::function<bool(const RowParams&)>& fails, int& budget) {
  RowParams p = start;
  if (p.explicit_values.empty()) {
    const RowBatch b = materialise(p, t);
    p.explicit_values.clear();
    for (std::int64_t r = 0; r < b.rows; ++r)
      for (float x : b.row(r)) p.explicit_values.push_back(x);
    p.pad = b.stride - b.n;
    p.n = b.n;
    p.rows = static_cast<int>(b.rows);
  }
  auto try_it = [&](const RowParams& c) {
    if (budget <= 0) return false;
    --budget;
    return fails(c);
  };
  // 1. Drop chunks of items (the same positions from every row).
  for (std::int64_t chunk = p.n / 2; chunk >= 1 && budget > 0; chunk /= 2) {
    for (std::int64_t at = 0; at + chunk <= p.n && p.n - chunk >= 1 && budget > 0;) {
      RowParams c = p;
      c.explicit_values.clear();
      for (int r = 0; r < p.rows; ++r)
        for (std::int64_t i = 0; i < p.n; ++i)
          if (i < at || i >= at + chunk)
            c.explicit_values.push_back(p.explicit_values[static_cast<std::size_t>(r * p.n + i)]);
      c.n = p.n - chunk;
      if (try_it(c))
        p = c;
      else
        at += chunk;
    }
  }
  // 2. Simplify values (small rows only): 0, then the nearest integer.
  if (p.n * p.rows <= 64) {
    for (std::size_t i = 0; i < p.explicit_values.size() && budget > 0; ++i) {
      const float x = p.explicit_values[i];
      if (!std::isfinite(x) || x == 0.0f) continue;
      for (double cand : {0.0, std::round(static_cast<double>(x))}) {
        if (cand == x) break;
        RowParams c = p;
        c.explicit_values[i] = to_dtype(t, cand);
        if (try_it(c)) {
          p = c;
          break;
        }
      }
    }
  }
  return p;
}

}  // namespace detail

std::vector<PropertyInfo> properties() {
  return {
      {"differential.ulp",
       "every output is within its per-element rounding budget of the correctly rounded MPFR "
       "reference",
       "ulp",
       {Op::softmax, Op::log_softmax, Op::logsumexp, Op::entropy, Op::adaptive_softmax,
        Op::merge_entropy_states, Op::merge_attention_states, Op::merge_attention_states_n},
       "ulps",
       "",
       "differential.cpp ulp; merge.cpp merge_entropy_ulp, merge_attention_ulp, "
       "merge_attention_n_ulp"},
      {"differential.t7_apriori",
       "softmax's max-norm relative error is within the a-priori bound (n + 4 + 2 delta) u "
       "(faithful exp; docs/theory.md T7)",
       "t7_apriori",
       {Op::softmax},
       "relative (max-norm)",
       "",
       "differential.cpp t7_apriori"},
      {"differential.vectorised_2x",
       "softmax's max-norm relative error is at most 2x the worst of float32 softmaxes summed in "
       "8, 16, 32 and 64 vector lanes (and, below n = 2^13, one sequential sum) on the same row, "
       "+ (4 + 3 sqrt(n)) u (+ 2^-8 for bfloat16, max(2^-11, 2^-25 / max p) for float16)",
       "vectorised_2x",
       {Op::softmax},
       "relative (max-norm)",
       "",
       "differential.cpp vectorised_2x"},
      {"differential.flash_attention_2x",
       "max error <= 2x the naive same-dtype implementation's error + 2 ulp of the output type",
       "flash_attention_2x",
       {Op::softmax, Op::log_softmax, Op::logsumexp, Op::entropy},
       "absolute",
       "bfloat16 or float16: float32 is not applicable",
       "differential.cpp flash_attention_2x"},
      {"differential.pytorch_fudge5",
       "|out - ref| <= atol + rtol |ref| with atol, rtol = 5x the naive same-dtype deviation (at "
       "least "
       "torch.testing's defaults)",
       "pytorch_fudge5",
       // (Not entropy: PyTorch has no entropy operator, so no test convention
       // of its own to borrow. With one, a correct float32 entropy at n = 3585
       // failed it: 873 ulps, within its 11,339-ulp a-priori budget, above
       // 5x torch.testing's default tolerances.)
       {Op::softmax, Op::log_softmax, Op::logsumexp},
       "ratio to tolerance",
       "",
       "differential.cpp pytorch_fudge5"},
      {"differential.onednn_10eps",
       "float32 relative error <= 10 eps; bfloat16 / float16 equal the float32 reference rounded "
       "(opt-in rule)",
       "onednn_10eps",
       {Op::softmax},
       "relative (float32); mismatches, 1 = not the rounded reference (bfloat16, float16)",
       "opt-in: the rule onednn_10eps named in the spec",
       "differential.cpp onednn_10eps"},
      {"differential.bias",
       "the mean signed error (in ulps) is zero within its statistical uncertainty",
       "bias",
       {Op::softmax, Op::adaptive_softmax},
       "ulps (mean signed)",
       "enough rows for a standard error",
       "differential.cpp bias_row, bias_verdict"},
      {"metamorphic.sum_to_one",
       "softmax weights sum to one (zero for a fully masked row)",
       "rounding_analysis",
       {Op::softmax, Op::adaptive_softmax},
       "absolute (|sum - 1|)",
       "",
       "metamorphic.cpp sum_to_one"},
      {"metamorphic.shift_invariance",
       "adding an exactly representable constant to every logit changes nothing (lse moves by it)",
       "rounding_analysis",
       {Op::softmax, Op::log_softmax, Op::logsumexp, Op::entropy},
       "ulps",
       "",
       "metamorphic.cpp shift_invariance"},
      {"metamorphic.permutation",
       "permuting the logits permutes the weights; lse and entropy are invariant",
       "rounding_analysis",
       {Op::softmax, Op::logsumexp, Op::entropy},
       "ulps",
       "",
       "metamorphic.cpp permutation"},
      {"metamorphic.monotonicity",
       "raising one logit does not lower its weight and does not raise any other weight",
       "rounding_analysis",
       {Op::softmax},
       "absolute (weight)",
       "",
       "metamorphic.cpp monotonicity"},
      {"metamorphic.t1_bounds",
       "every weight lies in the dispersion bounds of Lemma 2.1",
       "T1",
       {Op::softmax},
       "absolute (weight)",
       "",
       "metamorphic.cpp t1_bounds"},
      {"metamorphic.entropy_range",
       "0 <= H <= log(number of unmasked items)",
       "T4",
       {Op::entropy},
       "nats",
       "",
       "metamorphic.cpp entropy_range"},
      {"metamorphic.entropy_temperature",
       "entropy does not decrease when the temperature rises",
       "T4",
       {Op::entropy},
       "nats",
       "",
       "metamorphic.cpp entropy_temperature"},
      {"metamorphic.adaptive_beta",
       "beta >= 1, beta = 1 when H <= 0.5, and beta = beta(H) for the kernel's own H",
       "T5",
       {Op::adaptive_softmax},
       "beta (dimensionless)",
       "",
       "metamorphic.cpp adaptive_beta"},
      {"metamorphic.streamed_entropy",
       "the kernel's (streamed) entropy equals -sum p log p of its own softmax, and its (m,S,T) "
       "state "
       "gives the same H",
       "T6",
       {Op::entropy},
       "ulps of float32",
       "softmax as well (the entropy of its own weights)",
       "metamorphic.cpp streamed_entropy"},
      {"metamorphic.merge_algebra",
       "merging entropy states is associative and commutative within rounding, identity is a "
       "no-op, and "
       "merged parts give the whole row's entropy",
       "T6",
       {Op::merge_entropy_states},
       "ulps of float32",
       "float32",
       "metamorphic.cpp merge_algebra"},
      {"interface.sizes",
       "every row op is within its per-element rounding budget at every n = 2^k - 1, 2^k, 2^k + 1 "
       "up to 2^max_log2_n, in every layout kernel.h allows (in place, output stride != input "
       "stride, strides != n, several rows); every element checked",
       "ulp",
       {Op::softmax, Op::log_softmax, Op::logsumexp, Op::entropy, Op::adaptive_softmax},
       "ulps",
       "",
       "interface.cpp run_interface_sizes"},
      {"attention_v2.rounding",
       "batched attention (interface v2, every feature, real tile sizes): every output, lse and "
       "entropy is within its a-priori rounding budget of the extended-precision reference",
       "attention_rounding",
       {Op::attention_v2, Op::attention},
       "ulps of float32",
       "",
       "attention.cpp rounding"},
      {"attention_v2.flash_attention_2x",
       "batched attention, low-precision types: max|out - ref| <= 2 max|same-dtype baseline - "
       "ref| + 2 ulp of the output type at max|ref| + 0.3",
       "flash_attention_2x",
       {Op::attention_v2, Op::attention},
       "absolute",
       "a low-precision input type (bfloat16, float16, fp8): float32 is not applicable",
       "attention.cpp flash_attention_2x"},
      {"attention_v2.masked_never_leak",
       "NaN and huge values in keys and values that every mask hides (causal, window, key "
       "padding) change no output bit",
       "kernel_h",
       {Op::attention_v2, Op::attention},
       "outputs changed",
       "a mask: causal, window or key_padding",
       "attention.cpp masked_never_leak"},
      {"attention_v2.gqa_equals_repeated",
       "GQA/MQA equals the same call with each key/value head repeated for its query heads "
       "(within twice the rounding budget)",
       "attention_rounding",
       {Op::attention_v2},
       "ulps of float32",
       "cases with fewer key/value heads than query heads",
       "attention.cpp gqa_equals_repeated"},
      {"attention_v2.varlen_equals_separate",
       "a packed variable-length call equals one call per sequence (within twice the rounding "
       "budget)",
       "attention_rounding",
       {Op::attention_v2},
       "ulps of float32",
       "varlen",
       "attention.cpp varlen_equals_separate"},
      {"attention_v2.key_permutation",
       "permuting the keys together with their values and key-padding bytes changes no output or "
       "lse beyond twice the rounding budget (causal, window and ALiBi off)",
       "attention_rounding",
       {Op::attention_v2, Op::attention},
       "ulps of float32",
       "the case without causal, window and ALiBi within the kernel's domain",
       "attention.cpp key_permutation"},
      {"attention_v2.head_independence",
       "a head's outputs and lse do not move beyond twice the rounding budget when every other "
       "head's inputs (queries, keys, values, ALiBi slopes, sinks) are redrawn",
       "attention_rounding",
       {Op::attention_v2},
       "ulps of float32",
       "cases with more than one query head",
       "attention.cpp head_independence"},
      {"attention_v2.sink_equals_extra_key",
       "an attention sink equals one more key whose score is exactly the sink and whose value is "
       "0 (within twice the rounding budget; a sink 100 above every score included, its lse "
       "compared)",
       "attention_rounding",
       {Op::attention_v2},
       "ulps of float32",
       "sinks, and the case with one more key within the kernel's domain",
       "attention.cpp sink_equals_extra_key"},
      {"attention_v2.window_within_causal",
       "causal with window_left L equals the window (L, 0) without causal (L = -1: unbounded), "
       "whatever window_right the causal call carries (within twice the rounding budget)",
       "attention_rounding",
       {Op::attention_v2},
       "ulps of float32",
       "causal and window, both within the kernel's domain",
       "attention.cpp window_within_causal"},
      {"attention_v2.fp8_saturation",
       "quantised inputs (fp8, fp4, int8) at the format's largest finite value (times each "
       "run's block scale): every output is finite and |out| <= "
       "|v_descale| max|v| (1 + u_fp8 + (n + 5) u) + 1 ulp of the output type",
       "attention_rounding",
       {Op::attention_v2},
       "absolute",
       "a quantised input type (fp8, fp4, int8)",
       "attention.cpp fp8_saturation"},
      {"attention_v2.coverage",
       "every attention feature the kernel declares, and every pair of them, is in at least "
       "[attention] pair_cases of the cases run per input type (fixed pairwise cases see to "
       "it; a shortfall is incomplete, not a pass)",
       "pairwise_coverage",
       {Op::attention_v2, Op::attention},
       "cells short",
       "",
       "attention.cpp coverage"},
      {"attention_v2.nan_propagates",
       "NaN in one unmasked query element and one unmasked key element (fp8: the format's NaN "
       "code) makes every output and lse of each row that sees it NaN, and no other row's "
       "(kernel.h)",
       "kernel_h",
       {Op::attention_v2, Op::attention},
       "outputs wrong",
       "",
       "attention.cpp nan_propagates"},
      {"attention_v2.paged_equals_contiguous",
       "a paged KV call (block table of shuffled physical pages, ids across 65,535, the last "
       "page partly filled, NaN in every unused slot and page) equals the same case with "
       "contiguous keys and values (within twice the rounding budget; seqused_k kept)",
       "attention_rounding",
       {Op::attention_v2},
       "ulps of float32",
       "paged_kv",
       "attention.cpp paged_equals_contiguous"},
      {"attention_v2.mask_equals_removed_keys",
       "a query row under the boolean, block-sparse and tree masks (with causal, window and key "
       "padding) equals the same row called with only the keys it sees, unmasked, their "
       "attn_bias values kept (within twice the row's rounding budget; cases without ALiBi)",
       "attention_rounding",
       {Op::attention_v2},
       "ulps of float32",
       "attn_mask, block_mask or tree_mask",
       "attention.cpp mask_equals_removed_keys"},
      {"attention_v2.trivial_masks_change_nothing",
       "a case without masks called again with an attn_mask of ones and an attn_bias of zeros "
       "(each where declared; one element broadcast by four zero strides) gives the same outputs "
       "(within twice the rounding budget: s + 0 = s exactly)",
       "attention_rounding",
       {Op::attention_v2},
       "ulps of float32",
       "attn_mask or attn_bias",
       "attention.cpp trivial_masks_change_nothing"},
      {"attention_v2.chunked_prefill_equals_prefill",
       "a causal (or window_right 0) bottom-right call cut into two query chunks equals the one "
       "call: the first chunk with the keys its rows can see and, where seqused_k is declared, "
       "the rest of the cache unwritten (NaN past seqused_k); the second with every key (within "
       "twice the rounding budget)",
       "attention_rounding",
       {Op::attention_v2, Op::attention},
       "ulps of float32",
       "a case without attn_mask, attn_bias, block or tree mask",
       "attention.cpp chunked_prefill_equals_prefill"},
      {"attention_v2.large_offsets",
       "the same paged KV call with every named page past 2^31 elements of its pool (page ids "
       "from ceil(2^31 / page stride) up; the pools reserved sparsely, the pages below and a "
       "reservation before each pool inaccessible to the kernel) is within the rounding budget "
       "of attention_v2.rounding of the same reference: offsets need 64 bits (kernel.h); one "
       "computed in 32 bits wraps into the reservation, a crash naming the pool, or reads zeros",
       "attention_rounding",
       {Op::attention_v2},
       "ulps of float32",
       "paged_kv",
       "attention.cpp large_offsets"},
      {"attention_v2.cascade_equals_full",
       "cascade (shared-prefix) attention: the kernel's attention_v2 over a prefix shared by "
       "every request (one call) and over each request's own suffix (a varlen call; one suffix "
       "empty, lse -inf), merged by the kernel's merge_attention_states_n (the parts' lse not "
       "one block), is within sum_p w_p bo_p + (exp(2 sum_p bl_p) - 1) sum_p mag_p + "
       "sum_p (8 + L - l_p) u mag_p (+ output rounding) of the reference attention over prefix "
       "and suffix together; lse within sum_p w_p bl_p + ulp(L) + 4u",
       "attention_rounding",
       {Op::attention_v2},
       "ulps of float32",
       "merge_attention_states_n and lse declared; float32 outputs",
       "attention.cpp cascade_equals_full"},
      {"backward.rounding",
       "softmax / log-softmax backward: every dx is within its rounding budget of the correctly "
       "rounded MPFR reference",
       "backward_rounding",
       {Op::softmax_backward, Op::log_softmax_backward},
       "ulps",
       "",
       "backward.cpp row_rounding"},
      {"backward.rows_sum_zero",
       "softmax / log-softmax backward: each row of dx sums to (1 - sum p) c / theta (zero for "
       "weights summing to one), within the row's budgets",
       "backward_rounding",
       {Op::softmax_backward, Op::log_softmax_backward},
       "absolute",
       "",
       "backward.cpp rows_sum_zero"},
      {"backward.directional_derivative",
       "softmax / log-softmax backward: <dx, v> equals the directional derivative of <dy, f(x)> "
       "along a random v, taken by forward-mode automatic differentiation of f in double-double "
       "(dual numbers; the gradient formula is never written), within the budgets, the effect "
       "of y's rounding and the derivative's own error bound",
       "backward_rounding",
       {Op::softmax_backward, Op::log_softmax_backward},
       "absolute",
       "",
       "backward.cpp directional_derivative"},
      {"attention_backward.rounding",
       "attention backward (every v2 feature): every dq, dk, dv and d(sink) is within its "
       "a-priori rounding budget of the extended-precision reference",
       "attention_backward_rounding",
       {Op::attention_backward},
       "ulps",
       "",
       "backward.cpp grad_rounding"},
      {"attention_backward.flash_attention_3x",
       "attention backward, low-precision types: per gradient of at least 512 elements, "
       "max|g - ref| <= 3 max|same-dtype baseline - ref| + 2 ulp of the type at max|ref| + 0.3",
       "flash_attention_3x",
       {Op::attention_backward},
       "absolute",
       "bfloat16 or float16, and a gradient tensor of at least 512 elements (FlashAttention's "
       "tests compare 1152 and more): float32 and smaller cases are not applicable",
       "backward.cpp flash_attention_3x"},
      {"attention_backward.gqa_group_sum",
       "GQA/MQA: dk and dv of a key/value head equal the sum over its query heads of the call "
       "with the heads repeated (within both calls' budgets)",
       "attention_backward_rounding",
       {Op::attention_backward},
       "absolute",
       "cases with fewer key/value heads than query heads",
       "backward.cpp gqa_group_sum"},
      {"attention_backward.masked_zero",
       "keys no query sees get dk = dv = 0 exactly, and NaN in their k and v changes no "
       "gradient bit",
       "kernel_h",
       {Op::attention_backward},
       "gradients wrong or changed",
       "a mask: causal, window or key_padding",
       "backward.cpp masked_zero"},
      {"attention_backward.no_nan",
       "finite inputs give finite gradients, including fully masked rows and lengths that do "
       "not fill a 64- or 128-wide tile",
       "kernel_h",
       {Op::attention_backward},
       "non-finite gradients",
       "",
       "backward.cpp no_nan"},
      {"attention_backward.cudnn_frontend",
       "attention backward, bfloat16 / float16 (opt-in): every dq, dk, dv within cuDNN "
       "frontend's SDPA backward test tolerance atol + rtol |ref| of the reference",
       "cudnn_frontend_bwd",
       {Op::attention_backward},
       "absolute",
       "bfloat16 or float16; opt-in: the rule cudnn_frontend_bwd named in the spec",
       "backward.cpp cudnn_frontend"},
      {"determinism.bitwise",
       "repeated calls with identical inputs return identical bits for every output (checked "
       "when the kernel claims SA_CAP_DETERMINISTIC, and for attention_backward called with "
       "deterministic = 1; reported otherwise)",
       "bitwise",
       {Op::softmax, Op::log_softmax, Op::softmax_backward, Op::log_softmax_backward,
        Op::attention_v2, Op::attention_backward},
       "calls that differed",
       "the claim SA_CAP_DETERMINISTIC (judged; otherwise reported), or attention_backward called "
       "with deterministic = 1",
       "determinism.cpp bitwise_rows, bitwise_attention"},
      {"determinism.batch_invariance",
       "a row, or an attention sequence, computed alone gives the same bits as inside a batch "
       "(and under any split count) (checked when the kernel claims SA_CAP_BATCH_INVARIANT; "
       "reported otherwise)",
       "bitwise",
       {Op::softmax, Op::log_softmax, Op::softmax_backward, Op::log_softmax_backward,
        Op::attention_v2, Op::attention_backward},
       "calls that differed",
       "the claim SA_CAP_BATCH_INVARIANT (judged; otherwise reported)",
       "determinism.cpp batch_invariance_rows, batch_invariance_attention"},
      {"special.values",
       "masks, fully masked rows, +inf, NaN and n = 1 follow include/softmax_audit/kernel.h "
       "exactly",
       "kernel_h",
       {Op::softmax, Op::log_softmax, Op::logsumexp, Op::entropy, Op::adaptive_softmax,
        Op::attention, Op::merge_entropy_states, Op::merge_attention_states},
       "ulps",
       "",
       "special.cpp row_op_values, attention_values, merge_entropy_values, merge_attention_values"},
  };
}

const PropertyInfo* find_property(const std::string& id) {
  static const std::vector<PropertyInfo> all = properties();
  for (const PropertyInfo& p : all)
    if (p.id == id) return &p;
  return nullptr;
}

std::vector<PropertyAlias> property_aliases() {
  return {
      {"differential.ulp",
       {"attention_v2.rounding"},
       {Op::attention},
       false,
       "differential.ulp[attention] is attention_v2.rounding[attention]: the v1 slot held to the "
       "attention rounding budget on single-head cases"},
      {"differential.flash_attention_2x",
       {"attention_v2.flash_attention_2x"},
       {Op::attention},
       false,
       "differential.flash_attention_2x[attention] is attention_v2.flash_attention_2x[attention]"},
      {"differential.pytorch_fudge5",
       {"attention_v2.rounding"},
       {Op::attention},
       false,
       "differential.pytorch_fudge5[attention] is replaced by attention_v2.rounding[attention] "
       "(the a-priori budget, tighter than 5x the naive deviation)"},
      {"metamorphic.split_kv",
       {"attention_v2.rounding", "differential.ulp"},
       {Op::attention, Op::merge_attention_states},
       true,
       "retired: split-KV cases (num_splits > 1) are drawn by attention_v2.rounding (both "
       "entries) and held to the reference; merge_attention_states by differential.ulp"},
  };
}

std::vector<std::string> resolve_aliases(const std::vector<std::string>& selected,
                                         const std::vector<Op>& ops, bool retired_only) {
  std::vector<std::string> out;
  auto add = [&](const std::string& id) {
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  };
  const auto aliases = property_aliases();
  for (const std::string& p : selected) {
    const bool retired = std::any_of(aliases.begin(), aliases.end(), [&](const PropertyAlias& a) {
      return a.retired && a.id == p;
    });
    if (!retired) add(p);
    for (const PropertyAlias& a : aliases) {
      // A retired id by its name only (its family no longer holds it); a
      // live one also by its family or a prefix.
      const bool selects =
          a.id == p ||
          (!a.retired &&
           (a.id.rfind(p + ".", 0) == 0 ||
            (p.size() >= 2 && p.ends_with(".*") && a.id.rfind(p.substr(0, p.size() - 1), 0) == 0)));
      // A live id keeps its meaning in a run of every op (a spec naming
      // differential.ulp alone runs differential.ulp alone); it also selects
      // what moved when the run's ops name one of the alias's.
      const bool named = std::any_of(a.ops.begin(), a.ops.end(), [&](Op o) {
        return std::find(ops.begin(), ops.end(), o) != ops.end();
      });
      const bool op_run = named || (a.retired && ops.empty());
      if (selects && op_run && (a.retired || !retired_only))
        for (const std::string& t : a.to) add(t);
    }
  }
  return out;
}

std::vector<FamilyInfo> families() {
  return {
      {"differential", "properties/differential.cpp, merge.cpp (the merges)", true,
       "the kernel against the correctly rounded reference, one search per op and type judging "
       "every tolerance rule"},
      {"metamorphic", "properties/metamorphic.cpp", false,
       "relations between calls (shifts, permutations, temperatures, merges) and the paper's "
       "theorems"},
      {"interface", "properties/interface.cpp", false,
       "every size 2^k - 1, 2^k, 2^k + 1 and every layout kernel.h allows"},
      {"attention_v2", "properties/attention.cpp", true,
       "attention: one search per input type and entry (attention_v2, and the interface v1 "
       "slot on its single-head cases, op attention) judging every property"},
      {"backward", "properties/backward.cpp", true,
       "softmax and log-softmax backward: one search per op and type"},
      {"attention_backward", "properties/backward.cpp", true,
       "attention backward: one search per type"},
      {"determinism", "properties/determinism.cpp", true,
       "bit-for-bit repeatability and batch invariance where claimed"},
      {"special", "properties/special.cpp", false, "kernel.h's special-value semantics"},
  };
}

std::vector<std::string> distributions() { return distribution_names(); }

std::vector<Rule> rules() {
  return {
      {"ulp",
       "per-element rounding budget (properties/budgets.hpp): float32 working precision, faithful "
       "exp/log, recursive-summation error (n-1) u, exp-argument and temperature rounding; plus 1 "
       "ulp (float32) or 0.5 ulp (bfloat16, float16; float16's subnormals k 2^-24 are required, "
       "not flushed) of output rounding"},
      {"t7_apriori",
       "Blanchard, Higham & Higham 2021 (docs/theory.md T7): shifted softmax ||p - "
       "p^||inf/||p||inf <= "
       "(n + 2*2 + 2 delta) u with faithful exp, u = float32's (working precision), + u_bf16 = "
       "2^-8 for bfloat16 outputs, + max(u_f16, 2^-25 / max p) (u_f16 = 2^-11; 2^-25 half "
       "float16's smallest subnormal) for float16 outputs"},
      {"vectorised_2x",
       "relative to a measured baseline (properties/baseline.hpp): max_j |p^_j - p_j| / max p <= "
       "2 E(baseline) + (4 + 3 sqrt(n)) u (+ 2^-8 for bfloat16, max(2^-11, 2^-25 / max p) for "
       "float16), E(baseline) the worst of float32 "
       "softmaxes with correctly rounded exp summed in 8, 16, 32, 64 interleaved lanes (how "
       "vectorised libraries sum) and, below n = 2^13, in one sequential sum; the factor 2 is "
       "FlashAttention's (docs/theory.md T8), 3 sqrt(n) u "
       "a sequential sum's probabilistic error (Higham & Mary 2019); calibrated against Eigen, "
       "oneDNN and PyTorch to n = 2^24 (docs/calibration.md)"},
      {"flash_attention_2x",
       "FlashAttention's tests (docs/theory.md T8): max|out - ref| <= 2 max|naive same-dtype - "
       "ref| + "
       "fwd_atol, "
       "fwd_atol = 2 ulp of the output type at 0.3 + max|ref| (its Hopper tests' (ref + 0.3 - 0.3 "
       "- ref)); "
       "bfloat16 and float16 only (the tests cover low precision)"},
      {"pytorch_fudge5",
       "PyTorch attention tests (docs/theory.md T8): fudge factor 5 on the naive same-dtype "
       "deviation "
       "(atol and rtol), floored at torch.testing's defaults (float32 1e-5/1.3e-6, bfloat16 "
       "1e-5/1.6e-2, float16 1e-5/1e-3)"},
      {"onednn_10eps",
       "oneDNN's softmax tests (docs/theory.md T8): float32 relative error <= 10 eps (eps = "
       "2^-23); "
       "bfloat16 / float16 "
       "output equals the float32 reference rounded to that type. Opt-in: select it in "
       "SuiteConfig.rules"},
      {"bias",
       "mean signed error gate (docs/theory.md T8; arXiv 2510.04212): |mean of per-row mean errors "
       "in "
       "ulps| <= 5 standard errors + 0.1 ulp (bfloat16, float16) / 0.5 ulp (float32)"},
      {"attention_rounding",
       "a-priori rounding analysis of float32-internal batched attention "
       "(properties/attention.cpp, attention_budgets): score error (d + 2) u |scale| sum|q k| + "
       "3u|s| "
       "(+ softcap, ALiBi terms), weights u (4 + (n - 1) + 3 delta) + 2 E_s (docs/theory.md T7), "
       "fp8 inputs + the fp8 unit roundoff (P quantised; fp4 and int8 inputs: e4m3's), P V "
       "accumulation (n + 1) u, plus the "
       "output's rounding"},
      {"backward_rounding",
       "a-priori rounding analysis of float32-internal softmax / log-softmax backward "
       "(properties/backward.cpp, row_budgets): softmax |y_i| / theta ((n + 1) u sum|y dy| + u "
       "|dy_i - <dy, y>|) + 3u |dx_i|; log-softmax (e^y_i (n + 2) u sum|dy| + u |dy_i - e^y_i "
       "sum dy|) / theta + 2u |dx_i|; plus the output's rounding (budgets.hpp output_abs)"},
      {"attention_backward_rounding",
       "a-priori first-order rounding analysis of float32-internal attention backward from the "
       "given out and lse (properties/backward.cpp, grad_budgets): score error as "
       "attention_rounding, P = exp(s - lse) relative E_s + u(|s| + 2|lse|) + 2u + lse's "
       "rounding, dP and D = dout . out dot-product errors (dv + 1) u (D also out's rounding), "
       "dS, then dq, dk (N terms: (N + 2) u) and dv, plus the output's rounding"},
      {"flash_attention_3x",
       "FlashAttention's backward tests (docs/theory.md T8): per gradient max|g - ref| <= 3 "
       "max|naive same-dtype - ref| + 2 ulp of the type at max|ref| + 0.3 (FA3's absolute "
       "floor), the baseline PyTorch-style autograd in the output type with float32 "
       "accumulation (kernels/naive/backward.hpp); bfloat16 and float16, per gradient tensor "
       "of at least 512 elements (FlashAttention's tests compare 1152 and more; below 256 the "
       "baseline's largest error is no stable statistic: docs/checks.md)"},
      {"cudnn_frontend_bwd",
       "cuDNN frontend's SDPA backward tests (NVIDIA/cudnn-frontend test/python/test_mhas.py, "
       "test_sdpa_backward; docs/theory.md T8): |g - ref| <= atol + rtol |ref| elementwise, "
       "rtol 2e-2, atol 2e-2 for dq and float16 dk/dv, 7e-2 for bfloat16 dk/dv; float16 and "
       "bfloat16 only. Opt-in: select it in SuiteConfig.rules"},
      {"bitwise",
       "bit-for-bit equality (kernel.h SA_CAP_DETERMINISTIC, SA_CAP_BATCH_INVARIANT, "
       "sa_attention_backward_args.deterministic)"},
      {"rounding_analysis",
       "metamorphic bound: the sum of the ulp-rule budgets of the runs compared "
       "(properties/budgets.hpp)"},
      {"T1", "docs/theory.md T1 (Lemma 2.1), plus the ulp-rule budget of each weight"},
      {"T4", "docs/theory.md T4 (Proposition 3.2), plus the entropy budgets of the runs compared"},
      {"T5", "docs/theory.md T5 (adaptive temperature), plus the polynomial's evaluation error"},
      {"T6",
       "docs/theory.md T6 (streamed entropy, merge), plus rounding of each merge (4u per S, T)"},
      {"pairwise_coverage",
       "combinatorial pairwise testing: each declared feature and each pair of declared "
       "features in at least k cases ([attention] pair_cases, default " +
           std::to_string(AttentionShapes{}.pair_cases) +
           ", the smallest k that caught the planted attention bugs on every one of seeds "
           "1-20; docs/gate-spec.md)"},
      {"kernel_h",
       "include/softmax_audit/kernel.h special-value semantics (exact for non-finite values "
       "and zeros), plus the ulp-rule budget for finite values"},
  };
}

Conventions conventions_of(const Kernel& kernel, const SuiteConfig& config) {
  std::uint32_t declared = 0;  // the convention bits the kernel claims
  for (std::uint32_t bit = 1; bit != 0; bit <<= 1)
    if ((convention_flags() & bit) && kernel.claims(bit)) declared |= bit;
  Conventions c = conventions_of_flags(declared);
  for (const auto& name : config.conventions)
    if (!declare_convention(c, name)) {
      std::string all;
      for (const auto& n : convention_names()) all += (all.empty() ? "" : ", ") + n;
      throw std::invalid_argument("run_suite: unknown convention '" + name + "'; expected one of " +
                                  all);
    }
  return c;
}

std::vector<Verdict> run_suite(const Kernel& kernel, const SuiteConfig& config,
                               SuiteObserver* observer) {
  const ConventionScope conventions(conventions_of(kernel, config));
  // Bad configuration: say which field and what was expected.
  for (const auto& d : config.distributions)
    if (std::find(distribution_names().begin(), distribution_names().end(), d) ==
        distribution_names().end())
      throw std::invalid_argument("run_suite: unknown distribution '" + d +
                                  "'; expected one of distributions()");
  for (const auto& r : config.rules) {
    const auto all = rules();
    if (std::none_of(all.begin(), all.end(), [&](const Rule& x) { return x.id == r; }))
      throw std::invalid_argument("run_suite: unknown rule '" + r + "'; expected one of rules()");
  }
  // Retired ids (property_aliases) select the checks that replaced theirs.
  // (A live id's alias is resolved where a selection is made, gate spec and
  // plan: here a unit of a planned run must run just its own properties.)
  SuiteConfig resolved = config;
  resolved.properties = resolve_aliases(config.properties, config.ops, /*retired_only=*/true);
  for (const auto& p : resolved.properties) {
    const auto all = properties();
    if (std::none_of(all.begin(), all.end(), [&](const PropertyInfo& x) {
          return x.id == p || x.id.rfind(p + ".", 0) == 0;
        })) {
      std::string fams;
      for (const auto& f : families()) fams += (fams.empty() ? "" : ", ") + f.name;
      throw std::invalid_argument("run_suite: unknown property '" + p +
                                  "'; expected an id of properties() or a family (" + fams + ")");
    }
  }
  for (auto n : config.sizes)
    if (n < 1) throw std::invalid_argument("run_suite: size " + std::to_string(n) + " is not >= 1");
  if (config.cases < 1) throw std::invalid_argument("run_suite: cases must be >= 1");
  if (config.determinism_repeats < 2)
    throw std::invalid_argument("run_suite: determinism_repeats must be >= 2");
  if (config.max_log2_n < 0 || config.max_log2_n > 30)
    throw std::invalid_argument("run_suite: max_log2_n must be in [0, 30]");
  if (!(config.temperature > 0) || !std::isfinite(config.temperature))
    throw std::invalid_argument("run_suite: temperature must be finite and > 0");
  detail::reference_options();  // a bad SA_REFERENCE is refused before any work
  std::vector<Verdict> out;
  std::uint64_t seed = config.seed;
  if (seed == 0) seed = std::random_device{}() | (std::uint64_t(std::random_device{}()) << 32);
  // 128 bits: the reference's own error (<= 2^-100 relative) cannot move a
  // float32/bfloat16 verdict, and it halves the reference's cost.
  ref::PrecisionScope prec(suite_mpfr_bits);
  // Shrinking shares one budget per run (20 s): a badly broken kernel fails
  // dozens of properties, and each still gets a counterexample.
  // Row sizes are drawn within the kernel's declared max_n (kernel.h: cases
  // outside the capabilities are not applicable): the cases a run draws are
  // cases the kernel takes. Sizes a property fixes itself and that exceed
  // max_n are reported as not applicable (sa::NotApplicable), never run.
  std::vector<std::int64_t> sizes = config.sizes;
  if (const std::int64_t max_n = kernel.max_n(); max_n > 0) {
    std::vector<std::int64_t> within;
    for (std::int64_t n : sizes.empty() ? default_sizes() : sizes)
      if (n <= max_n) within.push_back(n);
    if (!within.empty()) sizes = std::move(within);
  }
  // no_temperature (conventions.hpp): every call at temperature 1, as a spec
  // with temperature_only at 1; another temperature contradicts the kernel.
  SuiteConfig effective = resolved;
  if (active_conventions().no_temperature) {
    if (config.temperature != 1.0)
      throw std::invalid_argument("run_suite: temperature = " + std::to_string(config.temperature) +
                                  ", but the kernel declares no_temperature (it has no temperature "
                                  "parameter); expected 1");
    effective.temperature_only = true;
  }
  detail::Run run{kernel, effective, observer, out, seed, sizes, config.distributions};
  run.shrink_pool = config.shrink_seconds;
  std::vector<DType> dtypes = config.dtypes;
  if (dtypes.empty()) {
    // float32 and bfloat16 always (a kernel without one gets skip verdicts
    // naming it); float16 when the kernel declares it (a v1 plugin cannot).
    dtypes = {DType::float32, DType::bfloat16};
    if (kernel.supports(DType::float16)) dtypes.push_back(DType::float16);
  }
  const Op row_ops[] = {Op::softmax, Op::log_softmax, Op::logsumexp, Op::entropy,
                        Op::adaptive_softmax};
  // The per-dtype steps, in the order they run; each is one unit of
  // progress, so the total is counted from the steps themselves.
  std::vector<std::function<void(DType)>> steps;
  for (Op op : row_ops)
    steps.push_back([&run, op](DType t) {
      if (run.wants_op(op)) detail::run_differential(run, op, t);
    });
  for (Op op : {Op::merge_entropy_states, Op::merge_attention_states, Op::merge_attention_states_n})
    steps.push_back([&run, op](DType t) {
      if (run.wants_op(op) && t == DType::float32) detail::run_merge_differential(run, op, t);
    });
  steps.push_back([&run](DType t) { detail::run_metamorphic(run, t); });
  for (Op op : row_ops)
    steps.push_back([&run, op](DType t) {
      if (run.wants_op(op)) detail::run_interface_sizes(run, op, t);
    });
  steps.push_back([&run](DType t) { detail::run_backward(run, t); });
  for (Op op : all_ops)
    steps.push_back([&run, op](DType t) {
      if (run.wants_op(op) && (t == DType::float32 || (op != Op::merge_entropy_states &&
                                                       op != Op::merge_attention_states)))
        detail::run_special(run, op, t);
    });
  // Progress, in units: one per step and dtype (float64: one, its skip
  // verdict); per element type of the batched attention families, their
  // measured weight (suite_internal.hpp; they take about half of a check);
  // determinism one. Every family that runs is counted, so the bar reaches
  // 100% when the suite returns.
  const int per_dtype = static_cast<int>(steps.size());
  for (DType t : dtypes) run.total += t == DType::float64 ? 1 : per_dtype;
  const int attention_units =
      detail::kAttentionTypeUnits * static_cast<int>(detail::attention_types(run).size());
  const int bwd_units = detail::kAttentionBackwardTypeUnits *
                        static_cast<int>(detail::attention_backward_types(run).size());
  run.total += attention_units + bwd_units + 1;
  // `family` runs a family of `units` units: its own ticks stay inside it,
  // and progress is at its end when it returns.
  auto family = [&](int units, auto&& f) {
    run.family_end = run.done + units;
    f();
    run.progress_to(run.family_end);
  };
  auto tick = [&] { run.progress_to(run.done + 1); };
  for (DType t : dtypes) {
    if (t == DType::float64) {
      Verdict v;
      v.property = "suite";
      v.claim = "dtype is one the kernel interface carries";
      v.kernel = kernel.name();
      v.dtype = name_of(t);
      v.outcome = Outcome::skip;
      v.note = "the kernel interface carries float32, bfloat16 and float16 only";
      run.emit(v);
      tick();
      continue;
    }
    for (const auto& step : steps) {
      step(t);
      tick();
    }
  }
  family(attention_units, [&] { detail::run_attention(run); });
  family(bwd_units, [&] { detail::run_attention_backward(run); });
  family(1, [&] { detail::run_determinism(run); });
  return out;
}

}  // namespace sa::props
