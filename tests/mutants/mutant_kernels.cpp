// One scalar implementation (a copy of kernels/naive) with a switch per bug.
#include "mutant_kernels.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "theory/adaptive_temperature.hpp"
#include "theory/streamed_entropy.hpp"

namespace sa::mutants {
namespace {

enum class Bug {
  no_max_subtraction,
  max_by_absolute_value,
  masked_row_nan,
  masked_row_uniform,
  online_rescale_block_max,
  neg_inf_tile_poison,
  low_precision_accumulation,
  split_kv_merge_weights,
  tail_not_masked,
  causal_top_left,
  inf_nan_mishandled,
  index_wraps,
  biased_rounding,
  entropy_by_cancellation,
  temperature_twice,
  adaptive_clamp_forgotten,
  // Interface freedoms of kernel.h (tests/mutants: each breaks only there):
  in_place_rereads_input,   // a second pass re-reads `in` after writing `out` (in place only)
  rows_assumed_contiguous,  // row r at r * n, whatever the strides (strides != n only)
  chunk_tail_dropped,       // rows past 4097 go in chunks of 4096; the partial last chunk is lost
  scaled_by_1_plus_3u,
  // float16 storage (ABI version 2): float32 arithmetic right, the final store wrong.
  f16_round_toward_zero,  // float16 outputs truncated (rounded toward zero), not nearest even
  f16_flush_subnormals,   // float16 outputs below 2^-14 flushed to zero (no gradual underflow)
};

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

Bug bug_of(void* ctx) { return *static_cast<const Bug*>(ctx); }

float load(sa_dtype t, const void* p, std::int64_t i) {
  if (t == SA_BF16) return float_from_bf16(static_cast<const std::uint16_t*>(p)[i]);
  if (t == SA_F16) return float_from_f16(static_cast<const std::uint16_t*>(p)[i]);
  return static_cast<const float*>(p)[i];
}
// Round toward zero (the biased-rounding bug) or to nearest.
void store(Bug b, sa_dtype t, void* p, std::int64_t i, double v) {
  float f = static_cast<float>(v);
  if (b == Bug::biased_rounding && std::isfinite(f) && std::abs(double(f)) > std::abs(v))
    f = std::nextafter(f, 0.0f);
  if (t == SA_BF16) {
    std::uint16_t h = bf16_from_float(f);
    if (b == Bug::biased_rounding && std::isfinite(f))
      h = static_cast<std::uint16_t>(float_bits(f) >> 16);  // truncate
    static_cast<std::uint16_t*>(p)[i] = h;
  } else if (t == SA_F16) {
    std::uint16_t h = f16_from_float(f);
    if (b == Bug::f16_round_toward_zero && std::isfinite(f) &&
        std::abs(float_from_f16(h)) > std::abs(f))
      h = static_cast<std::uint16_t>(h - 1);  // one step toward zero (sign-magnitude encoding)
    if (b == Bug::f16_flush_subnormals && (h & 0x7c00u) == 0)
      h = static_cast<std::uint16_t>(h & 0x8000u);  // subnormal -> signed zero
    static_cast<std::uint16_t*>(p)[i] = h;
  } else {
    static_cast<float*>(p)[i] = f;
  }
}
float acc_round(Bug b, sa_dtype t, float x) {
  return (b == Bug::low_precision_accumulation && t == SA_BF16) ? round_to_bf16(x) : x;
}

bool bad_rows(sa_dtype t, const sa_rows* s, const void* in, const void* out) {
  return (t != SA_F32 && t != SA_BF16 && t != SA_F16) || !s || !in || !out || s->n <= 0 ||
         s->rows < 0 || s->in_stride < s->n || s->out_stride < s->n || !(s->temperature > 0.0) ||
         !std::isfinite(s->temperature);
}

std::vector<float> read_row(Bug b, sa_dtype t, const void* in, std::int64_t off, std::int64_t n,
                            double theta) {
  std::vector<float> z(static_cast<std::size_t>(n));
  float th = static_cast<float>(theta);
  if (b == Bug::temperature_twice) th = th * th;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t at =
        b == Bug::index_wraps ? (i & 1023) : i;  // a 10-bit index: wraps past 1024
    const float l = load(t, in, off + at);
    z[static_cast<std::size_t>(i)] = th == 1.0f ? l : l / th;
  }
  if (b == Bug::tail_not_masked) {
    // processes whole tiles of 8: the lanes past n hold 0 instead of -inf
    while (z.size() % 8 != 0) z.push_back(0.0f);
  }
  return z;
}

struct Kind {
  bool nan = false, masked = true;
  std::int64_t pinf = 0;
};
Kind kind_of(Bug b, const std::vector<float>& z) {
  Kind k;
  for (float x : z) {
    if (std::isnan(x))
      k.nan = true;
    else if (x == kInf)
      ++k.pinf;
    if (x != -kInf) k.masked = false;
  }
  if (b == Bug::inf_nan_mishandled) k.nan = false, k.pinf = 0;  // no special handling at all
  return k;
}

float row_shift(Bug b, const std::vector<float>& z) {
  if (b == Bug::no_max_subtraction) return 0.0f;
  float m = -kInf;
  for (float x : z) {
    if (b == Bug::max_by_absolute_value)
      m = std::fmax(m, std::fabs(x));
    else if (b == Bug::inf_nan_mishandled)
      m = std::fmax(m, x);  // fmax drops NaN
    else
      m = x > m ? x : m;
  }
  return m;
}

// The softmax weights of a row, with the bug's own way of computing them.
std::vector<float> weights(Bug b, sa_dtype t, const std::vector<float>& z, float* lse_out = nullptr,
                           float* shift_out = nullptr, float* logS_out = nullptr) {
  const std::size_t n = z.size();
  std::vector<float> p(n, 0.0f);
  const Kind k = kind_of(b, z);
  if (k.nan) {
    p.assign(n, kNaN);
    if (lse_out) *lse_out = kNaN;
    return p;
  }
  if (k.masked && b != Bug::masked_row_nan) {
    if (b == Bug::masked_row_uniform) p.assign(n, 1.0f / static_cast<float>(n));
    if (lse_out) *lse_out = -kInf;
    return p;
  }
  if (k.pinf > 0) {
    for (std::size_t i = 0; i < n; ++i)
      if (z[i] == kInf) p[i] = 1.0f / static_cast<float>(k.pinf);
    if (lse_out) *lse_out = kInf;
    return p;
  }
  const float m = row_shift(b, z);
  float S = 0.0f;
  if (b == Bug::online_rescale_block_max || b == Bug::neg_inf_tile_poison) {
    const std::size_t W = b == Bug::online_rescale_block_max ? 16 : 8;
    float run_m = -kInf;
    for (std::size_t t0 = 0; t0 < n; t0 += W) {
      float tm = -kInf;
      for (std::size_t i = t0; i < std::min(n, t0 + W); ++i) tm = std::max(tm, z[i]);
      float part = 0.0f;
      if (b == Bug::online_rescale_block_max) {
        // partial sums kept against their own tile max, never rescaled to the running max
        for (std::size_t i = t0; i < std::min(n, t0 + W); ++i) part += std::exp(z[i] - tm);
        S += part;
      } else {
        const float nm = std::max(run_m, tm);
        for (std::size_t i = t0; i < std::min(n, t0 + W); ++i) part += std::exp(z[i] - nm);
        S = S * std::exp(run_m - nm) + part;  // exp(-inf - -inf) = NaN for a masked first tile
        run_m = nm;
      }
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) S = acc_round(b, t, S + std::exp(z[i] - m));
  }
  for (std::size_t i = 0; i < n; ++i) p[i] = std::exp(z[i] - m) / S;
  if (b == Bug::scaled_by_1_plus_3u)  // every weight 3u too large (a 3u-biased normaliser)
    for (auto& x : p) x = static_cast<float>(double(x) * (1.0 + 3.0 * 0x1p-24));
  if (lse_out) *lse_out = m + std::log(S);
  if (shift_out) *shift_out = m;
  if (logS_out) *logS_out = std::log(S);
  return p;
}

sa_status m_softmax(void* ctx, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  if (bad_rows(t, s, in, out)) return SA_INVALID_ARGUMENT;
  const Bug b = bug_of(ctx);
  if (b == Bug::in_place_rereads_input) {
    // pass 1 stores exp(z - m) into out and sums it; pass 2 re-reads in: in place, in is gone.
    for (std::int64_t r = 0; r < s->rows; ++r) {
      const auto z = read_row(b, t, in, r * s->in_stride, s->n, s->temperature);
      const Kind kd = kind_of(b, z);
      if (kd.nan || kd.masked || kd.pinf > 0) {
        const auto p = weights(b, t, z);
        for (std::int64_t i = 0; i < s->n; ++i)
          store(b, t, out, r * s->out_stride + i, p[static_cast<std::size_t>(i)]);
        continue;
      }
      const float m = row_shift(b, z);
      double S = 0;
      for (std::int64_t i = 0; i < s->n; ++i) {
        const double e = std::exp(double(z[static_cast<std::size_t>(i)]) - m);
        store(b, t, out, r * s->out_stride + i, e);
        S += e;
      }
      for (std::int64_t i = 0; i < s->n; ++i) {
        const double zi = load(t, in, r * s->in_stride + i) / s->temperature;
        store(b, t, out, r * s->out_stride + i, std::exp(zi - m) / S);
      }
    }
    return SA_OK;
  }
  if (b == Bug::rows_assumed_contiguous) {
    for (std::int64_t r = 0; r < s->rows; ++r) {
      const auto p = weights(b, t, read_row(b, t, in, r * s->n, s->n, s->temperature));
      for (std::int64_t i = 0; i < s->n; ++i)
        store(b, t, out, r * s->n + i, p[static_cast<std::size_t>(i)]);
    }
    return SA_OK;
  }
  if (b == Bug::chunk_tail_dropped && s->n > 4097) {
    const std::int64_t full = s->n / 4096 * 4096;  // items past the last whole chunk are lost
    for (std::int64_t r = 0; r < s->rows; ++r) {
      auto z = read_row(b, t, in, r * s->in_stride, s->n, s->temperature);
      z.resize(static_cast<std::size_t>(full));
      const auto p = weights(b, t, z);
      for (std::int64_t i = 0; i < s->n; ++i)
        store(b, t, out, r * s->out_stride + i, i < full ? p[static_cast<std::size_t>(i)] : 0.0);
    }
    return SA_OK;
  }
  for (std::int64_t r = 0; r < s->rows; ++r) {
    const auto p = weights(b, t, read_row(b, t, in, r * s->in_stride, s->n, s->temperature));
    for (std::int64_t i = 0; i < s->n; ++i)
      store(b, t, out, r * s->out_stride + i, p[static_cast<std::size_t>(i)]);
  }
  return SA_OK;
}

sa_status m_log_softmax(void* ctx, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  if (bad_rows(t, s, in, out)) return SA_INVALID_ARGUMENT;
  const Bug b = bug_of(ctx);
  for (std::int64_t r = 0; r < s->rows; ++r) {
    const auto z = read_row(b, t, in, r * s->in_stride, s->n, s->temperature);
    float lse, m = 0, logS = 0;
    const auto p = weights(b, t, z, &lse, &m, &logS);
    const Kind k = kind_of(b, z);
    for (std::int64_t i = 0; i < s->n; ++i) {
      const float zi = z[static_cast<std::size_t>(i)];
      float v;
      if (k.nan)
        v = kNaN;
      else if (k.pinf > 0)
        v = zi == kInf ? -std::log(float(k.pinf)) : -kInf;
      else if (k.masked)
        v = b == Bug::masked_row_nan ? kNaN : -kInf;
      else
        v = zi == -kInf ? -kInf : (zi - m) - logS;
      store(b, t, out, r * s->out_stride + i, v);
    }
  }
  return SA_OK;
}

sa_status m_logsumexp(void* ctx, sa_dtype t, const sa_rows* s, const void* in, float* lse) {
  if (bad_rows(t, s, in, lse)) return SA_INVALID_ARGUMENT;
  const Bug b = bug_of(ctx);
  for (std::int64_t r = 0; r < s->rows; ++r) {
    float L;
    weights(b, t, read_row(b, t, in, r * s->in_stride, s->n, s->temperature), &L);
    lse[r] = L;
  }
  return SA_OK;
}

float entropy_of_row(Bug b, sa_dtype t, const std::vector<float>& z,
                     theory::EntropyState<float>* st_out) {
  auto st = theory::entropy_identity<float>();
  for (float x : z) st = theory::entropy_push(st, x);
  if (st_out) *st_out = st;
  if (b == Bug::entropy_by_cancellation && std::isfinite(st.m)) {
    float S = 0, U = 0;
    for (float x : z)
      if (x != -kInf) {
        const float e = std::exp(x - st.m);
        S += e;
        U += e * x;
      }
    return (st.m + std::log(S)) - U / S;  // log-sum-exp minus the mean logit
  }
  if (b == Bug::masked_row_nan && theory::is_identity(st)) return kNaN;
  if (b == Bug::low_precision_accumulation || b == Bug::no_max_subtraction ||
      b == Bug::max_by_absolute_value || b == Bug::inf_nan_mishandled ||
      b == Bug::tail_not_masked || b == Bug::index_wraps) {
    // these kernels compute H = -sum p log p from their own (buggy) weights
    const auto p = weights(b, t, z);
    float H = 0;
    for (float x : p)
      if (x > 0 || std::isnan(x)) H = acc_round(b, t, H - x * std::log(x));
    return H;
  }
  return theory::entropy_of(st);
}

sa_status m_entropy(void* ctx, sa_dtype t, const sa_rows* s, const void* in, float* H,
                    sa_entropy_state* state) {
  if (bad_rows(t, s, in, H)) return SA_INVALID_ARGUMENT;
  const Bug b = bug_of(ctx);
  for (std::int64_t r = 0; r < s->rows; ++r) {
    theory::EntropyState<float> st;
    H[r] = entropy_of_row(b, t, read_row(b, t, in, r * s->in_stride, s->n, s->temperature), &st);
    if (state) state[r] = {st.m, st.S, st.T};
  }
  return SA_OK;
}

float beta_of(Bug b, float H) {
  if (b == Bug::adaptive_clamp_forgotten) return H > 0.5f ? theory::adaptive_polynomial(H) : 1.0f;
  return theory::adaptive_beta(H);
}

sa_status m_adaptive(void* ctx, sa_dtype t, const sa_rows* s, const void* in, void* out,
                     float* beta, float* entropy) {
  if (bad_rows(t, s, in, out)) return SA_INVALID_ARGUMENT;
  const Bug b = bug_of(ctx);
  for (std::int64_t r = 0; r < s->rows; ++r) {
    auto z = read_row(b, t, in, r * s->in_stride, s->n, s->temperature);
    const float H = entropy_of_row(b, t, z, nullptr);
    const float be = beta_of(b, H);
    for (auto& x : z)
      if (std::isfinite(x)) x *= be;
    const auto p = weights(b, t, z);
    for (std::int64_t i = 0; i < s->n; ++i)
      store(b, t, out, r * s->out_stride + i, p[static_cast<std::size_t>(i)]);
    if (beta) beta[r] = be;
    if (entropy) entropy[r] = H;
  }
  return SA_OK;
}

void merge_one(Bug b, std::int64_t dv, const float* oa, float la, const float* ob, float lb,
               float* out, float* lse) {
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
  const float hi = std::max(la, lb);
  float wa = la == -kInf ? 0.0f : std::exp(la - hi), wb = lb == -kInf ? 0.0f : std::exp(lb - hi);
  const float L = hi + std::log(wa + wb);
  if (b != Bug::split_kv_merge_weights) {  // the bug: forgets to renormalise by wa + wb
    const float sum = wa + wb;
    wa /= sum, wb /= sum;
  }
  for (std::int64_t c = 0; c < dv; ++c) out[c] = wa * oa[c] + wb * ob[c];
  *lse = L;
}

sa_status m_merge_attention(void* ctx, std::int64_t rows, std::int64_t dv, const float* oa,
                            const float* la, const float* ob, const float* lb, float* out,
                            float* out_lse) {
  if (rows < 0 || dv < 1 || !oa || !la || !ob || !lb || !out || !out_lse)
    return SA_INVALID_ARGUMENT;
  std::vector<float> tmp(static_cast<std::size_t>(dv));
  for (std::int64_t r = 0; r < rows; ++r) {
    float L;
    merge_one(bug_of(ctx), dv, oa + r * dv, la[r], ob + r * dv, lb[r], tmp.data(), &L);
    for (std::int64_t c = 0; c < dv; ++c) out[r * dv + c] = tmp[static_cast<std::size_t>(c)];
    out_lse[r] = L;
  }
  return SA_OK;
}

sa_status m_merge_entropy(void* ctx, std::int64_t count, const sa_entropy_state* a,
                          const sa_entropy_state* b, sa_entropy_state* out) {
  const Bug bug = bug_of(ctx);
  for (std::int64_t i = 0; i < count; ++i) {
    theory::EntropyState<float> x{a[i].m, a[i].S, a[i].T}, y{b[i].m, b[i].S, b[i].T}, r;
    if (bug == Bug::neg_inf_tile_poison) {
      // no identity handling: m = max, scale factors exp(m_a - m), exp(m_b - m)
      const float m = std::max(x.m, y.m), ea = std::exp(x.m - m), eb = std::exp(y.m - m);
      r = {m, ea * x.S + eb * y.S, ea * (x.T + (x.m - m) * x.S) + eb * (y.T + (y.m - m) * y.S)};
    } else {
      r = theory::entropy_merge(x, y);
    }
    out[i] = {r.m, r.S, r.T};
  }
  return SA_OK;
}

sa_status m_attention(void* ctx, const sa_attention_args* a) {
  if (!a || (a->dtype != SA_F32 && a->dtype != SA_BF16) || a->nq < 1 || a->nk < 1 || a->d < 1 ||
      a->dv < 1)
    return SA_INVALID_ARGUMENT;
  const Bug b = bug_of(ctx);
  const float scale = static_cast<float>(a->scale);
  const std::int64_t splits = a->num_splits > 1 ? std::min(a->num_splits, a->nk) : 1;
  std::vector<float> s(static_cast<std::size_t>(a->nk));
  for (std::int64_t i = 0; i < a->nq; ++i) {
    for (std::int64_t j = 0; j < a->nk; ++j) {
      const std::int64_t last = b == Bug::causal_top_left ? i : i + (a->nk - a->nq);
      const bool vis = (!a->key_mask || a->key_mask[j]) && (!a->causal || j <= last);
      float dot = 0.0f;
      for (std::int64_t c = 0; c < a->d; ++c)
        dot +=
            load(a->dtype, a->q, i * a->q_stride + c) * load(a->dtype, a->k, j * a->k_stride + c);
      s[static_cast<std::size_t>(j)] = vis ? scale * dot : -kInf;
    }
    const float H = entropy_of_row(b, a->dtype, s, nullptr);
    const float be = a->adaptive ? beta_of(b, H) : 1.0f;
    std::vector<float> z = s;
    for (auto& x : z)
      if (std::isfinite(x)) x *= be;
    std::vector<float> acc(static_cast<std::size_t>(a->dv), 0.0f),
        o(static_cast<std::size_t>(a->dv));
    float L = -kInf;
    for (std::int64_t p = 0; p < splits; ++p) {
      const std::int64_t k0 = a->nk * p / splits, k1 = a->nk * (p + 1) / splits;
      std::vector<float> part(z.begin() + k0, z.begin() + k1);
      float lp;
      const auto w = weights(b, a->dtype, part, &lp);
      for (std::int64_t c = 0; c < a->dv; ++c) {
        float v = 0.0f;
        for (std::int64_t j = k0; j < k1; ++j) {
          const float wj = w[static_cast<std::size_t>(j - k0)];
          if (wj != 0.0f || std::isnan(wj)) v += wj * load(a->dtype, a->v, j * a->v_stride + c);
        }
        o[static_cast<std::size_t>(c)] = v;
      }
      if (p == 0)
        acc = o, L = lp;
      else
        merge_one(b, a->dv, acc.data(), L, o.data(), lp, acc.data(), &L);
    }
    for (std::int64_t c = 0; c < a->dv; ++c)
      store(b, a->dtype, a->out, i * a->out_stride + c, acc[static_cast<std::size_t>(c)]);
    if (a->lse) a->lse[i] = L;
    if (a->entropy) a->entropy[i] = H;
    if (a->beta) a->beta[i] = be;
  }
  return SA_OK;
}

const char* m_last_error(void*) { return nullptr; }

struct Def {
  Bug bug;
  const char* name;
  const char* bug_class;
};
const Def kDefs[] = {
    {Bug::no_max_subtraction, "mutant_no_max", "no max subtraction"},
    {Bug::max_by_absolute_value, "mutant_abs_max", "max by absolute value / wrong sign"},
    {Bug::masked_row_nan, "mutant_masked_nan", "fully masked row (NaN)"},
    {Bug::masked_row_uniform, "mutant_masked_uniform",
     "fully masked row (uniform instead of zeros)"},
    {Bug::online_rescale_block_max, "mutant_block_max",
     "online-softmax rescale against the block max"},
    {Bug::neg_inf_tile_poison, "mutant_neg_inf_tile", "-inf tile in online softmax / merge"},
    {Bug::low_precision_accumulation, "mutant_bf16_accumulation", "low-precision accumulation"},
    {Bug::split_kv_merge_weights, "mutant_split_kv_weights", "split-KV / flash-decoding merge"},
    {Bug::tail_not_masked, "mutant_tail_unmasked", "tail not masked"},
    {Bug::causal_top_left, "mutant_causal_top_left", "causal alignment"},
    {Bug::inf_nan_mishandled, "mutant_inf_nan", "+inf / NaN inputs"},
    {Bug::index_wraps, "mutant_index_wrap",
     "large sizes (index overflow, simulated: 10-bit index)"},
    {Bug::biased_rounding, "mutant_round_toward_zero", "biased rounding"},
    {Bug::entropy_by_cancellation, "mutant_entropy_cancellation", "entropy by cancellation"},
    {Bug::temperature_twice, "mutant_temperature_twice", "temperature applied twice"},
    {Bug::adaptive_clamp_forgotten, "mutant_adaptive_no_clamp",
     "adaptive clamp beta >= 1 forgotten"},
    {Bug::in_place_rereads_input, "mutant_in_place",
     "in-place call (in == out) breaks: a second pass re-reads the overwritten input"},
    {Bug::rows_assumed_contiguous, "mutant_contiguous_rows",
     "strides ignored: row r assumed at r * n (breaks only when a stride != n)"},
    {Bug::chunk_tail_dropped, "mutant_chunk_tail",
     "rows past 4097 split into 4096-item chunks; the partial last chunk is dropped"},
    {Bug::scaled_by_1_plus_3u, "mutant_scaled_1_plus_3u",
     "every weight multiplied by (1 + 3u): a small systematic error no per-row bound sees"},
    {Bug::f16_round_toward_zero, "mutant_f16_round_toward_zero",
     "biased rounding (float16 outputs truncated toward zero)"},
    {Bug::f16_flush_subnormals, "mutant_f16_flush_subnormals",
     "float16 subnormal outputs flushed to zero (no gradual underflow)"},
};
// Only the float16 mutants declare float16 (the others are checked where
// their bug is, and the suite runs float16 only for kernels that declare it).
bool declares_f16(Bug b) {
  return b == Bug::f16_round_toward_zero || b == Bug::f16_flush_subnormals;
}

}  // namespace

