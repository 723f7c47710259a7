// Properties of the backward operations (interface v2): softmax and
// log-softmax backward per row, and attention backward (FlashAttention's
// formulation), held against reference/backward.hpp.
//
//   backward.rounding               every dx within its rounding budget of the
//                                   correctly rounded reference (rule
//                                   backward_rounding, below)
//   backward.rows_sum_zero          sum_i dx_i = (1 - sum_i p_i) c / theta
//                                   (c = <dy, y>, or sum dy for log-softmax):
//                                   zero for weights that sum to one; within
//                                   that plus the row's budgets
//   backward.directional_derivative <dx, v> equals d/de <dy, f(x + e v)> taken
//                                   by forward-mode automatic differentiation
//                                   of f in double-double (not the backward
//                                   formula), within the budgets plus the
//                                   effect of y being rounded weights and the
//                                   derivative's error bound
//   attention_backward.rounding     every dq, dk, dv, d(sink) within its
//                                   a-priori budget (rule
//                                   attention_backward_rounding)
//   attention_backward.flash_attention_3x  low-precision types: per gradient
//                                   of at least 512 elements,
//                                   max|g - ref| <= 3 max|baseline - ref| +
//                                   2 ulp at max|ref| + 0.3 (FlashAttention's
//                                   backward rule, FA3's absolute floor)
//   attention_backward.gqa_group_sum  GQA/MQA dk, dv equal the sum over the
//                                   query heads of the repeated-heads call
//   attention_backward.masked_zero  keys no query sees get dk = dv = 0
//                                   exactly, and NaN put in their k and v
//                                   changes no gradient bit
//   attention_backward.no_nan       finite inputs give finite gradients,
//                                   including fully masked rows and lengths
//                                   that do not fill a 64/128-wide tile
//   attention_backward.cudnn_frontend  opt-in (rule cudnn_frontend_bwd, named
//                                   in config.rules): bfloat16 / float16
//                                   elementwise |g - ref| <= atol + rtol |ref|
//                                   with cuDNN frontend's SDPA backward test
//                                   tolerances (cudnn_tolerance below)
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <random>
#include <tuple>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "kernels/naive/backward.hpp"
#include "properties/attention_backward_cases.hpp"
#include "properties/budgets.hpp"
#include "properties/plan.hpp"
#include "properties/inline_inputs.hpp"
#include "properties/checks.hpp"
#include "properties/suite_internal.hpp"
#include "reference/attention.hpp"
#include "reference/backward.hpp"

