// The CPU kernel's attention backward (kernels/cpu/backward.cpp) is
// deterministic by construction: its dQ sums the key tiles in order through
// per-tile slots, in waves. Neither the thread count nor the wave size may
// change a bit of dq, dk, dv or d(sink) (kernels/cpu/backward.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/cpu/backward.hpp"
#include "kernels/cpu/cpu_kernel.hpp"
#include "softmax_audit/kernel.h"

namespace {

struct Grads {
  std::vector<float> dq, dk, dv, dsinks;
};

// Varlen (3 sequences of 70/97, 200/203 and 1/0 queries/keys), GQA 4 on 2,
// head dims 40 and 24, causal bottom-right, window 90 to the left, softcap,
// ALiBi, sinks and a key padding mask: every path of the block code.
class CpuBackwardDeterminism : public ::testing::Test {
 protected:
  static constexpr std::int64_t HQ = 4, HK = 2, d = 40, dv = 24;
  std::vector<std::int32_t> cq{0, 70, 270, 271}, ck{0, 97, 300, 300};
  std::vector<float> q, k, v, out, lse, dout, slopes{0.5f, 0.25f, 0.125f, 0.0625f},
      sinks{0.3f, -1.0f, 2.0f, 0.0f};
  std::vector<std::uint8_t> kpm;
  sa_attention_v2_args f{};

  void SetUp() override {
    std::mt19937 g(11);
    std::normal_distribution<float> n01(0.0f, 1.0f);
    const std::int64_t tq = cq.back(), tk = ck.back();
    q.resize(tq * HQ * d);
    k.resize(tk * HK * d);
    v.resize(tk * HK * dv);
    dout.resize(tq * HQ * dv);
    for (auto* x : {&q, &k, &v, &dout})
      for (auto& e : *x) e = n01(g);
    kpm.assign(tk, 1);
    for (std::int64_t j = 0; j < tk; j += 7) kpm[j] = 0;
    out.resize(tq * HQ * dv);
    lse.resize(HQ * tq);
    f.struct_size = sizeof f;
    f.qkv_dtype = f.out_dtype = SA_F32;
    f.batch = 3;
    f.heads_q = HQ;
    f.heads_kv = HK;
    f.seqlen_q = 200;
    f.seqlen_k = 203;
    f.head_dim = d;
    f.head_dim_v = dv;
    f.cu_seqlens_q = cq.data();
    f.cu_seqlens_k = ck.data();
    f.q = {q.data(), 0, d, HQ * d};
    f.k = {k.data(), 0, d, HK * d};
    f.v = {v.data(), 0, dv, HK * dv};
    f.out = out.data();
    f.out_stride_b = 0;
    f.out_stride_h = dv;
    f.out_stride_s = HQ * dv;
    f.lse = lse.data();
    f.key_padding_mask = kpm.data();
    f.scale = 0.15;
    f.causal = 1;
    f.alignment = SA_ALIGN_BOTTOM_RIGHT;
    f.window_left = 90;
    f.window_right = -1;
    f.softcap = 5.0;
    f.alibi_slopes = slopes.data();
    f.sinks = sinks.data();
    f.q_descale = f.k_descale = f.v_descale = 1.0f;
    const sa_kernel* K = sa::kernels::cpu_kernel();
    ASSERT_EQ(K->attention_v2(K->ctx, &f), SA_OK);
  }

  Grads backward() {
    Grads r;
    r.dq.assign(q.size(), -1.0f);
    r.dk.assign(k.size(), -1.0f);
    r.dv.assign(v.size(), -1.0f);
    r.dsinks.assign(HQ, -1.0f);
    sa_attention_backward_args b{};
    b.struct_size = sizeof b;
    b.forward = &f;
    b.dout = {dout.data(), 0, dv, HQ * dv};
    b.dq = {r.dq.data(), 0, d, HQ * d};
    b.dk = {r.dk.data(), 0, d, HK * d};
    b.dv = {r.dv.data(), 0, dv, HK * dv};
    b.dsinks = r.dsinks.data();
    b.deterministic = 1;
    const sa_kernel* K = sa::kernels::cpu_kernel();
    EXPECT_EQ(K->attention_backward(K->ctx, &b), SA_OK);
    return r;
  }
};

void expect_bitwise(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what << " differs";
}

void expect_same(const Grads& a, const Grads& b) {
  expect_bitwise(a.dq, b.dq, "dq");
  expect_bitwise(a.dk, b.dk, "dk");
  expect_bitwise(a.dv, b.dv, "dv");
  expect_bitwise(a.dsinks, b.dsinks, "dsinks");
}

TEST_F(CpuBackwardDeterminism, ThreadCountAndWaveSizeChangeNoBit) {
#ifdef _OPENMP
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
#endif
  const Grads one = backward();
  bool finite = true;
  for (const auto* x : {&one.dq, &one.dk, &one.dv, &one.dsinks})
    for (float e : *x) finite = finite && std::isfinite(e);
  EXPECT_TRUE(finite);
  // The masked keys' gradients are exactly 0.
  for (std::int64_t j = 0; j < ck.back(); j += 7)
    for (std::int64_t c = 0; c < HK * d; ++c) ASSERT_EQ(one.dk[j * HK * d + c], 0.0f) << j;
  for (int threads : {2, 3}) {
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    SCOPED_TRACE(threads);
    expect_same(one, backward());
    // The smallest waves: 2 slots per thread, many waves and barriers.
    sa::kernels::detail::set_backward_slot_budget(1);
    expect_same(one, backward());
    sa::kernels::detail::set_backward_slot_budget(0);
  }
#ifdef _OPENMP
  omp_set_num_threads(before);
#endif
}

}  // namespace
