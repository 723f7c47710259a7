// CPU flash-style attention forward; see attention.hpp for the algorithm and
// its accuracy. This file is compiled once per Highway target
// (foreach_target.h); the target-independent part is guarded below.
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/isa_limit.hpp"

#ifndef SA_KERNELS_CPU_ATTENTION_COMMON
#define SA_KERNELS_CPU_ATTENTION_COMMON

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "kernels/cpu/attention_decode.hpp"
#include "kernels/cpu/attention_detail.hpp"
#include "theory/adaptive_temperature.hpp"
#include "theory/streamed_entropy.hpp"

namespace sa::kernels::attn_detail {

// Everything one call needs, shared read-only by the work items, plus the
// per-(part, query) partial results they write (disjoint entries).
struct Plan {
  sa_dtype dtype = SA_F32;  // of q, k and v
  std::int64_t nq = 0, nk = 0, d = 0, dv = 0, dvp = 0;
  std::int64_t off = 0;           // query i's diagonal key is i + off
  std::int64_t wl = -1, wr = -1;  // window bounds (-1 unbounded; causal is wr = 0)
  float softcap = 0.0f;           // 0: none
  bool alibi = false;
  float alibi_slope = 0.0f;
  bool sink = false;  // a finite sink logit (part 0 starts from it)
  float sink_logit = 0.0f;
  const void* q = nullptr;
  std::int64_t q_stride = 0;
  const void* k = nullptr;
  std::int64_t k_stride = 0;
  const void* v = nullptr;
  std::int64_t v_stride = 0;
  const std::uint8_t* key_mask = nullptr;
  const std::uint8_t* elem_mask = nullptr;  // AttentionHeadArgs' elem_mask and bias
  std::int64_t elem_mask_stride = 0;
  const float* bias = nullptr;
  std::int64_t bias_sq = 0, bias_sk = 0;
  double scale = 1.0;
  std::int64_t ntiles = 0, ns = 1;
  std::int64_t bq = kMaxBq;   // query rows per work item (<= kMaxBq, multiple of 4)
  const float* kp = nullptr;  // ntiles x d x Bk (transposed, zero padded)
  const float* vp = nullptr;  // ntiles x Bk x dvp (zero padded)
  const std::int32_t* tile_unmasked = nullptr;  // keys with key_mask != 0 per tile (Bk if no mask)
  const std::uint8_t* tile_v_nonfinite = nullptr;
  const float* beta = nullptr;  // nq row betas for the output pass (nullptr: 1)
  // partial results, index p * nq + i (po: (p * nq + i) * dv)
  float* pm = nullptr;
  float* pS = nullptr;
  float* pT = nullptr;
  std::uint8_t* pspecial = nullptr;
  float* plse = nullptr;
  float* po = nullptr;

  std::int64_t part_begin(std::int64_t p) const { return p * nk / ns; }
};

struct Scratch {
  std::vector<float> qb, sb, pb, o, brow;
  float m[kMaxBq], S[kMaxBq], T[kMaxBq], a[kMaxBq];
  std::uint8_t special[kMaxBq];
  void reserve(const Plan& pl) {
    qb.assign(static_cast<std::size_t>(pl.bq * pl.d), 0.0f);
    sb.assign(static_cast<std::size_t>(pl.bq * Bk), 0.0f);
    pb.assign(static_cast<std::size_t>(pl.bq * Bk), 0.0f);
    o.assign(static_cast<std::size_t>(pl.bq * pl.dvp), 0.0f);
    brow.assign(pl.bias ? static_cast<std::size_t>(Bk) : 0, 0.0f);
  }
};

}  // namespace sa::kernels::attn_detail

#endif  // SA_KERNELS_CPU_ATTENTION_COMMON

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

#include "kernels/cpu/attention_tile-inl.h"

HWY_BEFORE_NAMESPACE();
namespace sa::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace sa::kernels::attn_detail;

