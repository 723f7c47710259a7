// Throughput of the CPU attention forward (kernels/cpu/attention.cpp).
//
// Flop convention: 4 nq nk d per call (2 flops per multiply-add, QK^T and PV,
// d = dv, non-causal, no mask); exp, max and the softmax bookkeeping are not
// counted, and the adaptive mode is credited with the same 4 nq nk d although
// it does a second QK^T pass, so its GFLOP/s reads as "plain-equivalent".
//
// Sizes: n = nk in {1024, 4096, 16384, 65536}, head dim d = dv in {64, 128}.
// nq = n for n <= 4096; for larger n, nq = max(256, 2^24 / n) queries (1024 at
// 16384, 256 at 65536) so one call stays near 10 GFLOP; the counters say nq.
// Inputs N(0,1), scale 1/sqrt(d), num_splits 1. Threads: OpenMP default
// (OMP_NUM_THREADS); the `threads` counter reports it.
//
// BM_Attention/<dtype>/<n>/<d>/<adaptive>: time per call; counter flops = 4 nq nk d per second (G/s
// = GFLOP/s). BM_AdaptiveOverPlain/<dtype>/<n>/<d>: each iteration times one plain and one
//   adaptive call on the same input; counters ratio = total adaptive / total plain
//   wall time, ratio_cpu = the same in process CPU time.
//
// BM_AttentionV2/<layout>/<dtype>/<d>: the interface-v2 entry (cpu_attention_v2)
//   on batched layouts, beside the single-head numbers above. Flops = 4 d per
//   visible (query, key) pair summed over sequences and query heads (masked
//   pairs are not credited), so a layout's G/s compares with BM_Attention's:
//   layout 0 "mha":    batch 1, 8/8 heads, 4096 queries and keys, BSHD
//   layout 1 "gqa":    batch 1, 32 query heads on 4 key/value heads (GQA 8),
//                      1024 queries and keys, BSHD
//   layout 2 "varlen": 8 packed sequences of 256..3840 queries and keys
//                      (sum 16384), 4/4 heads
//   layout 3 "window": 8/8 heads, 4096 queries and keys, causal, window_left
//                      = 1023 (Mistral's sliding window)
//   layout 4 "decode": 64 sequences, 1 query each, 4096 keys, 32 query heads
//                      on 8 key/value heads (GQA decoding)
//   layout 5 "single": 1 sequence, 1 query, 65536 keys, one head
//   Counter kv_bytes: bytes of K and V per second, each (sequence, key/value
//   head)'s read once (the bandwidth measure of decoding).
// BM_PagedOverContiguousDecode/<dtype>: paged KV decode against the same
//   keys contiguous (see the function's comment); counter ratio.
// BM_DecodeOverKvRead/<shape>/<dtype>: decoding (v2 GQA, v2 single query, v1
//   single query) against a bare read of the same K and V (see the function's
//   comment); counters ratio (wall) and ratio_cpu.
// BM_DecodeVariants/<variant>/<dtype>: the same measure on two variants of
//   the GQA shape: one key/value head per sequence (512 x 4 query heads on
//   1, same bytes), and 2 sequences x 1024 keys (from the last-level cache).
//
// The kernel's raw entry point is called directly (benchmarks may bypass sa::Kernel).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/attention_v2.hpp"

namespace {

std::int64_t queries_for(std::int64_t n) {
  if (n <= 4096) return n;
  return std::max<std::int64_t>(256, (std::int64_t{1} << 24) / n);
}

struct Problem {
  std::int64_t nq, nk, d;
  sa_dtype dtype;
  std::vector<float> qf, kf, vf, of;
  std::vector<std::uint16_t> qb, kb, vb, ob;
  std::vector<float> lse, ent, beta;

