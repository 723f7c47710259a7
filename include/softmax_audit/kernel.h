/* softmax-audit kernel interface, ABI version 2.
 *
 * Versions. A kernel sets abi_version and struct_size to what its author
 * compiled against. Version 1 kernels (struct_size = SA_KERNEL_V1_SIZE) keep
 * loading and are checked exactly as before; the fields after `last_error`
 * exist from version 2 on and are never read from a version 1 kernel. A
 * later version only appends fields, so a kernel is read up to its own
 * struct_size.
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

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SA_KERNEL_ABI_VERSION 2u

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

/* Element types. SA_F16 is IEEE binary16. SA_FP8_E4M3 (OCP 8-bit, 4 exponent
 * bits, bias 7, no infinities, max 448, one NaN pattern 0x7f/0xff) and
 * SA_FP8_E5M2 (5 exponent bits, bias 15, IEEE-like with infinities, max 57344)
 * are attention input types only (ABI version 2). */
typedef enum sa_dtype {
  SA_F32 = 1,
  SA_BF16 = 2,
  SA_F16 = 3,
  SA_FP8_E4M3 = 4,
  SA_FP8_E5M2 = 5,
  SA_FP4_E2M1 = 6, /* appended to interface 2 (issue 33), attention inputs only: see below */
  SA_INT8 = 7,     /* appended to interface 2 (issue 33), attention inputs only: see below */
  SA_DTYPE_MAX_ENUM = 0x7fffffff
} sa_dtype;

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
  SA_OP_MERGE_ATTENTION_STATES = 1u << 7,
  /* ABI version 2 */
  SA_OP_ATTENTION_V2 = 1u << 8,             /* attention_v2 (batched, every feature) */
  SA_OP_SOFTMAX_BACKWARD = 1u << 9,         /* softmax_backward */
  SA_OP_LOG_SOFTMAX_BACKWARD = 1u << 10,    /* log_softmax_backward */
  SA_OP_ATTENTION_BACKWARD = 1u << 11,      /* attention_backward */
  SA_OP_MERGE_ATTENTION_STATES_N = 1u << 12 /* merge_attention_states_n */
};
#define SA_OP_COUNT 13

/* Bits of sa_kernel.dtypes */
enum {
  SA_DTYPE_F32 = 1u << 0,
  SA_DTYPE_BF16 = 1u << 1,
  SA_DTYPE_F16 = 1u << 2,      /* ABI version 2 */
  SA_DTYPE_FP8_E4M3 = 1u << 3, /* ABI version 2, attention inputs only */
  SA_DTYPE_FP8_E5M2 = 1u << 4, /* ABI version 2, attention inputs only */
  SA_DTYPE_FP4_E2M1 = 1u << 5, /* appended to interface 2, attention_v2 inputs only */
  SA_DTYPE_INT8 = 1u << 6      /* appended to interface 2, attention_v2 inputs only */
};

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
  /* ABI version 2 (never set for, nor read by, a version 1 kernel): the
   * element type of `out` for softmax, log_softmax and adaptive_softmax and of
   * dx for the backward operations; it differs from the call's dtype only
   * where sa_capabilities.op_out_dtypes allows it. */
  sa_dtype out_dtype;
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

