// Batched-attention mutants (interface v2): the naive kernel's attention_v2
// with one bug a real attention kernel has shipped, introduced by changing
// what the naive kernel is handed (so each bug is exactly the one named).
#include "attention_v2_mutants.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "core/fp8.hpp"
#include "theory/adaptive_temperature.hpp"
#include "kernels/naive/attention_v2.hpp"
#include "kernels/naive/elements.hpp"

namespace sa::mutants {
namespace {

enum class Bug {
  window_edge,
  gqa_mapping,
  varlen_offset,
  past_128_tile,
  // The bugs below change the arithmetic, not the inputs: a scalar attention
  // (one query row at a time, float32, kernel.h's order of steps) with the bug.
  softcap_after_mask,      // masked scores -inf pass through the softcap: -c, not -inf
  sink_not_in_max,         // the running max leaves the sink out (exp(sink - m) overflows)
  fp8_p_saturating,        // fp8 inputs: P scaled by 2^9 (e4m3) / 2^16 (e5m2), saturated
  fp8_p_overflowing,       // the same scaling, converted without saturation
  window_right_exclusive,  // the window's right edge exclusive (causal itself correct)
  // The bug classes of the coverage issue (each caught on every seed 1-20 by
  // the default run: coverage_mutants_test.cpp).
  key_padding_dense_varlen,  // varlen: the key padding mask read at b * seqlen_k, as if dense
  always_top_left,           // causal, window and ALiBi aligned top-left whatever the call says
  alibi_slope_per_kv_head,   // the ALiBi slope of query head h read at h / group
  fp8_nan_as_max,            // fp8: a NaN code decoded as the largest finite value
  nan_score_as_masked,       // a NaN score treated like a masked one (skipped)
  split_kv_unscaled,         // split-KV: parts merged without rescaling by exp(m_p - m)
  adaptive_entropy_in_bits,  // adaptive: beta evaluated at the entropy in bits, not nats
  sink_in_every_split,       // split-KV: every part counts the sink (kernel.h: exactly once)
  // Paged KV and seqused_k (issue 33; the bugs of the public threads): the
  // naive kernel handed keys gathered from the pages with the bug.
  block_id_16bit,      // physical page ids truncated to 16 bits (ids above 65,535 wrap)
  page_slot_past_128,  // the slot in a page taken modulo 128 (right up to 128-token pages)
  page_size_pow2,      // page and slot by shift and mask, as if page_size were a power of two
  ignores_seqused_k,   // seqused_k ignored: every key of the buffer read
  page_offset_32bit,   // page_id * stride_b computed in int32 (wraps past 2^31 elements)
  // Chunked prefill (issue 33 item 2): a chunk's queries against a cache
  // holding keys past seqused_k.
  chunk_diagonal_from_buffer,  // the causal diagonal placed by the buffer's key count N_b,
                               // not seqused_k (keys past it still unread)
  chunk_queries_see_all,       // with seqused_k, causal dropped: every query of a chunk
                               // sees every used key (a decode kernel on a multi-query chunk)
  // Block scales (MXFP8, issue 33 item 4): the naive kernel handed one scale
  // byte per element, derived from the call's scales with the bug.
  mx_scale_per_16,     // scale index c / 16 whatever scale_block says (NVFP4's block for MX's)
  mx_scale_bias_128,   // E8M0 read as 2^(x - 128): every scale halved
  mx_k_scale_ignored,  // K's block scales dropped (its elements read as if scaled by 1)
  // Masks beyond causal and window (issue 33; the bugs of the public
  // threads): the naive kernel handed one dense [batch][heads][seqlen_q]
  // [seqlen_k] mask (and bias) built from the call's with the bug.
  bool_mask_polarity,   // attn_mask polarity inverted (nonzero taken for "masked out")
  bool_mask_row_major,  // attn_mask strides ignored: read as row-major [q][k] (transposed
                        // where the mask is key-major)
  bias_batch_stride_0,  // attn_bias's batch stride ignored (sequence 0's bias everywhere)
  bias_per_kv_head,     // attn_bias of query head h read at h / group (the kv head)
  block_last_partial,   // block mask: the last partial key block dropped (floor(Lk / bk))
  block_square,         // block mask: key blocks of block_q keys (non-square taken square)
  tree_on_prefix,       // tree mask applied to the first Lq keys (the prefix), not the last
  tree_transposed,      // tree mask read [t][i] (descendants for ancestors)
  // MLA (issue 33): V's strides assumed those of a contiguous BSHD tensor of
  // head dim head_dim_v (wrong where V is a prefix view of K, or padded).
  v_strides_from_dv,
  // fp4 e2m1 and int8 inputs with e4m3 or float32 block scales (issue 33
  // item 4; the bugs of the public threads): the naive kernel handed one
  // float32 scale per element (and nibble-swapped fp4 bytes) with the bug.
  fp4_high_nibble_first,     // NVFP4/MXFP4: the element at an even offset read from the high nibble
  nvfp4_scale_per_32,        // e4m3 scales: the scale of element c read at c / 32 (MX's block)
  nvfp4_scale_as_e8m0,       // e4m3 scale bytes decoded as E8M0 (2^(x - 127))
  fp4_tensor_scale_dropped,  // fp4: the descales (NVFP4's float32 tensor scale) ignored
  int8_scale_per_row,        // int8 float32 scales read per token row (head 0's for every head)
  int8_read_unsigned,        // int8 elements read as uint8 (-1 becomes 255)
  // Descales per (sequence, kv head) (FlashAttention 3's (batch, nheads_k)
  // tensors, issue 33 item 4): the naive kernel handed descale arrays
  // rebuilt with the bug.
  descale_bh_scalar,      // each descale tensor read as one scalar (its element 0)
  descale_bh_transposed,  // read as (nheads_k, batch): element [g * batch + b]
  descale_bh_v_dropped,   // v's descales never applied to the output
};

constexpr float kInf = std::numeric_limits<float>::infinity();

// One (sequence, head, query) row of the scalar attention with `bug`: the
// naive kernel's algorithm (kernel.h's semantics) except for the bug.
struct RowIn {
  std::int64_t Lk, diag, d, dv;
  const float* q;           // d values
  std::vector<float>* k;    // Lk x d
  std::vector<float>* v;    // Lk x dv
  const std::uint8_t* pad;  // Lk or NULL
  float scale, cap, slope, sink, vdesc;
  bool alibi, has_sink, causal;
  std::int64_t wl, wr;
  sa_dtype qkv;
  bool adaptive;
  std::int64_t splits;
};

void buggy_row(Bug bug, const RowIn& r, float* out, float* lse, float* H, float* beta_out) {
  *beta_out = 1.0f;
  std::vector<float> s(static_cast<std::size_t>(r.Lk));
  const std::int64_t right = r.causal ? 0 : r.wr;
  float m = -kInf;
  bool nan = r.has_sink && std::isnan(r.sink);
  for (std::int64_t j = 0; j < r.Lk; ++j) {
    bool vis = !(r.pad && r.pad[j] == 0);
    if (right >= 0 && (bug == Bug::window_right_exclusive && !r.causal ? j >= r.diag + right
                                                                       : j > r.diag + right))
      vis = false;
    if (r.wl >= 0 && j < r.diag - r.wl) vis = false;
    float x = -kInf;
    if (vis || bug == Bug::softcap_after_mask) {
      float dot = 0.0f;
      for (std::int64_t c = 0; c < r.d; ++c) dot += r.q[c] * (*r.k)[j * r.d + c];
      x = vis ? dot * r.scale : -kInf;                     // the mask first (the bug's order) ...
      if (r.cap > 0.0f) x = r.cap * std::tanh(x / r.cap);  // ... then -inf becomes -c
      if (r.alibi) x -= r.slope * static_cast<float>(std::llabs(r.diag - j));
    }
    if (std::isnan(x)) {
      if (bug == Bug::nan_score_as_masked)
        x = -kInf;
      else
        nan = true;
    }
    s[j] = x;
    m = std::max(m, x);
  }
  const float sink = r.has_sink ? r.sink : -kInf;
  if (nan) {
    std::fill(out, out + r.dv, std::numeric_limits<float>::quiet_NaN());
    *lse = *H = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  if (bug == Bug::sink_not_in_max) {
    if (m == -kInf) m = 0.0f;  // FlashAttention's guard for a row with nothing visible
  } else {
    m = std::max(m, sink);
  }
  if (m == -kInf) {
    std::fill(out, out + r.dv, 0.0f);
    *lse = -kInf;
    *H = 0.0f;
    return;
  }
  float S = 0.0f, T = 0.0f;
  std::vector<float> e(s.size());
  auto weights = [&](float beta) {
    S = T = 0.0f;
    for (std::size_t j = 0; j < s.size(); ++j) {
      e[j] = 0.0f;
      if (s[j] == -kInf) continue;
      e[j] = std::exp(beta * (s[j] - m));
      S += e[j];
      T += e[j] * beta * (s[j] - m);
    }
    if (sink != -kInf) {
      const float es = std::exp(beta * (sink - m));
      S += es;
      T += es * beta * (sink - m);
    }
  };
  weights(1.0f);
  const float H1 = std::log(S) - T / S;
  float beta = 1.0f;
  if (r.adaptive) {
    // kernel.h: beta from the entropy before the correction, in nats.
    const float Hb = bug == Bug::adaptive_entropy_in_bits ? H1 * 1.44269504f : H1;
    beta = static_cast<float>(theory::adaptive_beta(static_cast<double>(Hb)));
    weights(beta);
    *beta_out = beta;
  }
  float M = m;  // the max the merged weights e_j are relative to
  if (bug == Bug::split_kv_unscaled && r.splits > 1 && !r.adaptive) {
    // Split-KV: each part's weights relative to its own max, summed as if
    // every part had the row's max (the missing exp(m_p - m) factor).
    const std::int64_t parts = r.splits, chunk = (r.Lk + parts - 1) / parts;
    S = 0.0f;
    for (std::int64_t p0 = 0; p0 < r.Lk; p0 += chunk) {
      float mp = -kInf;
      for (std::int64_t j = p0; j < std::min(r.Lk, p0 + chunk); ++j) mp = std::max(mp, s[j]);
      for (std::int64_t j = p0; j < std::min(r.Lk, p0 + chunk); ++j)
        if (s[j] != -kInf) S += (e[j] = std::exp(s[j] - mp));
    }
    if (sink != -kInf) S += std::exp(sink - m);
    M = m;
  }
  if (bug == Bug::sink_in_every_split && r.splits > 1 && !r.adaptive && sink != -kInf) {
    // Each part's partial sum carries the sink, and the merge adds them up:
    // the sink is counted once per non-empty part instead of once.
    const std::int64_t chunk = (r.Lk + r.splits - 1) / r.splits;
    const std::int64_t parts = chunk > 0 ? (r.Lk + chunk - 1) / chunk : 1;
    S += static_cast<float>(parts - 1) * std::exp(sink - m);
  }
  const bool fp8 = r.qkv == SA_FP8_E4M3 || r.qkv == SA_FP8_E5M2;
  if (fp8 && (bug == Bug::fp8_p_saturating || bug == Bug::fp8_p_overflowing)) {
    // P (in [0, 1]) quantised to the input format for P V, scaled first by the
    // power of two above the format's largest finite value.
    const Fp8Format f = r.qkv == SA_FP8_E4M3 ? Fp8Format::e4m3 : Fp8Format::e5m2;
    const float up = f == Fp8Format::e4m3 ? 0x1p9f : 0x1p16f;
    for (float& x : e)
      x = fp8_to_float(fp8_from_float(x * up, f, bug == Bug::fp8_p_saturating), f) / up;
  }
  for (std::int64_t c = 0; c < r.dv; ++c) {
    float acc = 0.0f;
    for (std::size_t j = 0; j < s.size(); ++j)
      if (s[j] != -kInf) acc += e[j] * (*r.v)[j * r.dv + c];
    out[c] = acc / S * r.vdesc;
  }
  *lse = beta * M + std::log(S);
  *H = H1;
}

// The scalar attention with `bug` over a whole call (adaptive: unsupported).
sa_status buggy_call(Bug bug, const sa_attention_v2_args* a) {
  if (a->adaptive && bug != Bug::adaptive_entropy_in_bits) return SA_UNSUPPORTED;
  const sa_dtype t = a->qkv_dtype;
  const bool fp8 = t == SA_FP8_E4M3 || t == SA_FP8_E5M2;
  auto load = [&](const void* data, std::int64_t at) {
    float x = kernels::naive::load(t, data, at);
    if (bug == Bug::fp8_nan_as_max && fp8 && std::isnan(x))
      x = std::copysign(t == SA_FP8_E4M3 ? 448.0f : 57344.0f, x);
    return x;
  };
  const bool varlen = a->cu_seqlens_q != nullptr;
  const std::int64_t total_q = varlen ? a->cu_seqlens_q[a->batch] : a->batch * a->seqlen_q;
  const std::int64_t group = a->heads_q / a->heads_kv;
  std::vector<float> q(static_cast<std::size_t>(a->head_dim)), k, v,
      o(static_cast<std::size_t>(a->head_dim_v));
  // key_padding_dense_varlen: the packed mask read as if it were
  // [batch][seqlen_k]; past the packed bytes the buffer holds 1 (keep), so
  // the bug reads wrong bytes without reading outside memory.
  std::vector<std::uint8_t> dense_mask;
  if (bug == Bug::key_padding_dense_varlen && a->key_padding_mask && varlen) {
    const std::int64_t tk = a->cu_seqlens_k[a->batch];
    dense_mask.assign(static_cast<std::size_t>(std::max(tk, a->batch * a->seqlen_k)), 1);
    std::copy(a->key_padding_mask, a->key_padding_mask + tk, dense_mask.begin());
  }
  for (std::int64_t b = 0; b < a->batch; ++b) {
    const std::int64_t q0 = varlen ? a->cu_seqlens_q[b] : 0, k0 = varlen ? a->cu_seqlens_k[b] : 0;
    const std::int64_t Lq = varlen ? a->cu_seqlens_q[b + 1] - q0 : a->seqlen_q;
    const std::int64_t Lk = varlen ? a->cu_seqlens_k[b + 1] - k0 : a->seqlen_k;
    for (std::int64_t h = 0; h < a->heads_q; ++h) {
      const std::int64_t hk = h / group;
      k.resize(static_cast<std::size_t>(Lk * a->head_dim));
      v.resize(static_cast<std::size_t>(Lk * a->head_dim_v));
      for (std::int64_t j = 0; j < Lk; ++j) {
        const std::int64_t kb =
            (varlen ? 0 : b * a->k.stride_b) + hk * a->k.stride_h + (k0 + j) * a->k.stride_s;
        const std::int64_t vb =
            (varlen ? 0 : b * a->v.stride_b) + hk * a->v.stride_h + (k0 + j) * a->v.stride_s;
        for (std::int64_t c = 0; c < a->head_dim; ++c)
          k[j * a->head_dim + c] = load(a->k.data, kb + c);
        for (std::int64_t c = 0; c < a->head_dim_v; ++c)
          v[j * a->head_dim_v + c] = load(a->v.data, vb + c);
      }
      for (std::int64_t i = 0; i < Lq; ++i) {
        const std::int64_t qb =
            (varlen ? 0 : b * a->q.stride_b) + h * a->q.stride_h + (q0 + i) * a->q.stride_s;
        for (std::int64_t c = 0; c < a->head_dim; ++c) q[c] = load(a->q.data, qb + c);
        RowIn r{};
        r.Lk = Lk;
        r.diag =
            i + (a->alignment == SA_ALIGN_TOP_LEFT || bug == Bug::always_top_left ? 0 : Lk - Lq);
        r.d = a->head_dim;
        r.dv = a->head_dim_v;
        r.q = q.data();
        r.k = &k;
        r.v = &v;
        r.pad =
            a->key_padding_mask ? a->key_padding_mask + (varlen ? k0 : b * a->seqlen_k) : nullptr;
        if (a->key_padding_mask && varlen && bug == Bug::key_padding_dense_varlen)
          r.pad = dense_mask.data() + b * a->seqlen_k;
        r.scale = static_cast<float>(a->scale * (fp8 ? a->q_descale * a->k_descale : 1.0f));
        r.cap = static_cast<float>(a->softcap);
        r.alibi = a->alibi_slopes != nullptr;
        r.slope = r.alibi ? a->alibi_slopes[bug == Bug::alibi_slope_per_kv_head ? hk : h] : 0.0f;
        r.has_sink = a->sinks != nullptr;
        r.sink = r.has_sink ? a->sinks[h] : 0.0f;
        r.vdesc = fp8 ? a->v_descale : 1.0f;
        r.causal = a->causal != 0;
        r.wl = a->window_left;
        r.wr = a->window_right;
        r.qkv = t;
        r.adaptive = a->adaptive != 0;
        r.splits = a->num_splits;
        float L, H, B;
        buggy_row(bug, r, o.data(), &L, &H, &B);
        const std::int64_t ob =
            (varlen ? 0 : b * a->out_stride_b) + h * a->out_stride_h + (q0 + i) * a->out_stride_s;
        for (std::int64_t c = 0; c < a->head_dim_v; ++c)
          kernels::naive::store(a->out_dtype, a->out, ob + c, o[c]);
        const std::int64_t row =
            varlen ? h * total_q + q0 + i : (b * a->heads_q + h) * a->seqlen_q + i;
        if (a->lse) a->lse[row] = L;
        if (a->entropy) a->entropy[row] = H;
        if (a->beta) a->beta[row] = B;
      }
    }
  }
  return SA_OK;
}

std::size_t elem_size(sa_dtype t) {
  return t == SA_F32 ? 4 : (t == SA_BF16 || t == SA_F16) ? 2 : 1;
}

// Copies one tensor into a contiguous packed-BSHD buffer with `heads_out`
// heads, head h of the copy read from head map(h) of the original.
template <class Map>
std::vector<unsigned char> regather(const sa_attention_v2_args* a, const sa_tensor& t,
                                    std::int64_t rows_per_seq, std::int64_t total,
                                    std::int64_t heads_out, std::int64_t dim, Map map) {
  const std::size_t e = elem_size(a->qkv_dtype);
  const bool varlen = a->cu_seqlens_q != nullptr;
  const std::int64_t rows = varlen ? total : a->batch * rows_per_seq;
  // At least one element: an empty tensor (a call with no keys) still needs
  // a non-NULL pointer.
  std::vector<unsigned char> out(
      std::max<std::size_t>(e, static_cast<std::size_t>(rows * heads_out * dim) * e));
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t b = varlen ? 0 : r / std::max<std::int64_t>(rows_per_seq, 1);
    const std::int64_t s = varlen ? r : r % std::max<std::int64_t>(rows_per_seq, 1);
    for (std::int64_t h = 0; h < heads_out; ++h) {
      const std::int64_t off = (varlen ? 0 : b * t.stride_b) + map(h) * t.stride_h + s * t.stride_s;
      std::memcpy(&out[static_cast<std::size_t>((r * heads_out + h) * dim) * e],
                  static_cast<const unsigned char*>(t.data) + static_cast<std::size_t>(off) * e,
                  static_cast<std::size_t>(dim) * e);
    }
  }
  return out;
}

std::size_t element_size(sa_dtype t) {
  return t == SA_F32 ? 4 : (t == SA_BF16 || t == SA_F16) ? 2 : 1;
}

// The paged and seqused_k bugs: keys gathered from the page pool into
// contiguous rows with the bug in the page arithmetic (every address stays
// inside the pool: a wrong page is another page of it; except the 32-bit
// page offset, which past 2^31 elements lands 2^32 elements before its
// page), then the naive kernel on the contiguous call.
sa_status paged_call(const Bug bug, const sa_attention_v2_args* a) {
  sa_attention_v2_args m = *a;
  if (bug == Bug::ignores_seqused_k) {
    m.seqused_k = nullptr;
    return kernels::naive_attention_v2(nullptr, &m);
  }
  if (bug == Bug::chunk_queries_see_all) {
    if (a->seqused_k) m.causal = 0;
    return kernels::naive_attention_v2(nullptr, &m);
  }
  if (bug == Bug::chunk_diagonal_from_buffer) {
    // Keys past seqused_k masked instead of cut off: the call's key count,
    // and with it the bottom-right diagonal, is the buffer's N_b.
    if (!a->seqused_k) return kernels::naive_attention_v2(nullptr, a);
    const bool varlen = a->cu_seqlens_q != nullptr;
    const std::int64_t total = varlen ? a->cu_seqlens_k[a->batch] : a->batch * a->seqlen_k;
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(std::max<std::int64_t>(total, 1)), 1);
    for (std::int64_t b = 0; b < a->batch; ++b) {
      const std::int64_t k0 = varlen ? a->cu_seqlens_k[b] : b * a->seqlen_k;
      const std::int64_t n = varlen ? a->cu_seqlens_k[b + 1] - k0 : a->seqlen_k;
      for (std::int64_t j = 0; j < n; ++j)
        mask[static_cast<std::size_t>(k0 + j)] =
            j < a->seqused_k[b] && (!a->key_padding_mask || a->key_padding_mask[k0 + j]);
    }
    m.key_padding_mask = mask.data();
    m.seqused_k = nullptr;
    return kernels::naive_attention_v2(nullptr, &m);
  }
  if (a->block_table == nullptr || a->page_size < 1 || a->block_table_stride < 1)
    return kernels::naive_attention_v2(nullptr, a);
  const bool varlen = a->cu_seqlens_q != nullptr;
  const std::size_t e = element_size(a->qkv_dtype);
  const std::int64_t ps = a->page_size;
  std::int64_t ps2 = 1, shift = 0;  // the largest power of two <= page_size
  while (ps2 * 2 <= ps) ps2 *= 2, ++shift;
  const std::int64_t rows = varlen ? a->cu_seqlens_k[a->batch] : a->batch * a->seqlen_k;
  std::vector<unsigned char> k(
      std::max<std::size_t>(e, static_cast<std::size_t>(rows * a->heads_kv * a->head_dim) * e)),
      v(std::max<std::size_t>(e, static_cast<std::size_t>(rows * a->heads_kv * a->head_dim_v) * e));
  for (std::int64_t b = 0; b < a->batch; ++b) {
    const std::int64_t k0 = varlen ? a->cu_seqlens_k[b] : b * a->seqlen_k;
    const std::int64_t n = varlen ? a->cu_seqlens_k[b + 1] - k0 : a->seqlen_k;
    const std::int64_t used = a->seqused_k ? a->seqused_k[b] : n;
    const std::int32_t* row = a->block_table + b * a->block_table_stride;
    for (std::int64_t j = 0; j < used; ++j) {
      std::int64_t entry = j / ps, slot = j % ps;
      if (bug == Bug::page_size_pow2)
        entry = std::min(j >> shift, a->block_table_stride - 1), slot = j & (ps2 - 1);
      if (bug == Bug::page_slot_past_128) slot %= 128;
      std::int64_t page = row[entry];
      if (bug == Bug::block_id_16bit) page = static_cast<std::uint16_t>(page);
      // The page's offset: 64-bit, or as `int off = page * stride_b` computes
      // it (the product wrapped to int32, as two's complement hardware does).
      auto page_offset = [&](std::int64_t stride_b) -> std::int64_t {
        if (bug != Bug::page_offset_32bit) return page * stride_b;
        return static_cast<std::int32_t>(static_cast<std::uint32_t>(page) *
                                         static_cast<std::uint32_t>(stride_b));
      };
      for (std::int64_t h = 0; h < a->heads_kv; ++h) {
        const std::int64_t ko =
            page_offset(a->k.stride_b) + slot * a->k.stride_s + h * a->k.stride_h;
        const std::int64_t vo =
            page_offset(a->v.stride_b) + slot * a->v.stride_s + h * a->v.stride_h;
        // (The address formed as an integer, as hardware adds a wrapped
        // offset: pointer arithmetic past the object would be undefined.)
        auto at = [&](const void* base, std::int64_t off) {
          return reinterpret_cast<const unsigned char*>(reinterpret_cast<std::uintptr_t>(base) +
                                                        static_cast<std::uintptr_t>(off) * e);
        };
        std::memcpy(&k[static_cast<std::size_t>(((k0 + j) * a->heads_kv + h) * a->head_dim) * e],
                    at(a->k.data, ko), static_cast<std::size_t>(a->head_dim) * e);
        std::memcpy(&v[static_cast<std::size_t>(((k0 + j) * a->heads_kv + h) * a->head_dim_v) * e],
                    at(a->v.data, vo), static_cast<std::size_t>(a->head_dim_v) * e);
      }
    }
  }
  m.block_table = nullptr;
  m.block_table_stride = m.page_size = m.num_pages = 0;
  m.k = {k.data(), a->seqlen_k * a->heads_kv * a->head_dim, a->head_dim, a->heads_kv * a->head_dim};
  m.v = {v.data(), a->seqlen_k * a->heads_kv * a->head_dim_v, a->head_dim_v,
         a->heads_kv * a->head_dim_v};
  return kernels::naive_attention_v2(nullptr, &m);
}

// The block-scale bugs: every element gets its own scale byte (scale_block
// 1, the elements' own strides), taken from the call's scales with the bug.
sa_status block_scale_call(const Bug bug, const sa_attention_v2_args* a) {
  if (a->scale_block <= 0) return kernels::naive_attention_v2(nullptr, a);
  const bool varlen = a->cu_seqlens_q != nullptr, paged = a->block_table != nullptr;
  const std::int64_t sb = a->scale_block;
  sa_attention_v2_args m = *a;
  auto remap = [&](const sa_tensor& x, const sa_tensor& s, bool keys, std::int64_t heads,
                   std::int64_t dim, bool is_k, std::vector<std::uint8_t>& out) -> sa_tensor {
    std::vector<std::array<std::int64_t, 2>> rows;  // (element offset, scale offset)
    if (keys && paged) {
      for (std::int64_t p = 0; p < a->num_pages; ++p)
        for (std::int64_t t = 0; t < a->page_size; ++t)
          for (std::int64_t h = 0; h < heads; ++h)
            rows.push_back({p * x.stride_b + t * x.stride_s + h * x.stride_h,
                            p * s.stride_b + t * s.stride_s + h * s.stride_h});
    } else if (varlen) {
      const std::int64_t n = keys ? a->cu_seqlens_k[a->batch] : a->cu_seqlens_q[a->batch];
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t h = 0; h < heads; ++h)
          rows.push_back({r * x.stride_s + h * x.stride_h, r * s.stride_s + h * s.stride_h});
    } else {
      const std::int64_t n = keys ? a->seqlen_k : a->seqlen_q;
      for (std::int64_t b = 0; b < a->batch; ++b)
        for (std::int64_t r = 0; r < n; ++r)
          for (std::int64_t h = 0; h < heads; ++h)
            rows.push_back({b * x.stride_b + r * x.stride_s + h * x.stride_h,
                            b * s.stride_b + r * s.stride_s + h * s.stride_h});
    }
    std::int64_t extent = 1;
    for (const auto& r : rows) extent = std::max(extent, r[0] + dim);
    out.assign(static_cast<std::size_t>(extent), 255);
    const auto* in = static_cast<const std::uint8_t*>(s.data);
    // (A run's bytes past the call's own are never read: runs cover the row.)
    const std::int64_t runs = (dim + sb - 1) / sb;
    for (const auto& r : rows)
      for (std::int64_t c = 0; c < dim; ++c) {
        std::uint8_t e = in[r[1] + c / sb];
        if (bug == Bug::mx_scale_per_16) e = in[r[1] + std::min(c / 16, runs - 1)];
        if (bug == Bug::mx_scale_bias_128 && e > 0 && e < 255) e = static_cast<std::uint8_t>(e - 1);
        if (bug == Bug::mx_k_scale_ignored && is_k && e != 255) e = 127;
        out[static_cast<std::size_t>(r[0] + c)] = e;
      }
    return {out.data(), x.stride_b, x.stride_h, x.stride_s};
  };
  std::vector<std::uint8_t> qs, ks, vs;
  m.q_scale = remap(a->q, a->q_scale, false, a->heads_q, a->head_dim, false, qs);
  m.k_scale = remap(a->k, a->k_scale, true, a->heads_kv, a->head_dim, true, ks);
  m.v_scale = remap(a->v, a->v_scale, true, a->heads_kv, a->head_dim_v, false, vs);
  m.scale_block = 1;
  return kernels::naive_attention_v2(nullptr, &m);
}

