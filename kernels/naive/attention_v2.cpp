#include "kernels/naive/attention_v2.hpp"
#include "kernels/attention_v2_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "kernels/naive/elements.hpp"
#include "theory/adaptive_temperature.hpp"

namespace sa::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
sa_status fail(sa_status s, std::string what) {
  naive_last_error() = "attention_v2: " + std::move(what);
  return s;
}

using naive::load;
using naive::store;

// Where the inputs of one call are: element loaders over a call's arguments
// or over a suite-side AttentionCase (for the same-dtype baseline).
struct Shape {
  std::int64_t batch, heads_q, heads_kv, d, dv;
  const std::int32_t *cu_q, *cu_k;
  std::int64_t seqlen_q, seqlen_k;
  const std::int32_t* seqused = nullptr;  // seqused_k, or NULL
  std::int64_t len_q(std::int64_t b) const { return cu_q ? cu_q[b + 1] - cu_q[b] : seqlen_q; }
  // Keys in sequence b's buffer (N_b of kernel.h).
  std::int64_t buffer_k(std::int64_t b) const { return cu_k ? cu_k[b + 1] - cu_k[b] : seqlen_k; }
  // Keys of sequence b: the used ones.
  std::int64_t len_k(std::int64_t b) const { return seqused ? seqused[b] : buffer_k(b); }
  std::int64_t row_q(std::int64_t b, std::int64_t i) const {
    return cu_q ? cu_q[b] + i : b * seqlen_q + i;
  }
  std::int64_t row_k(std::int64_t b, std::int64_t j) const {
    return cu_k ? cu_k[b] + j : b * seqlen_k + j;
  }
};

struct Features {
  double scale, softcap;
  bool causal, top_left, adaptive;
  std::int64_t window_left, window_right;
  const float *alibi, *sinks;
  const std::uint8_t* key_padding;  // indexed by packed key row
  float v_descale;
  // Masks beyond causal and window (kernel.h): by their strides, per
  // (sequence, query head, query, key) of the sequence's own indices.
  sa_mask_tensor attn_mask{}, attn_bias{}, block_mask{}, tree_mask{};
  std::int64_t block_q = 1, block_k = 1;
};

template <class E>
E mask_elem(const sa_mask_tensor& m, std::int64_t b, std::int64_t h, std::int64_t i,
            std::int64_t j) {
  return static_cast<const E*>(
      m.data)[b * m.stride_b + h * m.stride_h + i * m.stride_q + j * m.stride_k];
}

