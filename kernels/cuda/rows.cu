// Row operations on the GPU: softmax, log_softmax, logsumexp, entropy,
// adaptive softmax (theory.md T5, T6), and merge_entropy_states.
//
// Strategies (plan.hpp): a group of G threads (a warp, or a block of 256)
// caches a segment of up to 32 * G logits in registers (element i of the
// segment at thread i % G, slot i / G: coalesced loads), finds the segment max,
// then pushes every logit into a (m, S, T) state against that max
// (entropy_push) and merges the threads' states (entropy_merge; exact, as
// they share m). A segment is a whole row on the warp (n <= 1024) and block
// (n <= 8192) paths, so each logit is read from memory once. Longer rows are
// split into chunks of 8192: one block per chunk writes its state, a row pass
// merges the chunk states (real rescaling merges, T6), and a last pass writes
// the outputs (reading the logits again). Every loop over rows or chunks is a
// grid-stride loop over a 1-D grid, and every element offset is 64-bit.
//
// Softmax and log_softmax of split rows take a one-pass path on a GPU when a
// whole row's chunks fit on the device at once (fused_chunks_kernel): each
// block keeps its chunk in registers, publishes the chunk's state, waits for
// the row's other chunks, merges the states exactly as the split path does
// (same order, same code: the same bits) and writes its chunk from registers.
// Logits are read from memory once instead of twice. Blocks take chunks in
// row order from one ticket counter, and the launch is cooperative (every
// block resident at once), so a block waits only for chunks that resident
// blocks hold or will take: with at least as many blocks as a row has chunks
// no wait can last forever. Why: a block publishes its chunk's state before
// it waits, and a ticket is taken only by a running block. Suppose every block
// waits and a ticket is left. Take the lowest row r some block waits on; r is
// incomplete, so one of its chunks is unpublished, hence not yet handed out.
// Tickets go out in order, so every handed-out ticket precedes that chunk:
// every waiting block holds a chunk of row r, fewer than chunks_per_row of
// them, yet all G >= chunks_per_row blocks wait, a contradiction. Where the
// row has more chunks than the device holds blocks, or the cooperative launch
// is refused, the split path runs.
#include <algorithm>
#include <cmath>

#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/plan.hpp"

namespace sa::kernels::cuda {
namespace {

constexpr int kSlots = 32;  // logits cached per thread
static_assert(kChunk == kSlots * kRowThreads && kBlockMaxN == kChunk && kWarpMaxN == kSlots * 32,
              "a segment (row or chunk) is cached whole, kSlots logits per thread");

struct RowArgs {
  RowOp op;
  std::int64_t rows, n, in_stride, out_stride;
  float theta;
  const void* in;
  void* out;
  float* lse;
  float* entropy;
  float* beta;
  sa_entropy_state* state;
  // split path workspace
  std::int64_t chunks_per_row;
  State* chunk_state;  // rows * chunks_per_row
  float* chunk_sum;    // rows * chunks_per_row (adaptive)
  State* row_state;    // rows
  float* row_beta;     // rows (adaptive)
  float* row_sum;      // rows (adaptive)
};

// l / theta, skipping the (exact) division by 1.
__device__ __forceinline__ float scaled(float x, float theta) {
  return theta == 1.f ? x : x / theta;
}

template <int kThreads>
struct GroupOf {
  using type = BlockGroup<kThreads>;
};
template <>
struct GroupOf<32> {
  using type = WarpGroup;
};

// A segment of `len` logits at x (scaled by 1/theta), cached by the calling
// thread at slots k (element k * kThreads + t); past the end: -inf.
template <class T, int kThreads>
struct Segment {
  float z[kSlots];
  int t;
  int live;  // slots holding an element of the segment (the rest hold -inf)
  std::int64_t len;