namespace sa::props::detail {
namespace {

using budget::u32;

// ---------------------------------------------------------------- rows

struct RowCase {
  RowBatch y;                  // the forward's output (rounded to the type), in the logits' layout
  std::vector<float> dy;       // same layout
  std::vector<long double> p;  // exact weights of the logits (rows x n)
  RowBatch x;                  // the logits
};

// y = softmax / log-softmax of the logits (exact, then rounded to t), dy ~ N(0, 1) in t.
RowCase make_row_case(const RowParams& rp, DType t, bool log) {
  RowCase c;
  // In place (one case in four, as the generator draws it): dx over dy.
  const RowParams& p = rp;
  c.x = materialise(p, t);
  c.y = c.x;
  c.dy.assign(c.x.data.size(), NAN);
  c.p.assign(static_cast<std::size_t>(c.x.rows * c.x.n), 0.0L);
  std::mt19937_64 g(p.seed * 0x9e3779b97f4a7c15ULL + 17);
  std::normal_distribution<double> n01(0.0, 1.0);
  const long double th = p.temperature;
  for (std::int64_t r = 0; r < c.x.rows; ++r) {
    const float* l = c.x.data.data() + r * c.x.stride;
    long double m = -INFINITY;
    for (std::int64_t i = 0; i < c.x.n; ++i) m = std::max(m, l[i] / th);
    long double S = 0;
    if (m != -INFINITY)
      for (std::int64_t i = 0; i < c.x.n; ++i) S += std::exp(l[i] / th - m);
    for (std::int64_t i = 0; i < c.x.n; ++i) {
      const long double z = l[i] / th;
      const long double pi = m == -INFINITY ? 0.0L : std::exp(z - m) / S;
      c.p[static_cast<std::size_t>(r * c.x.n + i)] = pi;
      const double yi =
          log ? (m == -INFINITY || z == -INFINITY ? -INFINITY
                                                  : static_cast<double>(z - m - std::log(S)))
              : static_cast<double>(pi);
      c.y.data[static_cast<std::size_t>(r * c.x.stride + i)] = to_dtype(t, yi);
      c.dy[static_cast<std::size_t>(r * c.x.stride + i)] = to_dtype(t, n01(g));
    }
  }
  return c;
}

// Per-element budget of a float32-internal backward (rule backward_rounding).
std::vector<double> row_budgets(DType t, bool log, std::span<const float> y,
                                std::span<const float> dy, double theta,
                                const std::vector<double>& exact) {
  const std::size_t n = y.size();
  const double u = u32;
  long double A = 0, S = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const long double term =
        log ? static_cast<long double>(dy[j]) : static_cast<long double>(y[j]) * dy[j];
    A += std::abs(term);
    S += term;
  }
  std::vector<double> b(n);
  for (std::size_t i = 0; i < n; ++i) {
    double internal;
    if (log) {
      const double e = std::exp(static_cast<double>(y[i]));
      internal = (e * (static_cast<double>(n) + 2) * u * static_cast<double>(A) +
                  u * std::abs(dy[i] - e * static_cast<double>(S))) /
                     theta +
                 2 * u * std::abs(exact[i]);
    } else {
      internal = std::abs(y[i]) / theta *
                     ((static_cast<double>(n) + 1) * u * static_cast<double>(A) +
                      u * std::abs(dy[i] - static_cast<double>(S))) +
                 3 * u * std::abs(exact[i]);
    }
    b[i] = budget::output_abs(t, exact[i], internal);
  }
  return b;
}

std::string row_describe(const RowParams& p, DType t) {
  return describe(p, materialise(p, t), 16) +
         (p.in_place ? " (dy: N(0,1) from the seed; dx written over dy)"
                     : " (dy: N(0,1) from the seed)");
}

// What every row-backward property sees of one row: the case, the row's
// dy, the kernel's dx, the reference's exact gradient and its budgets.
struct RowBwdCtx {
  DType t;
  bool log;  // log_softmax_backward
  double theta;
  const RowCase& c;
  std::int64_t r;  // the row
  std::span<const float> dy;
  const ref::RowGradient& ref;
  std::vector<double> b;      // per-element budgets (row_budgets)
  std::span<const float> dx;  // the kernel's dx of this row
};

// backward.rounding: every dx within its budget of the correctly rounded
// reference.
void row_rounding(const RowBwdCtx& cx, Check& res) {
  for (std::int64_t i = 0; i < cx.c.y.n; ++i)
    res.worst(elem(cx.t, cx.dx[i], cx.ref.exact[i], cx.b[i],
                   "row " + std::to_string(cx.r) + " dx[" + std::to_string(i) + "]"));
}

// backward.rows_sum_zero: the row's dx sums to the exact sum for the given y,
// within the sum of the element budgets.
void rows_sum_zero(const RowBwdCtx& cx, Check& res) {
  long double sum = 0, exact_sum = 0, budget_sum = 0;
  for (std::int64_t i = 0; i < cx.c.y.n; ++i) {
    sum += cx.dx[i];
    exact_sum += cx.ref.exact[i];
    budget_sum += cx.b[i];
  }
  Check sc = make_check(
      static_cast<double>(std::abs(sum)), static_cast<double>(std::abs(exact_sum) + budget_sum),
      "row " + std::to_string(cx.r) + ": sum dx = " + fmt(static_cast<double>(sum)) +
          " (exact for the given y: " + fmt(static_cast<double>(exact_sum)) + ")");
  sc.unit = "absolute";
  res.worst(sc);
}

// backward.directional_derivative: <dx, v> against the directional
// derivative (ref::softmax_directional_derivative: dual numbers over
// double-double, an MPFR central difference where they do not apply) along a
// random v (drawn from `n01` over `g`, which carry over
// from row to row), for rows with a live item.
void directional_derivative(const RowBwdCtx& cx, std::mt19937_64& g,
                            std::normal_distribution<double>& n01, Check& res) {
  const RowCase& c = cx.c;
  const std::int64_t r = cx.r;
  bool live = false;
  for (std::int64_t i = 0; i < c.y.n; ++i)
    live = live || c.x.data[static_cast<std::size_t>(r * c.x.stride + i)] != -INFINITY;
  if (!live) return;
  std::vector<double> v(static_cast<std::size_t>(c.y.n));
  for (std::int64_t i = 0; i < c.y.n; ++i)
    v[i] = std::isinf(c.x.data[static_cast<std::size_t>(r * c.x.stride + i)]) ? 0.0 : n01(g);
  const ref::DirectionalDerivative ref_dd =
      ref::softmax_directional_derivative(c.x.row(r), cx.dy, v, cx.theta, cx.log);
  const double dd = ref_dd.value;
  // The gradient at the exact weights p, and what y's rounding moves it by.
  const long double* pr = c.p.data() + r * c.y.n;
  long double cp = 0, sdy = 0;
  for (std::int64_t i = 0; i < c.y.n; ++i) cp += pr[i] * cx.dy[i], sdy += cx.dy[i];
  long double got_dd = 0, shift = 0, bud = 0, mag = 0;
  for (std::int64_t i = 0; i < c.y.n; ++i) {
    const long double gp = (cx.log ? cx.dy[i] - pr[i] * sdy : pr[i] * (cx.dy[i] - cp)) / cx.theta;
    got_dd += v[i] * cx.dx[i];
    shift += v[i] * (cx.ref.exact[i] - gp);
    bud += std::abs(v[i]) * cx.b[i];
    mag += std::abs(v[i]) * (std::abs(gp) + std::abs(cx.ref.exact[i]));
  }
  const double bound = static_cast<double>(std::abs(shift) + bud) +
                       static_cast<double>(c.y.n + 4) * 0x1p-60 * static_cast<double>(mag) +
                       ref_dd.error;
  Check dc =
      make_check(static_cast<double>(std::abs(got_dd - dd)), bound,
                 "row " + std::to_string(r) + ": <dx, v> = " + fmt(static_cast<double>(got_dd)) +
                     ", derivative " + fmt(dd) + " (y's rounding accounts for " +
                     fmt(static_cast<double>(shift)) + ")");
  dc.unit = "absolute";
  res.worst(dc);
}

void run_row_backward(const Run& run, Op op, DType t) {
  const Kernel& k = run.kernel;
  const bool log = op == Op::log_softmax_backward;
  const char* const ids[] = {"backward.rounding", "backward.rows_sum_zero",
                             "backward.directional_derivative"};
  bool any = false;
  for (const char* id : ids) any = any || run.wants_property(id);
  if (!any) return;
  std::string why = why_unsupported(k, op, t);
  if (why.empty() && k.raw().capabilities) {
    const std::uint32_t types = k.raw().capabilities->op_dtypes[static_cast<int>(op)];
    const std::uint32_t bit = t == DType::float32    ? SA_DTYPE_F32
                              : t == DType::bfloat16 ? SA_DTYPE_BF16
                                                     : SA_DTYPE_F16;
    if (types && !(types & bit)) why = "kernel does not declare " + std::string(name_of(t));
  }
  if (!why.empty()) {
    for (const char* id : ids)
      if (run.wants_property(id))
        run.emit(skip_verdict(run, id, claim_of(id), rule_by_id("backward_rounding"), op, t, why));
    return;
  }
  RowGenOptions go;
  for (const auto& d : run.dists.empty() ? distribution_names() : run.dists)
    if (d != "special") go.distributions.push_back(d);  // NaN/+inf rows: no derivative
  if (go.distributions.empty()) go.distributions = {"gaussian"};
  go.sizes = run.sizes;
  go.temperatures = run.temperatures({0.5, 3.0});
  go.max_rows = 3;
  enum { kRound, kSum, kDir, kSlots };
  const std::string prop = std::string(name_of(op)) + "[" + name_of(t) + "]";
  std::function<std::vector<Check>(const RowParams&)> eval = [&](const RowParams& p) {
    std::vector<Check> cs(kSlots);
    const RowCase c = make_row_case(p, t, log);
    run.before(prop, row_describe(p, t));
    const std::vector<float> dx = log ? k.log_softmax_backward(t, c.y, c.dy, p.temperature)
                                      : k.softmax_backward(t, c.y, c.dy, p.temperature);
    std::mt19937_64 g(p.seed ^ 0xd1f);
    std::normal_distribution<double> n01(0.0, 1.0);
    for (std::int64_t r = 0; r < c.y.rows; ++r) {
      const std::span<const float> y = c.y.row(r);
      const std::span<const float> dy(c.dy.data() + r * c.y.stride,
                                      static_cast<std::size_t>(c.y.n));
      const ref::RowGradient ref = log ? ref::log_softmax_backward(t, y, dy, p.temperature)
                                       : ref::softmax_backward(t, y, dy, p.temperature);
      const RowBwdCtx cx{
          t,
          log,
          p.temperature,
          c,
          r,
          dy,
          ref,
          row_budgets(t, log, y, dy, p.temperature, ref.exact),
          std::span<const float>(dx.data() + r * c.y.stride, static_cast<std::size_t>(c.y.n))};
      // One function per property (above run_row_backward), each judging
      // this row into its slot.
      row_rounding(cx, cs[kRound]);
      rows_sum_zero(cx, cs[kSum]);
      directional_derivative(cx, g, n01, cs[kDir]);
    }
    return cs;
  };
  SearchOptions so;
  so.shrink_pool = &run.shrink_pool;
  so.cases = std::max(8, run.config.cases / 4);
  so.seed = run.seed ^ (log ? 0xb0c1 : 0xb0c0) ^ (static_cast<std::uint64_t>(t) * 0x51);
  // Edge cases every seed runs (values from the seed): in place (dx written
  // over dy, kernel.h) on two rows of 33 and on one row of 2, and the same
  // shapes out of place with padded strides.
  std::vector<RowParams> fixed;
  for (const auto& [n, rows, in_place] :
       {std::tuple<std::int64_t, int, bool>{33, 2, true}, {2, 1, true}, {33, 2, false}}) {
    if (k.max_n() > 0 && n > k.max_n()) continue;
    RowParams p;
    p.dist = go.distributions.front();
    p.n = n;
    p.rows = rows;
    p.in_place = in_place;
    p.pad = in_place ? 1 : 2;
    p.out_pad = in_place ? 0 : 3;
    p.seed = (run.seed ^ (0x1b0c0ull * static_cast<std::uint64_t>(n + rows))) | 1;
    fixed.push_back(p);
  }
  auto res = search<RowParams>(gen_rows(go), kSlots, so, eval, {}, fixed);
  for (int s = 0; s < kSlots; ++s) {
    if (!run.wants_property(ids[s])) continue;
    run.emit(slot_verdict<RowParams>(run, ids[s], claim_of(ids[s]), rule_by_id("backward_rounding"),
                                     op, t, res[static_cast<std::size_t>(s)],
                                     [t](const RowParams& p) { return row_describe(p, t); }));
  }
}

}  // namespace

