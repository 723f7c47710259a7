// Row-operation benchmarks of the "cpu" kernel against its peers, in one
// binary, with the ratio table printed at the end.
//
//   build/bench/softmax_bench                 # everything + the ratio table
//                                             # (3 repetitions, medians; ~7 min on 2 busy cores)
//   build/bench/softmax_bench --benchmark_filter=softmax_f32   # a subset
//
// - The kernel is called through its raw sa_kernel function pointers (no
//   staging copies), one row per call unless a benchmark says otherwise, so
//   single-row timings are single-thread timings (the kernel never splits a row).
// - Peers: oneDNN (dnnl::softmax_forward, f32, when found at build time) and
//   Eigen (array max / exp / sum / scale); both single-threaded here
//   (omp_set_num_threads(1) outside the scaling benchmark).
// - Inputs: N(0, 1) logits unless stated; adaptive rows are N(0, sigma^2)
//   with sigma chosen so that H ~ 4 and beta > 1 (the full two-softmax path),
//   and also plain N(0,1) rows (beta = 1 at these sizes: shortcut path).
// - Subnormals: the kernel keeps gradual underflow (weights below 2^-126 are
//   correctly rounded subnormals, formed by integer operations whatever
//   MXCSR says, so no microcode assist). Rows whose weights reach that range
//   take checked forms of the passes (kernels/cpu/vec_exp-inl.h, SubForm);
//   the wide rows (softmax_*_wide) and the beta > 1 rows measure them, and
//   the "(info)" rows show plain softmax of beta*l against softmax of l.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <Eigen/Core>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "kernels/cpu/cpu_kernel.hpp"
#include "kernels/cpu/row_ops.hpp"

#ifdef SA_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace sa::bench {
void eigen_softmax_avx2(const float* x, float* y, std::int64_t n);
}

namespace {

const sa_kernel& K() { return *sa::kernels::cpu_kernel(); }

sa_rows one_row(std::int64_t n);
void check(sa_status s);
std::vector<float> logits(std::int64_t n, float sigma, std::uint64_t seed = 42) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = nd(rng);
  return v;
}
std::vector<std::uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<std::uint16_t> b(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) b[i] = sa::bf16_from_float(v[i]);
  return b;
}
std::vector<std::uint16_t> to_f16(const std::vector<float>& v) {
  std::vector<std::uint16_t> b(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) b[i] = sa::f16_from_float(v[i]);
  return b;
}
sa_rows one_row(std::int64_t n) { return sa_rows{1, n, n, n, 1.0}; }
void check(sa_status s) {
  if (s != SA_OK) {
    std::fprintf(stderr, "kernel call failed: %s\n", K().last_error(K().ctx));
    std::abort();
  }
}
void set_counters(benchmark::State& st, std::int64_t n, std::int64_t rows, std::size_t bytes_per) {
  st.SetItemsProcessed(st.iterations() * n * rows);
  st.SetBytesProcessed(st.iterations() * n * rows * static_cast<std::int64_t>(bytes_per));
}

// Adaptive rows: N(0, sigma^2) with sigma found by bisection (on the kernel's
// own entropy) so that H ~ 4, where beta(H) ~ 2.4 > 1: the full path.
float sigma_for_beta(std::int64_t n) {
  const auto base = logits(n, 1.0f);
  std::vector<float> x(base.size());
  const sa_rows s = one_row(n);
  double lo = 0.0, hi = 64.0;  // H(sigma) decreases from log n to ~0
  for (int it = 0; it < 30; ++it) {
    const double mid = 0.5 * (lo + hi);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(mid) * base[i];
    float H = 0;
    check(K().entropy(K().ctx, SA_F32, &s, x.data(), &H, nullptr));
    (H > 4.0f ? lo : hi) = mid;
  }
  return static_cast<float>(0.5 * (lo + hi));
}