  __device__ void load(const T* x, std::int64_t length, float theta, int thread) {
    t = thread;
    len = length;
    live = len > t ? static_cast<int>(std::min<std::int64_t>((len - t - 1) / kThreads + 1, kSlots))
                   : 0;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const std::int64_t i = static_cast<std::int64_t>(k) * kThreads + t;
      z[k] = i < len ? scaled(load_f(x + i), theta) : neg_inf();
    }
  }
  // fn(z) for the live slots only: every use below ignores a -inf padding
  // slot (max, NaN and +inf tests, the state, and adaptive sums, which would
  // add exp(-inf) = 0 to a sum >= 0), so skipping them changes no bit; on a
  // warp with 128-logit rows that is 28 of 32 slots.
  template <class Fn>
  __device__ void each(Fn fn) const {
#pragma unroll
    for (int k = 0; k < kSlots; ++k)
      if (k < live) fn(z[k]);
  }
  template <class Fn>
  __device__ void each_index(Fn fn) const {
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const std::int64_t i = static_cast<std::int64_t>(k) * kThreads + t;
      if (i < len) fn(i, z[k]);
    }
  }
};

// The per-row scalar outputs of a.op from the row's final state: lse; entropy
// and state; adaptive beta and H (and row_beta on the split path). Called by
// one thread per row.
__device__ void write_row_scalars(const RowArgs& a, std::int64_t r, const State& st) {
  switch (a.op) {
    case RowOp::logsumexp:
      a.lse[r] = sa::theory::log_sum_exp_of(st);
      break;
    case RowOp::entropy:
      a.entropy[r] = sa::theory::entropy_of(st);
      if (a.state) a.state[r] = sa_entropy_state{st.m, st.S, st.T};
      break;
    case RowOp::adaptive: {
      const float H = sa::theory::entropy_of(st);
      const float beta = sa::theory::adaptive_beta(H);
      if (a.row_beta) a.row_beta[r] = beta;
      if (a.beta) a.beta[r] = beta;
      if (a.entropy) a.entropy[r] = H;
      break;
    }
    default:
      break;
  }
}

// Writes every output of row r from its final state (whole row cached in seg).
template <class T, class G, class Seg>
__device__ void finish_cached_row(const RowArgs& a, const G& g, std::int64_t r, const State& st,
                                  const Seg& seg, bool leader) {
  if (leader) write_row_scalars(a, r, st);
  T* out = a.out ? static_cast<T*>(a.out) + r * a.out_stride : nullptr;
  if (a.op == RowOp::softmax) {
    seg.each_index([&](std::int64_t i, float z) { store_f(out + i, softmax_weight(st, z)); });
  } else if (a.op == RowOp::log_softmax) {
    const float logS = logf(st.S);
    seg.each_index(
        [&](std::int64_t i, float z) { store_f(out + i, log_softmax_value(st, logS, z)); });
  } else if (a.op == RowOp::adaptive) {
    if (state_is_finite(st)) {
      const float beta = sa::theory::adaptive_beta(sa::theory::entropy_of(st));
      float s2 = 0.f;
      seg.each([&](float z) { s2 += adaptive_numerator(st, beta, z); });
      s2 = g.sum(s2);
      seg.each_index(
          [&](std::int64_t i, float z) { store_f(out + i, adaptive_numerator(st, beta, z) / s2); });
    } else {
      seg.each_index([&](std::int64_t i, float z) { store_f(out + i, softmax_weight(st, z)); });
    }
  }
}

// Warp path (kThreads = 32, kWarpRowsPerBlock rows per block) and block path
// (kThreads = kRowThreads, one row per block).
template <class T, int kThreads>
__global__ void __launch_bounds__(128 > kThreads ? 128 : kThreads) cached_rows_kernel(RowArgs a) {
  using G = typename GroupOf<kThreads>::type;
  __shared__ State scratch[kThreads / 32 > 0 ? kThreads / 32 : 1];
  G g;
  if constexpr (kThreads > 32) g.scratch = scratch;
  const int groups_per_block = blockDim.x / kThreads;
  const int group = threadIdx.x / kThreads, t = threadIdx.x % kThreads;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * groups_per_block;
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * groups_per_block + group;
       r < a.rows; r += step) {
    Segment<T, kThreads> seg;
    seg.load(static_cast<const T*>(a.in) + r * a.in_stride, a.n, a.theta, t);
    const State st = row_state(g, [&](auto fn) { seg.each(fn); });
    finish_cached_row<T>(a, g, r, st, seg, t == 0);
  }
}