// The fp4 and int8 bugs: every element gets its own float32 scale
// (scale_block 1, the elements' own strides, SA_F32 scales) decoded from
// the call's scales (1 without) with the bug; fp4 bytes nibble-swapped.
sa_status quant_bug_call(const Bug bug, const sa_attention_v2_args* a) {
  if (bug == Bug::fp4_tensor_scale_dropped) {
    sa_attention_v2_args m = *a;
    if (a->qkv_dtype == SA_FP4_E2M1) m.q_descale = m.k_descale = m.v_descale = 1.0f;
    return kernels::naive_attention_v2(nullptr, &m);
  }
  const bool fp4 = a->qkv_dtype == SA_FP4_E2M1, int8 = a->qkv_dtype == SA_INT8;
  if (!fp4 && !int8) return kernels::naive_attention_v2(nullptr, a);
  const bool varlen = a->cu_seqlens_q != nullptr, paged = a->block_table != nullptr;
  const std::int64_t sb = a->scale_block;
  const ScaleType st = a->scale_dtype == SA_FP8_E4M3 ? ScaleType::e4m3
                       : a->scale_dtype == SA_F32    ? ScaleType::f32
                                                     : ScaleType::e8m0;
  sa_attention_v2_args m = *a;
  auto remap = [&](const sa_tensor& x, const sa_tensor& s, bool keys, std::int64_t heads,
                   std::int64_t dim, std::vector<float>& out,
                   std::vector<std::uint8_t>& elems) -> sa_tensor {
    struct Row {
      std::int64_t off, soff, soff_row0;  // element, scale, scale of head 0 of the row
    };
    std::vector<Row> rows;
    if (keys && paged) {
      for (std::int64_t p = 0; p < a->num_pages; ++p)
        for (std::int64_t t = 0; t < a->page_size; ++t)
          for (std::int64_t h = 0; h < heads; ++h)
            rows.push_back({p * x.stride_b + t * x.stride_s + h * x.stride_h,
                            p * s.stride_b + t * s.stride_s + h * s.stride_h,
                            p * s.stride_b + t * s.stride_s});
    } else if (varlen) {
      const std::int64_t n = keys ? a->cu_seqlens_k[a->batch] : a->cu_seqlens_q[a->batch];
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t h = 0; h < heads; ++h)
          rows.push_back(
              {r * x.stride_s + h * x.stride_h, r * s.stride_s + h * s.stride_h, r * s.stride_s});
    } else {
      const std::int64_t n = keys ? a->seqlen_k : a->seqlen_q;
      for (std::int64_t b = 0; b < a->batch; ++b)
        for (std::int64_t r = 0; r < n; ++r)
          for (std::int64_t h = 0; h < heads; ++h)
            rows.push_back({b * x.stride_b + r * x.stride_s + h * x.stride_h,
                            b * s.stride_b + r * s.stride_s + h * s.stride_h,
                            b * s.stride_b + r * s.stride_s});
    }
    std::int64_t extent = 0;  // (the elements the rows address: no byte past them is read)
    for (const auto& r : rows) extent = std::max(extent, r.off + dim);
    out.assign(static_cast<std::size_t>(std::max<std::int64_t>(extent, 2)),
               std::numeric_limits<float>::quiet_NaN());
    const std::size_t bytes = static_cast<std::size_t>(fp4 ? (extent + 1) / 2 : extent);
    const auto* src = static_cast<const std::uint8_t*>(x.data);
    elems.assign(src, src + bytes);  // (every byte a row addresses; the rest is never read)
    if (fp4 && bug == Bug::fp4_high_nibble_first)
      for (auto& b : elems) b = static_cast<std::uint8_t>((b >> 4) | (b << 4));
    const std::int64_t runs = sb > 0 ? (dim + sb - 1) / sb : 1;
    for (const auto& r : rows)
      for (std::int64_t c = 0; c < dim; ++c) {
        std::int64_t run = sb > 0 ? c / sb : 0;
        std::int64_t soff = r.soff;
        if (bug == Bug::nvfp4_scale_per_32 && st == ScaleType::e4m3)
          run = std::min(c / 32, runs - 1);
        if (bug == Bug::int8_scale_per_row && st == ScaleType::f32) soff = r.soff_row0;
        float sc = 1.0f;
        if (sb > 0) {
          sc = load_scale(st, s.data, soff + run);
          if (bug == Bug::nvfp4_scale_as_e8m0 && st == ScaleType::e4m3)
            sc = load_scale(ScaleType::e8m0, s.data, soff + run);
        }
        if (bug == Bug::int8_read_unsigned && int8) {
          const float v = static_cast<float>(static_cast<std::int8_t>(src[r.off + c]));
          if (v < 0) sc *= (v + 256.0f) / v;  // (u = v + 256 read for v)
        }
        out[static_cast<std::size_t>(r.off + c)] = sc;
      }
    return {out.data(), x.stride_b, x.stride_h, x.stride_s};
  };
  std::vector<float> qs, ks, vs;
  std::vector<std::uint8_t> qe, ke, ve;
  m.q_scale = remap(a->q, a->q_scale, false, a->heads_q, a->head_dim, qs, qe);
  m.k_scale = remap(a->k, a->k_scale, true, a->heads_kv, a->head_dim, ks, ke);
  const bool v_in_k = a->v.data == a->k.data;
  m.v_scale = remap(a->v, a->v_scale, true, a->heads_kv, a->head_dim_v, vs, ve);
  m.q.data = qe.data();
  m.k.data = ke.data();
  m.v.data = v_in_k ? ke.data() : ve.data();
  m.scale_block = 1;
  m.scale_dtype = SA_F32;
  return kernels::naive_attention_v2(nullptr, &m);
}