// ---------------------------------------------------------------- attention

std::string describe(const BwdParams& p) {
  std::string r =
      "batch=" + std::to_string(p.batch) + " heads=" + std::to_string(p.heads_kv * p.group) + "/" +
      std::to_string(p.heads_kv) + " sq=" + std::to_string(p.sq) + " sk=" + std::to_string(p.sk) +
      " d=" + std::to_string(p.d) + " dv=" + std::to_string(p.dv);
  if (p.varlen) r += " varlen";
  if (p.causal) r += p.top_left ? " causal(top-left)" : " causal(bottom-right)";
  if (p.wl >= 0 || p.wr >= 0)
    r += " window=(" + std::to_string(p.wl) + "," + std::to_string(p.wr) + ")" +
         (p.top_left ? "tl" : "br");
  if (p.softcap > 0) r += " softcap=" + fmt(p.softcap);
  if (p.alibi) r += " alibi";
  if (p.sinks) r += " sinks";
  if (p.key_pad) r += " key_padding";
  if (p.bhsd) r += " bhsd";
  if (p.row_pad) r += " pad=" + std::to_string(p.row_pad);
  return r + " seed=" + std::to_string(p.seed) + " (dout: N(0,1) from the seed)";
}

namespace {

// Lengths at and around 64- and 128-wide tiles (tails that do not fill one),
// both orders; shrinking moves towards the first.
constexpr std::int64_t kBwdLengths[][2] = {{1, 1},     {7, 5},     {5, 7},     {17, 40},
                                           {65, 64},   {64, 65},   {80, 33},   {129, 127},
                                           {127, 129}, {100, 200}, {200, 100}, {255, 257}};
constexpr std::int64_t kBwdDims[] = {1, 3, 8, 16, 32, 40, 64, 80, 128};
constexpr double kBwdWorkCap = 1.5e6;

bool feature_allowed(const AttentionShapes& s, const char* feature) {
  return !s.features ||
         std::find(s.features->begin(), s.features->end(), feature) != s.features->end();
}

}  // namespace

// Draws one case. The spec's [attention] table shapes these cases as it does
// attention_v2's: its lengths, head dims and GQA ratios replace the lists
// above, and a feature it does not name is never drawn. With no table the
// draws are the same as they always were (the same values are drawn, then
// the features not named are switched off), so seeds reproduce.
rc::Gen<BwdParams> gen_bwd(const AttentionShapes& s) {
  std::vector<std::pair<std::int64_t, std::int64_t>> lengths = s.lengths;
  std::stable_sort(lengths.begin(), lengths.end(), [](const auto& a, const auto& b) {
    return a.first * a.second < b.first * b.second;
  });
  if (lengths.empty())
    for (const auto& L : kBwdLengths) lengths.emplace_back(L[0], L[1]);
  const bool named_dims = !s.head_dims.empty();
  const std::vector<std::int64_t> dims =
      named_dims ? s.head_dims
                 : std::vector<std::int64_t>(std::begin(kBwdDims), std::end(kBwdDims));
  const double cap = std::min(kBwdWorkCap, s.max_work);
  return rc::gen::exec([s, lengths, dims, named_dims, cap] {
    BwdParams p;
    const auto& L = lengths[*rc::gen::inRange<std::size_t>(0, lengths.size())];
    p.sq = L.first;
    p.sk = L.second;
    p.d = dims[*rc::gen::inRange<std::size_t>(0, dims.size())];
    p.dv =
        *rc::gen::inRange(0, 4) == 3 ? dims[*rc::gen::inRange<std::size_t>(0, dims.size())] : p.d;
    if (!feature_allowed(s, "unequal_dv")) p.dv = p.d;
    p.group = *rc::gen::inRange(0, 3) == 0 ? 1 : *rc::gen::inRange(2, 5);
    if (!s.gqa_ratios.empty())
      p.group = s.gqa_ratios[*rc::gen::inRange<std::size_t>(0, s.gqa_ratios.size())];
    p.heads_kv = *rc::gen::inRange(1, 3);
    p.batch = *rc::gen::inRange(1, 4);
    p.varlen = *rc::gen::inRange(0, 3) == 2 && feature_allowed(s, "varlen");
    auto work = [&] {
      return static_cast<double>(p.batch * p.heads_kv * p.group) * static_cast<double>(p.sq) *
             static_cast<double>(p.sk) * static_cast<double>(p.d + p.dv) / (p.varlen ? 4.0 : 1.0);
    };
    // Smaller first: batch, then heads (a spec's GQA ratio is kept), then
    // (for dims the spec does not name) the head dims.
    while (work() > cap && p.batch > 1) --p.batch;
    if (s.gqa_ratios.empty())
      while (work() > cap && p.heads_kv * p.group > 1) p.group > 1 ? --p.group : --p.heads_kv;
    while (work() > cap && p.heads_kv > 1) --p.heads_kv;
    while (!named_dims && work() > cap && (p.d > 8 || p.dv > 8))
      p.d = std::min<std::int64_t>(p.d, 8), p.dv = std::min<std::int64_t>(p.dv, 8);
    if (p.varlen && p.batch < 2) p.batch = 2;
    const int mask_kind = *rc::gen::inRange(0, 6);
    p.causal = (mask_kind == 1 || mask_kind == 2) && feature_allowed(s, "causal");
    p.top_left = mask_kind == 2 || (mask_kind == 4 && *rc::gen::inRange(0, 2) == 1);
    if (mask_kind >= 3 && mask_kind <= 4) {
      p.wl = *rc::gen::inRange<std::int64_t>(-1, std::max<std::int64_t>(2, p.sk));
      p.wr = *rc::gen::inRange<std::int64_t>(-1, std::max<std::int64_t>(2, p.sk / 4));
      if (!feature_allowed(s, "window")) p.wl = p.wr = -1;
    }
    p.key_pad =
        (mask_kind == 5 || *rc::gen::inRange(0, 6) == 5) && feature_allowed(s, "key_padding");
    p.softcap = *rc::gen::inRange(0, 4) == 3 ? 5.0 + *rc::gen::inRange(0, 46) : 0.0;
    if (!feature_allowed(s, "softcap")) p.softcap = 0.0;
    p.alibi = *rc::gen::inRange(0, 5) == 4 && feature_allowed(s, "alibi");
    p.sinks = *rc::gen::inRange(0, 4) == 3 && feature_allowed(s, "sinks");
    p.bhsd = *rc::gen::inRange(0, 2) == 1 && feature_allowed(s, "bhsd");
    p.row_pad = *rc::gen::inRange(0, 3) == 2 ? *rc::gen::inRange(1, 9) : 0;
    if (!feature_allowed(s, "strided")) p.row_pad = 0;
    p.seed = *rc::gen::noShrink(rc::gen::inRange<std::uint64_t>(1, std::uint64_t(1) << 53));
    return p;
  });
}

