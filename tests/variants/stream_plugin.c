/* Test plugin for the streamability column (issue 36), plain C99 against
 * include/softmax_audit/variant.h:
 *
 *   stream_softmax             shifted softmax with a correct online (m, S)
 *                              state: streamable, within the generic bound;
 *   stream_softmax_no_rescale  the same, but its merge adds the two sums
 *                              without rescaling the one with the smaller max
 *                              (S = S_a + S_b): the classic flash-attention
 *                              merge bug, which the fuzzer must catch with a
 *                              shrunk split;
 *   stream_softmax_bad_identity  a correct merge whose identity state is
 *                              (0, 1) instead of (-inf, 0): not neutral;
 *   stream_v1_softmax          a version-1 plugin (its struct ends at ctx):
 *                              loads, streamability "not supplied".
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "softmax_audit/variant.h"

/* Shifted softmax with variant.h's special values (so that only the stream
 * cell can fail in these variants). */
static int softmax_f32(const float* l, int64_t n, float* p, void* ctx) {
  (void)ctx;
  if (n < 1) return 1;
  float m = -INFINITY, s = 0.0f;
  int64_t pinf = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (isnan(l[i])) {
      for (int64_t k = 0; k < n; ++k) p[k] = NAN;
      return 0;
    }
    if (l[i] > m) m = l[i];
    if (isinf(l[i]) && l[i] > 0) ++pinf;
  }
  if (m == -INFINITY || pinf > 0) {
    for (int64_t i = 0; i < n; ++i)
      p[i] = (pinf > 0 && isinf(l[i]) && l[i] > 0) ? 1.0f / (float)pinf : 0.0f;
    return 0;
  }
  for (int64_t i = 0; i < n; ++i) {
    p[i] = expf(l[i] - m);
    s += p[i];
  }
  for (int64_t i = 0; i < n; ++i) p[i] /= s;
  return 0;
}

static int softmax_f64(const double* l, int64_t n, double* p, void* ctx) {
  (void)ctx;
  if (n < 1) return 1;
  double m = -INFINITY, s = 0.0;
  for (int64_t i = 0; i < n; ++i)
    if (l[i] > m) m = l[i];
  for (int64_t i = 0; i < n; ++i) {
    p[i] = exp(l[i] - m);
    s += p[i];
  }
  for (int64_t i = 0; i < n; ++i) p[i] /= s;
  return 0;
}

typedef struct online {
  float m, s;
} online;

static void init_ok(void* st, void* ctx) {
  (void)ctx;
  online* o = (online*)st;
  o->m = -INFINITY;
  o->s = 0.0f;
}

static void init_bad(void* st, void* ctx) {
  (void)ctx;
  online* o = (online*)st;
  o->m = 0.0f; /* the bug: (0, 1) is the state of a chunk holding one logit 0 */
  o->s = 1.0f;
}

static int push(void* st, const float* l, int64_t n, int64_t off, int64_t row_n, void* ctx) {
  (void)off;
  (void)row_n;
  (void)ctx;
  online* o = (online*)st;
  for (int64_t i = 0; i < n; ++i) {
    if (l[i] > o->m) {
      o->s = (o->m == -INFINITY ? 0.0f : o->s * expf(o->m - l[i])) + 1.0f;
      o->m = l[i];
    } else {
      o->s += expf(l[i] - o->m);
    }
  }
  return 0;
}

static int merge_ok(void* a, const void* b, void* ctx) {
  (void)ctx;
  online* x = (online*)a;
  const online* y = (const online*)b;
  if (y->m == -INFINITY) return 0;
  if (x->m == -INFINITY) {
    *x = *y;
    return 0;
  }
  if (x->m >= y->m) {
    x->s += y->s * expf(y->m - x->m);
  } else {
    x->s = x->s * expf(x->m - y->m) + y->s;
    x->m = y->m;
  }
  return 0;
}

/* The bug: the sums are added as if both were relative to the same max. */
static int merge_no_rescale(void* a, const void* b, void* ctx) {
  (void)ctx;
  online* x = (online*)a;
  const online* y = (const online*)b;
  x->s += y->s;
  if (y->m > x->m) x->m = y->m;
  return 0;
}

static int finish(const void* st, const float* l, int64_t n, float* p, void* ctx) {
  (void)ctx;
  const online* o = (const online*)st;
  for (int64_t i = 0; i < n; ++i) p[i] = expf(l[i] - o->m) / o->s;
  return 0;
}

static sa_dispersion predict_t1(double gap, void* ctx) {
  (void)gap;
  (void)ctx;
  return SA_DISPERSION_TO_ZERO;
}

static const sa_variant variants[] = {
    {SA_VARIANT_ABI_VERSION, "stream_softmax", "softmax with an online (m, S) state", 0, NULL,
     softmax_f32, softmax_f64, NULL, predict_t1, "T1 (Lemma 2.1)", NULL, SA_STREAM_BOUNDED, NULL,
     (int64_t)sizeof(online), init_ok, push, merge_ok, finish, NULL},
    {SA_VARIANT_ABI_VERSION, "stream_softmax_no_rescale",
     "softmax whose merge adds S_a + S_b without rescaling", 0, NULL, softmax_f32, softmax_f64,
     NULL, predict_t1, "T1 (Lemma 2.1)", NULL, SA_STREAM_BOUNDED, NULL, (int64_t)sizeof(online),
     init_ok, push, merge_no_rescale, finish, NULL},
    {SA_VARIANT_ABI_VERSION, "stream_softmax_bad_identity",
     "softmax whose identity state is (0, 1)", 0, NULL, softmax_f32, softmax_f64, NULL, predict_t1,
     "T1 (Lemma 2.1)", NULL, SA_STREAM_BOUNDED, NULL, (int64_t)sizeof(online), init_bad, push,
     merge_ok, finish, NULL},
};

/* Exactly the version-1 layout: a plugin built against the old header. */
typedef struct sa_variant_v1 {
  uint32_t abi_version;
  const char* name;
  const char* formula;
  int32_t wrong_formulation;
  const char* wrong_of;
  int (*forward_f32)(const float*, int64_t, float*, void*);
  int (*forward_f64)(const double*, int64_t, double*, void*);
  double (*f32_error_bound)(const double*, int64_t, void*);
  sa_dispersion (*predict_dispersion)(double, void*);
  const char* prediction_source;
  void* ctx;
} sa_variant_v1;

static const sa_variant_v1 v1_variant = {1u,
                                         "stream_v1_softmax",
                                         "softmax from a version-1 plugin",
                                         0,
                                         NULL,
                                         softmax_f32,
                                         softmax_f64,
                                         NULL,
                                         predict_t1,
                                         "T1",
                                         NULL};

#define SA_EXPORT __attribute__((visibility("default")))

SA_EXPORT const sa_variant* sa_variant_entry_at(int index) {
  const int k = (int)(sizeof variants / sizeof variants[0]);
  if (index >= 0 && index < k) return &variants[index];
  if (index == k) return (const sa_variant*)(const void*)&v1_variant;
  return NULL;
}
