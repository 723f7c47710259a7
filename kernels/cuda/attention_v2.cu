// Batched attention forward (interface v2, sa_kernel.attention_v2) on the GPU:
// FlashAttention-2's forward structure on CUDA cores (no tensor cores).
//
// Work item = (sequence b, query head h, query tile of kV2Rows = 16 rows);
// grid-stride loop over the items, one 128-thread block each. Eight threads
// own one query row: thread g of row r scores keys g, g + 8, ... of every key
// tile and accumulates output columns g, g + 8, .... Per item:
//   1. the Q tile is staged in shared memory as float32 (rows past the
//      sequence's end read nothing);
//   2. key tiles of 64 (128 when both head dims are <= 64) keys, aligned at
//      multiples of the tile from key 0, from the first tile any row of the
//      item can see (window_left) to the last (causal / window_right); tail
//      tiles read no key past the sequence's end. Per tile:
//        a. the K tile is staged (float32, odd row stride);
//        b. each thread scores its keys: s = fma chain over the head dim (in
//           order), times scale (q_descale k_descale folded in for fp8), then
//           softcap c tanh(s / c), then ALiBi s - slope |i + off - j| (one
//           fma), masks last (key padding, window, causal, both alignments):
//           a masked key's q.k is never formed;
//        c. online softmax, FlashAttention-2 style: the row's tile max over
//           its 8 threads (NaN-propagating butterfly), m' = max(m, tile max),
//           p_j = exp(s_j - m'); each thread's part of the running S and T
//           (T6's entropy sum, theory.md) is rescaled by alpha = exp(m - m')
//           and gets its keys' terms (the eight parts are added once, after
//           the last tile, as FlashAttention-2 adds its row sums); P and the
//           visibility of each key go to shared memory;
//        d. the V tile replaces K in the same shared buffer;
//        e. every accumulator is rescaled by alpha and gets p_j v_j for the
//           visible keys j in key order (one fma each); masked keys' values
//           are never used (NaN or huge values under a mask change nothing).
//   3. out = acc / S (times v_descale for fp8), rounded once to out_dtype;
//      lse = m + log S, entropy = log S - T / S, beta = 1.
// Sinks start the row's state as one more logit with no value: m = sink,
// S = 1, T = 0. Special rows follow kernel.h: NaN in a visible score or the
// sink makes the row NaN; no visible key and no sink gives out 0, lse -inf,
// entropy 0; +inf scores share the weight (S counts them).
//
// Everything a rounding depends on is explicit (fmaf where a fused
// multiply-add is meant, and no a * b + c left for nvcc to contract;
// conversions by core/bfloat16.hpp and core/float16.hpp's integer code and
// core/fp8.hpp's exact decoding), so that the host SIMT
// emulator (emulation.hpp) runs the same rounding steps; only expf, logf and
// tanhf differ (CUDA's vs the host's, each within a few ulp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "core/fp8.hpp"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/plan.hpp"

