// The per-tile steps of the CPU attention that the tiled path (RunItem in
// kernels/cpu/attention.cpp) and the few-query path (kernels/cpu/
// attention_decode.cpp) share, so both compute a tile's scores, weights and
// P V with the same operations in the same order:
//   FinishScores  one row's raw dot products of a key tile -> scores
//                 (scale, softcap, ALiBi, beta; kernel.h's order), -inf where
//                 the key is not visible;
//   OnlineRow     one row's online-softmax update against the tile (running
//                 max m, S = sum e^(s - m), T = sum e^(s - m)(s - m), the
//                 rescale factor a for O), the weights e^(s - m) into prow;
//   PvTile        O[r] = a[r] O[r] + sum_j P[r][j] V[j] for 4-row groups.
// Accuracy: float32 throughout; Highway's Exp and Tanh are within 1 and 4 ulp
// (kernels/cpu/attention.hpp states the whole call's error).
// Highway per-target header: included after foreach_target.h, once per
// instruction set (hence the toggled guard).
#if defined(SA_KERNELS_CPU_ATTENTION_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SA_KERNELS_CPU_ATTENTION_TILE_INL_H_
#undef SA_KERNELS_CPU_ATTENTION_TILE_INL_H_
#else
#define SA_KERNELS_CPU_ATTENTION_TILE_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/cpu/attention_detail.hpp"

HWY_BEFORE_NAMESPACE();
namespace sa::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Accumulators per row in the micro-kernels: 4 rows x kNV vectors fit the
// register file (16 of 32 zmm on AVX-512, 8 of 16 ymm on AVX2).
constexpr int kNV = HWY_LANES(float) >= 16 ? 4 : 2;

// One row of a key tile (Bk columns, srow holds q.k): s = coef q.k, then
// softcap c tanh(s / c), ALiBi -slope |diag - j| and the factor post (beta
// multiplies the finished score when softcap or ALiBi is on; otherwise it is
// part of coef, one rounding). diag is the row's diagonal column relative to
// the tile's first key. With need_mask, columns outside [jl, jh) and keys
// whose key_mask byte is 0 (key_mask points at the tile's first key; may be
// null) become -inf. bias (Bk values, or null) is added after ALiBi, before
// the factor post (kernel.h's attn_bias).
HWY_INLINE void FinishScores(float* HWY_RESTRICT srow, float coef, float post, float softcap,
                             bool alibi, float slope, std::int64_t diag, bool need_mask,
                             std::int64_t jl, std::int64_t jh, const std::uint8_t* key_mask,
                             const float* HWY_RESTRICT bias = nullptr) {
  using attn_detail::Bk;
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const V cr = hn::Set(df, coef);
  if (!(softcap > 0.0f || alibi || bias)) {
    for (std::int64_t j = 0; j < Bk; j += L)
      hn::StoreU(hn::Mul(hn::LoadU(df, srow + j), cr), df, srow + j);
  } else {
    const V pr = hn::Set(df, post);
    const V vcap = hn::Set(df, softcap);
    const V vslope = hn::Set(df, slope);
    const hn::RebindToSigned<decltype(df)> di;
    const V viota = hn::ConvertTo(df, hn::Iota(di, 0));
    // |diag - j|: exact in float below 2^24 keys.
    const V vdiag = hn::Set(df, static_cast<float>(diag));
    for (std::int64_t j = 0; j < Bk; j += L) {
      V x = hn::Mul(hn::LoadU(df, srow + j), cr);
      if (softcap > 0.0f) x = hn::Mul(vcap, hn::Tanh(df, hn::Div(x, vcap)));
      if (alibi) {
        const V dist = hn::Abs(hn::Sub(vdiag, hn::Add(viota, hn::Set(df, static_cast<float>(j)))));
        x = hn::Sub(x, hn::Mul(vslope, dist));
      }
      if (bias) x = hn::Add(x, hn::LoadU(df, bias + j));
      hn::StoreU(hn::Mul(x, pr), df, srow + j);
    }
  }
  if (!need_mask) return;
  for (std::int64_t j = 0; j < Bk; ++j) {
    const bool vis = j >= jl && j < jh && (!key_mask || key_mask[j] != 0);
    if (!vis) srow[j] = attn_detail::kNegInf;
  }
}

