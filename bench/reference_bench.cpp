// The correctly rounded softmax reference (reference/softmax_cr.hpp): the
// fast path (Ziv: double, double-double, MPFR fallback) against the
// MPFR-only path, single thread, side by side in one process, with the
// throughput ratio printed at the end and the fraction of elements that
// fell back to MPFR as a counter.
//
//   build/bench/reference_bench          # ~1 min on an idle core
//
// Also the paper's entropy and adaptive softmax at n = 65536, and attention
// forward (reference/attention_cr.hpp) on a prefill shape (causal, 256
// queries x 256 keys, d = 64) and a decoding shape (1 query x 4096 keys, d =
// 128), float32 target (ratios printed); attention backward
// (reference/attention_backward_cr.hpp: dq, dk, dv) on a prefill shape
// (causal, 2 query heads on 1 key/value head, 128 x 128, d = 64) and a
// decoding shape (4 query heads on 1, 1 query x 1024 keys, d = 128), float32
// target, N(0, 1) dout, with the fallback fraction as a counter.
//
// Inputs: N(0, 1) float32 logits (seeded), n = 65536 and 2^20. Times are
// CPU times per call (robust on a shared machine). The MPFR-only path runs
// once per size at 2^20 (a call takes seconds).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/attention_case.hpp"
#include "reference/adaptive_cr.hpp"
#include "reference/attention_backward_cr.hpp"
#include "reference/attention_cr.hpp"
#include "reference/entropy_cr.hpp"
#include "reference/softmax_cr.hpp"

namespace {

using sa::DType;

std::vector<double> gaussian_row(std::int64_t n) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> N(0.0, 1.0);
  std::vector<double> l(static_cast<std::size_t>(n));
  for (double& x : l) x = static_cast<float>(N(rng));
  return l;
}

void bench(benchmark::State& st, DType t, sa::ref::RefPath path) {
  const std::int64_t n = st.range(0);
  const auto l = gaussian_row(n);
  sa::ref::CrStats stats;
  sa::ref::CrOptions o;
  o.path = path;
  o.threads = 1;
  o.stats = &stats;
  for (auto _ : st) benchmark::DoNotOptimize(sa::ref::softmax_rounded(t, l, 1.0, o));
  st.SetItemsProcessed(st.iterations() * n);
  st.counters["fallback_fraction"] = stats.fallback_fraction();
  st.counters["level2_fraction"] =
      stats.elements ? static_cast<double>(stats.level2) / static_cast<double>(stats.elements) : 0;
}

// The paper's entropy (H = -sum p log(p + 1e-9)) and adaptive softmax
// (paper's entropy, beta, softmax(beta l)) the same way, at n = 65536.
void bench_paper_entropy(benchmark::State& st, DType t, sa::ref::RefPath path) {
  const std::int64_t n = st.range(0);
  const auto l = gaussian_row(n);
  sa::ref::CrStats stats;
  sa::ref::CrOptions o;
  o.path = path;
  o.threads = 1;
  o.stats = &stats;
  for (auto _ : st) benchmark::DoNotOptimize(sa::ref::paper_entropy_rounded(t, l, 1.0, o));
  st.SetItemsProcessed(st.iterations() * n);
  st.counters["fallback_fraction"] = stats.fallback_fraction();
}

void bench_adaptive(benchmark::State& st, DType t, sa::ref::RefPath path) {
  const std::int64_t n = st.range(0);
  auto l = gaussian_row(n);
  for (double& x : l) x *= 4;  // N(0, 16): H ~ 3 at n = 65536, beta ~ 2.2 (log n - 8)
  sa::ref::CrStats stats;
  sa::ref::CrOptions o;
  o.path = path;
  o.threads = 1;
  o.stats = &stats;
  for (auto _ : st)
    benchmark::DoNotOptimize(
        sa::ref::adaptive_softmax_rounded(t, l, 1.0, sa::ref::EntropyDefinition::paper_eps, o));
  st.SetItemsProcessed(st.iterations() * n);
  st.counters["fallback_fraction"] = stats.fallback_fraction();
  st.counters["level2_fraction"] =
      stats.elements ? static_cast<double>(stats.level2) / static_cast<double>(stats.elements) : 0;
}