// Split path, pass 1: the state of each chunk.
template <class T>
__global__ void __launch_bounds__(kRowThreads) chunk_state_kernel(RowArgs a) {
  __shared__ State scratch[kRowThreads / 32];
  BlockGroup<kRowThreads> g{scratch};
  const std::int64_t work = a.rows * a.chunks_per_row;
  for (std::int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const std::int64_t r = w / a.chunks_per_row, c = w % a.chunks_per_row;
    const std::int64_t begin = c * kChunk;
    Segment<T, kRowThreads> seg;
    seg.load(static_cast<const T*>(a.in) + r * a.in_stride + begin,
             std::min(std::int64_t{kChunk}, a.n - begin), a.theta, threadIdx.x);
    const State st = row_state(g, [&](auto fn) { seg.each(fn); });
    if (threadIdx.x == 0) a.chunk_state[w] = st;
  }
}

// Split path, pass 2: merge the chunk states of each row (T6 merge), write the
// per-row scalar outputs, and (adaptive) beta.
__global__ void __launch_bounds__(kRowThreads) merge_chunks_kernel(RowArgs a) {
  __shared__ State scratch[kRowThreads / 32];
  BlockGroup<kRowThreads> g{scratch};
  for (std::int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    State s = sa::theory::entropy_identity<float>();
    for (std::int64_t c = threadIdx.x; c < a.chunks_per_row; c += kRowThreads)
      s = sa::theory::entropy_merge(s, a.chunk_state[r * a.chunks_per_row + c]);
    const State st = g.merge(s);
    if (threadIdx.x != 0) continue;
    a.row_state[r] = st;
    write_row_scalars(a, r, st);
  }
}

// Split path, adaptive pass 3: per chunk, sum of exp(beta (z - m)) against the row max.
template <class T>
__global__ void __launch_bounds__(kRowThreads) adaptive_chunk_sum_kernel(RowArgs a) {
  __shared__ State scratch[kRowThreads / 32];
  BlockGroup<kRowThreads> g{scratch};
  const std::int64_t work = a.rows * a.chunks_per_row;
  for (std::int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const std::int64_t r = w / a.chunks_per_row, c = w % a.chunks_per_row;
    const State st = a.row_state[r];
    if (!state_is_finite(st)) continue;  // uniform over the block
    const float beta = a.row_beta[r];
    const std::int64_t begin = c * kChunk, len = std::min(std::int64_t{kChunk}, a.n - begin);
    const T* x = static_cast<const T*>(a.in) + r * a.in_stride + begin;
    float s = 0.f;
    for (std::int64_t i = threadIdx.x; i < len; i += kRowThreads)
      s += adaptive_numerator(st, beta, scaled(load_f(x + i), a.theta));
    s = g.sum(s);
    if (threadIdx.x == 0) a.chunk_sum[w] = s;
  }
}

// Split path, adaptive pass 4: per row, the sum of the chunk sums.
__global__ void __launch_bounds__(kRowThreads) adaptive_row_sum_kernel(RowArgs a) {
  __shared__ State scratch[kRowThreads / 32];
  BlockGroup<kRowThreads> g{scratch};
  for (std::int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    if (!state_is_finite(a.row_state[r])) continue;
    float s = 0.f;
    for (std::int64_t c = threadIdx.x; c < a.chunks_per_row; c += kRowThreads)
      s += a.chunk_sum[r * a.chunks_per_row + c];
    s = g.sum(s);
    if (threadIdx.x == 0) a.row_sum[r] = s;
  }
}

