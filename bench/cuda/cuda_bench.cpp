// Benchmarks of the built-in CUDA kernel, timed with CUDA events around the
// raw sa_kernel entry points (device buffers allocated once per benchmark;
// each call is synchronous and includes the kernel's host-side validation).
//
//   BM_Softmax/<dtype>/rows/n: achieved bandwidth and its fraction of the
//     device's peak. Bytes moved = rows * n * sizeof(element) read + the same
//     written (the minimum any softmax must move); peak = 2 * memory clock *
//     bus width / 8 (double data rate), from cudaDeviceGetAttribute
//     (cudaDeviceProp.memoryClockRate is gone in CUDA 13).
//   BM_Attention/<dtype>/n/d/splits: the plain forward, nq = nk = n, dv = d
//     (interface v1), and the adaptive one (two-pass, theory.md T6) with the
//     ratio of their times where the kernel declares SA_ATTN_ADAPTIVE.
//   BM_AttentionV2/<dtype>/L/d/causal: the batched forward (interface v2,
//     FlashAttention-2's structure): batch 4, 16 heads, BSHD, TFLOP/s counting
//     4 B H L^2 d flops (QK^T and PV; half of that with a causal mask).
//   BM_AttentionBackward/<dtype>/L/d/causal: the same shapes' backward,
//     TFLOP/s counting 10 B H L^2 d flops (recomputed QK^T, dV, dP, dQ, dK;
//     half with a causal mask), and its time over the forward's.
//
// A failing call ends that benchmark with its error (SkipWithError) and the
// program goes on to the next one.
//
// Without a device the program says so and exits 0 (nothing to measure).
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "kernels/cuda/cuda_kernel.hpp"

namespace {

const sa_kernel& K() { return *sa::kernels::cuda_kernel(); }

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

double peak_bytes_per_second() {
  int dev = 0, clock_khz = 0, bus_bits = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev), "memory clock");
  check(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev), "bus width");
  return 2.0 * clock_khz * 1e3 * (bus_bits / 8.0);
}

// Device buffer of `count` elements of `dtype` holding N(0, sigma) values
// (sigma 0: zeros). Google Benchmark calls a benchmark's function several
// times while it picks the iteration count, so buffers are made once per
// (count, dtype, sigma, seed) and kept; the values come from one pool of 2^22
// normal draws per seed, repeated (the data only has to be realistic, not
// unrepeated, for a timing).
struct DeviceBuffer {
  void* p = nullptr;
  DeviceBuffer(std::size_t count, sa_dtype dtype, float sigma, std::uint64_t seed) {
    using Key = std::tuple<std::size_t, int, float, std::uint64_t>;
    static std::map<Key, void*> made;
    const Key key{count, static_cast<int>(dtype), sigma, seed};
    if (auto it = made.find(key); it != made.end()) {
      p = it->second;
      return;
    }
    const std::size_t es = dtype == SA_F32 ? 4 : 2;
    check(cudaMalloc(&p, std::max<std::size_t>(count, 1) * es), "cudaMalloc");
    made.emplace(key, p);
    if (count == 0) return;
    constexpr std::size_t kPool = std::size_t{1} << 22;
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> N(0.f, sigma > 0.f ? sigma : 1.f);
    std::vector<unsigned char> pool(std::min(count, kPool) * es);
    for (std::size_t i = 0; i < pool.size() / es; ++i) {
      const float x = sigma > 0.f ? N(rng) : 0.f;
      if (dtype == SA_F32) {
        std::memcpy(&pool[i * 4], &x, 4);
      } else {
        const std::uint16_t b = dtype == SA_BF16 ? sa::bf16_from_float(x) : sa::f16_from_float(x);
        std::memcpy(&pool[i * 2], &b, 2);
      }
    }
    for (std::size_t done = 0; done < count * es; done += pool.size())
      check(cudaMemcpy(static_cast<char*>(p) + done, pool.data(),
                       std::min(pool.size(), count * es - done), cudaMemcpyHostToDevice),
            "cudaMemcpy");
  }
};

// Milliseconds of one call of fn, by CUDA events; -1 when the call failed
// (the kernel's last_error is printed).
template <class Fn>
float timed(Fn fn) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a);
  const sa_status s = fn();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (s != SA_OK) {
    const char* e = K().last_error(K().ctx);
    std::fprintf(stderr, "kernel call failed: %s\n", e ? e : "?");
    return -1.f;
  }
  return ms;
}