// The mask bugs: every mask of the call (attn_mask, block, tree; each read
// through its strides at indices inside kernel.h's extents) folded into one
// dense byte mask with the bug, the bias copied dense with its bug, then the
// naive kernel on that call.
sa_status mask_bug_call(const Bug bug, const sa_attention_v2_args* a) {
  sa_attention_v2_args m = *a;
  const std::int64_t B = a->batch, H = a->heads_q, Sq = a->seqlen_q, Sk = a->seqlen_k;
  if (B < 1 || Sq < 1 || Sk < 1) return kernels::naive_attention_v2(nullptr, a);
  const bool varlen = a->cu_seqlens_q != nullptr;
  const std::int64_t group = a->heads_q / std::max<std::int64_t>(a->heads_kv, 1);
  auto u8 = [](const sa_mask_tensor& t, std::int64_t b, std::int64_t h, std::int64_t i,
               std::int64_t j) {
    return static_cast<const std::uint8_t*>(
        t.data)[b * t.stride_b + h * t.stride_h + i * t.stride_q + j * t.stride_k];
  };
  const bool elem = a->attn_mask.data || a->block_mask.data || a->tree_mask.data;
  std::vector<std::uint8_t> mask;
  if (elem) {
    mask.assign(static_cast<std::size_t>(B * H * Sq * Sk), 1);
    const std::int64_t nbk = a->block_mask.data ? (Sk + a->block_k - 1) / a->block_k : 0;
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t Lq = varlen ? a->cu_seqlens_q[b + 1] - a->cu_seqlens_q[b] : Sq;
      const std::int64_t Nk = varlen ? a->cu_seqlens_k[b + 1] - a->cu_seqlens_k[b] : Sk;
      const std::int64_t Lk = a->seqused_k ? a->seqused_k[b] : Nk;
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t i = 0; i < Lq; ++i)
          for (std::int64_t j = 0; j < Lk; ++j) {
            bool vis = true;
            if (a->attn_mask.data) {
              bool on = false;
              if (bug == Bug::bool_mask_row_major && a->attn_mask.stride_q > 0 &&
                  a->attn_mask.stride_k > 0)
                on = static_cast<const std::uint8_t*>(
                         a->attn_mask.data)[b * a->attn_mask.stride_b + h * a->attn_mask.stride_h +
                                            i * Sk + j] != 0;
              else
                on = u8(a->attn_mask, b, h, i, j) != 0;
              if (bug == Bug::bool_mask_polarity) on = !on;
              vis = vis && on;
            }
            if (a->block_mask.data) {
              std::int64_t bj = j / a->block_k;
              if (bug == Bug::block_square) bj = std::min(j / a->block_q, nbk - 1);
              bool on = u8(a->block_mask, b, h, i / a->block_q, bj) != 0;
              if (bug == Bug::block_last_partial && j >= Lk / a->block_k * a->block_k) on = false;
              vis = vis && on;
            }
            if (a->tree_mask.data) {
              const std::int64_t first = bug == Bug::tree_on_prefix ? 0 : Lk - Lq;
              const std::int64_t t = j - first;
              if (t >= 0 && t < Lq) {
                const bool on = bug == Bug::tree_transposed ? u8(a->tree_mask, b, h, t, i) != 0
                                                            : u8(a->tree_mask, b, h, i, t) != 0;
                vis = vis && on;
              }
            }
            mask[static_cast<std::size_t>(((b * H + h) * Sq + i) * Sk + j)] = vis ? 1 : 0;
          }
    }
    m.attn_mask = {mask.data(), H * Sq * Sk, Sq * Sk, Sk, 1};
    m.block_mask = m.tree_mask = sa_mask_tensor{};
  }
  std::vector<float> bias;
  if (a->attn_bias.data) {
    const sa_mask_tensor& t = a->attn_bias;
    bias.assign(static_cast<std::size_t>(B * H * Sq * Sk), 0.0f);
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t i = 0; i < Sq; ++i)
          for (std::int64_t j = 0; j < Sk; ++j) {
            const std::int64_t bb = bug == Bug::bias_batch_stride_0 ? 0 : b;
            const std::int64_t hh = bug == Bug::bias_per_kv_head ? h / group : h;
            bias[static_cast<std::size_t>(((b * H + h) * Sq + i) * Sk + j)] =
                static_cast<const float*>(
                    t.data)[bb * t.stride_b + hh * t.stride_h + i * t.stride_q + j * t.stride_k];
          }
    m.attn_bias = {bias.data(), H * Sq * Sk, Sq * Sk, Sk, 1};
  }
  return kernels::naive_attention_v2(nullptr, &m);
}

