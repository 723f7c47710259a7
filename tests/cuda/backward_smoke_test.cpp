// The CUDA kernel's backward passes (kernels/cuda/backward.cu) on the host
// SIMT emulator against an independent double-precision attention backward
// written out here (no MPFR, no property suite: seconds to build and run).
// Cases cover GQA, varlen with empty sequences, causal in both alignments,
// window, softcap, ALiBi, sinks (d(sink)), key padding, head dims above 128
// (32-wide tiles) and lengths that do not fill a tile; rows: softmax and
// log-softmax backward at theta = 0.5. Claim: every gradient within 1e-4 of
// the largest reference gradient (float32 accumulation of at most a few
// hundred terms is ~1e-6 relative; a dropped tile or a missing term is
// O(1)); measured worst 8.9e-7 relative.
//
// Built twice: cuda_emulation_backward_smoke_test against the kernel, and
// cuda_emulation_backward_smoke_mutant_test (SA_BWD_SMOKE_MUTANT) against
// the dQ tail-tile mutant of tests/cuda/CMakeLists.txt, where it must see
// dq wrong and dk, dv right.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/launch.hpp"

namespace {

using namespace sa::kernels::cuda;

struct Cfg {
  int B, HQ, HK, Sq, Sk, d, dv;
  bool varlen, causal, top_left;
  long wl, wr;
  double cap;
  bool alibi, sinks, pad;
};

struct Errors {
  double worst = 0;  // largest relative error of any gradient
  int dq_bad = 0, other_bad = 0;
};

void run(const Cfg& c, unsigned seed, Errors& e) {
  std::mt19937 g(seed);
  std::normal_distribution<float> n01(0, 1);
  std::vector<int> cq(c.B + 1, 0), ck(c.B + 1, 0);
  for (int b = 0; b < c.B; ++b) {
    int lq = c.varlen ? (int)(g() % (c.Sq + 1)) : c.Sq,
        lk = c.varlen ? (int)(g() % (c.Sk + 1)) : c.Sk;
    if (c.varlen && b == 0) lq = c.Sq, lk = c.Sk;
    cq[b + 1] = cq[b] + lq;
    ck[b + 1] = ck[b] + lk;
  }
  const int TQ = c.varlen ? cq[c.B] : c.B * c.Sq, TK = c.varlen ? ck[c.B] : c.B * c.Sk;
  auto fill = [&](int n) {
    std::vector<float> v(n);
    for (auto& x : v) x = n01(g);
    return v;
  };
  // packed BSHD: [row][head][dim]
  std::vector<float> q = fill(TQ * c.HQ * c.d), k = fill(TK * c.HK * c.d),
                     v = fill(TK * c.HK * c.dv), dout = fill(TQ * c.HQ * c.dv);
  std::vector<std::uint8_t> pad(TK, 1);
  if (c.pad)
    for (auto& p : pad) p = (g() % 4) != 0;
  std::vector<float> alibi(c.HQ), sinks(c.HQ);
  for (int h = 0; h < c.HQ; ++h) alibi[h] = 0.1f * (h + 1), sinks[h] = n01(g);
  const double scale = 1.0 / std::sqrt((double)c.d);
  auto Lq = [&](int b) { return cq[b + 1] - cq[b]; };
  auto Lk = [&](int b) { return ck[b + 1] - ck[b]; };
  // reference forward + backward in double
  std::vector<double> P, S;
  std::vector<float> out(TQ * c.HQ * c.dv), lse_abi(c.varlen ? c.HQ * TQ : c.B * c.HQ * c.Sq);
  std::vector<double> dq(q.size()), dk(k.size()), dv(v.size()), dsk(c.HQ);
  for (int b = 0; b < c.B; ++b) {
    const int off = c.top_left ? 0 : Lk(b) - Lq(b);
    for (int h = 0; h < c.HQ; ++h) {
      const int hk = h / (c.HQ / c.HK);
      for (int i = 0; i < Lq(b); ++i) {
        const int qr = cq[b] + i;
        std::vector<double> s(Lk(b), -INFINITY), dc(Lk(b), 1);
        double m = c.sinks ? sinks[h] : -INFINITY;
        for (int j = 0; j < Lk(b); ++j) {
          const int kr = ck[b] + j;
          const long diag = i + off;
          long wr = c.causal ? 0 : c.wr;
          if (!pad[kr]) continue;
          if (wr >= 0 && j > diag + wr) continue;
          if (c.wl >= 0 && j < diag - c.wl) continue;
          double t = 0;
          for (int x = 0; x < c.d; ++x)
            t += (double)q[(qr * c.HQ + h) * c.d + x] * k[(kr * c.HK + hk) * c.d + x];
          t *= (float)scale;
          if (c.cap > 0) {
            double th = std::tanh(t / c.cap);
            t = c.cap * th;
            dc[j] = 1 - th * th;
          }
          if (c.alibi) t -= alibi[h] * std::fabs((double)(diag - j));
          s[j] = t;
          m = std::max(m, t);
        }
        double Z = c.sinks ? std::exp(sinks[h] - m) : 0;
        for (int j = 0; j < Lk(b); ++j)
          if (s[j] > -INFINITY) Z += std::exp(s[j] - m);
        const double L = m == -INFINITY ? -INFINITY : m + std::log(Z);
        lse_abi[c.varlen ? h * TQ + qr : (b * c.HQ + h) * c.Sq + i] = (float)L;
        std::vector<double> o(c.dv, 0);
        if (L != -INFINITY)
          for (int j = 0; j < Lk(b); ++j)
            if (s[j] > -INFINITY) {
              double p = std::exp(s[j] - L);
              for (int x = 0; x < c.dv; ++x) o[x] += p * v[((ck[b] + j) * c.HK + hk) * c.dv + x];
            }
        for (int x = 0; x < c.dv; ++x) out[(qr * c.HQ + h) * c.dv + x] = (float)o[x];
        if (L == -INFINITY) continue;
        double D = 0;
        for (int x = 0; x < c.dv; ++x)
          D += (double)dout[(qr * c.HQ + h) * c.dv + x] * out[(qr * c.HQ + h) * c.dv + x];
        if (c.sinks) dsk[h] -= std::exp(sinks[h] - (double)(float)L) * D;
        for (int j = 0; j < Lk(b); ++j) {
          if (s[j] == -INFINITY) continue;
          const int kr = ck[b] + j;
          double p = std::exp(s[j] - (double)(float)L), dp = 0;
          for (int x = 0; x < c.dv; ++x)
            dp += (double)dout[(qr * c.HQ + h) * c.dv + x] * v[(kr * c.HK + hk) * c.dv + x];
          const double ds = p * (dp - D) * dc[j];
          for (int x = 0; x < c.d; ++x) {
            dq[(qr * c.HQ + h) * c.d + x] += scale * ds * k[(kr * c.HK + hk) * c.d + x];
            dk[(kr * c.HK + hk) * c.d + x] += scale * ds * q[(qr * c.HQ + h) * c.d + x];
          }
          for (int x = 0; x < c.dv; ++x)
            dv[(kr * c.HK + hk) * c.dv + x] += p * dout[(qr * c.HQ + h) * c.dv + x];
        }
      }
    }
  }
  sa_attention_v2_args f{};
  f.struct_size = sizeof f;
  f.qkv_dtype = SA_F32;
  f.out_dtype = SA_F32;
  f.batch = c.B;
  f.heads_q = c.HQ;
  f.heads_kv = c.HK;
  f.seqlen_q = c.Sq;
  f.seqlen_k = c.Sk;
  f.head_dim = c.d;
  f.head_dim_v = c.dv;
  if (c.varlen) {
    f.cu_seqlens_q = cq.data();
    f.cu_seqlens_k = ck.data();
  }
  auto ten = [&](const void* p, int H, int S, int D) {
    sa_tensor t{p, (long)S * H * D, D, (long)H * D};
    return t;
  };
  f.q = ten(q.data(), c.HQ, c.Sq, c.d);
  f.k = ten(k.data(), c.HK, c.Sk, c.d);
  f.v = ten(v.data(), c.HK, c.Sk, c.dv);
  f.out = out.data();
  f.out_stride_b = (long)c.Sq * c.HQ * c.dv;
  f.out_stride_h = c.dv;
  f.out_stride_s = (long)c.HQ * c.dv;
  f.lse = lse_abi.data();
  f.key_padding_mask = c.pad ? pad.data() : nullptr;
  f.scale = scale;
  f.causal = c.causal;
  f.alignment = c.top_left ? SA_ALIGN_TOP_LEFT : SA_ALIGN_BOTTOM_RIGHT;
  f.window_left = c.wl;
  f.window_right = c.wr;
  f.softcap = c.cap;
  f.alibi_slopes = c.alibi ? alibi.data() : nullptr;
  f.sinks = c.sinks ? sinks.data() : nullptr;
  f.q_descale = f.k_descale = f.v_descale = 1;
  std::vector<float> gq(q.size(), NAN), gk(k.size(), NAN), gv(v.size(), NAN), gs(c.HQ, NAN);
  sa_attention_backward_args ba{};
  ba.struct_size = sizeof ba;
  ba.forward = &f;
  ba.dout = ten(dout.data(), c.HQ, c.Sq, c.dv);
  ba.dq = ten(gq.data(), c.HQ, c.Sq, c.d);
  ba.dk = ten(gk.data(), c.HK, c.Sk, c.d);
  ba.dv = ten(gv.data(), c.HK, c.Sk, c.dv);
  ba.dsinks = c.sinks ? gs.data() : nullptr;
  std::string err;
  ASSERT_EQ(launch_attention_backward(ba, err), SA_OK) << err;
  auto cmp = [&](const char* w, const std::vector<float>& a, const std::vector<double>& r) {
    double mx = 0, mag = 0;
    for (double x : r) mag = std::max(mag, std::fabs(x));
    for (size_t x = 0; x < r.size(); ++x) {
      double d = std::fabs(a[x] - r[x]);
      if (!(d <= 1e30)) d = INFINITY;
      mx = std::max(mx, d);
    }
    double rel = mx / (mag + 1e-30);
    e.worst = std::max(e.worst, rel);
    if (!(rel < 1e-4)) {
      (std::string(w) == "dq" ? e.dq_bad : e.other_bad) += 1;
      std::cout << "  " << w << ": relative error " << rel << " (max abs " << mx << ", largest "
                << mag << ")\n";
    }
  };
  cmp("dq", gq, dq);
  cmp("dk", gk, dk);
  cmp("dv", gv, dv);
  if (c.sinks) {
    std::vector<double> r(dsk.begin(), dsk.end());
    cmp("dsinks", gs, r);
  }
}

const std::vector<Cfg> kCases = {
    {1, 1, 1, 5, 7, 8, 8, false, false, false, -1, -1, 0, false, false, false},
    {2, 4, 2, 70, 130, 16, 24, false, true, false, -1, -1, 0, false, false, false},
    {2, 4, 1, 33, 20, 32, 32, false, true, true, -1, -1, 0, false, true, false},
    {3, 2, 2, 40, 90, 8, 8, true, false, false, 20, 3, 0, true, false, true},
    {1, 3, 1, 65, 65, 40, 16, false, false, false, -1, -1, 5.0, false, true, true},
    {2, 2, 1, 17, 150, 136, 136, false, true, false, -1, -1, 0, false, false, false},
    {3, 4, 2, 50, 70, 16, 16, true, true, false, -1, -1, 7.0, true, true, true},
};

TEST(CudaEmulatedBackwardSmoke, AttentionMatchesDoublePrecision) {
  Errors e;
  unsigned seed = 1;
  for (const auto& c : kCases) {
    SCOPED_TRACE("B" + std::to_string(c.B) + " HQ" + std::to_string(c.HQ) + " HK" +
                 std::to_string(c.HK) + " Sq" + std::to_string(c.Sq) + " Sk" +
                 std::to_string(c.Sk) + " d" + std::to_string(c.d) + " dv" + std::to_string(c.dv));
    run(c, seed++, e);
  }
  std::cout << "worst relative error " << e.worst << "\n";
  EXPECT_EQ(e.other_bad, 0) << "dk, dv or dsinks wrong";
#if defined(SA_BWD_SMOKE_MUTANT)
  EXPECT_GT(e.dq_bad, 0) << "the dQ tail-tile mutant escaped";
#else
  EXPECT_EQ(e.dq_bad, 0);
#endif
}

TEST(CudaEmulatedBackwardSmoke, RowsMatchDoublePrecision) {
  for (int log = 0; log < 2; ++log) {
    const int R = 3, n = 300;
    std::mt19937 g(9);
    std::normal_distribution<float> n01(0, 1);
    std::vector<float> y(R * n), dy(R * n), dx(R * n);
    for (int r = 0; r < R; ++r) {
      double Z = 0;
      std::vector<double> x(n);
      for (auto& v : x) v = n01(g), Z += std::exp(v);
      for (int i = 0; i < n; ++i)
        y[r * n + i] = log ? (float)(x[i] - std::log(Z)) : (float)(std::exp(x[i]) / Z),
                  dy[r * n + i] = n01(g);
    }
    sa_rows s{R, n, n, n, 0.5, SA_F32};
    std::string err;
    ASSERT_EQ(launch_rows_backward(log, SA_F32, s, y.data(), dy.data(), dx.data(), err), SA_OK)
        << err;
    double mx = 0;
    for (int r = 0; r < R; ++r) {
      double S = 0;
      for (int i = 0; i < n; ++i) S += log ? dy[r * n + i] : (double)y[r * n + i] * dy[r * n + i];
      for (int i = 0; i < n; ++i) {
        const double want = (log ? dy[r * n + i] - std::exp((double)y[r * n + i]) * S
                                 : y[r * n + i] * (dy[r * n + i] - S)) /
                            0.5;
        mx = std::max(mx, std::fabs(dx[r * n + i] - want));
      }
    }
    EXPECT_LT(mx, 1e-4) << (log ? "log_softmax_backward" : "softmax_backward");
  }
}

}  // namespace
