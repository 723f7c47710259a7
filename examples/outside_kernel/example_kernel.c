/* An outside kernel: softmax, log-softmax and log-sum-exp for float32, and
 * (built against interface version 2) batched attention, written against
 * softmax_audit/kernel.h alone (plain C11, libm).
 *
 * Accuracy: each row is shifted by its largest finite logit and summed in
 * double, with log S = log1p(sum of the other terms), so every output is the
 * float32 rounding of a value within a few double ulps (relative) of the
 * exact one: about 0.5 ulp of float32 in total, log-softmax near 0 included.
 * Special values follow kernel.h exactly: -inf masks, an all -inf row is fully
 * masked, k logits at +inf share weight 1/k, a NaN anywhere gives a NaN row.
 *
 * attention_v2 (ABI version 2 only; the same file built against the version 1
 * header is a version 1 plugin without it): float32, batched multi-head with
 * GQA/MQA, any strides, varlen, causal in both alignments, sliding window,
 * softcap, ALiBi, sinks, key padding and the LSE, as kernel.h states them,
 * declared in its sa_capabilities; scores, sums and P V in double, so each
 * output is about 0.5 ulp of float32 from the exact value. What it does not
 * declare (bfloat16, float16, fp8, entropy, adaptive) the gate reports as not
 * applicable, never as passed.
 *
 * Build it as a shared library (see CMakeLists.txt next to it), then:
 *     softmax-audit check --plugin ./libexample_softmax.so
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "softmax_audit/kernel.h"

static _Thread_local const char* last_error_text = NULL;

static sa_status invalid(const char* why) {
  last_error_text = why;
  return SA_INVALID_ARGUMENT;
}

static sa_status check_args(sa_dtype dtype, const sa_rows* s, const void* in, const void* out) {
  if (dtype != SA_F32) {
    last_error_text = "example kernel: only SA_F32 is implemented";
    return SA_UNSUPPORTED;
  }
  if (!s || !in || !out) return invalid("example kernel: null pointer");
  if (s->rows < 0 || s->n <= 0) return invalid("example kernel: rows must be >= 0 and n >= 1");
  if (s->in_stride < s->n) return invalid("example kernel: in_stride < n");
  if (!(s->temperature > 0) || isinf(s->temperature))
    return invalid("example kernel: temperature must be finite and > 0");
  return SA_OK;
}

/* What a row is, per kernel.h's special values. */
typedef enum { ROW_NAN, ROW_POSINF, ROW_MASKED, ROW_FINITE } row_kind;

typedef struct {
  row_kind kind;
  long pos_inf;   /* logits at +inf */
  double m;       /* largest finite logit / theta */
  double log_sum; /* log sum exp(l/theta - m) over finite logits */
} row_info;

static row_info analyse(const float* x, int64_t n, double theta) {
  row_info r = {ROW_MASKED, 0, -INFINITY, -INFINITY};
  int64_t arg = -1; /* one position of the largest finite logit */
  for (int64_t i = 0; i < n; ++i) {
    if (isnan(x[i])) {
      r.kind = ROW_NAN;
      return r;
    }
    if (x[i] == INFINITY) ++r.pos_inf;
    else if (x[i] != -INFINITY && (double)x[i] / theta > r.m) {
      r.m = (double)x[i] / theta;
      arg = i;
    }
  }
  if (r.pos_inf > 0) {
    r.kind = ROW_POSINF;
    return r;
  }
  if (arg < 0) return r; /* every logit is -inf */
  r.kind = ROW_FINITE;
  /* The largest term is exactly 1; summing the others separately and using
   * log1p keeps log S accurate to a few ulps even when S is close to 1. */
  double rest = 0.0;
  for (int64_t i = 0; i < n; ++i)
    if (i != arg && x[i] != -INFINITY) rest += exp((double)x[i] / theta - r.m);
  r.log_sum = log1p(rest);
  return r;
}

/* log p_i for one logit of an analysed row (NaN rows handled by the caller). */
static double log_weight(const row_info* r, float x, double theta) {
  switch (r->kind) {
    case ROW_POSINF: return x == INFINITY ? -log((double)r->pos_inf) : -INFINITY;
    case ROW_MASKED: return -INFINITY;
    default: return x == -INFINITY ? -INFINITY : ((double)x / theta - r->m) - r->log_sum;
  }
}

