// The CPU attention's few-query path; see attention_decode.hpp. This file is
// compiled once per Highway target (foreach_target.h); the target-independent
// part is guarded below.
#include "kernels/cpu/attention_decode.hpp"
#include "kernels/cpu/isa_limit.hpp"

#ifndef SA_KERNELS_CPU_ATTENTION_DECODE_COMMON
#define SA_KERNELS_CPU_ATTENTION_DECODE_COMMON

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "kernels/cpu/attention_detail.hpp"
#include "theory/adaptive_temperature.hpp"
#include "theory/streamed_entropy.hpp"

namespace sa::kernels::attn_detail {

// One group's rows: row r is query r % nq of head r / nq.
struct DecodeScratch {
  std::int64_t dpad = 0, dvp = 0, rows = 0, rows_pad = 0;
  std::vector<float> qb;    // rows_pad x dpad, zero padded
  std::vector<float> krow;  // dpad: one key widened to float, zero padded
  std::vector<float> sb;    // rows_pad x Bk scores
  std::vector<float> pb;    // rows_pad x Bk weights
  std::vector<float> vt;    // Bk x dvp: the tile's values widened, zero padded
  std::vector<float> o;     // rows_pad x dvp accumulators
  float m[kMaxBq], S[kMaxBq], T[kMaxBq], a[kMaxBq], beta[kMaxBq];
  std::uint8_t special[kMaxBq];

  void reserve(std::int64_t nrows, std::int64_t d, std::int64_t dv) {
    rows = nrows;
    rows_pad = (nrows + 3) / 4 * 4;
    dpad = (d + kVecPad - 1) / kVecPad * kVecPad;
    dvp = (dv + kVecPad - 1) / kVecPad * kVecPad;
    qb.assign(static_cast<std::size_t>(rows_pad * dpad), 0.0f);
    krow.assign(static_cast<std::size_t>(dpad), 0.0f);
    sb.resize(static_cast<std::size_t>(rows_pad * Bk));
    pb.resize(static_cast<std::size_t>(rows_pad * Bk));
    vt.assign(static_cast<std::size_t>(Bk * dvp), 0.0f);
    o.resize(static_cast<std::size_t>(rows_pad * dvp));
  }
};

// Keys ahead that the few-query path prefetches (K and V rows).
constexpr std::int64_t kPrefetch = 8;

inline std::int64_t elem_bytes(sa_dtype t) {
  return t == SA_F32 ? 4 : t == SA_BF16 || t == SA_F16 ? 2 : 1;
}

// Every cache line of bytes [off, off + n) of base.
inline void prefetch_row(const void* base, std::int64_t off, std::int64_t n) {
  const char* p = static_cast<const char*>(base) + off;
  for (std::int64_t b = 0; b < n; b += 64) __builtin_prefetch(p + b, 0, 1);
}

// The largest |x| of n floats as a bit pattern (inf: 0x7f800000, NaN above).
inline std::uint32_t abs_bits_max(const float* x, std::int64_t n) {
  std::uint32_t m = 0;
  for (std::int64_t c = 0; c < n; ++c) {
    std::uint32_t b;
    std::memcpy(&b, x + c, 4);
    m = std::max(m, b & 0x7fffffffu);
  }
  return m;
}

}  // namespace sa::kernels::attn_detail

#endif  // SA_KERNELS_CPU_ATTENTION_DECODE_COMMON

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/attention_decode.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/cpu/attention_tile-inl.h"
#include "kernels/cpu/vec_load_store-inl.h"

HWY_BEFORE_NAMESPACE();
namespace sa::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace sa::kernels::attn_detail;

// n elements of type t from element idx of base, widened to float into dst:
// bfloat16 and float16 a vector at a time (vec_load_store-inl.h's exact
// conversions: a shift; F16C or the portable rebias), the tail and fp8 by
// load_row. The same values as load_row for every encoding. (float16 widened
// one element at a time made decoding 10 times slower than reading K and V.)
HWY_INLINE void WidenRow(const void* base, sa_dtype t, std::int64_t idx, std::int64_t n,
                         float* HWY_RESTRICT dst) {
  namespace cv = sa::kernels::cpu::HWY_NAMESPACE;
  const cv::DF df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t c = 0;
  const std::uint16_t* p = static_cast<const std::uint16_t*>(base) + idx;
  if (t == SA_BF16)
    for (; c + L <= n; c += L) hn::StoreU(cv::LoadF(df, p + c), df, dst + c);
  else if (t == SA_F16)
    for (; c + L <= n; c += L) hn::StoreU(cv::LoadF16(df, p + c), df, dst + c);
  if (c < n) load_row(base, t, idx + c, n - c, dst + c);
}