// ---------------------------------------------------------------- softmax
// One row of N(0, sigma^2) logits in type t through the kernel's softmax.
void cpu_softmax(benchmark::State& st, sa_dtype t, float sigma) {
  const std::int64_t n = st.range(0);
  const auto x32 = logits(n, sigma);
  std::vector<float> y32;
  std::vector<std::uint16_t> x16, y16;
  const void* in = x32.data();
  void* out = nullptr;
  if (t == SA_F32) {
    y32.resize(x32.size());
    out = y32.data();
  } else {
    x16 = t == SA_BF16 ? to_bf16(x32) : to_f16(x32);
    y16.resize(x16.size());
    in = x16.data();
    out = y16.data();
  }
  const sa_rows s = one_row(n);
  for (auto _ : st) {
    check(K().softmax(K().ctx, t, &s, in, out));
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
  }
  set_counters(st, n, 1, t == SA_F32 ? 8 : 4);
  // The row's shape: the share of weights below 2^-126 (subnormal) and of
  // weights exactly 0, in percent.
  double sub = 0, zero = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<std::size_t>(i);
    const float w = t == SA_F32    ? y32[u]
                    : t == SA_BF16 ? sa::float_from_bf16(y16[u])
                                   : sa::float_from_f16(y16[u]);
    sub += w > 0.0f && w < std::numeric_limits<float>::min();
    zero += w == 0.0f;
  }
  st.counters["subnormal_pct"] = 100.0 * sub / static_cast<double>(n);
  st.counters["zero_pct"] = 100.0 * zero / static_cast<double>(n);
}
void BM_cpu_softmax_f32(benchmark::State& st) { cpu_softmax(st, SA_F32, 1.0f); }
void BM_cpu_softmax_bf16(benchmark::State& st) { cpu_softmax(st, SA_BF16, 1.0f); }
// float16 rows: widened to float32, the float32 algorithm, rounded once to float16.
void BM_cpu_softmax_f16(benchmark::State& st) { cpu_softmax(st, SA_F16, 1.0f); }

