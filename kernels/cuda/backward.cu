// Backward passes (interface v2) on the GPU: softmax_backward,
// log_softmax_backward and attention_backward, in FlashAttention-2's
// backward structure on CUDA cores, deterministic by construction (no
// atomics; every sum is taken in one fixed order that depends neither on the
// grid, nor on the scheduling, nor on the other rows of the batch).
//
// Rows: one block of kThreads threads per row (grid-stride loop over rows).
// Thread t sums the row's terms t, t + 128, ... (<dy, y> by fmaf, or sum dy
// for log-softmax) in float32, then a fixed binary tree in shared memory adds
// the 128 parts; dx = y (dy - S) / theta, or dy - exp(y) S (one fmaf) / theta,
// rounded once to the storage type. NaN anywhere in a row's y or dy makes the
// row NaN (kernel.h). Error: the float32 sum of n terms in a tree of depth
// ceil(n / 128) + 7, within the (n + 1) u sum|terms| the gate's
// backward_rounding rule allows; expf is CUDA's (2 ulp).
//
// Attention, from the forward's out and lse (kernel.h's formulas):
//   1. pre-pass: D_i = dout_i . out_i (one thread per query row, an fmaf
//      chain over the value dim in order), into a device workspace indexed
//      like lse;
//   2. dQ pass: work item = (sequence, query head, tile of kRows = 16 query
//      rows), eight threads per row as in the forward (attention_v2.cu). The
//      Q and dout rows are staged once; the key tiles of `tile` keys (64, or
//      32 when a head dim exceeds 128), aligned at multiples of the tile from
//      key 0, from the first any row can see to the last, stage K and V. Thread g
//      of row i recomputes, for keys g, g + 8, ... of the tile, the score
//      exactly as the forward does (fmaf chain, scale, softcap, ALiBi, masks
//      last), p = exp(s - lse_i), dp = dout_i . v_j (fmaf chain), and
//      ds = p (dp - D_i) (1 - tanh^2) into shared memory; then it accumulates
//      dq_i's columns g, g + 8, ... over the tile's visible keys in key order
//      (one fmaf each). dq = scale * acc, one rounding.
//   3. dK/dV pass: work item = (sequence, key/value head, tile of 16 keys),
//      eight threads per key. For each query head of the key/value head's
//      group in order (GQA's sum), and each query tile that can see the
//      item's keys, in order: stage Q, dout, lse and D of `tile` query rows;
//      thread g of key j recomputes p and ds for queries g, g + 8, ...; then
//      dv_j += p_ij dout_i and dk_j += ds_ij q_i over the visible queries in
//      order (fmaf). dk = scale * acc.
//   4. d(sink)[h] = -sum_i exp(sink_h - lse_i) D_i: one block per head, each
//      thread an fmaf chain over rows t, t + 128, ..., then a fixed tree.
// A row with lse = -inf (every key masked, no sink) contributes nothing;
// masked keys' q.k, values and dout . v are never formed, so NaN or huge
// values under a mask change nothing; keys no query sees get dk = dv = 0.
// float32, bfloat16 and float16 inputs (float32 arithmetic), out/dout in the
// forward's out_dtype, gradients in qkv_dtype. No fp8, no adaptive (kernel.h).
// Everything a rounding depends on is explicit (fmaf where a fused
// multiply-add is meant), so the host SIMT emulator (emulation.hpp) runs the
// same rounding steps; only expf and tanhf differ (CUDA's vs the host's).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/plan.hpp"

namespace sa::kernels::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kTpr = 8;                    // threads per query row (dQ) or key (dK/dV)
constexpr int kRows = kThreads / kTpr;     // rows (dQ) or keys (dK/dV) per work item
constexpr int kMaxHead = 256;              // largest head_dim, head_dim_v
constexpr int kMaxCols = kMaxHead / kTpr;  // accumulators per thread
constexpr int kMaxTile = 64;
constexpr int kMaxPer = kMaxTile / kTpr;  // scores per thread and tile
static_assert(32 % kTpr == 0, "a row's threads lie in one warp");