// S[r][j] = sum_c Q[r][c] Kt[c][j] for 4-row groups, all Bk columns.
// Float32 FMA accumulation in the order c = 0..d-1 (a length-d recursive sum
// per logit: error <= gamma_d sum_c |q_c k_c|).
HWY_INLINE void LogitsTile(const float* HWY_RESTRICT qb, std::int64_t d,
                           const float* HWY_RESTRICT kt, float* HWY_RESTRICT sb,
                           std::int64_t rows_pad) {
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  for (std::int64_t r0 = 0; r0 < rows_pad; r0 += 4) {
    for (std::int64_t c0 = 0; c0 < Bk; c0 += kNV * L) {
      V acc[4][kNV];
      for (int r = 0; r < 4; ++r)
        for (int v = 0; v < kNV; ++v) acc[r][v] = hn::Zero(df);
      const float* q0 = qb + (r0 + 0) * d;
      const float* q1 = qb + (r0 + 1) * d;
      const float* q2 = qb + (r0 + 2) * d;
      const float* q3 = qb + (r0 + 3) * d;
      for (std::int64_t c = 0; c < d; ++c) {
        V kv[kNV];
        for (int v = 0; v < kNV; ++v) kv[v] = hn::LoadU(df, kt + c * Bk + c0 + v * L);
        const V a0 = hn::Set(df, q0[c]), a1 = hn::Set(df, q1[c]);
        const V a2 = hn::Set(df, q2[c]), a3 = hn::Set(df, q3[c]);
        for (int v = 0; v < kNV; ++v) {
          acc[0][v] = hn::MulAdd(a0, kv[v], acc[0][v]);
          acc[1][v] = hn::MulAdd(a1, kv[v], acc[1][v]);
          acc[2][v] = hn::MulAdd(a2, kv[v], acc[2][v]);
          acc[3][v] = hn::MulAdd(a3, kv[v], acc[3][v]);
        }
      }
      for (int r = 0; r < 4; ++r)
        for (int v = 0; v < kNV; ++v) hn::StoreU(acc[r][v], df, sb + (r0 + r) * Bk + c0 + v * L);
    }
  }
}