/* ---- ABI version 2: batched attention with every feature real kernels have ----
 *
 * Shapes. `batch` sequences, `heads_q` query heads and `heads_kv` key/value
 * heads (heads_q a multiple of heads_kv: query head h reads key/value head
 * h / (heads_q / heads_kv); MHA when equal, MQA when heads_kv = 1, GQA
 * between). Each tensor has its own strides in elements for the batch, head
 * and sequence dimensions; the last (head) dimension is contiguous. With
 * stride_b = seqlen * heads * d and stride_s = heads * d this is BSHD
 * (FlashAttention's layout); with stride_b = heads * seqlen * d and
 * stride_h = seqlen * d it is BHSD (PyTorch SDPA's). k and v may alias: in
 * multi-head latent attention (DeepSeek's MLA, FlashMLA: head_dim 576,
 * head_dim_v 512, many query heads over one latent key/value head) V is a
 * prefix view of K, v.data == k.data with k's strides and head_dim_v <=
 * head_dim; a kernel takes v's strides as given, never derived from
 * head_dim_v. Every offset (b * stride_b, a page id times stride_b, ...)
 * needs 64 bits: a tensor or page pool may span more than 2^31 elements.
 *
 * Variable lengths (FlashAttention's varlen convention). When cu_seqlens_q is
 * not NULL, sequences are packed along the sequence dimension: sequence b
 * holds rows cu_seqlens_q[b] .. cu_seqlens_q[b+1] - 1 of q and out, and
 * cu_seqlens_k[b] .. cu_seqlens_k[b+1] - 1 of k and v (both arrays have
 * batch + 1 nondecreasing entries starting at 0; empty sequences allowed);
 * stride_b is then unused, and seqlen_q / seqlen_k are the largest lengths.
 * Per-query outputs (lse, entropy, beta) are [heads_q][total_q] with
 * total_q = cu_seqlens_q[batch]; without varlen they are
 * [batch][heads_q][seqlen_q]. Both are contiguous.
 *
 * Score of query i and key j of one (sequence, head), with Lq and Lk that
 * sequence's lengths, in this order:
 *   1. s = scale * q_descale * k_descale * sum_c q[i][c] k[j][c]
 *   2. softcap > 0:       s = softcap * tanh(s / softcap)
 *   3. alibi_slopes:      s = s - alibi_slopes[h] * |i + off - j|
 *   4. masks (s = -inf):  key_padding_mask[b][j] == 0 (varlen: indexed by the
 *                         packed key row); window: j < i + off - window_left
 *                         (window_left >= 0) or j > i + off + window_right
 *                         (window_right >= 0); causal is window_right = 0.
 * where off = Lk - Lq for SA_ALIGN_BOTTOM_RIGHT (the last query sees the last
 * key; FlashAttention >= 2.1) and off = 0 for SA_ALIGN_TOP_LEFT (PyTorch
 * SDPA's is_causal). A window bound of -1 is unbounded.
 * Sinks: sinks[h] is one more logit per query row (no scale, softcap, ALiBi
 * or mask applies to it) with value vector 0: it joins the row's maximum and
 * the softmax denominator, so p_j = exp(s_j) / (exp(sink) + sum_k exp(s_k)),
 * and the lse includes it.
 * Per query row: lse = log(sum_j exp(s_j) [+ exp(sink)]); out = sum_j p_j v_j
 * scaled by v_descale; entropy = Shannon entropy of (p_j [, p_sink]) before
 * any adaptive correction; beta = 1, or with `adaptive` the inverse
 * temperature of docs/theory.md T5 applied to every s_j (and the sink).
 * A query row with every key masked: out 0, entropy 0, beta 1, lse -inf
 * without a sink and lse = sink with one. NaN anywhere in a row's inputs
 * (outside masked positions, whose q.k is never formed) gives NaN outputs.
 * Masked keys are never read: NaN or huge values under a mask change nothing.
 * fp8 inputs (SA_FP8_E4M3, SA_FP8_E5M2) are exact values times their descale;
 * out_dtype is then SA_F32, SA_BF16 or SA_F16. For other input types out_dtype
 * equals qkv_dtype unless the capabilities allow a wider one; descales are 1.
 */
typedef enum sa_alignment {
  SA_ALIGN_BOTTOM_RIGHT = 0,
  SA_ALIGN_TOP_LEFT = 1,
  SA_ALIGN_MAX_ENUM = 0x7fffffff
} sa_alignment;

typedef struct sa_tensor {
  const void* data;
  int64_t stride_b, stride_h, stride_s; /* elements */
} sa_tensor;

/* A mask or bias over (sequence b, query head h, query i, key j) (appended
 * to interface 2, see sa_attention_v2_args' masks): element (b, h, i, j) is at
 * data + b * stride_b + h * stride_h + i * stride_q + j * stride_k (elements
 * of the tensor's type; 64-bit offsets). A stride of 0 broadcasts that
 * dimension (PyTorch's expand: one [seqlen_q][seqlen_k] mask for every batch
 * and head has stride_b = stride_h = 0). Strides are >= 0; no dimension is
 * assumed contiguous. */
typedef struct sa_mask_tensor {
  const void* data; /* NULL: not used */
  int64_t stride_b, stride_h, stride_q, stride_k;
} sa_mask_tensor;

