// Determinism properties (every operation the kernel implements):
//
//   determinism.bitwise           `determinism_repeats` calls with identical
//                                 inputs return identical bits for every
//                                 output (forward and backward). Failed when
//                                 the kernel claims SA_CAP_DETERMINISTIC, and
//                                 for attention_backward always (the property
//                                 passes deterministic = 1, which kernel.h
//                                 makes a request); reported as a skip with
//                                 the measurement otherwise.
//   determinism.batch_invariance  a row (softmax family) or a sequence
//                                 (attention, forward and backward) computed
//                                 alone gives the same bits as inside a batch
//                                 (and, for attention_v2 with split-KV, under
//                                 num_splits 1, 2 and 3). Failed when the
//                                 kernel claims SA_CAP_BATCH_INVARIANT,
//                                 reported (skip, with what differed)
//                                 otherwise: many correct kernels are not.
//
// Inputs are fixed per op (no search: the property is about repetition, not
// values): rows of every length class the row kernels split on, and an
// attention case with GQA, causal masking, varlen and a tail past a 64-wide
// tile.
//
// One function per property and operand kind (issue 30): bitwise_rows,
// batch_invariance_rows, bitwise_attention, batch_invariance_attention, each
// returning its verdict from a context (RowDetCtx, AttnDetCtx) the runner
// builds once per (op, dtype).
#include <cmath>
#include <cstring>
#include <random>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "properties/checks.hpp"
#include "properties/suite_internal.hpp"
#include "reference/attention.hpp"

namespace sa::props::detail {
namespace {

// Index of the first element whose bits differ, or -1.
std::int64_t first_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0) return static_cast<std::int64_t>(i);
  return -1;
}

RowBatch det_rows(DType t, std::int64_t rows, std::int64_t n, std::uint64_t seed) {
  RowBatch b;
  b.rows = rows;
  b.n = n;
  b.stride = n;
  std::mt19937_64 g(seed);
  std::normal_distribution<double> n01(0.0, 3.0);
  for (std::int64_t i = 0; i < rows * n; ++i) b.data.push_back(to_dtype(t, n01(g)));
  return b;
}

// The forward's output of each row (softmax or log-softmax, exact then
// rounded to t): the backward's y, without calling the kernel's forward.
std::vector<float> y_of(DType t, const RowBatch& b, bool log) {
  std::vector<float> y(b.data.size());
  for (std::int64_t r = 0; r < b.rows; ++r) {
    const float* l = b.data.data() + r * b.stride;
    long double m = -INFINITY, S = 0;
    for (std::int64_t i = 0; i < b.n; ++i) m = std::max<long double>(m, l[i]);
    for (std::int64_t i = 0; i < b.n; ++i) S += std::exp(l[i] - m);
    for (std::int64_t i = 0; i < b.n; ++i)
      y[r * b.stride + i] =
          to_dtype(t, static_cast<double>(log ? l[i] - m - std::log(S) : std::exp(l[i] - m) / S));
  }
  return y;
}

// A dy for the row backward ops.
std::vector<float> det_dy(DType t, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> n01(0.0, 1.0);
  std::vector<float> v(count);
  for (auto& x : v) x = to_dtype(t, n01(g));
  return v;
}

AttentionCase det_case(AttnType t, bool varlen) {
  AttentionCase c;
  c.qkv = c.out_type = t;
  c.batch = 3;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.d = c.dv = 32;
  if (varlen) {
    c.cu_q = {0, 70, 71, 141};
    c.cu_k = {0, 97, 130, 200};
  } else {
    c.seqlen_q = 70;
    c.seqlen_k = 97;
  }
  std::mt19937_64 g(20261123);
  std::normal_distribution<double> n01(0.0, 1.0);
  auto r = [&](double x) {
    const float f = static_cast<float>(x);
    return t == AttnType::bfloat16  ? round_to_bf16(f)
           : t == AttnType::float16 ? round_to_f16(f)
                                    : f;
  };
  for (std::int64_t i = 0; i < c.total_q() * c.heads_q * c.d; ++i) c.q.push_back(r(n01(g)));
  for (std::int64_t i = 0; i < c.total_k() * c.heads_kv * c.d; ++i) c.k.push_back(r(n01(g)));
  for (std::int64_t i = 0; i < c.total_k() * c.heads_kv * c.dv; ++i) c.v.push_back(r(n01(g)));
  c.scale = static_cast<float>(1.0 / std::sqrt(32.0));
  c.causal = true;
  return c;
}