namespace {

float round_attn(AttnType t, double x) {
  const float f = static_cast<float>(x);
  return t == AttnType::bfloat16 ? round_to_bf16(f) : t == AttnType::float16 ? round_to_f16(f) : f;
}

}  // namespace

AttentionCase make_case(const BwdParams& p, AttnType t, std::vector<float>* dout) {
  AttentionCase c;
  c.qkv = c.out_type = t;
  c.batch = p.batch;
  c.heads_kv = p.heads_kv;
  c.heads_q = p.heads_kv * p.group;
  c.d = p.d;
  c.dv = p.dv;
  std::mt19937_64 g(p.seed);
  if (p.varlen) {
    c.cu_q = {0};
    c.cu_k = {0};
    for (std::int64_t b = 0; b < p.batch; ++b) {
      const bool empty = b > 0 && g() % 4 == 0;
      const std::int64_t lq = empty ? 0 : 1 + static_cast<std::int64_t>(g() % p.sq);
      const std::int64_t lk = empty && g() % 2 ? 0 : 1 + static_cast<std::int64_t>(g() % p.sk);
      c.cu_q.push_back(c.cu_q.back() + static_cast<std::int32_t>(lq));
      c.cu_k.push_back(c.cu_k.back() + static_cast<std::int32_t>(lk));
    }
  } else {
    c.seqlen_q = p.sq;
    c.seqlen_k = p.sk;
  }
  std::normal_distribution<double> n01(0.0, 1.0);
  for (std::int64_t i = 0; i < c.total_q() * c.heads_q * c.d; ++i)
    c.q.push_back(round_attn(t, n01(g)));
  for (std::int64_t i = 0; i < c.total_k() * c.heads_kv * c.d; ++i)
    c.k.push_back(round_attn(t, n01(g)));
  for (std::int64_t i = 0; i < c.total_k() * c.heads_kv * c.dv; ++i)
    c.v.push_back(round_attn(t, n01(g)));
  c.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.d)));
  c.causal = p.causal;
  c.top_left = p.top_left;
  c.window_left = p.wl;
  c.window_right = p.wr;
  c.softcap = p.softcap;
  if (p.alibi)
    for (std::int64_t h = 0; h < c.heads_q; ++h)
      c.alibi_slopes.push_back(std::ldexp(1.0f, -static_cast<int>(1 + (8 * (h + 1)) / c.heads_q)));
  if (p.sinks)
    for (std::int64_t h = 0; h < c.heads_q; ++h) c.sinks.push_back(static_cast<float>(n01(g)));
  if (p.key_pad) {
    c.key_padding_mask.assign(static_cast<std::size_t>(c.total_k()), 1);
    for (auto& m : c.key_padding_mask) m = g() % 5 == 0 ? 0 : 1;
    // Some sequences lose every key: fully masked query rows.
    for (std::int64_t b = 0; b < c.batch; ++b)
      if (g() % 4 == 0)
        for (std::int64_t j = 0; j < c.len_k(b); ++j) c.key_padding_mask[c.row_k(b, j)] = 0;
  }
  c.layout = p.bhsd ? AttnLayout::bhsd : AttnLayout::bshd;
  c.row_pad = p.row_pad;
  dout->clear();
  for (std::int64_t i = 0; i < c.total_q() * c.heads_q * c.dv; ++i)
    dout->push_back(round_attn(t, n01(g)));
  return c;
}

namespace {

// The forward's out (rounded to the output type) and lse (float32) the backward is handed.
void given_forward(const AttentionCase& c, const ref::AttentionGradients& r,
                   std::vector<float>* out, std::vector<float>* lse) {
  out->resize(r.out.size());
  lse->resize(r.lse.size());
  for (std::size_t i = 0; i < r.out.size(); ++i) (*out)[i] = round_attn(c.out_type, r.out[i]);
  for (std::size_t i = 0; i < r.lse.size(); ++i) (*lse)[i] = static_cast<float>(r.lse[i]);
}

// The lse handed to the kernel, in the conventions it declares
// (conventions.hpp): lse_without_sink, the keys' exact lse (from the forward
// reference of the case without its sinks: the backward has no adaptive
// temperature); alibi_lse_shift, plus c = slope_h (i + off); lse_base2, over
// ln 2; each formed exactly and rounded once to float32. masked_lse_inf, +inf
// for a fully masked row (no sink). *budget_lse gets the base-e, unshifted,
// sink-including value that what the kernel is handed stands for (the budgets'
// lse_given), and *lse_extra the error of the kernel's own way back to it:
// 3u |c| for the shifted scores and their difference, and 4u (|L| + |sink|) + 2u
// for adding the sink back (a log, an exp and a sum in float32).
void hand_lse(const AttentionCase& c, const ref::AttentionGradients& r,
              const std::vector<float>& lse, std::vector<float>* kernel_lse,
              std::vector<double>* budget_lse, std::vector<double>* lse_extra) {
  const Conventions& cv = active_conventions();
  kernel_lse->assign(lse.begin(), lse.end());
  budget_lse->assign(lse.begin(), lse.end());
  lse_extra->assign(lse.size(), 0.0);
  const bool keys_only = cv.lse_without_sink && !c.sinks.empty();
  std::vector<double> keys;
  if (keys_only) {
    AttentionCase nc = c;
    nc.sinks.clear();
    keys = ref::attention_v2(nc).lse;
  }
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t i = 0; i < c.len_q(b); ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h) {
        const std::size_t ro = static_cast<std::size_t>(c.row_q(b, i) * c.heads_q + h);
        if (r.lse[ro] == -INFINITY) {
          if (cv.masked_lse_inf) (*kernel_lse)[ro] = INFINITY;
          continue;  // the budgets skip such rows
        }
        if (!keys_only && !cv.alibi_lse_shift && !cv.lse_base2) continue;
        double L = keys_only ? keys[ro] : r.lse[ro];
        const double shift = cv.alibi_lse_shift ? alibi_lse_shift_of(c, b, i, h) : 0.0;
        L += shift;
        const float handed =
            static_cast<float>(cv.lse_base2 ? L * std::numbers::log2e : L);  // rounded once
        (*kernel_lse)[ro] = handed;
        double back = cv.lse_base2 ? static_cast<double>(handed) * std::numbers::ln2
                                   : static_cast<double>(handed);
        back -= shift;
        double extra = 3 * u32 * std::abs(shift);
        if (keys_only) {
          const double sink = c.sinks[static_cast<std::size_t>(h)];
          const double hi = std::max(back, sink);
          back = hi + std::log(std::exp(back - hi) + std::exp(sink - hi));  // -inf keys: the sink
          extra += 4 * u32 * (std::abs(back) + std::abs(sink)) + 2 * u32;
        }
        (*budget_lse)[ro] = back;
        (*lse_extra)[ro] = extra;
      }
}

struct GradBudgets {
  std::vector<double> dq, dk, dv, dsinks;
};

