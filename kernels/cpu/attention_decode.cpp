// The CPU attention's few-query path; see attention_decode.hpp. This file is
// compiled once per Highway target (foreach_target.h); the target-independent
// part is guarded below.
#include "kernels/cpu/attention_decode.hpp"
#include "kernels/cpu/isa_limit.hpp"

#ifndef SA_KERNELS_CPU_ATTENTION_DECODE_COMMON
#define SA_KERNELS_CPU_ATTENTION_DECODE_COMMON

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/cpu/attention_detail.hpp"
#include "theory/adaptive_temperature.hpp"
#include "theory/streamed_entropy.hpp"

namespace sa::kernels::attn_detail {

// One work item: a chunk's keys [kb, ke) of ngroups groups of one sequence
// (a bundle: groups b = 0 .. ngroups, heads[b * nheads .. (b + 1) * nheads)
// each, sharing every field but the pointers and per-head values), rows =
// ngroups * nheads * nq in all (row r: query r % nq of head r / nq). The
// bundle's groups are processed tile by tile together, so that K and V of
// neighbouring key/value heads (BSHD: a token's heads side by side) are read
// together rather than one head's rows a token's width apart.
struct DecodeItem {
  const AttentionHeadArgs* heads = nullptr;
  std::int64_t nheads = 0, ngroups = 1, rows = 0;
  std::int64_t kb = 0, ke = 0;
  bool use_beta = false;        // scores scaled by beta[r] (adaptive's second pass)
  bool with_output = false;     // O as well as (m, S, T)
  const float* beta = nullptr;  // rows betas when use_beta
};

// Where a chunk's state goes: rows of m, S, T, special and O (row stride dop,
// columns in the kernel's order: DecodeColumnPositions).
struct ChunkResult {
  float *m, *S, *T;
  std::uint8_t* special;
  float* o;
  std::int64_t dop;
};

// Per-thread scratch of the work items, kept between calls.
struct DecodeScratch {
  std::int64_t dq = 0;             // q row stride (floats)
  std::vector<float> qb;           // rows x dq: q in the kernel's column order
  std::vector<float> sb;           // rows x Bk raw dot products, then scores
  std::vector<float> pb;           // rows x Bk weights
  std::vector<float> kt;           // Bk x dq: the tile's keys widened (fp8)
  std::vector<float> vt;           // Bk x dvp: the tile's values widened (fp8, non-finite V)
  std::vector<std::int32_t> vpos;  // dv: O position of value column c
  float a[kMaxBq];