// Sequence b of a case as a case of its own.
AttentionCase alone(const AttentionCase& c, std::int64_t b) {
  AttentionCase s = c;
  s.batch = 1;
  const std::int64_t q0 = c.row_q(b, 0), k0 = c.row_k(b, 0), lq = c.len_q(b), lk = c.len_k(b);
  if (c.varlen()) {
    s.cu_q = {0, static_cast<std::int32_t>(lq)};
    s.cu_k = {0, static_cast<std::int32_t>(lk)};
  }
  s.q.assign(c.q.begin() + q0 * c.heads_q * c.d, c.q.begin() + (q0 + lq) * c.heads_q * c.d);
  s.k.assign(c.k.begin() + k0 * c.heads_kv * c.d, c.k.begin() + (k0 + lk) * c.heads_kv * c.d);
  s.v.assign(c.v.begin() + k0 * c.heads_kv * c.dv, c.v.begin() + (k0 + lk) * c.heads_kv * c.dv);
  return s;
}

template <class T>
std::vector<T> slice(const std::vector<T>& v, std::int64_t from, std::int64_t count) {
  return std::vector<T>(v.begin() + from, v.begin() + from + count);
}

// All outputs of one call, concatenated (so one comparison covers them all).
using Outputs = std::vector<float>;

void append(Outputs& o, const std::vector<float>& v) { o.insert(o.end(), v.begin(), v.end()); }

struct Backward {
  std::vector<float> out, lse, dout;
};
Backward backward_inputs(const AttentionCase& c) {
  Backward b;
  const ref::AttentionValues r = ref::attention_v2(c);
  for (double x : r.out) {
    const float f = static_cast<float>(x);
    b.out.push_back(c.out_type == AttnType::bfloat16  ? round_to_bf16(f)
                    : c.out_type == AttnType::float16 ? round_to_f16(f)
                                                      : f);
  }
  for (double x : r.lse) b.lse.push_back(static_cast<float>(x));
  b.dout = det_dy(DType::float32, b.out.size(), 99);
  for (auto& x : b.dout)
    x = c.out_type == AttnType::bfloat16  ? round_to_bf16(x)
        : c.out_type == AttnType::float16 ? round_to_f16(x)
                                          : x;
  return b;
}

Verdict make(const Run& run, const char* id, Op op, const std::string& dtype, bool enforced,
             std::int64_t calls, std::int64_t differing, const std::string& where,
             const std::string& what_was_run) {
  Verdict v;
  v.property = id;
  v.claim = claim_of(id);
  v.rule = rule_by_id("bitwise");
  v.kernel = run.kernel.name();
  v.op = name_of(op);
  v.dtype = dtype;
  v.measured = static_cast<double>(differing);
  v.bound = 0;
  if (!enforced) {
    v.outcome = Outcome::skip;
    v.note = "reported, not required (the kernel does not claim it): " + std::to_string(differing) +
             " of " + std::to_string(calls) + " " + what_was_run + " differed" +
             (differing ? " (first: " + where + ")" : "");
    return v;
  }
  v.outcome = differing ? Outcome::fail : Outcome::pass;
  if (differing) {
    v.counterexample = what_was_run + ": " + where;
    v.worst_case = v.counterexample;
  }
  v.note = std::to_string(calls) + " " + what_was_run + "; " + std::to_string(differing) +
           " differed; measured and bound in calls that differed";
  return v;
}

std::string dtype_name(AttnType t) { return name_of(t); }

// A call failed (or a case was not applicable) before both properties had a
// verdict for (op, t): each wanted one without a verdict gets outcome `o`
// and `note`, so that neither goes missing from the run (CI tracks a test
// across runs by its name).
void settle(const Run& run, Op op, DType t, bool bits_done, bool batch_done, Outcome o,
            const std::string& note) {
  for (const char* id : {"determinism.bitwise", "determinism.batch_invariance"}) {
    const bool done = std::string(id) == "determinism.bitwise" ? bits_done : batch_done;
    if (done || !run.wants_property(id)) continue;
    Verdict v = skip_verdict(run, id, claim_of(id), rule_by_id("bitwise"), op, t, note);
    v.outcome = o;
    v.note = note;
    run.emit(v);
  }
}

