// special.values: every documented special-value semantic of
// include/softmax_audit/kernel.h, on fixed named inputs, per op and dtype.
// Non-finite expected values and exact zeros must match exactly; finite
// values are held to the ulp-rule budget.
//
// One property, one function (issue 30): run_special judges op's named
// inputs with the op's own function (row_op_values, attention_values,
// merge_entropy_values, merge_attention_values) into one SpecialCtx, which
// keeps the worst check and the input and kernel call it comes from.
#include <cmath>
#include <limits>
#include <sstream>

#include "kernels/call_log.hpp"
#include "properties/budgets.hpp"
#include "properties/suite_internal.hpp"
#include "reference/attention.hpp"
#include "reference/softmax.hpp"

#include "properties/checks.hpp"
#include "properties/reference_values.hpp"

namespace sa::props::detail {
namespace {

using budget::u32;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Named {
  std::string name;
  std::vector<float> values;
};

std::vector<Named> row_inputs() {
  std::vector<Named> v = {
      {"n=1 finite", {3.5f}},
      {"n=1 masked (fully masked)", {-kInf}},
      {"fully masked n=5", std::vector<float>(5, -kInf)},
      {"fully masked n=129", std::vector<float>(129, -kInf)},
      {"+inf among finite", {kInf, 1.0f, 2.0f}},
      {"two +inf", {kInf, 0.0f, kInf, 5.0f}},
      {"+inf with -inf", {kInf, -kInf, 3.0f}},
      {"all +inf", {kInf, kInf, kInf}},
      {"NaN among finite", {1.0f, kNaN, 2.0f}},
      {"NaN with +inf", {kNaN, kInf, 1.0f}},
      {"NaN in an otherwise masked row", {-kInf, kNaN, -kInf}},
      {"equal large logits", {1e4f, 1e4f, 1e4f}},
      {"overflow filler", {89.0f, std::numeric_limits<float>::lowest(), 88.5f}},
  };
  std::vector<float> all_but_last(17, -kInf);
  all_but_last.back() = 2.0f;
  v.push_back({"all but the last masked n=17", all_but_last});
  std::vector<float> tile(129, -kInf);
  tile[128] = 1.0f;
  tile[127] = -kInf;
  v.push_back({"first 128 (a whole tile) masked, then one value", tile});
  std::vector<float> tail(33, 0.5f);
  for (int i = 32; i < 33; ++i) tail[i] = -kInf;
  v.push_back({"masked ragged tail n=33", tail});
  return v;
}

// The state of one special.values verdict (one op, one dtype) while its
// named inputs are checked: the worst check so far, the input it comes from
// and that input's kernel call, and how many inputs were run.
struct SpecialCtx {
  const Run& run;
  const Kernel& k;
  Op op;
  DType t;
  const std::string& id;
  ref::EntropyDefinition def;  // the entropy the kernel's adaptive softmax declares
  Check worst;
  std::string failing_input;
  int count = 0;
  // The kernel call of the row input being checked (row operations; the
  // merges record none), and of the input of the worst check: what a case
  // file replays (kernels/call_log.hpp).
  std::vector<call_log::Call> calls, failing_calls;