// sb[r][jj] = q_r . k for rows [0, rows_pad) (padded rows are zero), float32
// FMA per lane over the first dfull = d - d % L columns, lanes summed, then
// the remaining columns added in order. k points at d floats.
HWY_INLINE void DotKey(const float* HWY_RESTRICT qb, std::int64_t dpad, std::int64_t d,
                       const float* HWY_RESTRICT k, float* HWY_RESTRICT sb, std::int64_t jj,
                       std::int64_t rows_pad) {
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const std::int64_t dfull = d / L * L;
  for (std::int64_t r0 = 0; r0 < rows_pad; r0 += 4) {
    const float* q0 = qb + (r0 + 0) * dpad;
    const float* q1 = qb + (r0 + 1) * dpad;
    const float* q2 = qb + (r0 + 2) * dpad;
    const float* q3 = qb + (r0 + 3) * dpad;
    V a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
    for (std::int64_t c = 0; c < dfull; c += L) {
      const V kv = hn::LoadU(df, k + c);
      a0 = hn::MulAdd(hn::LoadU(df, q0 + c), kv, a0);
      a1 = hn::MulAdd(hn::LoadU(df, q1 + c), kv, a1);
      a2 = hn::MulAdd(hn::LoadU(df, q2 + c), kv, a2);
      a3 = hn::MulAdd(hn::LoadU(df, q3 + c), kv, a3);
    }
    float s0 = hn::GetLane(hn::SumOfLanes(df, a0)), s1 = hn::GetLane(hn::SumOfLanes(df, a1));
    float s2 = hn::GetLane(hn::SumOfLanes(df, a2)), s3 = hn::GetLane(hn::SumOfLanes(df, a3));
    for (std::int64_t c = dfull; c < d; ++c) {
      s0 = std::fma(q0[c], k[c], s0);
      s1 = std::fma(q1[c], k[c], s1);
      s2 = std::fma(q2[c], k[c], s2);
      s3 = std::fma(q3[c], k[c], s3);
    }
    sb[(r0 + 0) * Bk + jj] = s0;
    sb[(r0 + 1) * Bk + jj] = s1;
    sb[(r0 + 2) * Bk + jj] = s2;
    sb[(r0 + 3) * Bk + jj] = s3;
  }
}

