// The vector steps of the CPU attention backward; see backward_tile.hpp.
// Compiled once per Highway target (foreach_target.h).
#include "kernels/cpu/backward_tile.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/cpu/isa_limit.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/backward_tile.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/contrib/math/math-inl.h>

HWY_BEFORE_NAMESPACE();
namespace sa::kernels::bwd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Accumulators per row group: 4 rows x NV vectors fit the register file
// (16 of 32 zmm on AVX-512, 8 of 16 ymm on AVX2).
constexpr int kNV = HWY_LANES(float) >= 16 ? 4 : 2;
// exp's argument floor: e^-200 is 0 in float32, and Exp stays in its range.
constexpr float kExpFloor = -200.0f;

// out[r][j] = sum_c a[r][c] bt[c][j] for R rows and the NV vectors of columns
// from j0; the sum runs over c in order.
template <int R, int NV>
HWY_INLINE void RowsTimesTile(const float* HWY_RESTRICT a, std::int64_t a_stride,
                              const float* HWY_RESTRICT bt, std::int64_t n, std::int64_t j0,
                              float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  V acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = hn::Zero(df);
  for (std::int64_t c = 0; c < n; ++c) {
    V b[NV];
    for (int v = 0; v < NV; ++v) b[v] = hn::LoadU(df, bt + c * kBk + j0 + v * L);
    for (int r = 0; r < R; ++r) {
      const V x = hn::Set(df, a[r * a_stride + c]);
      for (int v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(x, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) hn::StoreU(acc[r][v], df, out + r * kBk + j0 + v * L);
}

// out (nr x kBk) = a (nr rows of n) times bt (n x kBk).
void Product(const float* a, std::int64_t a_stride, std::int64_t nr, const float* bt,
             std::int64_t n, float* out) {
  const hn::ScalableTag<float> df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df)), W = kNV * L;
  std::int64_t r = 0;
  for (; r + 4 <= nr; r += 4)
    for (std::int64_t j0 = 0; j0 < kBk; j0 += W)
      RowsTimesTile<4, kNV>(a + r * a_stride, a_stride, bt, n, j0, out + r * kBk);
  for (; r < nr; ++r)
    for (std::int64_t j0 = 0; j0 < kBk; j0 += W)
      RowsTimesTile<1, kNV>(a + r * a_stride, a_stride, bt, n, j0, out + r * kBk);
}

void BlockWeights(const Block& b, float* HWY_RESTRICT p, float* HWY_RESTRICT ds) {
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
  const hn::RebindToSigned<decltype(df)> di;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  Product(b.q, b.q_stride, b.nr, b.kt, b.d, p);          // p holds q.k
  Product(b.dout, b.dout_stride, b.nr, b.vt, b.dv, ds);  // ds holds dO.v
  HWY_ALIGN float kvis[kBk];
  for (std::int64_t j = 0; j < kBk; ++j)
    kvis[j] = j < b.nc && (!b.key_visible || b.key_visible[j] != 0) ? 1.0f : 0.0f;
  const V iota = hn::ConvertTo(df, hn::Iota(di, 0));
  const V vscale = hn::Set(df, b.scale), vcap = hn::Set(df, b.softcap),
          vslope = hn::Set(df, b.slope), one = hn::Set(df, 1.0f), zero = hn::Zero(df),
          vfloor = hn::Set(df, kExpFloor);
  for (std::int64_t r = 0; r < b.nr; ++r) {
    float* pr = p + r * kBk;
    float* dr = ds + r * kBk;
    const float lse = b.lse[r * b.ld_stride];
    if (lse == -std::numeric_limits<float>::infinity() || b.hi[r] <= b.lo[r]) {
      std::fill(pr, pr + kBk, 0.0f);
      std::fill(dr, dr + kBk, 0.0f);
      continue;
    }
    const V vl = hn::Set(df, lse), vD = hn::Set(df, b.D[r * b.ld_stride]);
    const V vlo = hn::Set(df, static_cast<float>(b.lo[r])),
            vhi = hn::Set(df, static_cast<float>(b.hi[r]));
    const V vdiag = hn::Set(df, b.alibi ? static_cast<float>(b.diag[r]) : 0.0f);
    for (std::int64_t j = 0; j < kBk; j += L) {
      const V col = hn::Add(iota, hn::Set(df, static_cast<float>(j)));
      const auto vis = hn::And(hn::And(hn::Ge(col, vlo), hn::Lt(col, vhi)),
                               hn::Gt(hn::Load(df, kvis + j), zero));
      V x = hn::Mul(hn::LoadU(df, pr + j), vscale);
      V dcap = one;
      if (b.softcap > 0.0f) {
        const V th = hn::Tanh(df, hn::Div(x, vcap));
        x = hn::Mul(vcap, th);
        dcap = hn::NegMulAdd(th, th, one);
      }
      // |diag - j|: exact in float below 2^24 keys.
      if (b.alibi) x = hn::NegMulAdd(vslope, hn::Abs(hn::Sub(vdiag, col)), x);
      const V e = hn::IfThenElseZero(vis, hn::Exp(df, hn::Max(hn::Sub(x, vl), vfloor)));
      const V g = hn::Mul(hn::Mul(e, hn::Sub(hn::LoadU(df, dr + j), vD)), dcap);
      hn::StoreU(e, df, pr + j);
      hn::StoreU(hn::IfThenElseZero(vis, g), df, dr + j);
    }
  }
}

// Both accumulations are one loop: R outputs o (dst rows) each add sum over t
// of coef[o * kCo + t * kCt] src[t], in order of t. Rows (dQ += dS K): o a
// query row, t a key, kCo = kBk, kCt = 1. Cols (dK += dS^T Q, dV += P^T dO):
// o a key, t a query row, kCo = 1, kCt = kBk.
// kSkip: a t whose R coefficients are all 0 is skipped (its src row may hold
// NaN or inf); with finite src the sums are the same bits either way (the
// accumulators start at +0, and x + 0 = x, +0 + -0 = +0).
template <std::int64_t kCo, std::int64_t kCt, bool kSkip, int R, int NV>
HWY_INLINE void AccumulateChunk(std::int64_t nt, const float* HWY_RESTRICT coef,
                                const float* HWY_RESTRICT src, std::int64_t src_stride,
                                float* HWY_RESTRICT dst, std::int64_t dst_stride, std::int64_t c0) {
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  V acc[R][NV];
  for (int o = 0; o < R; ++o)
    for (int v = 0; v < NV; ++v) acc[o][v] = hn::LoadU(df, dst + o * dst_stride + c0 + v * L);
  for (std::int64_t t = 0; t < nt; ++t) {
    float w[R];
    bool any = false;
    for (int o = 0; o < R; ++o) {
      w[o] = coef[o * kCo + t * kCt];
      any |= w[o] != 0.0f;
    }
    if (kSkip && !any) continue;
    V s[NV];
    for (int v = 0; v < NV; ++v) s[v] = hn::LoadU(df, src + t * src_stride + c0 + v * L);
    for (int o = 0; o < R; ++o) {
      const V x = hn::Set(df, w[o]);
      for (int v = 0; v < NV; ++v) acc[o][v] = hn::MulAdd(x, s[v], acc[o][v]);
    }
  }
  for (int o = 0; o < R; ++o)
    for (int v = 0; v < NV; ++v) hn::StoreU(acc[o][v], df, dst + o * dst_stride + c0 + v * L);
}

template <std::int64_t kCo, std::int64_t kCt, bool kSkip, int R>
HWY_INLINE void AccumulateGroup(std::int64_t nt, std::int64_t w, const float* coef,
                                const float* src, std::int64_t src_stride, float* dst,
                                std::int64_t dst_stride) {
  const hn::ScalableTag<float> df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t c0 = 0;
  for (; c0 + kNV * L <= w; c0 += kNV * L)
    AccumulateChunk<kCo, kCt, kSkip, R, kNV>(nt, coef, src, src_stride, dst, dst_stride, c0);
  for (; c0 < w; c0 += L)
    AccumulateChunk<kCo, kCt, kSkip, R, 1>(nt, coef, src, src_stride, dst, dst_stride, c0);
}

template <std::int64_t kCo, std::int64_t kCt, bool kSkip>
void AccumulateAll(std::int64_t no, std::int64_t nt, std::int64_t w, const float* coef,
                   const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride) {
  std::int64_t o = 0;
  for (; o + 4 <= no; o += 4)
    AccumulateGroup<kCo, kCt, kSkip, 4>(nt, w, coef + o * kCo, src, src_stride,
                                        dst + o * dst_stride, dst_stride);
  for (; o < no; ++o)
    AccumulateGroup<kCo, kCt, kSkip, 1>(nt, w, coef + o * kCo, src, src_stride,
                                        dst + o * dst_stride, dst_stride);
}

void AccumulateRows(std::int64_t nr, std::int64_t nc, std::int64_t w, const float* coef,
                    const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride,
                    bool src_finite) {
  if (src_finite)
    AccumulateAll<kBk, 1, false>(nr, nc, w, coef, src, src_stride, dst, dst_stride);
  else
    AccumulateAll<kBk, 1, true>(nr, nc, w, coef, src, src_stride, dst, dst_stride);
}

void AccumulateCols(std::int64_t nr, std::int64_t nc, std::int64_t w, const float* coef,
                    const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride,
                    bool src_finite) {
  if (src_finite)
    AccumulateAll<1, kBk, false>(nc, nr, w, coef, src, src_stride, dst, dst_stride);
  else
    AccumulateAll<1, kBk, true>(nc, nr, w, coef, src, src_stride, dst, dst_stride);
}

}  // namespace sa::kernels::bwd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sa::kernels::bwd {
HWY_EXPORT(BlockWeights);
HWY_EXPORT(AccumulateRows);
HWY_EXPORT(AccumulateCols);

void block_weights(const Block& b, float* p, float* ds) {
  cpu::apply_cpu_isa_limit();  // SA_CPU_MAX_ISA, before the first dispatch
  HWY_DYNAMIC_DISPATCH(BlockWeights)(b, p, ds);
}
void accumulate_rows(std::int64_t nr, std::int64_t nc, std::int64_t w, const float* coef,
                     const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride,
                     bool src_finite) {
  HWY_DYNAMIC_DISPATCH(AccumulateRows)
  (nr, nc, w, coef, src, src_stride, dst, dst_stride, src_finite);
}
void accumulate_cols(std::int64_t nr, std::int64_t nc, std::int64_t w, const float* coef,
                     const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride,
                     bool src_finite) {
  HWY_DYNAMIC_DISPATCH(AccumulateCols)
  (nr, nc, w, coef, src, src_stride, dst, dst_stride, src_finite);
}
}  // namespace sa::kernels::bwd
#endif  // HWY_ONCE