// Descales per (sequence, kv head) with `bug`: the arrays rebuilt as the
// buggy kernel reads them.
sa_status descale_bh_call(const Bug bug, const sa_attention_v2_args* a) {
  sa_attention_v2_args m = *a;
  const std::int64_t B = a->batch, H = a->heads_kv;
  std::vector<float> d[3];
  const float** fields[3] = {&m.q_descale_bh, &m.k_descale_bh, &m.v_descale_bh};
  for (int x = 0; x < 3; ++x) {
    const float* src = *fields[x];
    if (!src) continue;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t g = 0; g < H; ++g)
        d[x].push_back(bug == Bug::descale_bh_scalar       ? src[0]
                       : bug == Bug::descale_bh_transposed ? src[g * B + b]
                       : x == 2                            ? 1.0f
                                                           : src[b * H + g]);
    *fields[x] = d[x].data();
  }
  return kernels::naive_attention_v2(nullptr, &m);
}

sa_status mutant_call(const Bug bug, const sa_attention_v2_args* a) {
  if (bug >= Bug::descale_bh_scalar) return descale_bh_call(bug, a);
  if (bug == Bug::v_strides_from_dv) {
    sa_attention_v2_args m = *a;
    const std::int64_t row = a->heads_kv * a->head_dim_v;
    m.v = {a->v.data, a->seqlen_k * row, a->head_dim_v, row};
    return kernels::naive_attention_v2(nullptr, &m);
  }
  if (bug >= Bug::fp4_high_nibble_first) return quant_bug_call(bug, a);
  if (bug >= Bug::bool_mask_polarity) return mask_bug_call(bug, a);
  if (bug >= Bug::mx_scale_per_16) return block_scale_call(bug, a);
  if (bug >= Bug::block_id_16bit) return paged_call(bug, a);
  if (bug >= Bug::softcap_after_mask) return buggy_call(bug, a);
  sa_attention_v2_args m = *a;
  std::vector<std::int32_t> cu_k;
  std::vector<unsigned char> k, v;
  const bool varlen = a->cu_seqlens_q != nullptr;
  const std::int64_t tk = varlen ? a->cu_seqlens_k[a->batch] : a->batch * a->seqlen_k;
  const std::int64_t dk = a->head_dim, dvv = a->head_dim_v;
  switch (bug) {
    case Bug::window_edge:  // the left window edge one key too far
      if (m.window_left >= 0) ++m.window_left;
      break;
    case Bug::gqa_mapping: {  // query head h reads key/value head h % heads_kv
      const std::int64_t hk = a->heads_kv;
      auto wrong = [hk](std::int64_t h) { return h % hk; };
      k = regather(a, a->k, a->seqlen_k, tk, a->heads_q, dk, wrong);
      v = regather(a, a->v, a->seqlen_k, tk, a->heads_q, dvv, wrong);
      m.heads_kv = a->heads_q;
      m.k = {k.data(), a->seqlen_k * a->heads_q * dk, dk, a->heads_q * dk};
      m.v = {v.data(), a->seqlen_k * a->heads_q * dvv, dvv, a->heads_q * dvv};
      break;
    }
    case Bug::varlen_offset:  // every key sequence after the first starts one row late
      if (varlen) {
        cu_k.assign(a->cu_seqlens_k, a->cu_seqlens_k + a->batch + 1);
        for (std::int64_t b = 1; b < a->batch; ++b)
          if (cu_k[b] + 1 <= cu_k[b + 1]) ++cu_k[b];
        m.cu_seqlens_k = cu_k.data();
      }
      break;
    default:
      break;
    case Bug::past_128_tile: {  // keys past the first 128 of a sequence are read scaled by 1 + 2^-7
      if (a->qkv_dtype != SA_F32) break;
      auto same = [](std::int64_t h) { return h; };
      k = regather(a, a->k, a->seqlen_k, tk, a->heads_kv, dk, same);
      auto* kf = reinterpret_cast<float*>(k.data());
      for (std::int64_t b = 0; b < a->batch; ++b) {
        const std::int64_t k0 = varlen ? a->cu_seqlens_k[b] : b * a->seqlen_k;
        const std::int64_t Lk = varlen ? a->cu_seqlens_k[b + 1] - k0 : a->seqlen_k;
        for (std::int64_t j = 128; j < Lk; ++j)
          for (std::int64_t x = 0; x < a->heads_kv * dk; ++x)
            kf[(k0 + j) * a->heads_kv * dk + x] *= 1.0f + 0x1p-7f;
      }
      m.k = {k.data(), a->seqlen_k * a->heads_kv * dk, dk, a->heads_kv * dk};
      break;
    }
  }
  return kernels::naive_attention_v2(nullptr, &m);
}

