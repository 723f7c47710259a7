// The few-query path (kernels/cpu/attention_decode.hpp) against the tiled
// path (cpu_attention_head) on the same heads: the two differ only in the
// order of the d-term float32 dot product and, past cpu_attention_decode_chunk
// keys, in the merge of the chunks' online-softmax states (one more rescale
// per chunk), so every finite output agrees within a few ulp of the values'
// scale, and every special value (NaN, +-inf,
// fully masked rows, the sink-only rows) is identical. Claim and bound:
// |decode - tiled| <= 2^-16 (max|v| + 1) per output element for float32
// outputs, one output ulp more for bfloat16 / float16 (each path rounds once;
// the two float32 results round to neighbours at worst); lse and entropy
// within 2^-16 (|lse| + 1). The accuracy against the exact result is the
// property suite's job (attention_v2.rounding runs the built-in kernel on
// decode-shaped cases: 1 x 239, 2 x 4097, 1 x 8192 with GQA 4 and 8).
#include <gtest/gtest.h>

#include <algorithm>
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
#include "kernels/cpu/attention_v2.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

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
  // 1: +inf in the value row of a masked key (never reaches the output; needs
  // key_mask); 2: NaN in the value row of the last key (visible: NaN rows).
  int v_special = 0;
  std::string name() const {
    return "in" + std::to_string(in) + " out" + std::to_string(out) + " nq" + std::to_string(nq) +
           " nk" + std::to_string(nk) + " d" + std::to_string(d) + " g" + std::to_string(group) +
           (causal ? " causal" : "") + (key_mask ? " mask" : "") + (alibi ? " alibi" : "") +
           (sink ? " sink" : "") + (adaptive ? " adaptive" : "") + (softcap > 0 ? " softcap" : "") +
           (wl >= 0 ? " window" : "") + (nan_key ? " nan_key" : "") +
           (v_special ? " v_special" + std::to_string(v_special) : "");
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
  if (f.v_special) {
    const std::int64_t j = f.v_special == 1 ? f.nk - 1 - (f.nk - 1 + 4) % 7 : f.nk - 1;
    const std::size_t at = static_cast<std::size_t>(j * f.dv + f.dv / 2);
    const bool inf = f.v_special == 1;
    if (f.in == SA_F32) {
      const float x = inf ? std::numeric_limits<float>::infinity() : std::nanf("");
      std::memcpy(&v[at * 4], &x, 4);
    } else if (f.in == SA_BF16 || f.in == SA_F16) {
      const std::uint16_t h = f.in == SA_BF16 ? (inf ? 0x7f80 : 0x7fc0) : (inf ? 0x7c00 : 0x7e00);
      std::memcpy(&v[at * 2], &h, 2);
    }
  }
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
  // Several chunks of keys (cpu_attention_decode_chunk): the chunks' states
  // merged, windows starting past the first chunk, sinks and the adaptive
  // temperature's two passes across chunks, row counts that are not a
  // multiple of the kernels' row blocks, and non-finite values.
  for (sa_dtype t : {SA_F32, SA_BF16, SA_F16}) {
    for (std::int64_t nk : {2048, 2049, 5000}) {
      Features f = base;
      f.in = f.out = t;
      f.nk = nk;
      f.group = nk == 2049 ? 3 : 5;
      f.d = nk == 5000 ? 40 : 128;
      f.dv = nk == 5000 ? 72 : 128;
      cases.push_back(f);
    }
    Features f = base;
    f.in = f.out = t;
    f.nk = 4500;
    f.nq = 2;
    f.group = 3;
    f.causal = true;
    f.wl = 2500;  // keys from 1999: the first chunk's last tile, then two more chunks
    f.key_mask = true;
    f.sink = true;
    f.adaptive = true;
    cases.push_back(f);
    f.v_special = 1;  // inf in a masked key's value: the chunk is redone the careful way
    cases.push_back(f);
    f.v_special = 2;
    cases.push_back(f);
  }
  std::uint64_t seed = 1;
  for (const Features& f : cases) compare(f, seed++);
}