// One row's online-softmax update against a tile of scores (Bk columns, -inf
// where masked). A NaN or +inf score marks the row special (the exact scalar
// path finishes it); a tile with nothing visible leaves the row as it was.
// With with_output, prow gets e^(s - m_new) (0 for special or empty rows).
// a is the factor the row's O must be scaled by before this tile's P V.
HWY_INLINE void OnlineRow(const float* HWY_RESTRICT srow, float* HWY_RESTRICT prow,
                          bool with_output, float& m, float& S, float& T, float& a,
                          std::uint8_t& special) {
  using attn_detail::Bk;
  using attn_detail::kNegInf;
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  a = 1.0f;
  if (special) {
    if (with_output) std::fill(prow, prow + Bk, 0.0f);
    return;
  }
  V vmax = hn::Set(df, kNegInf);
  auto bad = hn::Ne(vmax, vmax);  // all false
  for (std::int64_t j = 0; j < Bk; j += L) {
    const V s = hn::LoadU(df, srow + j);
    vmax = hn::Max(vmax, s);
    bad = hn::Or(bad, hn::Not(hn::Eq(s, s)));  // NaN (Ne is ordered on x86)
  }
  const float mt = hn::GetLane(hn::MaxOfLanes(df, vmax));
  if (!hn::AllFalse(df, bad) || mt == std::numeric_limits<float>::infinity()) {
    special = 1;  // NaN or +inf logit: finished by the exact scalar path
    if (with_output) std::fill(prow, prow + Bk, 0.0f);
    return;
  }
  if (mt == kNegInf) {  // nothing visible for this row in this tile
    if (with_output) std::fill(prow, prow + Bk, 0.0f);
    return;
  }
  const float mold = m;
  const float mnew = std::max(mold, mt);
  const V vm = hn::Set(df, mnew);
  const V vfloor = hn::Set(df, attn_detail::kExpFloor);
  V se = hn::Zero(df), st = hn::Zero(df);
  for (std::int64_t j = 0; j < Bk; j += L) {
    const V x = hn::Max(hn::Sub(hn::LoadU(df, srow + j), vm), vfloor);
    const V e = hn::Exp(df, x);
    if (with_output) hn::StoreU(e, df, prow + j);
    se = hn::Add(se, e);
    st = hn::MulAdd(e, x, st);
  }
  const float sum_e = hn::GetLane(hn::SumOfLanes(df, se));
  const float sum_t = hn::GetLane(hn::SumOfLanes(df, st));
  if (mold == kNegInf) {  // first visible tile of this row: no rescale (a = 0 explicitly)
    a = 0.0f;
    S = sum_e;
    T = sum_t;
  } else {
    const float f = mnew == mold ? 1.0f : std::exp(mold - mnew);
    T = f * (T + (mold - mnew) * S) + sum_t;
    S = f * S + sum_e;
    a = f;
  }
  m = mnew;
}

// O[r][:] = a[r] O[r][:] + sum_{j in [jlo, jhi)} P[r][j] V[j][:] for 4-row groups.
template <int NV>
HWY_INLINE void PvChunk(const float* HWY_RESTRICT pb, const float* HWY_RESTRICT vt,
                        std::int64_t dvp, float* HWY_RESTRICT o, const float* a, std::int64_t r0,
                        std::int64_t c0, std::int64_t jlo, std::int64_t jhi) {
  using attn_detail::Bk;
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  V acc[4][NV];
  for (int r = 0; r < 4; ++r) {
    const V ar = hn::Set(df, a[r0 + r]);
    for (int v = 0; v < NV; ++v)
      acc[r][v] = hn::Mul(hn::LoadU(df, o + (r0 + r) * dvp + c0 + v * L), ar);
  }
  const float* p0 = pb + (r0 + 0) * Bk;
  const float* p1 = pb + (r0 + 1) * Bk;
  const float* p2 = pb + (r0 + 2) * Bk;
  const float* p3 = pb + (r0 + 3) * Bk;
  for (std::int64_t j = jlo; j < jhi; ++j) {
    V vv[NV];
    for (int v = 0; v < NV; ++v) vv[v] = hn::LoadU(df, vt + j * dvp + c0 + v * L);
    const V w0 = hn::Set(df, p0[j]), w1 = hn::Set(df, p1[j]);
    const V w2 = hn::Set(df, p2[j]), w3 = hn::Set(df, p3[j]);
    for (int v = 0; v < NV; ++v) {
      acc[0][v] = hn::MulAdd(w0, vv[v], acc[0][v]);
      acc[1][v] = hn::MulAdd(w1, vv[v], acc[1][v]);
      acc[2][v] = hn::MulAdd(w2, vv[v], acc[2][v]);
      acc[3][v] = hn::MulAdd(w3, vv[v], acc[3][v]);
    }
  }
  for (int r = 0; r < 4; ++r)
    for (int v = 0; v < NV; ++v) hn::StoreU(acc[r][v], df, o + (r0 + r) * dvp + c0 + v * L);
}

// pb: rows_pad x Bk weights, vt: Bk x dvp values (dvp a multiple of 16), o:
// rows_pad x dvp; rows_pad a multiple of 4.
HWY_INLINE void PvTile(const float* pb, const float* vt, std::int64_t dvp, float* o, const float* a,
                       std::int64_t rows_pad, std::int64_t jlo, std::int64_t jhi) {
  const hn::ScalableTag<float> df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  for (std::int64_t r0 = 0; r0 < rows_pad; r0 += 4) {
    std::int64_t c0 = 0;
    for (; c0 + kNV * L <= dvp; c0 += kNV * L) PvChunk<kNV>(pb, vt, dvp, o, a, r0, c0, jlo, jhi);
    for (; c0 < dvp; c0 += L) PvChunk<1>(pb, vt, dvp, o, a, r0, c0, jlo, jhi);
  }
}

// The rows' O scaled by a and the tile's P V added, skipping keys whose score
// is -inf (masked) so that 0 * inf never reaches O: the path for tiles whose
// v holds NaN or inf (scalar, rare). sb: rows x Bk scores.
HWY_INLINE void PvTileNonFinite(const float* pb, const float* sb, const float* vt, std::int64_t dv,
                                std::int64_t dvp, float* o, const float* a,
                                const std::uint8_t* special, std::int64_t rows, std::int64_t jlo,
                                std::int64_t jhi) {
  using attn_detail::Bk;
  for (std::int64_t r = 0; r < rows; ++r) {
    float* orow = o + r * dvp;
    if (a[r] != 1.0f)
      for (std::int64_t c = 0; c < dvp; ++c) orow[c] *= a[r];
    if (special[r]) continue;
    for (std::int64_t j = jlo; j < jhi; ++j) {
      if (sb[r * Bk + j] == attn_detail::kNegInf) continue;
      const float w = pb[r * Bk + j];
      for (std::int64_t c = 0; c < dv; ++c) orow[c] += w * vt[j * dvp + c];
    }
  }
}

}  // namespace sa::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // SA_KERNELS_CPU_ATTENTION_TILE_INL_H_
