/* Deliberately broken outside kernels for the gate's tests (one library,
 * several kernels through sa_kernel_entry_at):
 *   0 biased   softmax weights 0.1% too large (an accuracy failure)
 *   1 crash    softmax dereferences NULL when n >= 64
 *   2 hang     softmax never returns when n >= 64
 *   3 overrun  softmax writes 4 KiB past the end of its output when n >= 64
 *   4 canary   softmax writes one element past the end of its output
 *   5 nan      softmax writes NaN into output[0] when n >= 64
 * Everything else is a plain correct float32 softmax/logsumexp. */
#include <math.h>
#include <stddef.h>
#include <unistd.h>

#include "softmax_audit/kernel.h"

enum { BIASED, CRASH, HANG, OVERRUN, CANARY, NAN_OUT, COUNT };

static sa_status row_softmax(const sa_rows* s, const float* in, float* out) {
  for (int64_t r = 0; r < s->rows; ++r) {
    const float* x = in + r * s->in_stride;
    float* y = out + r * s->out_stride;
    double m = -INFINITY, sum = 0;
    int nan = 0;
    for (int64_t i = 0; i < s->n; ++i) {
      if (isnan(x[i])) nan = 1;
      if (x[i] / s->temperature > m) m = x[i] / s->temperature;
    }
    for (int64_t i = 0; i < s->n; ++i) sum += exp(x[i] / s->temperature - m);
    for (int64_t i = 0; i < s->n; ++i) y[i] = nan ? NAN : (float)(exp(x[i] / s->temperature - m) / sum);
  }
  return SA_OK;
}

static sa_status softmax(void* ctx, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  const int which = (int)(size_t)ctx;
  if (t != SA_F32) return SA_UNSUPPORTED;
  if (!s || s->n <= 0 || s->rows < 0) return SA_INVALID_ARGUMENT;
  float* y = (float*)out;
  const int64_t total = (s->rows - 1) * s->out_stride + s->n;
  if (which == CRASH && s->n >= 64) *(volatile float*)NULL = 1.0f;
  if (which == HANG && s->n >= 64)
    for (;;) pause();
  sa_status st = row_softmax(s, (const float*)in, y);
  if (which == BIASED)
    for (int64_t i = 0; i < total; ++i) y[i] *= 1.001f;
  if (which == OVERRUN && s->n >= 64) ((volatile float*)y)[total + 1024] = 1.0f;
  if (which == CANARY) ((volatile float*)y)[total] = 0.0f;
  if (which == NAN_OUT && s->n >= 64) y[0] = NAN;
  return st;
}

static sa_status logsumexp(void* ctx, sa_dtype t, const sa_rows* s, const void* in, float* lse) {
  (void)ctx;
  if (t != SA_F32) return SA_UNSUPPORTED;
  if (!s || s->n <= 0 || s->rows < 0) return SA_INVALID_ARGUMENT;
  for (int64_t r = 0; r < s->rows; ++r) {
    const float* x = (const float*)in + r * s->in_stride;
    double m = -INFINITY, sum = 0;
    for (int64_t i = 0; i < s->n; ++i)
      if (x[i] / s->temperature > m) m = x[i] / s->temperature;
    for (int64_t i = 0; i < s->n; ++i) sum += exp(x[i] / s->temperature - m);
    lse[r] = (float)(m + log(sum));
  }
  return SA_OK;
}

#define KERNEL(idx, nm)                                                                     \
  {SA_KERNEL_ABI_VERSION, sizeof(sa_kernel), nm, "deliberately broken test kernel",         \
   SA_OP_SOFTMAX | SA_OP_LOGSUMEXP, SA_DTYPE_F32, SA_MEMORY_HOST, SA_ENTROPY_SHANNON,        \
   (void*)(size_t)(idx), softmax, NULL, logsumexp, NULL, NULL, NULL, NULL, NULL, NULL}

static const sa_kernel kernels[COUNT] = {KERNEL(BIASED, "biased"), KERNEL(CRASH, "crash"),
                                         KERNEL(HANG, "hang"),     KERNEL(OVERRUN, "overrun"),
                                         KERNEL(CANARY, "canary"), KERNEL(NAN_OUT, "nan")};

__attribute__((visibility("default"))) const sa_kernel* sa_kernel_entry_at(int index) {
  return index >= 0 && index < COUNT ? &kernels[index] : NULL;
}