typedef struct sa_attention_v2_args {
  uint32_t struct_size; /* sizeof(sa_attention_v2_args) of the caller */
  sa_dtype qkv_dtype;   /* of q, k and v */
  sa_dtype out_dtype;   /* of out */
  int64_t batch, heads_q, heads_kv;
  int64_t seqlen_q, seqlen_k; /* per sequence; the largest ones with varlen */
  int64_t head_dim, head_dim_v;
  const int32_t* cu_seqlens_q; /* NULL, or batch + 1 offsets (varlen) */
  const int32_t* cu_seqlens_k; /* set exactly when cu_seqlens_q is */
  sa_tensor q, k, v;
  void* out;
  int64_t out_stride_b, out_stride_h, out_stride_s;
  float* lse;                      /* NULL or per query row (see above) */
  float* entropy;                  /* NULL or per query row */
  float* beta;                     /* NULL or per query row */
  const uint8_t* key_padding_mask; /* NULL, or [batch][seqlen_k] (varlen: [total_k]); 0 masks */
  double scale;
  int causal; /* nonzero: window_right is 0 whatever it says */
  sa_alignment alignment;
  int64_t window_left, window_right;     /* -1: unbounded */
  double softcap;                        /* 0: none */
  const float* alibi_slopes;             /* NULL or heads_q slopes */
  const float* sinks;                    /* NULL or heads_q logits */
  float q_descale, k_descale, v_descale; /* 1 unless fp8 */
  int adaptive;
  int64_t num_splits; /* split-KV partitions; 0 or 1 = none; a kernel may ignore it */
  /* ---- Appended to interface 2 (issue 33): used key lengths and paged KV.
   * A kernel reads these fields only when struct_size reaches them. The
   * suite sets them only for a kernel that declares SA_ATTN_SEQUSED_K /
   * SA_ATTN_PAGED_KV (otherwise they are NULL and 0), so a kernel built
   * against an earlier header never sees them set. They are forward only:
   * attention_backward's forward arguments always have them NULL and 0.
   *
   * Key buffer. Without seqused_k, sequence b's keys are exactly the rows
   * its buffer holds: N_b = seqlen_k (cu_seqlens_k[b+1] - cu_seqlens_k[b]
   * with varlen), and Lk = N_b in the score formula above.
   *
   * seqused_k (FlashAttention's seqused_k and cache_seqlens): NULL, or
   * `batch` counts with 0 <= seqused_k[b] <= N_b. Sequence b then has
   * Lk = seqused_k[b] keys, the first Lk of its buffer; the buffer's keys
   * and values Lk .. N_b - 1 are not part of the sequence and must never be
   * read (the suite fills them with NaN). Lk is the one of the alignment
   * (off = Lk - Lq bottom-right). Lk = 0 with Lq > 0 is valid: each of the
   * sequence's query rows sees no key (out 0, lse -inf, or the sink's logit
   * with a sink). key_padding_mask keeps its buffer indexing
   * ([batch][seqlen_k], varlen: the packed key row cu_seqlens_k[b] + j).
   *
   * Paged KV (FlashAttention's block_table, FlashInfer's paged_kv_indices,
   * vLLM's block tables): when block_table is not NULL, k.data and v.data are
   * page pools of num_pages pages of page_size tokens each (1 <= page_size;
   * any value, not only powers of two). Key j of sequence b (0 <= j < N_b)
   * is token slot t = j % page_size of physical page
   *   p = block_table[b * block_table_stride + j / page_size],
   * head g at k.data + p * k.stride_b + t * k.stride_s + g * k.stride_h
   * (v alike): stride_b is the stride between pages, so
   * [num_pages][page_size][heads_kv][d] (FlashAttention, FlashInfer's NHD)
   * and [num_pages][heads_kv][page_size][d] (FlashInfer's HND) are both
   * strides. Page ids are any int32 values 0 <= p < num_pages in any order
   * (ids above 65,535 occur; a page id times stride_b exceeds 2^31 in large
   * pools, so offsets need 64 bits). The last page of a sequence may be
   * partly filled; its slots past N_b, block table entries past
   * ceil(N_b / page_size) and pages no sequence references hold anything
   * (the suite: NaN pages) and must not be read. With varlen, cu_seqlens_k
   * gives each N_b only (it addresses no key row); stride_b of k and v is
   * the page stride in both modes. Queries, outputs and per-query outputs
   * are laid out as without paging. */
  const int32_t* seqused_k;   /* NULL, or batch used key counts */
  const int32_t* block_table; /* NULL (contiguous k, v), or the block table */
  int64_t block_table_stride; /* entries between two sequences' rows (>= pages a sequence uses) */
  int64_t page_size;          /* tokens per page (paged only) */
  int64_t num_pages;          /* pages in each of the k and v pools (paged only) */
  /* ---- Appended to interface 2 (issue 33): masks beyond causal and window.
   * Read only when struct_size reaches them; the suite sets them only for a
   * kernel that declares SA_ATTN_BOOL_MASK, SA_ATTN_BIAS, SA_ATTN_BLOCK_MASK
   * or SA_ATTN_TREE_MASK (otherwise data is NULL and the rest 0). Forward
   * only: attention_backward's forward arguments always have them NULL.
   *
   * Indices. For sequence b with Lq queries and Lk keys (Lk the used keys,
   * seqused_k[b] when given), i (0 <= i < Lq) and j (0 <= j < Lk) are the
   * sequence's own query and key indices, with varlen too (not packed rows;
   * seqlen_q and seqlen_k, the largest lengths, bound them) and with paged
   * KV (j is the logical key index). h is the query head (GQA: every query
   * head has its own entries).
   *
   * Score. Step 3 of the score above is followed by
   *   3b. attn_bias:  s = s + attn_bias[b, h, i, j]
   * (after scale, softcap and ALiBi: PyTorch SDPA's float attn_mask and
   * FlexAttention's score_mod returning score + bias[b, h, q_idx, kv_idx],
   * which sees the softcapped score when softcap is itself a score_mod
   * applied first), and step 4 masks (s = -inf) also
   *   attn_mask[b, h, i, j] == 0 (uint8; nonzero: the key takes part, as
   *     PyTorch SDPA's boolean attn_mask's true; ONNX Runtime's
   *     attention_mask 1 = attend),
   *   block_mask[b, h, i / block_q, j / block_k] == 0 (uint8; FlexAttention's
   *     BlockMask at its block granularity: Q_BLOCK_SIZE = block_q,
   *     KV_BLOCK_SIZE = block_k, 128 x 128 by default, any sizes >= 1,
   *     square or not; the last block of a row or column covers the partial
   *     rest; blocks are counted from each sequence's first query and key),
   *   tree: with t = j - (Lk - Lq) (key j's position among the sequence's
   *     last Lq keys, the draft tokens of speculative decoding, where query
   *     i is draft token i), key j is masked iff t >= 0 and
   *     tree_mask[b, h, i, t] == 0 (uint8; FlashInfer's custom_mask and
   *     vLLM's tree attention: every query sees the whole prefix, j < Lk -
   *     Lq, and the draft tokens its tree row names: itself and its
   *     ancestors for a token tree). The tree mask's last index is a query
   *     index (extent seqlen_q); it is independent of the alignment.
   * All masks combine by AND: a key takes part only when no mask masks it.
   * A masked position is never read: not its key, value or bias element
   * (its q.k is never formed; bias elements there may hold anything). A row
   * every key of which is masked follows the fully masked row rule above.
   * attn_bias holds float32 values (the suite's are finite); broadcasting
   * a per-head buffer (stride_q = stride_k = 0) or a relative bias
   * (a function of i - j) are both strides of this tensor.
   * Extents (the largest index + 1 of each dimension) are batch, heads_q
   * and: attn_mask, attn_bias [seqlen_q][seqlen_k]; block_mask
   * [ceil(seqlen_q / block_q)][ceil(seqlen_k / block_k)]; tree_mask
   * [seqlen_q][seqlen_q]. */
  sa_mask_tensor attn_mask;  /* uint8, or data NULL */
  sa_mask_tensor attn_bias;  /* float32, or data NULL */
  sa_mask_tensor block_mask; /* uint8 over blocks, or data NULL */
  int64_t block_q, block_k;  /* block sizes (>= 1) when block_mask is used */
  sa_mask_tensor tree_mask;  /* uint8, or data NULL */
  /* ---- Appended to interface 2 (issue 33): microscaled fp8 (OCP MX, MXFP8).
   * A kernel reads these fields only when struct_size reaches them; the
   * suite sets them only for a kernel that declares SA_ATTN_BLOCK_SCALED
   * (E8M0 scales; SA_ATTN_SCALE_E4M3 and SA_ATTN_SCALE_F32 for the other
   * scale types, below), and only with quantised inputs (fp8; fp4 and int8
   * below). Forward only.
   *
   * When scale_block > 0, every run of scale_block consecutive head-dim
   * elements of q, k and v (elements c with the same c / scale_block of one
   * row of one head; the last run of a row may be shorter) shares one E8M0
   * scale byte x, 2^(x - 127) (x = 255 is NaN: every element of the run is
   * NaN). An element's value is then
   *   fp8 value * 2^(x - 127) * the tensor's descale
   * (q_descale, k_descale, v_descale as before), and everything above holds
   * for those values. The scale byte of element (b, h, s, c) of q is
   *   q_scale.data[b * stride_b + h * stride_h + s * stride_s + c / scale_block]
   * (uint8, strides in bytes; varlen and paged K and V address their scale
   * rows as their elements: the packed row, or page p and slot t with
   * stride_b the page stride). Scale bytes of keys a call may not read
   * (masked, past seqused_k, unused page slots) are not read either.
   * OCP MX v1.0 takes scale_block = 32 (MXFP8); other block sizes are valid. */
  int64_t scale_block; /* 0: no block scales */
  sa_tensor q_scale, k_scale, v_scale;
  /* ---- Appended to interface 2 (issue 33): more quantised formats. Read
   * only when struct_size reaches them; the suite sets them only for a
   * kernel that declares the type or feature named (otherwise 0 and NULL).
   * Forward only.
   *
   * Input types. SA_FP4_E2M1 (OCP MX FP4: sign, 2 exponent bits with bias 1,
   * 1 mantissa bit; values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives; no
   * infinity or NaN) is packed two elements per byte: the element at element
   * offset e (computed from the strides as for any type) is in byte e / 2,
   * in its low four bits when e is even and its high four bits when e is odd
   * (PyTorch's float4_e2m1fn_x2, NVIDIA's NVFP4 and OCP MXFP4 storage). With
   * SA_FP4_E2M1 every stride, head_dim and head_dim_v is even, so each head
   * row starts on a byte. SA_INT8 is a two's-complement byte, -128..127.
   * Both are attention_v2 input types like fp8: values are the element times
   * its block scale (if any) times the descales, out_dtype is SA_F32,
   * SA_BF16 or SA_F16, and the suite draws them without infinities or NaN
   * in elements (NaN enters through a scale).
   *
   * scale_dtype: the type of the block scales when scale_block > 0:
   *   0 (the only one before this field): E8M0 bytes as above (MXFP8, MXFP4:
   *     e2m1 elements with an E8M0 scale per 32);
   *   SA_FP8_E4M3: e4m3 bytes, the scale their value (NaN: every element of
   *     the run is NaN) (NVFP4: e2m1 elements, a scale per 16 and a float32
   *     tensor scale, which is the tensor's descale);
   *   SA_F32: float32 scales (int8 K and V quantised per token and head:
   *     scale_block >= head_dim gives one scale per head row).
   * Scale strides count elements of scale_dtype (bytes for E8M0 and e4m3).
   *
   * Descales per sequence and key/value head (FlashAttention 3's q_descale,
   * k_descale, v_descale of shape (batch, nheads_k)): NULL, or batch *
   * heads_kv float32 values, contiguous. An element of q of sequence b and
   * query head h is also multiplied by q_descale_bh[b * heads_kv + h / (heads_q
   * / heads_kv)], one of k or v of sequence b and key head g by
   * k_descale_bh[b * heads_kv + g] (v alike); the scalar descales still
   * apply. With paged KV, b is the sequence whose block table names the page.
   * The suite passes them (SA_ATTN_DESCALE_BH) with fp8 inputs only, as
   * FlashAttention 3 takes them. */
  sa_dtype scale_dtype;
  const float* q_descale_bh;
  const float* k_descale_bh;
  const float* v_descale_bh;
} sa_attention_v2_args;