// One work item: query block qb against key part `part`. with_output = false
// streams (m, S, T) only (adaptive pass 1). Writes the part's partial results.
void RunItem(const Plan& pl, std::int64_t qb, std::int64_t part, bool with_output, Scratch& sc) {
  const std::int64_t Bq = pl.bq;
  const std::int64_t i0 = qb * Bq;
  const std::int64_t i1 = std::min(pl.nq, i0 + Bq);
  const std::int64_t rows = i1 - i0;
  const std::int64_t rows_pad = (rows + 3) / 4 * 4;
  const std::int64_t d = pl.d, dvp = pl.dvp;

  // Query block in float (exact widening), padded rows zero.
  std::fill(sc.qb.begin(), sc.qb.end(), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    load_row(pl.q, pl.dtype, (i0 + r) * pl.q_stride, d, sc.qb.data() + r * d);
  // Scores: s = coef q.k, then softcap, ALiBi and the factor post (kernel.h's
  // order; beta multiplies the finished score). Without softcap and ALiBi
  // beta joins the scale in one rounding.
  const bool post_ops = pl.softcap > 0.0f || pl.alibi || pl.bias;
  float coef[kMaxBq], post[kMaxBq];
  for (std::int64_t r = 0; r < Bq; ++r) {
    const double beta = (pl.beta && r < rows) ? static_cast<double>(pl.beta[i0 + r]) : 1.0;
    coef[r] = static_cast<float>(post_ops ? pl.scale : pl.scale * beta);
    post[r] = post_ops ? static_cast<float>(beta) : 1.0f;
    sc.m[r] = kNegInf;
    sc.S[r] = 0.0f;
    sc.T[r] = 0.0f;
    sc.a[r] = 1.0f;
    sc.special[r] = 0;
    // The sink is one more item with value 0: part 0 starts from it (m = sink,
    // S = exp(0) = 1, T = 0, O = 0), so it joins the max, S, T and the lse.
    if (pl.sink && part == 0) {
      sc.m[r] = static_cast<float>(beta) * pl.sink_logit;
      sc.S[r] = 1.0f;
    }
  }
  if (with_output) std::fill(sc.o.begin(), sc.o.end(), 0.0f);

  // Keys [kbeg, kend) of this part can be visible to some row of the block.
  const std::int64_t k0 = pl.part_begin(part), k1 = pl.part_begin(part + 1);
  std::int64_t kbeg = k0, kend = k1;
  if (pl.wr >= 0) kend = std::min(kend, (i1 - 1) + pl.off + pl.wr + 1);  // last row's bound + 1
  if (pl.wl >= 0) kbeg = std::max(kbeg, i0 + pl.off - pl.wl);            // first row's bound
  const std::int64_t min_hi = i0 + pl.off + pl.wr;        // smallest last visible key of a row
  const std::int64_t max_lo = (i1 - 1) + pl.off - pl.wl;  // largest first visible key of a row
  if (kend > kbeg) {
    const std::int64_t t0 = kbeg / Bk, t1 = (kend + Bk - 1) / Bk;
    for (std::int64_t t = t0; t < t1; ++t) {
      if (pl.tile_unmasked[t] == 0) continue;  // every key of the tile masked out
      const std::int64_t j0 = t * Bk;
      const std::int64_t lo = std::max(j0, kbeg) - j0, hi = std::min(j0 + Bk, kend) - j0;
      LogitsTile(sc.qb.data(), d, pl.kp + t * d * Bk, sc.sb.data(), rows_pad);
      const bool need_mask = lo > 0 || hi < Bk || pl.tile_unmasked[t] < Bk ||
                             (pl.wr >= 0 && j0 + Bk - 1 > min_hi) || (pl.wl >= 0 && j0 < max_lo);
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t diag = i0 + r + pl.off - j0;  // the row's diagonal column
        std::int64_t jl = lo, jh = hi;                   // visible columns [jl, jh)
        if (pl.wr >= 0) jh = std::min(jh, diag + pl.wr + 1);
        if (pl.wl >= 0) jl = std::max(jl, diag - pl.wl);
        const float* brow = nullptr;
        if (pl.bias) {  // the row's bias over the tile, 0 past the last key
          const float* src = pl.bias + (i0 + r) * pl.bias_sq;
          for (std::int64_t j = 0; j < Bk; ++j)
            sc.brow[j] = j0 + j < pl.nk ? src[(j0 + j) * pl.bias_sk] : 0.0f;
          brow = sc.brow.data();
        }
        FinishScores(sc.sb.data() + r * Bk, coef[r], post[r], pl.softcap, pl.alibi, pl.alibi_slope,
                     diag, need_mask, jl, jh, pl.key_mask ? pl.key_mask + j0 : nullptr, brow);
        if (pl.elem_mask) {
          const std::uint8_t* mrow = pl.elem_mask + (i0 + r) * pl.elem_mask_stride + j0;
          float* srow = sc.sb.data() + r * Bk;
          for (std::int64_t j = lo; j < hi; ++j)
            if (mrow[j] == 0) srow[j] = kNegInf;
        }
      }
      // Online-softmax update per row, against the running max.
      for (std::int64_t r = 0; r < rows_pad; ++r) {
        float* srow = sc.sb.data() + r * Bk;
        float* prow = sc.pb.data() + r * Bk;
        if (r >= rows) {
          sc.a[r] = 1.0f;
          if (with_output) std::fill(prow, prow + Bk, 0.0f);
          std::fill(srow, srow + Bk, kNegInf);
          continue;
        }
        OnlineRow(srow, prow, with_output, sc.m[r], sc.S[r], sc.T[r], sc.a[r], sc.special[r]);
      }
      if (!with_output) continue;
      const float* vt = pl.vp + t * Bk * dvp;
      if (!pl.tile_v_nonfinite[t]) {
        PvTile(sc.pb.data(), vt, dvp, sc.o.data(), sc.a, rows_pad, lo, hi);
      } else {
        // v holds NaN/inf here: keys whose logit is -inf (masked) are skipped.
        PvTileNonFinite(sc.pb.data(), sc.sb.data(), vt, pl.dv, dvp, sc.o.data(), sc.a, sc.special,
                        rows, lo, hi);
      }
    }
  }
  // Partial results of this part.
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t idx = part * pl.nq + i0 + r;
    pl.pm[idx] = sc.m[r];
    pl.pS[idx] = sc.S[r];
    pl.pT[idx] = sc.T[r];
    pl.pspecial[idx] = sc.special[r];
    if (!with_output) continue;
    float* po = pl.po + idx * pl.dv;
    const float* orow = sc.o.data() + r * dvp;
    if (sc.special[r] || sc.m[r] == kNegInf) {
      std::fill(po, po + pl.dv, 0.0f);
      pl.plse[idx] = kNegInf;
    } else {
      const float S = sc.S[r];
      for (std::int64_t c = 0; c < pl.dv; ++c) po[c] = orow[c] / S;
      pl.plse[idx] = sc.m[r] + std::log(S);
    }
  }
}

}  // namespace sa::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sa::kernels {
HWY_EXPORT(RunItem);