// Split path, last pass: the element outputs (softmax, log_softmax, adaptive).
template <class T>
__global__ void __launch_bounds__(kRowThreads) write_chunks_kernel(RowArgs a) {
  const std::int64_t work = a.rows * a.chunks_per_row;
  for (std::int64_t w = blockIdx.x; w < work; w += gridDim.x) {
    const std::int64_t r = w / a.chunks_per_row, c = w % a.chunks_per_row;
    const State st = a.row_state[r];
    const std::int64_t begin = c * kChunk, len = std::min(std::int64_t{kChunk}, a.n - begin);
    const T* x = static_cast<const T*>(a.in) + r * a.in_stride + begin;
    T* y = static_cast<T*>(a.out) + r * a.out_stride + begin;
    if (a.op == RowOp::softmax) {
      for (std::int64_t i = threadIdx.x; i < len; i += kRowThreads)
        store_f(y + i, softmax_weight(st, scaled(load_f(x + i), a.theta)));
    } else if (a.op == RowOp::log_softmax) {
      const float logS = logf(st.S);
      for (std::int64_t i = threadIdx.x; i < len; i += kRowThreads)
        store_f(y + i, log_softmax_value(st, logS, scaled(load_f(x + i), a.theta)));
    } else if (state_is_finite(st)) {  // adaptive
      const float beta = a.row_beta[r], s2 = a.row_sum[r];
      for (std::int64_t i = threadIdx.x; i < len; i += kRowThreads)
        store_f(y + i, adaptive_numerator(st, beta, scaled(load_f(x + i), a.theta)) / s2);
    } else {
      for (std::int64_t i = threadIdx.x; i < len; i += kRowThreads)
        store_f(y + i, softmax_weight(st, scaled(load_f(x + i), a.theta)));
    }
  }
}

#if !defined(SA_CUDA_EMULATION)
// One-pass softmax / log_softmax of split rows (see the top of this file).
// row_count[r] counts the published chunk states of row r; *ticket hands out
// work items (r * chunks_per_row + c) in order.
template <class T>
__global__ void __launch_bounds__(kRowThreads)
    fused_chunks_kernel(RowArgs a, unsigned long long* row_count, unsigned long long* ticket) {
  __shared__ State scratch[kRowThreads / 32];
  __shared__ long long item;
  BlockGroup<kRowThreads> g{scratch};
  const std::int64_t work = a.rows * a.chunks_per_row;
  for (;;) {
    __syncthreads();  // item is read by every thread below before it changes
    if (threadIdx.x == 0) item = static_cast<long long>(atomicAdd(ticket, 1ull));
    __syncthreads();
    const std::int64_t w = item;
    if (w >= work) return;
    const std::int64_t r = w / a.chunks_per_row, c = w % a.chunks_per_row;
    const std::int64_t begin = c * kChunk;
    Segment<T, kRowThreads> seg;
    seg.load(static_cast<const T*>(a.in) + r * a.in_stride + begin,
             std::min(std::int64_t{kChunk}, a.n - begin), a.theta, threadIdx.x);
    const State mine = row_state(g, [&](auto fn) { seg.each(fn); });
    if (threadIdx.x == 0) {
      a.chunk_state[w] = mine;
      __threadfence();  // the state is visible before the count says so
      atomicAdd(&row_count[r], 1ull);
      const volatile unsigned long long* cnt = &row_count[r];
      while (*cnt < static_cast<unsigned long long>(a.chunks_per_row)) __nanosleep(64);
      __threadfence();
    }
    __syncthreads();
    // The row's state, merged as merge_chunks_kernel merges it.
    State s = sa::theory::entropy_identity<float>();
    for (std::int64_t k = threadIdx.x; k < a.chunks_per_row; k += kRowThreads) {
      const State* p = a.chunk_state + r * a.chunks_per_row + k;
      const State x{__ldcg(&p->m), __ldcg(&p->S), __ldcg(&p->T)};
      s = sa::theory::entropy_merge(s, x);
    }
    const State st = g.merge(s);
    T* y = static_cast<T*>(a.out) + r * a.out_stride + begin;
    if (a.op == RowOp::softmax) {
      seg.each_index([&](std::int64_t i, float z) { store_f(y + i, softmax_weight(st, z)); });
    } else {
      const float logS = logf(st.S);
      seg.each_index(
          [&](std::int64_t i, float z) { store_f(y + i, log_softmax_value(st, logS, z)); });
    }
  }
}

