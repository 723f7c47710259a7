/* Test plugin for the second input row (variant.h ABI 3 and 4, issue 36), plain
 * C99 against include/softmax_audit/variant.h:
 *
 *   two_diff            differential attention softmax(A1) - softmax(A2)/2,
 *                       A2 the second row (SA_IN2_LOGITS), correct;
 *   two_diff_reversed   the same, but its float32 kernel reads the second row
 *                       back to front (in2[n-1-j]): a wrong second-row
 *                       handling its float64 reference does not share, so its
 *                       own rounding-bound claim fails;
 *   two_select_no_relu  selective attention softmax(l - ReLU(s)) whose float32
 *                       kernel forgets the ReLU (subtracts negative s too);
 *   two_laser_mask_v    LASER log sum p_j e^{v_j} (SA_IN2_PER_KEY, one output)
 *                       whose kernel takes the max of the values over masked
 *                       keys too and, when every finite logit is masked,
 *                       returns that max: a masked key's value leaks.
 *
 * Streaming with a second row (variant.h ABI 4):
 *   two_diff_stream             two_diff with two online (m, S) states, one per
 *                               row, merged and finished correctly (bounded);
 *   two_diff_stream_no_rescale2 the same, but its merge rescales A1's state and
 *                               adds A2's sums without rescaling the one with
 *                               the smaller maximum: caught with a shrunk split.
 */
#include <math.h>
#include <stddef.h>

#include "softmax_audit/variant.h"

static int softmax_f64(const double* l, int64_t n, double* p) {
  double m = -INFINITY, s = 0.0;
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
      p[i] = (pinf > 0 && isinf(l[i]) && l[i] > 0) ? 1.0 / (double)pinf : 0.0;
    return 0;
  }
  for (int64_t i = 0; i < n; ++i) {
    p[i] = l[i] == -INFINITY ? 0.0 : exp(l[i] - m);
    s += p[i];
  }
  for (int64_t i = 0; i < n; ++i) p[i] /= s;
  return 0;
}

static int softmax_f32(const float* l, int64_t n, float* p) {
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
    p[i] = l[i] == -INFINITY ? 0.0f : expf(l[i] - m);
    s += p[i];
  }
  for (int64_t i = 0; i < n; ++i) p[i] /= s;
  return 0;
}

#define MAXN 64

static int diff_f32(const float* a, const float* b, int64_t n, float* o, void* ctx) {
  float p2[MAXN];
  (void)ctx;
  if (n < 1 || n > MAXN) return 1;
  softmax_f32(a, n, o);
  softmax_f32(b, n, p2);
  for (int64_t i = 0; i < n; ++i) o[i] -= 0.5f * p2[i];
  return 0;
}

static int diff_reversed_f32(const float* a, const float* b, int64_t n, float* o, void* ctx) {
  float rb[MAXN];
  if (n < 1 || n > MAXN) return 1;
  for (int64_t i = 0; i < n; ++i) rb[i] = b[n - 1 - i]; /* the planted bug */
  return diff_f32(a, rb, n, o, ctx);
}

static int diff_f64(const double* a, const double* b, int64_t n, double* o, void* ctx) {
  double p2[MAXN];
  (void)ctx;
  if (n < 1 || n > MAXN) return 1;
  softmax_f64(a, n, o);
  softmax_f64(b, n, p2);
  for (int64_t i = 0; i < n; ++i) o[i] -= 0.5 * p2[i];
  return 0;
}

static double diff_bound(const double* a, const double* b, int64_t n, void* ctx) {
  /* T7 for each softmax (|l| <= 13 in the fuzzer: spread <= 26), halved for A2, + 1. */
  (void)a;
  (void)b;
  (void)ctx;
  return 1.5 * 2.0 * ((double)n + 2.0 + 2.0 * 26.0) + 1.0;
}

static int select_no_relu_f32(const float* l, const float* s, int64_t n, float* o, void* ctx) {
  float z[MAXN];
  (void)ctx;
  if (n < 1 || n > MAXN) return 1;
  for (int64_t i = 0; i < n; ++i) z[i] = l[i] - s[i]; /* the planted bug: no ReLU */
  return softmax_f32(z, n, o);
}

static int select_f64(const double* l, const double* s, int64_t n, double* o, void* ctx) {
  double z[MAXN];
  (void)ctx;
  if (n < 1 || n > MAXN) return 1;
  for (int64_t i = 0; i < n; ++i) z[i] = l[i] - (s[i] > 0.0 ? s[i] : 0.0);
  return softmax_f64(z, n, o);
}