// Groups of one sequence run tile by tile together (bundles) and keys are
// split over the threads by chunks: neither may change a bit. Three sequences
// of 4 key/value heads (GQA 2, BSHD, 3 chunks of keys) in one call, against
// one call per group and against the same call on one thread.
TEST(CpuAttentionDecode, BundlesAndThreadsChangeNoBit) {
  const std::int64_t batch = 3, hk = 4, group = 2, nk = 4100, d = 64;
  for (sa_dtype t : {SA_F32, SA_BF16, SA_F16}) {
    SCOPED_TRACE(std::to_string(t));
    const std::size_t e = esize(t);
    std::mt19937_64 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    auto fill = [&](std::vector<unsigned char>& buf, std::int64_t count) {
      buf.resize(static_cast<std::size_t>(count) * e);
      for (std::int64_t i = 0; i < count; ++i) {
        const float x = nd(rng);
        if (t == SA_F32) {
          std::memcpy(&buf[static_cast<std::size_t>(i) * 4], &x, 4);
        } else {
          const std::uint16_t h = t == SA_BF16 ? sa::bf16_from_float(x) : sa::f16_from_float(x);
          std::memcpy(&buf[static_cast<std::size_t>(i) * 2], &h, 2);
        }
      }
    };
    std::vector<unsigned char> q, k, v;
    fill(q, batch * hk * group * d);
    fill(k, batch * nk * hk * d);
    fill(v, batch * nk * hk * d);
    const std::size_t nrows = static_cast<std::size_t>(batch * hk * group);
    std::vector<unsigned char> out[3];
    std::vector<float> lse[3];
    std::vector<AttentionHeadArgs> heads[3];
    for (int x = 0; x < 3; ++x) {
      out[x].assign(nrows * static_cast<std::size_t>(d) * e, 0);
      lse[x].assign(nrows, 0.0f);
      for (std::int64_t b = 0; b < batch; ++b)
        for (std::int64_t h = 0; h < hk * group; ++h) {
          const std::int64_t row = b * hk * group + h, kvh = h / group;
          AttentionHeadArgs a;
          a.qkv_dtype = a.out_dtype = t;
          a.nq = 1;
          a.nk = nk;
          a.d = a.dv = d;
          a.q = q.data() + static_cast<std::size_t>(row * d) * e;
          a.q_stride = d;
          a.k = k.data() + static_cast<std::size_t>((b * nk * hk + kvh) * d) * e;
          a.v = v.data() + static_cast<std::size_t>((b * nk * hk + kvh) * d) * e;
          a.k_stride = a.v_stride = hk * d;
          a.out = out[x].data() + static_cast<std::size_t>(row * d) * e;
          a.out_stride = d;
          a.lse = lse[x].data() + row;
          a.scale = 0.125;
          a.diag_offset = nk - 1;
          a.has_alibi = true;
          a.alibi_slope = 0.001f * static_cast<float>(h + 1);
          heads[x].push_back(a);
        }
    }
    std::vector<std::size_t> starts;
    for (std::int64_t g = 0; g <= batch * hk; ++g)
      starts.push_back(static_cast<std::size_t>(g * group));
    const std::int64_t ngroups = batch * hk;
    ASSERT_EQ(sa::kernels::cpu_attention_decode(heads[0].data(), starts.data(), ngroups), SA_OK);
    for (std::int64_t g = 0; g < ngroups; ++g)
      ASSERT_EQ(sa::kernels::cpu_attention_decode_group(heads[1].data() + g * group, group), SA_OK);
#ifdef _OPENMP
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    ASSERT_EQ(sa::kernels::cpu_attention_decode(heads[2].data(), starts.data(), ngroups), SA_OK);
#ifdef _OPENMP
    omp_set_num_threads(threads);
#endif
    for (int x = 1; x < 3; ++x) {
      EXPECT_EQ(std::memcmp(out[0].data(), out[x].data(), out[0].size()), 0)
          << "outputs, variant " << x;
      EXPECT_EQ(std::memcmp(lse[0].data(), lse[x].data(), nrows * 4), 0) << "lse, variant " << x;
    }
  }
}