/* sizeof(sa_attention_v2_args) before seqused_k and the paged fields were appended. */
#define SA_ATTENTION_V2_ARGS_V2_0_SIZE offsetof(sa_attention_v2_args, seqused_k)
/* sizeof(sa_attention_v2_args) before the masks were appended (paged KV's header). */
#define SA_ATTENTION_V2_ARGS_V2_1_SIZE offsetof(sa_attention_v2_args, attn_mask)
/* ... and before the block scales were appended. */
#define SA_ATTENTION_V2_ARGS_V2_2_SIZE offsetof(sa_attention_v2_args, scale_block)
/* ... and before the scale type, fp4 and int8, and the per-head descales were appended. */
#define SA_ATTENTION_V2_ARGS_V2_3_SIZE offsetof(sa_attention_v2_args, scale_dtype)

/* Attention backward (FlashAttention's formulation): from the forward
 * arguments (with out, lse as the forward produced them), dout, compute
 *   p_ij = exp(s_ij - lse_i) (0 for masked keys),
 *   dv_j = v_descale sum_i p_ij dout_i,  dp_ij = v_descale (dout_i . v_j),
 *   D_i = dout_i . out_i,
 *   ds_ij = p_ij (dp_ij - D_i) times the softcap's derivative
 *           1 - tanh^2(t_ij / softcap) (t_ij the uncapped score), and
 *   dq_i = scale q_descale k_descale sum_j ds_ij k_j,
 *   dk_j = scale q_descale k_descale sum_i ds_ij q_i
 * (GQA: dk, dv of a key/value head sum over its query heads), and
 * dsinks[h] = -sum_i p_sink,i D_i (over every query row of every sequence,
 * p_sink,i = exp(sink_h - lse_i)) when sinks are used. lse is required (not
 * NULL); dout has out's element type and its own strides. A query row with
 * lse = -inf (fully masked, no sink) contributes nothing (no NaN); keys no
 * query sees get dk = dv = 0; masked keys and values are never read.
 * q, k, v are the stored values (fp8: before their descale) and dq, dk, dv
 * the gradients with respect to them, so the descales enter as written
 * above (all 1 unless fp8); out already carries v_descale (forward).
 * Adaptive attention has no backward here (SA_UNSUPPORTED). dq has q's
 * layout, dk k's, dv v's; gradients are in out_dtype's width for fp8 inputs,
 * else qkv_dtype. sa_capabilities.attention_features, head dims and limits
 * describe both attention_v2 and attention_backward: a kernel that sets
 * attention_backward implements every declared feature in both directions,
 * except SA_ATTN_PAGED_KV, SA_ATTN_SEQUSED_K and the masks SA_ATTN_BOOL_MASK,
 * SA_ATTN_BIAS, SA_ATTN_BLOCK_MASK and SA_ATTN_TREE_MASK (forward only).
 * `deterministic` asks for bitwise reproducible results even from a kernel
 * that does not claim SA_CAP_DETERMINISTIC (a kernel that cannot may return
 * SA_UNSUPPORTED). */
