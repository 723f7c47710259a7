// The few-query path (kernels/cpu/attention_decode.hpp) against the tiled
// path (cpu_attention_head) on the same heads: the two differ only in the
// order of the d-term float32 dot product, so every finite output agrees
// within a few ulp of the values' scale, and every special value (NaN, +-inf,
// fully masked rows, the sink-only rows) is identical. Claim and bound:
// |decode - tiled| <= 2^-16 (max|v| + 1) per output element for float32
// outputs, one output ulp more for bfloat16 / float16 (each path rounds once;
// the two float32 results round to neighbours at worst); lse and entropy
// within 2^-16 (|lse| + 1). The accuracy against the exact result is the
// property suite's job (attention_v2.rounding runs the built-in kernel on
// decode-shaped cases: 1 x 239, 2 x 4097, 1 x 8192 with GQA 4 and 8).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/attention_decode.hpp"

namespace {

using sa::kernels::AttentionHeadArgs;

struct Features {
  sa_dtype in = SA_F32, out = SA_F32;
  std::int64_t nq = 1, nk = 239, d = 128, dv = 128, group = 4;
  bool causal = false, key_mask = false, alibi = false, sink = false, adaptive = false;
  double softcap = 0.0;
  std::int64_t wl = -1;
  float sink_value = 0.5f;
  bool nan_key = false;  // a NaN in one visible key: those rows are NaN
  std::string name() const {
    return "in" + std::to_string(in) + " out" + std::to_string(out) + " nq" + std::to_string(nq) +
           " nk" + std::to_string(nk) + " d" + std::to_string(d) + " g" + std::to_string(group) +
           (causal ? " causal" : "") + (key_mask ? " mask" : "") + (alibi ? " alibi" : "") +
           (sink ? " sink" : "") + (adaptive ? " adaptive" : "") + (softcap > 0 ? " softcap" : "") +
           (wl >= 0 ? " window" : "") + (nan_key ? " nan_key" : "");
  }
};

std::size_t esize(sa_dtype t) { return t == SA_F32 ? 4 : t == SA_BF16 || t == SA_F16 ? 2 : 1; }

float read_out(const std::vector<unsigned char>& b, sa_dtype t, std::size_t i) {
  if (t == SA_F32) {
    float x;
    std::memcpy(&x, &b[i * 4], 4);
    return x;
  }
  std::uint16_t h;
  std::memcpy(&h, &b[i * 2], 2);
  return t == SA_BF16 ? sa::float_from_bf16(h) : sa::float_from_f16(h);
}

void compare(const Features& f, std::uint64_t seed) {
  SCOPED_TRACE(f.name() + " seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const std::size_t ei = esize(f.in), eo = esize(f.out);
  auto fill = [&](std::vector<unsigned char>& buf, std::int64_t count) {
    buf.resize(static_cast<std::size_t>(count) * ei);
    for (std::int64_t i = 0; i < count; ++i) {
      const float x = nd(rng);
      if (f.in == SA_F32) {
        std::memcpy(&buf[static_cast<std::size_t>(i) * 4], &x, 4);
      } else if (f.in == SA_BF16 || f.in == SA_F16) {
        const std::uint16_t h = f.in == SA_BF16 ? sa::bf16_from_float(x) : sa::f16_from_float(x);
        std::memcpy(&buf[static_cast<std::size_t>(i) * 2], &h, 2);
      } else {
        buf[static_cast<std::size_t>(i)] = static_cast<unsigned char>(rng() & 0x77);  // finite fp8
      }
    }
  };
  std::vector<unsigned char> q, k, v;
  fill(q, f.group * f.nq * f.d);
  fill(k, f.nk * f.d);
  fill(v, f.nk * f.dv);
  if (f.nan_key && f.in == SA_F32) {
    const float nan = std::nanf("");
    std::memcpy(&k[static_cast<std::size_t>((f.nk - 1) * f.d) * 4], &nan, 4);
  }
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(f.nk), 1);
  if (f.key_mask)
    for (std::int64_t j = 0; j < f.nk; ++j)
      mask[static_cast<std::size_t>(j)] = (j % 7 == 3) ? 0 : 1;
  const std::size_t rows = static_cast<std::size_t>(f.group * f.nq);
  std::vector<unsigned char> out_dec(rows * static_cast<std::size_t>(f.dv) * eo),
      out_tiled(out_dec.size());
  std::vector<float> lse_dec(rows), lse_tiled(rows), ent_dec(rows), ent_tiled(rows), beta_dec(rows),
      beta_tiled(rows);
  std::vector<AttentionHeadArgs> dec(static_cast<std::size_t>(f.group));
  for (std::int64_t h = 0; h < f.group; ++h) {
    AttentionHeadArgs& a = dec[static_cast<std::size_t>(h)];
    a.qkv_dtype = f.in;
    a.out_dtype = f.out;
    a.nq = f.nq;
    a.nk = f.nk;
    a.d = f.d;
    a.dv = f.dv;
    a.q = q.data() + static_cast<std::size_t>(h * f.nq * f.d) * ei;
    a.q_stride = f.d;
    a.k = k.data();
    a.k_stride = f.d;
    a.v = v.data();
    a.v_stride = f.dv;
    a.out = out_dec.data() + static_cast<std::size_t>(h * f.nq * f.dv) * eo;
    a.out_stride = f.dv;
    a.lse = lse_dec.data() + h * f.nq;
    a.entropy = ent_dec.data() + h * f.nq;
    a.beta = beta_dec.data() + h * f.nq;
    a.key_mask = f.key_mask ? mask.data() : nullptr;
    a.scale = 1.0 / std::sqrt(static_cast<double>(f.d));
    a.diag_offset = f.nk - f.nq;
    a.window_left = f.wl;
    a.window_right = f.causal ? 0 : -1;
    a.softcap = f.softcap;
    a.has_alibi = f.alibi;
    a.alibi_slope = 0.0625f * static_cast<float>(h + 1);
    a.has_sink = f.sink;
    a.sink = f.sink_value + static_cast<float>(h);
    a.adaptive = f.adaptive;
  }
  ASSERT_EQ(sa::kernels::cpu_attention_decode_group(dec.data(), f.group), SA_OK);
  for (std::int64_t h = 0; h < f.group; ++h) {
    AttentionHeadArgs a = dec[static_cast<std::size_t>(h)];
    a.out = out_tiled.data() + static_cast<std::size_t>(h * f.nq * f.dv) * eo;
    a.lse = lse_tiled.data() + h * f.nq;
    a.entropy = ent_tiled.data() + h * f.nq;
    a.beta = beta_tiled.data() + h * f.nq;
    ASSERT_EQ(sa::kernels::cpu_attention_head(a), SA_OK);
  }
  float vmax = 0.0f;
  for (std::int64_t i = 0; i < f.nk * f.dv; ++i) {
    float x;
    if (f.in == SA_F32) {
      std::memcpy(&x, &v[static_cast<std::size_t>(i) * 4], 4);
    } else if (f.in == SA_BF16 || f.in == SA_F16) {
      std::uint16_t h;
      std::memcpy(&h, &v[static_cast<std::size_t>(i) * 2], 2);
      x = f.in == SA_BF16 ? sa::float_from_bf16(h) : sa::float_from_f16(h);
    } else {
      x = 448.0f;  // e4m3's largest finite value bounds every pattern drawn
    }
    vmax = std::max(vmax, std::fabs(x));
  }
  const double ulp_out = f.out == SA_F32 ? 0.0 : f.out == SA_BF16 ? 0x1p-7 : 0x1p-10;
  auto same_special = [](float a, float b) {
    return (std::isnan(a) && std::isnan(b)) || (std::isinf(a) && a == b);
  };
  for (std::size_t i = 0; i < out_dec.size() / eo; ++i) {
    const float a = read_out(out_dec, f.out, i), b = read_out(out_tiled, f.out, i);
    if (!std::isfinite(a) || !std::isfinite(b)) {
      ASSERT_TRUE(same_special(a, b)) << "out " << i << ": " << a << " vs " << b;
      continue;
    }
    const double tol = 0x1p-16 * (vmax + 1.0) + ulp_out * std::max(std::fabs(a), std::fabs(b));
    ASSERT_LE(std::fabs(static_cast<double>(a) - b), tol) << "out " << i;
  }
  for (std::size_t r = 0; r < rows; ++r) {
    for (auto [x, y, what] : {std::tuple{lse_dec[r], lse_tiled[r], "lse"},
                              std::tuple{ent_dec[r], ent_tiled[r], "entropy"},
                              std::tuple{beta_dec[r], beta_tiled[r], "beta"}}) {
      if (!std::isfinite(x) || !std::isfinite(y)) {
        ASSERT_TRUE(same_special(x, y)) << what << " row " << r << ": " << x << " vs " << y;
        continue;
      }
      ASSERT_LE(std::fabs(static_cast<double>(x) - y), 0x1p-16 * (std::fabs(y) + 1.0))
          << what << " row " << r;
    }
  }
}

TEST(CpuAttentionDecode, AgreesWithTheTiledPathOnEveryFeature) {
  std::vector<Features> cases;
  Features base;
  cases.push_back(base);
  for (sa_dtype t : {SA_BF16, SA_F16}) {
    Features f = base;
    f.in = f.out = t;
    cases.push_back(f);
    // Head dims with a partial vector (the widening's scalar tail), and a NaN
    // in a visible key (the vector widening keeps NaN a NaN).
    f.d = 59;
    f.dv = 111;
    cases.push_back(f);
    f.nan_key = true;
    cases.push_back(f);
  }
  {
    Features f = base;
    f.in = SA_FP8_E4M3;
    f.out = SA_BF16;
    cases.push_back(f);
  }
  for (std::int64_t nk : {1, 63, 64, 65, 130, 1000}) {
    Features f = base;
    f.nk = nk;
    f.causal = true;
    cases.push_back(f);
  }
  {
    Features f = base;
    f.nq = 7;
    f.nk = 5;  // causal: the first two queries see nothing (bottom-right)
    f.group = 8;
    f.causal = true;
    cases.push_back(f);
  }
  {
    Features f = base;
    f.nq = 3;
    f.nk = 300;
    f.wl = 70;
    f.key_mask = true;
    f.alibi = true;
    f.softcap = 30.0;
    cases.push_back(f);
  }
  {
    Features f = base;
    f.sink = true;
    f.adaptive = true;
    f.d = 59;  // no whole vector of lanes: the scalar tail of the dot product
    f.dv = 40;
    cases.push_back(f);
  }
  {
    Features f = base;
    f.nk = 0 + 5;
    f.sink = true;
    f.sink_value = 100.0f;  // the sink takes almost all weight
    cases.push_back(f);
  }
  {
    Features f = base;
    f.nan_key = true;  // the last key is visible to every row: NaN rows
    cases.push_back(f);
  }
  {
    Features f = base;
    f.sink = true;
    f.sink_value = std::numeric_limits<float>::infinity();  // every row special
    cases.push_back(f);
  }
  {
    Features f = base;
    f.nq = 16;
    f.group = 4;  // 64 rows: the most one call takes
    f.nk = 200;
    f.causal = true;
    f.adaptive = true;
    cases.push_back(f);
  }
  std::uint64_t seed = 1;
  for (const Features& f : cases) compare(f, seed++);
}

}  // namespace
