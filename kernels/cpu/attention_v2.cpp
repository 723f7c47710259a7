// The CPU kernel's batched attention (interface v2): every (sequence, head)
// pair is one call of the tiled single-head attention (kernels/cpu/attention.cpp)
// on a strided view of the tensors, so batching, GQA/MQA, varlen, BSHD/BHSD
// and padded layouts cost nothing beyond the single-head kernel's own work.
// What the single-head kernel does not have (sliding window, softcap, ALiBi,
// sinks, fp8 and mixed output types) is not declared in the capabilities, so
// the suite reports those cases as not applicable instead of running them.
#include "kernels/cpu/attention_v2.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "kernels/cpu/attention.hpp"

namespace sa::kernels {
namespace {

thread_local std::string g_error;

sa_status fail(sa_status s, std::string what) {
  g_error = "attention_v2: " + std::move(what);
  return s;
}

// Rows of a query slice with no visible key (an empty key sequence): kernel.h's
// fully masked row.
void write_empty_rows(const sa_attention_v2_args* a, char* out, std::int64_t rows, std::size_t e,
                      float* lse, float* ent, float* beta) {
  for (std::int64_t i = 0; i < rows; ++i) {
    char* o = out + static_cast<std::size_t>(i * a->out_stride_s) * e;
    std::memset(o, 0, static_cast<std::size_t>(a->head_dim_v) * e);  // +0 in f32 and bf16
    if (lse) lse[i] = -std::numeric_limits<float>::infinity();
    if (ent) ent[i] = 0.0f;
    if (beta) beta[i] = 1.0f;
  }
}

}  // namespace

const char* cpu_attention_v2_last_error() { return g_error.empty() ? nullptr : g_error.c_str(); }

sa_status cpu_attention_v2(void* ctx, const sa_attention_v2_args* a) {
  g_error.clear();
  if (!a) return fail(SA_INVALID_ARGUMENT, "args is NULL");
  if (a->struct_size < sizeof(sa_attention_v2_args))
    return fail(SA_INVALID_ARGUMENT, "struct_size is smaller than sa_attention_v2_args");
  std::int32_t qt, ot, align;
  std::memcpy(&qt, &a->qkv_dtype, 4);
  std::memcpy(&ot, &a->out_dtype, 4);
  std::memcpy(&align, &a->alignment, 4);
  if ((qt != SA_F32 && qt != SA_BF16) || ot != qt)
    return fail(SA_UNSUPPORTED, "float32 or bfloat16 in and the same type out only");
  if (a->window_left >= 0 || (!a->causal && a->window_right >= 0) || a->softcap != 0.0 ||
      a->alibi_slopes || a->sinks)
    return fail(SA_UNSUPPORTED, "no sliding window, softcap, ALiBi or sinks in this kernel");
  if (align != SA_ALIGN_BOTTOM_RIGHT && align != SA_ALIGN_TOP_LEFT)
    return fail(SA_INVALID_ARGUMENT, "alignment must be SA_ALIGN_BOTTOM_RIGHT or _TOP_LEFT");
  if (a->batch < 0 || a->heads_q < 1 || a->heads_kv < 1 || a->heads_q % a->heads_kv != 0 ||
      a->head_dim < 1 || a->head_dim_v < 1)
    return fail(SA_INVALID_ARGUMENT,
                "need batch >= 0, heads_q a multiple of heads_kv >= 1, head dims >= 1");
  const bool varlen = a->cu_seqlens_q != nullptr;
  if (varlen != (a->cu_seqlens_k != nullptr))
    return fail(SA_INVALID_ARGUMENT, "cu_seqlens_q and cu_seqlens_k must both be set or NULL");
  const std::size_t e = qt == SA_F32 ? 4 : 2;
  const std::int64_t total_q = varlen ? a->cu_seqlens_q[a->batch] : a->batch * a->seqlen_q;
  const std::int64_t group = a->heads_q / a->heads_kv;
  const bool top_left = align == SA_ALIGN_TOP_LEFT;
  for (std::int64_t b = 0; b < a->batch; ++b) {
    const std::int64_t q0 = varlen ? a->cu_seqlens_q[b] : 0, k0 = varlen ? a->cu_seqlens_k[b] : 0;
    const std::int64_t Lq = varlen ? a->cu_seqlens_q[b + 1] - q0 : a->seqlen_q;
    const std::int64_t Lk = varlen ? a->cu_seqlens_k[b + 1] - k0 : a->seqlen_k;
    if (Lq < 0 || Lk < 0) return fail(SA_INVALID_ARGUMENT, "cu_seqlens decrease");
    if (Lq == 0) continue;
    for (std::int64_t h = 0; h < a->heads_q; ++h) {
      const std::int64_t hk = h / group;
      auto at = [&](const void* base, std::int64_t sb, std::int64_t sh, std::int64_t ss,
                    std::int64_t head, std::int64_t row) {
        const std::int64_t off = (varlen ? 0 : b * sb) + head * sh + row * ss;
        return static_cast<const char*>(base) + static_cast<std::size_t>(off) * e;
      };
      const char* q = at(a->q.data, a->q.stride_b, a->q.stride_h, a->q.stride_s, h, q0);
      const char* k = at(a->k.data, a->k.stride_b, a->k.stride_h, a->k.stride_s, hk, k0);
      const char* v = at(a->v.data, a->v.stride_b, a->v.stride_h, a->v.stride_s, hk, k0);
      char* out =
          const_cast<char*>(at(a->out, a->out_stride_b, a->out_stride_h, a->out_stride_s, h, q0));
      // Per-query outputs: [batch][heads_q][seqlen_q], or [heads_q][total_q] (varlen).
      const std::int64_t r0 = varlen ? h * total_q + q0 : (b * a->heads_q + h) * a->seqlen_q;
      float* lse = a->lse ? a->lse + r0 : nullptr;
      float* ent = a->entropy ? a->entropy + r0 : nullptr;
      float* beta = a->beta ? a->beta + r0 : nullptr;
      const std::uint8_t* mask =
          a->key_padding_mask ? a->key_padding_mask + (varlen ? k0 : b * a->seqlen_k) : nullptr;
      if (Lk == 0) {
        write_empty_rows(a, out, Lq, e, lse, ent, beta);
        continue;
      }
      // One call of the single-head kernel on queries [i0, i0 + nq) and keys
      // [0, nk), bottom-right causal or not.
      auto call = [&](std::int64_t i0, std::int64_t nq, std::int64_t nk, bool causal) {
        sa_attention_args s{};
        s.dtype = static_cast<sa_dtype>(qt);
        s.nq = nq;
        s.nk = nk;
        s.d = a->head_dim;
        s.dv = a->head_dim_v;
        s.q = q + static_cast<std::size_t>(i0 * a->q.stride_s) * e;
        s.q_stride = a->q.stride_s;
        s.k = k;
        s.k_stride = a->k.stride_s;
        s.v = v;
        s.v_stride = a->v.stride_s;
        s.out = out + static_cast<std::size_t>(i0 * a->out_stride_s) * e;
        s.out_stride = a->out_stride_s;
        s.lse = lse ? lse + i0 : nullptr;
        s.entropy = ent ? ent + i0 : nullptr;
        s.beta = beta ? beta + i0 : nullptr;
        s.key_mask = mask;
        s.scale = a->scale;
        s.causal = causal ? 1 : 0;
        s.adaptive = a->adaptive;
        s.num_splits = a->num_splits;
        const sa_status st = cpu_attention(ctx, &s);
        if (st != SA_OK) {
          const char* m = cpu_attention_last_error();
          g_error = std::string("attention_v2: ") + (m ? m : "single-head call failed");
        }
        return st;
      };
      sa_status st;
      if (!a->causal) {
        st = call(0, Lq, Lk, false);
      } else if (!top_left) {
        st = call(0, Lq, Lk, true);
      } else if (Lq <= Lk) {
        // Top-left: query i sees keys 0..i. Keys past Lq - 1 are seen by no
        // query, so the first Lq keys with bottom-right alignment are the same.
        st = call(0, Lq, Lq, true);
      } else {
        // The first Lk queries as above; the rest see every key.
        st = call(0, Lk, Lk, true);
        if (st == SA_OK) st = call(Lk, Lq - Lk, Lk, false);
      }
      if (st != SA_OK) return st;
    }
  }
  return SA_OK;
}

const sa_capabilities* cpu_capabilities() {
  static const sa_capabilities caps = [] {
    sa_capabilities c{};
    c.struct_size = sizeof(sa_capabilities);
    // Attention in float32 and bfloat16 only (float16 is a row-op type here).
    c.op_dtypes[5] = SA_DTYPE_F32 | SA_DTYPE_BF16;
    c.op_dtypes[8] = SA_DTYPE_F32 | SA_DTYPE_BF16;
    c.attention_features = SA_ATTN_BATCHED | SA_ATTN_GQA | SA_ATTN_VARLEN | SA_ATTN_STRIDED |
                           SA_ATTN_CAUSAL | SA_ATTN_KEY_PADDING | SA_ATTN_LSE | SA_ATTN_ENTROPY |
                           SA_ATTN_ADAPTIVE | SA_ATTN_SPLIT_KV | SA_ATTN_UNEQUAL_HEAD_DIMS;
    c.flags = SA_CAP_DETERMINISTIC;
    return c;
  }();
  return &caps;
}

}  // namespace sa::kernels