namespace sa::kernels::cuda {
namespace {

constexpr int kTpr = kV2ThreadsPerRow;
constexpr int kMaxKeys = static_cast<int>(kV2LargeTile) / kTpr;  // scores per thread and tile
constexpr int kMaxCols = static_cast<int>(kV2MaxHead) / kTpr;    // accumulators per thread
static_assert(kV2Rows * kTpr == kV2Threads, "eight threads per query row");
static_assert(32 % kTpr == 0, "a row's threads lie in one warp");
static_assert(kMaxKeys <= 32, "visibility bits of one thread fit in 32 bits");

struct V2Args {
  int qkv_dtype, out_dtype;
  std::int64_t batch, heads_q, group;  // group = heads_q / heads_kv
  std::int64_t seqlen_q, seqlen_k;     // fixed lengths; varlen: from cu_q / cu_k
  std::int64_t d, dv;
  const std::int32_t* cu_q;
  const std::int32_t* cu_k;
  std::int64_t total_q;  // varlen: cu_q[batch] (per-query outputs are [heads_q][total_q])
  const void* q;
  const void* k;
  const void* v;
  void* out;
  std::int64_t q_b, q_h, q_s, k_b, k_h, k_s, v_b, v_h, v_s, o_b, o_h, o_s;
  float* lse;
  float* entropy;
  float* beta;
  const std::uint8_t* key_padding;
  // seqused_k and paged KV (kernel.h; NULL: none): key j of sequence b is
  // slot j % page_size of page block_table[b * bt_stride + j / page_size],
  // k_b / v_b then being the page strides.
  const std::int32_t* seqused;
  const std::int32_t* block_table;
  std::int64_t bt_stride, page_size;
  float scale;    // scale * q_descale * k_descale (fp8), rounded to float once
  float softcap;  // 0: none
  const float* alibi;
  const float* sinks;
  float v_descale;  // 1 unless fp8
  // Descales per (sequence, kv head) (FlashAttention 3's; fp8 only, NULL:
  // none): [batch][heads_kv] in device memory, on top of the scalar ones.
  const float* q_descale_bh;
  const float* k_descale_bh;
  const float* v_descale_bh;
  // Masks beyond causal and window (kernel.h; data NULL: none), indexed by
  // (sequence, query head, the sequence's own query and key indices).
  sa_mask_tensor attn_mask, attn_bias, block_mask, tree_mask;
  std::int64_t block_q, block_k;
  int top_left;
  std::int64_t window_left, window_right;  // -1 unbounded; causal: window_right = 0
  std::int64_t q_tiles, key_tile, k_ld, work;
};

__device__ __forceinline__ float load_elem(int t, const void* p, std::int64_t i) {
  switch (t) {
    case SA_BF16:
      return sa::float_from_bf16(static_cast<const std::uint16_t*>(p)[i]);
    case SA_F16:
      return sa::float_from_f16(static_cast<const std::uint16_t*>(p)[i]);
    case SA_FP8_E4M3:
      return sa::fp8_to_float(static_cast<const std::uint8_t*>(p)[i], sa::Fp8Format::e4m3);
    case SA_FP8_E5M2:
      return sa::fp8_to_float(static_cast<const std::uint8_t*>(p)[i], sa::Fp8Format::e5m2);
    default:
      return static_cast<const float*>(p)[i];
  }
}

__device__ __forceinline__ void store_elem(int t, void* p, std::int64_t i, float x) {
  if (t == SA_BF16)
    static_cast<std::uint16_t*>(p)[i] = sa::bf16_from_float(x);
  else if (t == SA_F16)
    static_cast<std::uint16_t*>(p)[i] = sa::f16_from_float(x);
  else
    static_cast<float*>(p)[i] = x;
}

// Element (b, h, i, j) of a mask tensor (kernel.h: 64-bit offsets, any strides >= 0).
__device__ __forceinline__ std::int64_t mask_at(const sa_mask_tensor& m, std::int64_t b,
                                                std::int64_t h, std::int64_t i, std::int64_t j) {
  return b * m.stride_b + h * m.stride_h + i * m.stride_q + j * m.stride_k;
}

// max that propagates NaN (fmaxf drops it).
__device__ __forceinline__ float nan_max(float a, float b) {
  if (a != a || b != b) return qnan();
  return fmaxf(a, b);
}

// Butterflies over the eight threads of a row (lanes differing in bits 0-2).
// Every thread of the warp must call them. Sums pair the same operands in
// every lane, so all eight threads get identical bits.
__device__ __forceinline__ float row_max(float x) {
  for (int o = 1; o < kTpr; o <<= 1) x = nan_max(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float row_sum(float x) {
  for (int o = 1; o < kTpr; o <<= 1) x = x + __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__global__ void __launch_bounds__(kV2Threads) attention_v2_kernel(V2Args a) {
  SA_EXTERN_SHARED(float, smem);
  const int Bc = static_cast<int>(a.key_tile);
  const int kpt = Bc / kTpr;                      // keys scored per thread and tile (8 or 16)
  float* Qs = smem;                               // kV2Rows x d
  float* KVs = Qs + kV2Rows * a.d;                // K tile (Bc x k_ld), then V tile (Bc x dv)
  float* Ps = KVs + Bc * std::max(a.k_ld, a.dv);  // kV2Rows x Bc weights
  auto* Vis = reinterpret_cast<unsigned char*>(Ps + kV2Rows * Bc);  // kV2Rows x Bc
  const int tid = static_cast<int>(threadIdx.x);
  const int r = tid / kTpr, g = tid % kTpr;
  for (std::int64_t w = blockIdx.x; w < a.work; w += gridDim.x) {
    // Uniform over the block: every thread computes the same item.
    const std::int64_t qt = w % a.q_tiles, bh = w / a.q_tiles;
    const std::int64_t h = bh % a.heads_q, b = bh / a.heads_q, hk = h / a.group;
    // This (sequence, kv head)'s descales joined to the scalar ones.
    const std::int64_t dbh = b * (a.heads_q / a.group) + hk;
    const float scale = a.scale * (a.q_descale_bh ? a.q_descale_bh[dbh] : 1.f) *
                        (a.k_descale_bh ? a.k_descale_bh[dbh] : 1.f);
    const float v_descale = a.v_descale_bh ? a.v_descale * a.v_descale_bh[dbh] : a.v_descale;
    std::int64_t q0 = 0, k0 = 0, Lq = a.seqlen_q, Lk = a.seqlen_k;
    if (a.cu_q) {
      q0 = a.cu_q[b];
      Lq = a.cu_q[b + 1] - q0;
      k0 = a.cu_k[b];
      Lk = a.cu_k[b + 1] - k0;
    }
    if (a.seqused) Lk = a.seqused[b];  // the buffer's first keys; the rest never read
    const std::int64_t i0 = qt * kV2Rows;
    if (i0 >= Lq) continue;  // past this sequence's queries (varlen, or an empty sequence)
    const std::int64_t off = a.top_left ? 0 : Lk - Lq;
    const std::int64_t ilast = std::min<std::int64_t>(i0 + kV2Rows, Lq) - 1;
    // Keys any row of the item can see: [lo, hi).
    std::int64_t lo = 0, hi = Lk;
    if (a.window_left >= 0) lo = std::max<std::int64_t>(0, i0 + off - a.window_left);
    if (a.window_right >= 0) hi = std::min<std::int64_t>(Lk, ilast + off + a.window_right + 1);
    const std::int64_t first_tile = lo / Bc * Bc;
    const std::int64_t qbase = (a.cu_q ? q0 * a.q_s : b * a.q_b) + h * a.q_h;
    const std::int64_t kbase = (a.cu_q ? k0 * a.k_s : b * a.k_b) + hk * a.k_h;
    const std::int64_t vbase = (a.cu_q ? k0 * a.v_s : b * a.v_b) + hk * a.v_h;
    // Element offset of key `key`'s row of K (of V with `of_v`): contiguous,
    // or through the sequence's row of the block table (64-bit page offsets).
    const std::int32_t* pages = a.block_table ? a.block_table + b * a.bt_stride : nullptr;
    auto kv_row = [&](std::int64_t key, bool of_v) -> std::int64_t {
      if (!pages) return of_v ? vbase + key * a.v_s : kbase + key * a.k_s;
      const std::int64_t page = pages[key / a.page_size], slot = key % a.page_size;
      return of_v ? page * a.v_b + slot * a.v_s + hk * a.v_h
                  : page * a.k_b + slot * a.k_s + hk * a.k_h;
    };
    const std::int64_t pbase = a.cu_q ? k0 : b * a.seqlen_k;  // key padding mask row

    __syncthreads();  // the previous item is done with shared memory
    for (std::int64_t idx = tid; idx < kV2Rows * a.d; idx += kV2Threads) {
      const std::int64_t i = i0 + idx / a.d, c = idx % a.d;
      Qs[idx] = i < Lq ? load_elem(a.qkv_dtype, a.q, qbase + i * a.q_s + c) : 0.f;
    }

    const std::int64_t i = i0 + r;
    const bool live = i < Lq;
    const std::int64_t diag = i + off;
    // Running state of row i: max m (the same in the row's eight threads) and
    // this thread's part of S = sum exp(s - m) and T = sum exp(s - m)(s - m)
    // over its keys; the parts are added after the last tile.
    float m = neg_inf(), S = 0.f, T = 0.f;
    bool nan = false;
    if (a.sinks) {
      const float sink = a.sinks[h];
      if (sink != sink)
        nan = true;
      else if (sink != neg_inf())
        m = sink, S = g == 0 ? 1.f : 0.f;
    }
    float acc[kMaxCols];
#pragma unroll
    for (int y = 0; y < kMaxCols; ++y) acc[y] = 0.f;

    for (std::int64_t t0 = first_tile; t0 < hi; t0 += Bc) {
      __syncthreads();  // every thread is done with the previous V tile
      for (std::int64_t idx = tid; idx < Bc * a.d; idx += kV2Threads) {
        const std::int64_t j = idx / a.d, c = idx % a.d, key = t0 + j;
        KVs[j * a.k_ld + c] = key < Lk ? load_elem(a.qkv_dtype, a.k, kv_row(key, false) + c) : 0.f;
      }
      __syncthreads();
      // b. scores of this thread's keys
      float s[kMaxKeys];
      std::uint32_t vis = 0;
      float tmax = neg_inf();
#pragma unroll
      for (int x = 0; x < kMaxKeys; ++x) {
        s[x] = neg_inf();
        if (x >= kpt) continue;
        const std::int64_t j = g + kTpr * x, key = t0 + j;
        bool ok = live && !nan && key < Lk;
        if (ok && a.key_padding) ok = a.key_padding[pbase + key] != 0;
        if (ok && a.window_right >= 0) ok = key <= diag + a.window_right;
        if (ok && a.window_left >= 0) ok = key >= diag - a.window_left;
        // (i: this row's query index in its sequence; step 4's masks by AND)
        if (ok && a.attn_mask.data)
          ok = static_cast<const std::uint8_t*>(
                   a.attn_mask.data)[mask_at(a.attn_mask, b, h, i, key)] != 0;
        if (ok && a.block_mask.data)
          ok =
              static_cast<const std::uint8_t*>(
                  a.block_mask.data)[mask_at(a.block_mask, b, h, i / a.block_q, key / a.block_k)] !=
              0;
        if (ok && a.tree_mask.data && key >= Lk - Lq)
          ok = static_cast<const std::uint8_t*>(
                   a.tree_mask.data)[mask_at(a.tree_mask, b, h, i, key - (Lk - Lq))] != 0;
        if (!ok) continue;
        const float* qr = Qs + r * a.d;
        const float* kr = KVs + j * a.k_ld;
        float dot = 0.f;
        for (std::int64_t c = 0; c < a.d; ++c) dot = fmaf(qr[c], kr[c], dot);
        float sc = dot * scale;
        if (a.softcap > 0.f) sc = a.softcap * tanhf(sc / a.softcap);
        if (a.alibi) {
          const std::int64_t dist = diag > key ? diag - key : key - diag;
          sc = fmaf(-a.alibi[h], static_cast<float>(dist), sc);
        }
        if (a.attn_bias.data)  // step 3b, after softcap and ALiBi
          sc += static_cast<const float*>(a.attn_bias.data)[mask_at(a.attn_bias, b, h, i, key)];
        s[x] = sc;
        vis |= 1u << x;
        tmax = nan_max(tmax, sc);
      }
      // c. online softmax (all threads take part in the butterflies)
      tmax = row_max(tmax);
      if (tmax != tmax) nan = true;
      const float mn = nan ? m : fmaxf(m, tmax);
      float ps = 0.f, ts = 0.f;
#pragma unroll
      for (int x = 0; x < kMaxKeys; ++x) {
        if (x >= kpt) continue;
        const int j = g + kTpr * x;
        float p = 0.f;
        const bool on = !nan && ((vis >> x) & 1u);
        if (on) {
          if (mn == pos_inf()) {
            p = s[x] == pos_inf() ? 1.f : 0.f;  // the +inf scores share the weight
          } else {
            p = expf(s[x] - mn);
            if (p != 0.f) ts = fmaf(p, s[x] - mn, ts);
          }
          ps = ps + p;
        }
        Ps[r * Bc + j] = p;
        Vis[r * Bc + j] = on ? 1 : 0;
      }
      float alpha = 1.f;  // the factor of everything accumulated before this tile
      if (!nan && mn != neg_inf()) {
        alpha = merge_factor(m, mn);  // 0 (nothing yet, or underflow), 1, or exp(m - mn)
        if (mn == pos_inf()) {
          S = fmaf(alpha, S, ps);  // counts of +inf scores; alpha is 0 or 1
          T = 0.f;
        } else if (alpha == 0.f) {
          S = ps;
          T = ts;
        } else if (alpha == 1.f) {
          S = S + ps;
          T = T + ts;
        } else {
          T = fmaf(alpha, fmaf(m - mn, S, T), ts);
          S = fmaf(alpha, S, ps);
        }
        m = mn;
      }
      __syncthreads();  // every thread is done with the K tile; P is complete
      for (std::int64_t idx = tid; idx < Bc * a.dv; idx += kV2Threads) {
        const std::int64_t j = idx / a.dv, c = idx % a.dv, key = t0 + j;
        KVs[idx] = key < Lk ? load_elem(a.qkv_dtype, a.v, kv_row(key, true) + c) : 0.f;
      }
      __syncthreads();
      // e. P V (a row's eight threads read the same P entries)
      if (alpha != 1.f) {
#pragma unroll
        for (int y = 0; y < kMaxCols; ++y) acc[y] = alpha == 0.f ? 0.f : acc[y] * alpha;
      }
      for (int j = 0; j < Bc; ++j) {
        if (!Vis[r * Bc + j]) continue;
        const float p = Ps[r * Bc + j];
        const float* vr = KVs + j * a.dv;
#pragma unroll
        for (int y = 0; y < kMaxCols; ++y) {
          const std::int64_t c = g + kTpr * y;
          if (c < a.dv) acc[y] = fmaf(p, vr[c], acc[y]);
        }
      }
    }

    // 3. outputs of row i (every thread takes part in the butterflies)
    S = row_sum(S);
    T = row_sum(T);
    if (!live) continue;  // no barrier follows before the next item's first one
    const std::int64_t obase = (a.cu_q ? q0 * a.o_s : b * a.o_b) + h * a.o_h + i * a.o_s;
#pragma unroll
    for (int y = 0; y < kMaxCols; ++y) {
      const std::int64_t c = g + kTpr * y;
      if (c >= a.dv) continue;
      float o;
      if (nan)
        o = qnan();
      else if (m == neg_inf())
        o = 0.f;  // every key masked, no sink
      else
        o = acc[y] / S;
      if (v_descale != 1.f) o = o * v_descale;
      store_elem(a.out_dtype, a.out, obase + c, o);
    }
    if (g == 0) {
      float lse, H;
      if (nan) {
        lse = H = qnan();
      } else if (m == neg_inf()) {
        lse = neg_inf();
        H = 0.f;
      } else if (m == pos_inf()) {
        lse = pos_inf();
        H = logf(S);
      } else {
        const float logS = logf(S);
        lse = m + logS;
        H = logS - T / S;
      }
      const std::int64_t slot =
          a.cu_q ? h * a.total_q + q0 + i : (b * a.heads_q + h) * a.seqlen_q + i;
      if (a.lse) a.lse[slot] = lse;
      if (a.entropy) a.entropy[slot] = H;
      if (a.beta) a.beta[slot] = nan ? qnan() : 1.f;
    }
  }
}

sa_status finish(std::string& error) {
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return host::cuda_failure(e, "attention_v2 launch", error);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
    return host::cuda_failure(e, "attention_v2", error);
  return SA_OK;
}

}  // namespace

sa_status launch_attention_v2(const sa_attention_v2_args& x, std::string& error) {
  const char* op = "attention_v2";
  for (auto [ptr, name] : {std::pair<const void*, const char*>{x.q.data, "args->q.data"},
                           {x.k.data, "args->k.data"},
                           {x.v.data, "args->v.data"},
                           {x.out, "args->out"},
                           {x.lse, "args->lse"},
                           {x.entropy, "args->entropy"},
                           {x.beta, "args->beta"},
                           {x.key_padding_mask, "args->key_padding_mask"},
                           {x.alibi_slopes, "args->alibi_slopes"},
                           {x.sinks, "args->sinks"},
                           {x.cu_seqlens_q, "args->cu_seqlens_q"},
                           {x.cu_seqlens_k, "args->cu_seqlens_k"},
                           {x.seqused_k, "args->seqused_k"},
                           {x.block_table, "args->block_table"}})
    if (sa_status s = host::require_device(ptr, op, name, error); s != SA_OK) return s;
  std::int64_t max_q = x.seqlen_q, total_q = 0;
  // Each sequence's key buffer N_b (seqlen_k, or from cu_seqlens_k).
  std::vector<std::int32_t> buffer(static_cast<std::size_t>(std::max<std::int64_t>(x.batch, 0)),
                                   static_cast<std::int32_t>(x.seqlen_k));
  if (x.cu_seqlens_q) {
    // The offsets decide which rows are read and written: check them first.
    const auto n = static_cast<std::size_t>(x.batch + 1);
    std::vector<std::int32_t> cq(n), ck(n);
    if (cudaError_t e = cudaMemcpy(cq.data(), x.cu_seqlens_q, n * 4, cudaMemcpyDeviceToHost);
        e != cudaSuccess)
      return host::cuda_failure(e, "attention_v2: reading cu_seqlens_q", error);
    if (cudaError_t e = cudaMemcpy(ck.data(), x.cu_seqlens_k, n * 4, cudaMemcpyDeviceToHost);
        e != cudaSuccess)
      return host::cuda_failure(e, "attention_v2: reading cu_seqlens_k", error);
    if (std::string why =
            validate_cu_seqlens(cq.data(), ck.data(), x.batch, x.seqlen_q, x.seqlen_k);
        !why.empty()) {
      error = why;
      return SA_INVALID_ARGUMENT;
    }
    max_q = 0;
    for (std::int64_t b = 0; b < x.batch; ++b)
      max_q = std::max<std::int64_t>(
          max_q, cq[static_cast<std::size_t>(b) + 1] - cq[static_cast<std::size_t>(b)]);
    total_q = cq[static_cast<std::size_t>(x.batch)];
    if (x.seqused_k || x.block_table)
      for (std::int64_t b = 0; b < x.batch; ++b)
        buffer[static_cast<std::size_t>(b)] =
            ck[static_cast<std::size_t>(b) + 1] - ck[static_cast<std::size_t>(b)];
  }
  if (x.seqused_k || x.block_table) {
    // Which keys and pages are read: checked on the host first.
    const auto nb = static_cast<std::size_t>(x.batch);
    std::vector<std::int32_t> used(x.seqused_k ? nb : 0), table;
    if (x.seqused_k)
      if (cudaError_t e = cudaMemcpy(used.data(), x.seqused_k, nb * 4, cudaMemcpyDeviceToHost);
          e != cudaSuccess)
        return host::cuda_failure(e, "attention_v2: reading seqused_k", error);
    if (x.block_table) {
      table.resize(nb * static_cast<std::size_t>(x.block_table_stride));
      if (cudaError_t e =
              cudaMemcpy(table.data(), x.block_table, table.size() * 4, cudaMemcpyDeviceToHost);
          e != cudaSuccess)
        return host::cuda_failure(e, "attention_v2: reading block_table", error);
    }
    if (std::string why = validate_kv_cache(buffer.data(), x.seqused_k ? used.data() : nullptr,
                                            x.block_table ? table.data() : nullptr, x.batch,
                                            x.block_table_stride, x.page_size, x.num_pages);
        !why.empty()) {
      error = why;
      return SA_INVALID_ARGUMENT;
    }
  }
  const AttentionV2Plan p = plan_attention_v2(x, max_q);
  if (p.work_items == 0) return SA_OK;  // no query rows
  const bool fp8 = x.qkv_dtype == SA_FP8_E4M3 || x.qkv_dtype == SA_FP8_E5M2;
  V2Args a{};
  a.qkv_dtype = x.qkv_dtype;
  a.out_dtype = x.out_dtype;
  a.batch = x.batch;
  a.heads_q = x.heads_q;
  a.group = x.heads_q / x.heads_kv;
  a.seqlen_q = x.seqlen_q;
  a.seqlen_k = x.seqlen_k;
  a.d = x.head_dim;
  a.dv = x.head_dim_v;
  a.cu_q = x.cu_seqlens_q;
  a.cu_k = x.cu_seqlens_k;
  a.total_q = total_q;
  a.q = x.q.data;
  a.k = x.k.data;
  a.v = x.v.data;
  a.out = x.out;
  a.q_b = x.q.stride_b, a.q_h = x.q.stride_h, a.q_s = x.q.stride_s;
  a.k_b = x.k.stride_b, a.k_h = x.k.stride_h, a.k_s = x.k.stride_s;
  a.v_b = x.v.stride_b, a.v_h = x.v.stride_h, a.v_s = x.v.stride_s;
  a.o_b = x.out_stride_b, a.o_h = x.out_stride_h, a.o_s = x.out_stride_s;
  a.lse = x.lse;
  a.entropy = x.entropy;
  a.beta = x.beta;
  a.key_padding = x.key_padding_mask;
  a.seqused = x.seqused_k;
  a.block_table = x.block_table;
  a.bt_stride = x.block_table_stride;
  a.page_size = x.page_size;
  const float qk = fp8 ? x.q_descale * x.k_descale : 1.f;
  a.scale = static_cast<float>(x.scale * static_cast<double>(qk));
  a.softcap = static_cast<float>(x.softcap);
  a.alibi = x.alibi_slopes;
  a.sinks = x.sinks;
  a.v_descale = fp8 ? x.v_descale : 1.f;
  a.q_descale_bh = fp8 ? x.q_descale_bh : nullptr;
  a.k_descale_bh = fp8 ? x.k_descale_bh : nullptr;
  a.v_descale_bh = fp8 ? x.v_descale_bh : nullptr;
  a.attn_mask = x.attn_mask;
  a.attn_bias = x.attn_bias;
  a.block_mask = x.block_mask;
  a.tree_mask = x.tree_mask;
  a.block_q = x.block_mask.data ? x.block_q : 1;
  a.block_k = x.block_mask.data ? x.block_k : 1;
  a.top_left = x.alignment == SA_ALIGN_TOP_LEFT ? 1 : 0;
  a.window_left = x.window_left;
  a.window_right = x.causal ? 0 : x.window_right;
  a.q_tiles = p.q_tiles;
  a.key_tile = p.key_tile;
  a.k_ld = p.k_stride_smem;
  a.work = p.work_items;
  if (p.shared_bytes > 48 * 1024) {
    if (cudaError_t e =
            cudaFuncSetAttribute(attention_v2_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(p.shared_bytes));
        e != cudaSuccess)
      return host::cuda_failure(e, "attention_v2: shared memory for the head dims", error);
  }
  SA_LAUNCH(static_cast<unsigned>(p.grid), p.threads, p.shared_bytes, attention_v2_kernel)(a);
  return finish(error);
}

}  // namespace sa::kernels::cuda