namespace {
using namespace attn_detail;

std::atomic<std::int64_t> g_query_block{0};  // 0: automatic
thread_local std::string g_error;
thread_local bool g_has_error = false;

sa_status fail(sa_status s, std::string msg) {
  g_error = std::move(msg);
  g_has_error = true;
  return s;
}

// One row of the log-sum-exp merge, in double, rounded once per output.
void merge_row(std::int64_t dv, const float* oa, float la, const float* ob, float lb, float* out,
               float* lse) {
  const float inf = std::numeric_limits<float>::infinity();
  if (std::isnan(la) || std::isnan(lb)) {
    for (std::int64_t c = 0; c < dv; ++c) out[c] = std::numeric_limits<float>::quiet_NaN();
    *lse = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  double wa, wb;
  float L;
  if (la == -inf && lb == -inf) {
    for (std::int64_t c = 0; c < dv; ++c) out[c] = 0.0f;
    *lse = -inf;
    return;
  }
  if (la == inf && lb == inf) {
    wa = wb = 0.5;
    L = inf;
  } else if (lb == -inf || la == inf) {
    wa = 1.0, wb = 0.0;
    L = la;
  } else if (la == -inf || lb == inf) {
    wa = 0.0, wb = 1.0;
    L = lb;
  } else {
    const double mx = std::max<double>(la, lb);
    const double Ld = mx + std::log1p(std::exp(-std::abs(static_cast<double>(la) - lb)));
    wa = std::exp(la - Ld);
    wb = std::exp(lb - Ld);
    L = static_cast<float>(Ld);
  }
  for (std::int64_t c = 0; c < dv; ++c) {
    const double a = wa == 0.0 ? 0.0 : wa * oa[c];  // a part with no weight never touches its o
    const double b = wb == 0.0 ? 0.0 : wb * ob[c];
    out[c] = static_cast<float>(a + b);
  }
  *lse = L;
}

std::string num(std::int64_t x) { return std::to_string(x); }

sa_status validate(const sa_attention_args* a) {
  if (!a) return fail(SA_INVALID_ARGUMENT, "attention: args is NULL; expected a sa_attention_args");
  // A C caller may store any int in the enum; read its bits (in C++ an
  // out-of-range enum value is undefined behaviour).
  std::underlying_type_t<sa_dtype> dtype_bits;
  std::memcpy(&dtype_bits, &a->dtype, sizeof dtype_bits);
  if (dtype_bits != SA_F32 && dtype_bits != SA_BF16)
    return fail(SA_UNSUPPORTED, "attention: dtype " + num(static_cast<std::int64_t>(dtype_bits)) +
                                    " is not implemented; expected SA_F32 (1) or SA_BF16 (2)");
  const struct {
    const char* name;
    std::int64_t v;
  } sizes[] = {{"nq", a->nq}, {"nk", a->nk}, {"d", a->d}, {"dv", a->dv}};
  for (const auto& s : sizes)
    if (s.v < 1 || s.v > (std::int64_t{1} << 40))
      return fail(SA_INVALID_ARGUMENT, std::string("attention: ") + s.name + " = " + num(s.v) +
                                           "; expected 1 <= " + s.name + " <= 2^40");
  const struct {
    const char* name;
    const void* p;
  } ptrs[] = {{"q", a->q}, {"k", a->k}, {"v", a->v}, {"out", a->out}};
  for (const auto& p : ptrs)
    if (!p.p)
      return fail(SA_INVALID_ARGUMENT,
                  std::string("attention: ") + p.name + " is NULL; expected a host buffer");
  const struct {
    const char* name;
    std::int64_t stride, need;
    const char* need_name;
  } strides[] = {{"q_stride", a->q_stride, a->d, "d"},
                 {"k_stride", a->k_stride, a->d, "d"},
                 {"v_stride", a->v_stride, a->dv, "dv"},
                 {"out_stride", a->out_stride, a->dv, "dv"}};
  for (const auto& s : strides)
    if (s.stride < s.need || s.stride > (std::int64_t{1} << 40))
      return fail(SA_INVALID_ARGUMENT, std::string("attention: ") + s.name + " = " + num(s.stride) +
                                           " is below the row length " + s.need_name + " = " +
                                           num(s.need) +
                                           " (or above 2^40); expected >= " + s.need_name);
  if (!std::isfinite(a->scale))
    return fail(SA_INVALID_ARGUMENT, "attention: scale = " + std::to_string(a->scale) +
                                         " is not finite; expected a finite number");
  if (a->num_splits < 0)
    return fail(SA_INVALID_ARGUMENT, "attention: num_splits = " + num(a->num_splits) +
                                         "; expected >= 0 (0 or 1: no split)");
  return SA_OK;
}

// Runs fn(w) for w in [0, count) on the OpenMP team; returns false if any call threw.
template <class Fn>
bool parallel_for(std::int64_t count, Fn&& fn) {
  std::atomic<bool> ok{true};
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1)
#endif
  for (std::int64_t w = 0; w < count; ++w) {
    if (!ok.load(std::memory_order_relaxed)) continue;
    try {
      fn(w);
    } catch (...) {
      ok = false;
    }
  }
  return ok;
}

// Work items with per-thread scratch.
bool run_items(const Plan& pl, std::int64_t nqb, bool with_output) {
  std::atomic<bool> ok{true};
  const std::int64_t count = nqb * pl.ns;
#ifdef _OPENMP
#pragma omp parallel
#endif
  {
    Scratch sc;
    bool mine = true;
    try {
      sc.reserve(pl);
    } catch (...) {
      mine = false;
      ok = false;
    }
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (std::int64_t w = 0; w < count; ++w) {
      if (!mine) continue;
      // part-major within a query block keeps a block's parts on nearby items
      HWY_DYNAMIC_DISPATCH(RunItem)(pl, w / pl.ns, w % pl.ns, with_output, sc);
    }
  }
  return ok;
}

// Whether key j is visible to query i (kernel.h's masks).
bool visible(const AttentionHeadArgs& a, std::int64_t i, std::int64_t j) {
  if (a.key_mask && a.key_mask[j] == 0) return false;
  if (a.elem_mask && a.elem_mask[i * a.elem_mask_stride + j] == 0) return false;
  const std::int64_t diag = i + a.diag_offset;
  if (a.window_right >= 0 && j > diag + a.window_right) return false;
  if (a.window_left >= 0 && j < diag - a.window_left) return false;
  return true;
}

// The exact scalar path for a row with NaN or +inf scores or sink (or anything
// the vector path flagged): the header's special-value semantics, else a
// double precision two-pass softmax of the float32 scores.
void special_row(const AttentionHeadArgs& a, std::int64_t i, float* out, float* lse, float* H,
                 float* beta) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float finf = std::numeric_limits<float>::infinity();
  const double dinf = std::numeric_limits<double>::infinity();
  const float fscale = static_cast<float>(a.scale);
  const float cap = static_cast<float>(a.softcap);
  std::vector<double> s(static_cast<std::size_t>(a.nk), -dinf);
  std::vector<float> qrow(static_cast<std::size_t>(a.d)), krow(qrow.size());
  load_row(a.q, a.qkv_dtype, i * a.q_stride, a.d, qrow.data());
  bool any_nan = a.has_sink && std::isnan(a.sink);
  std::int64_t n_pinf = a.has_sink && a.sink == finf ? 1 : 0;  // the sink counts, has no value
  for (std::int64_t j = 0; j < a.nk; ++j) {
    if (!visible(a, i, j)) continue;
    load_row(a.k, a.qkv_dtype, kv_offset(a, false, j), a.d, krow.data());
    float dot = 0.0f;
    for (std::int64_t c = 0; c < a.d; ++c) dot = std::fma(qrow[c], krow[c], dot);
    float x = fscale * dot;
    if (cap > 0.0f) x = cap * std::tanh(x / cap);
    if (a.has_alibi) x -= a.alibi_slope * static_cast<float>(std::llabs(i + a.diag_offset - j));
    if (a.bias) x += a.bias[i * a.bias_stride_q + j * a.bias_stride_k];
    if (std::isnan(x)) any_nan = true;
    if (x == finf) ++n_pinf;
    s[j] = x;
  }
  auto vval = [&](std::int64_t j, std::int64_t c) {
    return static_cast<double>(load_elem(a.v, a.qkv_dtype, kv_offset(a, true, j) + c));
  };
  if (any_nan) {
    for (std::int64_t c = 0; c < a.dv; ++c) out[c] = nan;
    *lse = nan;
    *H = nan;
    *beta = a.adaptive ? nan : 1.0f;
    return;
  }
  if (n_pinf > 0) {
    for (std::int64_t c = 0; c < a.dv; ++c) {
      double acc = 0.0;
      for (std::int64_t j = 0; j < a.nk; ++j)
        if (s[j] == finf) acc += vval(j, c);
      out[c] = static_cast<float>(acc / static_cast<double>(n_pinf));
    }
    *lse = finf;
    *H = static_cast<float>(std::log(static_cast<double>(n_pinf)));
    *beta = a.adaptive
                ? static_cast<float>(theory::adaptive_beta(std::log(static_cast<double>(n_pinf))))
                : 1.0f;
    return;
  }
  const double sink = a.has_sink ? static_cast<double>(a.sink) : -dinf;  // -inf: no sink
  double m = sink;
  for (double x : s) m = std::max(m, x);
  if (m == -dinf) {
    for (std::int64_t c = 0; c < a.dv; ++c) out[c] = 0.0f;
    *lse = -finf;
    *H = 0.0f;
    *beta = 1.0f;
    return;
  }
  double S = 0, T = 0;
  auto add = [&](double x) {
    if (x == -dinf) return;
    const double e = std::exp(x - m);
    S += e;
    T += e * (x - m);
  };
  for (double x : s) add(x);
  add(sink);
  const double h = std::log(S) - T / S;
  const double b = a.adaptive ? theory::adaptive_beta(h) : 1.0;
  double S2 = sink == -dinf ? 0.0 : std::exp(b * (sink - m));
  std::vector<double> o(static_cast<std::size_t>(a.dv), 0.0);
  for (std::int64_t j = 0; j < a.nk; ++j) {
    if (s[j] == -dinf) continue;
    const double e = std::exp(b * (s[j] - m));
    S2 += e;
    for (std::int64_t c = 0; c < a.dv; ++c) o[c] += e * vval(j, c);
  }
  for (std::int64_t c = 0; c < a.dv; ++c) out[c] = static_cast<float>(o[c] / S2);
  *lse = static_cast<float>(b * m + std::log(S2));
  *H = static_cast<float>(h);
  *beta = static_cast<float>(b);
}

}  // namespace