  Problem(sa_dtype t, std::int64_t n, std::int64_t dim)
      : nq(queries_for(n)), nk(n), d(dim), dtype(t) {
    std::mt19937_64 rng(42);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto fill = [&](std::vector<float>& f, std::vector<std::uint16_t>& b, std::int64_t count) {
      f.resize(static_cast<std::size_t>(count));
      for (auto& x : f) x = sa::round_to_bf16(nd(rng));
      if (dtype == SA_BF16) {
        b.resize(f.size());
        for (std::size_t i = 0; i < f.size(); ++i) b[i] = sa::bf16_from_float(f[i]);
      }
    };
    fill(qf, qb, nq * d);
    fill(kf, kb, nk * d);
    fill(vf, vb, nk * d);
    of.resize(static_cast<std::size_t>(nq * d));
    ob.resize(static_cast<std::size_t>(nq * d));
    lse.resize(static_cast<std::size_t>(nq));
    ent.resize(static_cast<std::size_t>(nq));
    beta.resize(static_cast<std::size_t>(nq));
  }

  sa_attention_args args(bool adaptive) {
    sa_attention_args a{};
    a.dtype = dtype;
    a.nq = nq;
    a.nk = nk;
    a.d = a.dv = d;
    const bool bf = dtype == SA_BF16;
    a.q = bf ? static_cast<const void*>(qb.data()) : qf.data();
    a.k = bf ? static_cast<const void*>(kb.data()) : kf.data();
    a.v = bf ? static_cast<const void*>(vb.data()) : vf.data();
    a.out = bf ? static_cast<void*>(ob.data()) : of.data();
    a.q_stride = a.k_stride = a.v_stride = a.out_stride = d;
    a.lse = lse.data();
    a.entropy = ent.data();
    a.beta = beta.data();
    a.scale = 1.0 / std::sqrt(static_cast<double>(d));
    a.adaptive = adaptive ? 1 : 0;
    a.num_splits = 1;
    return a;
  }
};

void run_once(const sa_attention_args& a) {
  if (sa::kernels::cpu_attention(nullptr, &a) != SA_OK)
    throw std::runtime_error(sa::kernels::cpu_attention_last_error());
}

int threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// Process CPU time (all threads), seconds: on a shared machine it measures the
// work done, where wall time also measures the neighbours.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void BM_Attention(benchmark::State& st) {
  const auto t = static_cast<sa_dtype>(st.range(0));
  Problem p(t, st.range(1), st.range(2));
  const auto a = p.args(st.range(3) != 0);
  const double c0 = cpu_seconds();
  for (auto _ : st) {
    run_once(a);
    benchmark::DoNotOptimize(p.lse.data());
  }
  const double cpu = cpu_seconds() - c0;
  const double flops =
      4.0 * static_cast<double>(p.nq) * static_cast<double>(p.nk) * static_cast<double>(p.d);
  // flops: per wall second (printed as G/s = GFLOP/s); GFLOP_per_cpu_s: per
  // second of process CPU time, i.e. per core actually used.
  st.counters["flops"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["GFLOP_per_cpu_s"] = flops * 1e-9 * static_cast<double>(st.iterations()) / cpu;
  st.counters["nq"] = static_cast<double>(p.nq);
  st.counters["threads"] = threads();
  st.SetLabel(std::string(t == SA_F32 ? "f32" : "bf16") + (st.range(3) ? " adaptive" : " plain"));
}

void BM_AdaptiveOverPlain(benchmark::State& st) {
  const auto t = static_cast<sa_dtype>(st.range(0));
  Problem p(t, st.range(1), st.range(2));
  const auto plain = p.args(false), adaptive = p.args(true);
  double tp = 0, ta = 0, cp = 0, ca = 0;
  using clk = std::chrono::steady_clock;
  for (auto _ : st) {
    const auto t0 = clk::now();
    const double c0 = cpu_seconds();
    run_once(plain);
    const auto t1 = clk::now();
    const double c1 = cpu_seconds();
    run_once(adaptive);
    const auto t2 = clk::now();
    const double c2 = cpu_seconds();
    tp += std::chrono::duration<double>(t1 - t0).count();
    ta += std::chrono::duration<double>(t2 - t1).count();
    cp += c1 - c0;
    ca += c2 - c1;
  }
  st.counters["ratio"] = ta / tp;      // wall time
  st.counters["ratio_cpu"] = ca / cp;  // process CPU time
  st.counters["plain_ms"] = 1e3 * tp / static_cast<double>(st.iterations());
  st.counters["adaptive_ms"] = 1e3 * ta / static_cast<double>(st.iterations());
  st.counters["nq"] = static_cast<double>(p.nq);
  st.SetLabel(t == SA_F32 ? "f32" : "bf16");
}

void sizes(benchmark::internal::Benchmark* b, bool with_mode) {
  for (std::int64_t t : {std::int64_t{SA_F32}, std::int64_t{SA_BF16}})
    for (std::int64_t n : {1024, 4096, 16384, 65536})
      for (std::int64_t d : {64, 128}) {
        if (with_mode) {
          b->Args({t, n, d, 0});
          b->Args({t, n, d, 1});
        } else {
          b->Args({t, n, d});
        }
      }
}

// One batched (interface v2) problem: contiguous BSHD (or packed varlen) tensors.
struct AttentionProblem {
  sa_attention_v2_args a{};
  std::vector<unsigned char> q, k, v, out;
  std::vector<float> lse;
  std::vector<std::int32_t> cu_q, cu_k;
  double flops = 0;
  double kv_bytes = 0;  // K and V of every (sequence, key/value head), each read once