// One pass over the group's keys: (m, S, T) per row, and with with_output the
// rows' unnormalised O. use_beta: rows scale their scores by sc.beta[r]
// (adaptive temperature's second pass); otherwise beta = 1.
void DecodePass(const AttentionHeadArgs* heads, bool use_beta, bool with_output,
                DecodeScratch& sc) {
  const AttentionHeadArgs& a0 = heads[0];
  const std::int64_t nq = a0.nq, nk = a0.nk, d = a0.d, dv = a0.dv;
  const std::int64_t rows = sc.rows, rows_pad = sc.rows_pad, dpad = sc.dpad, dvp = sc.dvp;
  const std::int64_t off = a0.diag_offset, wl = a0.window_left, wr = a0.window_right;
  const float softcap = static_cast<float>(a0.softcap);
  const bool post_ops = softcap > 0.0f || a0.has_alibi;
  float coef[kMaxBq], post[kMaxBq];
  for (std::int64_t r = 0; r < rows; ++r) {
    const AttentionHeadArgs& h = heads[r / nq];
    const double beta = use_beta ? static_cast<double>(sc.beta[r]) : 1.0;
    coef[r] = static_cast<float>(post_ops ? a0.scale : a0.scale * beta);
    post[r] = post_ops ? static_cast<float>(beta) : 1.0f;
    sc.m[r] = kNegInf;
    sc.S[r] = 0.0f;
    sc.T[r] = 0.0f;
    sc.a[r] = 1.0f;
    // A NaN or +inf sink decides the row: the exact scalar path.
    sc.special[r] = h.has_sink && (std::isnan(h.sink) || h.sink > 0 && std::isinf(h.sink)) ? 1 : 0;
    // A finite sink is one more item with value 0 (m = beta sink, S = 1, T = 0, O = 0).
    if (h.has_sink && std::isfinite(h.sink)) {
      sc.m[r] = static_cast<float>(beta) * h.sink;
      sc.S[r] = 1.0f;
    }
  }
  if (with_output) std::fill(sc.o.begin(), sc.o.end(), 0.0f);

  // Keys [kbeg, kend) can be visible to some query; query i sees
  // [i + off - wl, i + off + wr] (unbounded sides when -1) and the key mask.
  std::int64_t kbeg = 0, kend = nk;
  if (wr >= 0) kend = std::min(kend, (nq - 1) + off + wr + 1);
  if (wl >= 0) kbeg = std::max(kbeg, off - wl);
  const std::int64_t min_hi = off + wr, max_lo = (nq - 1) + off - wl;
  const bool f32 = a0.qkv_dtype == SA_F32;
  const std::int64_t esize = elem_bytes(a0.qkv_dtype);
  for (std::int64_t t = std::max<std::int64_t>(kbeg, 0) / Bk; t * Bk < kend; ++t) {
    const std::int64_t j0 = t * Bk;
    const std::int64_t lo = std::max(j0, kbeg) - j0, hi = std::min(j0 + Bk, kend) - j0;
    bool any_key = false, all_keys = true;
    for (std::int64_t jj = lo; jj < hi; ++jj) {
      const bool on = !a0.key_mask || a0.key_mask[j0 + jj] != 0;
      any_key = any_key || on;
      all_keys = all_keys && on;
    }
    if (!any_key) continue;  // every key of the tile masked out
    // Raw dot products; columns outside [lo, hi) and masked keys hold 0 until
    // FinishScores masks them (so no -inf is ever scaled).
    for (std::int64_t r = 0; r < rows_pad; ++r)
      std::fill(sc.sb.data() + r * Bk, sc.sb.data() + (r + 1) * Bk, 0.0f);
    for (std::int64_t jj = lo; jj < hi; ++jj) {
      // Rows of one key/value head are strided (BSHD: heads_kv * d apart), which
      // the hardware prefetcher follows poorly: ask for keys kPrefetch ahead.
      if (j0 + jj + kPrefetch < nk)
        prefetch_row(a0.k, (j0 + jj + kPrefetch) * a0.k_stride * esize, d * esize);
      if (a0.key_mask && a0.key_mask[j0 + jj] == 0) continue;
      const float* k;
      if (f32) {
        k = static_cast<const float*>(a0.k) + (j0 + jj) * a0.k_stride;
      } else {
        WidenRow(a0.k, a0.qkv_dtype, (j0 + jj) * a0.k_stride, d, sc.krow.data());
        k = sc.krow.data();
      }
      DotKey(sc.qb.data(), dpad, d, k, sc.sb.data(), jj, rows_pad);
    }
    const bool need_mask = lo > 0 || hi < Bk || !all_keys || (wr >= 0 && j0 + Bk - 1 > min_hi) ||
                           (wl >= 0 && j0 < max_lo);
    for (std::int64_t r = 0; r < rows; ++r) {
      const AttentionHeadArgs& h = heads[r / nq];
      const std::int64_t diag = r % nq + off - j0;  // the row's diagonal column
      std::int64_t jl = lo, jh = hi;
      if (wr >= 0) jh = std::min(jh, diag + wr + 1);
      if (wl >= 0) jl = std::max(jl, diag - wl);
      FinishScores(sc.sb.data() + r * Bk, coef[r], post[r], softcap, h.has_alibi, h.alibi_slope,
                   diag, need_mask, jl, jh, a0.key_mask ? a0.key_mask + j0 : nullptr);
    }
    for (std::int64_t r = 0; r < rows_pad; ++r) {
      float* srow = sc.sb.data() + r * Bk;
      float* prow = sc.pb.data() + r * Bk;
      if (r >= rows) {
        sc.a[r] = 1.0f;
        if (with_output) std::fill(prow, prow + Bk, 0.0f);
        continue;
      }
      OnlineRow(srow, prow, with_output, sc.m[r], sc.S[r], sc.T[r], sc.a[r], sc.special[r]);
    }
    if (!with_output) continue;
    std::uint32_t vmax = 0;  // largest |v| bit pattern: >= 0x7f800000 for inf and NaN
    for (std::int64_t jj = lo; jj < hi; ++jj) {
      if (j0 + jj + kPrefetch < nk)
        prefetch_row(a0.v, (j0 + jj + kPrefetch) * a0.v_stride * esize, dv * esize);
      float* vrow = sc.vt.data() + jj * dvp;
      WidenRow(a0.v, a0.qkv_dtype, (j0 + jj) * a0.v_stride, dv, vrow);
      vmax = std::max(vmax, abs_bits_max(vrow, dv));
    }
    const bool v_nonfinite = vmax >= 0x7f800000u;
    if (!v_nonfinite) {
      PvTile(sc.pb.data(), sc.vt.data(), dvp, sc.o.data(), sc.a, rows_pad, lo, hi);
    } else {
      PvTileNonFinite(sc.pb.data(), sc.sb.data(), sc.vt.data(), dv, dvp, sc.o.data(), sc.a,
                      sc.special, rows, lo, hi);
    }
  }
}

}  // namespace sa::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sa::kernels {
HWY_EXPORT(DecodePass);