// ---------------------------------------------------------------- rows

// The row sizes both properties call (7, 64, 1000, 4097: every length class
// the row kernels split on) that the kernel takes (sa_capabilities.max_n;
// longer rows are not applicable), and their text for the verdict.
struct RowSizes {
  std::vector<std::int64_t> sizes;
  std::string text;
};

RowSizes row_sizes(const Kernel& k) {
  RowSizes s;
  for (std::int64_t n : {7, 64, 1000, 4097})
    if (k.max_n() <= 0 || n <= k.max_n()) {
      s.text += (s.sizes.empty() ? "" : ", ") + std::to_string(n);
      s.sizes.push_back(n);
    }
  if (s.sizes.size() < 4)
    s.text += "; longer rows not applicable: max_n " + std::to_string(k.max_n());
  return s;
}

// One call of a forward row op (softmax or log_softmax) on b.
std::vector<float> forward_rows(const Kernel& k, Op op, DType t, const RowBatch& b) {
  return op == Op::softmax ? k.softmax(t, b) : k.log_softmax(t, b);
}

// One call of a backward row op (softmax_backward or log_softmax_backward)
// on the forward's output yb and dy.
std::vector<float> backward_rows(const Kernel& k, Op op, DType t, const RowBatch& yb,
                                 const std::vector<float>& dy) {
  return op == Op::softmax_backward ? k.softmax_backward(t, yb, dy)
                                    : k.log_softmax_backward(t, yb, dy);
}

// What both determinism properties of one row op on one dtype see.
struct RowDetCtx {
  const Run& run;
  const Kernel& k;
  Op op;
  DType t;
  const RowSizes& sizes;  // non-empty
  int repeats;            // calls per input (determinism_repeats, at least 2)
  bool det, inv;          // the kernel claims SA_CAP_DETERMINISTIC, SA_CAP_BATCH_INVARIANT
};

// determinism.bitwise, row operations: at each size n, 4 rows (det_rows,
// seed 31 + n) called `repeats` times give the first call's bits every time
// (a backward op repeats only its own call: y and dy stay fixed). Bound: no
// call differs (rule bitwise); required when the kernel claims
// SA_CAP_DETERMINISTIC, reported otherwise.
Verdict bitwise_rows(const RowDetCtx& cx) {
  const Kernel& k = cx.k;
  const Op op = cx.op;
  const DType t = cx.t;
  const bool bwd = op == Op::softmax_backward || op == Op::log_softmax_backward;
  std::int64_t differing = 0, calls = 0;
  std::string where;
  for (std::int64_t n : cx.sizes.sizes) {
    const RowBatch b = det_rows(t, 4, n, 31 + n);
    // keep the forward fixed: only the backward call repeats
    std::vector<float> dy;
    RowBatch yb;
    if (bwd) {
      dy = det_dy(t, b.data.size(), 7 + b.rows);
      yb = b;
      yb.data = y_of(t, b, op == Op::log_softmax_backward);
    }
    auto once = [&] { return bwd ? backward_rows(k, op, t, yb, dy) : forward_rows(k, op, t, b); };
    const std::vector<float> y0 = once();
    for (int rpt = 1; rpt < cx.repeats; ++rpt, ++calls) {
      const auto y1 = once();
      if (const auto e = first_diff(y0, y1); e >= 0 && differing++ == 0)
        where = "n=" + std::to_string(n) + " element " + std::to_string(e) + ": " + fmt(y0[e]) +
                " then " + fmt(y1[e]) + " (call " + std::to_string(rpt + 1) + ")";
    }
  }
  return make(cx.run, "determinism.bitwise", op, name_of(t), cx.det, calls, differing, where,
              "repeated calls (4 rows at n = " + cx.sizes.text + ")");
}

