// special.values: every documented special-value semantic of
// include/softmax_audit/kernel.h, on fixed named inputs, per op and dtype.
// Non-finite expected values and exact zeros must match exactly; finite
// values are held to the ulp-rule budget.
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

}  // namespace

void run_special(const Run& run, Op op, DType t) {
  const std::string id = "special.values";
  if (!run.wants_property(id)) return;
  const Kernel& k = run.kernel;
  if (const std::string why = why_unsupported(k, op, t); !why.empty()) {
    run.emit(skip_verdict(run, id, claim_of(id), rule_by_id("kernel_h"), op, t, why));
    return;
  }
  Check worst;
  std::string failing_input;
  std::string error;
  int count = 0;
  // The kernel call of the row input being checked (row operations; the
  // merges record none), and of the input of the worst check: what a case
  // file replays (kernels/call_log.hpp).
  std::vector<call_log::Call> calls, failing_calls;
  // The input of the worst check (a failing one beats any passing one), so
  // that the verdict names the input its measured value comes from.
  auto record = [&](const Check& c, const std::string& input) {
    const Check before = worst;
    worst.worst(c);
    if (!before.applicable || before.ratio != worst.ratio || before.where != worst.where ||
        before.convention != worst.convention) {
      failing_input = input;
      failing_calls = calls;
    }
  };
  const auto def = k.adaptive_entropy() == SA_ENTROPY_PAPER_EPS ? ref::EntropyDefinition::paper_eps
                                                                : ref::EntropyDefinition::shannon;
  try {
    if (op == Op::softmax || op == Op::log_softmax || op == Op::logsumexp || op == Op::entropy ||
        op == Op::adaptive_softmax) {
      for (const Named& in : row_inputs()) {
        std::vector<float> vals;
        for (float x : in.values) vals.push_back(to_dtype(t, x));
        // Each input alone, and as row 1 of a batch whose row 0 is finite (rows are independent).
        for (int batch = 0; batch < 2; ++batch) {
          RowBatch b;
          b.n = static_cast<std::int64_t>(vals.size());
          b.rows = batch ? 2 : 1;
          b.stride = b.n + (batch ? 1 : 0);
          b.data.assign(static_cast<std::size_t>(b.rows * b.stride), kNaN);
          for (std::int64_t r = 0; r < b.rows; ++r)
            for (std::int64_t i = 0; i < b.n; ++i)
              b.data[static_cast<std::size_t>(r * b.stride + i)] =
                  (batch && r == 0) ? to_dtype(t, 0.25 * double(i % 5))
                                    : vals[static_cast<std::size_t>(i)];
          const std::string label = in.name + (batch ? " (as row 1 of 2, stride n+1)" : "") +
                                    " values=[" +
                                    [&] {
                                      std::string s;
                                      for (std::size_t i = 0; i < vals.size() && i < 8; ++i)
                                        s += (i ? "," : "") + fmt(vals[i]);
                                      return s + (vals.size() > 8 ? ",..." : "");
                                    }() +
                                    "]";
          // A row longer than the kernel's max_n is not applicable: not run.
          if (k.max_n() > 0 && b.n > k.max_n()) continue;
          run.before(id, label);
          ++count;
          std::vector<float> got, beta, H;
          call_log::Capture capture;
          switch (op) {
            case Op::softmax:
              got = k.softmax(t, b);
              break;
            case Op::log_softmax:
              got = k.log_softmax(t, b);
              break;
            case Op::logsumexp:
              got = k.logsumexp(t, b);
              break;
            case Op::entropy:
              got = k.entropy(t, b);
              break;
            default: {
              auto a = k.adaptive_softmax(t, b);
              got = a.weights, beta = a.beta, H = a.entropy;
            }
          }
          calls = capture.take();
          for (std::int64_t r = 0; r < b.rows; ++r) {
            const auto row = b.row(r);
            const std::vector<double> l(row.begin(), row.end());
            const budget::RowStats st = budget::stats(row, 1.0);
            // Row 0 of a batch is the finite neighbour, not the named input: name it as such.
            const std::string w =
                batch && r == 0
                    ? "finite row 0 values=[" +
                          [&] {
                            std::string s;
                            for (std::int64_t i = 0; i < b.n && i < 8; ++i)
                              s += (i ? "," : "") + fmt(b.data[static_cast<std::size_t>(i)]);
                            return s + (b.n > 8 ? ",..." : "");
                          }() +
                          "] (stride n+1), the neighbour of row 1 = \"" + in.name + "\""
                    : label + " row " + std::to_string(r);
            auto bud = [&](DType out, double e, double internal_rel) {
              return (e == 0 || !std::isfinite(e))
                         ? 0.0
                         : budget::output_abs(out, e, internal_rel * std::abs(e));
            };
            if (op == Op::softmax || op == Op::log_softmax) {
              const auto ex = op == Op::softmax ? ref_softmax(l) : ref_log_softmax(l);
              for (std::size_t j = 0; j < ex.size(); ++j) {
                const double e = ex[j];
                double b2 = 0;
                if (st.finite)
                  b2 = op == Op::softmax
                           ? (e == 0 ? 0.0 : budget::softmax_abs(t, st, l[j], e))
                           : (std::isfinite(e) ? budget::log_softmax_abs(t, st, l[j], e) : 0.0);
                else
                  b2 = bud(t, e, 4 * u32);
                record(elem_in_row(st, t, got[static_cast<std::size_t>(r * b.stride) + j], e, b2,
                                   w + " item " + std::to_string(j)),
                       w);
              }
            } else if (op == Op::logsumexp || op == Op::entropy) {
              const double e = op == Op::logsumexp ? ref_log_sum_exp(l) : ref_shannon_entropy(l);
              const double b2 = !std::isfinite(e) ? 0.0
                                : st.finite       ? (op == Op::logsumexp ? budget::lse_abs(st, e)
                                                                         : budget::entropy_abs(st, e))
                                                  : bud(DType::float32, e, 4 * u32);
              record(elem_in_row(st, DType::float32, got[static_cast<std::size_t>(r)], e, b2, w),
                     w);
            } else {
              const auto ar = ref_adaptive(l, 1.0, def);
              const double He = ar.entropy, Be = ar.beta;
              const double dH =
                  st.finite ? budget::entropy_abs(st, He) : bud(DType::float32, He, 4 * u32);
              record(elem_in_row(st, DType::float32, H[static_cast<std::size_t>(r)], He, dH,
                                 w + " entropy"),
                     w);
              record(elem_in_row(st, DType::float32, beta[static_cast<std::size_t>(r)], Be,
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
                                  : st.finite ? budget::softmax_abs(t, sb, Be * l[j], e) +
                                                    2 * e * st.spread * budget::beta_abs(He, dH)
                                              : bud(t, e, 4 * u32);
                record(elem_in_row(st, t, got[static_cast<std::size_t>(r * b.stride) + j], e, b2,
                                   w + " item " + std::to_string(j)),
                       w);
              }
            }
          }
        }
      }
    } else if (op == Op::attention) {
      struct A {
        std::string name;
        AttentionInput in;
      };
      std::vector<A> cases;
      auto base = [&](std::int64_t nq, std::int64_t nk) {
        AttentionInput in;
        in.nq = nq, in.nk = nk, in.d = 2, in.dv = 2;
        for (std::int64_t i = 0; i < nq * 2; ++i)
          in.q.push_back(to_dtype(t, 0.5 * double(i % 3) - 0.25));
        for (std::int64_t i = 0; i < nk * 2; ++i)
          in.k.push_back(to_dtype(t, 0.75 - 0.5 * double(i % 4)));
        for (std::int64_t i = 0; i < nk * 2; ++i) in.v.push_back(to_dtype(t, double(i % 7) - 3.0));
        return in;
      };
      {
        A a{"every key masked (key_mask all 0)", base(2, 3)};
        a.in.key_mask.assign(3, 0);
        cases.push_back(a);
        A b{"every key masked, adaptive", a.in};
        b.in.adaptive = true;
        cases.push_back(b);
        A c{"causal with nq=3 > nk=2 (query 0 sees no key: bottom-right alignment)", base(3, 2)};
        c.in.causal = true;
        cases.push_back(c);
        A e{"causal with nq=2 < nk=5 (bottom-right: query 0 sees keys 0..3)", base(2, 5)};
        e.in.causal = true;
        cases.push_back(e);
        A f{"NaN in q row 0", base(2, 3)};
        f.in.q[0] = kNaN;
        cases.push_back(f);
        A g{"nk=1 (weight exactly 1)", base(2, 1)};
        cases.push_back(g);
        A h{"fully masked first split (num_splits=2, first half of keys masked)", base(2, 6)};
        h.in.key_mask = {0, 0, 0, 1, 1, 1};
        h.in.num_splits = 2;
        cases.push_back(h);
      }
      for (const A& a : cases) {
        run.before(id, a.name);
        ++count;
        const AttentionOutput o = k.attention(t, a.in);
        ref::AttentionProblem pr;
        pr.nq = a.in.nq, pr.nk = a.in.nk, pr.d = a.in.d, pr.dv = a.in.dv;
        pr.q.assign(a.in.q.begin(), a.in.q.end());
        pr.k.assign(a.in.k.begin(), a.in.k.end());
        pr.v.assign(a.in.v.begin(), a.in.v.end());
        pr.key_mask = a.in.key_mask;
        pr.scale = a.in.scale;
        pr.causal = a.in.causal;
        pr.adaptive = a.in.adaptive;
        const auto rr = ref::attention(pr);
        for (std::int64_t i = 0; i < a.in.nq; ++i) {
          const std::size_t qi = static_cast<std::size_t>(i);
          const std::string w = a.name + " query " + std::to_string(i);
          // small problems: budget 64 u of the output scale sum p|v| <= 3 (|v| <= 3, d = 2), plus
          // for bfloat16 two roundings of the weights to bfloat16 (kernels that round P before P.V)
          const double out_internal =
              (64 * u32 + (t == DType::bfloat16 ? 2 * unit_roundoff(DType::bfloat16) : 0.0)) * 3;
          for (std::int64_t c = 0; c < a.in.dv; ++c) {
            const std::size_t x = static_cast<std::size_t>(i * a.in.dv + c);
            const double e = d(rr.out[x]);
            record(elem(t, o.out[x], e,
                        e == 0 && rr.lse[qi] == -INFINITY ? 0.0
                                                          : budget::output_abs(t, e, out_internal),
                        w + " out[" + std::to_string(c) + "]"),
                   w);
          }
          const double le = d(rr.lse[qi]), He = d(rr.entropy[qi]), be = d(rr.beta[qi]);
          record(elem(DType::float32, o.lse[qi], le,
                      std::isfinite(le) ? budget::output_abs(DType::float32, le, 64 * u32) : 0.0,
                      w + " lse"),
                 w);
          record(
              elem(DType::float32, o.entropy[qi], He,
                   std::isfinite(He) && He != 0 ? budget::output_abs(DType::float32, He, 64 * u32)
                                                : 0.0,
                   w + " entropy"),
              w);
          record(elem(DType::float32, o.beta[qi], be,
                      std::isfinite(be) && be != 1 ? budget::output_abs(DType::float32, be, 1e-4)
                                                   : 0.0,
                      w + " beta"),
                 w);
        }
      }
    } else if (op == Op::merge_entropy_states) {
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
        run.before(id, m.name);
        ++count;
        const ES xs[] = {m.x}, ys[] = {m.y};
        const ES r = k.merge_entropy_states(xs, ys)[0];
        const std::string w = m.name + ": got (" + fmt(r.m) + "," + fmt(r.S) + "," + fmt(r.T) + ")";
        const bool ok = std::isnan(m.want.m)
                            ? std::isnan(r.m)
                            : (r.m == m.want.m && r.S == m.want.S && r.T == m.want.T);
        record(make_check(ok ? 0.0 : INFINITY, 0.0,
                          w + ", expected (" + fmt(m.want.m) + "," + fmt(m.want.S) + "," +
                              fmt(m.want.T) + ")"),
               m.name);
      }
    } else if (op == Op::merge_attention_states) {
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
        run.before(id, m.name);
        ++count;
        const float la[] = {m.la}, lb[] = {m.lb};
        std::vector<float> lse;
        const auto out = k.merge_attention_states(1, 2, oa, la, ob, lb, &lse);
        for (int c = 0; c < 2; ++c)
          record(
              elem(DType::float32, out[static_cast<std::size_t>(c)],
                   m.want[static_cast<std::size_t>(c)],
                   std::isfinite(m.want[static_cast<std::size_t>(c)]) && m.la == m.lb ? 8 * u32 * 4
                                                                                      : 0.0,
                   m.name + " out[" + std::to_string(c) + "]"),
              m.name);
        record(
            elem(DType::float32, lse[0], m.want_lse, m.la == m.lb ? 4 * u32 : 0.0, m.name + " lse"),
            m.name);
      }
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  Verdict v;
  v.property = id;
  v.claim = claim_of(id);
  v.rule = rule_by_id("kernel_h");
  v.kernel = k.name();
  v.op = name_of(op);
  v.dtype = name_of(t);
  v.measured = worst.measured;
  v.bound = worst.bound;
  if (!error.empty()) {
    v.outcome = Outcome::error;
    v.note = "kernel call failed: " + error;
  } else if (worst.fails()) {
    v.outcome = Outcome::fail;
    v.counterexample = "fixed input \"" + failing_input + "\"; at " + worst.where;
    v.worst_case = v.counterexample;
    call_log::stash(v.counterexample, failing_calls);
    if (!worst.convention.empty())
      v.note = "holds under the " + worst.convention +
               " convention, which the kernel does not declare (docs/conventions.md): a policy "
               "difference if the kernel means it, not an error";
  } else {
    v.outcome = Outcome::pass;
    v.note = std::to_string(count) + " named inputs; worst: " + worst.where;
    v.worst_case = "fixed input \"" + failing_input + "\"";
  }
  if (!worst.unit.empty()) v.note += "; measured and bound in " + worst.unit;
  run.emit(v);
}

}  // namespace sa::props::detail