  static void grow(std::vector<float>& v, std::int64_t n) {
    if (static_cast<std::int64_t>(v.size()) < n) v.resize(static_cast<std::size_t>(n));
  }
  void reserve(std::int64_t rows, std::int64_t d, std::int64_t dv) {
    dq = (d + kVecPad - 1) / kVecPad * kVecPad;
    const std::int64_t dvp = (dv + kVecPad - 1) / kVecPad * kVecPad;
    grow(qb, rows * dq);
    grow(sb, rows * Bk);
    grow(pb, rows * Bk);
    grow(kt, Bk * dq);
    grow(vt, Bk * dvp);
    vpos.resize(static_cast<std::size_t>(dv));
  }
};

inline std::int64_t elem_bytes(sa_dtype t) {
  return t == SA_F32 ? 4 : t == SA_BF16 || t == SA_F16 ? 2 : 1;
}

// Every cache line of bytes [off, off + n) of base.
inline void prefetch_row(const void* base, std::int64_t off, std::int64_t n) {
  const char* p = static_cast<const char*>(base) + off;
  for (std::int64_t b = 0; b < n; b += 64) __builtin_prefetch(p + b, 0, 1);
}

// Byte address of key j's row of h's K (of its V when is_v), contiguous or
// paged (AttentionHeadArgs::pages).
inline const char* kv_row(const AttentionHeadArgs& h, bool is_v, std::int64_t j,
                          std::int64_t esize) {
  return static_cast<const char*>(is_v ? h.v : h.k) + kv_offset(h, is_v, j) * esize;
}

// rows[jj] = kv_row(h, is_v, j0 + jj) for jj in [lo, hi): one division, then
// the pages walked slot by slot.
inline void kv_rows(const AttentionHeadArgs& h, bool is_v, std::int64_t j0, std::int64_t lo,
                    std::int64_t hi, std::int64_t esize, const char** rows) {
  const char* base = static_cast<const char*>(is_v ? h.v : h.k);
  const std::int64_t rs = (is_v ? h.v_stride : h.k_stride) * esize;
  if (!h.pages) {
    for (std::int64_t jj = lo; jj < hi; ++jj) rows[jj] = base + (j0 + jj) * rs;
    return;
  }
  if (lo >= hi) return;  // (no table entry read past the sequence's pages)
  const std::int64_t ps = h.page_size, pst = (is_v ? h.v_page_stride : h.k_page_stride) * esize;
  std::int64_t g = (j0 + lo) / ps, slot = (j0 + lo) % ps;
  const char* page = base + static_cast<std::int64_t>(h.pages[g]) * pst;
  for (std::int64_t jj = lo; jj < hi; ++jj) {
    rows[jj] = page + slot * rs;
    if (++slot == ps && jj + 1 < hi) {
      slot = 0;
      page = base + static_cast<std::int64_t>(h.pages[++g]) * pst;
    }
  }
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

namespace dec {
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// How K and V elements reach float32 registers.
enum Kind : int {
  kF32 = 0,   // float32 in place (fp8 through widened copies)
  kBF16 = 1,  // bfloat16 in place: a 32-bit word's low element by a shift,
              // its high element by a mask, so a step of 2L elements gives
              // two vectors (even elements, odd elements)
  kF16 = 2,   // float16 in place: F16C / AVX-512 conversion (exact)
};
template <int K>
struct Elem {
  using T = std::uint16_t;
};
template <>
struct Elem<kF32> {
  using T = float;
};
// Float vectors per step of K and V elements.
template <int K>
constexpr int kVecs = K == kBF16 ? 2 : 1;

// Elements [0, kVecs L) of p as kVecs float vectors, in the kernel's order:
// the elements' own order, except bfloat16 (even elements, then odd ones).
template <int K>
HWY_INLINE void LoadStep(DF df, const typename Elem<K>::T* HWY_RESTRICT p, VF* v) {
  if constexpr (K == kF32) {
    v[0] = hn::LoadU(df, p);
  } else if constexpr (K == kF16) {
    v[0] = sa::kernels::cpu::HWY_NAMESPACE::LoadF16(df, p);
  } else {
    const hn::RebindToUnsigned<DF> du;
    const auto w = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(p));
    v[0] = hn::BitCast(df, hn::ShiftLeft<16>(w));
    v[1] = hn::BitCast(df, hn::And(w, hn::Set(du, 0xffff0000u)));
  }
}

// Kernel position of column c of a row of n elements (q, O): the first
// n - n % step columns in the step order of LoadStep, the rest as they are.
template <int K>
HWY_INLINE std::int64_t Position(std::int64_t c, std::int64_t n) {
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(DF()));
  const std::int64_t step = kVecs<K> * L;
  if (K != kBF16 || c >= n / step * step) return c;
  const std::int64_t base = c / step * step, i = c - base;
  return base + (i % 2) * L + i / 2;
}

// out[0..4) = the lane sums of a0..a3: one transpose-and-add tree.
HWY_INLINE void Reduce4Store(DF df, VF a0, VF a1, VF a2, VF a3, float* HWY_RESTRICT out) {
#if HWY_TARGET == HWY_SCALAR
  (void)df;
  out[0] = hn::GetLane(a0);
  out[1] = hn::GetLane(a1);
  out[2] = hn::GetLane(a2);
  out[3] = hn::GetLane(a3);
#else
  // Per 128-bit block: t0 = (a0 0+2, a1 0+2, a0 1+3, a1 1+3), t1 likewise for a2, a3.
  const VF t0 = hn::Add(hn::InterleaveLower(df, a0, a1), hn::InterleaveUpper(df, a0, a1));
  const VF t1 = hn::Add(hn::InterleaveLower(df, a2, a3), hn::InterleaveUpper(df, a2, a3));
  // 64-bit halves: (a0, a1, a2, a3) block sums.
  const hn::Repartition<std::uint64_t, DF> d64;
  const auto u0 = hn::BitCast(d64, t0), u1 = hn::BitCast(d64, t1);
  const VF s = hn::Add(hn::BitCast(df, hn::InterleaveLower(d64, u0, u1)),
                       hn::BitCast(df, hn::InterleaveUpper(d64, u0, u1)));
#if HWY_TARGET <= HWY_AVX3
  const hn::Half<DF> dh;
  const hn::Half<decltype(dh)> d4;
  const auto h = hn::Add(hn::LowerHalf(dh, s), hn::UpperHalf(dh, s));
  hn::StoreU(hn::Add(hn::LowerHalf(d4, h), hn::UpperHalf(d4, h)), d4, out);
#elif HWY_TARGET == HWY_AVX2
  const hn::Half<DF> d4;
  hn::StoreU(hn::Add(hn::LowerHalf(d4, s), hn::UpperHalf(d4, s)), d4, out);
#else
  hn::StoreU(s, df, out);  // one block
#endif
#endif
}

// Accumulator budget: 16 of 32 vector registers on AVX-512, 8 of 16 elsewhere.
constexpr int kAcc = HWY_LANES(float) >= 16 ? 16 : 8;
// Rows per block of the score kernel (x 4 keys accumulators).
constexpr int kScoreRows = kAcc / 4;

// s[r * Bk + u] = q_r . k_u (u < 4, r < RB) over the first nsteps steps of
// columns (lane partial sums, then Reduce4Store). q rows dq apart.
template <int K, int RB>
HWY_INLINE void ScoreQuad(const float* HWY_RESTRICT q, std::int64_t dq,
                          const typename Elem<K>::T* const* kp, std::int64_t nsteps,
                          float* HWY_RESTRICT s) {
  const DF df;
  constexpr int NV = kVecs<K>;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const std::int64_t step = NV * L;
  VF acc[RB][4];
  for (int r = 0; r < RB; ++r)
    for (int u = 0; u < 4; ++u) acc[r][u] = hn::Zero(df);
  for (std::int64_t st = 0; st < nsteps; ++st) {
    const std::int64_t c = st * step;
    // One key at a time: its vectors and the accumulators are all that stays
    // in registers (q is an operand from L1), so AVX2's 16 registers suffice.
    for (int u = 0; u < 4; ++u) {
      VF kv[NV];
      LoadStep<K>(df, kp[u] + c, kv);
      for (int v = 0; v < NV; ++v)
        for (int r = 0; r < RB; ++r)
          acc[r][u] = hn::MulAdd(hn::LoadU(df, q + r * dq + c + v * L), kv[v], acc[r][u]);
    }
  }
  for (int r = 0; r < RB; ++r)
    Reduce4Store(df, acc[r][0], acc[r][1], acc[r][2], acc[r][3], s + r * Bk);
}

template <int K>
HWY_INLINE void ScoreRows(const float* q, std::int64_t dq, const typename Elem<K>::T* const* kp,
                          std::int64_t nsteps, float* s, std::int64_t rows) {
  std::int64_t r = 0;
  for (; r + kScoreRows <= rows; r += kScoreRows)
    ScoreQuad<K, kScoreRows>(q + r * dq, dq, kp, nsteps, s + r * Bk);
  switch (rows - r) {
    case 3:
      ScoreQuad<K, 3>(q + r * dq, dq, kp, nsteps, s + r * Bk);
      break;
    case 2:
      ScoreQuad<K, 2>(q + r * dq, dq, kp, nsteps, s + r * Bk);
      break;
    case 1:
      ScoreQuad<K, 1>(q + r * dq, dq, kp, nsteps, s + r * Bk);
      break;
    default:
      break;
  }
}

// O rows r0 .. r0 + RB, columns [c, c + NS steps): O = a O + sum_{j in [jlo,
// jhi)} P[r][j] V[j] with V row j at vr[j] (in place: contiguous or paged).
template <int K, int RB, int NS>
HWY_INLINE void PvPass(const float* HWY_RESTRICT pb, const char* const* vrows, std::int64_t jlo,
                       std::int64_t jhi, float* HWY_RESTRICT o, std::int64_t dop, const float* a,
                       std::int64_t c) {
  const DF df;
  constexpr int NV = kVecs<K> * NS;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  VF acc[RB][NV];
  for (int r = 0; r < RB; ++r) {
    const VF ar = hn::Set(df, a[r]);
    for (int x = 0; x < NV; ++x) acc[r][x] = hn::Mul(hn::LoadU(df, o + r * dop + c + x * L), ar);
  }
  for (std::int64_t j = jlo; j < jhi; ++j) {
    const typename Elem<K>::T* vr = reinterpret_cast<const typename Elem<K>::T*>(vrows[j]) + c;
    VF vv[NV];
    for (int s = 0; s < NS; ++s) LoadStep<K>(df, vr + s * kVecs<K> * L, vv + s * kVecs<K>);
    for (int r = 0; r < RB; ++r) {
      const VF w = hn::Set(df, pb[r * Bk + j]);
      for (int x = 0; x < NV; ++x) acc[r][x] = hn::MulAdd(w, vv[x], acc[r][x]);
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int x = 0; x < NV; ++x) hn::StoreU(acc[r][x], df, o + r * dop + c + x * L);
}

template <int K, int RB>
HWY_INLINE void PvRows(const float* pb, const char* const* vrows, std::int64_t jlo,
                       std::int64_t jhi, float* o, std::int64_t dop, const float* a,
                       std::int64_t nsteps) {
  constexpr int kNS = std::max(1, std::min(8, kAcc / RB) / kVecs<K>);
  const std::int64_t step = kVecs<K> * static_cast<std::int64_t>(hn::Lanes(DF()));
  std::int64_t s = 0;
  for (; s + kNS <= nsteps; s += kNS) PvPass<K, RB, kNS>(pb, vrows, jlo, jhi, o, dop, a, s * step);
  for (; s < nsteps; ++s) PvPass<K, RB, 1>(pb, vrows, jlo, jhi, o, dop, a, s * step);
}

// All rows' O += P V over the tile's keys [jlo, jhi) (V row j at vrows[j]).
template <int K>
HWY_INLINE void PvTileInPlace(const float* pb, const char* const* vrows, std::int64_t jlo,
                              std::int64_t jhi, float* o, std::int64_t dop, const float* a,
                              std::int64_t rows, std::int64_t dv, sa_dtype t) {
  const std::int64_t step = kVecs<K> * static_cast<std::int64_t>(hn::Lanes(DF()));
  const std::int64_t nsteps = dv / step, vfull = nsteps * step;
  std::int64_t r = 0;
  for (; r + 4 <= rows; r += 4)
    PvRows<K, 4>(pb + r * Bk, vrows, jlo, jhi, o + r * dop, dop, a + r, nsteps);
  switch (rows - r) {
    case 3:
      PvRows<K, 3>(pb + r * Bk, vrows, jlo, jhi, o + r * dop, dop, a + r, nsteps);
      break;
    case 2:
      PvRows<K, 2>(pb + r * Bk, vrows, jlo, jhi, o + r * dop, dop, a + r, nsteps);
      break;
    case 1:
      PvRows<K, 1>(pb + r * Bk, vrows, jlo, jhi, o + r * dop, dop, a + r, nsteps);
      break;
    default:
      break;
  }
  if (vfull == dv) return;
  // Columns past the last whole step: in order, one multiply-add each.
  for (std::int64_t rr = 0; rr < rows; ++rr) {
    float* orow = o + rr * dop;
    for (std::int64_t c = vfull; c < dv; ++c) orow[c] *= a[rr];
    for (std::int64_t j = jlo; j < jhi; ++j) {
      const float w = pb[rr * Bk + j];
      for (std::int64_t c = vfull; c < dv; ++c)
        orow[c] = std::fma(w, load_elem(vrows[j], t, c), orow[c]);
    }
  }
}

// One chunk of one group (see attention_decode.hpp) into res. careful: tiles
// whose V holds NaN or inf take the tiled path's treatment (PvTileNonFinite's
// order: masked keys skipped). Returns false when, not careful, some row's O
// came out non-finite: the caller then runs the chunk again with careful.
template <int K>
bool ChunkT(const DecodeItem& it, DecodeScratch& sc, const ChunkResult& res, bool careful) {
  using T = typename Elem<K>::T;
  const DF df;
  const std::int64_t L = static_cast<std::int64_t>(hn::Lanes(df));
  const AttentionHeadArgs& a0 = it.heads[0];
  const std::int64_t nq = a0.nq, nk = a0.nk, d = a0.d, dv = a0.dv, rows = it.rows;
  const std::int64_t dq = sc.dq, dop = res.dop;
  const sa_dtype t = a0.qkv_dtype;
  const bool widened = K == kF32 && t != SA_F32;  // fp8: K and V through float copies
  const std::int64_t step = kVecs<K> * L;
  const std::int64_t ksteps = d / step, kfull = ksteps * step;
  const std::int64_t off = a0.diag_offset, wl = a0.window_left, wr = a0.window_right;
  const float softcap = static_cast<float>(a0.softcap);
  const bool post_ops = softcap > 0.0f || a0.has_alibi;
  const bool with_output = it.with_output;
  float coef[kMaxBq], post[kMaxBq];
  for (std::int64_t r = 0; r < rows; ++r) {
    const double beta = it.use_beta ? static_cast<double>(it.beta[r]) : 1.0;
    // (Each head's own scale: a bundle's key/value heads may have their own
    // descales, FlashAttention 3's per (sequence, kv head).)
    const double scale = it.heads[r / nq].scale;
    coef[r] = static_cast<float>(post_ops ? scale : scale * beta);
    post[r] = post_ops ? static_cast<float>(beta) : 1.0f;
    res.m[r] = kNegInf;
    res.S[r] = 0.0f;
    res.T[r] = 0.0f;
    res.special[r] = 0;
    sc.a[r] = 1.0f;
  }
  if (with_output) std::fill(res.o, res.o + rows * dop, 0.0f);
  // q in the kernel's column order.
  for (std::int64_t r = 0; r < rows; ++r) {
    const AttentionHeadArgs& h = it.heads[r / nq];
    float* qr = sc.qb.data() + r * dq;
    float* tmp = sc.kt.data();  // free until the first tile
    load_row(h.q, t, (r % nq) * h.q_stride, d, tmp);
    for (std::int64_t c = 0; c < d; ++c) qr[Position<K>(c, d)] = tmp[c];
  }

  // Keys [kbeg, kend) can be visible to some query; query i sees
  // [i + off - wl, i + off + wr] (unbounded sides when -1) and the key mask.
  std::int64_t kbeg = std::max<std::int64_t>(it.kb, 0), kend = std::min(nk, it.ke);
  if (wr >= 0) kend = std::min(kend, (nq - 1) + off + wr + 1);
  if (wl >= 0) kbeg = std::max(kbeg, off - wl);
  const std::int64_t min_hi = off + wr, max_lo = (nq - 1) + off - wl;
  const std::int64_t esize = elem_bytes(t);
  const char* krow[Bk];   // the tile's key rows (in place, or widened copies)
  const char* vrow[Bk];   // its value rows
  const char* knext[Bk];  // the next tile's rows of the first group (prefetch)
  const char* vnext[Bk];
  const std::int64_t grows = it.nheads * nq;  // rows per group
  for (std::int64_t tile = kbeg / Bk; tile * Bk < kend; ++tile) {
    const std::int64_t j0 = tile * Bk;
    // The next tile's rows for the last group's prefetch, one walk (no
    // division per key on paged calls).
    const std::int64_t nnext = std::max<std::int64_t>(0, std::min(Bk, kend - (j0 + Bk)));
    kv_rows(it.heads[0], false, j0 + Bk, 0, nnext, esize, knext);
    if (with_output) kv_rows(it.heads[0], true, j0 + Bk, 0, nnext, esize, vnext);
    const std::int64_t lo = std::max(j0, kbeg) - j0, hi = std::min(j0 + Bk, kend) - j0;
    bool any_key = false, all_keys = true;
    for (std::int64_t jj = lo; jj < hi; ++jj) {
      const bool on = !a0.key_mask || a0.key_mask[j0 + jj] != 0;
      any_key = any_key || on;
      all_keys = all_keys && on;
    }
    if (!any_key) continue;  // every key of the tile masked out
    const bool need_mask = lo > 0 || hi < Bk || !all_keys || (wr >= 0 && j0 + Bk - 1 > min_hi) ||
                           (wl >= 0 && j0 < max_lo);
    const std::int64_t lo4 = lo / 4 * 4;
    for (std::int64_t b = 0; b < it.ngroups; ++b) {
      const AttentionHeadArgs& hb = it.heads[b * it.nheads];
      const std::int64_t rb = b * grows;  // the group's first row
      float* sbg = sc.sb.data() + rb * Bk;
      float* pbg = sc.pb.data() + rb * Bk;
      float* og = res.o + rb * dop;
      // Raw dot products of keys [lo4, hi) (a partial quad repeats key hi - 1);
      // other columns and masked keys hold anything until FinishScores masks them.
      kv_rows(hb, false, j0, lo4, hi, esize, krow);
      if (with_output) kv_rows(hb, true, j0, lo4, hi, esize, vrow);
      if (widened)
        for (std::int64_t jj = lo4; jj < hi; ++jj) {
          load_row(krow[jj], t, 0, d, sc.kt.data() + jj * dq);
          krow[jj] = reinterpret_cast<const char*>(sc.kt.data() + jj * dq);
        }
      const float* qg = sc.qb.data() + rb * dq;
      // Prefetch one unit of work ahead: the next group's rows of this tile's
      // keys, or after the last group the first group's rows of the next tile.
      const bool last = b + 1 == it.ngroups;
      // The next group's rows sit at this group's addresses shifted by its
      // head offset (same strides and pages within a bundle).
      const AttentionHeadArgs& hn_ = it.heads[last ? 0 : (b + 1) * it.nheads];
      const std::int64_t dk = static_cast<const char*>(hn_.k) - static_cast<const char*>(hb.k),
                         dvo = static_cast<const char*>(hn_.v) - static_cast<const char*>(hb.v);
      for (std::int64_t jj = lo4; jj < hi; jj += 4) {
        for (std::int64_t u = 0; u < 4; ++u) {
          const std::int64_t jn = j0 + (last ? Bk : 0) + jj + u;
          if (jn >= kend) continue;
          if (last) {
            prefetch_row(knext[jj + u], 0, d * esize);
            if (with_output) prefetch_row(vnext[jj + u], 0, dv * esize);
          } else if (jj + u < hi) {
            prefetch_row(widened ? kv_row(hb, false, jn, esize) + dk : krow[jj + u] + dk, 0,
                         d * esize);
            if (with_output) prefetch_row(vrow[jj + u] + dvo, 0, dv * esize);
          }
        }
        const T* kp[4];
        for (std::int64_t u = 0; u < 4; ++u)
          kp[u] = reinterpret_cast<const T*>(krow[std::min(jj + u, hi - 1)]);
        float* s = sbg + jj;
        ScoreRows<K>(qg, dq, kp, ksteps, s, grows);
        if (kfull < d)  // columns past the last whole step, in order
          for (std::int64_t r = 0; r < grows; ++r) {
            const float* qr = qg + r * dq;
            for (std::int64_t u = 0; u < 4; ++u) {
              float acc = s[r * Bk + u];
              for (std::int64_t c = kfull; c < d; ++c) {
                const float kc =
                    widened ? reinterpret_cast<const float*>(kp[u])[c] : load_elem(kp[u], t, c);
                acc = std::fma(qr[c], kc, acc);
              }
              s[r * Bk + u] = acc;
            }
          }
      }
      for (std::int64_t r = rb; r < rb + grows; ++r) {
        const AttentionHeadArgs& h = it.heads[r / nq];
        const std::int64_t diag = r % nq + off - j0;  // the row's diagonal column
        std::int64_t jl = lo, jh = hi;
        if (wr >= 0) jh = std::min(jh, diag + wr + 1);
        if (wl >= 0) jl = std::max(jl, diag - wl);
        FinishScores(sc.sb.data() + r * Bk, coef[r], post[r], softcap, h.has_alibi, h.alibi_slope,
                     diag, need_mask, jl, jh, a0.key_mask ? a0.key_mask + j0 : nullptr);
        OnlineRow(sc.sb.data() + r * Bk, sc.pb.data() + r * Bk, with_output, res.m[r], res.S[r],
                  res.T[r], sc.a[r], res.special[r]);
      }
      if (!with_output) continue;
      if (widened || careful) {
        std::uint32_t vmax = 0;  // largest |v| bit pattern: >= 0x7f800000 for inf and NaN
        const std::int64_t dvp = (dv + kVecPad - 1) / kVecPad * kVecPad;
        for (std::int64_t jj = lo; jj < hi; ++jj) {
          float* vw = sc.vt.data() + jj * dvp;
          load_row(vrow[jj], t, 0, dv, vw);
          if (careful) vmax = std::max(vmax, abs_bits_max(vw, dv));
        }
        if (vmax >= 0x7f800000u) {
          // The tiled path's PvTileNonFinite, with O's columns in the kernel's order.
          for (std::int64_t r = rb; r < rb + grows; ++r) {
            float* orow = res.o + r * dop;
            if (sc.a[r] != 1.0f)
              for (std::int64_t c = 0; c < dop; ++c) orow[c] *= sc.a[r];
            if (res.special[r]) continue;
            for (std::int64_t jj = lo; jj < hi; ++jj) {
              if (sc.sb[r * Bk + jj] == kNegInf) continue;
              const float w = sc.pb[r * Bk + jj];
              const float* vw = sc.vt.data() + jj * dvp;
              for (std::int64_t c = 0; c < dv; ++c) orow[sc.vpos[c]] += w * vw[c];
            }
          }
          continue;
        }
        if (widened)
          for (std::int64_t jj = lo; jj < hi; ++jj)
            vrow[jj] = reinterpret_cast<const char*>(sc.vt.data() + jj * dvp);
      }
      PvTileInPlace<K>(pbg, vrow, lo, hi, og, dop, sc.a + rb, grows, dv, widened ? SA_F32 : t);
    }
  }
  if (!with_output || careful) return true;
  // A NaN or inf anywhere in O (a non-finite v, or overflow) is sticky: redo
  // the chunk the careful way so that masked keys' v never reach O.
  const VF vinf = hn::Set(df, std::numeric_limits<float>::infinity());
  auto bad = hn::Lt(vinf, vinf);  // all false
  for (std::int64_t r = 0; r < rows; ++r) {
    if (res.special[r] || res.m[r] == kNegInf) continue;
    const float* orow = res.o + r * dop;
    for (std::int64_t c = 0; c < dop; c += L)
      bad = hn::Or(bad, hn::Not(hn::Lt(hn::Abs(hn::LoadU(df, orow + c)), vinf)));
  }
  return hn::AllFalse(df, bad);
}

}  // namespace dec

bool DecodeChunk(const DecodeItem& it, DecodeScratch& sc, const ChunkResult& res, bool careful) {
  const AttentionHeadArgs& a0 = it.heads[0];
  sc.reserve(it.rows, a0.d, a0.dv);
  const sa_dtype t = a0.qkv_dtype;
  const int kind = t == SA_BF16 ? dec::kBF16 : t == SA_F16 ? dec::kF16 : dec::kF32;
  for (std::int64_t c = 0; c < a0.dv; ++c)
    sc.vpos[static_cast<std::size_t>(c)] =
        static_cast<std::int32_t>(kind == dec::kBF16 ? dec::Position<dec::kBF16>(c, a0.dv) : c);
  if (kind == dec::kBF16) return dec::ChunkT<dec::kBF16>(it, sc, res, careful);
  if (kind == dec::kF16) return dec::ChunkT<dec::kF16>(it, sc, res, careful);
  return dec::ChunkT<dec::kF32>(it, sc, res, careful);
}

// pos[c] = the position of value column c (c < dv) in a chunk's O for inputs of type t.
void DecodeColumnPositions(sa_dtype t, std::int64_t dv, std::int32_t* pos) {
  for (std::int64_t c = 0; c < dv; ++c)
    pos[c] = static_cast<std::int32_t>(t == SA_BF16 ? dec::Position<dec::kBF16>(c, dv) : c);
}

}  // namespace sa::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sa::kernels {
HWY_EXPORT(DecodeChunk);
HWY_EXPORT(DecodeColumnPositions);