// Attention forward: N(0, 1) float32 q, k, v (seeded), scale 1/sqrt(d).
// shape 0: prefill, causal, 1 x 1 head x 256 queries x 256 keys, d = 64;
// shape 1: decoding, 1 query x 4096 keys, d = 128.
sa::AttentionCase attention_shape(std::int64_t shape) {
  sa::AttentionCase c;
  c.seqlen_q = shape == 0 ? 256 : 1;
  c.seqlen_k = shape == 0 ? 256 : 4096;
  c.d = c.dv = shape == 0 ? 64 : 128;
  c.causal = shape == 0;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> N(0.0, 1.0);
  auto fill = [&](std::vector<float>& x, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) x.push_back(static_cast<float>(N(rng)));
  };
  fill(c.q, c.seqlen_q * c.d);
  fill(c.k, c.seqlen_k * c.d);
  fill(c.v, c.seqlen_k * c.dv);
  c.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.d)));
  return c;
}

void bench_attention(benchmark::State& st, sa::ref::RefPath path) {
  const sa::AttentionCase c = attention_shape(st.range(0));
  sa::ref::CrStats stats;
  sa::ref::CrOptions o;
  o.path = path;
  o.threads = 1;
  o.stats = &stats;
  for (auto _ : st) benchmark::DoNotOptimize(sa::ref::attention_rounded(DType::float32, c, o));
  st.SetItemsProcessed(st.iterations() * c.seqlen_q);  // query rows
  st.counters["fallback_fraction"] = stats.fallback_fraction();
  st.counters["level2_fraction"] =
      stats.elements ? static_cast<double>(stats.level2) / static_cast<double>(stats.elements) : 0;
}

// Attention backward: shape 0: prefill, causal, 2 query heads on 1 key/value
// head, 128 queries x 128 keys, d = 64; shape 1: decoding, 4 query heads on
// 1, 1 query x 1024 keys, d = 128. N(0, 1) float32 q, k, v, dout (seeded).
sa::AttentionCase backward_shape(std::int64_t shape, std::vector<float>& dout) {
  sa::AttentionCase c;
  c.seqlen_q = shape == 0 ? 128 : 1;
  c.seqlen_k = shape == 0 ? 128 : 1024;
  c.d = c.dv = shape == 0 ? 64 : 128;
  c.heads_q = shape == 0 ? 2 : 4;
  c.heads_kv = 1;
  c.causal = shape == 0;
  std::mt19937_64 rng(9);
  std::normal_distribution<double> N(0.0, 1.0);
  auto fill = [&](std::vector<float>& x, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) x.push_back(static_cast<float>(N(rng)));
  };
  fill(c.q, c.seqlen_q * c.heads_q * c.d);
  fill(c.k, c.seqlen_k * c.d);
  fill(c.v, c.seqlen_k * c.dv);
  dout.clear();
  fill(dout, c.seqlen_q * c.heads_q * c.dv);
  c.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.d)));
  return c;
}

void bench_attention_backward(benchmark::State& st, sa::ref::RefPath path) {
  std::vector<float> dout;
  const sa::AttentionCase c = backward_shape(st.range(0), dout);
  sa::ref::CrStats stats;
  sa::ref::CrOptions o;
  o.path = path;
  o.threads = 1;
  o.stats = &stats;
  for (auto _ : st)
    benchmark::DoNotOptimize(sa::ref::attention_backward_rounded(DType::float32, c, dout, o));
  st.SetItemsProcessed(st.iterations() * c.seqlen_q * c.heads_q);  // query rows
  st.counters["fallback_fraction"] = stats.fallback_fraction();
}

