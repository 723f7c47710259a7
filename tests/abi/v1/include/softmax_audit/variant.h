/* softmax-audit variant interface, ABI version 1.
 *
 * A softmax *variant* is a normalisation proposed instead of softmax (see
 * docs: docs/variants.md). The fuzzer (`softmax-audit fuzz`) runs every
 * property of its matrix against any variant: the built-in ones, ones
 * registered in C++ (variants/variant.hpp, SA_REGISTER_VARIANT), and ones
 * built elsewhere as a shared library against this header alone (plain C99).
 *
 * A plugin library exports
 *
 *     const sa_variant* sa_variant_entry_at(int index);   // NULL past the last
 *
 * returning pointers that stay valid while the library is loaded.
 *
 * Semantics every variant is held to (the fuzzer checks them, it does not
 * assume them):
 * - One row of n >= 1 logits in, n weights out, host memory, synchronous.
 * - "n" of a length-dependent variant (SSMax, sigmoid with b = -log n, ReLU/n)
 *   counts the items that are not masked (-inf).
 * - -inf is a mask: weight exactly 0, the other weights as if the item were
 *   absent; a fully masked row gives all zeros.
 * - NaN anywhere: every weight of the row is NaN.
 * - +inf: no NaN; the limit as those logits grow.
 * - Return 0 on success, nonzero for an argument the function rejects.
 */
#ifndef SOFTMAX_AUDIT_VARIANT_H
#define SOFTMAX_AUDIT_VARIANT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SA_VARIANT_ABI_VERSION 1u

/* What theory says the largest weight does as n grows, under bounded logits
 * whose top logit leads the rest by a fixed gap g (see predict_dispersion). */
typedef enum sa_dispersion {
  SA_DISPERSION_UNKNOWN = -1, /* no prediction */
  SA_DISPERSION_TO_ZERO = 0,  /* disperses: largest weight -> 0 */
  SA_DISPERSION_BOUNDED = 1,  /* stays in (0,1), bounded away from 0 and 1 */
  SA_DISPERSION_TO_ONE = 2    /* sharpens: largest weight -> 1 (or is exactly 1) */
} sa_dispersion;

typedef struct sa_variant {
  uint32_t abi_version; /* SA_VARIANT_ABI_VERSION */
  const char* name;     /* unique, [A-Za-z0-9_.-] */
  const char* formula;  /* one line, for reports */
  /* 0 for an intended (correct) formulation; 1 for a known-wrong statement of
   * another variant (name it in wrong_of), so the matrix shows the difference. */
  int32_t wrong_formulation;
  const char* wrong_of; /* name of the variant it mis-states, or NULL */

  /* The kernel under test: float32 weights of one row. Required. */
  int (*forward_f32)(const float* logits, int64_t n, float* weights, void* ctx);
  /* A reference in float64 (optional, NULL if none): the fuzzer checks the
   * mathematical properties on it and holds forward_f32 to it within
   * f32_error_bound. */
  int (*forward_f64)(const double* logits, int64_t n, double* weights, void* ctx);
  /* Bound on max_i |forward_f32 - exact| for this row, in units of
   * u = 2^-24 (absolute; weights are O(1)). Optional: NULL uses the generic
   * softmax rounding bound of docs/theory.md T7 (2(n + 2 + 2*spread) + 2 max|l|). */
  double (*f32_error_bound)(const double* logits, int64_t n, void* ctx);
  /* Theory's prediction of dispersion at gap g (optional, NULL = unknown). */
  sa_dispersion (*predict_dispersion)(double gap, void* ctx);
  const char* prediction_source; /* where the prediction comes from, or NULL */
  void* ctx;                     /* passed back to every function */
} sa_variant;

typedef const sa_variant* (*sa_variant_entry_at_fn)(int index);

#ifdef __cplusplus
}
#endif

#endif /* SOFTMAX_AUDIT_VARIANT_H */