void BM_Softmax(benchmark::State& state, sa_dtype dtype) {
  const std::int64_t rows = state.range(0), n = state.range(1);
  const std::size_t count = static_cast<std::size_t>(rows * n);
  DeviceBuffer in(count, dtype, 3.f, 1), out(count, dtype, 0.f, 2);
  const sa_rows shape{rows, n, n, n, 1.0};
  auto call = [&] { return K().softmax(K().ctx, dtype, &shape, in.p, out.p); };
  if (timed(call) < 0) {  // warm-up
    state.SkipWithError("softmax call failed");
    return;
  }
  double total_ms = 0;
  for (auto _ : state) {
    const float ms = timed(call);
    total_ms += ms;
    state.SetIterationTime(ms / 1e3);
  }
  const double bytes = 2.0 * static_cast<double>(count) * (dtype == SA_F32 ? 4 : 2);
  const double per_s = bytes / (total_ms / 1e3 / static_cast<double>(state.iterations()));
  state.counters["GB/s"] = per_s / 1e9;
  state.counters["frac_peak_bw"] = per_s / peak_bytes_per_second();
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes) * state.iterations());
}

void BM_Attention(benchmark::State& state, sa_dtype dtype) {
  const std::int64_t n = state.range(0), d = state.range(1), splits = state.range(2);
  DeviceBuffer q(n * d, dtype, 1.f, 3), k(n * d, dtype, 1.f, 4), v(n * d, dtype, 1.f, 5),
      o(n * d, dtype, 0.f, 6);
  float* aux = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&aux), 3 * n * sizeof(float)), "cudaMalloc");
  sa_attention_args a{};
  a.dtype = dtype;
  a.nq = a.nk = n;
  a.d = a.dv = d;
  a.q = q.p, a.k = k.p, a.v = v.p, a.out = o.p;
  a.q_stride = a.k_stride = a.v_stride = a.out_stride = d;
  a.lse = aux, a.entropy = aux + n, a.beta = aux + 2 * n;
  a.scale = 1.0 / std::sqrt(static_cast<double>(d));
  a.num_splits = splits;
  auto plain = [&] {
    a.adaptive = 0;
    return K().attention(K().ctx, &a);
  };
  auto adaptive = [&] {
    a.adaptive = 1;
    return K().attention(K().ctx, &a);
  };
  // The adaptive temperature is timed only where the kernel declares it
  // (the built-in CUDA kernel's v1 slot is its attention_v2, which has none).
  const sa_capabilities* caps = K().capabilities;
  const bool has_adaptive = caps != nullptr && (caps->attention_features & SA_ATTN_ADAPTIVE);
  if (timed(plain) < 0 || (has_adaptive && timed(adaptive) < 0)) {
    cudaFree(aux);
    state.SkipWithError("attention call failed");
    return;
  }
  double plain_ms = 0, adaptive_ms = 0;
  for (auto _ : state) {
    const float p = timed(plain);
    plain_ms += p;
    if (has_adaptive) adaptive_ms += timed(adaptive);
    state.SetIterationTime(p / 1e3);  // the reported time is the plain one
  }
  cudaFree(aux);
  const double it = static_cast<double>(state.iterations());
  state.counters["plain_ms"] = plain_ms / it;
  if (has_adaptive) {
    state.counters["adaptive_ms"] = adaptive_ms / it;
    state.counters["adaptive/plain"] = adaptive_ms / plain_ms;
  }
  // 4 n^2 d flops (QK^T and PV).
  state.counters["plain_TFLOP/s"] = 4.0 * n * n * d / (plain_ms / it / 1e3) / 1e12;
}

// Batched attention, interface v2: batch 4, 16 heads, contiguous BSHD.
struct V2Shape {
  std::int64_t B = 4, H = 16, L, d;
  bool causal;
  std::size_t count() const { return static_cast<std::size_t>(B * L * H * d); }
  sa_tensor tensor(const void* p) const { return sa_tensor{p, L * H * d, d, H * d}; }
  // Score-matrix entries actually formed: L^2, or about half with a causal mask.
  double pairs() const {
    return causal ? static_cast<double>(L) * (L + 1) / 2 : static_cast<double>(L) * L;
  }
};

