/* FROZEN COPY (tests only): softmax_audit/kernel.h as shipped with ABI
 * version 1 (softmax-audit 0.2), kept byte-for-byte apart from this note so a
 * test can build a plugin exactly as a version 1 author did and check that it
 * still loads and passes (tests/gate/CMakeLists.txt, V1PluginStillPasses).
 *
 * softmax-audit kernel interface, ABI version 1.
 *
 * The one way the suite talks to a kernel under test: the built-in CPU and
 * CUDA kernels implement it, and so does a kernel built elsewhere as a shared
 * library against this header alone (plain C99, no other include needed).
 *
 * A kernel library exports one function:
 *
 *     const sa_kernel* sa_kernel_entry(void);
 *
 * returning a pointer that stays valid while the library is loaded. A library
 * holding several kernels may instead export
 *
 *     const sa_kernel* sa_kernel_entry_at(int index);   // NULL past the last
 *
 * Conventions shared by every operation
 * - Element types: SA_F32 is IEEE binary32; SA_BF16 is bfloat16 stored as
 *   uint16_t (the upper half of a binary32). Per-row scalar outputs (lse,
 *   entropy, beta) and merge states are always float (binary32).
 * - Rows: `rows` rows of `n` logits; row r starts at in + r*in_stride and
 *   out + r*out_stride (strides in elements, >= n). in and out may be equal
 *   (in place) but must not otherwise overlap.
 * - Memory: every pointer lives where sa_kernel.memory says (host memory, or
 *   CUDA device memory for SA_MEMORY_CUDA). Calls are synchronous: results
 *   are complete when the call returns.
 * - Temperature theta > 0 and finite: logits are divided by theta
 *   (p_i = exp(l_i/theta) / sum_j exp(l_j/theta)).
 * - Special values (the suite's reference has the same semantics, and checks
 *   them):
 *     -inf logit          weight exactly 0 (a mask);
 *     all logits -inf     a fully masked row: every weight 0, log-softmax
 *                         -inf, lse -inf, entropy 0, beta 1;
 *     +inf logits         the limit: the k items at +inf share weight 1/k,
 *                         others 0; lse +inf; entropy log k;
 *     NaN anywhere        the whole row's outputs are NaN.
 * - n = 0 or rows < 0 is SA_INVALID_ARGUMENT; n = 1 gives weight 1.
 * - A function pointer left NULL means "not implemented"; `ops` and `dtypes`
 *   must agree with the pointers.
 */
#ifndef SOFTMAX_AUDIT_KERNEL_H
#define SOFTMAX_AUDIT_KERNEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SA_KERNEL_ABI_VERSION 1u

/* Each enum below ends with a *_MAX_ENUM member that is not a value: it
 * gives the type the range of int, so that a wrong value passed through the
 * ABI (e.g. dtype 7) is one a callee can reject, not undefined behaviour when
 * C++ code loads it. The size of every type stays that of int. */
typedef enum sa_status {
  SA_OK = 0,
  SA_INVALID_ARGUMENT = 1, /* bad sizes, strides, temperature, null pointer */
  SA_UNSUPPORTED = 2,      /* dtype or option this kernel does not implement */
  SA_INTERNAL_ERROR = 3,   /* anything else (allocation, launch failure) */
  SA_STATUS_MAX_ENUM = 0x7fffffff
} sa_status;

typedef enum sa_dtype { SA_F32 = 1, SA_BF16 = 2, SA_DTYPE_MAX_ENUM = 0x7fffffff } sa_dtype;

typedef enum sa_memory {
  SA_MEMORY_HOST = 0,
  SA_MEMORY_CUDA = 1,
  SA_MEMORY_MAX_ENUM = 0x7fffffff
} sa_memory;

/* Bits of sa_kernel.ops */
enum {
  SA_OP_SOFTMAX = 1u << 0,
  SA_OP_LOG_SOFTMAX = 1u << 1,
  SA_OP_LOGSUMEXP = 1u << 2,
  SA_OP_ENTROPY = 1u << 3,
  SA_OP_ADAPTIVE_SOFTMAX = 1u << 4,
  SA_OP_ATTENTION = 1u << 5,
  SA_OP_MERGE_ENTROPY_STATES = 1u << 6,
  SA_OP_MERGE_ATTENTION_STATES = 1u << 7
};

/* Bits of sa_kernel.dtypes */
enum { SA_DTYPE_F32 = 1u << 0, SA_DTYPE_BF16 = 1u << 1 };

/* Which entropy an operation computes (docs/theory.md T5 note). */
typedef enum sa_entropy_definition {
  SA_ENTROPY_SHANNON = 0,   /* H = -sum p log p (what the streamed state gives) */
  SA_ENTROPY_PAPER_EPS = 1, /* H = -sum p log(p + 1e-9) (the paper's JAX code) */
  SA_ENTROPY_MAX_ENUM = 0x7fffffff
} sa_entropy_definition;