void cpu_attention_special_row(const AttentionHeadArgs& a, std::int64_t i, float* out, float* lse,
                               float* H, float* beta) {
  special_row(a, i, out, lse, H, beta);
}

namespace {

sa_status run(const AttentionHeadArgs& a) {
  cpu::apply_cpu_isa_limit();  // SA_CPU_MAX_ISA, before the first dispatch
  Plan pl;
  pl.dtype = a.qkv_dtype;
  pl.nq = a.nq;
  pl.nk = a.nk;
  pl.d = a.d;
  pl.dv = a.dv;
  pl.dvp = (a.dv + kVecPad - 1) / kVecPad * kVecPad;
  pl.off = a.diag_offset;
  pl.wl = a.window_left;
  pl.wr = a.window_right;
  pl.softcap = static_cast<float>(a.softcap);
  pl.alibi = a.has_alibi;
  pl.alibi_slope = a.alibi_slope;
  pl.sink = a.has_sink && std::isfinite(a.sink);
  pl.sink_logit = a.sink;
  pl.q = a.q;
  pl.q_stride = a.q_stride;
  pl.k = a.k;
  pl.k_stride = a.k_stride;
  pl.v = a.v;
  pl.v_stride = a.v_stride;
  pl.key_mask = a.key_mask;
  pl.elem_mask = a.elem_mask;
  pl.elem_mask_stride = a.elem_mask_stride;
  pl.bias = a.bias;
  pl.bias_sq = a.bias_stride_q;
  pl.bias_sk = a.bias_stride_k;
  pl.scale = a.scale;
  pl.ntiles = (a.nk + Bk - 1) / Bk;
  pl.ns = std::clamp<std::int64_t>(a.num_splits, 1, std::min(a.nk, cpu_attention_max_splits));
  const bool adaptive = a.adaptive;
  // A NaN or +inf sink decides every row: the exact scalar path.
  const bool all_special = a.has_sink && (std::isnan(a.sink) || a.sink > 0 && std::isinf(a.sink));

  // Pack K (transposed per tile) and V (rows padded to dvp), widening bf16 exactly.
  std::vector<float> kp(static_cast<std::size_t>(pl.ntiles * pl.d * Bk), 0.0f);
  std::vector<float> vp(static_cast<std::size_t>(pl.ntiles * Bk * pl.dvp), 0.0f);
  std::vector<std::int32_t> unmasked(static_cast<std::size_t>(pl.ntiles), 0);
  std::vector<std::uint8_t> vbad(static_cast<std::size_t>(pl.ntiles), 0);
  const bool packed = parallel_for(pl.ntiles, [&](std::int64_t t) {
    float* kt = kp.data() + t * pl.d * Bk;
    float* vt = vp.data() + t * Bk * pl.dvp;
    std::int32_t count = 0;
    bool bad = false;
    for (std::int64_t jj = 0; jj < Bk; ++jj) {
      const std::int64_t j = t * Bk + jj;
      if (j >= pl.nk) break;
      if (!pl.key_mask || pl.key_mask[j] != 0) ++count;
      load_row(pl.k, pl.dtype, j * pl.k_stride, pl.d, kt + jj, Bk);
      float* vrow = vt + jj * pl.dvp;
      load_row(pl.v, pl.dtype, j * pl.v_stride, pl.dv, vrow);
      for (std::int64_t c = 0; c < pl.dv; ++c) bad = bad || !std::isfinite(vrow[c]);
    }
    // A tail tile's missing keys count as masked (count < Bk), so the tail
    // always takes the masked path in RunItem.
    unmasked[static_cast<std::size_t>(t)] = count;
    vbad[static_cast<std::size_t>(t)] = bad ? 1 : 0;
  });
  if (!packed) return fail(SA_INTERNAL_ERROR, "attention: packing K and V failed");
  pl.kp = kp.data();
  pl.vp = vp.data();
  pl.tile_unmasked = unmasked.data();
  pl.tile_v_nonfinite = vbad.data();

  const std::size_t nrow = static_cast<std::size_t>(pl.ns * pl.nq);
  std::vector<float> pm(nrow), pS(nrow), pT(nrow), plse(nrow);
  std::vector<std::uint8_t> pspecial(nrow);
  std::vector<float> po(nrow * static_cast<std::size_t>(pl.dv));
  pl.pm = pm.data();
  pl.pS = pS.data();
  pl.pT = pT.data();
  pl.plse = plse.data();
  pl.pspecial = pspecial.data();
  pl.po = po.data();
  // Large query blocks reuse each K/V tile more (memory traffic / 4 against 16
  // rows), small ones keep every thread busy when there are few queries.
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  const std::int64_t big_items = (pl.nq + kMaxBq - 1) / kMaxBq * pl.ns;
  pl.bq = big_items >= 2 * threads ? kMaxBq : cpu_attention_small_query_block;
  if (const std::int64_t forced = g_query_block.load(std::memory_order_relaxed)) pl.bq = forced;
  const std::int64_t nqb = (pl.nq + pl.bq - 1) / pl.bq;

  auto merged_state = [&](std::int64_t i, bool* special) {
    theory::EntropyState<float> st = theory::entropy_identity<float>();
    *special = false;
    for (std::int64_t p = 0; p < pl.ns; ++p) {
      const std::size_t idx = static_cast<std::size_t>(p * pl.nq + i);
      if (pspecial[idx]) *special = true;
      if (pm[idx] == kNegInf) continue;  // identity part
      st = theory::entropy_merge(st, theory::EntropyState<float>{pm[idx], pS[idx], pT[idx]});
    }
    return st;
  };

  // Pass 1 (adaptive only): (m, S, T) at beta = 1 -> H, beta(H).
  std::vector<float> H1, beta1;
  std::vector<std::uint8_t> special1;
  if (adaptive && !all_special) {
    if (!run_items(pl, nqb, false))
      return fail(SA_INTERNAL_ERROR, "attention: out of memory in pass 1");
    H1.resize(static_cast<std::size_t>(pl.nq));
    beta1.resize(static_cast<std::size_t>(pl.nq));
    special1.resize(static_cast<std::size_t>(pl.nq));
    for (std::int64_t i = 0; i < pl.nq; ++i) {
      bool sp = false;
      const auto st = merged_state(i, &sp);
      special1[i] = sp;
      H1[i] = theory::entropy_of(st);
      beta1[i] = sp ? 1.0f : static_cast<float>(theory::adaptive_beta(static_cast<double>(H1[i])));
    }
    pl.beta = beta1.data();
  }
  // Pass 2: the output pass.
  if (!all_special && !run_items(pl, nqb, true))
    return fail(SA_INTERNAL_ERROR, "attention: out of memory in pass 2");

  // Merge the parts and write the outputs.
  const bool finished = parallel_for(pl.nq, [&](std::int64_t i) {
    std::vector<float> row(static_cast<std::size_t>(pl.dv));
    float lse = kNegInf, H = 0.0f, beta = 1.0f;
    bool sp = false;
    const auto st = merged_state(i, &sp);
    if (all_special || (adaptive && special1[i])) sp = true;
    if (sp) {
      special_row(a, i, row.data(), &lse, &H, &beta);
    } else {
      std::copy_n(po.data() + i * pl.dv, pl.dv, row.data());
      lse = plse[static_cast<std::size_t>(i)];
      for (std::int64_t p = 1; p < pl.ns; ++p) {
        const std::size_t idx = static_cast<std::size_t>(p * pl.nq + i);
        merge_row(pl.dv, row.data(), lse, po.data() + idx * pl.dv, plse[idx], row.data(), &lse);
      }
      H = adaptive ? H1[i] : theory::entropy_of(st);
      beta = adaptive ? beta1[i] : 1.0f;
    }
    store_row(a, i, row.data(), lse, H, beta);
  });
  if (!finished) return fail(SA_INTERNAL_ERROR, "attention: out of memory writing the outputs");
  return SA_OK;
}

}  // namespace

