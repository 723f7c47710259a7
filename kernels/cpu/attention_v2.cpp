// The CPU kernel's batched attention (interface v2): every (sequence, head)
// pair is one call of the tiled single-head attention (kernels/cpu/attention.cpp,
// cpu_attention_head) on a strided view of the tensors, so batching, GQA/MQA,
// varlen, BSHD/BHSD and padded layouts cost nothing beyond the single-head
// kernel's own work. The single-head kernel has every v2 feature in its tile
// loop (window, softcap, ALiBi, sinks; float16 and fp8 inputs widened exactly
// to float32 while K and V are packed; float32, bfloat16 or float16 outputs).
#include "kernels/cpu/attention_v2.hpp"
#include "kernels/attention_v2_args.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/attention_decode.hpp"
#include "kernels/cpu/attention_detail.hpp"

namespace sa::kernels {
namespace {

thread_local std::string g_error;

sa_status fail(sa_status s, std::string what) {
  g_error = "attention_v2: " + std::move(what);
  return s;
}

// Rows of a query slice with no key (an empty key sequence): kernel.h's fully
// masked row; with a sink the sink is the row's only item (weight 1, no value).
void write_empty_rows(const sa_attention_v2_args* a, char* out, std::int64_t rows, std::size_t e,
                      float* lse, float* ent, float* beta, const float* sink) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const bool bad = sink && std::isnan(*sink);
  for (std::int64_t i = 0; i < rows; ++i) {
    char* o = out + static_cast<std::size_t>(i * a->out_stride_s) * e;
    if (bad) {
      const std::uint16_t nan16 = 0x7fff;  // a NaN of bfloat16 and of float16
      for (std::int64_t c = 0; c < a->head_dim_v; ++c)
        std::memcpy(o + c * e, e == 4 ? static_cast<const void*>(&nan) : &nan16, e);
    } else {
      std::memset(o, 0, static_cast<std::size_t>(a->head_dim_v) * e);  // +0 in every type
    }
    if (lse) lse[i] = bad ? nan : sink ? *sink : -std::numeric_limits<float>::infinity();
    if (ent) ent[i] = bad ? nan : 0.0f;
    if (beta) beta[i] = bad && a->adaptive ? nan : 1.0f;
  }
}

std::size_t elem_size(std::int32_t t) {
  return t == SA_F32 ? 4 : t == SA_BF16 || t == SA_F16 ? 2 : 1;
}

// Block-scaled inputs (kernel.h scale_block, scale_dtype), and fp4 e2m1 and
// int8 inputs with or without block scales: q, k and v as float32 values at
// the same element offsets, each element (fp8, e2m1 unpacked low nibble
// first, int8) times its run's scale (E8M0 2^(x - 127), 255 NaN; e4m3; float32;
// 1 without block scales). The product is rounded once to float32: exact for
// fp8 and e2m1 times E8M0 or e4m3 (a few mantissa bits each), and for int8
// times a float32 scale of up to 16 mantissa bits. Every row the call
// addresses is converted (query rows, the key buffer's rows or every page
// slot); padding between rows and heads stays NaN and is never read. The
// call then runs on float32 storage with the quantised semantics (descales).
// Returns "" or what is wrong.
std::string dequantize_block_scaled(const sa_attention_v2_args* a, std::vector<float>& qf,
                                    std::vector<float>& kf, std::vector<float>& vf) {
  const sa_dtype t = a->qkv_dtype;
  const std::int64_t sb = a->scale_block;
  const ScaleType sty = a->scale_dtype == SA_FP8_E4M3 ? ScaleType::e4m3
                        : a->scale_dtype == SA_F32    ? ScaleType::f32
                                                      : ScaleType::e8m0;
  const bool varlen = a->cu_seqlens_q != nullptr, paged = a->block_table != nullptr;
  if (varlen)
    for (std::int64_t b = 0; b < a->batch; ++b)
      if (a->cu_seqlens_q[b + 1] < a->cu_seqlens_q[b] ||
          a->cu_seqlens_k[b + 1] < a->cu_seqlens_k[b])
        return "cu_seqlens decrease";
  // Calls fn(element offset, scale offset) for every row of one tensor.
  auto rows = [&](const sa_tensor& x, const sa_tensor& s, bool keys, std::int64_t heads,
                  auto&& fn) {
    if (keys && paged) {
      for (std::int64_t p = 0; p < a->num_pages; ++p)
        for (std::int64_t slot = 0; slot < a->page_size; ++slot)
          for (std::int64_t h = 0; h < heads; ++h)
            fn(p * x.stride_b + slot * x.stride_s + h * x.stride_h,
               p * s.stride_b + slot * s.stride_s + h * s.stride_h);
    } else if (varlen) {
      const std::int64_t n = keys ? a->cu_seqlens_k[a->batch] : a->cu_seqlens_q[a->batch];
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t h = 0; h < heads; ++h)
          fn(r * x.stride_s + h * x.stride_h, r * s.stride_s + h * s.stride_h);
    } else {
      const std::int64_t n = keys ? a->seqlen_k : a->seqlen_q;
      for (std::int64_t b = 0; b < a->batch; ++b)
        for (std::int64_t r = 0; r < n; ++r)
          for (std::int64_t h = 0; h < heads; ++h)
            fn(b * x.stride_b + r * x.stride_s + h * x.stride_h,
               b * s.stride_b + r * s.stride_s + h * s.stride_h);
    }
  };
  auto convert = [&](const sa_tensor& x, const sa_tensor& s, bool keys, std::int64_t heads,
                     std::int64_t dim, std::vector<float>& out) {
    std::int64_t extent = 1;
    rows(x, s, keys, heads,
         [&](std::int64_t off, std::int64_t) { extent = std::max(extent, off + dim); });
    out.assign(static_cast<std::size_t>(extent), std::numeric_limits<float>::quiet_NaN());
    rows(x, s, keys, heads, [&](std::int64_t off, std::int64_t soff) {
      for (std::int64_t c = 0; c < dim; ++c) {
        const float sc = sb > 0 ? load_scale(sty, s.data, soff + c / sb) : 1.0f;
        out[static_cast<std::size_t>(off + c)] = attn_detail::load_elem(x.data, t, off + c) * sc;
      }
    });
  };
  convert(a->q, a->q_scale, false, a->heads_q, a->head_dim, qf);
  convert(a->k, a->k_scale, true, a->heads_kv, a->head_dim, kf);
  convert(a->v, a->v_scale, true, a->heads_kv, a->head_dim_v, vf);
  return {};
}

}  // namespace