  AttentionProblem(int layout, sa_dtype t, std::int64_t d) {
    std::int64_t batch = 1, hq = 8, hk = 8, sq = 4096, sk = 4096;
    bool varlen = false;
    a.struct_size = sizeof(sa_attention_v2_args);
    a.window_left = a.window_right = -1;
    switch (layout) {
      case 1:
        hq = 32, hk = 4, sq = sk = 1024;
        break;
      case 2: {
        varlen = true;
        batch = 8, hq = hk = 4;
        cu_q = {0};
        for (std::int64_t b = 0; b < batch; ++b)
          cu_q.push_back(cu_q.back() + static_cast<std::int32_t>(256 + 512 * b));  // 256..3840
        cu_k = cu_q;
        sq = sk = 3840;
        break;
      }
      case 3:
        a.causal = 1;
        a.window_left = 1023;
        break;
      case 4:
        batch = 64, hq = 32, hk = 8, sq = 1, sk = 4096;
        break;
      case 5:
        hq = hk = 1, sq = 1, sk = 65536;
        break;
      case 6:  // layout 4's bytes with one key/value head per sequence
        batch = 512, hq = 4, hk = 1, sq = 1, sk = 4096;
        break;
      case 7:  // layout 4 small enough for the last-level cache (16 MiB of f32 K and V)
        batch = 2, hq = 32, hk = 8, sq = 1, sk = 1024;
        break;
      default:
        break;
    }
    const std::int64_t tq = varlen ? cu_q.back() : batch * sq,
                       tk = varlen ? cu_k.back() : batch * sk;
    const std::size_t e = t == SA_F32 ? 4 : 2;
    // N(0,1) values: a pool of 2^16 draws indexed by a xorshift stream (the
    // decode layouts hold 10^9 elements, which one draw each took minutes to fill).
    std::mt19937_64 rng(42);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> pool(std::size_t{1} << 16);
    for (auto& x : pool) x = nd(rng);
    std::uint64_t xs = 0x9e3779b97f4a7c15ull;
    auto fill = [&](std::vector<unsigned char>& buf, std::int64_t count) {
      buf.resize(static_cast<std::size_t>(count) * e);
      for (std::int64_t i = 0; i < count; ++i) {
        xs ^= xs << 13;
        xs ^= xs >> 7;
        xs ^= xs << 17;
        const float x = pool[static_cast<std::size_t>(xs >> 48)];
        if (t == SA_F32) {
          std::memcpy(&buf[static_cast<std::size_t>(i) * 4], &x, 4);
        } else {
          const std::uint16_t h = t == SA_BF16 ? sa::bf16_from_float(x) : sa::f16_from_float(x);
          std::memcpy(&buf[static_cast<std::size_t>(i) * 2], &h, 2);
        }
      }
    };
    fill(q, tq * hq * d);
    fill(k, tk * hk * d);
    fill(v, tk * hk * d);
    out.resize(static_cast<std::size_t>(tq * hq * d) * e);
    lse.resize(static_cast<std::size_t>(tq * hq));
    a.qkv_dtype = a.out_dtype = t;
    a.batch = batch;
    a.heads_q = hq;
    a.heads_kv = hk;
    a.seqlen_q = sq;
    a.seqlen_k = sk;
    a.head_dim = a.head_dim_v = d;
    if (varlen) {
      a.cu_seqlens_q = cu_q.data();
      a.cu_seqlens_k = cu_k.data();
    }
    a.q = {q.data(), sq * hq * d, d, hq * d};
    a.k = {k.data(), sk * hk * d, d, hk * d};
    a.v = {v.data(), sk * hk * d, d, hk * d};
    a.out = out.data();
    a.out_stride_b = sq * hq * d;
    a.out_stride_h = d;
    a.out_stride_s = hq * d;
    a.lse = lse.data();
    a.scale = 1.0 / std::sqrt(static_cast<double>(d));
    a.q_descale = a.k_descale = a.v_descale = 1.0f;
    // Visible pairs: causal with window_left w sees min(i + 1, w + 1) keys (sq = sk).
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int64_t lq = varlen ? cu_q[b + 1] - cu_q[b] : sq;
      const std::int64_t lk = varlen ? cu_k[b + 1] - cu_k[b] : sk;
      double pairs = static_cast<double>(lq) * static_cast<double>(lk);
      if (a.causal) {
        pairs = 0;
        for (std::int64_t i = 0; i < lq; ++i)
          pairs += static_cast<double>(std::min(i + 1, a.window_left + 1));
      }
      flops += 4.0 * static_cast<double>(d) * static_cast<double>(hq) * pairs;
      kv_bytes += 2.0 * static_cast<double>(lk * hk * d) * static_cast<double>(e);
    }
  }
};