sa_status cpu_attention_head(const AttentionHeadArgs& args) {
  if (args.pages)  // the tiled path reads K and V rows k_stride apart only
    return fail(SA_INTERNAL_ERROR, "attention: paged K and V reach the tiled path");
  try {
    return run(args);
  } catch (const std::bad_alloc&) {
    return fail(SA_INTERNAL_ERROR, "attention: out of memory (nk = " + num(args.nk) +
                                       ", nq = " + num(args.nq) +
                                       ", num_splits = " + num(args.num_splits) + ")");
  } catch (const std::exception& e) {
    return fail(SA_INTERNAL_ERROR, std::string("attention: ") + e.what());
  }
}

sa_status cpu_attention(void* /*ctx*/, const sa_attention_args* args) {
  const sa_status s = validate(args);
  if (s != SA_OK) return s;
  AttentionHeadArgs h;
  h.qkv_dtype = h.out_dtype = args->dtype;
  h.nq = args->nq;
  h.nk = args->nk;
  h.d = args->d;
  h.dv = args->dv;
  h.q = args->q;
  h.q_stride = args->q_stride;
  h.k = args->k;
  h.k_stride = args->k_stride;
  h.v = args->v;
  h.v_stride = args->v_stride;
  h.out = args->out;
  h.out_stride = args->out_stride;
  h.lse = args->lse;
  h.entropy = args->entropy;
  h.beta = args->beta;
  h.key_mask = args->key_mask;
  h.scale = args->scale;
  h.diag_offset = args->nk - args->nq;
  h.window_right = args->causal ? 0 : -1;
  h.adaptive = args->adaptive != 0;
  h.num_splits = args->num_splits;
  try {
    // Few queries, no split asked for: the few-query path (attention_decode.hpp),
    // K and V read in place, keys split over the threads.
    if (h.nq <= cpu_attention_decode_max_rows && h.num_splits <= 1) {
      const std::size_t starts[2] = {0, 1};
      if (cpu_attention_decode(&h, starts, 1) != SA_OK)
        return fail(SA_INTERNAL_ERROR, "attention: out of memory in the few-query path (nk = " +
                                           num(args->nk) + ", nq = " + num(args->nq) + ")");
      return SA_OK;
    }
    return run(h);
  } catch (const std::bad_alloc&) {
    return fail(SA_INTERNAL_ERROR, "attention: out of memory (nk = " + num(args->nk) +
                                       ", nq = " + num(args->nq) +
                                       ", num_splits = " + num(args->num_splits) + ")");
  } catch (const std::exception& e) {
    return fail(SA_INTERNAL_ERROR, std::string("attention: ") + e.what());
  }
}