const char* cpu_attention_v2_last_error() { return g_error.empty() ? nullptr : g_error.c_str(); }

sa_status cpu_attention_v2(void* /*ctx*/, const sa_attention_v2_args* a) {
  g_error.clear();
  if (!a) return fail(SA_INVALID_ARGUMENT, "args is NULL");
  sa_attention_v2_args whole;  // an earlier interface-2 caller's, completed
  a = complete_v2_args(a, whole);
  if (!a)
    return fail(SA_INVALID_ARGUMENT,
                "struct_size is smaller than interface 2's sa_attention_v2_args");
  std::int32_t qt, ot, align;  // read as integers: a value outside the enum is not UB here
  std::memcpy(&qt, &a->qkv_dtype, 4);
  std::memcpy(&ot, &a->out_dtype, 4);
  std::memcpy(&align, &a->alignment, 4);
  // Quantised inputs (fp8, fp4 e2m1, int8): descales, a separate output type.
  const bool fp8 = qt == SA_FP8_E4M3 || qt == SA_FP8_E5M2 || qt == SA_FP4_E2M1 || qt == SA_INT8;
  if (qt != SA_F32 && qt != SA_BF16 && qt != SA_F16 && !fp8)
    return fail(SA_UNSUPPORTED, "qkv_dtype " + std::to_string(qt) +
                                    "; expected SA_F32, SA_BF16, SA_F16, SA_FP8_E4M3, "
                                    "SA_FP8_E5M2, SA_FP4_E2M1 or SA_INT8");
  if (fp8 ? (ot != SA_F32 && ot != SA_BF16 && ot != SA_F16) : ot != qt)
    return fail(SA_UNSUPPORTED, "out_dtype " + std::to_string(ot) +
                                    "; expected qkv_dtype, or SA_F32, SA_BF16 or SA_F16 for "
                                    "quantised inputs");
  if (align != SA_ALIGN_BOTTOM_RIGHT && align != SA_ALIGN_TOP_LEFT)
    return fail(SA_INVALID_ARGUMENT, "alignment must be SA_ALIGN_BOTTOM_RIGHT or _TOP_LEFT");
  if (a->batch < 0 || a->heads_q < 1 || a->heads_kv < 1 || a->heads_q % a->heads_kv != 0 ||
      a->head_dim < 1 || a->head_dim_v < 1)
    return fail(SA_INVALID_ARGUMENT,
                "need batch >= 0, heads_q a multiple of heads_kv >= 1, head dims >= 1");
  if (!a->q.data || !a->k.data || !a->v.data || !a->out)
    return fail(SA_INVALID_ARGUMENT, "q, k, v and out must not be NULL");
  if (a->q.stride_s < a->head_dim || a->k.stride_s < a->head_dim || a->v.stride_s < a->head_dim_v ||
      a->out_stride_s < a->head_dim_v)
    return fail(SA_INVALID_ARGUMENT, "sequence strides must be at least the head dims");
  if (a->window_left < -1 || a->window_right < -1)
    return fail(SA_INVALID_ARGUMENT, "window_left and window_right must be >= -1");
  if (!(a->softcap >= 0.0) || !std::isfinite(a->softcap))
    return fail(SA_INVALID_ARGUMENT, "softcap must be finite and >= 0 (0: none)");
  if (!std::isfinite(a->scale)) return fail(SA_INVALID_ARGUMENT, "scale must be finite");
  if (a->num_splits < 0) return fail(SA_INVALID_ARGUMENT, "num_splits must be >= 0");
  const bool varlen = a->cu_seqlens_q != nullptr;
  if (varlen != (a->cu_seqlens_k != nullptr))
    return fail(SA_INVALID_ARGUMENT, "cu_seqlens_q and cu_seqlens_k must both be set or NULL");
  // Block scales, fp4 and int8: the inputs dequantized into float32 copies,
  // read as float32 storage below with the quantised semantics kept (descales).
  if (const std::string why = quant_args_error(*a); !why.empty())
    return fail(SA_INVALID_ARGUMENT, why);
  std::int32_t storage = qt;
  sa_attention_v2_args dequantized;
  std::vector<float> qf, kf, vf;
  if (a->scale_block > 0 || qt == SA_FP4_E2M1 || qt == SA_INT8) {
    if (std::string why = dequantize_block_scaled(a, qf, kf, vf); !why.empty())
      return fail(SA_INVALID_ARGUMENT, why);
    dequantized = *a;
    dequantized.q.data = qf.data();
    dequantized.k.data = kf.data();
    dequantized.v.data = vf.data();
    a = &dequantized;
    storage = SA_F32;
  }
  const std::size_t ein = elem_size(storage), eout = elem_size(ot);
  const std::int64_t total_q = varlen ? a->cu_seqlens_q[a->batch] : a->batch * a->seqlen_q;
  const std::int64_t group = a->heads_q / a->heads_kv;
  const bool top_left = align == SA_ALIGN_TOP_LEFT;
  // kernel.h: s = scale * q_descale * k_descale * q.k; descales are 1 unless fp8.
  const double scale = fp8 ? a->scale * static_cast<double>(a->q_descale * a->k_descale) : a->scale;
  // Sequences with few queries (decoding) take the few-query path: one pass per
  // (sequence, key/value head) for all its query heads (attention_decode.hpp);
  // their groups are collected here and run in parallel below.
  std::vector<AttentionHeadArgs> decode_heads;
  std::vector<std::size_t> starts;  // first index of each group in decode_heads
  // Paged KV: the few-query path reads the pages in place (key rows through
  // the block table, AttentionHeadArgs::pages). For the tiled path each
  // sequence's used keys and values are gathered from their pages into one
  // contiguous block ([Lk][heads_kv][d], then [Lk][heads_kv][dv]), which it
  // then packs as it packs any strided K and V.
  const bool paged = a->block_table != nullptr;
  if (paged && (a->page_size < 1 || a->num_pages < 1 || a->block_table_stride < 1))
    return fail(SA_INVALID_ARGUMENT,
                "paged KV needs page_size, num_pages and block_table_stride >= 1");
  // Masks beyond causal and window (kernel.h): the boolean, block and tree
  // masks of one (sequence, head) combined into one [Lq][Lk] byte mask for
  // the tiled kernel, the bias passed by its strides. Such calls take the
  // tiled path (the few-query path has no per-query mask).
  const sa_mask_tensor &am = a->attn_mask, &bm = a->block_mask, &tm = a->tree_mask,
                       &bias = a->attn_bias;
  const bool elem_masks = am.data || bm.data || tm.data;
  if (bm.data && (a->block_q < 1 || a->block_k < 1))
    return fail(SA_INVALID_ARGUMENT, "block_mask needs block_q and block_k >= 1");
  for (const sa_mask_tensor* m : {&am, &bm, &tm, &bias})
    if (m->data && (m->stride_b < 0 || m->stride_h < 0 || m->stride_q < 0 || m->stride_k < 0))
      return fail(SA_INVALID_ARGUMENT, "mask and bias strides must be >= 0");
  std::vector<std::uint8_t> combined;
  // (Not zero-filled: every byte is copied over before it is read.)
  std::vector<std::unique_ptr<char[]>> gathered(paged ? static_cast<std::size_t>(a->batch) : 0);
  for (std::int64_t b = 0; b < a->batch; ++b) {
    const std::int64_t q0 = varlen ? a->cu_seqlens_q[b] : 0, k0 = varlen ? a->cu_seqlens_k[b] : 0;
    const std::int64_t Lq = varlen ? a->cu_seqlens_q[b + 1] - q0 : a->seqlen_q;
    const std::int64_t Nk = varlen ? a->cu_seqlens_k[b + 1] - k0 : a->seqlen_k;
    if (Lq < 0 || Nk < 0) return fail(SA_INVALID_ARGUMENT, "cu_seqlens decrease");
    // seqused_k: the sequence's keys are the first seqused_k[b] of its buffer.
    const std::int64_t Lk = a->seqused_k ? a->seqused_k[b] : Nk;
    if (Lk < 0 || Lk > Nk)
      return fail(SA_INVALID_ARGUMENT, "seqused_k[" + std::to_string(b) +
                                           "] = " + std::to_string(Lk) + " is outside 0.." +
                                           std::to_string(Nk));
    if (Lq == 0) continue;
    const bool few_queries = a->num_splits <= 1 && Lq * group <= cpu_attention_decode_max_rows &&
                             !elem_masks && !bias.data;
    const char* kbase = nullptr;  // paged, tiled path: the gathered block
    const std::int32_t* page_row = paged ? a->block_table + b * a->block_table_stride : nullptr;
    if (paged && Lk > 0) {
      const std::int64_t ps = a->page_size;
      if ((Nk + ps - 1) / ps > a->block_table_stride)
        return fail(SA_INVALID_ARGUMENT, "block_table_stride " +
                                             std::to_string(a->block_table_stride) +
                                             " is too small for sequence " + std::to_string(b));
      const std::int32_t* row = page_row;
      const std::int64_t npages = (Lk + ps - 1) / ps;
      for (std::int64_t g = 0; g < npages; ++g)
        if (row[g] < 0 || row[g] >= a->num_pages)
          return fail(SA_INVALID_ARGUMENT, "block_table[" + std::to_string(b) + "][" +
                                               std::to_string(g) + "] = " + std::to_string(row[g]) +
                                               " is outside 0.." +
                                               std::to_string(a->num_pages - 1));
    }
    if (paged && Lk > 0 && !few_queries) {
      const std::int64_t ps = a->page_size, hkv = a->heads_kv, d = a->head_dim, dv = a->head_dim_v;
      const std::int32_t* row = page_row;
      const std::int64_t npages = (Lk + ps - 1) / ps;
      std::unique_ptr<char[]>& gb = gathered[static_cast<std::size_t>(b)];
      gb.reset(new char[static_cast<std::size_t>(Lk * hkv * (d + dv)) * ein]);
      char* gk = gb.get();
      char* gv = gk + static_cast<std::size_t>(Lk * hkv * d) * ein;
      // One page per iteration, the pages over the threads.
#pragma omp parallel for schedule(static) if (Lk * hkv * (d + dv) >= (1 << 16))
      for (std::int64_t g = 0; g < npages; ++g) {
        const std::int64_t page = row[g], j0 = g * ps;
        for (std::int64_t j = j0; j < std::min(Lk, j0 + ps); ++j)
          for (std::int64_t h = 0; h < hkv; ++h) {
            const std::int64_t ko = page * a->k.stride_b + (j - j0) * a->k.stride_s +
                                    h * a->k.stride_h,
                               vo = page * a->v.stride_b + (j - j0) * a->v.stride_s +
                                    h * a->v.stride_h;
            std::memcpy(gk + static_cast<std::size_t>((j * hkv + h) * d) * ein,
                        static_cast<const char*>(a->k.data) + static_cast<std::size_t>(ko) * ein,
                        static_cast<std::size_t>(d) * ein);
            std::memcpy(gv + static_cast<std::size_t>((j * hkv + h) * dv) * ein,
                        static_cast<const char*>(a->v.data) + static_cast<std::size_t>(vo) * ein,
                        static_cast<std::size_t>(dv) * ein);
          }
      }
      kbase = gk;
    }
    for (std::int64_t h = 0; h < a->heads_q; ++h) {
      const std::int64_t hk = h / group;
      auto at = [&](const void* base, std::size_t e, std::int64_t sb, std::int64_t sh,
                    std::int64_t ss, std::int64_t head, std::int64_t row) {
        const std::int64_t off = (varlen ? 0 : b * sb) + head * sh + row * ss;
        return static_cast<const char*>(base) + static_cast<std::size_t>(off) * e;
      };
      char* out = const_cast<char*>(
          at(a->out, eout, a->out_stride_b, a->out_stride_h, a->out_stride_s, h, q0));
      // Per-query outputs: [batch][heads_q][seqlen_q], or [heads_q][total_q] (varlen).
      const std::int64_t r0 = varlen ? h * total_q + q0 : (b * a->heads_q + h) * a->seqlen_q;
      float* lse = a->lse ? a->lse + r0 : nullptr;
      float* ent = a->entropy ? a->entropy + r0 : nullptr;
      float* beta = a->beta ? a->beta + r0 : nullptr;
      if (Lk == 0) {
        write_empty_rows(a, out, Lq, eout, lse, ent, beta, a->sinks ? a->sinks + h : nullptr);
        continue;
      }
      AttentionHeadArgs s;
      s.qkv_dtype = static_cast<sa_dtype>(storage);
      s.out_dtype = static_cast<sa_dtype>(ot);
      s.nq = Lq;
      s.nk = Lk;
      s.d = a->head_dim;
      s.dv = a->head_dim_v;
      s.q = at(a->q.data, ein, a->q.stride_b, a->q.stride_h, a->q.stride_s, h, q0);
      s.q_stride = a->q.stride_s;
      if (paged && few_queries) {  // in place: key j through page_row[j / page_size]
        s.k = static_cast<const char*>(a->k.data) +
              static_cast<std::size_t>(hk * a->k.stride_h) * ein;
        s.k_stride = a->k.stride_s;
        s.v = static_cast<const char*>(a->v.data) +
              static_cast<std::size_t>(hk * a->v.stride_h) * ein;
        s.v_stride = a->v.stride_s;
        s.pages = page_row;
        s.page_size = a->page_size;
        s.k_page_stride = a->k.stride_b;
        s.v_page_stride = a->v.stride_b;
      } else if (paged) {
        const std::int64_t hkv = a->heads_kv, d = a->head_dim, dv = a->head_dim_v;
        s.k = kbase + static_cast<std::size_t>(hk * d) * ein;
        s.k_stride = hkv * d;
        s.v = kbase + static_cast<std::size_t>(Lk * hkv * d + hk * dv) * ein;
        s.v_stride = hkv * dv;
      } else {
        s.k = at(a->k.data, ein, a->k.stride_b, a->k.stride_h, a->k.stride_s, hk, k0);
        s.k_stride = a->k.stride_s;
        s.v = at(a->v.data, ein, a->v.stride_b, a->v.stride_h, a->v.stride_s, hk, k0);
        s.v_stride = a->v.stride_s;
      }
      s.out = out;
      s.out_stride = a->out_stride_s;
      s.lse = lse;
      s.entropy = ent;
      s.beta = beta;
      s.key_mask =
          a->key_padding_mask ? a->key_padding_mask + (varlen ? k0 : b * a->seqlen_k) : nullptr;
      // Descales per (sequence, kv head) (FlashAttention 3's) join the scalar
      // ones: into the score's scale and the output's v descale.
      const std::int64_t bh = b * a->heads_kv + hk;
      const double qkd = fp8 && a->q_descale_bh ? static_cast<double>(a->q_descale_bh[bh]) : 1.0;
      const double kkd = fp8 && a->k_descale_bh ? static_cast<double>(a->k_descale_bh[bh]) : 1.0;
      s.scale = scale * qkd * kkd;
      s.diag_offset = top_left ? 0 : Lk - Lq;
      s.window_left = a->window_left;
      s.window_right = a->causal ? 0 : a->window_right;
      s.softcap = a->softcap;
      s.has_alibi = a->alibi_slopes != nullptr;
      s.alibi_slope = s.has_alibi ? a->alibi_slopes[h] : 0.0f;
      s.has_sink = a->sinks != nullptr;
      s.sink = s.has_sink ? a->sinks[h] : 0.0f;
      s.v_descale = fp8 ? a->v_descale * (a->v_descale_bh ? a->v_descale_bh[bh] : 1.0f) : 1.0f;
      s.adaptive = a->adaptive != 0;
      s.num_splits = a->num_splits;
      if (elem_masks) {
        combined.assign(static_cast<std::size_t>(Lq * Lk), 1);
        const auto* m8 = static_cast<const std::uint8_t*>(am.data);
        const auto* b8 = static_cast<const std::uint8_t*>(bm.data);
        const auto* t8 = static_cast<const std::uint8_t*>(tm.data);
        const std::int64_t draft0 = Lk - Lq;  // the tree's first draft key
        for (std::int64_t i = 0; i < Lq; ++i) {
          std::uint8_t* row = combined.data() + i * Lk;
          if (m8) {
            const std::uint8_t* src = m8 + b * am.stride_b + h * am.stride_h + i * am.stride_q;
            for (std::int64_t j = 0; j < Lk; ++j) row[j] &= src[j * am.stride_k] != 0;
          }
          if (b8) {
            const std::uint8_t* src =
                b8 + b * bm.stride_b + h * bm.stride_h + (i / a->block_q) * bm.stride_q;
            for (std::int64_t j = 0; j < Lk; ++j)
              row[j] &= src[(j / a->block_k) * bm.stride_k] != 0;
          }
          if (t8) {
            const std::uint8_t* src = t8 + b * tm.stride_b + h * tm.stride_h + i * tm.stride_q;
            for (std::int64_t j = std::max<std::int64_t>(draft0, 0); j < Lk; ++j)
              row[j] &= src[(j - draft0) * tm.stride_k] != 0;
          }
        }
        s.elem_mask = combined.data();
        s.elem_mask_stride = Lk;
      }
      if (bias.data) {
        s.bias = static_cast<const float*>(bias.data) + b * bias.stride_b + h * bias.stride_h;
        s.bias_stride_q = bias.stride_q;
        s.bias_stride_k = bias.stride_k;
      }
      if (few_queries) {  // a group is `group` consecutive heads: one key/value head
        if (h % group == 0) starts.push_back(decode_heads.size());
        decode_heads.push_back(s);
        continue;
      }
      if (const sa_status st = cpu_attention_head(s); st != SA_OK) {
        const char* m = cpu_attention_last_error();
        g_error = std::string("attention_v2: ") + (m ? m : "single-head call failed");
        return st;
      }
    }
  }
  starts.push_back(decode_heads.size());
  const std::int64_t ngroups = static_cast<std::int64_t>(starts.size()) - 1;
  const bool ok =
      ngroups == 0 || cpu_attention_decode(decode_heads.data(), starts.data(), ngroups) == SA_OK;
  if (!ok) return fail(SA_INTERNAL_ERROR, "out of memory in the few-query path");
  return SA_OK;
}

