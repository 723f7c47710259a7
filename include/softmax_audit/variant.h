/* softmax-audit variant interface, ABI version 4 (versions 1 to 3 still load).
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
 *
 * Versions. abi_version says how much of struct sa_variant the plugin
 * filled in; every version only appends fields, and the loader reads no field
 * past the version the plugin states, so a plugin built against an older
 * header keeps loading unchanged:
 *   1: up to ctx;
 *   2: appends the streaming interface (state/push/merge/finish, below);
 *   3: appends an optional second input row (in2, below);
 *   4: appends streaming with a second row (state_push2, state_finish2,
 *      stream_error_bound2, below).
 * The version-1, -2 and -3 headers are kept, frozen, in tests/abi/v1/include,
 * tests/abi/v2/include and tests/abi/v3/include; the example plugin is built
 * against each and loaded by tests/variants/stream_test.cpp and
 * tests/variants/two_row_test.cpp.
 *
 * Streaming (version 2, optional; leave the function pointers NULL and
 * stream_kind SA_STREAM_NOT_SUPPLIED when there is none). A streamable
 * normaliser folds a row chunk by chunk into a fixed-size state (as a flash
 * attention kernel does with (m, S) for softmax), merges the states of
 * adjacent chunks, and finishes the weights from the merged state and the
 * row. The fuzzer splits rows at random into contiguous chunks, pushes each
 * into a fresh identity state, merges the states of adjacent chunks in a
 * random tree order (left chunk first), finishes, and holds the result to the
 * whole row: bit for bit against forward_f32 when stream_kind is
 * SA_STREAM_BITWISE, within stream_error_bound of forward_f64 (the same
 * absolute units as f32_error_bound) when SA_STREAM_BOUNDED. It also checks
 * that the identity state is neutral: merging it on either side changes no
 * finished weight by a single bit.
 *
 * A second input row (version 3, optional; in2 NULL for a one-row variant).
 * Some normalisations need a second row per query: differential attention a
 * second logit row A2, LASER the values, selective attention the accumulated
 * selection penalty. Such a variant sets in2 to a one-line statement of what
 * the row means (shown by `fuzz --list`), in2_kind to how the row moves when
 * the fuzzer transforms the first one, out_kind to the output's shape, and
 * supplies forward2_f32 (required), forward2_f64 and f32_error_bound2
 * (optional, as their one-row counterparts). forward_f32 may then be NULL:
 * the fuzzer calls only the two-row functions. The second row is always
 * finite (the fuzzer draws it from the same grid as the logits); the special
 * values of the first row keep the semantics above, and a masked item (-inf
 * in the first row) is absent from both rows.
 *   SA_IN2_LOGITS: a second logit row over the same keys: shifted, masked
 *     (-inf) and permuted together with the first;
 *   SA_IN2_PER_KEY: a per-key quantity (values, penalties): permuted with the
 *     first row and dropped with a masked key, never shifted.
 *   SA_OUT_WEIGHTS: n outputs, one per key (held to the weight properties);
 *   SA_OUT_SCALAR: one output per row (LASER's log sum p_j e^{v_j}); the
 *     weight properties (sum, [0,1], monotonicity, dispersion) are n/a, a
 *     fully masked row gives 0, and the output need not be O(1) (bounds stay
 *     absolute in units of 2^-24).
 * A version-3 two-row variant cannot stream (state_push carries no second
 * row): it sets stream_kind SA_STREAM_NOT_SUPPLIED or SA_STREAM_NO.
 *
 * Streaming with a second row (version 4, optional). A two-row variant that
 * streams (as differential attention with two (m, S) states, or LASER with
 * (m, S) over the logits and (M, T) over logits + values) sets stream_kind,
 * state_bytes, state_init and state_merge as a one-row variant does, and in
 * place of state_push / state_finish / stream_error_bound supplies
 * state_push2 (each chunk of the first row with the same keys' chunk of the
 * second), state_finish2 (out as forward2_f32's) and, for SA_STREAM_BOUNDED,
 * optionally stream_error_bound2 (NULL: the generic online softmax bound of
 * the first row plus that of the second). The fuzzer checks it as it checks
 * a one-row stream, against forward2_f32 (bitwise) or forward2_f64.
 */