typedef struct sa_rows {
  int64_t rows;
  int64_t n;
  int64_t in_stride;  /* elements between consecutive input rows */
  int64_t out_stride; /* elements between consecutive output rows */
  double temperature; /* theta > 0 */
} sa_rows;

/* Streamed-entropy state of docs/theory.md T6 for logits already divided by the
 * temperature: m running max, S = sum exp(l - m), T = sum exp(l - m)(l - m).
 * Identity (empty or fully masked part): m = -inf, S = 0, T = 0. */
typedef struct sa_entropy_state {
  float m;
  float S;
  float T;
} sa_entropy_state;

typedef struct sa_attention_args {
  sa_dtype dtype; /* of q, k, v and out */
  int64_t nq, nk; /* query and key lengths (may differ) */
  int64_t d;      /* head dimension of q and k */
  int64_t dv;     /* head dimension of v and out */
  const void* q;
  int64_t q_stride; /* elements between rows */
  const void* k;
  int64_t k_stride;
  const void* v;
  int64_t v_stride;
  void* out;
  int64_t out_stride;
  float* lse;     /* nq values (natural log, of the logits actually used), or NULL */
  float* entropy; /* nq values: Shannon entropy of the attention weights before
                     any adaptive correction, or NULL */
  float* beta;    /* nq values: the inverse temperature applied (1 unless adaptive), or NULL */
  const uint8_t* key_mask; /* NULL, or nk bytes: 0 masks the key out (logit -inf) */
  double scale;            /* logits are scale * q.k (e.g. 1/sqrt(d)) */
  int causal;   /* nonzero: query i sees key j iff j <= i + (nk - nq) (bottom-right aligned) */
  int adaptive; /* nonzero: adaptive temperature, two passes (docs/theory.md T5, T6) */
  int64_t num_splits; /* split-KV partitions merged at the end; 0 or 1 = none, kernel may ignore */
} sa_attention_args;

typedef struct sa_kernel {
  uint32_t abi_version; /* SA_KERNEL_ABI_VERSION */
  uint32_t struct_size; /* sizeof(sa_kernel) as compiled by the kernel's author */
  const char* name;
  const char* description;
  uint32_t ops;    /* SA_OP_* bits */
  uint32_t dtypes; /* SA_DTYPE_* bits */
  sa_memory memory;
  sa_entropy_definition adaptive_entropy; /* which H drives beta in adaptive_softmax */
  void* ctx;                              /* passed back to every call */

  /* out[i] = softmax(row / theta)[i] */
  sa_status (*softmax)(void* ctx, sa_dtype dtype, const sa_rows* shape, const void* in, void* out);
  /* out[i] = log softmax(row / theta)[i] */
  sa_status (*log_softmax)(void* ctx, sa_dtype dtype, const sa_rows* shape, const void* in,
                           void* out);
  /* lse[r] = log sum_i exp(row_i / theta); out_stride unused */
  sa_status (*logsumexp)(void* ctx, sa_dtype dtype, const sa_rows* shape, const void* in,
                         float* lse);
  /* entropy[r] = Shannon entropy of softmax(row / theta); optional state[r] = the
   * row's final (m, S, T) (state may be NULL) */
  sa_status (*entropy)(void* ctx, sa_dtype dtype, const sa_rows* shape, const void* in,
                       float* entropy, sa_entropy_state* state);
  /* H = entropy of softmax(row/theta) (definition: adaptive_entropy),
   * beta = 1 if H <= 0.5 else max(poly(H), 1), out = softmax(beta * row / theta).
   * beta and H may be NULL. */
  sa_status (*adaptive_softmax)(void* ctx, sa_dtype dtype, const sa_rows* shape, const void* in,
                                void* out, float* beta, float* entropy);
  /* Single-head attention forward. */
  sa_status (*attention)(void* ctx, const sa_attention_args* args);
  /* out[i] = merge(a[i], b[i]) (docs/theory.md T6), count states. */
  sa_status (*merge_entropy_states)(void* ctx, int64_t count, const sa_entropy_state* a,
                                    const sa_entropy_state* b, sa_entropy_state* out);
  /* Split-KV merge of two partial attention results over disjoint key sets:
   * rows x dv outputs (float32, normalised within their part) with their lse;
   * out = (exp(lse_a - L) o_a + exp(lse_b - L) o_b), L = log(exp lse_a + exp lse_b).
   * A part with lse = -inf contributes nothing; both -inf gives out 0, lse -inf.
   * Strides are dv. out/out_lse may alias a/lse_a. */
  sa_status (*merge_attention_states)(void* ctx, int64_t rows, int64_t dv, const float* o_a,
                                      const float* lse_a, const float* o_b, const float* lse_b,
                                      float* out, float* out_lse);
  /* Text of the last error on this thread, or NULL. */
  const char* (*last_error)(void* ctx);
} sa_kernel;

typedef const sa_kernel* (*sa_kernel_entry_fn)(void);
typedef const sa_kernel* (*sa_kernel_entry_at_fn)(int index);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SOFTMAX_AUDIT_KERNEL_H */