__device__ __forceinline__ float ld(int t, const void* p, std::int64_t i) {
  if (t == SA_BF16) return sa::float_from_bf16(static_cast<const std::uint16_t*>(p)[i]);
  if (t == SA_F16) return sa::float_from_f16(static_cast<const std::uint16_t*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

__device__ __forceinline__ void st(int t, void* p, std::int64_t i, float x) {
  if (t == SA_BF16)
    static_cast<std::uint16_t*>(p)[i] = sa::bf16_from_float(x);
  else if (t == SA_F16)
    static_cast<std::uint16_t*>(p)[i] = sa::f16_from_float(x);
  else
    static_cast<float*>(p)[i] = x;
}

// ---- rows ----

__global__ void __launch_bounds__(kThreads)
    rows_backward_kernel(int log, int t, sa_rows s, float inv, int unit, const void* y,
                         const void* dy, void* dx) {
  SA_EXTERN_SHARED(float, red);  // kThreads parts
  const int tid = static_cast<int>(threadIdx.x);
  for (std::int64_t r = blockIdx.x; r < s.rows; r += gridDim.x) {
    const std::int64_t io = r * s.in_stride, oo = r * s.out_stride;
    float part = 0.f;
    bool nan = false;
    for (std::int64_t i = tid; i < s.n; i += kThreads) {
      const float yi = ld(t, y, io + i), gi = ld(t, dy, io + i);
      part = log ? part + gi : fmaf(yi, gi, part);
      nan = nan || yi != yi;
    }
    // Also the barrier after the previous row's last read of red[0].
    nan = __syncthreads_or(nan ? 1 : 0) != 0;
    red[tid] = part;
    __syncthreads();
    for (int o = kThreads / 2; o > 0; o >>= 1) {
      if (tid < o) red[tid] = red[tid] + red[tid + o];
      __syncthreads();
    }
    const float S = nan ? qnan() : red[0];
    for (std::int64_t i = tid; i < s.n; i += kThreads) {
      const float yi = ld(t, y, io + i), gi = ld(t, dy, io + i);
      const float v = log ? fmaf(-expf(yi), S, gi) : yi * (gi - S);
      st(t, dx, oo + i, unit ? v : v * inv);
    }
  }
}

// ---- attention ----

struct BwdArgs {
  int in_t, out_t;
  std::int64_t batch, heads_q, heads_kv, group, seqlen_q, seqlen_k, d, dv, total_q;
  const std::int32_t* cu_q;
  const std::int32_t* cu_k;
  const void* q;
  const void* k;
  const void* v;
  const void* out;
  const void* dout;
  void* dq;
  void* dk;
  void* dvv;
  std::int64_t q_b, q_h, q_s, k_b, k_h, k_s, v_b, v_h, v_s, o_b, o_h, o_s, g_b, g_h, g_s;
  std::int64_t dq_b, dq_h, dq_s, dk_b, dk_h, dk_s, dv_b, dv_h, dv_s;
  const float* lse;
  float* D;  // workspace, indexed like lse
  const std::uint8_t* key_padding;
  float scale, softcap;
  const float* alibi;
  const float* sinks;
  float* dsinks;
  int top_left;
  std::int64_t window_left, window_right;  // -1 unbounded; causal: window_right = 0
  std::int64_t tile;                       // keys (dQ pass) or queries (dK/dV pass) per tile
  std::int64_t q_ld, k_ld, v_ld, o_ld;     // odd row lengths of staged tiles
  std::int64_t q_items, k_items;           // 16-row tiles per (sequence, head)
  std::int64_t work_q, work_k;
};

struct Seq {
  std::int64_t q0, k0, Lq, Lk, off, pbase;
};

__device__ __forceinline__ Seq seq_of(const BwdArgs& a, std::int64_t b) {
  Seq s{0, 0, a.seqlen_q, a.seqlen_k, 0, b * a.seqlen_k};
  if (a.cu_q) {
    s.q0 = a.cu_q[b];
    s.Lq = a.cu_q[b + 1] - s.q0;
    s.k0 = a.cu_k[b];
    s.Lk = a.cu_k[b + 1] - s.k0;
    s.pbase = s.k0;
  }
  s.off = a.top_left ? 0 : s.Lk - s.Lq;
  return s;
}

// Index of query row i of sequence b, head h in lse (and D).
__device__ __forceinline__ std::int64_t slot_of(const BwdArgs& a, std::int64_t b, std::int64_t h,
                                                const Seq& s, std::int64_t i) {
  return a.cu_q ? h * a.total_q + s.q0 + i : (b * a.heads_q + h) * a.seqlen_q + i;
}

// Element offset of row i of sequence b, head h in a tensor with strides (sb, sh, ss).
__device__ __forceinline__ std::int64_t at(const BwdArgs& a, std::int64_t sb, std::int64_t sh,
                                           std::int64_t ss, std::int64_t b, std::int64_t row0,
                                           std::int64_t i, std::int64_t h) {
  return a.cu_q ? (row0 + i) * ss + h * sh : b * sb + h * sh + i * ss;
}

// The forward's masks: key padding, window, causal (window_right = 0).
__device__ __forceinline__ bool visible(const BwdArgs& a, const Seq& s, std::int64_t i,
                                        std::int64_t key) {
  if (key >= s.Lk) return false;
  if (a.key_padding && a.key_padding[s.pbase + key] == 0) return false;
  const std::int64_t diag = i + s.off;
  if (a.window_right >= 0 && key > diag + a.window_right) return false;
  if (a.window_left >= 0 && key < diag - a.window_left) return false;
  return true;
}

// The forward's score of staged rows qr, kr (attention_v2.cu, step b), and
// the softcap's derivative 1 - tanh^2 (1 without a softcap).
__device__ __forceinline__ float score(const BwdArgs& a, const float* qr, const float* kr,
                                       std::int64_t diag, std::int64_t key, std::int64_t h,
                                       float* dcap) {
  float dot = 0.f;
  for (std::int64_t c = 0; c < a.d; ++c) dot = fmaf(qr[c], kr[c], dot);
  float sc = dot * a.scale;
  *dcap = 1.f;
  if (a.softcap > 0.f) {
    const float th = tanhf(sc / a.softcap);
    sc = a.softcap * th;
    *dcap = fmaf(-th, th, 1.f);
  }
  if (a.alibi) {
    const std::int64_t dist = diag > key ? diag - key : key - diag;
    sc = fmaf(-a.alibi[h], static_cast<float>(dist), sc);
  }
  return sc;
}

__device__ __forceinline__ float dot_v(const float* x, const float* y, std::int64_t n) {
  float acc = 0.f;
  for (std::int64_t c = 0; c < n; ++c) acc = fmaf(x[c], y[c], acc);
  return acc;
}

// 1. D_i = dout_i . out_i for every lse slot.
__global__ void __launch_bounds__(kThreads) attention_bwd_d_kernel(BwdArgs a, std::int64_t slots) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * kThreads;
  for (std::int64_t x = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; x < slots;
       x += step) {
    std::int64_t oo, og;
    if (a.cu_q) {
      const std::int64_t h = x / a.total_q, row = x % a.total_q;
      oo = row * a.o_s + h * a.o_h;
      og = row * a.g_s + h * a.g_h;
    } else {
      const std::int64_t i = x % a.seqlen_q, bh = x / a.seqlen_q;
      const std::int64_t h = bh % a.heads_q, b = bh / a.heads_q;
      oo = b * a.o_b + h * a.o_h + i * a.o_s;
      og = b * a.g_b + h * a.g_h + i * a.g_s;
    }
    float D = 0.f;
    for (std::int64_t c = 0; c < a.dv; ++c)
      D = fmaf(ld(a.out_t, a.dout, og + c), ld(a.out_t, a.out, oo + c), D);
    a.D[x] = D;
  }
}

// 4. dsinks[h] = -sum_i exp(sink_h - lse_i) D_i over the head's `per_head` slots.
__global__ void __launch_bounds__(kThreads)
    attention_bwd_sink_kernel(BwdArgs a, std::int64_t per_head) {
  SA_EXTERN_SHARED(float, red);
  const int tid = static_cast<int>(threadIdx.x);
  for (std::int64_t h = blockIdx.x; h < a.heads_q; h += gridDim.x) {
    const float sink = a.sinks[h];
    float part = 0.f;
    for (std::int64_t x = tid; x < per_head; x += kThreads) {
      const std::int64_t slot =
          a.cu_q ? h * a.total_q + x
                 : (x / a.seqlen_q * a.heads_q + h) * a.seqlen_q + x % a.seqlen_q;
      const float L = a.lse[slot];
      if (L == neg_inf()) continue;
      part = fmaf(-expf(sink - L), a.D[slot], part);
    }
    __syncthreads();  // the previous head's red[0] has been read
    red[tid] = part;
    __syncthreads();
    for (int o = kThreads / 2; o > 0; o >>= 1) {
      if (tid < o) red[tid] = red[tid] + red[tid + o];
      __syncthreads();
    }
    if (tid == 0) a.dsinks[h] = red[0];
  }
}

// 2. dQ.
__global__ void __launch_bounds__(kThreads) attention_bwd_dq_kernel(BwdArgs a) {
  SA_EXTERN_SHARED(float, smem);
  const int Bc = static_cast<int>(a.tile);
  const int kpt = Bc / kTpr;
  float* Qs = smem;               // kRows x d
  float* Gs = Qs + kRows * a.d;   // kRows x dv (dout)
  float* Ks = Gs + kRows * a.dv;  // Bc x k_ld
  float* Vs = Ks + Bc * a.k_ld;   // Bc x v_ld
  float* dS = Vs + Bc * a.v_ld;   // kRows x Bc
  auto* Vis = reinterpret_cast<unsigned char*>(dS + kRows * Bc);
  const int tid = static_cast<int>(threadIdx.x);
  const int r = tid / kTpr, g = tid % kTpr;
  for (std::int64_t w = blockIdx.x; w < a.work_q; w += gridDim.x) {
    const std::int64_t qt = w % a.q_items, bh = w / a.q_items;
    const std::int64_t h = bh % a.heads_q, b = bh / a.heads_q, hk = h / a.group;
    const Seq s = seq_of(a, b);
    const std::int64_t i0 = qt * kRows;
    if (i0 >= s.Lq) continue;  // uniform over the block
    const std::int64_t ilast = std::min<std::int64_t>(i0 + kRows, s.Lq) - 1;
    std::int64_t lo = 0, hi = s.Lk;
    if (a.window_left >= 0) lo = std::max<std::int64_t>(0, i0 + s.off - a.window_left);
    if (a.window_right >= 0) hi = std::min<std::int64_t>(s.Lk, ilast + s.off + a.window_right + 1);
    const std::int64_t first = lo / Bc * Bc;
    const std::int64_t qbase = at(a, a.q_b, a.q_h, a.q_s, b, s.q0, 0, h);
    const std::int64_t gbase = at(a, a.g_b, a.g_h, a.g_s, b, s.q0, 0, h);
    const std::int64_t kbase = at(a, a.k_b, a.k_h, a.k_s, b, s.k0, 0, hk);
    const std::int64_t vbase = at(a, a.v_b, a.v_h, a.v_s, b, s.k0, 0, hk);

    __syncthreads();  // the previous item is done with shared memory
    for (std::int64_t idx = tid; idx < kRows * a.d; idx += kThreads) {
      const std::int64_t i = i0 + idx / a.d, c = idx % a.d;
      Qs[idx] = i < s.Lq ? ld(a.in_t, a.q, qbase + i * a.q_s + c) : 0.f;
    }
    for (std::int64_t idx = tid; idx < kRows * a.dv; idx += kThreads) {
      const std::int64_t i = i0 + idx / a.dv, c = idx % a.dv;
      Gs[idx] = i < s.Lq ? ld(a.out_t, a.dout, gbase + i * a.g_s + c) : 0.f;
    }
    const std::int64_t i = i0 + r;
    bool live = i < s.Lq;
    float L = 0.f, D = 0.f;
    if (live) {
      L = a.lse[slot_of(a, b, h, s, i)];
      D = a.D[slot_of(a, b, h, s, i)];
      live = L != neg_inf();  // every key masked, no sink: nothing flows back
    }
    const std::int64_t diag = i + s.off;
    float acc[kMaxCols];
#pragma unroll
    for (int y = 0; y < kMaxCols; ++y) acc[y] = 0.f;

    for (std::int64_t kt = first; kt < hi; kt += Bc) {
      __syncthreads();  // every thread is done with the previous K, V tiles
      for (std::int64_t idx = tid; idx < Bc * a.d; idx += kThreads) {
        const std::int64_t j = idx / a.d, c = idx % a.d, key = kt + j;
        Ks[j * a.k_ld + c] = key < s.Lk ? ld(a.in_t, a.k, kbase + key * a.k_s + c) : 0.f;
      }
      for (std::int64_t idx = tid; idx < Bc * a.dv; idx += kThreads) {
        const std::int64_t j = idx / a.dv, c = idx % a.dv, key = kt + j;
        Vs[j * a.v_ld + c] = key < s.Lk ? ld(a.in_t, a.v, vbase + key * a.v_s + c) : 0.f;
      }
      __syncthreads();
#pragma unroll
      for (int x = 0; x < kMaxPer; ++x) {
        if (x >= kpt) continue;
        const int j = g + kTpr * x;
        const std::int64_t key = kt + j;
        const bool ok = live && visible(a, s, i, key);
        float ds = 0.f;
        if (ok) {
          float dcap;
          const float sc = score(a, Qs + r * a.d, Ks + j * a.k_ld, diag, key, h, &dcap);
          const float p = expf(sc - L);
          const float dp = dot_v(Gs + r * a.dv, Vs + j * a.v_ld, a.dv);
          ds = p * (dp - D) * dcap;
        }
        dS[r * Bc + j] = ds;
        Vis[r * Bc + j] = ok ? 1 : 0;
      }
      __syncthreads();
      for (int j = 0; j < Bc; ++j) {
        if (!Vis[r * Bc + j]) continue;
        const float ds = dS[r * Bc + j];
        const float* kr = Ks + j * a.k_ld;
#pragma unroll
        for (int y = 0; y < kMaxCols; ++y) {
          const std::int64_t c = g + kTpr * y;
          if (c < a.d) acc[y] = fmaf(ds, kr[c], acc[y]);
        }
      }
    }
    if (i >= s.Lq) continue;  // the next item starts with a barrier every thread reaches
    const std::int64_t o = at(a, a.dq_b, a.dq_h, a.dq_s, b, s.q0, i, h);
#pragma unroll
    for (int y = 0; y < kMaxCols; ++y) {
      const std::int64_t c = g + kTpr * y;
      if (c < a.d) st(a.in_t, a.dq, o + c, acc[y] * a.scale);
    }
  }
}

// 3. dK and dV.
__global__ void __launch_bounds__(kThreads) attention_bwd_dkdv_kernel(BwdArgs a) {
  SA_EXTERN_SHARED(float, smem);
  const int Bq = static_cast<int>(a.tile);
  const int qpt = Bq / kTpr;
  float* Ks = smem;               // kRows x d (this item's keys)
  float* Vs = Ks + kRows * a.d;   // kRows x dv
  float* Qs = Vs + kRows * a.dv;  // Bq x q_ld
  float* Gs = Qs + Bq * a.q_ld;   // Bq x o_ld (dout)
  float* Ls = Gs + Bq * a.o_ld;   // Bq lse
  float* Ds = Ls + Bq;            // Bq D
  float* Ps = Ds + Bq;            // kRows x Bq
  float* dS = Ps + kRows * Bq;    // kRows x Bq
  auto* Vis = reinterpret_cast<unsigned char*>(dS + kRows * Bq);
  const int tid = static_cast<int>(threadIdx.x);
  const int r = tid / kTpr, g = tid % kTpr;
  for (std::int64_t w = blockIdx.x; w < a.work_k; w += gridDim.x) {
    const std::int64_t kt = w % a.k_items, bh = w / a.k_items;
    const std::int64_t hk = bh % a.heads_kv, b = bh / a.heads_kv;
    const Seq s = seq_of(a, b);
    const std::int64_t j0 = kt * kRows;
    if (j0 >= s.Lk) continue;  // uniform over the block
    const std::int64_t jlast = std::min<std::int64_t>(j0 + kRows, s.Lk) - 1;
    // Queries that can see any key of the item: [qlo, qhi).
    std::int64_t qlo = 0, qhi = s.Lq;
    if (a.window_right >= 0) qlo = std::max<std::int64_t>(0, j0 - s.off - a.window_right);
    if (a.window_left >= 0) qhi = std::min<std::int64_t>(s.Lq, jlast - s.off + a.window_left + 1);
    const std::int64_t first = qlo / Bq * Bq;
    const std::int64_t kbase = at(a, a.k_b, a.k_h, a.k_s, b, s.k0, 0, hk);
    const std::int64_t vbase = at(a, a.v_b, a.v_h, a.v_s, b, s.k0, 0, hk);

    __syncthreads();  // the previous item is done with shared memory
    for (std::int64_t idx = tid; idx < kRows * a.d; idx += kThreads) {
      const std::int64_t key = j0 + idx / a.d, c = idx % a.d;
      Ks[idx] = key < s.Lk ? ld(a.in_t, a.k, kbase + key * a.k_s + c) : 0.f;
    }
    for (std::int64_t idx = tid; idx < kRows * a.dv; idx += kThreads) {
      const std::int64_t key = j0 + idx / a.dv, c = idx % a.dv;
      Vs[idx] = key < s.Lk ? ld(a.in_t, a.v, vbase + key * a.v_s + c) : 0.f;
    }
    const std::int64_t j = j0 + r;
    float ak[kMaxCols], av[kMaxCols];
#pragma unroll
    for (int y = 0; y < kMaxCols; ++y) ak[y] = av[y] = 0.f;

    for (std::int64_t h = hk * a.group; h < (hk + 1) * a.group; ++h) {
      const std::int64_t qbase = at(a, a.q_b, a.q_h, a.q_s, b, s.q0, 0, h);
      const std::int64_t gbase = at(a, a.g_b, a.g_h, a.g_s, b, s.q0, 0, h);
      for (std::int64_t qt0 = first; qt0 < qhi; qt0 += Bq) {
        __syncthreads();  // every thread is done with the previous query tile
        for (std::int64_t idx = tid; idx < Bq * a.d; idx += kThreads) {
          const std::int64_t ii = idx / a.d, c = idx % a.d, i = qt0 + ii;
          Qs[ii * a.q_ld + c] = i < s.Lq ? ld(a.in_t, a.q, qbase + i * a.q_s + c) : 0.f;
        }
        for (std::int64_t idx = tid; idx < Bq * a.dv; idx += kThreads) {
          const std::int64_t ii = idx / a.dv, c = idx % a.dv, i = qt0 + ii;
          Gs[ii * a.o_ld + c] = i < s.Lq ? ld(a.out_t, a.dout, gbase + i * a.g_s + c) : 0.f;
        }
        for (std::int64_t ii = tid; ii < Bq; ii += kThreads) {
          const std::int64_t i = qt0 + ii;
          Ls[ii] = i < s.Lq ? a.lse[slot_of(a, b, h, s, i)] : neg_inf();
          Ds[ii] = i < s.Lq ? a.D[slot_of(a, b, h, s, i)] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int x = 0; x < kMaxPer; ++x) {
          if (x >= qpt) continue;
          const int ii = g + kTpr * x;
          const std::int64_t i = qt0 + ii;
          const bool ok = i < s.Lq && Ls[ii] != neg_inf() && visible(a, s, i, j);
          float p = 0.f, ds = 0.f;
          if (ok) {
            float dcap;
            const float sc = score(a, Qs + ii * a.q_ld, Ks + r * a.d, i + s.off, j, h, &dcap);
            p = expf(sc - Ls[ii]);
            const float dp = dot_v(Gs + ii * a.o_ld, Vs + r * a.dv, a.dv);
            ds = p * (dp - Ds[ii]) * dcap;
          }
          Ps[r * Bq + ii] = p;
          dS[r * Bq + ii] = ds;
          Vis[r * Bq + ii] = ok ? 1 : 0;
        }
        __syncthreads();
        for (int ii = 0; ii < Bq; ++ii) {
          if (!Vis[r * Bq + ii]) continue;
          const float p = Ps[r * Bq + ii], ds = dS[r * Bq + ii];
          const float* qr = Qs + ii * a.q_ld;
          const float* gr = Gs + ii * a.o_ld;
#pragma unroll
          for (int y = 0; y < kMaxCols; ++y) {
            const std::int64_t c = g + kTpr * y;
            if (c < a.d) ak[y] = fmaf(ds, qr[c], ak[y]);
            if (c < a.dv) av[y] = fmaf(p, gr[c], av[y]);
          }
        }
      }
    }
    if (j >= s.Lk) continue;  // the next item starts with a barrier every thread reaches
    const std::int64_t ok = at(a, a.dk_b, a.dk_h, a.dk_s, b, s.k0, j, hk);
    const std::int64_t ov = at(a, a.dv_b, a.dv_h, a.dv_s, b, s.k0, j, hk);
#pragma unroll
    for (int y = 0; y < kMaxCols; ++y) {
      const std::int64_t c = g + kTpr * y;
      if (c < a.d) st(a.in_t, a.dk, ok + c, ak[y] * a.scale);
      if (c < a.dv) st(a.in_t, a.dvv, ov + c, av[y]);
    }
  }
}

sa_status finish(const char* what, std::string& error) {
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return host::cuda_failure(e, what, error);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
    return host::cuda_failure(e, what, error);
  return SA_OK;
}

template <class K>
sa_status allow_shared(K kernel, std::size_t bytes, std::string& error) {
  if (bytes <= 48 * 1024) return SA_OK;
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(bytes));
      e != cudaSuccess)
    return host::cuda_failure(e, "attention_backward: shared memory for the head dims", error);
  return SA_OK;
}

}  // namespace