// Runs the one-pass path when the device can hold a row's chunks at once;
// false (nothing launched, no error left pending) otherwise.
template <class T>
bool try_fused(const RowArgs& a, unsigned long long* counters, std::string& error,
               sa_status& status) {
  int dev = 0, sms = 0, coop = 0, per_sm = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev) != cudaSuccess || !coop ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fused_chunks_kernel<T>, kRowThreads,
                                                    0) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  const std::int64_t resident = static_cast<std::int64_t>(sms) * per_sm;
  if (resident < a.chunks_per_row) return false;
  const std::int64_t work = a.rows * a.chunks_per_row;
  const unsigned grid = static_cast<unsigned>(std::min(resident, work));
  if (cudaError_t e = cudaMemsetAsync(counters, 0, (a.rows + 1) * sizeof(unsigned long long));
      e != cudaSuccess) {
    status = host::cuda_failure(e, "row workspace clear", error);
    return true;
  }
  RowArgs args = a;
  unsigned long long* row_count = counters;
  unsigned long long* ticket = counters + a.rows;
  void* params[] = {&args, &row_count, &ticket};
  const cudaError_t e =
      cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(fused_chunks_kernel<T>), dim3(grid),
                                  dim3(kRowThreads), params, 0, nullptr);
  if (e != cudaSuccess) {  // e.g. too large for this device's share: split path
    cudaGetLastError();
    return false;
  }
  if (cudaError_t s = cudaDeviceSynchronize(); s != cudaSuccess) {
    status = host::cuda_failure(s, "row kernel", error);
    return true;
  }
  status = SA_OK;
  return true;
}
#endif

template <class T>
sa_status launch_typed(RowArgs a, std::string& error) {
  const RowPlan p = plan_rows(a.rows, a.n);
  const auto grid = static_cast<unsigned>(p.grid);
  if (p.strategy == RowStrategy::warp) {
    SA_LAUNCH(grid, p.threads, 0, cached_rows_kernel<T, 32>)(a);
  } else if (p.strategy == RowStrategy::block) {
    SA_LAUNCH(grid, p.threads, 0, cached_rows_kernel<T, kRowThreads>)(a);
  } else {
    host::Scratch ws;
    if (cudaError_t e = ws.alloc(p.workspace_bytes); e != cudaSuccess)
      return host::cuda_failure(e, "row workspace allocation", error);
    const std::size_t work = static_cast<std::size_t>(p.work_items);
    const std::size_t rows = static_cast<std::size_t>(a.rows);
    a.chunks_per_row = p.chunks_per_row;
    a.chunk_state = ws.as<State>();
    a.chunk_sum = ws.as<float>(work * sizeof(State));
    a.row_state = ws.as<State>(work * (sizeof(State) + sizeof(float)));
    a.row_beta = ws.as<float>(work * (sizeof(State) + sizeof(float)) + rows * sizeof(State));
    a.row_sum = a.row_beta + rows;
#if !defined(SA_CUDA_EMULATION)
    if (a.op == RowOp::softmax || a.op == RowOp::log_softmax) {
      // After the per-row floats, aligned for 64-bit atomics (plan.cpp counts
      // the slack).
      const std::size_t used =
          work * (sizeof(State) + sizeof(float)) + rows * sizeof(State) + 2 * rows * sizeof(float);
      auto* counters = ws.as<unsigned long long>((used + 7) / 8 * 8);
      sa_status status = SA_OK;
      if (try_fused<T>(a, counters, error, status)) return status;
    }
#endif
    const auto row_grid = static_cast<unsigned>(grid_for(a.rows, 1));
    SA_LAUNCH(grid, kRowThreads, 0, chunk_state_kernel<T>)(a);
    SA_LAUNCH(row_grid, kRowThreads, 0, merge_chunks_kernel)(a);
    if (a.op == RowOp::adaptive) {
      SA_LAUNCH(grid, kRowThreads, 0, adaptive_chunk_sum_kernel<T>)(a);
      SA_LAUNCH(row_grid, kRowThreads, 0, adaptive_row_sum_kernel)(a);
    }
    if (a.op == RowOp::softmax || a.op == RowOp::log_softmax || a.op == RowOp::adaptive)
      SA_LAUNCH(grid, kRowThreads, 0, write_chunks_kernel<T>)(a);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
      return host::cuda_failure(e, "row kernel launch", error);
    if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
      return host::cuda_failure(e, "row kernel", error);
    return SA_OK;
  }
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return host::cuda_failure(e, "row kernel launch", error);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
    return host::cuda_failure(e, "row kernel", error);
  return SA_OK;
}