void BM_eigen_softmax_f32(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  const auto x = logits(n, 1.0f);
  std::vector<float> y(x.size());
  for (auto _ : st) {
    Eigen::Map<const Eigen::ArrayXf> X(x.data(), n);
    Eigen::Map<Eigen::ArrayXf> Y(y.data(), n);
    const float m = X.maxCoeff();
    Y = (X - m).exp();
    const float S = Y.sum();
    Y *= 1.0f / S;
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(st, n, 1, 8);
}

// Eigen compiled for AVX2 + FMA (eigen_avx2_peer.cpp).
void BM_eigen_avx2_softmax_f32(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  const auto x = logits(n, 1.0f);
  std::vector<float> y(x.size());
  for (auto _ : st) {
    sa::bench::eigen_softmax_avx2(x.data(), y.data(), n);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(st, n, 1, 8);
}

// The two-pass memory limit of a softmax: one pass reading x (a max) and one
// reading x and writing y (y = x * c), with no exp: the time a two-pass
// softmax (2 reads + 1 write) cannot beat. Fraction of the limit reached =
// this time / the kernel's time.
void BM_memory_2pass_f32(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  const auto x = logits(n, 1.0f);
  std::vector<float> y(x.size());
  for (auto _ : st) {
    Eigen::Map<const Eigen::ArrayXf> X(x.data(), n);
    Eigen::Map<Eigen::ArrayXf> Y(y.data(), n);
    const float m = X.maxCoeff();
    benchmark::DoNotOptimize(m);
    Y = X * (1.0f / (m + 1.0f));
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(st, n, 1, 8);
}

#ifdef SA_HAVE_DNNL
// oneDNN's softmax on one row of N(0, sigma^2) logits.
void onednn_softmax(benchmark::State& st, float sigma) {
  const std::int64_t n = st.range(0);
  auto x = logits(n, sigma);
  std::vector<float> y(x.size());
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const dnnl::memory::desc md({1, n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  const dnnl::softmax_forward::desc d(dnnl::prop_kind::forward_inference, md, 1);
  const dnnl::softmax_forward::primitive_desc pd(d, eng);
  dnnl::softmax_forward prim(pd);
  dnnl::memory src(md, eng, x.data()), dst(md, eng, y.data());
  for (auto _ : st) {
    prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    strm.wait();
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(st, n, 1, 8);
  st.SetLabel(pd.impl_info_str());
}
void BM_onednn_softmax_f32(benchmark::State& st) { onednn_softmax(st, 1.0f); }
#endif

// ---------------------------------------------------------------- wide rows
// N(0, sigma^2) rows, range(1) = sigma. At n = 2^20 the float32 weights
// below 2^-126 (subnormal) and exactly 0 are 0.3 % and 0.002 % (sigma = 12),
// 8.8 % and 0.8 % (15), 31 % and 24 % (20): the counters subnormal_pct and
// zero_pct. Real attention rows after sharpening look like this; the
// kernel's own figure is the ratio to its N(0, 1) row (float32 and
// bfloat16), and float32 against oneDNN on the same rows.
void BM_cpu_softmax_f32_wide(benchmark::State& st) {
  cpu_softmax(st, SA_F32, static_cast<float>(st.range(1)));
}
void BM_cpu_softmax_bf16_wide(benchmark::State& st) {
  cpu_softmax(st, SA_BF16, static_cast<float>(st.range(1)));
}
#ifdef SA_HAVE_DNNL
void BM_onednn_softmax_f32_wide(benchmark::State& st) {
  onednn_softmax(st, static_cast<float>(st.range(1)));
}
#endif
constexpr std::int64_t kWideSigmas[] = {1, 12, 15, 20};

// The float32 scale pass alone, on the stored exps of an N(0, sigma^2) row
// (range(1) = sigma), in its checked form (range(2) = 0: ScaleDown96's
// branch on every vector) and in the form the kernel takes (range(2) = 1:
// kernels/cpu/vec_exp-inl.h, WithSubForm; the adaptive blocks from 2^19 on).
// Each iteration first copies the stored exps back (the same copy in both).
void BM_scale_f32_form(benchmark::State& st) {
  namespace cpu = sa::kernels::cpu;
  const std::int64_t n = st.range(0);
  const auto x = logits(n, static_cast<float>(st.range(1)));
  float lo = 0, m = 0;
  cpu::row_range_f32(x.data(), n, &lo, &m);
  std::vector<float> e(x.size()), y(x.size());
  const cpu::Scale s = cpu::Scale::of(1.0);
  const double r = 1.0 / cpu::row_exp_store_f32(x.data(), e.data(), n, m, lo, s);
  const float rh = static_cast<float>(r), rl = static_cast<float>(r - rh);
  cpu::set_checked_forms_only(st.range(2) == 0);
  for (auto _ : st) {
    std::memcpy(y.data(), e.data(), e.size() * sizeof(float));
    cpu::row_scale_f32(y.data(), n, rh, rl, false);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  cpu::set_checked_forms_only(false);
  set_counters(st, n, 1, 8);
}
constexpr std::int64_t kFormSizes[] = {1 << 16, 1 << 17, 1 << 18, 1 << 19, 1 << 20};

// ---------------------------------------------------------------- adaptive
void BM_cpu_adaptive_f32(benchmark::State& st) {  // range(1): 1 = beta > 1 rows, 0 = N(0,1)
  const std::int64_t n = st.range(0);
  const auto x = logits(n, st.range(1) ? sigma_for_beta(n) : 1.0f);
  std::vector<float> y(x.size());
  float beta = 0, H = 0;
  const sa_rows s = one_row(n);
  for (auto _ : st) {
    check(K().adaptive_softmax(K().ctx, SA_F32, &s, x.data(), y.data(), &beta, &H));
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(st, n, 1, 8);
  st.counters["beta"] = beta;
  st.counters["H"] = H;
}
// Plain softmax on the same rows (range(1) = 0 or 1), or (range(1) = 2) on the
// beta > 1 rows already multiplied by their beta: the adaptive second pass's
// input, whose many weights below 2^-126 cost x86 subnormal assists.
void BM_cpu_softmax_f32_sigma(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  auto x = logits(n, st.range(1) ? sigma_for_beta(n) : 1.0f);
  if (st.range(1) == 2) {
    std::vector<float> y(x.size());
    float beta = 1, H = 0;
    const sa_rows s = one_row(n);
    check(K().adaptive_softmax(K().ctx, SA_F32, &s, x.data(), y.data(), &beta, &H));
    for (auto& v : x) v *= beta;
  }
  std::vector<float> y(x.size());
  const sa_rows s = one_row(n);
  for (auto _ : st) {
    check(K().softmax(K().ctx, SA_F32, &s, x.data(), y.data()));
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_counters(st, n, 1, 8);
}

// ---------------------------------------------------------------- entropy vs normaliser
void BM_cpu_entropy_f32(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  const auto x = logits(n, 1.0f);
  float H = 0;
  sa_entropy_state es;
  const sa_rows s = one_row(n);
  for (auto _ : st) {
    check(K().entropy(K().ctx, SA_F32, &s, x.data(), &H, &es));
    benchmark::DoNotOptimize(H);
  }
  set_counters(st, n, 1, 4);
}
// The online normaliser (m, S) alone: the same streaming code without T
// (the kernel's logsumexp uses exactly this pass).
void BM_online_normaliser_f32(benchmark::State& st) {
  const std::int64_t n = st.range(0);
  const auto x = logits(n, 1.0f);
  const auto scale = sa::kernels::cpu::Scale::of(1.0);
  for (auto _ : st) {
    auto r = sa::kernels::cpu::row_normaliser_f32(x.data(), n, scale);
    benchmark::DoNotOptimize(r);
  }
  set_counters(st, n, 1, 4);
}

// ---------------------------------------------------------------- multi-core scaling
void BM_cpu_softmax_rows_f32(benchmark::State& st) {  // 256 rows x 65536, range(0) threads
  const int threads = static_cast<int>(st.range(0));
  const std::int64_t rows = 256, n = 65536;
  const auto x = logits(rows * n, 1.0f);
  std::vector<float> y(x.size());
  const sa_rows s{rows, n, n, n, 1.0};
  omp_set_num_threads(threads);
  for (auto _ : st) {
    check(K().softmax(K().ctx, SA_F32, &s, x.data(), y.data()));
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  omp_set_num_threads(1);
  set_counters(st, n, rows, 8);
  st.counters["threads"] = threads;
}

const std::vector<std::int64_t> kSizes = {256, 4096, 65536, 1 << 20, 1 << 22, 1 << 24};

void register_all() {
  auto sizes = [](benchmark::internal::Benchmark* b) {
    for (auto n : kSizes) b->Arg(n);
    b->Unit(benchmark::kMicrosecond);
  };
  benchmark::RegisterBenchmark("softmax_f32/cpu", BM_cpu_softmax_f32)->Apply(sizes);
#ifdef SA_HAVE_DNNL
  benchmark::RegisterBenchmark("softmax_f32/onednn", BM_onednn_softmax_f32)->Apply(sizes);
#endif
  benchmark::RegisterBenchmark("softmax_f32/eigen", BM_eigen_softmax_f32)->Apply(sizes);
  benchmark::RegisterBenchmark("softmax_f32/eigen_avx2", BM_eigen_avx2_softmax_f32)->Apply(sizes);
  benchmark::RegisterBenchmark("softmax_f32/memory_2pass", BM_memory_2pass_f32)->Apply(sizes);
  benchmark::RegisterBenchmark("softmax_bf16/cpu", BM_cpu_softmax_bf16)->Apply(sizes);
  benchmark::RegisterBenchmark("softmax_f16/cpu", BM_cpu_softmax_f16)->Apply(sizes);
  auto adaptive = [](benchmark::internal::Benchmark* b) {
    for (std::int64_t n : {4096, 65536, 1 << 20})
      for (std::int64_t sharp : {1, 0}) b->Args({n, sharp});
    b->Unit(benchmark::kMicrosecond);
  };
  auto wide = [](benchmark::internal::Benchmark* b) {
    for (std::int64_t n : {65536, 1 << 20})
      for (std::int64_t sigma : kWideSigmas) b->Args({n, sigma});
  };
  benchmark::RegisterBenchmark("softmax_f32_wide/cpu", BM_cpu_softmax_f32_wide)->Apply(wide);
  benchmark::RegisterBenchmark("softmax_bf16_wide/cpu", BM_cpu_softmax_bf16_wide)->Apply(wide);
  benchmark::RegisterBenchmark("scale_f32_form", BM_scale_f32_form)
      ->Apply([](benchmark::internal::Benchmark* b) {
        for (std::int64_t n : kFormSizes)
          for (std::int64_t sigma : {15, 20})
            for (std::int64_t form : {0, 1}) b->Args({n, sigma, form});
      });
#ifdef SA_HAVE_DNNL
  benchmark::RegisterBenchmark("softmax_f32_wide/onednn", BM_onednn_softmax_f32_wide)->Apply(wide);
#endif
  benchmark::RegisterBenchmark("adaptive_f32/cpu", BM_cpu_adaptive_f32)->Apply(adaptive);
  benchmark::RegisterBenchmark("adaptive_f32/plain_softmax", BM_cpu_softmax_f32_sigma)
      ->Apply(adaptive);
  benchmark::RegisterBenchmark("adaptive_f32/plain_softmax", BM_cpu_softmax_f32_sigma)
      ->Args({4096, 2})
      ->Args({65536, 2})
      ->Args({1 << 20, 2})
      ->Unit(benchmark::kMicrosecond);
  auto ent = [](benchmark::internal::Benchmark* b) {
    for (std::int64_t n : {4096, 65536, 1 << 20}) b->Arg(n);
    b->Unit(benchmark::kMicrosecond);
  };
  benchmark::RegisterBenchmark("entropy_f32/streamed_mST", BM_cpu_entropy_f32)->Apply(ent);
  benchmark::RegisterBenchmark("entropy_f32/normaliser_mS", BM_online_normaliser_f32)->Apply(ent);
  benchmark::RegisterBenchmark("rows256x65536_f32/cpu", BM_cpu_softmax_rows_f32)
      ->Arg(1)
      ->Arg(2)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
}

// ---------------------------------------------------------------- ratio table
class Collect : public benchmark::ConsoleReporter {
 public:
  struct Times {
    double real_ns, cpu_ns;  // per iteration
  };
  std::map<std::string, Times> ns;  // run name (without "/real_time") -> times
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      std::string name = r.benchmark_name();
      if (r.run_type == Run::RT_Aggregate) name = name.substr(0, name.rfind('_'));
      if (const auto p = name.find("/real_time"); p != std::string::npos) name.erase(p);
      const double mult = r.time_unit == benchmark::kMillisecond   ? 1e6
                          : r.time_unit == benchmark::kMicrosecond ? 1e3
                          : r.time_unit == benchmark::kSecond      ? 1e9
                                                                   : 1.0;
      ns[name] = {r.GetAdjustedRealTime() * mult, r.GetAdjustedCPUTime() * mult};
    }
  }
};

// Single-thread rows compare CPU time (robust on a shared machine where other
// processes preempt the benchmark); the thread-scaling row compares real time.
void row(const char* what, const std::string& num, const std::string& den, const char* target,
         double limit, bool at_most, const Collect& c, bool real = false) {
  const auto a = c.ns.find(num), b = c.ns.find(den);
  if (a == c.ns.end() || b == c.ns.end()) return;
  const double ta = real ? a->second.real_ns : a->second.cpu_ns;
  const double tb = real ? b->second.real_ns : b->second.cpu_ns;
  const double r = ta / tb;
  const bool ok = at_most ? r <= limit : r >= limit;
  std::printf("%-44s %12.1f %12.1f %8.3f   %-10s %s\n", what, ta / 1e3, tb / 1e3, r, target,
              limit >= 1e29 || limit < 0 ? ""
              : ok                       ? "met"
                                         : "MISSED");
}

void print_table(const Collect& c) {
  std::printf(
      "\nRatio table (microseconds per call: CPU time, real time for the threads row; "
      "dispatch target: %s)\n",
      sa::kernels::cpu::dispatch_target());
  std::printf("%-44s %12s %12s %8s   %-12s %s\n", "comparison", "A (us)", "B (us)", "A/B", "target",
              "");
  for (auto n : kSizes) {
    const std::string sn = std::to_string(n);
    row(("softmax f32 n=" + sn + ": cpu / oneDNN").c_str(), "softmax_f32/cpu/" + sn + "",
        "softmax_f32/onednn/" + sn + "", "<= 1.0", 1.0, true, c);
    row(("softmax f32 n=" + sn + ": cpu / Eigen").c_str(), "softmax_f32/cpu/" + sn + "",
        "softmax_f32/eigen/" + sn + "", "(info)", 1e30, true, c);
    row(("softmax f32 n=" + sn + ": cpu / Eigen (AVX2 build)").c_str(),
        "softmax_f32/cpu/" + sn + "", "softmax_f32/eigen_avx2/" + sn + "", "(info)", 1e30, true, c);
    // Fraction of the two-pass memory limit = time(bare passes) / time(cpu).
    row(("softmax f32 n=" + sn + ": memory limit / cpu").c_str(),
        "softmax_f32/memory_2pass/" + sn + "", "softmax_f32/cpu/" + sn + "",
        n >= (1 << 22) ? ">= 0.8" : "(info)", n >= (1 << 22) ? 0.8 : -1.0, false, c);
  }
  for (auto n : kSizes) {
    const std::string sn = std::to_string(n);
    // Throughput ratio bf16 / f32 = time(f32) / time(bf16).
    row(("softmax n=" + sn + ": time f32 / time bf16").c_str(), "softmax_f32/cpu/" + sn + "",
        "softmax_bf16/cpu/" + sn + "", n >= (1 << 20) ? ">= 1.5" : "(info)",
        n >= (1 << 20) ? 1.5 : -1.0, false, c);
  }
  for (auto n : kSizes) {
    const std::string sn = std::to_string(n);
    // float16 runs the float32 algorithm between two conversion passes: (info).
    row(("softmax n=" + sn + ": time f32 / time f16").c_str(), "softmax_f32/cpu/" + sn + "",
        "softmax_f16/cpu/" + sn + "", "(info)", -1.0, false, c);
  }
  for (std::int64_t n : {4096, 65536, 1 << 20})
    for (int sharp : {1, 0}) {
      const std::string key = std::to_string(n) + "/" + std::to_string(sharp) + "";
      row(("adaptive n=" + std::to_string(n) + (sharp ? " beta>1" : " N(0,1) beta=1") +
           ": / softmax")
              .c_str(),
          "adaptive_f32/cpu/" + key, "adaptive_f32/plain_softmax/" + key, "<= 1.6", 1.6, true, c);
    }
  for (std::int64_t n : {4096, 65536, 1 << 20}) {
    const std::string sn = std::to_string(n);
    row(("  (info) n=" + sn + " softmax(beta l) / softmax(l)").c_str(),
        "adaptive_f32/plain_softmax/" + sn + "/2", "adaptive_f32/plain_softmax/" + sn + "/1",
        "(info)", 1e30, true, c);
  }
  for (std::int64_t n : {65536, 1 << 20})
    for (std::int64_t sigma : kWideSigmas) {
      if (sigma == 1) continue;
      const std::string sn = std::to_string(n), key = sn + "/" + std::to_string(sigma);
      row(("  (info) n=" + sn + " N(0," + std::to_string(sigma) + "^2) / N(0,1) rows").c_str(),
          "softmax_f32_wide/cpu/" + key, "softmax_f32_wide/cpu/" + sn + "/1", "(info)", 1e30, true,
          c);
      row(("  (info) n=" + sn + " bf16 N(0," + std::to_string(sigma) + "^2) / N(0,1) rows").c_str(),
          "softmax_bf16_wide/cpu/" + key, "softmax_bf16_wide/cpu/" + sn + "/1", "(info)", 1e30,
          true, c);
      row(("  (info) n=" + sn + " N(0," + std::to_string(sigma) + "^2): cpu / oneDNN").c_str(),
          "softmax_f32_wide/cpu/" + key, "softmax_f32_wide/onednn/" + key, "(info)", 1e30, true, c);
    }
  for (std::int64_t n : kFormSizes)
    for (std::int64_t sigma : {15, 20}) {
      const std::string key = std::to_string(n) + "/" + std::to_string(sigma);
      row(("  (info) scale pass n=" + std::to_string(n) + " N(0," + std::to_string(sigma) +
           "^2): kernel's form / checked")
              .c_str(),
          "scale_f32_form/" + key + "/1", "scale_f32_form/" + key + "/0", "(info)", 1e30, true, c);
    }
  for (std::int64_t n : {4096, 65536, 1 << 20}) {
    const std::string sn = std::to_string(n);
    row(("streamed entropy n=" + sn + ": (m,S,T) / (m,S)").c_str(),
        "entropy_f32/streamed_mST/" + sn + "", "entropy_f32/normaliser_mS/" + sn + "", "<= 1.25",
        1.25, true, c);
  }
  row("256 x 65536 rows: 1 thread / 2 threads", "rows256x65536_f32/cpu/1",
      "rows256x65536_f32/cpu/2", "(speedup)", -1.0, false, c, true);
}

}  // namespace

int main(int argc, char** argv) {
  // SA_CPU_MAX_ISA=AVX2 (the kernel's AVX2 figures) limits oneDNN to AVX2 as
  // well, unless ONEDNN_MAX_CPU_ISA says otherwise (read at oneDNN's first use).
  if (const char* isa = std::getenv("SA_CPU_MAX_ISA"); isa && *isa)
    if (std::string(isa) == "AVX2" || std::string(isa) == "avx2")
      setenv("ONEDNN_MAX_CPU_ISA", "AVX2", 0);
  omp_set_num_threads(1);  // single-thread peers; the scaling benchmark sets its own
  register_all();
  // Default: 3 repetitions, medians reported and used in the table (the
  // machine may be shared); any --benchmark_repetitions given wins.
  std::vector<char*> args(argv, argv + argc);
  bool reps = false;
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--benchmark_repetitions", 23) == 0) reps = true;
  static char r3[] = "--benchmark_repetitions=3";
  static char agg[] = "--benchmark_report_aggregates_only=true";
  if (!reps) {
    args.insert(args.begin() + 1, agg);
    args.insert(args.begin() + 1, r3);
  }
  int n_args = static_cast<int>(args.size());
  args.push_back(nullptr);
  argc = n_args;
  argv = args.data();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Collect c;
  benchmark::RunSpecifiedBenchmarks(&c);
  print_table(c);
  benchmark::Shutdown();
  return 0;
}