// The a-priori budget of every gradient (rule attention_backward_rounding): a
// kernel computing in float32 from the given out (rounded) and lse (float32).
// Per visible (i, j), first order in u = 2^-24:
//   score        E_s = (d + 2) u |scale| sum|q k| + 3u |s| [+ 4u c softcap] [+ 2u (|alibi| + |s|)]
//   P = exp(s - lse)   relative rel_P = E_s + u (|lse| + |s| + |lse|) + 2u (faithful exp)
//   dP = dout . v      E_dp = (dv + 1) u sum |dout v|
//   D = dout . out     E_D = sum |dout| |out_given - out| + (dv + 1) u sum |dout out|
//   softcap' g         E_g = 2 |tanh| g E_t / c + 4u (E_t the uncapped score's error)
//   dS = P (dP - D) g  E_ds = |dS| (rel_P + 3u) + P g (E_dp + E_D + u |dP - D|) + P |dP - D| E_g
//   dq_i = scale sum_j dS_ij k_j: |scale| sum_j (E_ds |k| + (n_i + 2) u |dS k|) + u |dq|
//   dk_j (over every row and head of the group, N_j terms) alike; dv_j = sum P dout:
//   sum (rel_P P |dout|) + (N_j + 1) u sum P |dout|; d(sink) = -sum p_sink D alike;
//   then the output's rounding (budgets.hpp output_abs).
GradBudgets grad_budgets(const AttentionCase& c, std::span<const float> dout,
                         const ref::AttentionGradients& r, std::span<const float> out_given,
                         std::span<const double> lse_given, std::span<const double> lse_extra) {
  const double u = u32;
  const std::int64_t HQ = c.heads_q, HK = c.heads_kv, d = c.d, dvv = c.dv;
  const double scale = std::abs(c.scale);
  std::vector<double> eq(r.dq.size(), 0), aq(r.dq.size(), 0), ek(r.dk.size(), 0),
      ak(r.dk.size(), 0), ev(r.dv.size(), 0), av(r.dv.size(), 0), es(r.dsinks.size(), 0),
      as(r.dsinks.size(), 0);
  std::vector<double> nk(static_cast<std::size_t>(c.total_k() * HK), 0), ns(r.dsinks.size(), 0);
  std::vector<double> nq(static_cast<std::size_t>(c.total_q() * HQ), 0);
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t Lq = c.len_q(b), Lk = c.len_k(b), off = c.top_left ? 0 : Lk - Lq;
    for (std::int64_t h = 0; h < HQ; ++h) {
      const std::int64_t hk = c.kv_head(h);
      for (std::int64_t i = 0; i < Lq; ++i) {
        const std::int64_t row = c.row_q(b, i);
        const std::size_t ro = static_cast<std::size_t>(row * HQ + h);
        const double L = r.lse[ro], Lg = lse_given[ro];
        if (L == -INFINITY) continue;
        const double eL = std::abs(Lg - L) + (lse_extra.empty() ? 0.0 : lse_extra[ro]);
        const float* q = c.q.data() + ro * d;
        const float* go = dout.data() + ro * dvv;
        double D = 0, ED = 0, sDO = 0;
        for (std::int64_t x = 0; x < dvv; ++x) {
          const double o = r.out[ro * dvv + x];
          D += go[x] * o;
          ED += std::abs(go[x]) * std::abs(out_given[ro * dvv + x] - o) +
                (dvv + 1) * u * std::abs(go[x] * o);
          sDO += std::abs(go[x]);
        }
        if (!c.sinks.empty()) {
          const double ps = std::exp(c.sinks[h] - L);
          const double rel = eL + u * (std::abs(c.sinks[h]) + std::abs(L)) + 2 * u;
          es[h] += ps * (std::abs(D) * rel + ED);
          as[h] += ps * std::abs(D);
          ns[h] += 1;
        }
        for (std::int64_t j = 0; j < Lk; ++j) {
          if (!ref::key_visible(c, b, i, j)) continue;
          const std::size_t kr = static_cast<std::size_t>(c.row_k(b, j) * HK + hk);
          const float* kj = c.k.data() + kr * d;
          const float* vj = c.v.data() + kr * dvv;
          long double dot = 0, mag = 0;
          for (std::int64_t x = 0; x < d; ++x) {
            dot += static_cast<long double>(q[x]) * kj[x];
            mag += std::abs(static_cast<long double>(q[x]) * kj[x]);
          }
          double t = static_cast<double>(dot) * c.scale;
          const double Et = (d + 2) * u * scale * static_cast<double>(mag) + 3 * u * std::abs(t);
          double s = t, Es = Et, gcap = 1, Eg = 0;
          if (c.softcap > 0) {
            const double th = std::tanh(t / c.softcap);
            s = c.softcap * th;
            gcap = 1 - th * th;
            Es = Et + 4 * u * c.softcap;
            Eg = 2 * std::abs(th) * gcap * Et / c.softcap + 4 * u;
          }
          if (!c.alibi_slopes.empty()) {
            const double a = c.alibi_slopes[h] * std::abs(static_cast<double>(i + off - j));
            s -= a;
            Es += 2 * u * (a + std::abs(s));
          }
          const double P = std::exp(s - L);
          const double relP = Es + eL + u * (std::abs(s) + 2 * std::abs(L)) + 2 * u;
          double dp = 0, Edp = 0;
          for (std::int64_t x = 0; x < dvv; ++x) {
            dp += static_cast<double>(go[x]) * vj[x];
            Edp += std::abs(static_cast<double>(go[x]) * vj[x]);
          }
          Edp *= (dvv + 1) * u;
          const double ds = P * (dp - D) * gcap;
          const double Eds = std::abs(ds) * (relP + 3 * u) +
                             P * gcap * (Edp + ED + u * std::abs(dp - D)) +
                             P * std::abs(dp - D) * Eg;
          nq[ro] += 1;
          nk[kr] += 1;
          for (std::int64_t x = 0; x < d; ++x) {
            eq[ro * d + x] += Eds * std::abs(kj[x]);
            aq[ro * d + x] += std::abs(ds * kj[x]);
            ek[kr * d + x] += Eds * std::abs(q[x]);
            ak[kr * d + x] += std::abs(ds * q[x]);
          }
          for (std::int64_t x = 0; x < dvv; ++x) {
            ev[kr * dvv + x] += relP * P * std::abs(go[x]);
            av[kr * dvv + x] += P * std::abs(go[x]);
          }
        }
      }
    }
  }
  const DType t = dtype_of(c.out_type);
  GradBudgets g;
  g.dq.resize(r.dq.size());
  for (std::size_t e = 0; e < r.dq.size(); ++e) {
    const double n = nq[e / static_cast<std::size_t>(d)];
    g.dq[e] = budget::output_abs(t, r.dq[e],
                                 scale * (eq[e] + (n + 2) * u * aq[e]) + u * std::abs(r.dq[e]));
  }
  g.dk.resize(r.dk.size());
  for (std::size_t e = 0; e < r.dk.size(); ++e) {
    const double n = nk[e / static_cast<std::size_t>(d)];
    g.dk[e] = budget::output_abs(t, r.dk[e],
                                 scale * (ek[e] + (n + 2) * u * ak[e]) + u * std::abs(r.dk[e]));
  }
  g.dv.resize(r.dv.size());
  for (std::size_t e = 0; e < r.dv.size(); ++e) {
    const double n = nk[e / static_cast<std::size_t>(dvv)];
    g.dv[e] = budget::output_abs(t, r.dv[e], ev[e] + (n + 1) * u * av[e]);
  }
  g.dsinks.resize(r.dsinks.size());
  for (std::size_t h = 0; h < r.dsinks.size(); ++h)
    g.dsinks[h] = budget::output_abs(DType::float32, r.dsinks[h], es[h] + (ns[h] + 1) * u * as[h]);
  return g;
}