const char* op_name(RowOp op) {
  switch (op) {
    case RowOp::softmax:
      return "softmax";
    case RowOp::log_softmax:
      return "log_softmax";
    case RowOp::logsumexp:
      return "logsumexp";
    case RowOp::entropy:
      return "entropy";
    case RowOp::adaptive:
      return "adaptive_softmax";
  }
  return "?";
}

__global__ void merge_entropy_kernel(std::int64_t count, const sa_entropy_state* a,
                                     const sa_entropy_state* b, sa_entropy_state* out) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += step) {
    const sa_entropy_state x = a[i], y = b[i];
    const State m = sa::theory::entropy_merge(State{x.m, x.S, x.T}, State{y.m, y.S, y.T});
    out[i] = sa_entropy_state{m.m, m.S, m.T};
  }
}

}  // namespace

sa_status launch_rows(const RowCall& c, std::string& error) {
  const char* op = op_name(c.op);
  for (auto [p, name] : {std::pair<const void*, const char*>{c.in, "in"},
                         {c.out, "out"},
                         {c.lse, "lse"},
                         {c.entropy, "entropy"},
                         {c.beta, "beta"},
                         {c.state, "state"}})
    if (sa_status s = host::require_device(p, op, name, error); s != SA_OK) return s;
  RowArgs a{};
  a.op = c.op;
  a.rows = c.shape.rows;
  a.n = c.shape.n;
  a.in_stride = c.shape.in_stride;
  a.out_stride = c.shape.out_stride;
  a.theta = static_cast<float>(c.shape.temperature);
  if (!(a.theta > 0.f) || !std::isfinite(a.theta)) {
    error = std::string(op) + ": shape->temperature = " + std::to_string(c.shape.temperature) +
            " is outside float32's positive finite range";
    return SA_INVALID_ARGUMENT;
  }
  a.in = c.in;
  a.out = c.out;
  a.lse = c.lse;
  a.entropy = c.entropy;
  a.beta = c.beta;
  a.state = c.state;
  return c.dtype == SA_F32 ? launch_typed<float>(a, error) : launch_typed<__nv_bfloat16>(a, error);
}

sa_status launch_merge_entropy(std::int64_t count, const sa_entropy_state* a,
                               const sa_entropy_state* b, sa_entropy_state* out,
                               std::string& error) {
  const char* op = "merge_entropy_states";
  for (auto [p, name] : {std::pair<const void*, const char*>{a, "a"}, {b, "b"}, {out, "out"}})
    if (sa_status s = host::require_device(p, op, name, error); s != SA_OK) return s;
  SA_LAUNCH(static_cast<unsigned>(grid_for(count, 256)), 256, 0, merge_entropy_kernel)
  (count, a, b, out);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return host::cuda_failure(e, "merge_entropy_states launch", error);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess)
    return host::cuda_failure(e, "merge_entropy_states", error);
  return SA_OK;
}

}  // namespace sa::kernels::cuda