// One query row of one head. q(c), k(j, c), v(j, c) load floats; `rnd`
// rounds an intermediate (identity for the kernel, the output type's rounding
// for the same-dtype baseline). Writes out[c] (dv floats) and the scalars.
template <class Q, class K, class V, class R>
void attend_row(const Shape& sh, const Features& f, std::int64_t b, std::int64_t h, std::int64_t i,
                Q q, K k, V v, R rnd, std::vector<float>& s, std::vector<float>& w, float* out,
                float* lse, float* H, float* beta) {
  const std::int64_t Lq = sh.len_q(b), Lk = sh.len_k(b);
  const std::int64_t off = f.top_left ? 0 : Lk - Lq;
  const std::int64_t diag = i + off;
  const std::int64_t right = f.causal ? 0 : f.window_right;
  const float scale = static_cast<float>(f.scale);
  const float cap = static_cast<float>(f.softcap);
  bool nan = false;
  float m = -kInf;
  for (std::int64_t j = 0; j < Lk; ++j) {
    bool vis = true;
    if (f.key_padding && f.key_padding[sh.row_k(b, j)] == 0) vis = false;
    if (right >= 0 && j > diag + right) vis = false;
    if (f.window_left >= 0 && j < diag - f.window_left) vis = false;
    if (f.attn_mask.data && mask_elem<std::uint8_t>(f.attn_mask, b, h, i, j) == 0) vis = false;
    if (f.block_mask.data &&
        mask_elem<std::uint8_t>(f.block_mask, b, h, i / f.block_q, j / f.block_k) == 0)
      vis = false;
    if (f.tree_mask.data && j >= Lk - Lq &&
        mask_elem<std::uint8_t>(f.tree_mask, b, h, i, j - (Lk - Lq)) == 0)
      vis = false;
    if (!vis) {
      s[j] = -kInf;
      continue;
    }
    float dot = 0.0f;
    for (std::int64_t c = 0; c < sh.d; ++c) dot += q(c) * k(j, c);
    float x = dot * scale;
    if (cap > 0.0f) x = cap * std::tanh(x / cap);
    if (f.alibi) x -= f.alibi[h] * static_cast<float>(std::llabs(diag - j));
    if (f.attn_bias.data) x += mask_elem<float>(f.attn_bias, b, h, i, j);
    x = rnd(x);
    if (std::isnan(x)) nan = true;
    s[j] = x;
    if (x > m) m = x;
  }
  const float sink = f.sinks ? f.sinks[h] : -kInf;
  if (f.sinks && std::isnan(sink)) nan = true;
  if (nan) {
    for (std::int64_t c = 0; c < sh.dv; ++c) out[c] = kNaN;
    *lse = *H = *beta = kNaN;
    return;
  }
  if (sink > m) m = sink;
  if (m == -kInf) {  // every key masked, no sink
    for (std::int64_t c = 0; c < sh.dv; ++c) out[c] = 0.0f;
    *lse = -kInf;
    *H = 0.0f;
    *beta = 1.0f;
    return;
  }
  auto weights = [&](float bt, float* L, float* ent) {
    // +inf scores share the weight equally (kernel.h's row semantics).
    if (m == kInf) {
      float cnt = 0;
      for (std::int64_t j = 0; j < Lk; ++j) cnt += (w[j] = s[j] == kInf ? 1.0f : 0.0f);
      if (sink == kInf) cnt += 1.0f;
      for (std::int64_t j = 0; j < Lk; ++j) w[j] /= cnt;
      *L = kInf;
      *ent = std::log(cnt);
      return;
    }
    const float mb = bt * m;
    float S = 0.0f, T = 0.0f;
    for (std::int64_t j = 0; j < Lk; ++j) {
      if (s[j] == -kInf) {
        w[j] = 0.0f;
        continue;
      }
      const float z = bt * s[j] - mb;
      w[j] = std::exp(z);
      S += w[j];
      T += w[j] * z;
    }
    if (sink != -kInf) {
      const float z = bt * sink - mb;
      const float e = std::exp(z);
      S += e;
      T += e * z;
    }
    for (std::int64_t j = 0; j < Lk; ++j) w[j] = rnd(w[j] / S);
    *L = mb + std::log(S);
    *ent = std::log(S) - T / S;
  };
  float L, ent, bt = 1.0f;
  weights(1.0f, &L, &ent);
  if (f.adaptive) {
    bt = theory::adaptive_beta(ent);
    float ent2;
    weights(bt, &L, &ent2);
  }
  for (std::int64_t c = 0; c < sh.dv; ++c) {
    float acc = 0.0f;
    for (std::int64_t j = 0; j < Lk; ++j)
      if (s[j] != -kInf) acc += w[j] * v(j, c);  // masked values are never read
    out[c] = rnd(acc * f.v_descale);
  }
  *lse = L;
  *H = ent;
  *beta = bt;
}

bool dtype_ok(sa_dtype t, bool fp8_ok) {
  switch (t) {
    case SA_F32:
    case SA_BF16:
    case SA_F16:
      return true;
    case SA_FP8_E4M3:
    case SA_FP8_E5M2:
    case SA_FP4_E2M1:
    case SA_INT8:
      return fp8_ok;
    default:
      return false;
  }
}

}  // namespace