template <Bug B>
sa_status call(void*, const sa_attention_v2_args* a) {
  return mutant_call(B, a);
}

const char* last_error(void*) {
  const std::string& e = kernels::naive_last_error();
  return e.empty() ? nullptr : e.c_str();
}

// The features of issue 33, declared only by the mutants whose bug is there
// (the others' wrappers take contiguous keys; their cases are drawn as before).
constexpr std::uint32_t kPagedFeatures = SA_ATTN_PAGED_KV | SA_ATTN_SEQUSED_K;
constexpr std::uint32_t kMaskFeatures =
    SA_ATTN_BOOL_MASK | SA_ATTN_BIAS | SA_ATTN_BLOCK_MASK | SA_ATTN_TREE_MASK;
constexpr std::uint32_t kIssue33Features = kPagedFeatures | kMaskFeatures | SA_ATTN_BLOCK_SCALED |
                                           SA_ATTN_SCALE_E4M3 | SA_ATTN_SCALE_F32 |
                                           SA_ATTN_DESCALE_BH;

// The naive kernel's capabilities with `add` declared and `drop` not (paged
// KV, seqused_k and the masks only when added).
const sa_capabilities* caps_with(std::uint32_t add, std::uint32_t drop) {
  static std::vector<std::unique_ptr<sa_capabilities>> kept;
  auto c = std::make_unique<sa_capabilities>(*kernels::naive_capabilities());
  c->attention_features = ((c->attention_features & ~kIssue33Features) | add) & ~drop;
  // fp4 and int8 inputs only for the block-scale mutants (the others copy
  // elements by whole bytes).
  if ((add & (SA_ATTN_BLOCK_SCALED | SA_ATTN_SCALE_E4M3 | SA_ATTN_SCALE_F32)) == 0)
    c->op_dtypes[8] &= ~static_cast<std::uint32_t>(SA_DTYPE_FP4_E2M1 | SA_DTYPE_INT8);
  kept.push_back(std::move(c));
  return kept.back().get();
}

