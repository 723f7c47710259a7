// Throughput of the CPU kernel's attention backward (kernels/cpu/backward.cpp)
// and its time relative to the forward (kernels/cpu/attention_v2.cpp), both
// called through the kernel's C entry points in one process.
//
// Flop convention (FlashAttention's): forward 4 nq nk d, backward 2.5 times
// that, 10 nq nk d (five matrix products of 2 nq nk d: S, dP, dV, dQ, dK),
// d = dv, one head, non-causal, no mask, float32. The CPU backward does
// FlashAttention's five products (and adds per-key-tile dQ shares in order,
// for determinism without atomics), so its GFLOP/s read as FlashAttention's.
//
// Sizes: n = nk in {1024, 4096, 16384}, d in {64, 128}; nq = n up to 4096,
// above it nq = 2^24 / n (1024 at 16384) so one call stays near 10 GFLOP.
//
// BM_AttentionBackward/<n>/<d>: each iteration times one forward and one
// backward call on the same input; reported time is the backward's (manual
// time); counters: GFLOPs = backward GFLOP/s, fwd_GFLOPs, ratio = total
// backward / total forward wall time (FlashAttention reports about 2.5),
// nq, threads.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/cpu/cpu_kernel.hpp"
#include "softmax_audit/kernel.h"

namespace {

void BM_AttentionBackward(benchmark::State& state) {
  const std::int64_t nk = state.range(0), d = state.range(1);
  const std::int64_t nq = nk <= 4096 ? nk : (std::int64_t{1} << 24) / nk;
  std::mt19937_64 g(7);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  std::vector<float> q(nq * d), k(nk * d), v(nk * d), o(nq * d), go(nq * d), dq(nq * d), dk(nk * d),
      dv(nk * d), lse(nq);
  for (auto* x : {&q, &k, &v, &go})
    for (auto& e : *x) e = n01(g);
  const sa_kernel* K = sa::kernels::cpu_kernel();
  sa_attention_v2_args a{};
  a.struct_size = sizeof a;
  a.qkv_dtype = a.out_dtype = SA_F32;
  a.batch = a.heads_q = a.heads_kv = 1;
  a.seqlen_q = nq;
  a.seqlen_k = nk;
  a.head_dim = a.head_dim_v = d;
  a.q = {q.data(), nq * d, d, d};
  a.k = {k.data(), nk * d, d, d};
  a.v = {v.data(), nk * d, d, d};
  a.out = o.data();
  a.out_stride_b = nq * d;
  a.out_stride_h = d;
  a.out_stride_s = d;
  a.lse = lse.data();
  a.scale = 1.0 / std::sqrt(static_cast<double>(d));
  a.window_left = a.window_right = -1;
  a.q_descale = a.k_descale = a.v_descale = 1.0f;
  sa_attention_backward_args b{};
  b.struct_size = sizeof b;
  b.forward = &a;
  b.dout = {go.data(), nq * d, d, d};
  b.dq = {dq.data(), nq * d, d, d};
  b.dk = {dk.data(), nk * d, d, d};
  b.dv = {dv.data(), nk * d, d, d};
  double fwd = 0, bwd = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    if (K->attention_v2(K->ctx, &a) != SA_OK) state.SkipWithError("forward failed");
    const auto t1 = std::chrono::steady_clock::now();
    if (K->attention_backward(K->ctx, &b) != SA_OK) state.SkipWithError("backward failed");
    const auto t2 = std::chrono::steady_clock::now();
    const double f = std::chrono::duration<double>(t1 - t0).count(),
                 w = std::chrono::duration<double>(t2 - t1).count();
    fwd += f;
    bwd += w;
    state.SetIterationTime(w);
    benchmark::DoNotOptimize(dq.data());
  }
  const double flops = 4.0 * static_cast<double>(nq) * static_cast<double>(nk) * d;
  const double it = static_cast<double>(state.iterations());
  state.counters["GFLOPs"] = 2.5 * flops * it / bwd * 1e-9;
  state.counters["fwd_GFLOPs"] = flops * it / fwd * 1e-9;
  state.counters["ratio"] = bwd / fwd;
  state.counters["nq"] = static_cast<double>(nq);
#ifdef _OPENMP
  state.counters["threads"] = omp_get_max_threads();
#endif
}

}  // namespace

BENCHMARK(BM_AttentionBackward)
    ->ArgsProduct({{1024, 4096, 16384}, {64, 128}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

BENCHMARK_MAIN();