sa_status naive_attention_v2(void*, const sa_attention_v2_args* a) {
  if (!a) return fail(SA_INVALID_ARGUMENT, "args is NULL");
  sa_attention_v2_args whole;  // an earlier interface-2 caller's, completed
  const std::uint32_t size = a->struct_size;
  a = complete_v2_args(a, whole);
  if (!a)
    return fail(SA_INVALID_ARGUMENT, "struct_size " + std::to_string(size) +
                                         " is smaller than interface 2's sa_attention_v2_args");
  if (!dtype_ok(a->qkv_dtype, true) || !dtype_ok(a->out_dtype, false))
    return fail(SA_UNSUPPORTED,
                "qkv_dtype must be F32, BF16, F16, FP8, FP4_E2M1 or INT8, out_dtype F32, BF16 or "
                "F16");
  // Quantised inputs (fp8, fp4, int8): descales, a separate output type.
  const bool fp8 = a->qkv_dtype == SA_FP8_E4M3 || a->qkv_dtype == SA_FP8_E5M2 ||
                   a->qkv_dtype == SA_FP4_E2M1 || a->qkv_dtype == SA_INT8;
  if (!fp8 && a->out_dtype != a->qkv_dtype)
    return fail(SA_UNSUPPORTED, "out_dtype must equal qkv_dtype for unquantised inputs");
  if (const std::string why = quant_args_error(*a); !why.empty())
    return fail(SA_INVALID_ARGUMENT, why);
  if (a->batch < 0 || a->heads_q < 1 || a->heads_kv < 1 || a->heads_q % a->heads_kv != 0 ||
      a->head_dim < 1 || a->head_dim_v < 1)
    return fail(SA_INVALID_ARGUMENT,
                "need batch >= 0, heads_q a multiple of heads_kv >= 1, "
                "head dims >= 1");
  if ((a->cu_seqlens_q == nullptr) != (a->cu_seqlens_k == nullptr))
    return fail(SA_INVALID_ARGUMENT, "cu_seqlens_q and cu_seqlens_k must both be set or NULL");
  if (!a->q.data || !a->k.data || !a->v.data || !a->out)
    return fail(SA_INVALID_ARGUMENT, "q, k, v and out must not be NULL");
  std::int32_t align;  // read as an integer: a value outside the enum is not UB here
  std::memcpy(&align, &a->alignment, sizeof align);
  if (a->window_left < -1 || a->window_right < -1 || !(a->softcap >= 0.0) ||
      !std::isfinite(a->softcap) || !std::isfinite(a->scale) ||
      (align != SA_ALIGN_BOTTOM_RIGHT && align != SA_ALIGN_TOP_LEFT))
    return fail(SA_INVALID_ARGUMENT,
                "window bounds >= -1, softcap >= 0, finite scale, "
                "alignment 0 or 1 expected");
  Shape sh{a->batch,        a->heads_q,      a->heads_kv, a->head_dim, a->head_dim_v,
           a->cu_seqlens_q, a->cu_seqlens_k, a->seqlen_q, a->seqlen_k};
  const bool varlen = a->cu_seqlens_q != nullptr;
  // Used key lengths and paged KV (read only where struct_size reaches them:
  // checked above, the whole struct is this kernel's).
  sh.seqused = a->seqused_k;
  const bool paged = a->block_table != nullptr;
  if (paged && (a->page_size < 1 || a->num_pages < 1 || a->block_table_stride < 1))
    return fail(SA_INVALID_ARGUMENT,
                "paged KV needs page_size, num_pages and block_table_stride >= 1");
  for (std::int64_t b = 0; b < a->batch; ++b) {
    const std::int64_t n = sh.buffer_k(b);
    if (sh.seqused && (sh.seqused[b] < 0 || sh.seqused[b] > n))
      return fail(SA_INVALID_ARGUMENT,
                  "seqused_k[" + std::to_string(b) + "] = " + std::to_string(sh.seqused[b]) +
                      " is outside 0.." + std::to_string(n) + " (the sequence's key buffer)");
    if (!paged) continue;
    const std::int64_t pages = (sh.len_k(b) + a->page_size - 1) / a->page_size;
    if ((n + a->page_size - 1) / a->page_size > a->block_table_stride)
      return fail(SA_INVALID_ARGUMENT, "block_table_stride " +
                                           std::to_string(a->block_table_stride) +
                                           " is too small for sequence " + std::to_string(b));
    for (std::int64_t e = 0; e < pages; ++e) {
      const std::int32_t p = a->block_table[b * a->block_table_stride + e];
      if (p < 0 || p >= a->num_pages)
        return fail(SA_INVALID_ARGUMENT, "block_table[" + std::to_string(b) + "][" +
                                             std::to_string(e) + "] = " + std::to_string(p) +
                                             " is outside 0.." + std::to_string(a->num_pages - 1));
    }
  }
  // Block scales: one per scale_block head-dim elements, of scale_dtype
  // (E8M0 bytes 2^(x - 127), 255 NaN; e4m3 bytes; float32), checked above.
  const std::int64_t sb = a->scale_block;
  const ScaleType sty = a->scale_dtype == SA_FP8_E4M3 ? ScaleType::e4m3
                        : a->scale_dtype == SA_F32    ? ScaleType::f32
                                                      : ScaleType::e8m0;
  auto scale_of = [&](const sa_tensor& s, std::int64_t row_off, std::int64_t c) {
    return sb > 0 ? load_scale(sty, s.data, row_off + c / sb) : 1.0f;
  };
  const float qk = fp8 ? a->q_descale * a->k_descale : 1.0f;
  Features f{a->scale * qk,    a->softcap,          a->causal != 0,           false,
             a->adaptive != 0, a->window_left,      a->window_right,          a->alibi_slopes,
             a->sinks,         a->key_padding_mask, fp8 ? a->v_descale : 1.0f};
  f.top_left = align == SA_ALIGN_TOP_LEFT;
  f.attn_mask = a->attn_mask;
  f.attn_bias = a->attn_bias;
  f.block_mask = a->block_mask;
  f.tree_mask = a->tree_mask;
  if (f.block_mask.data) {
    if (a->block_q < 1 || a->block_k < 1)
      return fail(SA_INVALID_ARGUMENT, "block_mask needs block_q and block_k >= 1");
    f.block_q = a->block_q;
    f.block_k = a->block_k;
  }
  for (const sa_mask_tensor* m : {&f.attn_mask, &f.attn_bias, &f.block_mask, &f.tree_mask})
    if (m->data && (m->stride_b < 0 || m->stride_h < 0 || m->stride_q < 0 || m->stride_k < 0))
      return fail(SA_INVALID_ARGUMENT, "mask and bias strides must be >= 0");
  const std::int64_t total_q = varlen ? a->cu_seqlens_q[a->batch] : a->batch * a->seqlen_q;
  std::int64_t max_k = 0;
  for (std::int64_t b = 0; b < a->batch; ++b) max_k = std::max(max_k, sh.len_k(b));
  std::vector<float> s(static_cast<std::size_t>(max_k)), w(s.size()),
      o(static_cast<std::size_t>(a->head_dim_v));
  auto ident = [](float x) { return x; };
  const sa_dtype t = a->qkv_dtype;
  for (std::int64_t b = 0; b < a->batch; ++b) {
    const std::int64_t qb = varlen ? 0 : b * a->q.stride_b, kb = varlen ? 0 : b * a->k.stride_b,
                       vb = varlen ? 0 : b * a->v.stride_b, ob = varlen ? 0 : b * a->out_stride_b;
    const std::int64_t q0 = varlen ? a->cu_seqlens_q[b] : 0, k0 = varlen ? a->cu_seqlens_k[b] : 0;
    // Offset of key j's row (head 0) in a k or v tensor: contiguous, or slot
    // j % page_size of the page the block table names (64-bit arithmetic).
    const std::int32_t* pages = paged ? a->block_table + b * a->block_table_stride : nullptr;
    auto key_row = [&](const sa_tensor& x, std::int64_t base, std::int64_t j) -> std::int64_t {
      if (!paged) return base + (k0 + j) * x.stride_s;
      return static_cast<std::int64_t>(pages[j / a->page_size]) * x.stride_b +
             (j % a->page_size) * x.stride_s;
    };
    for (std::int64_t h = 0; h < a->heads_q; ++h) {
      const std::int64_t hk = h / (a->heads_q / a->heads_kv);
      // Descales per (sequence, kv head) (FlashAttention 3's), on each element.
      auto per_head = [&](const float* d) { return fp8 && d ? d[b * a->heads_kv + hk] : 1.0f; };
      const float qd = per_head(a->q_descale_bh), kd = per_head(a->k_descale_bh),
                  vd = per_head(a->v_descale_bh);
      for (std::int64_t i = 0; i < sh.len_q(b); ++i) {
        const std::int64_t qoff = qb + h * a->q.stride_h + (q0 + i) * a->q.stride_s;
        // Scale rows: the elements' addressing with the scale tensors' strides.
        const sa_tensor &qs = a->q_scale, &ks = a->k_scale, &vs = a->v_scale;
        const std::int64_t qsoff =
            sb > 0 ? (varlen ? 0 : b * qs.stride_b) + h * qs.stride_h + (q0 + i) * qs.stride_s : 0;
        auto q = [&](std::int64_t c) {
          return load(t, a->q.data, qoff + c) * scale_of(qs, qsoff, c) * qd;
        };
        auto k = [&](std::int64_t j, std::int64_t c) {
          const float x = load(t, a->k.data, key_row(a->k, kb, j) + hk * a->k.stride_h + c) * kd;
          return sb > 0
                     ? x * scale_of(ks,
                                    key_row(ks, varlen ? 0 : b * ks.stride_b, j) + hk * ks.stride_h,
                                    c)
                     : x;
        };
        auto v = [&](std::int64_t j, std::int64_t c) {
          const float x = load(t, a->v.data, key_row(a->v, vb, j) + hk * a->v.stride_h + c) * vd;
          return sb > 0
                     ? x * scale_of(vs,
                                    key_row(vs, varlen ? 0 : b * vs.stride_b, j) + hk * vs.stride_h,
                                    c)
                     : x;
        };
        float L, H, bt;
        attend_row(sh, f, b, h, i, q, k, v, ident, s, w, o.data(), &L, &H, &bt);
        const std::int64_t ooff = ob + h * a->out_stride_h + (q0 + i) * a->out_stride_s;
        for (std::int64_t c = 0; c < a->head_dim_v; ++c)
          store(a->out_dtype, a->out, ooff + c, o[c]);
        // Per-query outputs: [batch][heads_q][seqlen_q], or [heads_q][total_q] (varlen).
        const std::int64_t r =
            varlen ? h * total_q + q0 + i : (b * a->heads_q + h) * a->seqlen_q + i;
        if (a->lse) a->lse[r] = L;
        if (a->entropy) a->entropy[r] = H;
        if (a->beta) a->beta[r] = bt;
      }
    }
  }
  return SA_OK;
}

