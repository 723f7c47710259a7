/* The example outside kernel (float32 softmax, log-softmax, log-sum-exp)
 * with a streamed entropy and T6's merge_entropy_states, for the split-row
 * tests (`sweep --row-chunks`, tests/scale_out/split_rows_test.sh).
 *
 * Built twice: as is, a correct kernel (every sum in double, each output
 * rounded once to float32); with CHUNK_ENTROPY_BUG, its entropy forgets the
 * (m - m') S term of T when the running maximum rises (theory T6's push:
 * T' = a (T + (m - m') S) + ...), a bug of streamed entropy that only rows
 * whose maximum is not their first item show. Its lse and softmax stay right,
 * so only the chunks' entropies (and the merged row's) are wrong. With
 * CHUNK_MERGE_BUG, its entropy is right and merge_entropy_states takes the
 * state of the smaller maximum for the identity (it tests m where the
 * identity is S = 0) and returns the other: every chunk is right, the merged
 * row is not. */
#define sa_kernel_entry example_sa_kernel_entry
#include "example_kernel.c"
#undef sa_kernel_entry

static sa_status chunk_entropy(void* ctx, sa_dtype dtype, const sa_rows* s, const void* in,
                               float* entropy, sa_entropy_state* state) {
  (void)ctx;
  if (dtype != SA_F32) {
    last_error_text = "chunk entropy kernel: only SA_F32 is implemented";
    return SA_UNSUPPORTED;
  }
  if (!s || !in || !entropy) return invalid("chunk entropy kernel: null pointer");
  for (int64_t r = 0; r < s->rows; ++r) {
    const float* x = (const float*)in + r * s->in_stride;
    double m = -INFINITY, S = 0, T = 0;
    for (int64_t j = 0; j < s->n; ++j) {
      const double z = (double)x[j] / s->temperature;
      if (z == -INFINITY) continue;
      if (z > m) {
        const double a = S > 0 ? exp(m - z) : 0.0;
#ifdef CHUNK_ENTROPY_BUG
        T = a * T;
#else
        T = S > 0 ? a * (T + (m - z) * S) : 0.0;
#endif
        S = a * S + 1.0;
        m = z;
      } else {
        const double e = exp(z - m);
        S += e;
        T += (z - m) * e;
      }
    }
    entropy[r] = S > 0 ? (float)(log(S) - T / S) : 0.0f;
    if (state) {
      state[r].m = (float)m;
      state[r].S = (float)S;
      state[r].T = (float)T;
    }
  }
  return SA_OK;
}

/* T6's merge in double, each field rounded once to float32; the identity
 * (S = 0) is neutral. */
static sa_status merge_states(void* ctx, int64_t count, const sa_entropy_state* a,
                              const sa_entropy_state* b, sa_entropy_state* out) {
  (void)ctx;
  if (count < 0) return invalid("chunk entropy kernel: count < 0");
  if (count > 0 && (!a || !b || !out)) return invalid("chunk entropy kernel: null pointer");
  for (int64_t i = 0; i < count; ++i) {
    const sa_entropy_state x = a[i], y = b[i];
    if (!(x.S > 0)) {
      out[i] = y;
      continue;
    }
#ifdef CHUNK_MERGE_BUG
    if (!(y.S > 0) || y.m < x.m) {
#else
    if (!(y.S > 0)) {
#endif
      out[i] = x;
      continue;
    }
    const double m = x.m > y.m ? x.m : y.m;
    const double dx = (double)x.m - m, dy = (double)y.m - m;
    const double ex = exp(dx), ey = exp(dy);
    const double S = x.S * ex + y.S * ey;
    const double T = ((double)x.T + dx * x.S) * ex + ((double)y.T + dy * y.S) * ey;
    out[i].m = (float)m;
    out[i].S = (float)S;
    out[i].T = (float)T;
  }
  return SA_OK;
}

static sa_kernel chunk_kernel;

SA_EXPORT const sa_kernel* sa_kernel_entry(void) {
  chunk_kernel = example_kernel;
#if defined(CHUNK_MERGE_BUG)
  chunk_kernel.name = "chunk_merge_mutant";
  chunk_kernel.description =
      "the example kernel whose merge_entropy_states drops the state of the "
      "smaller maximum (a test kernel)";
#elif defined(CHUNK_ENTROPY_BUG)
  chunk_kernel.name = "chunk_entropy_mutant";
  chunk_kernel.description =
      "the example kernel with a streamed entropy that forgets T's rescale "
      "term (a test kernel)";
#else
  chunk_kernel.name = "chunk_entropy";
  chunk_kernel.description =
      "the example kernel with a streamed entropy and T6's merge (a test "
      "kernel)";
#endif
  chunk_kernel.ops |= SA_OP_ENTROPY | SA_OP_MERGE_ENTROPY_STATES;
  chunk_kernel.entropy = chunk_entropy;
  chunk_kernel.merge_entropy_states = merge_states;
  return &chunk_kernel;
}