void BM_AttentionV2(benchmark::State& state, sa_dtype dtype, bool backward) {
  const V2Shape sh{4, 16, state.range(0), state.range(1), state.range(2) != 0};
  DeviceBuffer q(sh.count(), dtype, 1.f, 3), k(sh.count(), dtype, 1.f, 4),
      v(sh.count(), dtype, 1.f, 5), o(sh.count(), dtype, 0.f, 6), dout(sh.count(), dtype, 1.f, 7),
      dq(sh.count(), dtype, 0.f, 8), dk(sh.count(), dtype, 0.f, 9), dv(sh.count(), dtype, 0.f, 10);
  float* lse = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&lse), sh.B * sh.H * sh.L * sizeof(float)),
        "cudaMalloc");
  sa_attention_v2_args a{};
  a.struct_size = sizeof a;
  a.qkv_dtype = a.out_dtype = dtype;
  a.batch = sh.B;
  a.heads_q = a.heads_kv = sh.H;
  a.seqlen_q = a.seqlen_k = sh.L;
  a.head_dim = a.head_dim_v = sh.d;
  a.q = sh.tensor(q.p), a.k = sh.tensor(k.p), a.v = sh.tensor(v.p);
  a.out = o.p;
  a.out_stride_b = sh.L * sh.H * sh.d, a.out_stride_h = sh.d, a.out_stride_s = sh.H * sh.d;
  a.lse = lse;
  a.scale = 1.0 / std::sqrt(static_cast<double>(sh.d));
  a.causal = sh.causal ? 1 : 0;
  a.alignment = SA_ALIGN_BOTTOM_RIGHT;
  a.window_left = a.window_right = -1;
  a.q_descale = a.k_descale = a.v_descale = 1.f;
  sa_attention_backward_args b{};
  b.struct_size = sizeof b;
  b.forward = &a;
  b.dout = sh.tensor(dout.p);
  b.dq = sh.tensor(dq.p), b.dk = sh.tensor(dk.p), b.dv = sh.tensor(dv.p);
  auto fwd = [&] { return K().attention_v2(K().ctx, &a); };
  auto bwd = [&] { return K().attention_backward(K().ctx, &b); };
  if (timed(fwd) < 0 || (backward && timed(bwd) < 0)) {
    cudaFree(lse);
    state.SkipWithError(backward ? "attention_v2/backward call failed"
                                 : "attention_v2 call failed");
    return;
  }
  double fwd_ms = 0, bwd_ms = 0;
  for (auto _ : state) {
    const float f = timed(fwd);
    const float g = backward ? timed(bwd) : 0.f;
    if (f < 0 || g < 0) {
      state.SkipWithError("a call failed while timing");
      break;
    }
    fwd_ms += f;
    bwd_ms += g;
    state.SetIterationTime((backward ? g : f) / 1e3);
  }
  cudaFree(lse);
  const double it = static_cast<double>(state.iterations());
  const double fwd_flops = 4.0 * sh.B * sh.H * sh.pairs() * sh.d;
  state.counters["fwd_ms"] = fwd_ms / it;
  state.counters["fwd_TFLOP/s"] = fwd_flops / (fwd_ms / it / 1e3) / 1e12;
  if (backward) {
    state.counters["bwd_ms"] = bwd_ms / it;
    state.counters["bwd_TFLOP/s"] = 2.5 * fwd_flops / (bwd_ms / it / 1e3) / 1e12;
    state.counters["bwd/fwd"] = bwd_ms / fwd_ms;
  }
}

void register_all() {
  for (auto [dtype, name] : {std::pair{SA_F32, "f32"}, std::pair{SA_BF16, "bf16"}}) {
    auto* s = benchmark::RegisterBenchmark(
        (std::string("BM_Softmax/") + name).c_str(),
        [dtype = dtype](benchmark::State& st) { BM_Softmax(st, dtype); });
    s->UseManualTime()->Unit(benchmark::kMicrosecond)->ArgNames({"rows", "n"});
    for (auto [rows, n] : {std::pair<std::int64_t, std::int64_t>{262144, 128},
                           {65536, 1024},
                           {16384, 4096},
                           {4096, 16384},
                           {1024, 65536},
                           {256, 1 << 20},
                           {16, 1 << 22}})
      s->Args({rows, n});
    auto* at = benchmark::RegisterBenchmark(
        (std::string("BM_Attention/") + name).c_str(),
        [dtype = dtype](benchmark::State& st) { BM_Attention(st, dtype); });
    at->UseManualTime()->Unit(benchmark::kMillisecond)->ArgNames({"n", "d", "splits"});
    for (auto [n, d, sp] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{1024, 64, 1},
                            {4096, 64, 1},
                            {4096, 128, 1},
                            {512, 64, 8}})
      at->Args({n, d, sp});
  }
  for (auto [dtype, name] :
       {std::pair{SA_BF16, "bf16"}, std::pair{SA_F16, "f16"}, std::pair{SA_F32, "f32"}}) {
    for (bool backward : {false, true}) {
      auto* v2 = benchmark::RegisterBenchmark(
          (std::string(backward ? "BM_AttentionBackward/" : "BM_AttentionV2/") + name).c_str(),
          [dtype = dtype, backward](benchmark::State& st) { BM_AttentionV2(st, dtype, backward); });
      v2->UseManualTime()->Unit(benchmark::kMillisecond)->ArgNames({"L", "d", "causal"});
      for (std::int64_t d : {64, 128})
        for (std::int64_t causal : {0, 1}) v2->Args({2048, d, causal});
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::printf("no CUDA device: %s; skipping the CUDA benchmarks\n",
                e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device present");
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