template <class Where>
void consider(Check& worst, DType t, double got, double exact, double budget, Where where) {
  if (std::isfinite(got) && std::isfinite(exact) && exact != 0.0 && worst.applicable &&
      !worst.fails()) {
    const double r = std::abs(got - exact) / budget;
    if (r <= worst.ratio) return;
  }
  worst.worst(elem(t, got, exact, budget, where()));
}

struct NaLog {
  std::map<std::string, int> reasons;
  int count = 0;
  void add(const std::string& w) { ++count, ++reasons[w]; }
  std::string text() const {
    if (!count) return {};
    std::string r = std::to_string(count) + " case(s) not applicable (";
    bool first = true;
    for (const auto& [w, n] : reasons)
      r += (first ? "" : "; ") + w + " x" + std::to_string(n), first = false;
    return r + ")";
  }
};

// Where element e of a packed gradient lives.
std::string at_of(const char* what, std::size_t e, std::int64_t heads, std::int64_t dim) {
  const std::size_t per_row = static_cast<std::size_t>(heads * dim);
  return std::string(what) + " row " + std::to_string(e / per_row) + " head " +
         std::to_string((e % per_row) / static_cast<std::size_t>(dim)) + " [" +
         std::to_string(e % static_cast<std::size_t>(dim)) + "]";
}

// cuDNN frontend's SDPA backward tolerances (NVIDIA/cudnn-frontend,
// test/python/test_mhas.py, test_sdpa_backward: torch.testing.assert_close of
// dQ, dK, dV against a float32 reference): rtol 2e-2 for every gradient;
// atol 2e-2 for dQ, and for dK and dV 2e-2 (float16) or 7e-2 (bfloat16).
// The tests run float16 and bfloat16 inputs only.
struct CudnnTolerance {
  double atol, rtol;
};
CudnnTolerance cudnn_tolerance(AttnType t, bool dq) {
  if (dq || t != AttnType::bfloat16) return {2e-2, 2e-2};
  return {7e-2, 2e-2};
}

// What every attention_backward property sees of one case: the case, the
// forward out and lse it was handed, the kernel's gradients, the
// reference's and their budgets. Each property below judges one case into
// its Check; run_attention_backward calls those that apply.
struct BwdCtx {
  const Run& run;
  const Kernel& k;
  AttnType t;
  DType dt;
  const AttentionCase& c;
  const std::vector<float>& dout;
  const ref::AttentionGradients& r;
  const std::vector<float>& out;     // the forward output handed to the kernel
  const std::vector<float>& lse_k;   // the lse handed to the kernel (its convention)
  const std::vector<double>& lse_b;  // hand_lse's budget terms
  const std::vector<double>& lse_x;
  const AttentionBackwardResult& g;
  const GradBudgets& gb;
};
// rounding
void grad_rounding(const BwdCtx& cx, Check& res) {
  DType dt = cx.dt;
  const AttentionCase& c = cx.c;
  const ref::AttentionGradients& r = cx.r;
  const AttentionBackwardResult& g = cx.g;
  const GradBudgets& gb = cx.gb;
  for (std::size_t e = 0; e < r.dq.size(); ++e)
    consider(res, dt, g.dq[e], r.dq[e], gb.dq[e], [&] { return at_of("dq", e, c.heads_q, c.d); });
  for (std::size_t e = 0; e < r.dk.size(); ++e)
    consider(res, dt, g.dk[e], r.dk[e], gb.dk[e], [&] { return at_of("dk", e, c.heads_kv, c.d); });
  for (std::size_t e = 0; e < r.dv.size(); ++e)
    consider(res, dt, g.dv[e], r.dv[e], gb.dv[e], [&] { return at_of("dv", e, c.heads_kv, c.dv); });
  for (std::size_t h = 0; h < r.dsinks.size(); ++h)
    consider(res, DType::float32, g.dsinks[h], r.dsinks[h], gb.dsinks[h],
             [&] { return "dsinks[" + std::to_string(h) + "]"; });
}

// no_nan (every input is finite)
void no_nan(const BwdCtx& cx, Check& res) {
  const AttentionCase& c = cx.c;
  const AttentionBackwardResult& g = cx.g;
  std::size_t bad = 0;
  std::string first;
  auto scan = [&](const std::vector<float>& v, const char* what, std::int64_t heads,
                  std::int64_t dim) {
    for (std::size_t e = 0; e < v.size(); ++e)
      if (!std::isfinite(v[e]) && bad++ == 0)
        first = at_of(what, e, heads, dim) + " = " + fmt(v[e]);
  };
  scan(g.dq, "dq", c.heads_q, c.d);
  scan(g.dk, "dk", c.heads_kv, c.d);
  scan(g.dv, "dv", c.heads_kv, c.dv);
  for (std::size_t h = 0; h < g.dsinks.size(); ++h)
    if (!std::isfinite(g.dsinks[h]) && bad++ == 0)
      first = "dsinks[" + std::to_string(h) + "] = " + fmt(g.dsinks[h]);
  Check ch = make_check(static_cast<double>(bad), 0.0,
                        bad ? first + " from finite inputs" : "every gradient finite");
  ch.unit = "non-finite gradients";
  res = ch;
}

// flash_attention_3x. FlashAttention's tests compare whole gradient tensors
// of at least 1152 elements (test_flash_attn.py: batch 4 x 9 heads x 1 query
// x head dim 32), where the baseline's largest error is a stable statistic.
// Over a few elements it is not: on the built-in CPU kernel (bfloat16, about
// 245,000 gradient evaluations of random cases and their shrinks, head dims
// 1 to 128), gradients of fewer than 256 elements exceeded the bound in 42
// (up to 1.62x; one query, one key and a sink at head dim 32, say), each inside
// attention_backward.rounding's a-priori budget; from 256 to 511 elements
// the largest ratio was 0.98, from 512 up 0.70, with no failure
// (docs/checks.md; bench/fa3x_calibration.sh). So a gradient takes the rule
// from 512 elements; attention_backward.rounding judges every gradient.
constexpr std::size_t kFaMinElements = 512;
void flash_attention_3x(const BwdCtx& cx, Check& res) {
  DType dt = cx.dt;
  const AttentionCase& c = cx.c;
  const std::vector<float>& dout = cx.dout;
  const ref::AttentionGradients& r = cx.r;
  const AttentionBackwardResult& g = cx.g;
  const auto base = kernels::same_dtype::attention_backward(c, dout);
  Check worst;
  auto rule3 = [&](const char* what, const std::vector<float>& got, const std::vector<float>& bl,
                   const std::vector<double>& ex) {
    if (ex.size() < kFaMinElements) return;
    double err = 0, berr = 0, emax = 0;
    for (std::size_t e = 0; e < ex.size(); ++e) {
      err = std::isnan(got[e]) ? NAN : std::max(err, std::abs(got[e] - ex[e]));
      if (std::isnan(err)) break;
      berr = std::max(berr, std::abs(bl[e] - ex[e]));
      emax = std::max(emax, std::abs(ex[e]));
    }
    const double atol = 2.0 * budget::ulp(dt, emax + 0.3);
    worst.worst(make_check(err, 3.0 * berr + atol,
                           std::string(what) + ": max|g - ref| vs 3 x same-dtype baseline " +
                               fmt(berr) + " + atol " + fmt(atol)));
  };
  rule3("dq", g.dq, base.dq, r.dq);
  rule3("dk", g.dk, base.dk, r.dk);
  rule3("dv", g.dv, base.dv, r.dv);
  worst.unit = "absolute";
  res = worst;
}