class Collect : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> cpu_ns;  // run name -> CPU ns per iteration
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred || r.run_type == Run::RT_Aggregate) continue;
      const double mult = r.time_unit == benchmark::kMillisecond   ? 1e6
                          : r.time_unit == benchmark::kMicrosecond ? 1e3
                          : r.time_unit == benchmark::kSecond      ? 1e9
                                                                   : 1.0;
      std::string name = r.benchmark_name();
      if (const auto p = name.find("/iterations:"); p != std::string::npos) name.erase(p);
      cpu_ns[name] = r.GetAdjustedCPUTime() * mult;
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t sizes[] = {65536, 1 << 20};
  for (std::int64_t n : sizes) {
    benchmark::RegisterBenchmark("cr_softmax_f32/fast", bench, DType::float32,
                                 sa::ref::RefPath::fast)
        ->Arg(n)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("cr_softmax_bf16/fast", bench, DType::bfloat16,
                                 sa::ref::RefPath::fast)
        ->Arg(n)
        ->Unit(benchmark::kMillisecond);
    auto* m = benchmark::RegisterBenchmark("cr_softmax_f32/mpfr_only", bench, DType::float32,
                                           sa::ref::RefPath::mpfr_only)
                  ->Arg(n)
                  ->Unit(benchmark::kMillisecond);
    if (n > 65536) m->Iterations(1);
  }
  benchmark::RegisterBenchmark("cr_paper_entropy_f32/fast", bench_paper_entropy, DType::float32,
                               sa::ref::RefPath::fast)
      ->Arg(65536)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("cr_paper_entropy_f32/mpfr_only", bench_paper_entropy,
                               DType::float32, sa::ref::RefPath::mpfr_only)
      ->Arg(65536)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("cr_adaptive_f32/fast", bench_adaptive, DType::float32,
                               sa::ref::RefPath::fast)
      ->Arg(65536)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("cr_adaptive_f32/mpfr_only", bench_adaptive, DType::float32,
                               sa::ref::RefPath::mpfr_only)
      ->Arg(65536)
      ->Unit(benchmark::kMillisecond);
  for (std::int64_t shape : {0, 1}) {
    benchmark::RegisterBenchmark("cr_attention/fast", bench_attention, sa::ref::RefPath::fast)
        ->Arg(shape)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("cr_attention/mpfr_only", bench_attention,
                                 sa::ref::RefPath::mpfr_only)
        ->Arg(shape)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
  }
  for (std::int64_t shape : {0, 1}) {
    benchmark::RegisterBenchmark("cr_attention_backward/fast", bench_attention_backward,
                                 sa::ref::RefPath::fast)
        ->Arg(shape)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("cr_attention_backward/mpfr_only", bench_attention_backward,
                                 sa::ref::RefPath::mpfr_only)
        ->Arg(shape)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Collect c;
  benchmark::RunSpecifiedBenchmarks(&c);
  std::printf("\nThroughput ratio, fast / MPFR-only (CPU time, single thread, float32 target)\n");
  for (std::int64_t n : sizes) {
    const std::string s = "/" + std::to_string(n);
    const auto a = c.cpu_ns.find("cr_softmax_f32/fast" + s),
               b = c.cpu_ns.find("cr_softmax_f32/mpfr_only" + s);
    if (a == c.cpu_ns.end() || b == c.cpu_ns.end()) continue;
    const double r = b->second / a->second;
    std::printf("n = %-8lld fast %10.1f us  mpfr_only %12.1f us  ratio %8.1f  target >= 100: %s\n",
                static_cast<long long>(n), a->second / 1e3, b->second / 1e3, r,
                r >= 100 ? "met" : "MISSED");
  }
  for (const char* op : {"cr_paper_entropy_f32", "cr_adaptive_f32"}) {
    const auto a = c.cpu_ns.find(std::string(op) + "/fast/65536"),
               b = c.cpu_ns.find(std::string(op) + "/mpfr_only/65536");
    if (a == c.cpu_ns.end() || b == c.cpu_ns.end()) continue;
    std::printf("%s n = 65536: fast %10.1f us  mpfr_only %12.1f us  ratio %8.1f\n", op,
                a->second / 1e3, b->second / 1e3, b->second / a->second);
  }
  const char* shapes[] = {"prefill (causal 256 x 256, d = 64)", "decode (1 x 4096, d = 128)"};
  for (int shape : {0, 1}) {
    const std::string sfx = "/" + std::to_string(shape);
    const auto a = c.cpu_ns.find("cr_attention/fast" + sfx),
               b = c.cpu_ns.find("cr_attention/mpfr_only" + sfx);
    if (a == c.cpu_ns.end() || b == c.cpu_ns.end()) continue;
    std::printf("cr_attention %-36s fast %10.1f us  mpfr_only %12.1f us  ratio %8.1f\n",
                shapes[shape], a->second / 1e3, b->second / 1e3, b->second / a->second);
  }
  const char* bshapes[] = {"prefill (causal 128 x 128, d = 64, 2/1 heads)",
                           "decode (1 x 1024, d = 128, 4/1 heads)"};
  for (int shape : {0, 1}) {
    const std::string sfx = "/" + std::to_string(shape);
    const auto a = c.cpu_ns.find("cr_attention_backward/fast" + sfx),
               b = c.cpu_ns.find("cr_attention_backward/mpfr_only" + sfx);
    if (a == c.cpu_ns.end() || b == c.cpu_ns.end()) continue;
    std::printf("cr_attention_backward %-46s fast %10.1f us  mpfr_only %12.1f us  ratio %8.1f\n",
                bshapes[shape], a->second / 1e3, b->second / 1e3, b->second / a->second);
  }
  benchmark::Shutdown();
  return 0;
}