const char* const kLayoutNames[] = {"mha", "gqa", "varlen", "window", "decode", "single"};

void BM_AttentionV2(benchmark::State& st) {
  const auto t = static_cast<sa_dtype>(st.range(1));
  AttentionProblem p(static_cast<int>(st.range(0)), t, st.range(2));
  const double c0 = cpu_seconds();
  for (auto _ : st) {
    if (sa::kernels::cpu_attention_v2(nullptr, &p.a) != SA_OK)
      throw std::runtime_error(sa::kernels::cpu_attention_v2_last_error());
    benchmark::DoNotOptimize(p.lse.data());
  }
  const double cpu = cpu_seconds() - c0;
  st.counters["flops"] = benchmark::Counter(p.flops, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["GFLOP_per_cpu_s"] = p.flops * 1e-9 * static_cast<double>(st.iterations()) / cpu;
  st.counters["kv_bytes"] =
      benchmark::Counter(p.kv_bytes, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["threads"] = threads();
  st.SetLabel(std::string(kLayoutNames[st.range(0)]) + " " +
              (t == SA_F32    ? "f32"
               : t == SA_BF16 ? "bf16"
                              : "f16"));
}

// Decoding reads every key and value once and does 4 flops per element for
// each query head of the group, so it is bound by memory bandwidth, not by
// arithmetic. Its peer is the machine itself: each iteration times one pass
// that only reads the same K and V buffers (xor of their 32-bit words, a
// loop the compiler vectorises; split over the OpenMP threads like the
// kernel) and one decode call. Shapes (d = 128):
//   0 "gqa":    interface v2, layout 4 (64 sequences x 1 query x 4096 keys,
//               32 query heads on 8 key/value heads, BSHD)
//   1 "single": interface v2, layout 5 (1 query x 65536 keys, one head)
//   2 "v1":     the version-1 entry (cpu_attention, sa_attention_args) on
//               shape 1's buffers: nq = 1, nk = 65536, num_splits 1
//               (float32 and bfloat16: the entry's types)
// Counters: ratio = total decode time / total read time (1 = the kernel
// streams K and V as fast as a bare read), ratio_cpu = the same in process
// CPU time, read_GB_per_s = the bare read's bandwidth.
std::uint32_t read_words(const std::vector<unsigned char>& buf) {
  const auto* w = reinterpret_cast<const std::uint32_t*>(buf.data());
  const std::int64_t n = static_cast<std::int64_t>(buf.size() / 4);
  std::uint32_t acc = 0;
#ifdef _OPENMP
#pragma omp parallel for reduction(^ : acc) schedule(static)
#endif
  for (std::int64_t i = 0; i < n; ++i) acc ^= w[i];
  return acc;
}

const char* const kDecodeShapes[] = {"gqa", "single", "v1"};

// shape: 0 gqa, 1 single, 2 v1 (kDecodeShapes); 3 and 4 are
// BM_DecodeVariants' layouts 6 and 7.
void DecodeOverKvRead(benchmark::State& st, int shape, sa_dtype t) {
  AttentionProblem p(shape == 0 ? 4 : shape == 3 ? 6 : shape == 4 ? 7 : 5, t, 128);
  sa_attention_args v1{};
  if (shape == 2) {
    v1.dtype = t;
    v1.nq = 1;
    v1.nk = p.a.seqlen_k;
    v1.d = v1.dv = p.a.head_dim;
    v1.q = p.q.data();
    v1.k = p.k.data();
    v1.v = p.v.data();
    v1.out = p.out.data();
    v1.q_stride = v1.k_stride = v1.v_stride = v1.out_stride = v1.d;
    v1.lse = p.lse.data();
    v1.scale = p.a.scale;
    v1.num_splits = 1;
  }
  double tr = 0, td = 0, cr = 0, cd = 0;
  using clk = std::chrono::steady_clock;
  for (auto _ : st) {
    const auto t0 = clk::now();
    const double c0 = cpu_seconds();
    benchmark::DoNotOptimize(read_words(p.k) ^ read_words(p.v));
    const auto t1 = clk::now();
    const double c1 = cpu_seconds();
    if (shape == 2) {
      run_once(v1);
    } else if (sa::kernels::cpu_attention_v2(nullptr, &p.a) != SA_OK) {
      throw std::runtime_error(sa::kernels::cpu_attention_v2_last_error());
    }
    benchmark::DoNotOptimize(p.lse.data());
    const auto t2 = clk::now();
    const double c2 = cpu_seconds();
    tr += std::chrono::duration<double>(t1 - t0).count();
    td += std::chrono::duration<double>(t2 - t1).count();
    cr += c1 - c0;
    cd += c2 - c1;
  }
  st.counters["ratio"] = td / tr;
  st.counters["ratio_cpu"] = cd / cr;
  st.counters["read_GB_per_s"] = static_cast<double>(p.k.size() + p.v.size()) * 1e-9 *
                                 static_cast<double>(st.iterations()) / tr;
  st.counters["decode_GB_per_s"] = p.kv_bytes * 1e-9 * static_cast<double>(st.iterations()) / td;
  st.counters["threads"] = threads();
  st.SetLabel(std::string(shape < 3    ? kDecodeShapes[shape]
                          : shape == 3 ? "gqa_one_kv_head"
                                       : "gqa_in_cache") +
              " " +
              (t == SA_F32    ? "f32"
               : t == SA_BF16 ? "bf16"
                              : "f16"));
}

void BM_DecodeOverKvRead(benchmark::State& st) {
  DecodeOverKvRead(st, static_cast<int>(st.range(0)), static_cast<sa_dtype>(st.range(1)));
}
// The GQA decode shape's variants that locate its gap to the bare read
// (docs/measurements.md): variant 0, the same bytes with one key/value head
// per sequence (contiguous K rows per head); variant 1, from the last-level
// cache (the rate of arithmetic and cache together). Run with
// OMP_NUM_THREADS=1 for one core's rates. Not part of kernel_table.sh.
void BM_DecodeVariants(benchmark::State& st) {
  DecodeOverKvRead(st, 3 + static_cast<int>(st.range(0)), static_cast<sa_dtype>(st.range(1)));
}

// BM_PagedOverContiguousDecode/<dtype>: the GQA decode shape (layout 4: 64
// sequences x 4096 keys, 32 query heads on 8 key/value heads, d = 128) called
// with contiguous K and V, then with the same keys in a paged KV cache of
// 16-token pages (NHD, FlashAttention's layout) in shuffled physical order,
// alternately in one process. Counter ratio = contiguous time / paged time:
// the paged call's throughput relative to the contiguous one (issue 33's
// target: >= 0.8 at page size 16).
void BM_PagedOverContiguousDecode(benchmark::State& st) {
  const auto t = static_cast<sa_dtype>(st.range(0));
  AttentionProblem p(4, t, 128);
  const std::int64_t ps = 16, batch = p.a.batch, sk = p.a.seqlen_k, hk = p.a.heads_kv,
                     d = p.a.head_dim, pps = sk / ps, pages = batch * pps;
  const std::size_t e = t == SA_F32 ? 4 : 2, page_bytes = static_cast<std::size_t>(ps * hk * d) * e;
  std::vector<std::int32_t> order(static_cast<std::size_t>(pages));
  for (std::int64_t i = 0; i < pages; ++i)
    order[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
  std::vector<unsigned char> kpool(static_cast<std::size_t>(pages) * page_bytes),
      vpool(kpool.size());
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t g = 0; g < pps; ++g) {
      const std::size_t from = static_cast<std::size_t>(b * pps + g) * page_bytes,
                        to =
                            static_cast<std::size_t>(order[static_cast<std::size_t>(b * pps + g)]) *
                            page_bytes;
      std::memcpy(&kpool[to], &p.k[from], page_bytes);
      std::memcpy(&vpool[to], &p.v[from], page_bytes);
    }
  sa_attention_v2_args paged = p.a;
  paged.k = {kpool.data(), ps * hk * d, d, hk * d};
  paged.v = {vpool.data(), ps * hk * d, d, hk * d};
  paged.block_table = order.data();
  paged.block_table_stride = pps;
  paged.page_size = ps;
  paged.num_pages = pages;
  double tc = 0, tp = 0;
  using clk = std::chrono::steady_clock;
  for (auto _ : st) {
    const auto t0 = clk::now();
    if (sa::kernels::cpu_attention_v2(nullptr, &p.a) != SA_OK)
      throw std::runtime_error(sa::kernels::cpu_attention_v2_last_error());
    const auto t1 = clk::now();
    if (sa::kernels::cpu_attention_v2(nullptr, &paged) != SA_OK)
      throw std::runtime_error(sa::kernels::cpu_attention_v2_last_error());
    const auto t2 = clk::now();
    benchmark::DoNotOptimize(p.lse.data());
    tc += std::chrono::duration<double>(t1 - t0).count();
    tp += std::chrono::duration<double>(t2 - t1).count();
  }
  st.counters["ratio"] = tc / tp;
  st.counters["paged_GB_per_s"] = p.kv_bytes * 1e-9 * static_cast<double>(st.iterations()) / tp;
  st.counters["threads"] = threads();
  st.SetLabel(std::string("gqa decode, pages of 16, ") + (t == SA_F32    ? "f32"
                                                          : t == SA_BF16 ? "bf16"
                                                                         : "f16"));
}

}  // namespace

BENCHMARK(BM_DecodeOverKvRead)
    ->ArgNames({"shape", "dtype"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (std::int64_t shape = 0; shape < 3; ++shape)
        for (std::int64_t t : {std::int64_t{SA_F32}, std::int64_t{SA_BF16}, std::int64_t{SA_F16}})
          if (shape < 2 || t != SA_F16) b->Args({shape, t});
    })
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);

