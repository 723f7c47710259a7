// differential.ulp of the merge operations, one function per op:
//   merge_entropy_ulp        merge_entropy_states on the states of two
//                            generated rows, against the exact merge of the
//                            same float states;
//   merge_attention_ulp      merge_attention_states on the reference's
//                            partial results over two key halves, against
//                            the reference over all keys;
//   merge_attention_n_ulp    merge_attention_states_n on the reference's
//                            partial results over 1-8 disjoint key sets,
//                            against the reference over all keys.
// The attention parts are single-head cases of the attention generator
// (attention_cases.hpp), split by their key padding mask.
#include <algorithm>
#include <cmath>
#include <random>

#include "properties/attention_cases.hpp"
#include "properties/budgets.hpp"
#include "properties/checks.hpp"
#include "properties/suite_internal.hpp"
#include "reference/attention_cr.hpp"
#include "reference/attention.hpp"
#include "reference/rounding.hpp"
#include "reference/softmax.hpp"
#include "theory/streamed_entropy.hpp"

namespace sa::props::detail {
namespace {

using budget::u32;

// The attention cases whose partial results the merges take: one sequence,
// one head, float32, short (1-40 queries and keys, head dims 1-16), with
// causal masks and key padding (some rows and parts fully masked), no
// adaptive temperature or split.
rc::Gen<AttnParams> gen_merge_cases() {
  AttentionShapes s;
  s.lengths = {{1, 1}, {2, 3}, {3, 2}, {7, 5}, {5, 12}, {17, 40}, {40, 17}, {33, 33}};
  s.head_dims = {1, 3, 4, 8, 16};
  s.features = std::vector<std::string>{"causal", "key_padding", "unequal_dv"};
  AttnDomain dom;
  dom.features = SA_ATTN_CAUSAL | SA_ATTN_KEY_PADDING | SA_ATTN_UNEQUAL_HEAD_DIMS;
  dom.constraints = SA_ATTN_ONLY_BOTTOM_RIGHT;
  return gen_attention(false, s, dom);
}

// The case with only the keys whose part(j) is true visible (the others
// masked through the key padding mask).
template <class Part>
AttentionCase keys_of(const AttentionCase& c, Part part) {
  AttentionCase r = c;
  r.num_splits = 0;
  r.key_padding_mask.assign(static_cast<std::size_t>(c.total_k()), 0);
  for (std::int64_t j = 0; j < c.total_k(); ++j)
    if (part(j))
      r.key_padding_mask[static_cast<std::size_t>(j)] =
          c.key_padding_mask.empty() ? 1 : c.key_padding_mask[static_cast<std::size_t>(j)];
  return r;
}

// The reference's out and lse of a case, correctly rounded to float32.
void rounded_parts(const AttentionCase& c, std::vector<float>& out, std::vector<float>& lse) {
  const ref::AttentionRounded r = ref::attention_rounded(DType::float32, c);
  out.assign(r.out.begin(), r.out.end());
  lse.assign(r.lse.begin(), r.lse.end());
}

// Half of the cases pass out = o_a and out_lse = lse_a (kernel.h allows it).
bool alias_of(const AttnParams& p) { return (p.seed & 1) == 1; }

std::string describe_merge(const AttnParams& p) {
  return describe(p) + (alias_of(p) ? " (out aliases o_a)" : "");
}

// differential.ulp[merge_entropy_states]
Verdict merge_entropy_ulp(const Run& run, const std::string& id, SearchOptions so) {
  const Kernel& k = run.kernel;
  RowGenOptions go;
  go.sizes = {1, 2, 3, 7, 16, 33, 100};
  go.max_rows = 2;
  std::function<std::vector<Check>(const RowParams&)> eval = [&](const RowParams& p0) {
    RowParams p = p0;
    p.rows = 2;
    p.temperature = 1.0;
    if (!p.explicit_values.empty() && static_cast<std::int64_t>(p.explicit_values.size()) < 2 * p.n)
      p.rows = 1;
    const RowBatch b = materialise(p, DType::float32);
    run.before("differential.ulp[merge_entropy_states]", describe(p, b, 16));
    std::vector<sa_entropy_state> st;
    for (std::int64_t r = 0; r < b.rows; ++r) {
      const auto row = b.row(r);
      const std::vector<double> l(row.begin(), row.end());
      const auto s = ref::entropy_state(l, 1.0);
      st.push_back({static_cast<float>(ref::round_to(DType::float32, s.m)),
                    static_cast<float>(ref::round_to(DType::float32, s.S)),
                    static_cast<float>(ref::round_to(DType::float32, s.T))});
    }
    if (st.size() < 2) st.push_back(st[0]);
    std::vector<sa_entropy_state> a = {st[0], st[1], st[0]},
                                  bb = {st[1], st[0], sa_entropy_state{-INFINITY, 0, 0}};
    const auto out = k.merge_entropy_states(a, bb);
    std::vector<Check> cs(1);
    for (std::size_t i = 0; i < a.size(); ++i) {
      using S = theory::EntropyState<ref::Mp>;
      const S x{ref::Mp(a[i].m), ref::Mp(a[i].S), ref::Mp(a[i].T)},
          y{ref::Mp(bb[i].m), ref::Mp(bb[i].S), ref::Mp(bb[i].T)};
      const S e = theory::entropy_merge(x, y);
      const double em = d(e.m), eS = d(e.S), eT = d(e.T);
      double Sb = 0, Tb = 0;
      if (std::isfinite(a[i].m) && std::isfinite(bb[i].m)) {
        const bool a_hi = a[i].m >= bb[i].m;
        const auto& hi = a_hi ? a[i] : bb[i];
        const auto& lo = a_hi ? bb[i] : a[i];
        const double dd = std::abs(double(lo.m) - double(hi.m)), w = std::exp(-dd);
        Sb = u32 * (4 * eS + dd * w * lo.S);
        Tb = u32 * (4 * (std::abs(hi.T) + w * std::abs(lo.T) + w * dd * lo.S) +
                    dd * w * (std::abs(lo.T) + dd * lo.S) + dd * w * lo.S);
      }
      const std::string w = "pair " + std::to_string(i) + " a=(" + fmt(a[i].m) + "," + fmt(a[i].S) +
                            "," + fmt(a[i].T) + ") b=(" + fmt(bb[i].m) + "," + fmt(bb[i].S) + "," +
                            fmt(bb[i].T) + ")";
      cs[0].worst(elem(DType::float32, out[i].m, em, 0.0, w + " m"));
      cs[0].worst(elem(DType::float32, out[i].S, eS,
                       Sb == 0 ? 0.0 : budget::output_abs(DType::float32, eS, Sb), w + " S"));
      cs[0].worst(elem(DType::float32, out[i].T, eT,
                       Tb == 0 ? 0.0 : budget::output_abs(DType::float32, eT, Tb), w + " T"));
    }
    return cs;
  };
  auto res = search<RowParams>(gen_rows(go), 1, so, eval);
  return slot_verdict<RowParams>(
      run, id,
      claim_of(id) + " (states of two generated rows, exact merge of the same float states)",
      rule_by_id("ulp"), Op::merge_entropy_states, DType::float32, res[0],
      [](const RowParams& p) { return describe(p, materialise(p, DType::float32)); });
}

// differential.ulp[merge_attention_states]: the reference's partial results
// over the two key halves, correctly rounded to float32, merged by the
// kernel, against the reference over all keys.
//
// Bound, per output element (u = 2^-24, w_p = exp(lse_p - L), dl the two
// parts' lse ulps): the inputs' rounding moves the exact merge by at most
// 2 dl mag + sum_p w_p ulp(o_p) (mag = sum_p w_p |o_p|); the kernel's float32
// merge (exp, sum, product, division) by 8u mag; then the output's own
// rounding (budgets.hpp output_abs). lse: ulp(L) + 4u + dl.
Verdict merge_attention_ulp(const Run& run, const std::string& id, SearchOptions so) {
  const Kernel& k = run.kernel;
  std::function<std::vector<Check>(const AttnParams&)> eval = [&](const AttnParams& p) {
    const AttentionCase in = materialise(p, AttnType::float32);
    run.before("differential.ulp[merge_attention_states]", describe_merge(p));
    const std::int64_t nq = in.total_q(), nk = in.total_k(), dv = in.dv;
    const std::int64_t half = (nk + 1) / 2;
    const ref::AttentionValues full = ref::attention_v2(in);
    std::vector<float> oa, la, ob, lb;
    rounded_parts(keys_of(in, [&](std::int64_t j) { return j < half; }), oa, la);
    rounded_parts(keys_of(in, [&](std::int64_t j) { return j >= half; }), ob, lb);
    std::vector<float> ml;
    const std::vector<float> m =
        k.merge_attention_states(nq, dv, oa, la, ob, lb, &ml, /*alias_a=*/alias_of(p));
    std::vector<Check> cs(1);
    for (std::int64_t i = 0; i < nq; ++i) {
      const std::size_t qi = static_cast<std::size_t>(i);
      const double L = full.lse[qi];
      const double wa = std::isfinite(la[qi]) && std::isfinite(L) ? std::exp(la[qi] - L) : 0.0;
      const double wb = std::isfinite(lb[qi]) && std::isfinite(L) ? std::exp(lb[qi] - L) : 0.0;
      const double dl = budget::ulp(DType::float32, la[qi]) + budget::ulp(DType::float32, lb[qi]);
      for (std::int64_t c = 0; c < dv; ++c) {
        const std::size_t x = static_cast<std::size_t>(i * dv + c);
        const double mag = wa * std::abs(oa[x]) + wb * std::abs(ob[x]);
        const double e = full.out[x];
        const double b = mag == 0 ? 0.0
                                  : budget::output_abs(DType::float32, e,
                                                       8.0 * u32 * mag + 2.0 * dl * mag +
                                                           wa * budget::ulp(DType::float32, oa[x]) +
                                                           wb * budget::ulp(DType::float32, ob[x]));
        cs[0].worst(elem(DType::float32, m[x], e, b,
                         "query " + std::to_string(i) + " out[" + std::to_string(c) +
                             "], parts lse " + fmt(la[qi]) + ", " + fmt(lb[qi])));
      }
      cs[0].worst(
          elem(DType::float32, ml[qi], L,
               std::isfinite(L) ? budget::ulp(DType::float32, L) + 4 * u32 + dl : 0.0,
               "query " + std::to_string(i) + " lse, parts " + fmt(la[qi]) + ", " + fmt(lb[qi])));
    }
    return cs;
  };
  so.cases = std::max(8, run.config.cases / 3);
  auto res = search<AttnParams>(gen_merge_cases(), 1, so, eval);
  return slot_verdict<AttnParams>(
      run, id,
      claim_of(id) + " (reference partial results over two key halves, merged, vs all keys)",
      rule_by_id("ulp"), Op::merge_attention_states, DType::float32, res[0], describe_merge);
}

// differential.ulp[merge_attention_states_n]: the reference's partial results
// over P in 1..8 disjoint key sets (each key in a random part, some parts
// empty), correctly rounded to float32, merged by the kernel in one call,
// against the reference attention over all keys.
//
// Bound, per output element (u = 2^-24, w_p = exp(lse_p - L) with L the exact
// merged lse, x_p = L - lse_p >= 0, mag_p = w_p |o_p|):
//   the inputs are float32 roundings of the exact parts: lse_p within
//   ulp(lse_p)/2 and o_p within ulp(o_p)/2, which moves the exact merge of the
//   given parts by at most 2 dl sum_p mag_p + sum_p w_p ulp(o_p)/2 (dl = the sum of
//   the live parts' lse ulps: the weights' relative change is at most twice
//   the largest lse error);
//   the kernel's float32 arithmetic, in any order at most P - 1 two-part
//   merges deep: each two-part merge (exp faithful, sum, product, division)
//   moves a part's contribution by <= 8u relative, plus u x_p from rounding
//   lse_p - max (w_p x_p <= 1/e keeps it small): <= max(P - 1, 1)(8 + x_p) u mag_p;
//   then the output's own rounding (budgets.hpp's output_abs).
// lse: max(P - 1, 1)(ulp(L) + 4u) + dl (one rounding of L and the log's error
// per merge step).
Verdict merge_attention_n_ulp(const Run& run, const std::string& id, SearchOptions so) {
  const Kernel& k = run.kernel;
  std::function<std::vector<Check>(const AttnParams&)> eval = [&](const AttnParams& p) {
    const AttentionCase in = materialise(p, AttnType::float32);
    const std::int64_t nq = in.total_q(), nk = in.total_k(), dv = in.dv;
    std::mt19937_64 g(p.seed ^ 0x6e77a9);
    const std::int64_t parts = 1 + static_cast<std::int64_t>(p.seed % 8);
    std::vector<std::int64_t> part_of(static_cast<std::size_t>(nk));
    for (auto& x : part_of) x = static_cast<std::int64_t>(g() % static_cast<std::uint64_t>(parts));
    run.before("differential.ulp[merge_attention_states_n]",
               describe(p) + " parts=" + std::to_string(parts));
    const ref::AttentionValues full = ref::attention_v2(in);
    std::vector<std::vector<float>> o(static_cast<std::size_t>(parts)),
        l(static_cast<std::size_t>(parts));
    for (std::int64_t q = 0; q < parts; ++q)
      rounded_parts(
          keys_of(in, [&](std::int64_t j) { return part_of[static_cast<std::size_t>(j)] == q; }),
          o[static_cast<std::size_t>(q)], l[static_cast<std::size_t>(q)]);
    std::vector<float> ml;
    const std::vector<float> m = k.merge_attention_states_n(nq, dv, o, l, &ml);
    const double depth = static_cast<double>(std::max<std::int64_t>(parts - 1, 1));
    std::vector<Check> cs(1);
    for (std::int64_t i = 0; i < nq; ++i) {
      const std::size_t qi = static_cast<std::size_t>(i);
      const double L = full.lse[qi];
      double dl = 0;
      std::string lses;
      for (std::int64_t q = 0; q < parts; ++q) {
        const float lq = l[static_cast<std::size_t>(q)][qi];
        if (std::isfinite(lq)) dl += budget::ulp(DType::float32, lq);
        lses += (q ? ", " : "") + fmt(lq);
      }
      for (std::int64_t c = 0; c < dv; ++c) {
        const std::size_t x = static_cast<std::size_t>(i * dv + c);
        double internal = 0, mag = 0;
        for (std::int64_t q = 0; q < parts; ++q) {
          const float lq = l[static_cast<std::size_t>(q)][qi];
          if (!std::isfinite(lq) || !std::isfinite(L)) continue;
          const double w = std::exp(static_cast<double>(lq) - L);
          const float oq = o[static_cast<std::size_t>(q)][x];
          const double mp = w * std::abs(oq);
          mag += mp;
          internal += depth * (8.0 + std::max(0.0, L - lq)) * u32 * mp +
                      w * budget::ulp(DType::float32, oq);
        }
        internal += 2.0 * dl * mag;
        const double e = full.out[x];
        const double b = mag == 0 ? 0.0 : budget::output_abs(DType::float32, e, internal);
        cs[0].worst(elem(
            DType::float32, m[x], e, b,
            "query " + std::to_string(i) + " out[" + std::to_string(c) + "], parts lse " + lses));
      }
      cs[0].worst(
          elem(DType::float32, ml[qi], L,
               std::isfinite(L) ? depth * (budget::ulp(DType::float32, L) + 4 * u32) + dl : 0.0,
               "query " + std::to_string(i) + " lse, parts " + lses));
    }
    return cs;
  };
  so.cases = std::max(8, run.config.cases / 3);
  auto res = search<AttnParams>(gen_merge_cases(), 1, so, eval);
  return slot_verdict<AttnParams>(
      run, id,
      claim_of(id) +
          " (reference partial results over 1-8 disjoint key sets, some empty, merged in one call, "
          "vs all keys)",
      rule_by_id("ulp"), Op::merge_attention_states_n, DType::float32, res[0],
      [](const AttnParams& p) { return describe(p) + " parts=" + std::to_string(1 + p.seed % 8); });
}

}  // namespace

void run_merge_differential(const Run& run, Op op, DType t) {
  const Kernel& k = run.kernel;
  const std::string id = "differential.ulp";
  if (!run.wants_rule("ulp") || !run.wants_property(id)) return;
  if (!k.supports(op)) {
    run.emit(skip_verdict(run, id, claim_of(id), rule_by_id("ulp"), op, t,
                          "kernel does not implement " + std::string(name_of(op))));
    return;
  }
  SearchOptions so;
  so.shrink_pool = &run.shrink_pool;
  so.cases = run.config.cases;
  so.seed = run.seed ^ (0x3e76e ^ static_cast<std::uint64_t>(op));
  if (op == Op::merge_entropy_states)
    run.emit(merge_entropy_ulp(run, id, so));
  else if (op == Op::merge_attention_states)
    run.emit(merge_attention_ulp(run, id, so));
  else if (op == Op::merge_attention_states_n)
    run.emit(merge_attention_n_ulp(run, id, so));
}

}  // namespace sa::props::detail
