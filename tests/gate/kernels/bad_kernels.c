/* Deliberately broken outside kernels for the gate's tests (one library,
 * several kernels through sa_kernel_entry_at):
 *   0 biased   softmax weights 0.1% too large (an accuracy failure)
 *   1 crash    softmax dereferences NULL when n >= 64
 *   2 hang     softmax never returns when n >= 64
 *   3 overrun  softmax writes 4 KiB past the end of its output when n >= 64
 *   4 canary   softmax writes one element past the end of its output
 *   5 nan      softmax writes NaN into output[0] when n >= 64
 *   6 comma    correct, but its name holds a comma and a quote (CSV/JSON escaping)
 *   7 remainder softmax in blocks of 8 with the remainder loop forgotten: the
 *              last n % 8 items of a row are left out of the sum and their
 *              weights are 0 (right at every power of two n >= 8)
 * Everything else is a plain correct float32 softmax/logsumexp. */
#include <math.h>
#include <stddef.h>
#include <unistd.h>

/* The correct example kernel's static functions (rows_op, logsumexp, ...),
 * with its entry point renamed out of the way. */
#define sa_kernel_entry sa_gate_example_entry_unused
#include "example_kernel.c"
#undef sa_kernel_entry

enum { BIASED, CRASH, HANG, OVERRUN, CANARY, NAN_OUT, COMMA, REMAINDER, COUNT };

static sa_status bad_softmax(void* ctx, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  const int which = (int)(size_t)ctx;
  if (t != SA_F32) return SA_UNSUPPORTED;
  if (!s || s->n <= 0 || s->rows < 0) return SA_INVALID_ARGUMENT;
  float* y = (float*)out;
  const int64_t total = s->rows > 0 ? (s->rows - 1) * s->out_stride + s->n : 0;
  if (which == CRASH && s->n >= 64) *(volatile float*)NULL = 1.0f;
  if (which == HANG && s->n >= 64)
    for (;;) pause();
  if (which == REMAINDER) {
    /* Only the whole blocks of 8: the rows as if n were n - n % 8. */
    const sa_status ast = check_args(t, s, in, out);
    if (ast != SA_OK) return ast;
    if (s->out_stride < s->n) return invalid("remainder kernel: out_stride < n");
    sa_rows blocks = *s;
    blocks.n = s->n - s->n % 8;
    if (blocks.n > 0) {
      const sa_status bst = rows_op(t, &blocks, in, out, 0);
      if (bst != SA_OK) return bst;
    }
    for (int64_t r = 0; r < s->rows; ++r)
      for (int64_t i = blocks.n; i < s->n; ++i) y[r * s->out_stride + i] = 0.0f;
    return SA_OK;
  }
  sa_status st = rows_op(t, s, in, out, 0);
  if (st != SA_OK) return st;
  if (which == BIASED)
    for (int64_t i = 0; i < total; ++i) y[i] *= 1.001f;
  if (which == OVERRUN && s->n >= 64) ((volatile float*)y)[total + 1024] = 1.0f;
  if (which == CANARY) ((volatile float*)y)[total] = 0.0f;
  if (which == NAN_OUT && s->n >= 64) y[0] = NAN;
  return st;
}

#define KERNEL(idx, nm)                                                                    \
  {                                                                                        \
    SA_KERNEL_ABI_VERSION, sizeof(sa_kernel), nm, "deliberately broken test kernel",       \
        SA_OP_SOFTMAX | SA_OP_LOGSUMEXP, SA_DTYPE_F32, SA_MEMORY_HOST, SA_ENTROPY_SHANNON, \
        (void*)(size_t)(idx), bad_softmax, NULL, logsumexp, NULL, NULL, NULL, NULL, NULL,  \
        last_error                                                                         \
  }

static const sa_kernel kernels[COUNT] = {KERNEL(BIASED, "biased"),
                                         KERNEL(CRASH, "crash"),
                                         KERNEL(HANG, "hang"),
                                         KERNEL(OVERRUN, "overrun"),
                                         KERNEL(CANARY, "canary"),
                                         KERNEL(NAN_OUT, "nan"),
                                         KERNEL(COMMA, "correct, \"quoted\""),
                                         KERNEL(REMAINDER, "remainder")};

__attribute__((visibility("default"))) const sa_kernel* sa_kernel_entry_at(int index) {
  return index >= 0 && index < COUNT ? &kernels[index] : NULL;
}