typedef struct sa_attention_backward_args {
  uint32_t struct_size;
  const sa_attention_v2_args* forward; /* its out and lse are read, not written */
  sa_tensor dout;
  sa_tensor dq, dk, dv; /* data written (cast away const) */
  float* dsinks;        /* NULL or heads_q values */
  int deterministic;    /* nonzero: the caller asks for bitwise reproducible results */
} sa_attention_backward_args;

/* Bits of sa_capabilities.attention_features */
enum {
  SA_ATTN_BATCHED = 1u << 0,            /* batch > 1 or heads_q > 1 */
  SA_ATTN_GQA = 1u << 1,                /* heads_kv < heads_q */
  SA_ATTN_VARLEN = 1u << 2,             /* cu_seqlens */
  SA_ATTN_STRIDED = 1u << 3,            /* any strides (else only contiguous BSHD) */
  SA_ATTN_CAUSAL = 1u << 4,             /* both alignments */
  SA_ATTN_WINDOW = 1u << 5,             /* window_left / window_right */
  SA_ATTN_SOFTCAP = 1u << 6,            /* softcap */
  SA_ATTN_ALIBI = 1u << 7,              /* alibi_slopes */
  SA_ATTN_SINKS = 1u << 8,              /* sinks */
  SA_ATTN_KEY_PADDING = 1u << 9,        /* key_padding_mask */
  SA_ATTN_LSE = 1u << 10,               /* lse output */
  SA_ATTN_ENTROPY = 1u << 11,           /* entropy output */
  SA_ATTN_ADAPTIVE = 1u << 12,          /* adaptive */
  SA_ATTN_SPLIT_KV = 1u << 13,          /* num_splits > 1 honoured */
  SA_ATTN_UNEQUAL_HEAD_DIMS = 1u << 14, /* head_dim_v != head_dim */
  /* Appended to interface 2 (issue 33; forward only, see sa_attention_v2_args) */
  SA_ATTN_PAGED_KV = 1u << 15,  /* block_table, page_size, num_pages: k and v in page pools */
  SA_ATTN_SEQUSED_K = 1u << 16, /* seqused_k: keys past a sequence's used count never read */
  /* Appended to interface 2 (issue 33; forward only, see sa_attention_v2_args' masks) */
  SA_ATTN_BOOL_MASK = 1u << 17,  /* attn_mask: uint8 per (b, h, i, j), broadcast strides */
  SA_ATTN_BIAS = 1u << 18,       /* attn_bias: float32 added to the score, broadcast strides */
  SA_ATTN_BLOCK_MASK = 1u << 19, /* block_mask, block_q, block_k: block-sparse mask */
  SA_ATTN_TREE_MASK = 1u << 20,  /* tree_mask: speculative decoding's draft-token tree */
  /* Appended to interface 2 (issue 33; forward only, fp8 inputs): block scales */
  SA_ATTN_BLOCK_SCALED = 1u << 21, /* E8M0 scale per run of elements (MXFP8, MXFP4):
                                      scale_block, *_scale */
  /* Appended to interface 2 (issue 33; forward only, quantised inputs) */
  SA_ATTN_SCALE_E4M3 = 1u << 22, /* block scales as fp8 e4m3 bytes (NVFP4: per 16, with the
                                    tensor scale in the descales): scale_dtype SA_FP8_E4M3;
                                    stands alone (SA_ATTN_BLOCK_SCALED: E8M0 scales) */
  SA_ATTN_SCALE_F32 = 1u << 23,  /* block scales as float32 (int8 per token and head:
                                    scale_block >= head_dim): scale_dtype SA_F32; alone too */
  SA_ATTN_DESCALE_BH = 1u << 24  /* q/k/v_descale_bh: descales per (sequence, kv head), as
                                    FlashAttention 3's (batch, nheads_k) tensors */
};