// cudnn_frontend (opt-in): elementwise atol + rtol |ref|, as
// torch.testing.assert_close does.
void cudnn_frontend(const BwdCtx& cx, Check& res) {
  AttnType t = cx.t;
  const AttentionCase& c = cx.c;
  const ref::AttentionGradients& r = cx.r;
  const AttentionBackwardResult& g = cx.g;
  Check worst;
  auto tol = [&](const char* what, const std::vector<float>& got, const std::vector<double>& ex,
                 bool dq, std::int64_t heads, std::int64_t dim) {
    const CudnnTolerance ct = cudnn_tolerance(t, dq);
    for (std::size_t e = 0; e < ex.size(); ++e) {
      const double err = std::abs(static_cast<double>(got[e]) - ex[e]);
      const double bound = ct.atol + ct.rtol * std::abs(ex[e]);
      if (!(err <= bound) || !worst.applicable || err / bound > worst.ratio)
        worst.worst(make_check(err, bound,
                               at_of(what, e, heads, dim) + " = " + fmt(got[e]) + ", ref " +
                                   fmt(ex[e]) + " (atol " + fmt(ct.atol) + ", rtol " +
                                   fmt(ct.rtol) + ")"));
    }
  };
  tol("dq", g.dq, r.dq, true, c.heads_q, c.d);
  tol("dk", g.dk, r.dk, false, c.heads_kv, c.d);
  tol("dv", g.dv, r.dv, false, c.heads_kv, c.dv);
  worst.unit = "absolute";
  res = worst;
}

// gqa_group_sum
void gqa_group_sum(const BwdCtx& cx, Check& res) {
  const Kernel& k = cx.k;
  const AttentionCase& c = cx.c;
  const std::vector<float>& dout = cx.dout;
  const std::vector<float>& out = cx.out;
  const std::vector<float>& lse_k = cx.lse_k;
  const std::vector<double>& lse_b = cx.lse_b;
  const std::vector<double>& lse_x = cx.lse_x;
  const AttentionBackwardResult& g = cx.g;
  const GradBudgets& gb = cx.gb;
  const AttentionCase mc = with_repeated_kv_heads(c);
  if (k.why_not_applicable_backward(mc).empty()) {
    const AttentionBackwardResult mg = k.attention_backward(mc, out, lse_k, dout);
    const ref::AttentionGradients mr = ref::attention_backward(mc, dout);
    const GradBudgets mb = grad_budgets(mc, dout, mr, out, lse_b, lse_x);
    const std::int64_t G = c.heads_q / c.heads_kv;
    auto group = [&](const char* what, const std::vector<float>& gq, const std::vector<float>& gm,
                     const std::vector<double>& bq, const std::vector<double>& bm,
                     std::int64_t dim) {
      for (std::int64_t row = 0; row < c.total_k(); ++row)
        for (std::int64_t hk = 0; hk < c.heads_kv; ++hk)
          for (std::int64_t x = 0; x < dim; ++x) {
            long double sum = 0, bsum = 0;
            for (std::int64_t h = hk * G; h < (hk + 1) * G; ++h) {
              const std::size_t e = static_cast<std::size_t>((row * c.heads_q + h) * dim + x);
              sum += gm[e];
              bsum += bm[e];
            }
            const std::size_t e = static_cast<std::size_t>((row * c.heads_kv + hk) * dim + x);
            Check ch = make_check(
                std::abs(gq[e] - static_cast<double>(sum)), bq[e] + static_cast<double>(bsum),
                std::string(what) + " key row " + std::to_string(row) + " kv head " +
                    std::to_string(hk) + " [" + std::to_string(x) + "]: " + fmt(gq[e]) +
                    ", sum over the repeated heads " + fmt(static_cast<double>(sum)));
            ch.unit = "absolute";
            res.worst(ch);
          }
    };
    group("dk", g.dk, mg.dk, gb.dk, mb.dk, c.d);
    group("dv", g.dv, mg.dv, gb.dv, mb.dv, c.dv);
  }
}

// masked_zero: keys hidden from every query of their sequence.
void masked_zero(const BwdCtx& cx, Check& res) {
  const Kernel& k = cx.k;
  const AttentionCase& c = cx.c;
  const std::vector<float>& dout = cx.dout;
  const std::vector<float>& out = cx.out;
  const std::vector<float>& lse_k = cx.lse_k;
  const AttentionBackwardResult& g = cx.g;
  AttentionCase pc = c;
  std::vector<std::int64_t> hidden;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t j = 0; j < c.len_k(b); ++j) {
      bool h = true;
      for (std::int64_t i = 0; i < c.len_q(b) && h; ++i) h = !ref::key_visible(c, b, i, j);
      if (!h) continue;
      const std::int64_t r0 = c.row_k(b, j);
      hidden.push_back(r0);
      for (std::int64_t hk = 0; hk < c.heads_kv; ++hk) {
        for (std::int64_t x = 0; x < c.d; ++x) pc.k[(r0 * c.heads_kv + hk) * c.d + x] = NAN;
        for (std::int64_t x = 0; x < c.dv; ++x) pc.v[(r0 * c.heads_kv + hk) * c.dv + x] = NAN;
      }
    }
  if (!hidden.empty()) {
    const AttentionBackwardResult pg = k.attention_backward(pc, out, lse_k, dout);
    std::size_t diff = 0;
    std::string first;
    for (std::int64_t r0 : hidden)
      for (std::int64_t hk = 0; hk < c.heads_kv; ++hk) {
        for (std::int64_t x = 0; x < c.d; ++x) {
          const std::size_t e = static_cast<std::size_t>((r0 * c.heads_kv + hk) * c.d + x);
          if (g.dk[e] != 0.0f && diff++ == 0)
            first =
                at_of("dk", e, c.heads_kv, c.d) + " = " + fmt(g.dk[e]) + " for a key no query sees";
        }
        for (std::int64_t x = 0; x < c.dv; ++x) {
          const std::size_t e = static_cast<std::size_t>((r0 * c.heads_kv + hk) * c.dv + x);
          if (g.dv[e] != 0.0f && diff++ == 0)
            first = at_of("dv", e, c.heads_kv, c.dv) + " = " + fmt(g.dv[e]) +
                    " for a key no query sees";
        }
      }
    auto same = [&](const std::vector<float>& a, const std::vector<float>& b, const char* what,
                    std::int64_t heads, std::int64_t dim) {
      for (std::size_t e = 0; e < a.size(); ++e)
        if (std::memcmp(&a[e], &b[e], 4) != 0 && diff++ == 0)
          first = at_of(what, e, heads, dim) + ": " + fmt(a[e]) + " became " + fmt(b[e]) +
                  " after NaN was put in hidden keys and values";
    };
    same(g.dq, pg.dq, "dq", c.heads_q, c.d);
    same(g.dk, pg.dk, "dk", c.heads_kv, c.d);
    same(g.dv, pg.dv, "dv", c.heads_kv, c.dv);
    Check ch = make_check(static_cast<double>(diff), 0.0,
                          diff ? first : "hidden keys: zero gradients, no leak");
    ch.unit = "gradients wrong or changed";
    res = ch;
  }
}

}  // namespace

