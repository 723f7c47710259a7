// Attention properties: differential (ulp, flash_attention_2x, pytorch_fudge5),
// split-KV agreement (metamorphic.split_kv), and the differential checks of
// the two merge operations.
#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "kernels/naive/same_dtype.hpp"
#include "properties/budgets.hpp"
#include "properties/suite_internal.hpp"
#include "reference/attention.hpp"
#include "reference/rounding.hpp"
#include "reference/softmax.hpp"
#include "theory/adaptive_temperature.hpp"
#include "theory/streamed_entropy.hpp"

#include "properties/checks.hpp"

namespace sa::props::detail {
namespace {

using budget::u32;

// Double-precision view of one query row, for the budgets (not the reference).
struct QueryBudget {
  std::vector<double> out_abs;  // dv absolute budgets (float32-internal part)
  std::vector<double> P;        // sum_j p_j |v_jc|
  double lse_abs = 0, H_abs = 0, beta_abs = 0;
  double weight_sum = 0;  // sum of exact weights over the visible keys (1, or 0 if masked)
  bool masked = true;
};

std::vector<QueryBudget> attention_budgets(const AttentionInput& in, DType t) {
  ref::AttentionProblem pr;
  std::vector<QueryBudget> qb(static_cast<std::size_t>(in.nq));
  const double A = budget::summation(static_cast<double>(in.nk));
  for (std::int64_t i = 0; i < in.nq; ++i) {
    std::vector<double> s(static_cast<std::size_t>(in.nk), -INFINITY);
    double m = -INFINITY, lo = INFINITY, Es = 0, maxabs = 0;
    std::int64_t live = 0;
    for (std::int64_t j = 0; j < in.nk; ++j) {
      const bool vis = (in.key_mask.empty() || in.key_mask[static_cast<std::size_t>(j)]) &&
                       (!in.causal || j <= i + (in.nk - in.nq));
      if (!vis) continue;
      double dot = 0, mag = 0;
      for (std::int64_t c = 0; c < in.d; ++c) {
        const double a = in.q[static_cast<std::size_t>(i * in.d + c)],
                     b = in.k[static_cast<std::size_t>(j * in.d + c)];
        dot += a * b;
        mag += std::abs(a * b);
      }
      s[static_cast<std::size_t>(j)] = in.scale * dot;
      Es = std::max(Es,
                    (in.d + 2) * u32 * std::abs(in.scale) * mag + u32 * std::abs(in.scale * dot));
      m = std::max(m, in.scale * dot);
      lo = std::min(lo, in.scale * dot);
      maxabs = std::max(maxabs, std::abs(in.scale * dot));
      ++live;
    }
    QueryBudget& q = qb[static_cast<std::size_t>(i)];
    q.P.assign(static_cast<std::size_t>(in.dv), 0.0);
    q.out_abs.assign(static_cast<std::size_t>(in.dv), 0.0);
    if (live == 0) continue;
    q.masked = false;
    const double delta = m - lo;
    std::vector<double> p(s.size(), 0.0);
    double S = 0;
    for (std::size_t j = 0; j < s.size(); ++j)
      if (s[j] != -INFINITY) S += (p[j] = std::exp(s[j] - m));
    double H = 0;
    for (auto& x : p) {
      x /= S;
      if (x > 0) H -= x * std::log(x);
    }
    budget::RowStats st;
    st.live = live;
    st.max = m;
    st.spread = delta;
    st.max_abs = maxabs;
    const double dH = budget::entropy_abs(st, H) + 2.0 * Es * (1.0 + H);
    const double beta = in.adaptive ? theory::adaptive_beta(H) : 1.0;
    const double dB = in.adaptive ? budget::beta_abs(H, dH) : 0.0;
    if (beta != 1.0) {
      std::vector<double> z = s;
      double S2 = 0;
      for (std::size_t j = 0; j < z.size(); ++j)
        if (z[j] != -INFINITY) S2 += (p[j] = std::exp(beta * (z[j] - m)));
      for (auto& x : p) x /= S2;
    }
    // exp argument: 3 beta delta u (subtraction and an exp2(x log2 e) rewrite), see budgets.hpp
    const double rel_w =
        u32 * (4.0 + A + 3.0 * beta * delta + (beta != 1.0 ? 2.0 * beta * maxabs : 0.0)) +
        2.0 * beta * Es + 2.0 * delta * dB;
    for (std::int64_t c = 0; c < in.dv; ++c) {
      double P = 0;
      for (std::int64_t j = 0; j < in.nk; ++j)
        P += p[static_cast<std::size_t>(j)] *
             std::abs(in.v[static_cast<std::size_t>(j * in.dv + c)]);
      q.P[static_cast<std::size_t>(c)] = P;
      q.out_abs[static_cast<std::size_t>(c)] =
          P *
          (rel_w + u32 * (A + 2.0) + (t == DType::bfloat16 ? unit_roundoff(DType::bfloat16) : 0.0));
    }
    q.lse_abs = u32 * (A + 4.0 + beta * delta + (beta != 1.0 ? 2.0 * beta * maxabs : 0.0)) +
                beta * Es + dB * maxabs;
    q.H_abs = dH;
    q.beta_abs = dB;
    q.weight_sum = 1.0;
  }
  return qb;
}

ref::AttentionProblem problem_of(const AttentionInput& in) {
  ref::AttentionProblem p;
  p.nq = in.nq, p.nk = in.nk, p.d = in.d, p.dv = in.dv;
  p.q.assign(in.q.begin(), in.q.end());
  p.k.assign(in.k.begin(), in.k.end());
  p.v.assign(in.v.begin(), in.v.end());
  p.key_mask = in.key_mask;
  p.scale = in.scale;
  p.causal = in.causal;
  p.adaptive = in.adaptive;
  return p;
}

double default_rtol(DType t) { return t == DType::bfloat16 ? 1.6e-2 : 1.3e-6; }

// Restricts a problem's key mask to keys [k0, k1).
AttentionInput restrict_keys(const AttentionInput& in, std::int64_t k0, std::int64_t k1) {
  AttentionInput r = in;
  r.num_splits = 0;
  r.key_mask.assign(static_cast<std::size_t>(in.nk), 0);
  for (std::int64_t j = k0; j < k1; ++j)
    r.key_mask[static_cast<std::size_t>(j)] =
        in.key_mask.empty() ? 1 : in.key_mask[static_cast<std::size_t>(j)];
  return r;
}

}  // namespace

void run_attention_differential(const Run& run, DType t) {
  const Kernel& k = run.kernel;
  const Op op = Op::attention;
  enum { kUlp, kFa, kPt, kSlots };
  const char* const ids[] = {"ulp", "flash_attention_2x", "pytorch_fudge5"};
  std::vector<int> slots;
  for (int s = 0; s < kSlots; ++s)
    if (run.wants_rule(ids[s]) && run.wants_property(std::string("differential.") + ids[s]))
      slots.push_back(s);
  if (t == DType::float32) {
    const auto it = std::find(slots.begin(), slots.end(), int(kFa));
    if (it != slots.end()) {
      slots.erase(it);
      run.emit(skip_verdict(run, "differential.flash_attention_2x",
                            claim_of("differential.flash_attention_2x"),
                            rule_by_id("flash_attention_2x"), op, t, kFaFloat32Note));
    }
  }
  const bool want_split = run.wants_property("metamorphic.split_kv");
  if (slots.empty() && !want_split) return;
  if (const std::string why = why_unsupported(k, op, t); !why.empty()) {
    for (int s : slots) {
      const std::string id = std::string("differential.") + ids[s];
      run.emit(skip_verdict(run, id, claim_of(id), rule_by_id(ids[s]), op, t, why));
    }
    if (want_split)
      run.emit(skip_verdict(run, "metamorphic.split_kv", claim_of("metamorphic.split_kv"),
                            rule_by_id("T6"), op, t, why));
    return;
  }
  AttnGenOptions go;
  const std::string prop = std::string("differential[attention/") + name_of(t) + "]";
  std::function<std::vector<Check>(const AttnParams&)> eval = [&](const AttnParams& p) {
    std::vector<Check> cs(kSlots);
    AttentionInput in = materialise(p, t);
    in.num_splits = p.splits;
    run.before(prop, describe(p));
    const AttentionOutput o = k.attention(t, in);
    const ref::AttentionResult rr = ref::attention(problem_of(in));
    const auto qb = attention_budgets(in, t);
    std::vector<double> g, e, n;
    for (std::int64_t i = 0; i < in.nq; ++i) {
      const auto& q = qb[static_cast<std::size_t>(i)];
      const std::string w = "query " + std::to_string(i);
      for (std::int64_t c = 0; c < in.dv; ++c) {
        const std::size_t x = static_cast<std::size_t>(i * in.dv + c);
        const double ex = d(rr.out[x]);
        cs[kUlp].worst(
            elem(t, o.out[x], ex,
                 q.masked ? 0.0 : budget::output_abs(t, ex, q.out_abs[static_cast<std::size_t>(c)]),
                 w + " out[" + std::to_string(c) + "]"));
        g.push_back(o.out[x]);
        e.push_back(ex);
      }
      const double le = d(rr.lse[static_cast<std::size_t>(i)]),
                   He = d(rr.entropy[static_cast<std::size_t>(i)]),
                   be = d(rr.beta[static_cast<std::size_t>(i)]);
      cs[kUlp].worst(elem(DType::float32, o.lse[static_cast<std::size_t>(i)], le,
                          budget::output_abs(DType::float32, le, q.lse_abs), w + " lse"));
      cs[kUlp].worst(elem(DType::float32, o.entropy[static_cast<std::size_t>(i)], He,
                          q.masked ? 0.0 : budget::output_abs(DType::float32, He, q.H_abs),
                          w + " entropy"));
      cs[kUlp].worst(
          elem(DType::float32, o.beta[static_cast<std::size_t>(i)], be,
               in.adaptive && !q.masked ? q.beta_abs + budget::ulp(DType::float32, be) : 0.0,
               w + " beta"));
    }
    if (!in.adaptive) {
      const std::vector<float> nv = kernels::same_dtype::attention(t, in);
      n.assign(nv.begin(), nv.end());
      double err = 0, nerr = 0, nrel = 0, emax = 0;
      for (std::size_t i = 0; i < e.size(); ++i) {
        err = std::max(err, std::abs(g[i] - e[i]));
        if (std::isnan(g[i])) err = NAN;
        nerr = std::max(nerr, std::abs(n[i] - e[i]));
        if (e[i] != 0) nrel = std::max(nrel, std::abs(n[i] - e[i]) / std::abs(e[i]));
        emax = std::max(emax, std::abs(e[i]));
      }
      cs[kFa] = make_check(err, 2.0 * nerr + 2.0 * budget::ulp(t, emax + 0.3),
                           "max|out-ref| vs 2 x naive same-dtype error " + fmt(nerr));
      const double atol = 5.0 * std::max(nerr, 1e-5), rtol = 5.0 * std::max(nrel, default_rtol(t));
      double worst = 0;
      for (std::size_t i = 0; i < e.size(); ++i) {
        double r = std::abs(g[i] - e[i]) / (atol + rtol * std::abs(e[i]));
        if (std::isnan(r)) r = INFINITY;
        worst = std::max(worst, r);
      }
      cs[kPt] = make_check(
          worst, 1.0, "max |out-ref|/(atol+rtol|ref|), atol " + fmt(atol) + ", rtol " + fmt(rtol));
    }
    return cs;
  };
  SearchOptions so;
  so.shrink_pool = &run.shrink_pool;
  so.cases = std::max(8, run.config.cases / 3);
  so.seed = run.seed ^ 0xa77e ^ (t == DType::bfloat16 ? 0x55 : 0);
  if (!slots.empty()) {
    auto res = search<AttnParams>(gen_attention(go), kSlots, so, eval);
    for (int s : slots) {
      const std::string id = std::string("differential.") + ids[s];
      run.emit(slot_verdict<AttnParams>(run, id, claim_of(id), rule_by_id(ids[s]), op, t,
                                        res[static_cast<std::size_t>(s)],
                                        [](const AttnParams& p) { return describe(p); }));
    }
  }
  if (!want_split) return;

  // metamorphic.split_kv: slot 0 num_splits in {2,3,5} vs unsplit; slot 1 masked halves merged by
  // the kernel's merge_attention_states vs unsplit.
  const bool has_merge = k.supports(Op::merge_attention_states);
  std::function<std::vector<Check>(const AttnParams&)> split_eval = [&](const AttnParams& p) {
    std::vector<Check> cs(2);
    AttentionInput in = materialise(p, t);
    in.num_splits = 0;
    run.before("metamorphic.split_kv", describe(p));
    const AttentionOutput whole = k.attention(t, in);
    const auto qb = attention_budgets(in, t);
    for (std::int64_t ns : {2, 3, 5}) {
      AttentionInput si = in;
      si.num_splits = ns;
      const AttentionOutput o = k.attention(t, si);
      for (std::int64_t i = 0; i < in.nq; ++i) {
        const auto& q = qb[static_cast<std::size_t>(i)];
        for (std::int64_t c = 0; c < in.dv; ++c) {
          const std::size_t x = static_cast<std::size_t>(i * in.dv + c);
          const double ref_v = whole.out[x];
          const double b =
              q.masked ? 0.0
                       : 2.0 * budget::output_abs(t, ref_v, q.out_abs[static_cast<std::size_t>(c)]);
          cs[0].worst(elem(t, o.out[x], ref_v, b,
                           "num_splits=" + std::to_string(ns) + " query " + std::to_string(i) +
                               " out[" + std::to_string(c) + "] (compared with num_splits=0)"));
        }
        const double lw = whole.lse[static_cast<std::size_t>(i)];
        cs[0].worst(
            elem(DType::float32, o.lse[static_cast<std::size_t>(i)], lw,
                 2.0 * budget::output_abs(DType::float32, lw, q.lse_abs),
                 "num_splits=" + std::to_string(ns) + " query " + std::to_string(i) + " lse"));
      }
    }
    if (has_merge && !in.adaptive && in.nk >= 2) {
      const std::int64_t half = in.nk / 2;
      const AttentionInput ia = restrict_keys(in, 0, half), ib = restrict_keys(in, half, in.nk);
      const AttentionOutput oa = k.attention(t, ia), ob = k.attention(t, ib);
      const auto ba = attention_budgets(ia, t), bb = attention_budgets(ib, t);
      std::vector<float> ml;
      const std::vector<float> m =
          k.merge_attention_states(in.nq, in.dv, oa.out, oa.lse, ob.out, ob.lse, &ml,
                                   /*alias_a=*/in.q_pad == 1);
      for (std::int64_t i = 0; i < in.nq; ++i) {
        const std::size_t qi = static_cast<std::size_t>(i);
        const double la = oa.lse[qi], lb = ob.lse[qi], L = whole.lse[qi];
        const double wa = std::isfinite(la) && std::isfinite(L) ? std::exp(la - L) : 0.0;
        const double wb = std::isfinite(lb) && std::isfinite(L) ? std::exp(lb - L) : 0.0;
        const double dl = ba[qi].lse_abs + bb[qi].lse_abs + budget::ulp(DType::float32, la) +
                          budget::ulp(DType::float32, lb);
        for (std::int64_t c = 0; c < in.dv; ++c) {
          const std::size_t x = static_cast<std::size_t>(i * in.dv + c),
                            cc = static_cast<std::size_t>(c);
          const double mag = wa * std::abs(oa.out[x]) + wb * std::abs(ob.out[x]);
          double b = 0.0;
          if (!qb[qi].masked)
            b = budget::output_abs(t, whole.out[x], qb[qi].out_abs[cc]) +
                wa * budget::output_abs(t, oa.out[x], ba[qi].out_abs[cc]) +
                wb * budget::output_abs(t, ob.out[x], bb[qi].out_abs[cc]) + 8.0 * u32 * mag +
                2.0 * dl * mag;
          cs[1].worst(elem(DType::float32, m[x], whole.out[x], b,
                           "query " + std::to_string(i) + " out[" + std::to_string(c) +
                               "]: merge of keys [0," + std::to_string(half) + ") and [" +
                               std::to_string(half) + "," + std::to_string(in.nk) +
                               ") vs all keys"));
        }
        cs[1].worst(elem(DType::float32, ml[qi], L,
                         qb[qi].masked ? 0.0 : 2.0 * dl + budget::ulp(DType::float32, L) * 2,
                         "query " + std::to_string(i) + " merged lse"));
      }
    }
    return cs;
  };
  AttnGenOptions sgo;
  sgo.allow_splits = false;
  auto res = search<AttnParams>(gen_attention(sgo), 2, so, split_eval);
  const std::string id = "metamorphic.split_kv";
  run.emit(slot_verdict<AttnParams>(run, id, claim_of(id) + " [num_splits]", rule_by_id("T6"), op,
                                    t, res[0], [](const AttnParams& p) { return describe(p); }));
  if (has_merge)
    run.emit(slot_verdict<AttnParams>(
        run, id, claim_of(id) + " [merge_attention_states of masked halves]", rule_by_id("T6"),
        Op::merge_attention_states, t, res[1], [](const AttnParams& p) { return describe(p); }));
  else
    run.emit(skip_verdict(run, id, claim_of(id), rule_by_id("T6"), Op::merge_attention_states, t,
                          "kernel does not implement merge_attention_states"));
}

// differential.ulp[merge_attention_states_n]: the reference's partial results
// over P in 1..8 disjoint key sets (each key in a random part, some parts
// empty), rounded to float32, merged by the kernel in one call, against the
// reference attention over all keys.
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
namespace {
void run_merge_n_differential(const Run& run, const std::string& id, SearchOptions so) {
  const Kernel& k = run.kernel;
  constexpr Op op = Op::merge_attention_states_n;
  AttnGenOptions go;
  go.allow_adaptive = false;
  go.allow_splits = false;
  go.finite_only = false;
  std::function<std::vector<Check>(const AttnParams&)> eval = [&](const AttnParams& p) {
    AttentionInput in = materialise(p, DType::float32);
    std::mt19937_64 g(p.seed ^ 0x6e77a9);
    const std::int64_t parts = 1 + static_cast<std::int64_t>(p.seed % 8);
    std::vector<std::int64_t> part_of(static_cast<std::size_t>(in.nk));
    for (auto& x : part_of) x = static_cast<std::int64_t>(g() % static_cast<std::uint64_t>(parts));
    run.before("differential.ulp[merge_attention_states_n]",
               describe(p) + " parts=" + std::to_string(parts));
    const auto full = ref::attention(problem_of(in));
    std::vector<std::vector<float>> o, l;
    for (std::int64_t q = 0; q < parts; ++q) {
      AttentionInput r = in;
      r.num_splits = 0;
      r.key_mask.assign(static_cast<std::size_t>(in.nk), 0);
      for (std::int64_t j = 0; j < in.nk; ++j)
        if (part_of[static_cast<std::size_t>(j)] == q)
          r.key_mask[static_cast<std::size_t>(j)] =
              in.key_mask.empty() ? 1 : in.key_mask[static_cast<std::size_t>(j)];
      const auto rp = ref::attention(problem_of(r));
      std::vector<float> ov, lv;
      for (const auto& x : rp.out)
        ov.push_back(static_cast<float>(ref::round_to(DType::float32, x)));
      for (const auto& x : rp.lse)
        lv.push_back(static_cast<float>(ref::round_to(DType::float32, x)));
      o.push_back(std::move(ov));
      l.push_back(std::move(lv));
    }
    std::vector<float> ml;
    const std::vector<float> m = k.merge_attention_states_n(in.nq, in.dv, o, l, &ml);
    const double depth = static_cast<double>(std::max<std::int64_t>(parts - 1, 1));
    std::vector<Check> cs(1);
    for (std::int64_t i = 0; i < in.nq; ++i) {
      const std::size_t qi = static_cast<std::size_t>(i);
      const double L = d(full.lse[qi]);
      double dl = 0;
      std::string lses;
      for (std::int64_t q = 0; q < parts; ++q) {
        const float lq = l[static_cast<std::size_t>(q)][qi];
        if (std::isfinite(lq)) dl += budget::ulp(DType::float32, lq);
        lses += (q ? ", " : "") + fmt(lq);
      }
      for (std::int64_t c = 0; c < in.dv; ++c) {
        const std::size_t x = static_cast<std::size_t>(i * in.dv + c);
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
        const double e = d(full.out[x]);
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
  auto res = search<AttnParams>(gen_attention(go), 1, so, eval);
  run.emit(slot_verdict<AttnParams>(
      run, id,
      claim_of(id) +
          " (reference partial results over 1-8 disjoint key sets, some empty, merged in one call, "
          "vs all keys)",
      rule_by_id("ulp"), op, DType::float32, res[0], [](const AttnParams& p) {
        return describe(p) + " parts=" + std::to_string(1 + p.seed % 8);
      }));
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
  if (op == Op::merge_entropy_states) {
    RowGenOptions go;
    go.sizes = {1, 2, 3, 7, 16, 33, 100};
    go.max_rows = 2;
    std::function<std::vector<Check>(const RowParams&)> eval = [&](const RowParams& p0) {
      RowParams p = p0;
      p.rows = 2;
      p.temperature = 1.0;
      if (!p.explicit_values.empty() &&
          static_cast<std::int64_t>(p.explicit_values.size()) < 2 * p.n)
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
        const std::string w = "pair " + std::to_string(i) + " a=(" + fmt(a[i].m) + "," +
                              fmt(a[i].S) + "," + fmt(a[i].T) + ") b=(" + fmt(bb[i].m) + "," +
                              fmt(bb[i].S) + "," + fmt(bb[i].T) + ")";
        cs[0].worst(elem(DType::float32, out[i].m, em, 0.0, w + " m"));
        cs[0].worst(elem(DType::float32, out[i].S, eS,
                         Sb == 0 ? 0.0 : budget::output_abs(DType::float32, eS, Sb), w + " S"));
        cs[0].worst(elem(DType::float32, out[i].T, eT,
                         Tb == 0 ? 0.0 : budget::output_abs(DType::float32, eT, Tb), w + " T"));
      }
      return cs;
    };
    auto res = search<RowParams>(gen_rows(go), 1, so, eval);
    run.emit(slot_verdict<RowParams>(
        run, id,
        claim_of(id) + " (states of two generated rows, exact merge of the same float states)",
        rule_by_id("ulp"), op, t, res[0],
        [](const RowParams& p) { return describe(p, materialise(p, DType::float32)); }));
    return;
  }
  if (op == Op::merge_attention_states_n) {
    run_merge_n_differential(run, id, so);
    return;
  }
  // merge_attention_states: partial results of the reference on two key halves, rounded to float.
  AttnGenOptions go;
  go.allow_adaptive = false;
  go.allow_splits = false;
  go.finite_only = false;
  std::function<std::vector<Check>(const AttnParams&)> eval = [&](const AttnParams& p) {
    AttentionInput in = materialise(p, DType::float32);
    run.before("differential.ulp[merge_attention_states]", describe(p));
    const std::int64_t half = (in.nk + 1) / 2;
    const auto full = ref::attention(problem_of(in));
    const auto ra = ref::attention(problem_of(restrict_keys(in, 0, half)));
    const auto rb = ref::attention(problem_of(restrict_keys(in, half, in.nk)));
    auto f = [](const std::vector<ref::Mp>& v) {
      std::vector<float> o;
      for (const auto& x : v) o.push_back(static_cast<float>(ref::round_to(DType::float32, x)));
      return o;
    };
    const std::vector<float> oa = f(ra.out), ob = f(rb.out), la = f(ra.lse), lb = f(rb.lse);
    std::vector<float> ml;
    const std::vector<float> m =
        k.merge_attention_states(in.nq, in.dv, oa, la, ob, lb, &ml, /*alias_a=*/p.pad == 1);
    std::vector<Check> cs(1);
    for (std::int64_t i = 0; i < in.nq; ++i) {
      const std::size_t qi = static_cast<std::size_t>(i);
      const double L = d(full.lse[qi]);
      const double wa = std::isfinite(la[qi]) && std::isfinite(L) ? std::exp(la[qi] - L) : 0.0;
      const double wb = std::isfinite(lb[qi]) && std::isfinite(L) ? std::exp(lb[qi] - L) : 0.0;
      const double dl = budget::ulp(DType::float32, la[qi]) + budget::ulp(DType::float32, lb[qi]);
      for (std::int64_t c = 0; c < in.dv; ++c) {
        const std::size_t x = static_cast<std::size_t>(i * in.dv + c);
        const double mag = wa * std::abs(oa[x]) + wb * std::abs(ob[x]);
        const double e = d(full.out[x]);
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
  auto res = search<AttnParams>(gen_attention(go), 1, so, eval);
  run.emit(slot_verdict<AttnParams>(
      run, id,
      claim_of(id) + " (reference partial results over two key halves, merged, vs all keys)",
      rule_by_id("ulp"), op, t, res[0], [](const AttnParams& p) { return describe(p); }));
}

}  // namespace sa::props::detail