static double select_bound(const double* l, const double* s, int64_t n, void* ctx) {
  (void)l;
  (void)s;
  (void)ctx;
  return 2.0 * ((double)n + 2.0 + 2.0 * 52.0) + 2.0 * 26.0;
}

/* LASER whose max of the values runs over masked keys too: harmless while a
 * key is live (m_v only stabilises), but a fully masked row returns m_v. */
static int laser_mask_v_f32(const float* l, const float* v, int64_t n, float* o, void* ctx) {
  float m = -INFINITY, mv = -INFINITY, S = 0.0f, T = 0.0f;
  (void)ctx;
  if (n < 1) return 1;
  for (int64_t j = 0; j < n; ++j) {
    if (isnan(l[j])) {
      o[0] = NAN;
      return 0;
    }
    if (l[j] > m) m = l[j];
    if (v[j] > mv) mv = v[j]; /* the planted bug: masked keys' values count */
  }
  if (m == -INFINITY) {
    o[0] = mv; /* should be 0 (variant.h: a fully masked row gives 0) */
    return 0;
  }
  for (int64_t j = 0; j < n; ++j) {
    float e;
    if (l[j] == -INFINITY) continue;
    e = isinf(m) ? (l[j] == m ? 1.0f : 0.0f) : expf(l[j] - m);
    S += e;
    T += e * expf(v[j] - mv);
  }
  o[0] = mv + logf(T / S);
  return 0;
}

static int laser_f64(const double* l, const double* v, int64_t n, double* o, void* ctx) {
  double m = -INFINITY, mv = -INFINITY, S = 0.0, T = 0.0;
  (void)ctx;
  if (n < 1) return 1;
  for (int64_t j = 0; j < n; ++j) {
    if (isnan(l[j])) {
      o[0] = NAN;
      return 0;
    }
    if (l[j] > m) m = l[j];
  }
  if (m == -INFINITY) {
    o[0] = 0.0;
    return 0;
  }
  for (int64_t j = 0; j < n; ++j)
    if (l[j] != -INFINITY && v[j] > mv) mv = v[j];
  for (int64_t j = 0; j < n; ++j) {
    double e;
    if (l[j] == -INFINITY) continue;
    e = isinf(m) ? (l[j] == m ? 1.0 : 0.0) : exp(l[j] - m);
    S += e;
    T += e * exp(v[j] - mv);
  }
  o[0] = mv + log(T / S);
  return 0;
}

static double laser_bound(const double* l, const double* v, int64_t n, void* ctx) {
  (void)l;
  (void)v;
  (void)ctx;
  return 2.0 * (double)n + 8.0 + 2.0 * 26.0 + 3.0 * 26.0 + 13.0;
}

/* ---- streaming (ABI 4): state (m1, S1, m2, S2) ---- */
typedef struct {
  float m1, S1, m2, S2;
} diff_state;

static void online_add(float* m, float* S, float a) {
  if (a == -INFINITY) return;
  if (a > *m) {
    *S = (*m == -INFINITY ? 0.0f : *S * expf(*m - a)) + 1.0f;
    *m = a;
  } else {
    *S += expf(a - *m);
  }
}

static void online_merge(float* m, float* S, float bm, float bS, int rescale) {
  if (bm == -INFINITY) return;
  if (*m == -INFINITY) {
    *m = bm;
    *S = bS;
  } else if (!rescale) {
    *S += bS; /* the planted bug: no rescale by e^{-|m - bm|} */
    if (bm > *m) *m = bm;
  } else if (*m >= bm) {
    *S += bS * expf(bm - *m);
  } else {
    *S = *S * expf(*m - bm) + bS;
    *m = bm;
  }
}

static void diff_init(void* st, void* ctx) {
  diff_state* s = (diff_state*)st;
  (void)ctx;
  s->m1 = s->m2 = -INFINITY;
  s->S1 = s->S2 = 0.0f;
}

static int diff_push2(void* st, const float* a, const float* b, int64_t n, int64_t off,
                      int64_t row_n, void* ctx) {
  diff_state* s = (diff_state*)st;
  (void)off;
  (void)row_n;
  (void)ctx;
  for (int64_t k = 0; k < n; ++k) {
    online_add(&s->m1, &s->S1, a[k]);
    online_add(&s->m2, &s->S2, b[k]);
  }
  return 0;
}

static int diff_merge(void* left, const void* right, void* ctx) {
  diff_state* a = (diff_state*)left;
  const diff_state* b = (const diff_state*)right;
  (void)ctx;
  online_merge(&a->m1, &a->S1, b->m1, b->S1, 1);
  online_merge(&a->m2, &a->S2, b->m2, b->S2, 1);
  return 0;
}

