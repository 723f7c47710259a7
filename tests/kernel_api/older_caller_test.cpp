// A caller built against the interface-2 header from before seqused_k and
// the paged fields were appended passes struct_size =
// SA_ATTENTION_V2_ARGS_V2_0_SIZE, one from before the masks
// SA_ATTENTION_V2_ARGS_V2_1_SIZE, one from before the block scales
// SA_ATTENTION_V2_ARGS_V2_2_SIZE, one from before the scale type and the
// per-head descales SA_ATTENTION_V2_ARGS_V2_3_SIZE: the built-in kernels must take its call
// as one without the later features (never read past its struct), and give
// the bits of the same call made with the whole struct.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_kernel.hpp"
#include "kernels/naive/naive_kernel.hpp"
#include "softmax_audit/kernel.h"

namespace {

struct Call {
  std::vector<float> q, k, v, out, lse;
  sa_attention_v2_args a{};
  Call() {
    // One sequence, two heads, 3 queries, 5 keys, d = dv = 4, BSHD, causal.
    const int h = 2, lq = 3, lk = 5, d = 4;
    for (int i = 0; i < lq * h * d; ++i) q.push_back(std::sin(0.7f * static_cast<float>(i)));
    for (int i = 0; i < lk * h * d; ++i) k.push_back(std::cos(0.3f * static_cast<float>(i)));
    for (int i = 0; i < lk * h * d; ++i) v.push_back(0.1f * static_cast<float>(i % 7) - 0.3f);
    out.assign(static_cast<std::size_t>(lq * h * d), NAN);
    lse.assign(static_cast<std::size_t>(h * lq), NAN);
    a.struct_size = sizeof a;
    a.qkv_dtype = a.out_dtype = SA_F32;
    a.batch = 1;
    a.heads_q = a.heads_kv = h;
    a.seqlen_q = lq;
    a.seqlen_k = lk;
    a.head_dim = a.head_dim_v = d;
    a.q = {q.data(), lq * h * d, d, h * d};
    a.k = {k.data(), lk * h * d, d, h * d};
    a.v = {v.data(), lk * h * d, d, h * d};
    a.out = out.data();
    a.out_stride_b = lq * h * d;
    a.out_stride_h = d;
    a.out_stride_s = h * d;
    a.lse = lse.data();
    a.scale = 0.5;
    a.causal = 1;
    a.alignment = SA_ALIGN_BOTTOM_RIGHT;
    a.window_left = a.window_right = -1;
    a.q_descale = a.k_descale = a.v_descale = 1.0f;
  }
};

// The older caller's struct: exactly SA_ATTENTION_V2_ARGS_V2_0_SIZE bytes,
// followed in memory by bytes that would be garbage as the appended fields.
struct OlderCaller {
  alignas(sa_attention_v2_args) unsigned char bytes[sizeof(sa_attention_v2_args)];
  explicit OlderCaller(const sa_attention_v2_args& whole,
                       std::uint32_t size = SA_ATTENTION_V2_ARGS_V2_0_SIZE) {
    std::memset(bytes, 0xA5, sizeof bytes);  // non-NULL pointers, huge page sizes
    std::memcpy(bytes, &whole, size);
    std::memcpy(bytes + offsetof(sa_attention_v2_args, struct_size), &size, sizeof size);
  }
  const sa_attention_v2_args* args() const {
    return reinterpret_cast<const sa_attention_v2_args*>(bytes);
  }
};

void same_bits_for_an_older_caller(const sa_kernel* k) {
  Call whole;
  ASSERT_EQ(k->attention_v2(k->ctx, &whole.a), SA_OK) << k->name;
  // Built before the paged fields (V2_0), before the masks (V2_1) and
  // before the block scales (V2_2) and before the per-head descales (V2_3):
  // the fields past its size are garbage.
  for (std::uint32_t size : {static_cast<std::uint32_t>(SA_ATTENTION_V2_ARGS_V2_0_SIZE),
                             static_cast<std::uint32_t>(SA_ATTENTION_V2_ARGS_V2_1_SIZE),
                             static_cast<std::uint32_t>(SA_ATTENTION_V2_ARGS_V2_2_SIZE),
                             static_cast<std::uint32_t>(SA_ATTENTION_V2_ARGS_V2_3_SIZE)}) {
    Call older;
    const OlderCaller o(older.a, size);
    ASSERT_EQ(k->attention_v2(k->ctx, o.args()), SA_OK)
        << k->name << " (struct_size " << size
        << "): " << (k->last_error ? k->last_error(k->ctx) : "");
    EXPECT_EQ(0, std::memcmp(whole.out.data(), older.out.data(), whole.out.size() * 4))
        << k->name << " (struct_size " << size << ")";
    EXPECT_EQ(0, std::memcmp(whole.lse.data(), older.lse.data(), whole.lse.size() * 4))
        << k->name << " (struct_size " << size << ")";
  }
  // Shorter than interface 2's first struct: refused, nothing written.
  Call tiny;
  tiny.a.struct_size = SA_ATTENTION_V2_ARGS_V2_0_SIZE - 8;
  EXPECT_EQ(k->attention_v2(k->ctx, &tiny.a), SA_INVALID_ARGUMENT) << k->name;
  for (float x : tiny.out) EXPECT_TRUE(std::isnan(x)) << k->name;
}

}  // namespace

TEST(OlderInterfaceTwoCaller, CpuKernelTakesItAsUnpagedWithTheSameBits) {
  same_bits_for_an_older_caller(sa::kernels::cpu_kernel());
}

TEST(OlderInterfaceTwoCaller, NaiveKernelTakesItAsUnpagedWithTheSameBits) {
  same_bits_for_an_older_caller(sa::kernels::naive_kernel());
}
