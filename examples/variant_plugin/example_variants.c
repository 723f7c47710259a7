/* An outside variant plugin for softmax-audit, built against
 * include/softmax_audit/variant.h alone (plain C99, libm).
 *
 * Two variants:
 *   plugin_softmax        shifted softmax, with a float64 reference and
 *                         theory's prediction (T1: disperses);
 *   plugin_naive_softmax  exp(l_i) / sum exp(l_j) without the max shift: a
 *                         kernel bug the fuzzer should find (+inf logits and
 *                         fully masked rows give NaN).
 * Load it with:  softmax-audit fuzz --plugin ./libsa_variant_example.so --variant all
 */
#include <math.h>
#include <stddef.h>

#include "softmax_audit/variant.h"

static int any_nan_f(const float* l, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (isnan(l[i])) return 1;
  return 0;
}

static int shifted_f32(const float* l, int64_t n, float* p, void* ctx) {
  (void)ctx;
  if (n < 1) return 1;
  if (any_nan_f(l, n)) {
    for (int64_t i = 0; i < n; ++i) p[i] = NAN;
    return 0;
  }
  float m = -INFINITY;
  int64_t pinf = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (l[i] > m) m = l[i];
    if (isinf(l[i]) && l[i] > 0) ++pinf;
  }
  if (m == -INFINITY) { /* fully masked */
    for (int64_t i = 0; i < n; ++i) p[i] = 0.0f;
    return 0;
  }
  if (pinf > 0) {
    for (int64_t i = 0; i < n; ++i) p[i] = (isinf(l[i]) && l[i] > 0) ? 1.0f / (float)pinf : 0.0f;
    return 0;
  }
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    p[i] = expf(l[i] - m);
    s += p[i];
  }
  for (int64_t i = 0; i < n; ++i) p[i] /= s;
  return 0;
}

static int shifted_f64(const double* l, int64_t n, double* p, void* ctx) {
  (void)ctx;
  if (n < 1) return 1;
  double m = -INFINITY;
  int64_t pinf = 0, nan = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (isnan(l[i])) nan = 1;
    if (l[i] > m) m = l[i];
    if (isinf(l[i]) && l[i] > 0) ++pinf;
  }
  if (nan) {
    for (int64_t i = 0; i < n; ++i) p[i] = NAN;
    return 0;
  }
  if (m == -INFINITY) {
    for (int64_t i = 0; i < n; ++i) p[i] = 0.0;
    return 0;
  }
  if (pinf > 0) {
    for (int64_t i = 0; i < n; ++i) p[i] = (isinf(l[i]) && l[i] > 0) ? 1.0 / (double)pinf : 0.0;
    return 0;
  }
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    p[i] = exp(l[i] - m);
    s += p[i];
  }
  for (int64_t i = 0; i < n; ++i) p[i] /= s;
  return 0;
}

/* The bug: no max shift, so exp(+inf)/inf and 0/0 are NaN. */
static int naive_f32(const float* l, int64_t n, float* p, void* ctx) {
  (void)ctx;
  if (n < 1) return 1;
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    p[i] = expf(l[i]);
    s += p[i];
  }
  for (int64_t i = 0; i < n; ++i) p[i] /= s;
  return 0;
}

static sa_dispersion predict_t1(double gap, void* ctx) {
  (void)gap;
  (void)ctx;
  return SA_DISPERSION_TO_ZERO;
}

static const sa_variant variants[] = {
    {SA_VARIANT_ABI_VERSION, "plugin_softmax", "exp(l_i - max)/sum exp(l_j - max) (plugin, C)", 0, NULL,
     shifted_f32, shifted_f64, NULL, predict_t1, "T1 (Lemma 2.1)", NULL},
    {SA_VARIANT_ABI_VERSION, "plugin_naive_softmax", "exp(l_i)/sum exp(l_j), no max shift (plugin, C)", 0,
     NULL, naive_f32, shifted_f64, NULL, predict_t1, "T1 (Lemma 2.1)", NULL},
};

#if defined(_WIN32)
#define SA_EXPORT __declspec(dllexport)
#else
#define SA_EXPORT __attribute__((visibility("default")))
#endif

SA_EXPORT const sa_variant* sa_variant_entry_at(int index) {
  if (index < 0 || index >= (int)(sizeof variants / sizeof variants[0])) return NULL;
  return &variants[index];
}