void run_backward(const Run& run, DType t) {
  for (Op op : {Op::softmax_backward, Op::log_softmax_backward})
    if (run.wants_op(op)) run_row_backward(run, op, t);
}

// The attention_backward properties, one row each in the order of their
// verdicts: the registry id (properties/suite.cpp: claim, rule, unit), the
// function judging one case, and which cases it applies to (nullptr: every
// case). The cuDNN convention is opt-in: it runs (and is reported) only when
// its rule is named in config.rules.
struct BackwardProperty {
  const char* id;
  void (*judge)(const BwdCtx&, Check&);
  bool (*applies)(const BwdCtx&);
};
bool low_precision(const BwdCtx& cx) { return cx.t != AttnType::float32; }
const BackwardProperty kAttentionBackward[] = {
    {"attention_backward.rounding", grad_rounding, nullptr},
    {"attention_backward.flash_attention_3x", flash_attention_3x, low_precision},
    {"attention_backward.gqa_group_sum", gqa_group_sum,
     [](const BwdCtx& cx) { return cx.c.heads_kv < cx.c.heads_q; }},
    {"attention_backward.masked_zero", masked_zero, nullptr},
    {"attention_backward.no_nan", no_nan, nullptr},
    {"attention_backward.cudnn_frontend", cudnn_frontend, low_precision},
};

void run_attention_backward(const Run& run) {
  const Kernel& k = run.kernel;
  if (!run.wants_op(Op::attention_backward)) return;
  constexpr int kSlots = static_cast<int>(std::size(kAttentionBackward));
  const bool want_cudnn = run.wants_rule("cudnn_frontend_bwd") &&
                          run.wants_property("attention_backward.cudnn_frontend");
  auto wanted = [&](int s) {
    const BackwardProperty& b = kAttentionBackward[s];
    return b.judge == cudnn_frontend ? want_cudnn : run.wants_property(b.id);
  };
  bool any = false;
  for (int s = 0; s < kSlots; ++s) any = any || wanted(s);
  if (!any) return;
  const std::vector<AttnType> types = attention_backward_types(run);
  if (k.abi_version() < 2 || !k.supports(Op::attention_backward)) {
    for (AttnType t : types)
      for (int s = 0; s < kSlots; ++s) {
        if (!wanted(s)) continue;
        const BackwardProperty& b = kAttentionBackward[s];
        Verdict v = skip_verdict(run, b.id, claim_of(b.id), rule_of(b.id), Op::attention_backward,
                                 dtype_of(t),
                                 "not applicable: the kernel implements no attention_backward");
        run.emit(v);
      }
    return;
  }
  for (AttnType t : types) {
    NaLog na;
    const bool low = t != AttnType::float32;
    const DType dt = dtype_of(t);
    const std::string prop = std::string("attention_backward[") + name_of(t) + "]";
    std::function<std::vector<Check>(const BwdParams&)> eval = [&](const BwdParams& p) {
      std::vector<Check> cs(kSlots);
      std::vector<float> dout;
      const AttentionCase c = make_case(p, t, &dout);
      if (const std::string why = k.why_not_applicable_backward(c); !why.empty()) {
        na.add(why);
        return cs;
      }
      run.before(prop, describe(p));
      const ref::AttentionGradients r = ref::attention_backward(c, dout);
      std::vector<float> out, lse;
      given_forward(c, r, &out, &lse);
      std::vector<float> lse_k;  // what the kernel is handed (its convention)
      std::vector<double> lse_b, lse_x;
      hand_lse(c, r, lse, &lse_k, &lse_b, &lse_x);
      const AttentionBackwardResult g = k.attention_backward(c, out, lse_k, dout);
      const GradBudgets gb = grad_budgets(c, dout, r, out, lse_b, lse_x);
      const BwdCtx cx{run, k, t, dt, c, dout, r, out, lse_k, lse_b, lse_x, g, gb};
      // Each property that applies to the case judges it into its slot.
      for (int s = 0; s < kSlots; ++s) {
        const BackwardProperty& b = kAttentionBackward[s];
        if (b.judge == cudnn_frontend ? !want_cudnn : false) continue;
        if (b.applies && !b.applies(cx)) continue;
        b.judge(cx, cs[static_cast<std::size_t>(s)]);
      }
      return cs;
    };
    SearchOptions so;
    so.shrink_pool = &run.shrink_pool;
    so.cases = std::max(6, run.config.cases / 8);
    so.seed = run.seed ^ 0xbac4 ^ (static_cast<std::uint64_t>(t) * 0x9e37);
    auto res = search<BwdParams>(gen_bwd(run.config.attention), kSlots, so, eval);
    for (int s = 0; s < kSlots; ++s) {
      if (!wanted(s)) continue;
      const BackwardProperty& b = kAttentionBackward[s];
      if (b.judge == flash_attention_3x && !low) {
        run.emit(skip_verdict(run, b.id, claim_of(b.id), rule_of(b.id), Op::attention_backward, dt,
                              "not applicable: FlashAttention's rule is stated for bfloat16 and "
                              "float16 (float32 is held to attention_backward.rounding)"));
        continue;
      }
      if (b.judge == cudnn_frontend && !low) {
        run.emit(skip_verdict(run, b.id, claim_of(b.id), rule_of(b.id), Op::attention_backward, dt,
                              "not applicable: cuDNN frontend's SDPA backward tests cover "
                              "float16 and bfloat16 only"));
        continue;
      }
      Verdict v =
          slot_verdict<BwdParams>(run, b.id, claim_of(b.id), rule_of(b.id), Op::attention_backward,
                                  dt, res[static_cast<std::size_t>(s)], [t](const BwdParams& p) {
                                    // The inputs inline when small (inline_inputs.hpp).
                                    try {
                                      std::vector<float> dout;
                                      const AttentionCase c = make_case(p, t, &dout);
                                      return describe(p) + inline_inputs(c, &dout);
                                    } catch (const std::exception&) {
                                      return describe(p);
                                    }
                                  });
      if (res[static_cast<std::size_t>(s)].cases_applicable == 0 && v.outcome == Outcome::skip)
        v.note = "not applicable: " + (na.count ? na.text() : std::string("no case applied"));
      else if (na.count)
        v.note += (v.note.empty() ? "" : "; ") + na.text();
      run.emit(v);
    }
    run.tick(kAttentionBackwardTypeUnits);
  }
}

std::vector<AttnType> attention_backward_types(const Run& run) {
  return props::attention_backward_types(run.config);
}

}  // namespace sa::props::detail

namespace sa::props {

std::vector<AttnType> attention_backward_types(const SuiteConfig& config) {
  std::vector<AttnType> types;
  if (config.dtypes.empty())
    types = {AttnType::float32, AttnType::bfloat16, AttnType::float16};
  else
    for (DType t : config.dtypes)
      if (t != DType::float64)
        types.push_back(t == DType::bfloat16  ? AttnType::bfloat16
                        : t == DType::float16 ? AttnType::float16
                                              : AttnType::float32);
  return types;
}

}  // namespace sa::props