#ifndef SOFTMAX_AUDIT_VARIANT_H
#define SOFTMAX_AUDIT_VARIANT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SA_VARIANT_ABI_VERSION 4u
#define SA_VARIANT_ABI_VERSION_MIN 1u /* the oldest version the loader accepts */

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

  /* The kernel under test: float32 weights of one row. Required, except for a
   * version-3 variant with a second row (in2), which supplies forward2_f32. */
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

  /* ---- ABI version 2: streaming ---- */
  int32_t stream_kind; /* sa_stream_kind */
  /* Why the normaliser cannot be streamed (stream_kind SA_STREAM_NO), or NULL. */
  const char* stream_note;
  int64_t state_bytes; /* size of one state; the fuzzer allocates it, 16-byte aligned */
  /* Writes the identity state (the state of an empty chunk). */
  void (*state_init)(void* state, void* ctx);
  /* Folds the chunk logits[0..n) into state; the chunk starts at item
   * `offset` of a row of `row_n` items (for variants whose weights depend on
   * positions or on the row length). */
  int (*state_push)(void* state, const float* logits, int64_t n, int64_t offset, int64_t row_n,
                    void* ctx);
  /* left = left (+) right, where right's chunk follows left's in the row. */
  int (*state_merge)(void* left, const void* right, void* ctx);
  /* The weights of the whole row from the merged state of all its items. */
  int (*state_finish)(const void* state, const float* logits, int64_t n, float* weights, void* ctx);
  /* SA_STREAM_BOUNDED: bound on max_i |streamed_i - exact_i| for this row
   * split into `chunks` chunks, in units of 2^-24 (NULL: the generic online
   * softmax bound 4n + 3 chunks + 2 spread - 2 + 2 max|l|, docs/variants.md). */
  double (*stream_error_bound)(const double* logits, int64_t n, int64_t chunks, void* ctx);

  /* ---- ABI version 3: a second input row ---- */
  const char* in2;  /* what the second row means, one line; NULL: one-row variant */
  int32_t in2_kind; /* sa_in2_kind */
  int32_t out_kind; /* sa_out_kind */
  /* The kernel under test for two-row variants: out has n entries
   * (SA_OUT_WEIGHTS) or 1 (SA_OUT_SCALAR). */
  int (*forward2_f32)(const float* logits, const float* in2, int64_t n, float* out, void* ctx);
  /* Reference in float64 (optional), as forward_f64. */
  int (*forward2_f64)(const double* logits, const double* in2, int64_t n, double* out, void* ctx);
  /* Bound on max_i |forward2_f32 - exact| in units of 2^-24 (optional; NULL:
   * the generic softmax bound of the first row plus that of the second). */
  double (*f32_error_bound2)(const double* logits, const double* in2, int64_t n, void* ctx);

  /* ---- ABI version 4: streaming with a second row ---- */
  /* Folds the chunk logits[0..n), in2[0..n) (the same keys) into state; offset and row_n as
   * state_push's. */
  int (*state_push2)(void* state, const float* logits, const float* in2, int64_t n, int64_t offset,
                     int64_t row_n, void* ctx);
  /* The outputs of the whole row (n entries or 1, as forward2_f32) from the merged state. */
  int (*state_finish2)(const void* state, const float* logits, const float* in2, int64_t n,
                       float* out, void* ctx);
  /* SA_STREAM_BOUNDED: as stream_error_bound, for the row pair (NULL: the generic online
   * softmax bound of the first row plus that of the second). */
  double (*stream_error_bound2)(const double* logits, const double* in2, int64_t n, int64_t chunks,
                                void* ctx);
} sa_variant;

/* in2_kind */
typedef enum sa_in2_kind {
  SA_IN2_NONE = 0,   /* one-row variant (in2 NULL) */
  SA_IN2_LOGITS = 1, /* a second logit row: shifted, masked and permuted with the first */
  SA_IN2_PER_KEY = 2 /* per-key data (values, penalties): permuted and dropped, never shifted */
} sa_in2_kind;

/* out_kind */
typedef enum sa_out_kind {
  SA_OUT_WEIGHTS = 0, /* n outputs, one per key */
  SA_OUT_SCALAR = 1   /* one output per row */
} sa_out_kind;

/* stream_kind */
typedef enum sa_stream_kind {
  SA_STREAM_NOT_SUPPLIED = 0, /* no streaming interface (the version 1 default) */
  SA_STREAM_BITWISE = 1,      /* streamed weights equal forward_f32 bit for bit */
  SA_STREAM_BOUNDED = 2,      /* within stream_error_bound of the exact weights */
  SA_STREAM_NO = 3 /* the normaliser has no finite merge state (say why in stream_note) */
} sa_stream_kind;

typedef const sa_variant* (*sa_variant_entry_at_fn)(int index);

#ifdef __cplusplus
}
#endif

#endif /* SOFTMAX_AUDIT_VARIANT_H */