const sa_capabilities* cpu_capabilities() {
  static const sa_capabilities caps = [] {
    sa_capabilities c{};
    c.struct_size = sizeof(sa_capabilities);
    // The single-head (v1) attention in float32 and bfloat16; attention_v2 in
    // every type (fp8 inputs with float32, bfloat16 or float16 outputs).
    c.op_dtypes[5] = SA_DTYPE_F32 | SA_DTYPE_BF16;
    c.op_dtypes[8] = SA_DTYPE_F32 | SA_DTYPE_BF16 | SA_DTYPE_F16 | SA_DTYPE_FP8_E4M3 |
                     SA_DTYPE_FP8_E5M2 | SA_DTYPE_FP4_E2M1 | SA_DTYPE_INT8;
    // (for the quantised inputs: fp8, fp4, int8)
    c.op_out_dtypes[8] = SA_DTYPE_F32 | SA_DTYPE_BF16 | SA_DTYPE_F16;
    c.attention_features = SA_ATTN_BATCHED | SA_ATTN_GQA | SA_ATTN_VARLEN | SA_ATTN_STRIDED |
                           SA_ATTN_CAUSAL | SA_ATTN_WINDOW | SA_ATTN_SOFTCAP | SA_ATTN_ALIBI |
                           SA_ATTN_SINKS | SA_ATTN_KEY_PADDING | SA_ATTN_LSE | SA_ATTN_ENTROPY |
                           SA_ATTN_ADAPTIVE | SA_ATTN_SPLIT_KV | SA_ATTN_UNEQUAL_HEAD_DIMS |
                           SA_ATTN_PAGED_KV | SA_ATTN_SEQUSED_K | SA_ATTN_BOOL_MASK | SA_ATTN_BIAS |
                           SA_ATTN_BLOCK_MASK | SA_ATTN_TREE_MASK | SA_ATTN_BLOCK_SCALED |
                           SA_ATTN_SCALE_E4M3 | SA_ATTN_SCALE_F32 | SA_ATTN_DESCALE_BH;
    c.flags = SA_CAP_DETERMINISTIC;
    return c;
  }();
  return &caps;
}

}  // namespace sa::kernels
