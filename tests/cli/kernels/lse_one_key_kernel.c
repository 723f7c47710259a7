/* A deliberately broken attention kernel for the replay tests (issue 35):
 * the example outside kernel, except that attention_v2 returns lse = -inf
 * for every query row when the keys are one per sequence (seqlen_k = 1, no
 * varlen): the failure the issue reports ("sq=1 sk=1 d=1 ... lse: got -inf").
 * Everything else is the example kernel's, so the same call replayed on the
 * example kernel itself passes. */
#define sa_kernel_entry example_sa_kernel_entry
#include "example_kernel.c"
#undef sa_kernel_entry

static sa_status one_key_bug(void* ctx, const sa_attention_v2_args* a) {
  const sa_status st = attention_v2(ctx, a);
  if (st == SA_OK && a->lse && a->seqlen_k == 1 && !a->cu_seqlens_q)
    for (int64_t r = 0; r < a->batch * a->heads_q * a->seqlen_q; ++r) a->lse[r] = -INFINITY;
  return st;
}

static sa_kernel broken;

SA_EXPORT const sa_kernel* sa_kernel_entry(void) {
  broken = example_kernel;
  broken.name = "lse_one_key";
  broken.description = "the example kernel with lse = -inf when seqlen_k = 1 (a test kernel)";
  broken.attention_v2 = one_key_bug;
  return &broken;
}