// determinism.batch_invariance, row operations: at each size n, each of 8
// rows (det_rows, seed 77 + n; a backward op's y is the batch's forward
// output, its dy det_dy seed 5 + n) computed alone gives the bits it has in
// the batch. Bound: no row differs (rule bitwise); required when the kernel
// claims SA_CAP_BATCH_INVARIANT, reported otherwise.
Verdict batch_invariance_rows(const RowDetCtx& cx) {
  const Kernel& k = cx.k;
  const Op op = cx.op;
  const DType t = cx.t;
  std::int64_t differing = 0, calls = 0;
  std::string where;
  const bool bwd = op == Op::softmax_backward || op == Op::log_softmax_backward;
  for (std::int64_t n : cx.sizes.sizes) {
    const RowBatch b = det_rows(t, 8, n, 77 + n);
    // The backward's y is the batch's forward output, sliced for a row alone.
    RowBatch yb = b;
    const auto dy = det_dy(t, b.data.size(), 5 + n);
    if (bwd) yb.data = y_of(t, b, op == Op::log_softmax_backward);
    auto run_rows = [&](const RowBatch& x, const std::vector<float>& g) {
      return bwd ? backward_rows(k, op, t, x, g) : forward_rows(k, op, t, x);
    };
    const auto all = run_rows(bwd ? yb : b, dy);
    for (std::int64_t r = 0; r < b.rows; ++r, ++calls) {
      RowBatch one = bwd ? yb : b;
      one.rows = 1;
      one.data = slice(one.data, r * n, n);
      const auto got = run_rows(one, slice(dy, r * n, n));
      const auto want = slice(all, r * n, n);
      if (const auto e = first_diff(want, got); e >= 0 && differing++ == 0)
        where = "n=" + std::to_string(n) + " row " + std::to_string(r) + " element " +
                std::to_string(e) + ": " + fmt(want[e]) + " in the batch, " + fmt(got[e]) +
                " alone";
    }
  }
  return make(cx.run, "determinism.batch_invariance", op, name_of(t), cx.inv, calls, differing,
              where, "rows computed alone vs in a batch of 8");
}

// ---------------------------------------------------------------- attention

// All outputs of one attention_v2 call (out | lse) or attention_backward
// call (dq | dk | dv | dsinks, deterministic = 1, from the given `in`).
Outputs attention_outputs(const Kernel& k, bool bwd, const AttentionCase& x, const Backward* in) {
  Outputs o;
  if (!bwd) {
    const auto r = k.attention_v2(x);
    append(o, r.out);
    append(o, r.lse);
    return o;
  }
  const auto g = k.attention_backward(x, in->out, in->lse, in->dout, true);
  append(o, g.dq);
  append(o, g.dk);
  append(o, g.dv);
  append(o, g.dsinks);
  return o;
}

// The backward's inputs of sequence b of x alone, sliced from the batch's.
Backward backward_part(const AttentionCase& x, const Backward& xin, std::int64_t b) {
  Backward sin;
  const std::int64_t q0 = x.row_q(b, 0), lq = x.len_q(b);
  sin.out = slice(xin.out, q0 * x.heads_q * x.dv, lq * x.heads_q * x.dv);
  sin.lse = slice(xin.lse, q0 * x.heads_q, lq * x.heads_q);
  sin.dout = slice(xin.dout, q0 * x.heads_q * x.dv, lq * x.heads_q * x.dv);
  return sin;
}

// The part of the batch's concatenated outputs `whole` that belongs to
// sequence b: its out and lse (forward), or its dq, dk and dv (backward).
Outputs batch_part(const AttentionCase& x, const Outputs& whole, std::int64_t b, bool bwd) {
  const std::int64_t q0 = x.row_q(b, 0), k0 = x.row_k(b, 0);
  const std::int64_t lq = x.len_q(b), lk = x.len_k(b);
  Outputs want;
  if (!bwd) {
    const std::int64_t tq = x.total_q() * x.heads_q;
    append(want, slice(whole, q0 * x.heads_q * x.dv, lq * x.heads_q * x.dv));
    append(want, slice(whole, tq * x.dv + q0 * x.heads_q, lq * x.heads_q));
  } else {
    const std::int64_t nq = x.total_q() * x.heads_q * x.d, nk = x.total_k() * x.heads_kv * x.d;
    append(want, slice(whole, q0 * x.heads_q * x.d, lq * x.heads_q * x.d));
    append(want, slice(whole, nq + k0 * x.heads_kv * x.d, lk * x.heads_kv * x.d));
    append(want, slice(whole, nq + nk + k0 * x.heads_kv * x.dv, lk * x.heads_kv * x.dv));
  }
  return want;
}

