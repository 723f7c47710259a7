// Internals shared by the suite's translation units (not part of the API).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/attention_case.hpp"
#include "properties/conventions.hpp"
#include "properties/generators.hpp"
#include "properties/search.hpp"
#include "properties/suite.hpp"

namespace sa::props::detail {

const Rule& rule_by_id(const std::string& id);
// The claim of a property of the registry (properties()); "" for an unknown id.
const std::string& claim_of(const std::string& id);
// The rule of the registry row `id` (rules(); "unknown" without such a row).
const Rule& rule_of(const std::string& id);
extern const char* const kFaFloat32Note;

// Everything a property runner needs.
struct Run {
  const Kernel& kernel;
  const SuiteConfig& config;
  SuiteObserver* observer;
  std::vector<Verdict>& out;
  std::uint64_t seed;
  std::vector<std::int64_t> sizes;    // row sizes for generators
  std::vector<std::string> dists;     // selected distributions (empty: all)
  mutable double shrink_pool = 20.0;  // seconds of shrinking left in this run (shared)
  // When the last verdict was emitted: a verdict without a time of its own
  // (one not decided by a search) is charged the wall time since then.
  mutable std::chrono::steady_clock::time_point last_emit = std::chrono::steady_clock::now();
  mutable double last_emit_kernel = kernel_call_seconds();  // at last_emit
  // Progress (observer->progress): units done of `total`. A family's own
  // ticks stop at `family_end`, the unit its whole run ends at; after it,
  // run_suite moves `done` there whatever the family ran (monotone, and
  // `total` when the suite returns).
  int total = 0;
  mutable int done = 0;
  mutable int family_end = 0;