namespace {
using namespace attn_detail;

sa_status decode_group(const AttentionHeadArgs* heads, std::int64_t nheads) {
  const AttentionHeadArgs& a0 = heads[0];
  const std::int64_t nq = a0.nq;
  thread_local DecodeScratch sc;
  sc.reserve(nheads * nq, a0.d, a0.dv);
  for (std::int64_t r = 0; r < sc.rows; ++r)
    load_row(heads[r / nq].q, a0.qkv_dtype, (r % nq) * heads[r / nq].q_stride, a0.d,
             sc.qb.data() + r * sc.dpad);
  // Adaptive temperature: pass 1 at beta = 1 gives H and beta(H) per row; a
  // row that pass 1 finds special is finished by the exact scalar path.
  float H1[kMaxBq];
  std::uint8_t special1[kMaxBq] = {};
  if (a0.adaptive) {
    HWY_DYNAMIC_DISPATCH(DecodePass)(heads, false, false, sc);
    for (std::int64_t r = 0; r < sc.rows; ++r) {
      special1[r] = sc.special[r];
      H1[r] = theory::entropy_of(theory::EntropyState<float>{sc.m[r], sc.S[r], sc.T[r]});
      sc.beta[r] = sc.special[r]
                       ? 1.0f
                       : static_cast<float>(theory::adaptive_beta(static_cast<double>(H1[r])));
    }
  }
  HWY_DYNAMIC_DISPATCH(DecodePass)(heads, a0.adaptive, true, sc);
  std::vector<float> row(static_cast<std::size_t>(a0.dv));
  for (std::int64_t r = 0; r < sc.rows; ++r) {
    const AttentionHeadArgs& h = heads[r / nq];
    const std::int64_t i = r % nq;
    float lse = kNegInf, H = 0.0f, beta = 1.0f;
    if (sc.special[r] || special1[r]) {
      cpu_attention_special_row(h, i, row.data(), &lse, &H, &beta);
    } else if (sc.m[r] == kNegInf) {  // nothing visible and no sink
      std::fill(row.begin(), row.end(), 0.0f);
    } else {
      const float S = sc.S[r];
      const float* orow = sc.o.data() + r * sc.dvp;
      for (std::int64_t c = 0; c < a0.dv; ++c) row[static_cast<std::size_t>(c)] = orow[c] / S;
      lse = sc.m[r] + std::log(S);
      H = a0.adaptive ? H1[r]
                      : theory::entropy_of(theory::EntropyState<float>{sc.m[r], sc.S[r], sc.T[r]});
      beta = a0.adaptive ? sc.beta[r] : 1.0f;
    }
    store_row(h, i, row.data(), lse, H, beta);
  }
  return SA_OK;
}

}  // namespace

sa_status cpu_attention_decode_group(const AttentionHeadArgs* heads, std::int64_t nheads) {
  cpu::apply_cpu_isa_limit();  // SA_CPU_MAX_ISA, before the first dispatch
  try {
    return decode_group(heads, nheads);
  } catch (const std::bad_alloc&) {
    return SA_INTERNAL_ERROR;
  }
}

}  // namespace sa::kernels
#endif  // HWY_ONCE