static sa_status rows_op(sa_dtype dtype, const sa_rows* s, const void* in, void* out, int log_out) {
  sa_status st = check_args(dtype, s, in, out);
  if (st != SA_OK) return st;
  if (s->out_stride < s->n) return invalid("example kernel: out_stride < n");
  for (int64_t r = 0; r < s->rows; ++r) {
    const float* x = (const float*)in + r * s->in_stride;
    float* y = (float*)out + r * s->out_stride;
    const row_info info = analyse(x, s->n, s->temperature);
    for (int64_t i = 0; i < s->n; ++i) {
      if (info.kind == ROW_NAN) {
        y[i] = NAN;
        continue;
      }
      const double lw = log_weight(&info, x[i], s->temperature);
      if (log_out) y[i] = (float)lw;
      else if (info.kind == ROW_MASKED) y[i] = 0.0f;
      else y[i] = (float)exp(lw);
    }
  }
  return SA_OK;
}

static sa_status softmax(void* ctx, sa_dtype dtype, const sa_rows* s, const void* in, void* out) {
  (void)ctx;
  return rows_op(dtype, s, in, out, 0);
}

static sa_status log_softmax(void* ctx, sa_dtype dtype, const sa_rows* s, const void* in, void* out) {
  (void)ctx;
  return rows_op(dtype, s, in, out, 1);
}

static sa_status logsumexp(void* ctx, sa_dtype dtype, const sa_rows* s, const void* in, float* lse) {
  (void)ctx;
  sa_status st = check_args(dtype, s, in, lse);
  if (st != SA_OK) return st;
  for (int64_t r = 0; r < s->rows; ++r) {
    const row_info info = analyse((const float*)in + r * s->in_stride, s->n, s->temperature);
    switch (info.kind) {
      case ROW_NAN: lse[r] = NAN; break;
      case ROW_POSINF: lse[r] = INFINITY; break;
      case ROW_MASKED: lse[r] = -INFINITY; break;
      default: lse[r] = (float)(info.m + info.log_sum);
    }
  }
  return SA_OK;
}

#if SA_KERNEL_ABI_VERSION >= 2
/* ---- attention_v2: one query row at a time, in double ---- */

/* Element (row, head) of a tensor: varlen rows are packed, stride_b unused. */
static const float* at(const sa_tensor* t, int64_t b, int64_t h, int64_t row, int varlen) {
  return (const float*)t->data + (varlen ? 0 : b * t->stride_b) + h * t->stride_h + row * t->stride_s;
}

static sa_status attention_v2(void* ctx, const sa_attention_v2_args* a) {
  (void)ctx;
  if (!a || a->struct_size < sizeof(sa_attention_v2_args))
    return invalid("example kernel: attention_v2 arguments from an older caller");
  if (a->qkv_dtype != SA_F32 || a->out_dtype != SA_F32) {
    last_error_text = "example kernel: attention_v2 is float32 only";
    return SA_UNSUPPORTED;
  }
  if (a->adaptive) {
    last_error_text = "example kernel: no adaptive attention";
    return SA_UNSUPPORTED;
  }
  if (a->heads_kv <= 0 || a->heads_q % a->heads_kv != 0)
    return invalid("example kernel: heads_q must be a positive multiple of heads_kv");
  const int varlen = a->cu_seqlens_q != NULL;
  const int64_t group = a->heads_q / a->heads_kv;
  const int64_t total_q = varlen ? a->cu_seqlens_q[a->batch] : 0;
  const int64_t wr = a->causal ? 0 : a->window_right;
  double* w = NULL;        /* the row's scores, then weights, one per key */
  unsigned char* vis = NULL; /* 1: the key is visible to the row (masked keys are never read) */
  int64_t w_size = 0;
  sa_status st = SA_OK;
  for (int64_t b = 0; b < a->batch && st == SA_OK; ++b) {
    const int64_t q0 = varlen ? a->cu_seqlens_q[b] : 0, k0 = varlen ? a->cu_seqlens_k[b] : 0;
    const int64_t lq = varlen ? a->cu_seqlens_q[b + 1] - q0 : a->seqlen_q;
    const int64_t lk = varlen ? a->cu_seqlens_k[b + 1] - k0 : a->seqlen_k;
    const int64_t off = a->alignment == SA_ALIGN_BOTTOM_RIGHT ? lk - lq : 0;
    if (lk > w_size) {
      free(w);
      free(vis);
      w = (double*)malloc((size_t)lk * sizeof(double));
      vis = (unsigned char*)malloc((size_t)lk);
      w_size = lk;
      if (!w || !vis) {
        last_error_text = "example kernel: out of memory";
        st = SA_INTERNAL_ERROR;
        break;
      }
    }
    for (int64_t h = 0; h < a->heads_q; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < lq; ++i) {
        const float* q = at(&a->q, b, h, q0 + i, varlen);
        /* Scores of the visible keys and their max; the sink joins the max. */
        double m = a->sinks ? (double)a->sinks[h] : -INFINITY;
        int nan_row = a->sinks && isnan(a->sinks[h]);
        for (int64_t j = 0; j < lk; ++j) {
          vis[j] = !((a->key_padding_mask &&
                      !a->key_padding_mask[varlen ? k0 + j : b * a->seqlen_k + j]) ||
                     (a->window_left >= 0 && j < i + off - a->window_left) ||
                     (wr >= 0 && j > i + off + wr));
          if (!vis[j]) continue;
          const float* k = at(&a->k, b, hk, k0 + j, varlen);
          double s = 0;
          for (int64_t c = 0; c < a->head_dim; ++c) s += (double)q[c] * k[c];
          s *= a->scale * a->q_descale * a->k_descale;
          if (a->softcap > 0) s = a->softcap * tanh(s / a->softcap);
          if (a->alibi_slopes) s -= a->alibi_slopes[h] * fabs((double)(i + off - j));
          w[j] = s;
          if (isnan(s)) nan_row = 1;
          else if (s > m) m = s;
        }
        /* Weights exp(s - m) and their sum (the sink joins the sum, not P V). */
        double sum = a->sinks && m != -INFINITY ? exp((double)a->sinks[h] - m) : 0.0;
        for (int64_t j = 0; j < lk; ++j)
          if (vis[j]) sum += (w[j] = exp(w[j] - m));
        float* o = (float*)a->out + (varlen ? 0 : b * a->out_stride_b) + h * a->out_stride_h +
                   (q0 + i) * a->out_stride_s;
        for (int64_t c = 0; c < a->head_dim_v; ++c) {
          double acc = 0; /* a NaN value of a visible key reaches acc even at weight 0 */
          for (int64_t j = 0; j < lk; ++j)
            if (vis[j]) acc += w[j] * at(&a->v, b, hk, k0 + j, varlen)[c];
          o[c] = nan_row ? NAN : sum > 0 ? (float)(acc / sum * a->v_descale) : 0.0f;
        }
        if (a->lse) {
          const int64_t r = varlen ? h * total_q + q0 + i : (b * a->heads_q + h) * a->seqlen_q + i;
          a->lse[r] = nan_row ? NAN : sum > 0 ? (float)(m + log(sum)) : -INFINITY;
        }
      }
    }
  }
  free(w);
  free(vis);
  return st;
}