  bool wants_rule(const std::string& id) const;
  bool wants_property(const std::string& id) const;
  bool wants_op(Op op) const;
  // The temperatures of random cases: config.temperature first, then `extra`
  // unless config.temperature_only.
  std::vector<double> temperatures(std::initializer_list<double> extra) const;
  void emit(Verdict v) const;
  // One unit of progress inside the running family (not past family_end).
  void tick(int units = 1) const;
  // Progress to `unit` (never backwards), reported to the observer.
  void progress_to(int unit) const;
  void before(const std::string& property, const std::string& input) const {
    if (observer && observer->before_case) observer->before_case(property, input);
  }
};

// The case with each key/value head repeated for its query heads (GQA/MQA
// made MHA: heads_kv = heads_q), as the GQA properties of attention_v2 and
// attention_backward compare against.
inline AttentionCase with_repeated_kv_heads(const AttentionCase& c) {
  AttentionCase mc = c;
  mc.heads_kv = c.heads_q;
  mc.k.clear();
  mc.v.clear();
  for (std::int64_t row = 0; row < c.total_k(); ++row)
    for (std::int64_t h = 0; h < c.heads_q; ++h) {
      const std::int64_t hk = c.kv_head(h);
      mc.k.insert(mc.k.end(), c.k.begin() + (row * c.heads_kv + hk) * c.d,
                  c.k.begin() + (row * c.heads_kv + hk + 1) * c.d);
      mc.v.insert(mc.v.end(), c.v.begin() + (row * c.heads_kv + hk) * c.dv,
                  c.v.begin() + (row * c.heads_kv + hk + 1) * c.dv);
    }
  return mc;
}

// What a failing verdict's note says when its failure holds under a
// convention the kernel does not declare (Check::convention).
inline std::string undeclared_convention_note(const std::string& convention) {
  return "holds under the " + convention + " convention, which the kernel does not declare (" +
         (convention_flag_name(convention).empty()
              ? std::string("kernel.h")
              : "kernel.h " + convention_flag_name(convention)) +
         ", or the gate spec's conventions; docs/conventions.md): a policy difference if the "
         "kernel means it, not an accuracy error";
}

// Builds the verdict of one slot of a search.
// What a row operation returned: the weights (or per-row values), and for
// adaptive_softmax its beta and entropy per row.
struct RowOutputs {
  std::vector<float> got, beta, H;
};
// One call of a row operation (softmax, log_softmax, logsumexp, entropy or
// adaptive_softmax; any other op returns nothing) at temperature theta.
RowOutputs call_row_op(const Kernel& k, Op op, DType t, const RowBatch& b, double theta = 1.0);

template <class P>
Verdict slot_verdict(const Run& run, const std::string& property, const std::string& claim,
                     const Rule& rule, Op op, DType t, const SlotResult<P>& r,
                     const std::function<std::string(const P&)>& show) {
  Verdict v;
  v.property = property;
  v.claim = claim;
  v.rule = rule;
  v.kernel = run.kernel.name();
  v.op = name_of(op);
  v.dtype = name_of(t);
  v.seconds = r.seconds;
  v.kernel_seconds = r.kernel_seconds;
  v.cases = r.cases_applicable;
  if (!r.error.empty() && !r.failing) {
    v.outcome = Outcome::error;
    v.note = "kernel call failed: " + r.error;
    return v;
  }
  if (r.failing) {
    v.outcome = Outcome::fail;
    v.measured = r.failing_check.measured;
    v.bound = r.failing_check.bound;
    v.counterexample =
        "seed=" + std::to_string(run.seed) +
        (r.failing_case < 0
             ? " edge case " + std::to_string(-r.failing_case) + " (run on every seed)"
             : " case=" + std::to_string(r.failing_case)) +
        " (shrunk " + std::to_string(r.shrink_steps) + " steps) " + show(*r.failing) +
        (r.failing_check.where.empty() ? "" : " ; at " + r.failing_check.where);
    if (!r.failing_check.unit.empty()) v.note = "measured and bound in " + r.failing_check.unit;
    if (!r.failing_check.convention.empty())
      v.note +=
          (v.note.empty() ? "" : "; ") + undeclared_convention_note(r.failing_check.convention);
    v.worst_case = v.counterexample;
    call_log::stash(v.counterexample, r.calls);
    return v;
  }
  // Cases outside the kernel's capabilities were not run (kernel.h): named.
  const std::string na = r.cases_not_applicable == 0
                             ? std::string()
                             : std::to_string(r.cases_not_applicable) +
                                   " case(s) not applicable (e.g. " + r.not_applicable + ")";
  if (r.cases_applicable == 0) {
    v.outcome = Outcome::skip;
    v.note = na.empty() ? "no generated case was applicable" : "not applicable: " + na;
    return v;
  }
  v.outcome = Outcome::pass;
  v.measured = r.worst.measured;
  v.bound = r.worst.bound;
  v.note = "worst of " + std::to_string(r.cases_applicable) + " cases (seed " +
           std::to_string(run.seed) + ")" + (r.worst.where.empty() ? "" : ": " + r.worst.where) +
           (r.worst.unit.empty() ? "" : "; measured and bound in " + r.worst.unit) +
           (na.empty() ? "" : "; " + na);
  if (r.worst_input) v.worst_case = show(*r.worst_input);
  return v;
}

Verdict skip_verdict(const Run& run, const std::string& property, const std::string& claim,
                     const Rule& rule, Op op, DType t, const std::string& why);

// Value-level shrinking of row cases: drop chunks of items, then simplify values.
RowParams shrink_values(const RowParams& p, DType t,
                        const std::function<bool(const RowParams&)>& fails, int& budget);

void run_differential(const Run& run, Op op, DType t);
// Attention (properties/attention.cpp): once per suite, over its own
// element types; attention_v2 and, on its single-head cases, the interface
// v1 slot (float32 and bfloat16).
void run_attention(const Run& run);
// Progress units per element type of the batched attention families, against
// one unit per op and dtype of a row family (24 per dtype): measured with the
// per-verdict seconds of `check --builtin cpu --cases 10` (issue 32; 2-core
// Xeon), an attention_v2 element type took about as long as 16 such units
// (6.9 s against 0.42 s) and an attention_backward one less than one.
inline constexpr int kAttentionTypeUnits = 16;
inline constexpr int kAttentionBackwardTypeUnits = 1;
// The element types run_attention / run_attention_backward run (each once,
// with one progress tick), for the suite's progress total.
std::vector<AttnType> attention_types(const Run& run);
std::vector<AttnType> attention_backward_types(const Run& run);
// Backward operations (interface v2): properties/backward.cpp.
void run_backward(const Run& run, DType t);
void run_attention_backward(const Run& run);
// Determinism (properties/determinism.cpp): once per suite.
void run_determinism(const Run& run);
// differential.ulp of the merge operations (properties/merge.cpp).
void run_merge_differential(const Run& run, Op op, DType t);
void run_metamorphic(const Run& run, DType t);
void run_special(const Run& run, Op op, DType t);
void run_interface_sizes(const Run& run, Op op, DType t);
std::vector<std::int64_t> interface_sizes(int max_log2_n);

}  // namespace sa::props::detail