/* Bits of sa_capabilities.attention_constraints: forms of a feature a kernel
 * takes only in part (real kernels' domains). The gate draws every case
 * inside them; a call outside them is not applicable. */
enum {
  SA_ATTN_ONLY_Q_LE_K = 1u << 0,        /* every sequence has seqlen_q <= seqlen_k */
  SA_ATTN_ONLY_BOTTOM_RIGHT = 1u << 1,  /* causal, window and ALiBi aligned bottom-right only */
  SA_ATTN_ONLY_WINDOW_RIGHT_0 = 1u << 2 /* a window only with window_right 0 (-1 = unbounded
                                           left allowed): a causal sliding window */
};

/* Bits of sa_capabilities.flags */
enum {
  SA_CAP_DETERMINISTIC = 1u << 0,   /* identical calls give identical bits (all ops) */
  SA_CAP_BATCH_INVARIANT = 1u << 1, /* a row's result does not depend on its batch or splits */
  /* Numerical conventions (docs/conventions.md). A kernel that follows one
   * declares it; the gate then holds it to the convention's wider bound and
   * names the convention in every verdict it widened. Undeclared, the same
   * behaviour fails, on every seed, with a note naming the convention. */
  SA_CAP_DOUBLE_ROUNDING = 1u << 2, /* a bfloat16/float16 output may be rounded to its type twice
                                       (an intermediate stored in the output type): up to u_t |x|
                                       more than one correct rounding (u_t = 2^-8, 2^-11) */
  SA_CAP_FLUSH_TO_ZERO = 1u << 3,   /* results (and exponentials) below 2^-125 in magnitude may be
                                       0; without it gradual underflow is required: a subnormal
                                       result is within 1 ulp */
  SA_CAP_IEEE_SPECIAL_VALUES = 1u << 4, /* a row with +inf logits (no NaN), or all -inf, may give
                                           NaN outputs (exp(z - max) / sum as IEEE arithmetic
                                           evaluates it) instead of the limits defined above */
  SA_CAP_LOW_PRECISION_P = 1u << 5, /* attention (forward, bfloat16/float16 inputs): P is rounded to
                                      the input type before P V, as tensor-core kernels do, and the
                                      denominator may sum the rounded values: up to 2 u_t
                                      sum_j p_j |v_j| more per output (u_t of the input type) */
  SA_CAP_LSE_BASE2 = 1u << 6,       /* attention_v2's lse is log2 of the sum (FlashInfer's default):
                                      lse / ln 2, one more rounding; attention_backward takes
                                      its lse in the same base */
  SA_CAP_MASKED_LSE_POS_INF = 1u << 7, /* a fully masked attention row (no visible key, no sink)
                                          has lse +inf (FlashAttention 2 and 3) instead of -inf;
                                          its out is still 0, and attention_backward takes +inf */
  SA_CAP_NO_TEMPERATURE = 1u << 8,     /* the row operations have no temperature (PyTorch's and
                                          ONNX Runtime's softmax): the gate calls them with
                                          temperature 1 only */
  SA_CAP_ALIBI_LSE_SHIFT = 1u << 9,    /* FlashAttention's ALiBi on causal rows without a left
                                          window: +slope*j instead of -slope*|i + off - j|, the
                                          same weights and out, lse larger by beta*slope*(i + off);
                                          attention_backward takes that lse */
  SA_CAP_LSE_WITHOUT_SINK = 1u << 10,  /* attention's lse leaves the sink out: log sum_j exp(s_j)
                                          over the keys only (out and entropy still count it);
                                          attention_backward takes that lse */
  SA_CAP_FINITE_MASK = 1u << 11        /* attention masks with a large finite value (ONNX
                                          Runtime's mask_filter_value, -10000) instead of -inf:
                                          masked positions are read, so a NaN under a mask may
                                          reach the row, and a row with every key masked gives a
                                          convex combination of its values, not 0 */
};

