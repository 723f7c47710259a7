// fp4 e2m1 and int8 inputs with E8M0, e4m3 and float32 block scales
// (kernel.h, issue 33 item 4), exactly: the built-in CPU and naive
// kernels decode each of the 16 e2m1 codes, the element at an even offset
// from a byte's low four bits, each scale type, and refuse malformed
// arguments naming the field. One key per query: the output is exactly
// v_descale times the value row (its weight is exp(0) / exp(0) = 1), so it
// shows each decoded element of V.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernel.hpp"
#include "kernels/naive/naive_kernel.hpp"
#include "softmax_audit/kernel.h"

namespace {

// OCP MX v1.0 e2m1: code s.ee.m (bit 3 the sign), magnitudes 0, 0.5, 1, 1.5,
// 2, 3, 4, 6 (written out here, not taken from the suite's decoder).
const float kE2M1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                         -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// One sequence, one head, one query, one key; q and k of head dim 2, v of
// head_dim_v dv; every buffer of the call's input type as given (bytes).
struct Call {
  std::vector<std::uint8_t> q, k, v;
  std::vector<std::uint8_t> qs, ks, vs;  // scales (bytes of scale_dtype)
  std::vector<float> out;
  sa_attention_v2_args a{};
  Call(sa_dtype t, std::int64_t dv, std::vector<std::uint8_t> vbytes) : v(std::move(vbytes)) {
    q.assign(4, 0);
    k.assign(4, 0);
    out.assign(static_cast<std::size_t>(dv), NAN);
    a.struct_size = sizeof a;
    a.qkv_dtype = t;
    a.out_dtype = SA_F32;
    a.batch = a.heads_q = a.heads_kv = a.seqlen_q = a.seqlen_k = 1;
    a.head_dim = 2;
    a.head_dim_v = dv;
    a.q = {q.data(), 2, 2, 2};
    a.k = {k.data(), 2, 2, 2};
    a.v = {v.data(), dv, dv, dv};
    a.out = out.data();
    a.out_stride_b = a.out_stride_h = a.out_stride_s = dv;
    a.scale = 1.0;
    a.alignment = SA_ALIGN_BOTTOM_RIGHT;
    a.window_left = a.window_right = -1;
    a.q_descale = a.k_descale = a.v_descale = 1.0f;
  }
  // Block scales of scale_dtype st, one per sb elements: q and k one run
  // (value 1 in each type), v's runs the bytes given.
  void scales(sa_dtype st, std::int64_t sb, std::vector<std::uint8_t> v_bytes) {
    const std::size_t size = st == SA_F32 ? 4 : 1;
    std::vector<std::uint8_t> one(size);
    if (st == SA_F32) {
      const float f = 1.0f;
      std::memcpy(one.data(), &f, 4);
    } else {
      one[0] = st == SA_FP8_E4M3 ? 0x38 : 127;  // e4m3 0.0111.000 = 1, E8M0 2^0
    }
    qs = ks = one;
    vs = std::move(v_bytes);
    const std::int64_t runs = (a.head_dim_v + sb - 1) / sb;
    a.scale_block = sb;
    a.scale_dtype = st == SA_F32 || st == SA_FP8_E4M3 ? st : static_cast<sa_dtype>(0);
    a.q_scale = {qs.data(), 1, 1, 1};
    a.k_scale = {ks.data(), 1, 1, 1};
    a.v_scale = {vs.data(), runs, runs, runs};
  }
};

std::vector<std::uint8_t> f32_bytes(std::vector<float> f) {
  std::vector<std::uint8_t> b(f.size() * 4);
  std::memcpy(b.data(), f.data(), b.size());
  return b;
}

// The 16 codes in order, two per byte, the first of each pair in the low
// nibble: bytes 0x10, 0x32, ..., 0xfe.
std::vector<std::uint8_t> all_codes() {
  std::vector<std::uint8_t> b;
  for (int c = 0; c < 16; c += 2) b.push_back(static_cast<std::uint8_t>(c | ((c + 1) << 4)));
  return b;
}

const sa_kernel* kernels_under_test[] = {sa::kernels::cpu_kernel(), sa::kernels::naive_kernel()};

void expect_out(const sa_kernel* k, Call& c, const std::vector<float>& want) {
  ASSERT_EQ(k->attention_v2(k->ctx, &c.a), SA_OK) << k->name << ": " << k->last_error(k->ctx);
  for (std::size_t x = 0; x < want.size(); ++x)  // (exactly; -0 and +0 alike)
    EXPECT_EQ(c.out[x], want[x]) << k->name << " out[" << x << "]";
}

TEST(QuantCall, EveryE2M1CodeLowNibbleFirst) {
  for (const sa_kernel* k : kernels_under_test) {
    Call c(SA_FP4_E2M1, 16, all_codes());
    c.a.v_descale = 0.75f;
    std::vector<float> want;
    for (int x = 0; x < 16; ++x) want.push_back(kE2M1[x] * 0.75f);
    expect_out(k, c, want);
  }
}

TEST(QuantCall, E2M1WithE8M0E4M3AndFloat32Scales) {
  // v's 16 codes in runs of 8: the first run's scale and the second's.
  struct Scale {
    sa_dtype type;
    std::vector<std::uint8_t> bytes;
    float first, second;
  };
  const Scale scales[] = {
      {static_cast<sa_dtype>(0), {128, 125}, 2.0f, 0.25f},  // E8M0: 2^1, 2^-2
      {SA_FP8_E4M3, {0x3a, 0x03}, 1.25f, 0.005859375f},     // e4m3: 1.25, 3 * 2^-9 (subnormal)
      {SA_F32, f32_bytes({0.3f, -1.5f}), 0.3f, -1.5f},      // float32
  };
  for (const sa_kernel* k : kernels_under_test)
    for (const Scale& s : scales) {
      Call c(SA_FP4_E2M1, 16, all_codes());
      c.scales(s.type, 8, s.bytes);
      c.a.v_descale = 2.0f;
      std::vector<float> want;
      for (int x = 0; x < 16; ++x) want.push_back(kE2M1[x] * (x < 8 ? s.first : s.second) * 2.0f);
      expect_out(k, c, want);
    }
}

TEST(QuantCall, NaNScalesMakeTheirRunNaN) {
  const std::pair<sa_dtype, std::vector<std::uint8_t>> nans[] = {
      {static_cast<sa_dtype>(0), {255, 127}},
      {SA_FP8_E4M3, {0x7f, 0x38}},
      {SA_F32, f32_bytes({NAN, 1.0f})},
  };
  for (const sa_kernel* k : kernels_under_test)
    for (const auto& [type, bytes] : nans) {
      Call c(SA_FP4_E2M1, 16, all_codes());
      c.scales(type, 8, bytes);
      ASSERT_EQ(k->attention_v2(k->ctx, &c.a), SA_OK) << k->name << ": " << k->last_error(k->ctx);
      for (int x = 0; x < 16; ++x)
        EXPECT_EQ(std::isnan(c.out[static_cast<std::size_t>(x)]), x < 8) << k->name << " " << x;
    }
}

TEST(QuantCall, Int8TwosComplementWithAFloat32ScalePerRow) {
  const std::int8_t vals[] = {-128, -127, -1, 0, 1, 2, 64, 127};
  std::vector<std::uint8_t> bytes;
  for (std::int8_t x : vals) bytes.push_back(static_cast<std::uint8_t>(x));
  for (const sa_kernel* k : kernels_under_test) {
    {  // no block scales: the element times the descale
      Call c(SA_INT8, 8, bytes);
      c.a.v_descale = 0.0625f;
      std::vector<float> want;
      for (std::int8_t x : vals) want.push_back(static_cast<float>(x) * 0.0625f);
      expect_out(k, c, want);
    }
    {  // one float32 scale for the whole row (scale_block >= head_dim_v)
      Call c(SA_INT8, 8, bytes);
      c.scales(SA_F32, 64, f32_bytes({0.01171875f}));
      std::vector<float> want;
      for (std::int8_t x : vals) want.push_back(static_cast<float>(x) * 0.01171875f);
      expect_out(k, c, want);
    }
  }
}

TEST(QuantCall, MalformedArgumentsAreRefusedNamingTheField) {
  for (const sa_kernel* k : kernels_under_test) {
    {
      Call c(SA_FP4_E2M1, 16, all_codes());
      c.a.v.stride_s = 17;  // an odd stride: a head row would start inside a byte
      EXPECT_EQ(k->attention_v2(k->ctx, &c.a), SA_INVALID_ARGUMENT) << k->name;
      EXPECT_NE(std::string(k->last_error(k->ctx)).find("v.stride_s"), std::string::npos)
          << k->last_error(k->ctx);
    }
    {
      Call c(SA_FP4_E2M1, 16, all_codes());
      c.scales(SA_FP8_E4M3, 16, {0x38});
      c.a.scale_dtype = SA_BF16;
      EXPECT_EQ(k->attention_v2(k->ctx, &c.a), SA_INVALID_ARGUMENT) << k->name;
      EXPECT_NE(std::string(k->last_error(k->ctx)).find("scale_dtype"), std::string::npos)
          << k->last_error(k->ctx);
    }
  }
}

}  // namespace
