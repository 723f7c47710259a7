/* A deliberately broken attention kernel for the replay tests (issue 35):
 * the example outside kernel, except that attention_v2 returns lse = -inf
 * for every query row when the keys are one per sequence (seqlen_k = 1, no
 * varlen): the failure the issue reports ("sq=1 sk=1 d=1 ... lse: got -inf").
 * Everything else is the example kernel's, so the same call replayed on the
 * example kernel itself passes. Its interface v1 slot (`attention`, float32,
 * one row at a time in double) has the same bug, for the case files of the
 * v1 slot's verdicts (issue 30). */
#define sa_kernel_entry example_sa_kernel_entry
#include "example_kernel.c"
#undef sa_kernel_entry

static sa_status one_key_bug(void* ctx, const sa_attention_v2_args* a) {
  const sa_status st = attention_v2(ctx, a);
  if (st == SA_OK && a->lse && a->seqlen_k == 1 && !a->cu_seqlens_q)
    for (int64_t r = 0; r < a->batch * a->heads_q * a->seqlen_q; ++r) a->lse[r] = -INFINITY;
  return st;
}

/* Interface v1: one sequence, one head, causal bottom-right, the key mask;
 * no adaptive temperature (SA_UNSUPPORTED), num_splits ignored. */
static sa_status v1_attention(void* ctx, const sa_attention_args* a) {
  (void)ctx;
  if (a->dtype != SA_F32 || a->adaptive) {
    last_error_text = "lse_one_key: interface v1 attention is float32 without adaptive only";
    return SA_UNSUPPORTED;
  }
  const float* q = (const float*)a->q;
  const float* k = (const float*)a->k;
  const float* v = (const float*)a->v;
  float* out = (float*)a->out;
  double* w = (double*)malloc(sizeof(double) * (size_t)(a->nk > 0 ? a->nk : 1));
  if (!w) return SA_INTERNAL_ERROR;
  for (int64_t i = 0; i < a->nq; ++i) {
    double m = -INFINITY;
    for (int64_t j = 0; j < a->nk; ++j) {
      const int visible =
          (!a->causal || j <= i + (a->nk - a->nq)) && (!a->key_mask || a->key_mask[j]);
      double s = 0;
      for (int64_t x = 0; x < a->d; ++x)
        s += (double)q[i * a->q_stride + x] * k[j * a->k_stride + x];
      w[j] = visible ? a->scale * s : -INFINITY;
      if (w[j] > m) m = w[j];
    }
    double sum = 0, t = 0;
    for (int64_t j = 0; j < a->nk; ++j) {
      const double e = m == -INFINITY ? 0.0 : exp(w[j] - m);
      if (e > 0) t += e * (w[j] - m);
      sum += e;
      w[j] = e;
    }
    for (int64_t x = 0; x < a->dv; ++x) {
      double o = 0;
      for (int64_t j = 0; j < a->nk; ++j)
        if (w[j] > 0) o += w[j] * v[j * a->v_stride + x];
      out[i * a->out_stride + x] = sum > 0 ? (float)(o / sum) : 0.0f;
    }
    if (a->lse) a->lse[i] = a->nk == 1 ? -INFINITY : (sum > 0 ? (float)(m + log(sum)) : -INFINITY);
    if (a->entropy) a->entropy[i] = sum > 0 ? (float)(log(sum) - t / sum) : 0.0f;
    if (a->beta) a->beta[i] = 1.0f;
  }
  free(w);
  return SA_OK;
}

static sa_kernel broken;

SA_EXPORT const sa_kernel* sa_kernel_entry(void) {
  broken = example_kernel;
  broken.name = "lse_one_key";
  broken.description = "the example kernel with lse = -inf when seqlen_k = 1 (a test kernel)";
  broken.attention_v2 = one_key_bug;
  broken.attention = v1_attention;
  broken.ops |= SA_OP_ATTENTION;
  return &broken;
}