// What both determinism properties of attention_v2 or attention_backward on
// one type see: the fixed cases (det_case, padded and varlen) and, for the
// backward, the padded case's inputs (computed once).
struct AttnDetCtx {
  const Run& run;
  const Kernel& k;
  Op op;
  AttnType t;
  const AttentionCase& c;   // det_case(t, false)
  const AttentionCase& cv;  // det_case(t, true)
  bool bwd;                 // op == attention_backward
  const Backward& in;       // backward_inputs(c) (backward), empty (forward)
  int repeats;
  bool det, inv;
  Outputs call(const AttentionCase& x, const Backward* b) const {
    return attention_outputs(k, bwd, x, b);
  }
};

// determinism.bitwise, attention: the padded case called max(10, repeats /
// 5) times (attention is costlier than a row) gives the first call's bits
// for every output every time. Bound: no call differs (rule bitwise);
// required when the kernel claims SA_CAP_DETERMINISTIC, and always for
// attention_backward (the property passes deterministic = 1, which kernel.h
// makes a request).
Verdict bitwise_attention(const AttnDetCtx& cx) {
  const AttentionCase& c = cx.c;
  const int reps = std::max(10, cx.repeats / 5);
  const Outputs o0 = cx.call(c, &cx.in);
  std::int64_t differing = 0;
  std::string where;
  for (int rpt = 1; rpt < reps; ++rpt) {
    const Outputs o1 = cx.call(c, &cx.in);
    if (const auto e = first_diff(o0, o1); e >= 0 && differing++ == 0)
      where = "output element " + std::to_string(e) + " (of out|lse or dq|dk|dv|dsinks " +
              "concatenated): " + fmt(o0[e]) + " then " + fmt(o1[e]) + " (call " +
              std::to_string(rpt + 1) + ")";
  }
  return make(cx.run, "determinism.bitwise", cx.op, dtype_name(cx.t), cx.det || cx.bwd, reps - 1,
              differing, where,
              "repeated calls (" + c.describe() + (cx.bwd ? ", deterministic=1)" : ")"));
}

// determinism.batch_invariance, attention: in the padded and the varlen
// case, each non-empty sequence computed alone gives the bits it has in the
// batch (forward and backward), and the forward, where the kernel declares
// split-KV, gives the unsplit bits under num_splits 2 and 3. Bound: no call
// differs (rule bitwise); required when the kernel claims
// SA_CAP_BATCH_INVARIANT, reported otherwise.
Verdict batch_invariance_attention(const AttnDetCtx& cx) {
  const bool bwd = cx.bwd;
  std::int64_t differing = 0, calls = 0;
  std::string where;
  for (const AttentionCase* x : {&cx.c, &cx.cv}) {
    const Backward xin = bwd ? backward_inputs(*x) : Backward{};
    const Outputs whole = cx.call(*x, &xin);
    for (std::int64_t b = 0; b < x->batch; ++b) {
      if (x->len_q(b) == 0) continue;
      const AttentionCase s = alone(*x, b);
      const Backward sin = bwd ? backward_part(*x, xin, b) : Backward{};
      const Outputs part = cx.call(s, &sin);
      const Outputs want = batch_part(*x, whole, b, bwd);
      ++calls;
      if (const auto e = first_diff(want, part); e >= 0 && differing++ == 0)
        where = "sequence " + std::to_string(b) + " of " + x->describe() + ", element " +
                std::to_string(e) + ": " + fmt(want[e]) + " in the batch, " + fmt(part[e]) +
                " alone";
    }
    // Split counts (forward, where split-KV is declared).
    if (!bwd && cx.k.declares(SA_ATTN_SPLIT_KV))
      for (std::int64_t splits : {2, 3}) {
        AttentionCase y = *x;
        y.num_splits = splits;
        const Outputs o = cx.call(y, nullptr);
        ++calls;
        if (const auto e = first_diff(whole, o); e >= 0 && differing++ == 0)
          where = "num_splits=" + std::to_string(splits) + " element " + std::to_string(e) + ": " +
                  fmt(whole[e]) + " unsplit, " + fmt(o[e]);
      }
  }
  return make(cx.run, "determinism.batch_invariance", cx.op, dtype_name(cx.t), cx.inv, calls,
              differing, where, "sequences computed alone vs in their batch");
}

}  // namespace