/* What a kernel supports. Cases outside it are "not applicable": reported as
 * such and named, never run, never errors, never counted as passes. A limit
 * of 0 means no limit; a NULL list means any value. */
typedef struct sa_capabilities {
  uint32_t struct_size;
  /* op_dtypes[k]: SA_DTYPE_* input types of the op whose bit is 1u << k
   * (0: the kernel-wide `dtypes`); op_out_dtypes[k]: output types allowed
   * besides the input's own (mixed precision; 0: none). */
  uint32_t op_dtypes[SA_OP_COUNT];
  uint32_t op_out_dtypes[SA_OP_COUNT];
  int64_t max_n;               /* row operations: the largest n */
  uint32_t attention_features; /* SA_ATTN_* */
  const int32_t* head_dims;    /* supported head dims (head_dim and head_dim_v) */
  int32_t num_head_dims;
  int32_t max_head_dim;
  int64_t max_seqlen_q, max_seqlen_k;
  int64_t max_batch, max_heads;
  uint32_t flags; /* SA_CAP_* */
  /* The fields below were appended to interface 2 (the kernel's domain,
   * docs/kernel-contract.md). They are read only when struct_size covers
   * them, so a kernel built against an earlier header keeps working; 0 means
   * no constraint. */
  /* attention_features_by_dtype[t]: the SA_ATTN_* features of attention_v2
   * (and attention_backward) for input type t (an sa_dtype value, 1..5);
   * 0: attention_features. E.g. sinks in the float16 model only. */
  uint32_t attention_features_by_dtype[8];
  /* SA_ATTN_* features every call must have (SA_ATTN_CAUSAL: a causal-only
   * kernel); the gate draws them on in every case. */
  uint32_t attention_required;
  uint32_t attention_constraints; /* SA_ATTN_ONLY_* */
  /* head_dim and head_dim_v are multiples of this (e.g. 8); 0 or 1: any. */
  int32_t head_dim_multiple;
} sa_capabilities;

