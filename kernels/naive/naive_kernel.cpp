#include "kernels/naive/naive_kernel.hpp"

#include "kernels/attention_v1_args.hpp"
#include "kernels/naive/attention_v2.hpp"
#include "kernels/naive/backward.hpp"
#include "kernels/naive/elements.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "theory/adaptive_temperature.hpp"
#include "theory/streamed_entropy.hpp"

namespace sa::kernels {
namespace {

thread_local std::string g_error;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

sa_status fail(sa_status s, std::string what) {
  g_error = std::move(what);
  return s;
}

using naive::load;
using naive::store;

sa_status check_rows(sa_dtype t, const sa_rows* s, const void* in, const void* out) {
  if (t != SA_F32 && t != SA_BF16 && t != SA_F16)
    return fail(SA_UNSUPPORTED, "dtype must be SA_F32, SA_BF16 or SA_F16");
  if (!s || !in || !out) return fail(SA_INVALID_ARGUMENT, "null shape, input or output pointer");
  if (s->n <= 0 || s->rows < 0)
    return fail(SA_INVALID_ARGUMENT, "n must be >= 1 and rows >= 0, got n=" + std::to_string(s->n) +
                                         " rows=" + std::to_string(s->rows));
  if (s->in_stride < s->n || s->out_stride < s->n)
    return fail(SA_INVALID_ARGUMENT, "strides must be >= n");
  if (!(s->temperature > 0.0) || !std::isfinite(s->temperature))
    return fail(SA_INVALID_ARGUMENT, "temperature must be finite and > 0");
  return SA_OK;
}

// One row of scaled logits z = l / theta and what kind of row it is.
struct Row {
  std::vector<float> z;
  bool nan = false;
  std::int64_t pos_inf = 0;
  bool masked = true;  // every entry -inf
};

Row read_row(sa_dtype t, const void* in, std::int64_t off, std::int64_t n, double theta) {
  Row r;
  r.z.resize(static_cast<std::size_t>(n));
  const float th = static_cast<float>(theta);
  for (std::int64_t i = 0; i < n; ++i) {
    const float l = load(t, in, off + i);
    const float z = th == 1.0f ? l : l / th;
    r.z[static_cast<std::size_t>(i)] = z;
    if (std::isnan(z))
      r.nan = true;
    else if (z == kInf)
      ++r.pos_inf;
    if (!(z == -kInf)) r.masked = false;
  }
  return r;
}

// Softmax weights of a row (header semantics), float32 arithmetic.
void weights_of(const std::vector<float>& z, bool nan, std::int64_t pos_inf, bool masked,
                std::vector<float>& p) {
  const std::size_t n = z.size();
  p.assign(n, 0.0f);
  if (nan) {
    p.assign(n, kNaN);
    return;
  }
  if (masked) return;
  if (pos_inf > 0) {
    const float share = 1.0f / static_cast<float>(pos_inf);
    for (std::size_t i = 0; i < n; ++i)
      if (z[i] == kInf) p[i] = share;
    return;
  }
  float m = -kInf;
  for (float x : z) m = x > m ? x : m;
  float S = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    if (z[i] == -kInf) continue;
    p[i] = std::exp(z[i] - m);
    S += p[i];
  }
  for (auto& x : p) x /= S;
}

void weights_of(const Row& r, std::vector<float>& p) {
  weights_of(r.z, r.nan, r.pos_inf, r.masked, p);
}

// m + log S over finite entries (the row must be finite-or-masked).
float lse_of(const std::vector<float>& z) {
  float m = -kInf;
  for (float x : z) m = x > m ? x : m;
  if (m == -kInf) return -kInf;
  float S = 0.0f;
  for (float x : z)
    if (x != -kInf) S += std::exp(x - m);
  return m + std::log(S);
}

theory::EntropyState<float> state_of(const std::vector<float>& z) {
  auto s = theory::entropy_identity<float>();
  for (float x : z) s = theory::entropy_push(s, x);
  return s;
}

sa_status n_softmax(void*, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  if (sa_status st = check_rows(t, s, in, out); st != SA_OK) return st;
  std::vector<float> p;
  for (std::int64_t r = 0; r < s->rows; ++r) {
    Row row = read_row(t, in, r * s->in_stride, s->n, s->temperature);
    weights_of(row, p);
    for (std::int64_t i = 0; i < s->n; ++i) store(t, out, r * s->out_stride + i, p[i]);
  }
  return SA_OK;
}

sa_status n_log_softmax(void*, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  if (sa_status st = check_rows(t, s, in, out); st != SA_OK) return st;
  for (std::int64_t r = 0; r < s->rows; ++r) {
    Row row = read_row(t, in, r * s->in_stride, s->n, s->temperature);
    for (std::int64_t i = 0; i < s->n; ++i) {
      const float z = row.z[static_cast<std::size_t>(i)];
      float v;
      if (row.nan)
        v = kNaN;
      else if (row.masked)
        v = -kInf;
      else if (row.pos_inf > 0)
        v = z == kInf ? -std::log(static_cast<float>(row.pos_inf)) : -kInf;
      else
        v = z;  // finished below
      store(t, out, r * s->out_stride + i, v);
    }
    if (row.nan || row.masked || row.pos_inf > 0) continue;
    float m = -kInf;
    for (float x : row.z) m = x > m ? x : m;
    float S = 0.0f;
    for (float x : row.z)
      if (x != -kInf) S += std::exp(x - m);
    const float logS = std::log(S);
    for (std::int64_t i = 0; i < s->n; ++i) {
      const float z = row.z[static_cast<std::size_t>(i)];
      store(t, out, r * s->out_stride + i, z == -kInf ? -kInf : (z - m) - logS);
    }
  }
  return SA_OK;
}

sa_status n_logsumexp(void*, sa_dtype t, const sa_rows* s, const void* in, float* lse) {
  if (sa_status st = check_rows(t, s, in, lse); st != SA_OK) return st;
  for (std::int64_t r = 0; r < s->rows; ++r) {
    Row row = read_row(t, in, r * s->in_stride, s->n, s->temperature);
    lse[r] = row.nan ? kNaN : row.pos_inf > 0 ? kInf : lse_of(row.z);
  }
  return SA_OK;
}

sa_status n_entropy(void*, sa_dtype t, const sa_rows* s, const void* in, float* H,
                    sa_entropy_state* state) {
  if (sa_status st = check_rows(t, s, in, H); st != SA_OK) return st;
  for (std::int64_t r = 0; r < s->rows; ++r) {
    Row row = read_row(t, in, r * s->in_stride, s->n, s->temperature);
    const auto st = state_of(row.z);
    H[r] = theory::entropy_of(st);
    if (state) state[r] = sa_entropy_state{st.m, st.S, st.T};
  }
  return SA_OK;
}

sa_status n_adaptive(void*, sa_dtype t, const sa_rows* s, const void* in, void* out, float* beta,
                     float* entropy) {
  if (sa_status st = check_rows(t, s, in, out); st != SA_OK) return st;
  std::vector<float> p;
  for (std::int64_t r = 0; r < s->rows; ++r) {
    Row row = read_row(t, in, r * s->in_stride, s->n, s->temperature);
    const float H = theory::entropy_of(state_of(row.z));
    const float b = theory::adaptive_beta(H);
    if (!row.nan && !row.masked && row.pos_inf == 0)
      for (auto& z : row.z)
        if (z != -kInf) z *= b;
    weights_of(row, p);
    for (std::int64_t i = 0; i < s->n; ++i) store(t, out, r * s->out_stride + i, p[i]);
    if (beta) beta[r] = b;
    if (entropy) entropy[r] = H;
  }
  return SA_OK;
}

// One split-KV merge of normalised partial outputs (see the header).
void merge_one(std::int64_t dv, const float* oa, float la, const float* ob, float lb, float* out,
               float* lse) {
  if (std::isnan(la) || std::isnan(lb)) {
    for (std::int64_t c = 0; c < dv; ++c) out[c] = kNaN;
    *lse = kNaN;
    return;
  }
  if (la == -kInf && lb == -kInf) {
    for (std::int64_t c = 0; c < dv; ++c) out[c] = 0.0f;
    *lse = -kInf;
    return;
  }
  if (lb == -kInf) {
    for (std::int64_t c = 0; c < dv; ++c) out[c] = oa[c];
    *lse = la;
    return;
  }
  if (la == -kInf) {
    for (std::int64_t c = 0; c < dv; ++c) out[c] = ob[c];
    *lse = lb;
    return;
  }
  float wa, wb, L;
  if (la == kInf || lb == kInf) {  // only parts holding +inf logits keep weight
    wa = la == kInf ? (lb == kInf ? 0.5f : 1.0f) : 0.0f;
    wb = 1.0f - wa;
    L = kInf;
  } else {
    const float hi = la > lb ? la : lb;
    L = hi + std::log1p(std::exp(-std::fabs(la - lb)));
    wa = std::exp(la - L);
    wb = std::exp(lb - L);
  }
  for (std::int64_t c = 0; c < dv; ++c) out[c] = wa * oa[c] + wb * ob[c];
  *lse = L;
}

sa_status n_merge_attention(void*, std::int64_t rows, std::int64_t dv, const float* oa,
                            const float* la, const float* ob, const float* lb, float* out,
                            float* out_lse) {
  if (rows < 0 || dv < 1) return fail(SA_INVALID_ARGUMENT, "rows must be >= 0 and dv >= 1");
  if (!oa || !la || !ob || !lb || !out || !out_lse)
    return fail(SA_INVALID_ARGUMENT, "null pointer");
  std::vector<float> tmp(static_cast<std::size_t>(dv));
  for (std::int64_t r = 0; r < rows; ++r) {
    float L;
    merge_one(dv, oa + r * dv, la[r], ob + r * dv, lb[r], tmp.data(), &L);
    for (std::int64_t c = 0; c < dv; ++c) out[r * dv + c] = tmp[static_cast<std::size_t>(c)];
    out_lse[r] = L;
  }
  return SA_OK;
}

// The n-way merge as a naive kernel writes it: a left fold of the two-part
// merge (float32 arithmetic), so its error grows with the number of parts.
sa_status n_merge_attention_n(void*, std::int64_t parts, std::int64_t rows, std::int64_t dv,
                              const float* const* o, const float* const* lse, float* out,
                              float* out_lse) {
  if (parts < 1 || rows < 0 || dv < 1)
    return fail(SA_INVALID_ARGUMENT, "merge_attention_states_n: parts >= 1, rows >= 0 and dv >= 1");
  if (!o || !lse || !out || !out_lse) return fail(SA_INVALID_ARGUMENT, "null pointer");
  for (std::int64_t p = 0; p < parts; ++p)
    if (!o[p] || !lse[p]) return fail(SA_INVALID_ARGUMENT, "null part pointer");
  std::vector<float> acc(static_cast<std::size_t>(dv));
  for (std::int64_t r = 0; r < rows; ++r) {
    float L = -kInf;
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (std::int64_t p = 0; p < parts; ++p)
      merge_one(dv, acc.data(), L, o[p] + r * dv, lse[p][r], acc.data(), &L);
    for (std::int64_t c = 0; c < dv; ++c) out[r * dv + c] = acc[static_cast<std::size_t>(c)];
    out_lse[r] = L;
  }
  return SA_OK;
}

sa_status n_merge_entropy(void*, std::int64_t count, const sa_entropy_state* a,
                          const sa_entropy_state* b, sa_entropy_state* out) {
  if (count < 0) return fail(SA_INVALID_ARGUMENT, "count must be >= 0");
  if (count > 0 && (!a || !b || !out)) return fail(SA_INVALID_ARGUMENT, "null pointer");
  for (std::int64_t i = 0; i < count; ++i) {
    const auto r = theory::entropy_merge(theory::EntropyState<float>{a[i].m, a[i].S, a[i].T},
                                         theory::EntropyState<float>{b[i].m, b[i].S, b[i].T});
    out[i] = sa_entropy_state{r.m, r.S, r.T};
  }
  return SA_OK;
}

// Interface v1 attention: the single-head case of naive_attention_v2
// (kernels/attention_v1_args.hpp). float32 and bfloat16, as before.
sa_status n_attention(void* ctx, const sa_attention_args* a) {
  if (!a) return fail(SA_INVALID_ARGUMENT, "null arguments");
  if (a->dtype != SA_F32 && a->dtype != SA_BF16)
    return fail(SA_UNSUPPORTED, "dtype must be SA_F32 or SA_BF16");
  if (a->nq < 1 || a->nk < 1 || a->d < 1 || a->dv < 1)
    return fail(SA_INVALID_ARGUMENT, "nq, nk, d, dv must be >= 1");
  if (a->q_stride < a->d || a->k_stride < a->d || a->v_stride < a->dv || a->out_stride < a->dv)
    return fail(SA_INVALID_ARGUMENT, "strides smaller than the head dimension");
  sa_attention_v2_args v = v2_args_of(*a);
  if (!a->adaptive) v.beta = nullptr;  // v1: beta is 1 on every row, NaN rows included
  const sa_status s = naive_attention_v2(ctx, &v);
  if (s == SA_OK && !a->adaptive && a->beta)
    for (std::int64_t i = 0; i < a->nq; ++i) a->beta[i] = 1.0f;
  return s;
}

const char* n_last_error(void*) { return g_error.empty() ? nullptr : g_error.c_str(); }

const sa_kernel kNaive = {
    SA_KERNEL_ABI_VERSION,
    sizeof(sa_kernel),
    "naive",
    "plain scalar reference-style kernel: float32 arithmetic and accumulation for float32, "
    "bfloat16 and float16 storage (attention: float32 and bfloat16), max-shifted softmax, streamed "
    "(m,S,T) entropy, real split-KV merge",
    SA_OP_SOFTMAX | SA_OP_LOG_SOFTMAX | SA_OP_LOGSUMEXP | SA_OP_ENTROPY | SA_OP_ADAPTIVE_SOFTMAX |
        SA_OP_ATTENTION | SA_OP_MERGE_ENTROPY_STATES | SA_OP_MERGE_ATTENTION_STATES |
        SA_OP_ATTENTION_V2 | SA_OP_MERGE_ATTENTION_STATES_N | SA_OP_SOFTMAX_BACKWARD |
        SA_OP_LOG_SOFTMAX_BACKWARD | SA_OP_ATTENTION_BACKWARD,
    SA_DTYPE_F32 | SA_DTYPE_BF16 | SA_DTYPE_F16,
    SA_MEMORY_HOST,
    SA_ENTROPY_SHANNON,
    nullptr,
    n_softmax,
    n_log_softmax,
    n_logsumexp,
    n_entropy,
    n_adaptive,
    n_attention,
    n_merge_entropy,
    n_merge_attention,
    n_last_error,
    naive_capabilities(),
    naive_attention_v2,
    naive_softmax_backward,
    naive_log_softmax_backward,
    naive_attention_backward,
    n_merge_attention_n};

}  // namespace

const sa_kernel* naive_kernel() { return &kNaive; }

std::string& naive_last_error() { return g_error; }

}  // namespace sa::kernels