sa_status merge_attention_partials(void* /*ctx*/, std::int64_t rows, std::int64_t dv,
                                   const float* o_a, const float* lse_a, const float* o_b,
                                   const float* lse_b, float* out, float* out_lse) {
  if (rows < 0)
    return fail(SA_INVALID_ARGUMENT,
                "merge_attention_states: rows = " + num(rows) + "; expected >= 0");
  if (dv < 1)
    return fail(SA_INVALID_ARGUMENT, "merge_attention_states: dv = " + num(dv) + "; expected >= 1");
  if (rows == 0) return SA_OK;
  const struct {
    const char* name;
    const void* p;
  } ptrs[] = {{"o_a", o_a},     {"lse_a", lse_a}, {"o_b", o_b},
              {"lse_b", lse_b}, {"out", out},     {"out_lse", out_lse}};
  for (const auto& p : ptrs)
    if (!p.p)
      return fail(SA_INVALID_ARGUMENT, std::string("merge_attention_states: ") + p.name +
                                           " is NULL; expected a host buffer");
  for (std::int64_t r = 0; r < rows; ++r) {
    const float la = lse_a[r], lb = lse_b[r];  // read before out_lse (may alias) is written
    merge_row(dv, o_a + r * dv, la, o_b + r * dv, lb, out + r * dv, out_lse + r);
  }
  return SA_OK;
}

bool cpu_attention_set_query_block(std::int64_t rows) {
  if (rows != 0 && (rows < 4 || rows > kMaxBq || rows % 4 != 0)) return false;
  g_query_block.store(rows, std::memory_order_relaxed);
  return true;
}

const char* cpu_attention_last_error() { return g_has_error ? g_error.c_str() : nullptr; }

}  // namespace sa::kernels
#endif  // HWY_ONCE