sa_status launch_rows_backward(bool log, sa_dtype dtype, const sa_rows& shape, const void* y,
                               const void* dy, void* dx, std::string& error) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  for (auto [ptr, name] : {std::pair<const void*, const char*>{y, "y"}, {dy, "dy"}, {dx, "dx"}})
    if (sa_status s = host::require_device(ptr, op, name, error); s != SA_OK) return s;
  if (shape.rows == 0) return SA_OK;
  const float inv = static_cast<float>(1.0 / shape.temperature);
  SA_LAUNCH(static_cast<unsigned>(grid_for(shape.rows, 1)), kThreads, kThreads * sizeof(float),
            rows_backward_kernel)
  (log ? 1 : 0, static_cast<int>(dtype), shape, inv, shape.temperature == 1.0 ? 1 : 0, y, dy, dx);
  return finish(op, error);
}

sa_status launch_attention_backward(const sa_attention_backward_args& ba, std::string& error) {
  const char* op = "attention_backward";
  const sa_attention_v2_args& x = *ba.forward;
  for (auto [ptr, name] : {std::pair<const void*, const char*>{x.q.data, "args->forward->q.data"},
                           {x.k.data, "args->forward->k.data"},
                           {x.v.data, "args->forward->v.data"},
                           {x.out, "args->forward->out"},
                           {x.lse, "args->forward->lse"},
                           {x.key_padding_mask, "args->forward->key_padding_mask"},
                           {x.alibi_slopes, "args->forward->alibi_slopes"},
                           {x.sinks, "args->forward->sinks"},
                           {x.cu_seqlens_q, "args->forward->cu_seqlens_q"},
                           {x.cu_seqlens_k, "args->forward->cu_seqlens_k"},
                           {ba.dout.data, "args->dout.data"},
                           {ba.dq.data, "args->dq.data"},
                           {ba.dk.data, "args->dk.data"},
                           {ba.dv.data, "args->dv.data"},
                           {ba.dsinks, "args->dsinks"}})
    if (sa_status s = host::require_device(ptr, op, name, error); s != SA_OK) return s;
  std::int64_t max_q = x.seqlen_q, max_k = x.seqlen_k, total_q = 0;
  if (x.cu_seqlens_q) {
    const auto n = static_cast<std::size_t>(x.batch + 1);
    std::vector<std::int32_t> cq(n), ck(n);
    if (cudaError_t e = cudaMemcpy(cq.data(), x.cu_seqlens_q, n * 4, cudaMemcpyDeviceToHost);
        e != cudaSuccess)
      return host::cuda_failure(e, "attention_backward: reading cu_seqlens_q", error);
    if (cudaError_t e = cudaMemcpy(ck.data(), x.cu_seqlens_k, n * 4, cudaMemcpyDeviceToHost);
        e != cudaSuccess)
      return host::cuda_failure(e, "attention_backward: reading cu_seqlens_k", error);
    if (std::string why =
            validate_cu_seqlens(cq.data(), ck.data(), x.batch, x.seqlen_q, x.seqlen_k);
        !why.empty()) {
      error = why;
      return SA_INVALID_ARGUMENT;
    }
    max_q = max_k = 0;
    for (std::size_t b = 0; b + 1 < n; ++b) {
      max_q = std::max<std::int64_t>(max_q, cq[b + 1] - cq[b]);
      max_k = std::max<std::int64_t>(max_k, ck[b + 1] - ck[b]);
    }
    total_q = cq[n - 1];
  }
  BwdArgs a{};
  a.in_t = x.qkv_dtype;
  a.out_t = x.out_dtype;
  a.batch = x.batch;
  a.heads_q = x.heads_q;
  a.heads_kv = x.heads_kv;
  a.group = x.heads_q / x.heads_kv;
  a.seqlen_q = x.seqlen_q;
  a.seqlen_k = x.seqlen_k;
  a.d = x.head_dim;
  a.dv = x.head_dim_v;
  a.total_q = total_q;
  a.cu_q = x.cu_seqlens_q;
  a.cu_k = x.cu_seqlens_k;
  a.q = x.q.data, a.k = x.k.data, a.v = x.v.data, a.out = x.out, a.dout = ba.dout.data;
  a.dq = const_cast<void*>(ba.dq.data);
  a.dk = const_cast<void*>(ba.dk.data);
  a.dvv = const_cast<void*>(ba.dv.data);
  a.q_b = x.q.stride_b, a.q_h = x.q.stride_h, a.q_s = x.q.stride_s;
  a.k_b = x.k.stride_b, a.k_h = x.k.stride_h, a.k_s = x.k.stride_s;
  a.v_b = x.v.stride_b, a.v_h = x.v.stride_h, a.v_s = x.v.stride_s;
  a.o_b = x.out_stride_b, a.o_h = x.out_stride_h, a.o_s = x.out_stride_s;
  a.g_b = ba.dout.stride_b, a.g_h = ba.dout.stride_h, a.g_s = ba.dout.stride_s;
  a.dq_b = ba.dq.stride_b, a.dq_h = ba.dq.stride_h, a.dq_s = ba.dq.stride_s;
  a.dk_b = ba.dk.stride_b, a.dk_h = ba.dk.stride_h, a.dk_s = ba.dk.stride_s;
  a.dv_b = ba.dv.stride_b, a.dv_h = ba.dv.stride_h, a.dv_s = ba.dv.stride_s;
  a.lse = x.lse;
  a.key_padding = x.key_padding_mask;
  a.scale = static_cast<float>(x.scale);
  a.softcap = static_cast<float>(x.softcap);
  a.alibi = x.alibi_slopes;
  a.sinks = x.sinks;
  a.dsinks = ba.dsinks;
  a.top_left = x.alignment == SA_ALIGN_TOP_LEFT ? 1 : 0;
  a.window_left = x.window_left;
  a.window_right = x.causal ? 0 : x.window_right;
  a.tile = std::max(a.d, a.dv) <= 128 ? kMaxTile : kMaxTile / 2;
  a.q_ld = a.k_ld = a.d | 1;
  a.v_ld = a.o_ld = a.dv | 1;
  a.q_items = (max_q + kRows - 1) / kRows;
  a.k_items = (max_k + kRows - 1) / kRows;
  a.work_q = a.batch * a.heads_q * a.q_items;
  a.work_k = a.batch * a.heads_kv * a.k_items;
  const std::int64_t slots =
      x.cu_seqlens_q ? a.heads_q * total_q : a.batch * a.heads_q * a.seqlen_q;

  host::Scratch ws;
  if (cudaError_t e = ws.alloc(static_cast<std::size_t>(slots) * sizeof(float)); e != cudaSuccess)
    return host::cuda_failure(e, "attention_backward: workspace for D", error);
  a.D = ws.as<float>();
  if (slots > 0) {
    SA_LAUNCH(static_cast<unsigned>(grid_for(slots, kThreads)), kThreads, 0, attention_bwd_d_kernel)
    (a, slots);
    if (sa_status s = finish("attention_backward (D)", error); s != SA_OK) return s;
  }
  const std::int64_t T = a.tile;
  if (a.work_q > 0) {
    const std::size_t bytes =
        static_cast<std::size_t>(kRows * a.d + kRows * a.dv + T * a.k_ld + T * a.v_ld + kRows * T) *
            sizeof(float) +
        static_cast<std::size_t>(kRows * T);
    if (sa_status s = allow_shared(attention_bwd_dq_kernel, bytes, error); s != SA_OK) return s;
    SA_LAUNCH(static_cast<unsigned>(grid_for(a.work_q, 1)), kThreads, bytes,
              attention_bwd_dq_kernel)
    (a);
    if (sa_status s = finish("attention_backward (dq)", error); s != SA_OK) return s;
  }
  if (a.work_k > 0) {
    const std::size_t bytes = static_cast<std::size_t>(kRows * a.d + kRows * a.dv + T * a.q_ld +
                                                       T * a.o_ld + 2 * T + 2 * kRows * T) *
                                  sizeof(float) +
                              static_cast<std::size_t>(kRows * T);
    if (sa_status s = allow_shared(attention_bwd_dkdv_kernel, bytes, error); s != SA_OK) return s;
    SA_LAUNCH(static_cast<unsigned>(grid_for(a.work_k, 1)), kThreads, bytes,
              attention_bwd_dkdv_kernel)
    (a);
    if (sa_status s = finish("attention_backward (dk, dv)", error); s != SA_OK) return s;
  }
  if (a.sinks) {
    const std::int64_t per_head = x.cu_seqlens_q ? total_q : a.batch * a.seqlen_q;
    SA_LAUNCH(static_cast<unsigned>(grid_for(a.heads_q, 1)), kThreads, kThreads * sizeof(float),
              attention_bwd_sink_kernel)
    (a, per_head);
    if (sa_status s = finish("attention_backward (dsinks)", error); s != SA_OK) return s;
  }
  return SA_OK;
}

}  // namespace sa::kernels::cuda