// Paged KV on the few-query path reads the pages in place (key rows through
// the block table): the same arithmetic in the same order as on the same keys
// stored contiguously, so every output bit is the same. Claim: paged ==
// contiguous bitwise for decode shapes (1 and 4 queries, GQA 4), pages of 1,
// 5, 16 and 256 tokens in shuffled physical order (ids past 65,535 with pages
// of one token), the last page part filled, every slot no sequence uses NaN (never read), and a
// NaN in one visible key (the exact scalar path must read it through the
// page table too); float32, bfloat16, float16 and fp8 (widened copies).
TEST(CpuAttentionDecode, PagedInPlaceEqualsContiguousBitwise) {
  const std::int64_t batch = 2, hq = 8, hk = 2, d = 64, nk = 300;
  for (sa_dtype t : {SA_F32, SA_BF16, SA_F16, SA_FP8_E4M3})
    for (std::int64_t nq : {1, 4})
      for (std::int64_t ps : {1, 5, 16, 256})
        for (bool nan_key : {false, true}) {
          SCOPED_TRACE("dtype " + std::to_string(t) + " nq " + std::to_string(nq) + " page " +
                       std::to_string(ps) + (nan_key ? " nan_key" : ""));
          const std::size_t e = esize(t);
          std::mt19937_64 rng(11 + static_cast<std::uint64_t>(ps));
          std::normal_distribution<float> nd(0.0f, 1.0f);
          auto put = [&](std::vector<unsigned char>& buf, std::size_t i, float x) {
            if (t == SA_F32) {
              std::memcpy(&buf[i * 4], &x, 4);
            } else if (t == SA_FP8_E4M3) {
              buf[i] = std::isnan(x) ? 0x7f : static_cast<unsigned char>(rng() & 0x77);
            } else {
              const std::uint16_t h = t == SA_BF16 ? sa::bf16_from_float(x) : sa::f16_from_float(x);
              std::memcpy(&buf[i * 2], &h, 2);
            }
          };
          const std::int64_t row = hk * d;  // BSHD: a token's kv heads side by side
          std::vector<unsigned char> q(static_cast<std::size_t>(batch * nq * hq * d) * e),
              k(static_cast<std::size_t>(batch * nk * row) * e), v(k.size());
          for (std::size_t i = 0; i < q.size() / e; ++i) put(q, i, nd(rng));
          for (std::size_t i = 0; i < k.size() / e; ++i) {
            put(k, i, nd(rng));
            put(v, i, nd(rng));
          }
          // Sequence 1 uses 290 of its 300 keys (seqused_k); key 150 of it holds a NaN.
          const std::int32_t used[2] = {300, 290};
          if (nan_key)
            put(k, static_cast<std::size_t>((1 * nk + 150) * row + d + 3),
                std::numeric_limits<float>::quiet_NaN());
          const std::int64_t pps = (nk + ps - 1) / ps, base = 70000 / ps + 3;
          const std::int64_t npages = base + 2 * batch * pps;
          std::vector<std::int32_t> table(static_cast<std::size_t>(batch * pps));
          std::vector<std::int32_t> ids(static_cast<std::size_t>(batch * pps));
          for (std::size_t i = 0; i < ids.size(); ++i)
            ids[i] = static_cast<std::int32_t>(base + 2 * static_cast<std::int64_t>(i));
          std::shuffle(ids.begin(), ids.end(), rng);
          const std::int64_t page_elems = ps * row;
          // All-ones bytes: NaN in every one of the four types.
          std::vector<unsigned char> kp(static_cast<std::size_t>(npages * page_elems) * e, 0xff),
              vp(kp.size(), 0xff);
          for (std::int64_t b = 0; b < batch; ++b)
            for (std::int64_t j = 0; j < used[b]; ++j) {
              const std::int32_t p = ids[static_cast<std::size_t>(b * pps + j / ps)];
              table[static_cast<std::size_t>(b * pps + j / ps)] = p;
              const std::size_t from = static_cast<std::size_t>((b * nk + j) * row) * e,
                                to = static_cast<std::size_t>(p * page_elems + (j % ps) * row) * e;
              std::memcpy(&kp[to], &k[from], static_cast<std::size_t>(row) * e);
              std::memcpy(&vp[to], &v[from], static_cast<std::size_t>(row) * e);
            }
          const sa_dtype ot = t == SA_FP8_E4M3 ? SA_F32 : t;
          const std::size_t eo = esize(ot), nout = static_cast<std::size_t>(batch * nq * hq * d);
          std::vector<unsigned char> out[2];
          std::vector<float> lse[2], ent[2];
          for (int x = 0; x < 2; ++x) {
            out[x].assign(nout * eo, 0);
            lse[x].assign(static_cast<std::size_t>(batch * hq * nq), 0.0f);
            ent[x] = lse[x];
            sa_attention_v2_args a{};
            a.struct_size = sizeof a;
            a.qkv_dtype = t;
            a.out_dtype = ot;
            a.batch = batch;
            a.heads_q = hq;
            a.heads_kv = hk;
            a.seqlen_q = nq;
            a.seqlen_k = nk;
            a.head_dim = a.head_dim_v = d;
            a.q = {q.data(), nq * hq * d, d, hq * d};
            a.out = out[x].data();
            a.out_stride_b = nq * hq * d;
            a.out_stride_h = d;
            a.out_stride_s = hq * d;
            a.lse = lse[x].data();
            a.entropy = ent[x].data();
            a.scale = 0.125;
            a.causal = 1;
            a.window_left = a.window_right = -1;
            a.q_descale = a.k_descale = a.v_descale = 1.0f;
            a.seqused_k = used;
            if (x == 0) {
              a.k = {k.data(), nk * row, d, row};
              a.v = {v.data(), nk * row, d, row};
            } else {
              a.k = {kp.data(), page_elems, d, row};
              a.v = {vp.data(), page_elems, d, row};
              a.block_table = table.data();
              a.block_table_stride = pps;
              a.page_size = ps;
              a.num_pages = npages;
            }
            ASSERT_EQ(sa::kernels::cpu_attention_v2(nullptr, &a), SA_OK);
          }
          EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size()), 0) << "out";
          EXPECT_EQ(std::memcmp(lse[0].data(), lse[1].data(), lse[0].size() * 4), 0) << "lse";
          EXPECT_EQ(std::memcmp(ent[0].data(), ent[1].data(), ent[0].size() * 4), 0) << "entropy";
          if (nan_key) {  // the test reaches the special rows: sequence 1's rows are NaN
            const std::size_t r =
                static_cast<std::size_t>((1 * hq + 5) * nq + nq - 1);  // kv head 1
            EXPECT_TRUE(std::isnan(lse[1][r])) << "a NaN key must make its rows NaN";
          }
        }
}

}  // namespace