/* What attention_v2 supports; everything else is "not applicable" to the gate. */
static const sa_capabilities example_capabilities = {
    .struct_size = sizeof(sa_capabilities),
    .attention_features = SA_ATTN_BATCHED | SA_ATTN_GQA | SA_ATTN_VARLEN | SA_ATTN_STRIDED |
                          SA_ATTN_CAUSAL | SA_ATTN_WINDOW | SA_ATTN_SOFTCAP | SA_ATTN_ALIBI |
                          SA_ATTN_SINKS | SA_ATTN_KEY_PADDING | SA_ATTN_LSE |
                          SA_ATTN_UNEQUAL_HEAD_DIMS,
    .flags = SA_CAP_DETERMINISTIC};
#endif

static const char* last_error(void* ctx) {
  (void)ctx;
  return last_error_text;
}

static const sa_kernel example_kernel = {
    SA_KERNEL_ABI_VERSION,
    sizeof(sa_kernel),
    "example_outside_softmax",
    "An outside float32 softmax built against softmax_audit/kernel.h only (double accumulation)",
    SA_OP_SOFTMAX | SA_OP_LOG_SOFTMAX | SA_OP_LOGSUMEXP
#if SA_KERNEL_ABI_VERSION >= 2
        | SA_OP_ATTENTION_V2
#endif
    ,
    SA_DTYPE_F32,
    SA_MEMORY_HOST,
    SA_ENTROPY_SHANNON,
    NULL,
    softmax,
    log_softmax,
    logsumexp,
    NULL, /* entropy */
    NULL, /* adaptive_softmax */
    NULL, /* attention */
    NULL, /* merge_entropy_states */
    NULL, /* merge_attention_states */
    last_error,
#if SA_KERNEL_ABI_VERSION >= 2
    &example_capabilities,
    attention_v2,
    NULL, /* softmax_backward */
    NULL, /* log_softmax_backward */
    NULL, /* attention_backward */
    NULL, /* merge_attention_states_n */
#endif
};

#if defined(_WIN32)
#define SA_EXPORT __declspec(dllexport)
#else
#define SA_EXPORT __attribute__((visibility("default")))
#endif

SA_EXPORT const sa_kernel* sa_kernel_entry(void) { return &example_kernel; }