namespace {
using namespace attn_detail;

// One group of the call and where its merged state lives.
struct Group {
  const AttentionHeadArgs* heads;
  std::int64_t nheads, rows;
  std::int64_t row0;    // first row in the call's state arrays
  std::int64_t c0, c1;  // chunks [c0, c1) hold keys some query can see
};

// Consecutive groups of one sequence run tile by tile together (DecodeItem).
struct Bundle {
  const AttentionHeadArgs* heads;
  std::int64_t nheads, ngroups, rows, row0;
  std::int64_t c0, item0, nitems;
};

// Whether group y can join a bundle ending with group x: the same shapes,
// masks and strides (the tile loop's bounds are shared; in interface v2 the
// key/value heads of one sequence), heads adjacent in the call's array.
bool same_sequence(const Group& x, const Group& y) {
  const AttentionHeadArgs &a = x.heads[0], &b = y.heads[0];
  return x.nheads == y.nheads && x.heads + x.nheads == y.heads && a.nq == b.nq && a.nk == b.nk &&
         a.key_mask == b.key_mask && a.diag_offset == b.diag_offset &&
         a.window_left == b.window_left && a.window_right == b.window_right &&
         a.k_stride == b.k_stride && a.v_stride == b.v_stride && a.pages == b.pages &&
         a.page_size == b.page_size && a.k_page_stride == b.k_page_stride &&
         a.v_page_stride == b.v_page_stride && x.c0 == y.c0 && x.c1 == y.c1;
}

// Chunk results of one wave: slot i holds rows_max rows.
struct Wave {
  std::int64_t rows_max = 0, dop = 0;
  std::vector<float> m, S, T, o;
  std::vector<std::uint8_t> special;
  void reserve(std::int64_t slots) {
    const auto n = static_cast<std::size_t>(slots * rows_max);
    m.resize(n);
    S.resize(n);
    T.resize(n);
    special.resize(n);
    o.resize(n * static_cast<std::size_t>(dop));
  }
  ChunkResult slot(std::int64_t i) {
    const std::size_t r = static_cast<std::size_t>(i * rows_max);
    return ChunkResult{m.data() + r,
                       S.data() + r,
                       T.data() + r,
                       special.data() + r,
                       o.data() + r * static_cast<std::size_t>(dop),
                       dop};
  }
};

// Merged state (m, S, T, O, special) of rows [row0, row0 + rows).
struct States {
  std::int64_t dop = 0;
  std::vector<float> m, S, T, o, beta;
  std::vector<std::uint8_t> special;
};

// Running state of row r merged with a chunk's state (theory::entropy_merge
// for (m, S, T); O scaled by the same factors, and never skipped so that a
// NaN in a chunk's O stays NaN, as a rescale by 0 keeps it in one pass).
void fold_row(States& st, std::int64_t r, const ChunkResult& c, std::int64_t cr, bool with_output) {
  st.special[r] = st.special[r] | c.special[cr];
  if (st.special[r]) return;
  const float mc = c.m[cr];
  if (mc == kNegInf) return;  // nothing visible to the row in the chunk
  float* o = st.o.data() + r * st.dop;
  const float* oc = c.o + cr * c.dop;
  const float m = st.m[r];
  if (m == kNegInf) {
    st.m[r] = mc;
    st.S[r] = c.S[cr];
    st.T[r] = c.T[cr];
    if (with_output) std::copy(oc, oc + st.dop, o);
    return;
  }
  if (m >= mc) {
    const float dlt = mc - m;
    const float b = std::exp(dlt);
    if (b != 0.0f) {
      st.S[r] = st.S[r] + b * c.S[cr];
      st.T[r] = st.T[r] + b * (c.T[cr] + dlt * c.S[cr]);
    }
    if (with_output)
      for (std::int64_t x = 0; x < st.dop; ++x) o[x] = o[x] + b * oc[x];
  } else {
    const float dlt = m - mc;
    const float a = std::exp(dlt);
    if (a == 0.0f) {
      st.S[r] = c.S[cr];
      st.T[r] = c.T[cr];
    } else {
      st.T[r] = a * (st.T[r] + dlt * st.S[r]) + c.T[cr];
      st.S[r] = a * st.S[r] + c.S[cr];
    }
    st.m[r] = mc;
    if (with_output)
      for (std::int64_t x = 0; x < st.dop; ++x) o[x] = a * o[x] + oc[x];
  }
}

// The states before the first chunk: empty, or the sink (a finite sink is an
// item with value 0: m = beta sink, S = 1, T = 0, O = 0; a NaN or +inf sink
// makes the row special).
void init_states(States& st, const std::vector<Group>& groups, bool use_beta, bool with_output) {
  for (const Group& g : groups) {
    const std::int64_t nq = g.heads[0].nq;
    for (std::int64_t r = 0; r < g.rows; ++r) {
      const AttentionHeadArgs& h = g.heads[r / nq];
      const std::size_t i = static_cast<std::size_t>(g.row0 + r);
      const float beta = use_beta ? st.beta[i] : 1.0f;
      st.m[i] = kNegInf;
      st.S[i] = 0.0f;
      st.T[i] = 0.0f;
      st.special[i] = h.has_sink && (std::isnan(h.sink) || (h.sink > 0 && std::isinf(h.sink)));
      if (h.has_sink && std::isfinite(h.sink)) {
        st.m[i] = beta * h.sink;
        st.S[i] = 1.0f;
      }
    }
  }
  if (with_output) std::fill(st.o.begin(), st.o.end(), 0.0f);
}

// One pass over every bundle's chunks, in waves of at most `wave` items:
// the items of a wave in parallel, then each bundle's items of the wave
// merged into its rows' states in chunk order.
bool run_pass(const std::vector<Bundle>& bundles, std::int64_t nitems, States& st, bool use_beta,
              bool with_output, std::int64_t wave, Wave& w) {
  std::atomic<bool> ok{true};
  // item -> bundle (items are bundle-major)
  std::vector<std::int32_t> item_bundle(static_cast<std::size_t>(nitems));
  for (std::size_t u = 0; u < bundles.size(); ++u)
    for (std::int64_t i = 0; i < bundles[u].nitems; ++i)
      item_bundle[static_cast<std::size_t>(bundles[u].item0 + i)] = static_cast<std::int32_t>(u);
#ifdef _OPENMP
#pragma omp parallel
#endif
  for (std::int64_t w0 = 0; w0 < nitems; w0 += wave) {
    const std::int64_t w1 = std::min(nitems, w0 + wave);
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
    for (std::int64_t i = w0; i < w1; ++i) {
      if (!ok.load(std::memory_order_relaxed)) continue;
      const Bundle& u = bundles[static_cast<std::size_t>(item_bundle[static_cast<std::size_t>(i)])];
      const std::int64_t chunk = u.c0 + (i - u.item0);
      DecodeItem it;
      it.heads = u.heads;
      it.nheads = u.nheads;
      it.ngroups = u.ngroups;
      it.rows = u.rows;
      it.kb = chunk * cpu_attention_decode_chunk;
      it.ke = it.kb + cpu_attention_decode_chunk;
      it.use_beta = use_beta;
      it.with_output = with_output;
      it.beta = st.beta.data() + u.row0;
      try {
        thread_local DecodeScratch sc;
        const ChunkResult res = w.slot(i - w0);
        if (!HWY_DYNAMIC_DISPATCH(DecodeChunk)(it, sc, res, false))
          HWY_DYNAMIC_DISPATCH(DecodeChunk)(it, sc, res, true);
      } catch (...) {
        ok = false;
      }
    }
    // Bundles with items in [w0, w1): merged in chunk order.
    const std::int64_t u0 = item_bundle[static_cast<std::size_t>(w0)];
    const std::int64_t u1 = item_bundle[static_cast<std::size_t>(w1 - 1)] + 1;
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
    for (std::int64_t ui = u0; ui < u1; ++ui) {
      const Bundle& u = bundles[static_cast<std::size_t>(ui)];
      const std::int64_t i0 = std::max(w0, u.item0), i1 = std::min(w1, u.item0 + u.nitems);
      for (std::int64_t i = i0; i < i1; ++i) {
        const ChunkResult c = w.slot(i - w0);
        for (std::int64_t r = 0; r < u.rows; ++r) fold_row(st, u.row0 + r, c, r, with_output);
      }
    }
  }
  return ok;
}

sa_status decode(const AttentionHeadArgs* heads, const std::size_t* starts, std::int64_t ngroups) {
  if (ngroups <= 0) return SA_OK;
  const AttentionHeadArgs& a0 = heads[starts[0]];
  const std::int64_t dv = a0.dv;
  const bool adaptive = a0.adaptive;
  States st;
  st.dop = (dv + kVecPad - 1) / kVecPad * kVecPad;
  std::vector<Group> groups(static_cast<std::size_t>(ngroups));
  std::int64_t rows_total = 0, group_items = 0;
  for (std::int64_t gi = 0; gi < ngroups; ++gi) {
    Group& g = groups[static_cast<std::size_t>(gi)];
    g.heads = heads + starts[gi];
    g.nheads = static_cast<std::int64_t>(starts[gi + 1] - starts[gi]);
    const AttentionHeadArgs& h = g.heads[0];
    g.rows = g.nheads * h.nq;
    g.row0 = rows_total;
    rows_total += g.rows;
    // Chunks holding keys some query can see ([i + off - wl, i + off + wr]).
    std::int64_t kbeg = 0, kend = h.nk;
    if (h.window_right >= 0) kend = std::min(kend, (h.nq - 1) + h.diag_offset + h.window_right + 1);
    if (h.window_left >= 0) kbeg = std::max(kbeg, h.diag_offset - h.window_left);
    g.c0 = kbeg / cpu_attention_decode_chunk;
    g.c1 =
        kend > kbeg ? (kend + cpu_attention_decode_chunk - 1) / cpu_attention_decode_chunk : g.c0;
    group_items += g.c1 - g.c0;
  }
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  // Bundles: as many groups of a sequence as keep >= 4 items per thread, at
  // most cpu_attention_decode_max_rows rows. The bundling changes no result
  // (each group's arithmetic is its own), only the order memory is read in.
  const std::int64_t bundle_cap = std::max<std::int64_t>(1, group_items / (4 * threads));
  std::vector<Bundle> bundles;
  std::int64_t nitems = 0, rows_max = 0;
  for (std::int64_t gi = 0; gi < ngroups; ++gi) {
    const Group& g = groups[static_cast<std::size_t>(gi)];
    if (!bundles.empty()) {
      Bundle& u = bundles.back();
      const Group& prev = groups[static_cast<std::size_t>(gi - 1)];
      if (u.ngroups < bundle_cap && u.rows + g.rows <= cpu_attention_decode_max_rows &&
          same_sequence(prev, g)) {
        ++u.ngroups;
        u.rows += g.rows;
        rows_max = std::max(rows_max, u.rows);
        continue;
      }
    }
    if (!bundles.empty()) nitems += bundles.back().nitems;
    Bundle u{g.heads, g.nheads, 1, g.rows, g.row0, g.c0, nitems, g.c1 - g.c0};
    bundles.push_back(u);
    rows_max = std::max(rows_max, u.rows);
  }
  nitems += bundles.back().nitems;
  const auto nrows = static_cast<std::size_t>(rows_total);
  st.m.resize(nrows);
  st.S.resize(nrows);
  st.T.resize(nrows);
  st.special.resize(nrows);
  st.beta.assign(nrows, 1.0f);
  st.o.resize(nrows * static_cast<std::size_t>(st.dop));
  // A wave: enough items to keep every thread busy, its results within ~16 MB.
  Wave w;
  w.rows_max = rows_max;
  w.dop = st.dop;
  const std::int64_t slot_bytes = rows_max * (st.dop + 4) * 4;
  const std::int64_t wave = std::max<std::int64_t>(
      4 * threads, std::min<std::int64_t>(256, (std::int64_t{16} << 20) / slot_bytes));
  w.reserve(std::min(wave, std::max<std::int64_t>(nitems, 1)));

  // Adaptive temperature: pass 1 at beta = 1 gives H and beta(H) per row; a
  // row that pass 1 finds special is finished by the exact scalar path.
  std::vector<float> H1;
  std::vector<std::uint8_t> special1;
  if (adaptive) {
    init_states(st, groups, false, false);
    if (nitems > 0 && !run_pass(bundles, nitems, st, false, false, wave, w))
      return SA_INTERNAL_ERROR;
    H1.resize(nrows);
    special1.resize(nrows);
    for (std::size_t r = 0; r < nrows; ++r) {
      special1[r] = st.special[r];
      H1[r] = theory::entropy_of(theory::EntropyState<float>{st.m[r], st.S[r], st.T[r]});
      st.beta[r] = st.special[r]
                       ? 1.0f
                       : static_cast<float>(theory::adaptive_beta(static_cast<double>(H1[r])));
    }
  }
  init_states(st, groups, adaptive, true);
  if (nitems > 0 && !run_pass(bundles, nitems, st, adaptive, true, wave, w))
    return SA_INTERNAL_ERROR;

  // Outputs: O / S with the columns back in order.
  std::vector<std::int32_t> pos(static_cast<std::size_t>(dv));
  HWY_DYNAMIC_DISPATCH(DecodeColumnPositions)(a0.qkv_dtype, dv, pos.data());
  std::atomic<bool> ok{true};
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (ngroups > 1)
#endif
  for (std::int64_t gi = 0; gi < ngroups; ++gi) {
    try {
      const Group& g = groups[static_cast<std::size_t>(gi)];
      const std::int64_t nq = g.heads[0].nq;
      std::vector<float> row(static_cast<std::size_t>(dv));
      for (std::int64_t r = 0; r < g.rows; ++r) {
        const AttentionHeadArgs& h = g.heads[r / nq];
        const std::int64_t i = r % nq;
        const std::size_t x = static_cast<std::size_t>(g.row0 + r);
        float lse = kNegInf, H = 0.0f, beta = 1.0f;
        if (st.special[x] || (adaptive && special1[x])) {
          cpu_attention_special_row(h, i, row.data(), &lse, &H, &beta);
        } else if (st.m[x] == kNegInf) {  // nothing visible and no sink
          std::fill(row.begin(), row.end(), 0.0f);
        } else {
          const float S = st.S[x];
          const float* orow = st.o.data() + x * static_cast<std::size_t>(st.dop);
          for (std::int64_t c = 0; c < dv; ++c)
            row[static_cast<std::size_t>(c)] = orow[pos[static_cast<std::size_t>(c)]] / S;
          lse = st.m[x] + std::log(S);
          H = adaptive ? H1[x]
                       : theory::entropy_of(theory::EntropyState<float>{st.m[x], S, st.T[x]});
          beta = adaptive ? st.beta[x] : 1.0f;
        }
        store_row(h, i, row.data(), lse, H, beta);
      }
    } catch (...) {
      ok = false;
    }
  }
  return ok ? SA_OK : SA_INTERNAL_ERROR;
}

}  // namespace

sa_status cpu_attention_decode(const AttentionHeadArgs* heads, const std::size_t* starts,
                               std::int64_t ngroups) {
  cpu::apply_cpu_isa_limit();  // SA_CPU_MAX_ISA, before the first dispatch
  try {
    return decode(heads, starts, ngroups);
  } catch (const std::bad_alloc&) {
    return SA_INTERNAL_ERROR;
  }
}

sa_status cpu_attention_decode_group(const AttentionHeadArgs* heads, std::int64_t nheads) {
  const std::size_t starts[2] = {0, static_cast<std::size_t>(nheads)};
  return cpu_attention_decode(heads, starts, 1);
}

}  // namespace sa::kernels
#endif  // HWY_ONCE
