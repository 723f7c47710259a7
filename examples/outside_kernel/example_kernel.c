/* An outside kernel: softmax, log-softmax and log-sum-exp for float32,
 * written against softmax_audit/kernel.h alone (plain C11, libm).
 *
 * Accuracy: each row is shifted by its largest finite logit and summed in
 * double, with log S = log1p(sum of the other terms), so every output is the
 * float32 rounding of a value within a few double ulps (relative) of the
 * exact one: about 0.5 ulp of float32 in total, log-softmax near 0 included.
 * Special values follow kernel.h exactly: -inf masks, an all -inf row is fully
 * masked, k logits at +inf share weight 1/k, a NaN anywhere gives a NaN row.
 *
 * Build it as a shared library (see CMakeLists.txt next to it), then:
 *     softmax-audit check --plugin ./libexample_softmax.so
 */
#include <math.h>
#include <stddef.h>

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

static const char* last_error(void* ctx) {
  (void)ctx;
  return last_error_text;
}

static const sa_kernel example_kernel = {
    SA_KERNEL_ABI_VERSION,
    sizeof(sa_kernel),
    "example_outside_softmax",
    "An outside float32 softmax built against softmax_audit/kernel.h only (double accumulation)",
    SA_OP_SOFTMAX | SA_OP_LOG_SOFTMAX | SA_OP_LOGSUMEXP,
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
    last_error};

#if defined(_WIN32)
#define SA_EXPORT __declspec(dllexport)
#else
#define SA_EXPORT __attribute__((visibility("default")))
#endif

SA_EXPORT const sa_kernel* sa_kernel_entry(void) { return &example_kernel; }