  // The input of the worst check (a failing one beats any passing one), so
  // that the verdict names the input its measured value comes from.
  void record(const Check& c, const std::string& input) {
    const Check before = worst;
    worst.worst(c);
    if (!before.applicable || before.ratio != worst.ratio || before.where != worst.where ||
        before.convention != worst.convention) {
      failing_input = input;
      failing_calls = calls;
    }
  }
};

// The first (at most 8) values of a row, as "[a,b,...]" without the brackets.
template <class At>
std::string first_values(std::size_t n, At at) {
  std::string s;
  for (std::size_t i = 0; i < n && i < 8; ++i) s += (i ? "," : "") + fmt(at(i));
  return s + (n > 8 ? ",..." : "");
}

// A named row input alone (batch 0), or as row 1 of a batch whose row 0 is
// finite, with stride n + 1 (batch 1); the padding is NaN.
RowBatch row_batch(DType t, const std::vector<float>& vals, int batch) {
  RowBatch b;
  b.n = static_cast<std::int64_t>(vals.size());
  b.rows = batch ? 2 : 1;
  b.stride = b.n + (batch ? 1 : 0);
  b.data.assign(static_cast<std::size_t>(b.rows * b.stride), kNaN);
  for (std::int64_t r = 0; r < b.rows; ++r)
    for (std::int64_t i = 0; i < b.n; ++i)
      b.data[static_cast<std::size_t>(r * b.stride + i)] =
          (batch && r == 0) ? to_dtype(t, 0.25 * double(i % 5)) : vals[static_cast<std::size_t>(i)];
  return b;
}

// The budget of a value of a row that is not finite (an infinite or NaN
// logit): exact for zero and non-finite expected values, else the output
// rounding plus `internal_rel` relative.
double nonfinite_row_budget(DType out, double e, double internal_rel) {
  return (e == 0 || !std::isfinite(e)) ? 0.0
                                       : budget::output_abs(out, e, internal_rel * std::abs(e));
}

// One row r of a softmax or log_softmax batch: every item against the
// reference, within softmax_abs / log_softmax_abs for a finite row.
void judge_weights(SpecialCtx& cx, const RowBatch& b, std::int64_t r, const budget::RowStats& st,
                   const std::vector<double>& l, const RowOutputs& o, const std::string& w) {
  const Op op = cx.op;
  const DType t = cx.t;
  const auto ex = op == Op::softmax ? ref_softmax(l) : ref_log_softmax(l);
  for (std::size_t j = 0; j < ex.size(); ++j) {
    const double e = ex[j];
    double b2 = 0;
    if (st.finite)
      b2 = op == Op::softmax ? (e == 0 ? 0.0 : budget::softmax_abs(t, st, l[j], e))
                             : (std::isfinite(e) ? budget::log_softmax_abs(t, st, l[j], e) : 0.0);
    else
      b2 = nonfinite_row_budget(t, e, 4 * u32);
    cx.record(elem_in_row(st, t, o.got[static_cast<std::size_t>(r * b.stride) + j], e, b2,
                          w + " item " + std::to_string(j)),
              w);
  }
}

// One row r of a logsumexp or entropy batch: the row's value against the
// reference, within lse_abs / entropy_abs for a finite row.
void judge_row_value(SpecialCtx& cx, std::int64_t r, const budget::RowStats& st,
                     const std::vector<double>& l, const RowOutputs& o, const std::string& w) {
  const Op op = cx.op;
  const double e = op == Op::logsumexp ? ref_log_sum_exp(l) : ref_shannon_entropy(l);
  const double b2 =
      !std::isfinite(e) ? 0.0
      : st.finite ? (op == Op::logsumexp ? budget::lse_abs(st, e) : budget::entropy_abs(st, e))
                  : nonfinite_row_budget(DType::float32, e, 4 * u32);
  cx.record(elem_in_row(st, DType::float32, o.got[static_cast<std::size_t>(r)], e, b2, w), w);
}

// One row r of an adaptive softmax batch: entropy, beta and every weight
// against the reference (of the entropy the kernel declares), within
// entropy_abs, beta_abs and softmax_abs at beta z plus beta's error.
void judge_adaptive(SpecialCtx& cx, const RowBatch& b, std::int64_t r, const budget::RowStats& st,
                    const std::vector<double>& l, const RowOutputs& o, const std::string& w) {
  const DType t = cx.t;
  const auto ar = ref_adaptive(l, 1.0, cx.def);
  const double He = ar.entropy, Be = ar.beta;
  const double dH =
      st.finite ? budget::entropy_abs(st, He) : nonfinite_row_budget(DType::float32, He, 4 * u32);
  cx.record(
      elem_in_row(st, DType::float32, o.H[static_cast<std::size_t>(r)], He, dH, w + " entropy"), w);
  cx.record(elem_in_row(st, DType::float32, o.beta[static_cast<std::size_t>(r)], Be,
                        std::isfinite(Be) && Be != 1.0
                            ? budget::beta_abs(He, dH)
                            : (std::isfinite(Be) ? budget::beta_abs(He, dH) : 0.0),
                        w + " beta"),
            w);
  for (std::size_t j = 0; j < ar.weights.size(); ++j) {
    const double e = ar.weights[j];
    budget::RowStats sb = st;
    sb.max *= Be, sb.spread *= Be, sb.max_abs *= Be, sb.theta_one = false;
    const double b2 = e == 0 || !std::isfinite(e) ? 0.0
                      : st.finite                 ? budget::softmax_abs(t, sb, Be * l[j], e) +
                                        2 * e * st.spread * budget::beta_abs(He, dH)
                                  : nonfinite_row_budget(t, e, 4 * u32);
    cx.record(elem_in_row(st, t, o.got[static_cast<std::size_t>(r * b.stride) + j], e, b2,
                          w + " item " + std::to_string(j)),
              w);
  }
}

// The row operations (softmax, log_softmax, logsumexp, entropy,
// adaptive_softmax): each named row input alone, and as row 1 of a batch
// whose row 0 is finite (rows are independent); every row of every call is
// judged.
void row_op_values(SpecialCtx& cx) {
  const Kernel& k = cx.k;
  const DType t = cx.t;
  for (const Named& in : row_inputs()) {
    std::vector<float> vals;
    for (float x : in.values) vals.push_back(to_dtype(t, x));
    for (int batch = 0; batch < 2; ++batch) {
      const RowBatch b = row_batch(t, vals, batch);
      const std::string label =
          in.name + (batch ? " (as row 1 of 2, stride n+1)" : "") + " values=[" +
          first_values(vals.size(), [&](std::size_t i) { return vals[i]; }) + "]";
      // A row longer than the kernel's max_n is not applicable: not run.
      if (k.max_n() > 0 && b.n > k.max_n()) continue;
      cx.run.before(cx.id, label);
      ++cx.count;
      RowOutputs o;
      {
        call_log::Capture capture;
        o = call_row_op(k, cx.op, t, b);
        cx.calls = capture.take();
      }
      for (std::int64_t r = 0; r < b.rows; ++r) {
        const auto row = b.row(r);
        const std::vector<double> l(row.begin(), row.end());
        const budget::RowStats st = budget::stats(row, 1.0);
        // Row 0 of a batch is the finite neighbour, not the named input: name it as such.
        const std::string w =
            batch && r == 0 ? "finite row 0 values=[" +
                                  first_values(static_cast<std::size_t>(b.n),
                                               [&](std::size_t i) { return b.data[i]; }) +
                                  "] (stride n+1), the neighbour of row 1 = \"" + in.name + "\""
                            : label + " row " + std::to_string(r);
        if (cx.op == Op::softmax || cx.op == Op::log_softmax)
          judge_weights(cx, b, r, st, l, o, w);
        else if (cx.op == Op::logsumexp || cx.op == Op::entropy)
          judge_row_value(cx, r, st, l, o, w);
        else
          judge_adaptive(cx, b, r, st, l, o, w);
      }
    }
  }
}

struct NamedAttention {
  std::string name;
  AttentionCase in;
};

// The named attention inputs (one sequence, one head: what the v1 slot
// carries): every key masked (plain and adaptive), causal with nq > nk and
// nq < nk (bottom-right alignment), NaN in q, a single key, and a fully
// masked first split.
std::vector<NamedAttention> attention_inputs(DType t) {
  std::vector<NamedAttention> cases;
  auto base = [&](std::int64_t nq, std::int64_t nk) {
    AttentionCase in;
    in.qkv = in.out_type = t == DType::bfloat16 ? AttnType::bfloat16 : AttnType::float32;
    in.seqlen_q = nq, in.seqlen_k = nk, in.d = 2, in.dv = 2;
    for (std::int64_t i = 0; i < nq * 2; ++i)
      in.q.push_back(to_dtype(t, 0.5 * double(i % 3) - 0.25));
    for (std::int64_t i = 0; i < nk * 2; ++i)
      in.k.push_back(to_dtype(t, 0.75 - 0.5 * double(i % 4)));
    for (std::int64_t i = 0; i < nk * 2; ++i) in.v.push_back(to_dtype(t, double(i % 7) - 3.0));
    return in;
  };
  NamedAttention a{"every key masked (key_mask all 0)", base(2, 3)};
  a.in.key_padding_mask.assign(3, 0);
  cases.push_back(a);
  NamedAttention b{"every key masked, adaptive", a.in};
  b.in.adaptive = true;
  cases.push_back(b);
  NamedAttention c{"causal with nq=3 > nk=2 (query 0 sees no key: bottom-right alignment)",
                   base(3, 2)};
  c.in.causal = true;
  cases.push_back(c);
  NamedAttention e{"causal with nq=2 < nk=5 (bottom-right: query 0 sees keys 0..3)", base(2, 5)};
  e.in.causal = true;
  cases.push_back(e);
  NamedAttention f{"NaN in q row 0", base(2, 3)};
  f.in.q[0] = kNaN;
  cases.push_back(f);
  NamedAttention g{"nk=1 (weight exactly 1)", base(2, 1)};
  cases.push_back(g);
  NamedAttention h{"fully masked first split (num_splits=2, first half of keys masked)",
                   base(2, 6)};
  h.in.key_padding_mask = {0, 0, 0, 1, 1, 1};
  h.in.num_splits = 2;
  cases.push_back(h);
  return cases;
}

// attention (the v1 slot, Kernel::attention): each named input against the
// attention reference, per query: every out element within 64 u of the
// output scale (plus two bfloat16 roundings of the weights), lse and
// entropy within 64 u, beta within 1e-4; exact where the expected value is
// a special one.
void attention_values(SpecialCtx& cx) {
  const DType t = cx.t;
  // A kernel that also has attention_v2 is checked on its v1 slot within
  // what it declares there (properties/attention.cpp, v1_domain).
  const std::uint32_t declared =
      cx.k.abi_version() >= 2 && cx.k.supports(Op::attention_v2)
          ? cx.k.attention_features(t == DType::bfloat16 ? AttnType::bfloat16 : AttnType::float32)
          : ~0u;
  for (const NamedAttention& a : attention_inputs(t)) {
    if ((a.in.adaptive && !(declared & SA_ATTN_ADAPTIVE)) ||
        (a.in.causal && !(declared & SA_ATTN_CAUSAL)) ||
        (!a.in.key_padding_mask.empty() && !(declared & SA_ATTN_KEY_PADDING)))
      continue;
    cx.run.before(cx.id, a.name);
    ++cx.count;
    const AttentionResult o = cx.k.attention(a.in);
    const ref::AttentionValues rr = ref::attention_v2(a.in);
    for (std::int64_t i = 0; i < a.in.seqlen_q; ++i) {
      const std::size_t qi = static_cast<std::size_t>(i);
      const std::string w = a.name + " query " + std::to_string(i);
      // small problems: budget 64 u of the output scale sum p|v| <= 3 (|v| <= 3, d = 2), plus
      // for bfloat16 two roundings of the weights to bfloat16 (kernels that round P before P.V)
      const double out_internal =
          (64 * u32 + (t == DType::bfloat16 ? 2 * unit_roundoff(DType::bfloat16) : 0.0)) * 3;
      for (std::int64_t c = 0; c < a.in.dv; ++c) {
        const std::size_t x = static_cast<std::size_t>(i * a.in.dv + c);
        const double e = rr.out[x];
        cx.record(
            elem(t, o.out[x], e,
                 e == 0 && rr.lse[qi] == -INFINITY ? 0.0 : budget::output_abs(t, e, out_internal),
                 w + " out[" + std::to_string(c) + "]"),
            w);
      }
      // beta: 1 without the adaptive temperature, NaN rows included (v1's
      // semantics; attention_v2's reference gives a NaN row NaN).
      const double le = rr.lse[qi], He = rr.entropy[qi], be = a.in.adaptive ? rr.beta[qi] : 1.0;
      cx.record(elem(DType::float32, o.lse[qi], le,
                     std::isfinite(le) ? budget::output_abs(DType::float32, le, 64 * u32) : 0.0,
                     w + " lse"),
                w);
      cx.record(elem(DType::float32, o.entropy[qi], He,
                     std::isfinite(He) && He != 0 ? budget::output_abs(DType::float32, He, 64 * u32)
                                                  : 0.0,
                     w + " entropy"),
                w);
      cx.record(
          elem(DType::float32, o.beta[qi], be,
               std::isfinite(be) && be != 1 ? budget::output_abs(DType::float32, be, 1e-4) : 0.0,
               w + " beta"),
          w);
    }
  }
}

// merge_entropy_states: the identity (-inf, 0, 0) on either side, NaN on
// either side, and +inf states; every result must equal the expected state
// exactly (any NaN m for an expected NaN).
void merge_entropy_values(SpecialCtx& cx) {
  using ES = sa_entropy_state;
  const ES id0{-kInf, 0, 0}, a{1.5f, 2.0f, -0.5f}, nan{kNaN, kNaN, kNaN}, inf1{kInf, 1, 0},
      inf2{kInf, 2, 0};
  struct M {
    std::string name;
    ES x, y, want;
  };
  const M ms[] = {{"identity . identity", id0, id0, id0},
                  {"identity . a", id0, a, a},
                  {"a . identity", a, id0, a},
                  {"NaN . a", nan, a, nan},
                  {"a . NaN", a, nan, nan},
                  {"(+inf,1,0) . a", inf1, a, inf1},
                  {"(+inf,1,0) . (+inf,2,0)", inf1, inf2, ES{kInf, 3, 0}}};
  for (const M& m : ms) {
    cx.run.before(cx.id, m.name);
    ++cx.count;
    const ES xs[] = {m.x}, ys[] = {m.y};
    const ES r = cx.k.merge_entropy_states(xs, ys)[0];
    const std::string w = m.name + ": got (" + fmt(r.m) + "," + fmt(r.S) + "," + fmt(r.T) + ")";
    const bool ok = std::isnan(m.want.m) ? std::isnan(r.m)
                                         : (r.m == m.want.m && r.S == m.want.S && r.T == m.want.T);
    cx.record(make_check(ok ? 0.0 : INFINITY, 0.0,
                         w + ", expected (" + fmt(m.want.m) + "," + fmt(m.want.S) + "," +
                             fmt(m.want.T) + ")"),
              m.name);
  }
}

// merge_attention_states: an empty part (lse = -inf) on either side, both
// empty, a NaN lse, and equal lse; exact except for equal lse, where out is
// within 32 u and lse within 4 u.
void merge_attention_values(SpecialCtx& cx) {
  struct M {
    std::string name;
    float la, lb;
    std::vector<float> want;
    float want_lse;
  };
  const std::vector<float> oa = {1.0f, -2.0f}, ob = {3.0f, 0.5f};
  const M ms[] = {{"part a empty (lse_a = -inf)", -kInf, 0.5f, ob, 0.5f},
                  {"part b empty (lse_b = -inf)", 0.25f, -kInf, oa, 0.25f},
                  {"both empty", -kInf, -kInf, {0.0f, 0.0f}, -kInf},
                  {"NaN lse", kNaN, 0.0f, {kNaN, kNaN}, kNaN},
                  {"equal lse", 0.0f, 0.0f, {2.0f, -0.75f}, std::log(2.0f)}};
  for (const M& m : ms) {
    cx.run.before(cx.id, m.name);
    ++cx.count;
    const float la[] = {m.la}, lb[] = {m.lb};
    std::vector<float> lse;
    const auto out = cx.k.merge_attention_states(1, 2, oa, la, ob, lb, &lse);
    for (int c = 0; c < 2; ++c)
      cx.record(
          elem(DType::float32, out[static_cast<std::size_t>(c)],
               m.want[static_cast<std::size_t>(c)],
               std::isfinite(m.want[static_cast<std::size_t>(c)]) && m.la == m.lb ? 8 * u32 * 4
                                                                                  : 0.0,
               m.name + " out[" + std::to_string(c) + "]"),
          m.name);
    cx.record(
        elem(DType::float32, lse[0], m.want_lse, m.la == m.lb ? 4 * u32 : 0.0, m.name + " lse"),
        m.name);
  }
}

// The verdict of special.values from the checks recorded in cx (`error`: a
// kernel call that threw).
Verdict values_verdict(const SpecialCtx& cx, const std::string& error) {
  const Check& worst = cx.worst;
  Verdict v;
  v.property = cx.id;
  v.claim = claim_of(cx.id);
  v.rule = rule_by_id("kernel_h");
  v.kernel = cx.k.name();
  v.op = name_of(cx.op);
  v.dtype = name_of(cx.t);
  v.measured = worst.measured;
  v.bound = worst.bound;
  if (!error.empty()) {
    v.outcome = Outcome::error;
    v.note = "kernel call failed: " + error;
  } else if (worst.fails()) {
    v.outcome = Outcome::fail;
    v.counterexample = "fixed input \"" + cx.failing_input + "\"; at " + worst.where;
    v.worst_case = v.counterexample;
    call_log::stash(v.counterexample, cx.failing_calls);
    if (!worst.convention.empty())
      v.note = "holds under the " + worst.convention +
               " convention, which the kernel does not declare (docs/conventions.md): a policy "
               "difference if the kernel means it, not an error";
  } else {
    v.outcome = Outcome::pass;
    v.note = std::to_string(cx.count) + " named inputs; worst: " + worst.where;
    v.worst_case = "fixed input \"" + cx.failing_input + "\"";
  }
  if (!worst.unit.empty()) v.note += "; measured and bound in " + worst.unit;
  return v;
}

}  // namespace

// special.values (rule kernel_h): every special-value semantic
// include/softmax_audit/kernel.h documents holds on its fixed named inputs,
// for op on dtype t. Non-finite expected values and exact zeros must match
// exactly; finite values are held to the ulp rule's budgets (budgets.hpp),
// per op as its function above says. One verdict: the worst check over
// every input, named with the input it comes from.
void run_special(const Run& run, Op op, DType t) {
  const std::string id = "special.values";
  if (!run.wants_property(id)) return;
  const Kernel& k = run.kernel;
  if (const std::string why = why_unsupported(k, op, t); !why.empty()) {
    run.emit(skip_verdict(run, id, claim_of(id), rule_by_id("kernel_h"), op, t, why));
    return;
  }
  const auto def = k.adaptive_entropy() == SA_ENTROPY_PAPER_EPS ? ref::EntropyDefinition::paper_eps
                                                                : ref::EntropyDefinition::shannon;
  SpecialCtx cx{run, k, op, t, id, def};
  std::string error;
  try {
    if (op == Op::softmax || op == Op::log_softmax || op == Op::logsumexp || op == Op::entropy ||
        op == Op::adaptive_softmax)
      row_op_values(cx);
    else if (op == Op::attention)
      attention_values(cx);
    else if (op == Op::merge_entropy_states)
      merge_entropy_values(cx);
    else if (op == Op::merge_attention_states)
      merge_attention_values(cx);
  } catch (const std::exception& e) {
    error = e.what();
  }
  run.emit(values_verdict(cx, error));
}

}  // namespace sa::props::detail