sa_kernel make(const char* name, const char* what,
               sa_status (*fn)(void*, const sa_attention_v2_args*),
               const sa_capabilities* caps = caps_with(0, 0)) {
  sa_kernel k{};
  k.abi_version = SA_KERNEL_ABI_VERSION;
  k.struct_size = sizeof(sa_kernel);
  k.name = name;
  k.description = what;
  k.ops = SA_OP_ATTENTION_V2;
  k.dtypes = SA_DTYPE_F32 | SA_DTYPE_BF16;
  k.memory = SA_MEMORY_HOST;
  k.capabilities = caps;
  k.attention_v2 = fn;
  k.last_error = last_error;
  return k;
}

}  // namespace

std::vector<Mutant> attention_v2_mutants() {
  // The scalar attention of buggy_call has adaptive only where its bug is.
  static const sa_capabilities* const scalar = caps_with(0, SA_ATTN_ADAPTIVE);
  static const sa_kernel ks[] = {
      make("mutant_v2_window_edge", "sliding window: left edge off by one", call<Bug::window_edge>),
      make("mutant_v2_gqa_mapping", "GQA head mapping h % heads_kv instead of h / group",
           call<Bug::gqa_mapping>),
      make("mutant_v2_varlen_offset", "varlen: key offsets of later sequences off by one",
           call<Bug::varlen_offset>),
      make("mutant_v2_past_128_tile", "a bug only past a 128-wide key tile (keys scaled)",
           call<Bug::past_128_tile>),
      make("mutant_v2_softcap_after_mask",
           "softcap applied after the mask (masked -inf scores become -softcap)",
           call<Bug::softcap_after_mask>, scalar),
      make("mutant_v2_sink_not_in_max",
           "attention sink left out of the running max (exp(sink - max) overflows)",
           call<Bug::sink_not_in_max>, scalar),
      make("mutant_v2_fp8_p_saturating",
           "fp8: P scaled by the power of two above the format's max and saturated",
           call<Bug::fp8_p_saturating>, scalar),
      make("mutant_v2_fp8_p_overflowing",
           "fp8: P scaled by the power of two above the format's max, no saturation",
           call<Bug::fp8_p_overflowing>, scalar),
      make("mutant_v2_window_right_exclusive",
           "sliding window: right edge exclusive (causal itself correct)",
           call<Bug::window_right_exclusive>, scalar),
      make("mutant_v2_key_padding_dense_varlen",
           "varlen: key padding mask indexed as dense (b * seqlen_k, not cu_seqlens_k)",
           call<Bug::key_padding_dense_varlen>, scalar),
      make("mutant_v2_always_top_left",
           "causal, window and ALiBi always aligned top-left (wrong for bottom-right, Lq != Lk)",
           call<Bug::always_top_left>, scalar),
      make("mutant_v2_alibi_slope_per_kv_head",
           "ALiBi slope indexed by the key/value head (h / group), not the query head",
           call<Bug::alibi_slope_per_kv_head>, scalar),
      make("mutant_v2_fp8_nan_as_max", "fp8: NaN codes decoded as the largest finite value",
           call<Bug::fp8_nan_as_max>, scalar),
      make("mutant_v2_nan_score_as_masked",
           "a NaN score skipped like a masked one (NaN in an unmasked position is lost)",
           call<Bug::nan_score_as_masked>, scalar),
      make("mutant_v2_split_kv_unscaled",
           "split-KV: parts merged without the exp(m_p - m) rescaling",
           call<Bug::split_kv_unscaled>, caps_with(SA_ATTN_SPLIT_KV, SA_ATTN_ADAPTIVE)),
      make("mutant_v2_sink_in_every_split",
           "split-KV: the sink counted in every part's sum, not in exactly one",
           call<Bug::sink_in_every_split>, caps_with(SA_ATTN_SPLIT_KV, SA_ATTN_ADAPTIVE)),
      make("mutant_v2_adaptive_entropy_in_bits",
           "adaptive temperature: beta evaluated at the entropy in bits, not nats",
           call<Bug::adaptive_entropy_in_bits>, caps_with(0, 0)),
      make("mutant_v2_block_id_16bit",
           "paged KV: physical page ids truncated to 16 bits (ids above 65,535 wrap)",
           call<Bug::block_id_16bit>, caps_with(SA_ATTN_PAGED_KV, 0)),
      make("mutant_v2_page_slot_past_128",
           "paged KV: the slot in a page taken modulo 128 (pages above 128 tokens wrong)",
           call<Bug::page_slot_past_128>, caps_with(SA_ATTN_PAGED_KV, 0)),
      make("mutant_v2_page_size_pow2",
           "paged KV: page and slot by shift and mask (page_size assumed a power of two)",
           call<Bug::page_size_pow2>, caps_with(SA_ATTN_PAGED_KV, 0)),
      make("mutant_v2_ignores_seqused_k",
           "seqused_k ignored: keys past a sequence's used length read (the buffer's length used)",
           call<Bug::ignores_seqused_k>, caps_with(kPagedFeatures, 0)),
      make("mutant_v2_page_offset_32bit",
           "paged KV: a page's offset page_id * stride_b computed in int32 (wraps past 2^31 "
           "elements)",
           call<Bug::page_offset_32bit>, caps_with(SA_ATTN_PAGED_KV, 0)),
      make("mutant_v2_chunk_diagonal_from_buffer",
           "chunked prefill: the causal diagonal placed by the key buffer's length, not "
           "seqused_k (a chunk's queries see keys of later chunks' positions)",
           call<Bug::chunk_diagonal_from_buffer>, caps_with(SA_ATTN_SEQUSED_K, 0)),
      make("mutant_v2_chunk_queries_see_all",
           "chunked prefill: with seqused_k the causal mask dropped (every query of a chunk "
           "sees every used key, as a decode kernel does)",
           call<Bug::chunk_queries_see_all>, caps_with(SA_ATTN_SEQUSED_K, 0)),
      make("mutant_v2_mx_scale_per_16",
           "block scales: the scale of element c read at c / 16 whatever scale_block is",
           call<Bug::mx_scale_per_16>, caps_with(SA_ATTN_BLOCK_SCALED, 0)),
      make("mutant_v2_mx_scale_bias_128", "block scales: E8M0 decoded as 2^(x - 128)",
           call<Bug::mx_scale_bias_128>, caps_with(SA_ATTN_BLOCK_SCALED, 0)),
      make("mutant_v2_mx_k_scale_ignored", "block scales: K's scales dropped (read as 1)",
           call<Bug::mx_k_scale_ignored>, caps_with(SA_ATTN_BLOCK_SCALED, 0)),
      make("mutant_v2_fp4_high_nibble_first",
           "fp4 e2m1: the element at an even offset read from the high nibble (packing order "
           "swapped)",
           call<Bug::fp4_high_nibble_first>,
           caps_with(SA_ATTN_SCALE_E4M3 | SA_ATTN_BLOCK_SCALED, 0)),
      make("mutant_v2_nvfp4_scale_per_32",
           "NVFP4: the e4m3 scale of element c read at c / 32 (MXFP4's block, not 16)",
           call<Bug::nvfp4_scale_per_32>, caps_with(SA_ATTN_SCALE_E4M3, 0)),
      make("mutant_v2_nvfp4_scale_as_e8m0", "NVFP4: e4m3 scale bytes decoded as E8M0",
           call<Bug::nvfp4_scale_as_e8m0>, caps_with(SA_ATTN_SCALE_E4M3, 0)),
      make("mutant_v2_fp4_tensor_scale_dropped",
           "fp4: the descales (NVFP4's float32 tensor scale) ignored",
           call<Bug::fp4_tensor_scale_dropped>, caps_with(SA_ATTN_SCALE_E4M3, 0)),
      make("mutant_v2_int8_scale_per_row",
           "int8: float32 scales read per token row, head 0's for every head",
           call<Bug::int8_scale_per_row>, caps_with(SA_ATTN_SCALE_F32, 0)),
      make("mutant_v2_int8_read_unsigned", "int8: elements read as uint8 (-1 becomes 255)",
           call<Bug::int8_read_unsigned>, caps_with(SA_ATTN_SCALE_F32, 0)),
      make("mutant_v2_bool_mask_polarity",
           "attn_mask polarity inverted: nonzero taken for masked out (ONNX vs SDPA)",
           call<Bug::bool_mask_polarity>, caps_with(SA_ATTN_BOOL_MASK, 0)),
      make("mutant_v2_bool_mask_row_major",
           "attn_mask strides ignored: read row-major [q][k] (a key-major mask transposed)",
           call<Bug::bool_mask_row_major>, caps_with(SA_ATTN_BOOL_MASK, 0)),
      make("mutant_v2_bias_batch_stride_0",
           "attn_bias batch stride ignored: sequence 0's bias read for every sequence",
           call<Bug::bias_batch_stride_0>, caps_with(SA_ATTN_BIAS, 0)),
      make("mutant_v2_bias_per_kv_head",
           "attn_bias of query head h read at h / group (the key/value head) under GQA",
           call<Bug::bias_per_kv_head>, caps_with(SA_ATTN_BIAS, 0)),
      make("mutant_v2_block_last_partial",
           "block mask: the last partial key block dropped (floor(Lk / block_k) blocks)",
           call<Bug::block_last_partial>, caps_with(SA_ATTN_BLOCK_MASK, 0)),
      make("mutant_v2_block_square",
           "block mask: key blocks taken block_q wide (non-square blocks assumed square)",
           call<Bug::block_square>, caps_with(SA_ATTN_BLOCK_MASK, 0)),
      make("mutant_v2_tree_on_prefix",
           "tree mask applied to the first Lq keys (the prefix), not the draft tokens",
           call<Bug::tree_on_prefix>, caps_with(SA_ATTN_TREE_MASK, 0)),
      make("mutant_v2_tree_transposed", "tree mask read [t][i]: descendants taken for ancestors",
           call<Bug::tree_transposed>, caps_with(SA_ATTN_TREE_MASK, 0)),
      make("mutant_v2_v_strides_from_dv",
           "MLA: V's strides taken as a contiguous BSHD tensor of head_dim_v (wrong where V is a "
           "prefix view of K)",
           call<Bug::v_strides_from_dv>),
      make("mutant_v2_descale_bh_scalar",
           "FA3 descales per (batch, kv head): each tensor read as a scalar (element 0)",
           call<Bug::descale_bh_scalar>, caps_with(SA_ATTN_DESCALE_BH, 0)),
      make("mutant_v2_descale_bh_transposed",
           "FA3 descales per (batch, kv head) read as (kv head, batch)",
           call<Bug::descale_bh_transposed>, caps_with(SA_ATTN_DESCALE_BH, 0)),
      make("mutant_v2_descale_bh_v_dropped",
           "FA3 descales per (batch, kv head): v's never applied to the output",
           call<Bug::descale_bh_v_dropped>, caps_with(SA_ATTN_DESCALE_BH, 0)),
  };
  std::vector<Mutant> out;
  for (const auto& k : ks) out.push_back({k.description, &k});
  return out;
}

}  // namespace sa::mutants
