// Benchmarks of the built-in CUDA kernel, timed with CUDA events around the
// raw sa_kernel entry points (device buffers allocated once per benchmark;
// each call is synchronous and includes the kernel's host-side validation).
//
//   BM_Softmax/<dtype>/rows/n: achieved bandwidth and its fraction of the
//     device's peak. Bytes moved = rows * n * sizeof(element) read + the same
//     written (the minimum any softmax must move); peak = 2 * memory clock *
//     bus width / 8 (double data rate), from cudaDeviceGetAttribute
//     (cudaDeviceProp.memoryClockRate is gone in CUDA 13).
//   BM_Attention/<dtype>/n/d/splits: plain and adaptive (two-pass, theory.md
//     T6) forward times and their ratio, nq = nk = n, dv = d.
//
// Without a device the program says so and exits 0 (nothing to measure).
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/bfloat16.hpp"
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

// Device buffer of `count` elements of `dtype` filled with N(0, sigma) values.
struct DeviceBuffer {
  void* p = nullptr;
  DeviceBuffer(std::size_t count, sa_dtype dtype, float sigma, std::uint64_t seed) {
    const std::size_t es = dtype == SA_F32 ? 4 : 2;
    check(cudaMalloc(&p, count * es), "cudaMalloc");
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> N(0.f, sigma);
    std::vector<unsigned char> host(count * es);
    for (std::size_t i = 0; i < count; ++i) {
      const float x = N(rng);
      if (dtype == SA_F32)
        std::memcpy(&host[i * 4], &x, 4);
      else {
        const std::uint16_t b = sa::bf16_from_float(x);
        std::memcpy(&host[i * 2], &b, 2);
      }
    }
    check(cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  ~DeviceBuffer() { cudaFree(p); }
};

// Milliseconds of one call of fn, by CUDA events.
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
    std::exit(1);
  }
  return ms;
}

void BM_Softmax(benchmark::State& state, sa_dtype dtype) {
  const std::int64_t rows = state.range(0), n = state.range(1);
  const std::size_t count = static_cast<std::size_t>(rows * n);
  DeviceBuffer in(count, dtype, 3.f, 1), out(count, dtype, 0.f, 2);
  const sa_rows shape{rows, n, n, n, 1.0};
  auto call = [&] { return K().softmax(K().ctx, dtype, &shape, in.p, out.p); };
  timed(call);  // warm-up
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
  timed(plain);
  timed(adaptive);
  double plain_ms = 0, adaptive_ms = 0;
  for (auto _ : state) {
    const float p = timed(plain), q2 = timed(adaptive);
    plain_ms += p;
    adaptive_ms += q2;
    state.SetIterationTime(q2 / 1e3);  // the reported time is the adaptive one
  }
  cudaFree(aux);
  const double it = static_cast<double>(state.iterations());
  state.counters["plain_ms"] = plain_ms / it;
  state.counters["adaptive_ms"] = adaptive_ms / it;
  state.counters["adaptive/plain"] = adaptive_ms / plain_ms;
  // 4 n^2 d flops (QK^T and PV) for plain; the adaptive pass 1 adds 2 n^2 d.
  state.counters["plain_TFLOP/s"] = 4.0 * n * n * d / (plain_ms / it / 1e3) / 1e12;
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