std::vector<Mutant> all_mutants() {
  static std::vector<sa_kernel> kernels = [] {
    std::vector<sa_kernel> ks;
    for (const Def& d : kDefs) {
      sa_kernel k{};
      k.abi_version = SA_KERNEL_ABI_VERSION;
      k.struct_size = sizeof(sa_kernel);
      k.name = d.name;
      k.description = d.bug_class;
      k.ops = SA_OP_SOFTMAX | SA_OP_LOG_SOFTMAX | SA_OP_LOGSUMEXP | SA_OP_ENTROPY |
              SA_OP_ADAPTIVE_SOFTMAX | SA_OP_ATTENTION | SA_OP_MERGE_ENTROPY_STATES |
              SA_OP_MERGE_ATTENTION_STATES;
      k.dtypes = SA_DTYPE_F32 | SA_DTYPE_BF16 | (declares_f16(d.bug) ? SA_DTYPE_F16 : 0u);
      k.memory = SA_MEMORY_HOST;
      k.adaptive_entropy = SA_ENTROPY_SHANNON;
      k.ctx = const_cast<Bug*>(&d.bug);
      k.softmax = m_softmax;
      k.log_softmax = m_log_softmax;
      k.logsumexp = m_logsumexp;
      k.entropy = m_entropy;
      k.adaptive_softmax = m_adaptive;
      k.attention = m_attention;
      k.merge_entropy_states = m_merge_entropy;
      k.merge_attention_states = m_merge_attention;
      k.last_error = m_last_error;
      ks.push_back(k);
    }
    return ks;
  }();
  std::vector<Mutant> out;
  for (std::size_t i = 0; i < kernels.size(); ++i) out.push_back({kDefs[i].bug_class, &kernels[i]});
  return out;
}

}  // namespace sa::mutants