BENCHMARK(BM_DecodeVariants)
    ->ArgNames({"variant", "dtype"})
    ->ArgsProduct({{0, 1}, {SA_F32, SA_BF16}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);

BENCHMARK(BM_PagedOverContiguousDecode)
    ->ArgNames({"dtype"})
    ->Arg(SA_F32)
    ->Arg(SA_BF16)
    ->Arg(SA_F16)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);

BENCHMARK(BM_AttentionV2)
    ->ArgNames({"layout", "dtype", "d"})
    ->Apply([](benchmark::internal::Benchmark* b) {
      for (std::int64_t layout = 0; layout < 6; ++layout)
        for (std::int64_t t : {std::int64_t{SA_F32}, std::int64_t{SA_BF16}, std::int64_t{SA_F16}})
          b->Args({layout, t, 128});
    })
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);

BENCHMARK(BM_Attention)
    ->ArgNames({"dtype", "n", "d", "adaptive"})
    ->Apply([](benchmark::internal::Benchmark* b) { sizes(b, true); })
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);
BENCHMARK(BM_AdaptiveOverPlain)
    ->ArgNames({"dtype", "n", "d"})
    ->Apply([](benchmark::internal::Benchmark* b) { sizes(b, false); })
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(0.5);

BENCHMARK_MAIN();