namespace same_dtype {
std::vector<float> attention_v2(const AttentionCase& c) {
  c.validate();
  Shape sh{c.batch,
           c.heads_q,
           c.heads_kv,
           c.d,
           c.dv,
           c.varlen() ? c.cu_q.data() : nullptr,
           c.varlen() ? c.cu_k.data() : nullptr,
           c.seqlen_q,
           c.seqlen_k};
  Features f{c.scale * c.q_descale * c.k_descale,
             c.softcap,
             c.causal,
             c.top_left,
             false,
             c.window_left,
             c.window_right,
             c.alibi_slopes.empty() ? nullptr : c.alibi_slopes.data(),
             c.sinks.empty() ? nullptr : c.sinks.data(),
             c.key_padding_mask.empty() ? nullptr : c.key_padding_mask.data(),
             c.v_descale};
  // The case's mask tensors as the call would pass them (row-major, stride 0
  // where broadcast).
  std::vector<std::uint8_t> mbytes[3];
  const MaskTensor* ms[3] = {&c.attn_mask, &c.block_mask, &c.tree_mask};
  sa_mask_tensor* mt[3] = {&f.attn_mask, &f.block_mask, &f.tree_mask};
  auto strides = [](const MaskTensor& m, const void* data) {
    return sa_mask_tensor{data, m.nb > 1 ? m.nh * m.nq * m.nk : 0, m.nh > 1 ? m.nq * m.nk : 0,
                          m.nq > 1 ? m.nk : 0, m.nk > 1 ? 1 : 0};
  };
  for (int x = 0; x < 3; ++x)
    if (ms[x]->used()) {
      for (float y : ms[x]->v) mbytes[x].push_back(y != 0 ? 1 : 0);
      *mt[x] = strides(*ms[x], mbytes[x].data());
    }
  if (c.attn_bias.used()) f.attn_bias = strides(c.attn_bias, c.attn_bias.v.data());
  if (c.block_mask.used()) f.block_q = c.block_q, f.block_k = c.block_k;
  const AttnType ot = c.out_type;
  auto rnd = [ot](float x) {
    return ot == AttnType::bfloat16  ? round_to_bf16(x)
           : ot == AttnType::float16 ? round_to_f16(x)
                                     : x;
  };
  std::vector<float> out(static_cast<std::size_t>(c.total_q() * c.heads_q * c.dv));
  std::int64_t max_k = 0;
  for (std::int64_t b = 0; b < c.batch; ++b) max_k = std::max(max_k, c.len_k(b));
  std::vector<float> s(static_cast<std::size_t>(max_k)), w(s.size());
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < c.heads_q; ++h) {
      const std::int64_t hk = c.kv_head(h);
      for (std::int64_t i = 0; i < c.len_q(b); ++i) {
        const std::int64_t row = c.row_q(b, i);
        auto q = [&](std::int64_t x) { return c.q[(row * c.heads_q + h) * c.d + x]; };
        auto k = [&](std::int64_t j, std::int64_t x) {
          return c.k[(c.row_k(b, j) * c.heads_kv + hk) * c.d + x];
        };
        auto v = [&](std::int64_t j, std::int64_t x) {
          return c.v[(c.row_k(b, j) * c.heads_kv + hk) * c.dv + x];
        };
        float L, H, bt;
        attend_row(sh, f, b, h, i, q, k, v, rnd, s, w, out.data() + (row * c.heads_q + h) * c.dv,
                   &L, &H, &bt);
      }
    }
  return out;
}
}  // namespace same_dtype