static int diff_merge_no_rescale2(void* left, const void* right, void* ctx) {
  diff_state* a = (diff_state*)left;
  const diff_state* b = (const diff_state*)right;
  (void)ctx;
  online_merge(&a->m1, &a->S1, b->m1, b->S1, 1);
  online_merge(&a->m2, &a->S2, b->m2, b->S2, 0);
  return 0;
}

static int diff_finish2(const void* st, const float* a, const float* b, int64_t n, float* o,
                        void* ctx) {
  const diff_state* s = (const diff_state*)st;
  (void)ctx;
  for (int64_t i = 0; i < n; ++i) {
    const float p1 = a[i] == -INFINITY ? 0.0f : expf(a[i] - s->m1) / s->S1;
    const float p2 = b[i] == -INFINITY ? 0.0f : expf(b[i] - s->m2) / s->S2;
    o[i] = p1 - 0.5f * p2;
  }
  return 0;
}

static double diff_stream_bound(const double* a, const double* b, int64_t n, int64_t chunks,
                                void* ctx) {
  /* The online softmax bound 4n + 3 chunks + 2 spread - 2 (docs/variants.md) per row, spread
   * <= 26 in the fuzzer's domain, halved for A2, + 1 for the subtraction. */
  (void)a;
  (void)b;
  (void)ctx;
  return 1.5 * (4.0 * (double)n + 3.0 * (double)chunks + 2.0 * 26.0 - 2.0) + 1.0;
}

#define V3_HEAD(name, formula) SA_VARIANT_ABI_VERSION, name, formula, 0, NULL
#define NO_ONE_ROW NULL, NULL, NULL, NULL, NULL, NULL
#define NO_STREAM SA_STREAM_NOT_SUPPLIED, NULL, 0, NULL, NULL, NULL, NULL, NULL
#define NO_STREAM2 NULL, NULL, NULL

static const sa_variant variants[] = {
    {V3_HEAD("two_diff", "softmax(A1) - softmax(A2)/2"), NO_ONE_ROW, NO_STREAM,
     "A2: the second logit row", SA_IN2_LOGITS, SA_OUT_WEIGHTS, diff_f32, diff_f64, diff_bound,
     NO_STREAM2},
    {V3_HEAD("two_diff_reversed", "softmax(A1) - softmax(A2)/2, kernel reads A2 reversed"),
     NO_ONE_ROW, NO_STREAM, "A2: the second logit row", SA_IN2_LOGITS, SA_OUT_WEIGHTS,
     diff_reversed_f32, diff_f64, diff_bound, NO_STREAM2},
    {V3_HEAD("two_select_no_relu", "softmax(l - ReLU(s)), kernel without the ReLU"), NO_ONE_ROW,
     NO_STREAM, "s: selection logits", SA_IN2_PER_KEY, SA_OUT_WEIGHTS, select_no_relu_f32,
     select_f64, select_bound, NO_STREAM2},
    {V3_HEAD("two_laser_mask_v", "log sum p_j e^{v_j}, masked values leak"), NO_ONE_ROW, NO_STREAM,
     "v: a value per key", SA_IN2_PER_KEY, SA_OUT_SCALAR, laser_mask_v_f32, laser_f64, laser_bound,
     NO_STREAM2},
    {V3_HEAD("two_diff_stream", "softmax(A1) - softmax(A2)/2, streamed with two (m, S) states"),
     NO_ONE_ROW, SA_STREAM_BOUNDED, NULL, sizeof(diff_state), diff_init, NULL, diff_merge, NULL,
     NULL, "A2: the second logit row", SA_IN2_LOGITS, SA_OUT_WEIGHTS, diff_f32, diff_f64,
     diff_bound, diff_push2, diff_finish2, diff_stream_bound},
    {V3_HEAD("two_diff_stream_no_rescale2",
             "softmax(A1) - softmax(A2)/2, streamed; A2's merge does not rescale"),
     NO_ONE_ROW, SA_STREAM_BOUNDED, NULL, sizeof(diff_state), diff_init, NULL,
     diff_merge_no_rescale2, NULL, NULL, "A2: the second logit row", SA_IN2_LOGITS, SA_OUT_WEIGHTS,
     diff_f32, diff_f64, diff_bound, diff_push2, diff_finish2, diff_stream_bound},
};

#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
const sa_variant*
sa_variant_entry_at(int index) {
  if (index < 0 || index >= (int)(sizeof variants / sizeof variants[0])) return NULL;
  return &variants[index];
}
