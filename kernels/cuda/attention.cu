// Single-head attention forward on the GPU, flash-style, and
// merge_attention_states.
//
// A block of 4 warps takes 16 queries (4 per warp) and one split of the keys;
// it walks the split in tiles of 32 keys staged in shared memory as float32
// (one key per lane). Per query and tile: logits s = scale * q.k (float32 FMA
// chain over d), masked to -inf by the key mask and the bottom-right causal
// rule (key j visible to query i iff j <= i + nk - nq); the tile's (m, S, T)
// state (row_state: max first, then entropy_push); the running state is
// merged with it (entropy_merge, theory.md T6) and the output accumulators
// are rescaled by the same factors (online softmax). Tiles past the last key
// any query of the block can see are skipped. Each split writes its
// unnormalised accumulators and state to a workspace; a combine pass merges
// the splits per query in order (split-KV), normalises and writes out, lse,
// entropy and beta.
//
// Adaptive temperature (theory.md T5, T6): pass 1 streams only the states
// (no V) and the combine gives H, beta = adaptive_beta(H) and the row max M
// per query; pass 2 accumulates exp(beta (s - M)) and its V products against
// that fixed M (no rescaling), and the final combine adds the splits.
#include <algorithm>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/plan.hpp"

namespace sa::kernels::cuda {
namespace {

constexpr int kQ = kAttnQueriesPerWarp;
constexpr int kVSlots = static_cast<int>(kAttnMaxHead / 32);  // output columns per lane
constexpr int kTile = static_cast<int>(kAttnKeyTile);
static_assert(kTile == 32, "one key per lane");

enum Mode : int { kOnline = 0, kStates = 1, kFixed = 2 };

struct AttnArgs {
  int mode;
  std::int64_t nq, nk, d, dv, q_stride, k_stride, v_stride, out_stride;
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* lse;
  float* entropy;
  float* beta;
  const std::uint8_t* key_mask;
  float scale;
  int causal;
  std::int64_t splits, tiles_per_split, query_blocks, ks;
  State* part_state;  // splits * nq
  float* part_acc;    // splits * nq * dv
  float* q_max;       // nq: row max M of the logits (adaptive)
  float* q_beta;      // nq
  float* q_entropy;   // nq
};

template <class T>
__global__ void __launch_bounds__(32 * kAttnWarps) attention_tiles_kernel(AttnArgs a) {
  SA_EXTERN_SHARED(float, smem);
  float* Qs = smem;                             // kAttnQueriesPerBlock x d
  float* Ks = Qs + kAttnQueriesPerBlock * a.d;  // kTile x ks
  float* Vs = Ks + kTile * a.ks;                // kTile x dv
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const T* q = static_cast<const T*>(a.q);
  const T* k = static_cast<const T*>(a.k);
  const T* v = static_cast<const T*>(a.v);
  WarpGroup g;
  const std::int64_t work = a.query_blocks * a.splits;
  for (std::int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const std::int64_t qb = w / a.splits, sp = w % a.splits;
    const std::int64_t q0 = qb * kAttnQueriesPerBlock;
    const std::int64_t key_begin = sp * a.tiles_per_split * kTile;
    const std::int64_t key_end = std::min(a.nk, key_begin + a.tiles_per_split * kTile);
    std::int64_t key_stop = key_end;  // past the last key any query of the block sees
    if (a.causal) {
      const std::int64_t qlast = std::min(q0 + kAttnQueriesPerBlock - 1, a.nq - 1);
      key_stop = std::min(key_end, std::max(qlast + (a.nk - a.nq) + 1, key_begin));
    }
    __syncthreads();  // the previous work item is done with shared memory
    for (std::int64_t idx = threadIdx.x; idx < kAttnQueriesPerBlock * a.d; idx += blockDim.x) {
      const std::int64_t qi = q0 + idx / a.d, c = idx % a.d;
      Qs[idx] = qi < a.nq ? load_f(q + qi * a.q_stride + c) : 0.f;
    }
    State st[kQ];
    float acc[kQ][kVSlots];
    float M[kQ], beta[kQ], S2[kQ];
#pragma unroll
    for (int i = 0; i < kQ; ++i) {
      st[i] = sa::theory::entropy_identity<float>();
      S2[i] = 0.f;
      const std::int64_t qi = q0 + warp * kQ + i;
      M[i] = (a.mode == kFixed && qi < a.nq) ? a.q_max[qi] : 0.f;
      beta[i] = (a.mode == kFixed && qi < a.nq) ? a.q_beta[qi] : 1.f;
#pragma unroll
      for (int t = 0; t < kVSlots; ++t) acc[i][t] = 0.f;
    }
    for (std::int64_t tile = key_begin; tile < key_stop; tile += kTile) {
      __syncthreads();  // every warp is done with the previous tile
      for (std::int64_t idx = threadIdx.x; idx < kTile * a.d; idx += blockDim.x) {
        const std::int64_t j = idx / a.d, c = idx % a.d, key = tile + j;
        Ks[j * a.ks + c] = key < a.nk ? load_f(k + key * a.k_stride + c) : 0.f;
      }
      if (a.mode != kStates)
        for (std::int64_t idx = threadIdx.x; idx < kTile * a.dv; idx += blockDim.x) {
          const std::int64_t j = idx / a.dv, c = idx % a.dv, key = tile + j;
          Vs[idx] = key < a.nk ? load_f(v + key * a.v_stride + c) : 0.f;
        }
      __syncthreads();
      const std::int64_t key = tile + lane;
      const bool in_split = key < key_end && (a.key_mask == nullptr || a.key_mask[key] != 0);
#pragma unroll
      for (int i = 0; i < kQ; ++i) {
        const std::int64_t qi = q0 + warp * kQ + i;
        if (qi >= a.nq) continue;  // uniform over the warp
        const bool visible = in_split && (!a.causal || key <= qi + (a.nk - a.nq));
        float s = neg_inf();
        if (visible) {
          const float* qr = Qs + (warp * kQ + i) * a.d;
          const float* kr = Ks + lane * a.ks;
          float dot = 0.f;
          for (std::int64_t c = 0; c < a.d; ++c) dot = fmaf(qr[c], kr[c], dot);
          s = a.scale * dot;
        }
        float p;  // this lane's key weight, relative to the running reference
        if (a.mode == kFixed) {
          if (M[i] == pos_inf())
            p = (s == pos_inf()) ? 1.f : 0.f;
          else if (M[i] == neg_inf() || M[i] != M[i])
            p = 0.f;
          else
            p = visible ? expf(beta[i] * (s - M[i])) : 0.f;
          S2[i] += g.sum(p);
        } else {
          const State ts = row_state(g, [&](auto fn) { fn(s); });
          const State merged = sa::theory::entropy_merge(st[i], ts);
          if (a.mode == kOnline) {
            const float fo = merge_factor(st[i].m, merged.m);
            const float ft = merge_factor(ts.m, merged.m);
            if (state_is_finite(ts))
              p = expf(s - ts.m);
            else
              p = (ts.m == pos_inf() && s == pos_inf()) ? 1.f : 0.f;
            p *= ft;
            if (fo != 1.f) {
#pragma unroll
              for (int t = 0; t < kVSlots; ++t) acc[i][t] *= fo;
            }
          } else {
            p = 0.f;
          }
          st[i] = merged;
        }
        if (a.mode != kStates) {
          for (int j = 0; j < kTile; ++j) {
            const float pj = __shfl_sync(0xffffffffu, p, j);
            if (pj == 0.f) continue;  // masked keys contribute nothing, whatever V holds
            const float* vr = Vs + j * a.dv;
#pragma unroll
            for (int t = 0; t < kVSlots; ++t) {
              const std::int64_t c = lane + 32 * t;
              if (c < a.dv) acc[i][t] = fmaf(pj, vr[c], acc[i][t]);
            }
          }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kQ; ++i) {
      const std::int64_t qi = q0 + warp * kQ + i;
      if (qi >= a.nq) continue;
      const std::int64_t slot = sp * a.nq + qi;
      if (lane == 0) {
        State out = st[i];
        if (a.mode == kFixed) {
          if (M[i] != M[i])
            out = sa::theory::entropy_nan_state<float>();
          else if (M[i] == neg_inf())
            out = sa::theory::entropy_identity<float>();
          else
            out = State{0.f, S2[i], 0.f};  // sums against the fixed M: merging adds them
        }
        a.part_state[slot] = out;
      }
      if (a.mode != kStates) {
#pragma unroll
        for (int t = 0; t < kVSlots; ++t) {
          const std::int64_t c = lane + 32 * t;
          if (c < a.dv) a.part_acc[slot * a.dv + c] = acc[i][t];
        }
      }
    }
  }
}

// Merges the splits of each query (a warp per query) and writes the results.
template <class T>
__global__ void __launch_bounds__(128) attention_combine_kernel(AttnArgs a) {
  const int lane = threadIdx.x & 31;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t qi =
           static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
       qi < a.nq; qi += step) {
    for (std::int64_t c0 = 0; c0 < a.dv || c0 == 0; c0 += 32) {
      const std::int64_t c = c0 + lane;
      State s = sa::theory::entropy_identity<float>();
      float acc = 0.f;
      for (std::int64_t sp = 0; sp < a.splits; ++sp) {
        const std::int64_t slot = sp * a.nq + qi;
        const State ps = a.part_state[slot];
        const State merged = sa::theory::entropy_merge(s, ps);
        if (a.mode != kStates && c < a.dv) {
          const float fp = merge_factor(ps.m, merged.m);
          acc = merge_factor(s.m, merged.m) * acc;
          if (fp != 0.f) acc = fmaf(fp, a.part_acc[slot * a.dv + c], acc);
        }
        s = merged;
      }
      if (a.mode == kStates) {  // adaptive pass 1: H, beta and M per query
        if (c0 == 0 && lane == 0) {
          const float H = sa::theory::entropy_of(s);
          a.q_entropy[qi] = H;
          a.q_beta[qi] = sa::theory::adaptive_beta(H);
          a.q_max[qi] = s.m;  // NaN, -inf (fully masked), +inf, or the finite max
        }
        break;
      }
      // Final outputs. Online: s is the query's state. Fixed (adaptive pass 2):
      // s = (0, S2, 0), or the identity / NaN state for those rows.
      float o;
      if (state_is_nan(s))
        o = qnan();
      else if (s.m == neg_inf())
        o = 0.f;
      else
        o = acc / s.S;
      if (c < a.dv) store_f(static_cast<T*>(a.out) + qi * a.out_stride + c, o);
      if (c0 == 0 && lane == 0) {
        if (a.mode == kOnline) {
          if (a.lse) a.lse[qi] = sa::theory::log_sum_exp_of(s);
          if (a.entropy) a.entropy[qi] = sa::theory::entropy_of(s);
          if (a.beta) a.beta[qi] = 1.f;
        } else {
          const float M = a.q_max[qi], b = a.q_beta[qi];
          float lse;
          if (M != M || M == neg_inf() || M == pos_inf())
            lse = M;
          else
            lse = b * M + logf(s.S);
          if (a.lse) a.lse[qi] = lse;
          if (a.entropy) a.entropy[qi] = a.q_entropy[qi];
          if (a.beta) a.beta[qi] = b;
        }
      }
    }
  }
}

// merge_attention_states: a warp per row; all lanes read both lse values
// before lane 0 writes out_lse (which may alias lse_a).
__global__ void __launch_bounds__(128)
    merge_attention_kernel(std::int64_t rows, std::int64_t dv, const float* o_a, const float* lse_a,
                           const float* o_b, const float* lse_b, float* out, float* out_lse) {
  const int lane = threadIdx.x & 31;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t r =
           static_cast<std::int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
       r < rows; r += step) {
    const float la = lse_a[r], lb = lse_b[r];
    __syncwarp();
    // Weights of the two parts (sum 1) and the merged lse. A part at -inf
    // contributes nothing; two parts at +inf share equally (each is the limit
    // of its own +inf logits, whose counts are not known here); NaN -> NaN.
    float wa, wb, L;
    if (la != la || lb != lb) {
      wa = wb = L = qnan();
    } else if (la == neg_inf() && lb == neg_inf()) {
      wa = wb = 0.f;
      L = neg_inf();
    } else if (la == pos_inf() || lb == pos_inf()) {
      wa = la == pos_inf() ? (lb == pos_inf() ? 0.5f : 1.f) : 0.f;
      wb = lb == pos_inf() ? (la == pos_inf() ? 0.5f : 1.f) : 0.f;
      L = pos_inf();
    } else {
      const float m = fmaxf(la, lb);
      const float ea = merge_factor(la, m), eb = merge_factor(lb, m);  // one of them is 1
      const float sum = ea + eb;
      wa = ea / sum;
      wb = eb / sum;
      L = m + logf(sum);
    }
    for (std::int64_t c = lane; c < dv; c += 32) {
      const std::int64_t i = r * dv + c;
      float o = 0.f;
      if (wa != 0.f) o = wa * o_a[i];
      if (wb != 0.f) o = fmaf(wb, o_b[i], o);
      if (wa != wa) o = qnan();
      out[i] = o;
    }
    if (lane == 0) out_lse[r] = L;
  }
}

sa_status finish(const char* what, std::string& error) {
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return host::cuda_failure(e, (std::string(what) + " launch").c_str(), error);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
    return host::cuda_failure(e, what, error);
  return SA_OK;
}

template <class T>
sa_status run_attention(AttnArgs a, const AttentionPlan& p, std::string& error) {
  if (p.shared_bytes > 48 * 1024) {
    if (cudaError_t e = cudaFuncSetAttribute(attention_tiles_kernel<T>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(p.shared_bytes));
        e != cudaSuccess)
      return host::cuda_failure(e, "attention: shared memory for d and dv", error);
  }
  const auto grid = static_cast<unsigned>(p.grid);
  const auto combine_grid = static_cast<unsigned>(grid_for(a.nq, 4));
  if (a.mode == kStates) {  // adaptive: pass 1, combine to beta, pass 2, combine
    SA_LAUNCH(grid, p.threads, p.shared_bytes, attention_tiles_kernel<T>)(a);
    SA_LAUNCH(combine_grid, 128, 0, attention_combine_kernel<T>)(a);
    a.mode = kFixed;
  }
  SA_LAUNCH(grid, p.threads, p.shared_bytes, attention_tiles_kernel<T>)(a);
  SA_LAUNCH(combine_grid, 128, 0, attention_combine_kernel<T>)(a);
  return finish("attention", error);
}

}  // namespace

sa_status launch_attention(const sa_attention_args& x, std::string& error) {
  const char* op = "attention";
  for (auto [ptr, name] : {std::pair<const void*, const char*>{x.q, "args->q"},
                           {x.k, "args->k"},
                           {x.v, "args->v"},
                           {x.out, "args->out"},
                           {x.lse, "args->lse"},
                           {x.entropy, "args->entropy"},
                           {x.beta, "args->beta"},
                           {x.key_mask, "args->key_mask"}})
    if (sa_status s = host::require_device(ptr, op, name, error); s != SA_OK) return s;
  const AttentionPlan p = plan_attention(x);
  AttnArgs a{};
  a.mode = x.adaptive ? kStates : kOnline;
  a.nq = x.nq;
  a.nk = x.nk;
  a.d = x.d;
  a.dv = x.dv;
  a.q_stride = x.q_stride;
  a.k_stride = x.k_stride;
  a.v_stride = x.v_stride;
  a.out_stride = x.out_stride;
  a.q = x.q;
  a.k = x.k;
  a.v = x.v;
  a.out = x.out;
  a.lse = x.lse;
  a.entropy = x.entropy;
  a.beta = x.beta;
  a.key_mask = x.key_mask;
  a.scale = static_cast<float>(x.scale);
  a.causal = x.causal;
  a.splits = p.splits;
  a.tiles_per_split = p.tiles_per_split;
  a.query_blocks = p.query_blocks;
  a.ks = p.key_stride_smem;
  host::Scratch ws;
  if (cudaError_t e = ws.alloc(p.workspace_bytes); e != cudaSuccess)
    return host::cuda_failure(e, "attention workspace allocation", error);
  const std::size_t parts = static_cast<std::size_t>(p.splits) * static_cast<std::size_t>(x.nq);
  a.part_state = ws.as<State>();
  a.part_acc = ws.as<float>(parts * sizeof(State));
  a.q_max = ws.as<float>(parts * (sizeof(State) + static_cast<std::size_t>(x.dv) * sizeof(float)));
  a.q_beta = a.q_max + x.nq;
  a.q_entropy = a.q_beta + x.nq;
  return x.dtype == SA_F32 ? run_attention<float>(a, p, error)
                           : run_attention<__nv_bfloat16>(a, p, error);
}

sa_status launch_merge_attention(std::int64_t rows, std::int64_t dv, const float* o_a,
                                 const float* lse_a, const float* o_b, const float* lse_b,
                                 float* out, float* out_lse, std::string& error) {
  const char* op = "merge_attention_states";
  for (auto [ptr, name] : {std::pair<const void*, const char*>{o_a, "o_a"},
                           {lse_a, "lse_a"},
                           {o_b, "o_b"},
                           {lse_b, "lse_b"},
                           {out, "out"},
                           {out_lse, "out_lse"}})
    if (sa_status s = host::require_device(ptr, op, name, error); s != SA_OK) return s;
  SA_LAUNCH(static_cast<unsigned>(grid_for(rows, 4)), 128, 0, merge_attention_kernel)
  (rows, dv, o_a, lse_a, o_b, lse_b, out, out_lse);
  return finish("merge_attention_states", error);
}

}  // namespace sa::kernels::cuda