// Both determinism properties on every operation and dtype the kernel
// implements, in the registry's verdict order: per (op, dtype) bitwise then
// batch_invariance, from one context (the row sizes; the attention cases and
// the backward's inputs). A call that fails, or a case that is not
// applicable, settles the verdicts still missing for that (op, dtype).
void run_determinism(const Run& run) {
  const Kernel& k = run.kernel;
  const bool want_bits = run.wants_property("determinism.bitwise");
  const bool want_batch = run.wants_property("determinism.batch_invariance");
  if (!want_bits && !want_batch) return;
  const int repeats = std::max(2, run.config.determinism_repeats);
  const bool det = k.claims(SA_CAP_DETERMINISTIC);
  const bool inv = k.claims(SA_CAP_BATCH_INVARIANT);
  std::vector<DType> dtypes = run.config.dtypes;
  if (dtypes.empty()) dtypes = {DType::float32, DType::bfloat16};
  // Row operations.
  for (Op op : {Op::softmax, Op::log_softmax, Op::softmax_backward, Op::log_softmax_backward}) {
    if (!run.wants_op(op) || !k.supports(op)) continue;
    for (DType t : dtypes) {
      if (t == DType::float64 || !k.supports(t)) continue;
      const RowSizes sizes = row_sizes(k);
      bool bits_done = false, batch_done = false;
      try {
        if (sizes.sizes.empty())
          throw NotApplicable("kernel '" + k.name() + "': max_n " + std::to_string(k.max_n()) +
                              " < 7, the shortest row this property calls");
        const RowDetCtx cx{run, k, op, t, sizes, repeats, det, inv};
        if (want_bits) {
          run.emit(bitwise_rows(cx));
          bits_done = true;
        }
        if (want_batch) {
          run.emit(batch_invariance_rows(cx));
          batch_done = true;
        }
      } catch (const NotApplicable& e) {
        settle(run, op, t, bits_done, batch_done, Outcome::skip,
               std::string("not applicable: ") + e.what());
      } catch (const std::exception& e) {
        settle(run, op, t, bits_done, batch_done, Outcome::error,
               std::string("kernel call failed: ") + e.what());
      }
    }
  }
  // Attention forward (v2) and backward.
  for (Op op : {Op::attention_v2, Op::attention_backward}) {
    if (!run.wants_op(op) || !k.supports(op)) continue;
    for (DType dt : dtypes) {
      if (dt == DType::float64) continue;
      const AttnType t = dt == DType::bfloat16  ? AttnType::bfloat16
                         : dt == DType::float16 ? AttnType::float16
                                                : AttnType::float32;
      const AttentionCase c = det_case(t, false), cv = det_case(t, true);
      const bool bwd = op == Op::attention_backward;
      const std::string why = bwd ? k.why_not_applicable_backward(c) : k.why_not_applicable(c);
      if (!why.empty()) {
        for (const char* id : {"determinism.bitwise", "determinism.batch_invariance"})
          if (run.wants_property(id))
            run.emit(skip_verdict(run, id, claim_of(id), rule_by_id("bitwise"), op, dt,
                                  "not applicable: " + why));
        continue;
      }
      bool bits_done = false, batch_done = false;
      try {
        const Backward in = bwd ? backward_inputs(c) : Backward{};
        const AttnDetCtx cx{run, k, op, t, c, cv, bwd, in, repeats, det, inv};
        if (want_bits) {
          run.emit(bitwise_attention(cx));
          bits_done = true;
        }
        if (want_batch) {
          run.emit(batch_invariance_attention(cx));
          batch_done = true;
        }
      } catch (const NotApplicable& e) {
        settle(run, op, dt, bits_done, batch_done, Outcome::skip,
               std::string("not applicable: ") + e.what());
      } catch (const std::exception& e) {
        settle(run, op, dt, bits_done, batch_done, Outcome::error,
               std::string("kernel call failed: ") + e.what());
      }
    }
  }
}

}  // namespace sa::props::detail
