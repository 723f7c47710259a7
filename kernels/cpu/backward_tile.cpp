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

// dst[r][c0..] += sum_j coef[r][j] src[j][c0..] for R rows and NV vectors.
// kSkip: a key whose R coefficients are all 0 is skipped (its src row may
// hold NaN or inf); with finite src the sums are the same bits either way
// (the accumulators start at +0, and x + 0 = x, +0 + -0 = +0).
template <bool kSkip, int R, int NV>
HWY_INLINE void RowsChunk(std::int64_t nc, const float* HWY_RESTRICT coef,
                          const float* HWY_RESTRICT src, std::int64_t src_stride,
                          float* HWY_RESTRICT dst, std::int64_t dst_stride, std::int64_t c0) {
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  V acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = hn::LoadU(df, dst + r * dst_stride + c0 + v * L);
  for (std::int64_t j = 0; j < nc; ++j) {
    float w[R];
    bool any = false;
    for (int r = 0; r < R; ++r) {
      w[r] = coef[r * kBk + j];
      any |= w[r] != 0.0f;
    }
    if (kSkip && !any) continue;
    V s[NV];
    for (int v = 0; v < NV; ++v) s[v] = hn::LoadU(df, src + j * src_stride + c0 + v * L);
    for (int r = 0; r < R; ++r) {
      const V x = hn::Set(df, w[r]);
      for (int v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(x, s[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) hn::StoreU(acc[r][v], df, dst + r * dst_stride + c0 + v * L);
}

template <bool kSkip, int R>
HWY_INLINE void RowsGroup(std::int64_t nc, std::int64_t w, const float* coef, const float* src,
                          std::int64_t src_stride, float* dst, std::int64_t dst_stride) {
  const hn::ScalableTag<float> df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t c0 = 0;
  for (; c0 + kNV * L <= w; c0 += kNV * L)
    RowsChunk<kSkip, R, kNV>(nc, coef, src, src_stride, dst, dst_stride, c0);
  for (; c0 < w; c0 += L) RowsChunk<kSkip, R, 1>(nc, coef, src, src_stride, dst, dst_stride, c0);
}

template <bool kSkip>
void RowsAll(std::int64_t nr, std::int64_t nc, std::int64_t w, const float* coef, const float* src,
             std::int64_t src_stride, float* dst, std::int64_t dst_stride) {
  std::int64_t r = 0;
  for (; r + 4 <= nr; r += 4)
    RowsGroup<kSkip, 4>(nc, w, coef + r * kBk, src, src_stride, dst + r * dst_stride, dst_stride);
  for (; r < nr; ++r)
    RowsGroup<kSkip, 1>(nc, w, coef + r * kBk, src, src_stride, dst + r * dst_stride, dst_stride);
}

void AccumulateRows(std::int64_t nr, std::int64_t nc, std::int64_t w, const float* coef,
                    const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride,
                    bool src_finite) {
  if (src_finite)
    RowsAll<false>(nr, nc, w, coef, src, src_stride, dst, dst_stride);
  else
    RowsAll<true>(nr, nc, w, coef, src, src_stride, dst, dst_stride);
}

// dst[j][c0..] += sum_r coef[r][j] src[r][c0..] for J keys and NV vectors;
// kSkip as in RowsChunk, for a row.
template <bool kSkip, int J, int NV>
HWY_INLINE void ColsChunk(std::int64_t nr, const float* HWY_RESTRICT coef,
                          const float* HWY_RESTRICT src, std::int64_t src_stride,
                          float* HWY_RESTRICT dst, std::int64_t dst_stride, std::int64_t c0) {
  const hn::ScalableTag<float> df;
  using V = hn::Vec<decltype(df)>;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  V acc[J][NV];
  for (int k = 0; k < J; ++k)
    for (int v = 0; v < NV; ++v) acc[k][v] = hn::LoadU(df, dst + k * dst_stride + c0 + v * L);
  for (std::int64_t r = 0; r < nr; ++r) {
    float w[J];
    bool any = false;
    for (int k = 0; k < J; ++k) {
      w[k] = coef[r * kBk + k];
      any |= w[k] != 0.0f;
    }
    if (kSkip && !any) continue;
    V s[NV];
    for (int v = 0; v < NV; ++v) s[v] = hn::LoadU(df, src + r * src_stride + c0 + v * L);
    for (int k = 0; k < J; ++k) {
      const V x = hn::Set(df, w[k]);
      for (int v = 0; v < NV; ++v) acc[k][v] = hn::MulAdd(x, s[v], acc[k][v]);
    }
  }
  for (int k = 0; k < J; ++k)
    for (int v = 0; v < NV; ++v) hn::StoreU(acc[k][v], df, dst + k * dst_stride + c0 + v * L);
}

template <bool kSkip, int J>
HWY_INLINE void ColsGroup(std::int64_t nr, std::int64_t w, const float* coef, const float* src,
                          std::int64_t src_stride, float* dst, std::int64_t dst_stride) {
  const hn::ScalableTag<float> df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  std::int64_t c0 = 0;
  for (; c0 + kNV * L <= w; c0 += kNV * L)
    ColsChunk<kSkip, J, kNV>(nr, coef, src, src_stride, dst, dst_stride, c0);
  for (; c0 < w; c0 += L) ColsChunk<kSkip, J, 1>(nr, coef, src, src_stride, dst, dst_stride, c0);
}

template <bool kSkip>
void ColsAll(std::int64_t nr, std::int64_t nc, std::int64_t w, const float* coef, const float* src,
             std::int64_t src_stride, float* dst, std::int64_t dst_stride) {
  std::int64_t j = 0;
  for (; j + 4 <= nc; j += 4)
    ColsGroup<kSkip, 4>(nr, w, coef + j, src, src_stride, dst + j * dst_stride, dst_stride);
  for (; j < nc; ++j)
    ColsGroup<kSkip, 1>(nr, w, coef + j, src, src_stride, dst + j * dst_stride, dst_stride);
}

void AccumulateCols(std::int64_t nr, std::int64_t nc, std::int64_t w, const float* coef,
                    const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride,
                    bool src_finite) {
  if (src_finite)
    ColsAll<false>(nr, nc, w, coef, src, src_stride, dst, dst_stride);
  else
    ColsAll<true>(nr, nc, w, coef, src, src_stride, dst, dst_stride);
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