const sa_capabilities* naive_capabilities() {
  static const sa_capabilities caps = [] {
    sa_capabilities c{};
    c.struct_size = sizeof(sa_capabilities);
    // 0 entries mean the kernel-wide dtypes; attention_v2 also takes fp8.
    c.op_dtypes[5] = SA_DTYPE_F32 | SA_DTYPE_BF16;  // the single-head (v1) attention
    c.op_dtypes[8] = SA_DTYPE_F32 | SA_DTYPE_BF16 | SA_DTYPE_F16 | SA_DTYPE_FP8_E4M3 |
                     SA_DTYPE_FP8_E5M2 | SA_DTYPE_FP4_E2M1 | SA_DTYPE_INT8;
    // (for the quantised inputs: fp8, fp4, int8)
    c.op_out_dtypes[8] = SA_DTYPE_F32 | SA_DTYPE_BF16 | SA_DTYPE_F16;
    c.attention_features = SA_ATTN_BATCHED | SA_ATTN_GQA | SA_ATTN_VARLEN | SA_ATTN_STRIDED |
                           SA_ATTN_CAUSAL | SA_ATTN_WINDOW | SA_ATTN_SOFTCAP | SA_ATTN_ALIBI |
                           SA_ATTN_SINKS | SA_ATTN_KEY_PADDING | SA_ATTN_LSE | SA_ATTN_ENTROPY |
                           SA_ATTN_ADAPTIVE | SA_ATTN_UNEQUAL_HEAD_DIMS | SA_ATTN_PAGED_KV |
                           SA_ATTN_SEQUSED_K | SA_ATTN_BOOL_MASK | SA_ATTN_BIAS |
                           SA_ATTN_BLOCK_MASK | SA_ATTN_TREE_MASK | SA_ATTN_BLOCK_SCALED |
                           SA_ATTN_SCALE_E4M3 | SA_ATTN_SCALE_F32 | SA_ATTN_DESCALE_BH;
    c.flags = SA_CAP_DETERMINISTIC | SA_CAP_BATCH_INVARIANT;
    return c;
  }();
  return &caps;
}

}  // namespace sa::kernels