/* sizeof(sa_capabilities) before the domain fields were appended. */
#define SA_CAPABILITIES_V2_0_SIZE offsetof(sa_capabilities, attention_features_by_dtype)

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

  /* ---- ABI version 2 (absent from version 1 kernels) ---- */
  const sa_capabilities* capabilities; /* NULL: everything in ops x dtypes, no limits */
  /* Batched attention forward (sa_attention_v2_args above). */
  sa_status (*attention_v2)(void* ctx, const sa_attention_v2_args* args);
  /* Backward of the row operations: y and dy are read with in_stride, dx is
   * written with out_stride (dx may equal dy, in place; no other overlap).
   * dx = y o (dy - <dy, y>) / theta per row, y = softmax(x / theta) as the
   * forward returned it (the rounded weights, not recomputed): dx is the
   * gradient wrt the logits x. NaN anywhere in a row's y or dy makes the
   * whole row of dx NaN; masked items (y = 0) get dx = 0 otherwise. */
  sa_status (*softmax_backward)(void* ctx, sa_dtype dtype, const sa_rows* shape, const void* y,
                                const void* dy, void* dx);
  /* dx = (dy - exp(y) sum(dy)) / theta per row, y = log_softmax(x / theta) as
   * the forward returned it; layout and NaN rule as softmax_backward; masked
   * items (y = -inf) get dx = dy / theta. */
  sa_status (*log_softmax_backward)(void* ctx, sa_dtype dtype, const sa_rows* shape, const void* y,
                                    const void* dy, void* dx);
  sa_status (*attention_backward)(void* ctx, const sa_attention_backward_args* args);
  /* Split-KV merge of `parts` partial results over disjoint key sets, each
   * rows x dv (float32, normalised within the part) with its lse; parts with
   * lse -inf (empty) contribute nothing. o[p], lse[p] are the parts, each its
   * own array (lse[p] need not follow lse[p - 1]: not one block). Cascade
   * (shared-prefix) attention merges a prefix part with each request's own
   * part this way. */
  sa_status (*merge_attention_states_n)(void* ctx, int64_t parts, int64_t rows, int64_t dv,
                                        const float* const* o, const float* const* lse, float* out,
                                        float* out_lse);
} sa_kernel;

/* The size of a version 1 sa_kernel: what a version 1 kernel sets struct_size to. */
#define SA_KERNEL_V1_SIZE offsetof(sa_kernel, capabilities)

typedef const sa_kernel* (*sa_kernel_entry_fn)(void);
typedef const sa_kernel* (*sa_kernel_entry_at_fn)(int index);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SOFTMAX_AUDIT_KERNEL_H */
