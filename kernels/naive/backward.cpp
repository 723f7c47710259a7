#include "kernels/naive/backward.hpp"
#include "kernels/attention_v2_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "kernels/naive/attention_v2.hpp"
#include "kernels/naive/elements.hpp"

namespace sa::kernels {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
using naive::load;
using naive::store;

sa_status fail(sa_status s, std::string what) {
  naive_last_error() = std::move(what);
  return s;
}

sa_status check_rows(const char* op, sa_dtype t, const sa_rows* s, const void* y, const void* dy,
                     const void* dx) {
  std::int32_t ti;
  std::memcpy(&ti, &t, sizeof ti);
  if (ti != SA_F32 && ti != SA_BF16 && ti != SA_F16)
    return fail(SA_UNSUPPORTED, std::string(op) + ": dtype must be SA_F32, SA_BF16 or SA_F16");
  if (!s || !y || !dy || !dx) return fail(SA_INVALID_ARGUMENT, std::string(op) + ": null pointer");
  std::int32_t ot;
  std::memcpy(&ot, &s->out_dtype, sizeof ot);
  if (ot != ti) return fail(SA_UNSUPPORTED, std::string(op) + ": out_dtype must equal dtype");
  if (s->n <= 0 || s->rows < 0 || s->in_stride < s->n || s->out_stride < s->n)
    return fail(SA_INVALID_ARGUMENT, std::string(op) + ": need n >= 1, rows >= 0 and strides >= n");
  if (!(s->temperature > 0.0) || !std::isfinite(s->temperature))
    return fail(SA_INVALID_ARGUMENT, std::string(op) + ": temperature must be finite and > 0");
  return SA_OK;
}

}  // namespace

sa_status naive_softmax_backward(void*, sa_dtype t, const sa_rows* s, const void* y, const void* dy,
                                 void* dx) {
  if (sa_status st = check_rows("softmax_backward", t, s, y, dy, dx); st != SA_OK) return st;
  const float th = static_cast<float>(s->temperature);
  std::vector<float> g(static_cast<std::size_t>(s->n));
  for (std::int64_t r = 0; r < s->rows; ++r) {
    float S = 0.0f;
    for (std::int64_t i = 0; i < s->n; ++i)
      S += load(t, y, r * s->in_stride + i) * load(t, dy, r * s->in_stride + i);
    for (std::int64_t i = 0; i < s->n; ++i) {
      const float yi = load(t, y, r * s->in_stride + i), gi = load(t, dy, r * s->in_stride + i);
      g[i] = yi * (gi - S) / th;
    }
    for (std::int64_t i = 0; i < s->n; ++i) store(t, dx, r * s->out_stride + i, g[i]);
  }
  return SA_OK;
}

sa_status naive_log_softmax_backward(void*, sa_dtype t, const sa_rows* s, const void* y,
                                     const void* dy, void* dx) {
  if (sa_status st = check_rows("log_softmax_backward", t, s, y, dy, dx); st != SA_OK) return st;
  const float th = static_cast<float>(s->temperature);
  std::vector<float> g(static_cast<std::size_t>(s->n));
  for (std::int64_t r = 0; r < s->rows; ++r) {
    float S = 0.0f;
    bool nan = false;
    for (std::int64_t i = 0; i < s->n; ++i) {
      S += load(t, dy, r * s->in_stride + i);
      nan = nan || std::isnan(load(t, y, r * s->in_stride + i));
    }
    if (nan) S = std::numeric_limits<float>::quiet_NaN();  // kernel.h: NaN rows are NaN
    for (std::int64_t i = 0; i < s->n; ++i) {
      const float yi = load(t, y, r * s->in_stride + i), gi = load(t, dy, r * s->in_stride + i);
      g[i] = (gi - std::exp(yi) * S) / th;
    }
    for (std::int64_t i = 0; i < s->n; ++i) store(t, dx, r * s->out_stride + i, g[i]);
  }
  return SA_OK;
}

namespace {

struct Shape {
  std::int64_t batch, heads_q, heads_kv, d, dv;
  const std::int32_t *cu_q, *cu_k;
  std::int64_t seqlen_q, seqlen_k;
  std::int64_t len_q(std::int64_t b) const { return cu_q ? cu_q[b + 1] - cu_q[b] : seqlen_q; }
  std::int64_t len_k(std::int64_t b) const { return cu_k ? cu_k[b + 1] - cu_k[b] : seqlen_k; }
  std::int64_t row_q(std::int64_t b, std::int64_t i) const {
    return cu_q ? cu_q[b] + i : b * seqlen_q + i;
  }
  std::int64_t row_k(std::int64_t b, std::int64_t j) const {
    return cu_k ? cu_k[b] + j : b * seqlen_k + j;
  }
  std::int64_t total_q() const { return cu_q ? cu_q[batch] : batch * seqlen_q; }
  std::int64_t total_k() const { return cu_k ? cu_k[batch] : batch * seqlen_k; }
};

struct Features {
  double scale, softcap;
  bool causal, top_left;
  std::int64_t window_left, window_right;
  const float *alibi, *sinks;
  const std::uint8_t* key_padding;  // by packed key row
};

// Gradients in packed BSHD float32 (as core/attention_case.hpp).
struct Grads {
  std::vector<float> dq, dk, dv, dsinks;
};

// The backward of every query row. `A` reads inputs by (sequence, index in
// the sequence, head, component); `rnd` rounds intermediates (identity for
// the kernel; the output type for the same-dtype baseline, which also
// recomputes P from the scores and D as sum_j P dP instead of reading lse and
// out). The loops visit (b, h, i, j) in order; `order_seed` permutes i.
template <class Acc, class R>
void backward_core(const Shape& sh, const Features& f, const Acc& A, R rnd, bool baseline,
                   std::uint64_t order_seed, Grads& g) {
  const std::int64_t HQ = sh.heads_q, HK = sh.heads_kv, d = sh.d, dv = sh.dv;
  g.dq.assign(static_cast<std::size_t>(sh.total_q() * HQ * d), 0.0f);
  g.dk.assign(static_cast<std::size_t>(sh.total_k() * HK * d), 0.0f);
  g.dv.assign(static_cast<std::size_t>(sh.total_k() * HK * dv), 0.0f);
  g.dsinks.assign(f.sinks ? static_cast<std::size_t>(HQ) : 0, 0.0f);
  const float scale = static_cast<float>(f.scale), cap = static_cast<float>(f.softcap);
  std::vector<float> s, gc, p, dp, go(static_cast<std::size_t>(dv));
  std::vector<std::int64_t> order;
  std::mt19937_64 rng(order_seed);
  for (std::int64_t b = 0; b < sh.batch; ++b) {
    const std::int64_t Lq = sh.len_q(b), Lk = sh.len_k(b);
    const std::int64_t off = f.top_left ? 0 : Lk - Lq;
    const std::int64_t right = f.causal ? 0 : f.window_right;
    s.assign(static_cast<std::size_t>(Lk), -kInf);
    gc.assign(s.size(), 1.0f);
    p.assign(s.size(), 0.0f);
    dp.assign(s.size(), 0.0f);
    order.resize(static_cast<std::size_t>(Lq));
    for (std::int64_t i = 0; i < Lq; ++i) order[i] = i;
    for (std::int64_t h = 0; h < HQ; ++h) {
      const std::int64_t hk = h / (HQ / HK);
      if (order_seed) std::shuffle(order.begin(), order.end(), rng);
      for (const std::int64_t i : order) {
        const std::int64_t row = sh.row_q(b, i);
        const std::int64_t diag = i + off;
        float m = -kInf;
        for (std::int64_t j = 0; j < Lk; ++j) {
          bool vis = true;
          if (f.key_padding && f.key_padding[sh.row_k(b, j)] == 0) vis = false;
          if (right >= 0 && j > diag + right) vis = false;
          if (f.window_left >= 0 && j < diag - f.window_left) vis = false;
          s[j] = -kInf;
          if (!vis) continue;  // masked keys are never read
          float dot = 0.0f;
          for (std::int64_t c = 0; c < d; ++c) dot += A.q(b, i, h, c) * A.k(b, j, hk, c);
          float x = dot * scale;
          gc[j] = 1.0f;
          if (cap > 0.0f) {
            const float th = std::tanh(x / cap);
            x = cap * th;
            gc[j] = 1.0f - th * th;
          }
          if (f.alibi) x -= f.alibi[h] * static_cast<float>(std::llabs(diag - j));
          s[j] = rnd(x);
          m = std::max(m, s[j]);
        }
        const float sink = f.sinks ? f.sinks[h] : -kInf;
        float p_sink = 0.0f;
        if (baseline) {
          m = std::max(m, sink);
          if (m == -kInf) continue;  // fully masked row: no gradient
          float S = 0.0f;
          for (std::int64_t j = 0; j < Lk; ++j)
            if (s[j] != -kInf) S += std::exp(s[j] - m);
          if (f.sinks) S += std::exp(sink - m);
          for (std::int64_t j = 0; j < Lk; ++j)
            p[j] = s[j] == -kInf ? 0.0f : rnd(std::exp(s[j] - m) / S);
          if (f.sinks) p_sink = rnd(std::exp(sink - m) / S);
        } else {
          const float L = A.lse(b, i, h);
          if (L == -kInf) continue;  // fully masked row (kernel.h): no gradient, no NaN
          for (std::int64_t j = 0; j < Lk; ++j) p[j] = s[j] == -kInf ? 0.0f : std::exp(s[j] - L);
          if (f.sinks) p_sink = std::exp(sink - L);
        }
        for (std::int64_t c = 0; c < dv; ++c) go[c] = A.dout(b, i, h, c);
        float D = 0.0f;
        for (std::int64_t j = 0; j < Lk; ++j) {
          if (s[j] == -kInf) continue;
          float acc = 0.0f;
          for (std::int64_t c = 0; c < dv; ++c) acc += go[c] * A.v(b, j, hk, c);
          dp[j] = rnd(acc);
        }
        if (baseline) {
          for (std::int64_t j = 0; j < Lk; ++j)
            if (s[j] != -kInf) D += p[j] * dp[j];
        } else {
          for (std::int64_t c = 0; c < dv; ++c) D += go[c] * A.out(b, i, h, c);
        }
        if (f.sinks) g.dsinks[h] -= p_sink * D;
        float* dq = g.dq.data() + (row * HQ + h) * d;
        for (std::int64_t j = 0; j < Lk; ++j) {
          if (s[j] == -kInf) continue;
          const std::int64_t kr = sh.row_k(b, j) * HK + hk;
          const float ds = rnd(p[j] * (dp[j] - D) * gc[j]);
          float* dk = g.dk.data() + kr * d;
          float* dvp = g.dv.data() + kr * dv;
          for (std::int64_t c = 0; c < d; ++c) {
            dq[c] += ds * A.k(b, j, hk, c);
            dk[c] += ds * A.q(b, i, h, c);
          }
          for (std::int64_t c = 0; c < dv; ++c) dvp[c] += p[j] * go[c];
        }
      }
    }
  }
  for (auto& x : g.dq) x = rnd(x * scale);
  for (auto& x : g.dk) x = rnd(x * scale);
  for (auto& x : g.dv) x = rnd(x);
  for (auto& x : g.dsinks) x = rnd(x);
}

// Element access of one call's tensors.
struct AbiAccess {
  const sa_attention_backward_args* a;
  const sa_attention_v2_args* f;
  Shape sh;
  bool varlen;
  std::int64_t total_q;
  std::int64_t at(const sa_tensor& t, std::int64_t b, std::int64_t r, std::int64_t h) const {
    return (varlen ? 0 : b * t.stride_b) + h * t.stride_h + r * t.stride_s;
  }
  std::int64_t qr(std::int64_t b, std::int64_t i) const { return varlen ? sh.row_q(b, i) : i; }
  std::int64_t kr(std::int64_t b, std::int64_t j) const { return varlen ? sh.row_k(b, j) : j; }
  float q(std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t c) const {
    return load(f->qkv_dtype, f->q.data, at(f->q, b, qr(b, i), h) + c);
  }
  float k(std::int64_t b, std::int64_t j, std::int64_t h, std::int64_t c) const {
    return load(f->qkv_dtype, f->k.data, at(f->k, b, kr(b, j), h) + c);
  }
  float v(std::int64_t b, std::int64_t j, std::int64_t h, std::int64_t c) const {
    return load(f->qkv_dtype, f->v.data, at(f->v, b, kr(b, j), h) + c);
  }
  float out(std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t c) const {
    const std::int64_t o =
        (varlen ? 0 : b * f->out_stride_b) + h * f->out_stride_h + qr(b, i) * f->out_stride_s;
    return load(f->out_dtype, f->out, o + c);
  }
  float dout(std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t c) const {
    return load(f->out_dtype, a->dout.data, at(a->dout, b, qr(b, i), h) + c);
  }
  float lse(std::int64_t b, std::int64_t i, std::int64_t h) const {
    return f->lse[varlen ? h * total_q + sh.row_q(b, i) : (b * sh.heads_q + h) * sh.seqlen_q + i];
  }
};

sa_status backward_entry(const sa_attention_backward_args* a, std::uint64_t order_seed) {
  if (!a || !a->forward) return fail(SA_INVALID_ARGUMENT, "attention_backward: args is NULL");
  sa_attention_v2_args fwd;  // an earlier interface-2 caller's forward, completed
  const sa_attention_v2_args* f = complete_v2_args(a->forward, fwd);
  if (a->struct_size < sizeof(sa_attention_backward_args) || !f)
    return fail(SA_INVALID_ARGUMENT, "attention_backward: struct_size smaller than this kernel's");
  sa_attention_backward_args with_fwd = *a;
  with_fwd.forward = f;
  a = &with_fwd;
  std::int32_t qt, ot, align;
  std::memcpy(&qt, &f->qkv_dtype, 4);
  std::memcpy(&ot, &f->out_dtype, 4);
  std::memcpy(&align, &f->alignment, 4);
  if ((qt != SA_F32 && qt != SA_BF16 && qt != SA_F16) || ot != qt)
    return fail(SA_UNSUPPORTED,
                "attention_backward: float32, bfloat16 or float16 inputs, same type out");
  if (f->adaptive)
    return fail(SA_UNSUPPORTED, "attention_backward: adaptive attention has no backward");
  if (f->batch < 0 || f->heads_q < 1 || f->heads_kv < 1 || f->heads_q % f->heads_kv != 0 ||
      f->head_dim < 1 || f->head_dim_v < 1)
    return fail(SA_INVALID_ARGUMENT,
                "attention_backward: need batch >= 0, heads_q a multiple of heads_kv >= 1, "
                "head dims >= 1");
  if ((f->cu_seqlens_q == nullptr) != (f->cu_seqlens_k == nullptr))
    return fail(SA_INVALID_ARGUMENT,
                "attention_backward: cu_seqlens_q and cu_seqlens_k must both be set or NULL");
  if (!f->q.data || !f->k.data || !f->v.data || !f->out || !f->lse || !a->dout.data ||
      !a->dq.data || !a->dk.data || !a->dv.data || (f->sinks && !a->dsinks))
    return fail(SA_INVALID_ARGUMENT,
                "attention_backward: q, k, v, out, lse, dout, dq, dk, dv (and dsinks with sinks) "
                "must not be NULL");
  if (f->window_left < -1 || f->window_right < -1 || !(f->softcap >= 0.0) ||
      !std::isfinite(f->softcap) || !std::isfinite(f->scale) ||
      (align != SA_ALIGN_BOTTOM_RIGHT && align != SA_ALIGN_TOP_LEFT))
    return fail(SA_INVALID_ARGUMENT,
                "attention_backward: window bounds >= -1, softcap >= 0, finite scale, alignment "
                "0 or 1 expected");
  Shape sh{f->batch,        f->heads_q,      f->heads_kv, f->head_dim, f->head_dim_v,
           f->cu_seqlens_q, f->cu_seqlens_k, f->seqlen_q, f->seqlen_k};
  const bool varlen = f->cu_seqlens_q != nullptr;
  Features ft{f->scale,           f->softcap,      f->causal != 0,  align == SA_ALIGN_TOP_LEFT,
              f->window_left,     f->window_right, f->alibi_slopes, f->sinks,
              f->key_padding_mask};
  AbiAccess A{a, f, sh, varlen, sh.total_q()};
  Grads g;
  backward_core(
      sh, ft, A, [](float x) { return x; }, false, order_seed, g);
  const sa_dtype t = f->qkv_dtype;
  const std::int64_t HQ = sh.heads_q, HK = sh.heads_kv, d = sh.d, dv = sh.dv;
  for (std::int64_t b = 0; b < sh.batch; ++b) {
    for (std::int64_t i = 0; i < sh.len_q(b); ++i)
      for (std::int64_t h = 0; h < HQ; ++h) {
        const std::int64_t o = A.at(a->dq, b, A.qr(b, i), h), row = sh.row_q(b, i);
        for (std::int64_t c = 0; c < d; ++c)
          store(t, const_cast<void*>(a->dq.data), o + c, g.dq[(row * HQ + h) * d + c]);
      }
    for (std::int64_t j = 0; j < sh.len_k(b); ++j)
      for (std::int64_t h = 0; h < HK; ++h) {
        const std::int64_t row = sh.row_k(b, j);
        const std::int64_t ok = A.at(a->dk, b, A.kr(b, j), h), ov = A.at(a->dv, b, A.kr(b, j), h);
        for (std::int64_t c = 0; c < d; ++c)
          store(t, const_cast<void*>(a->dk.data), ok + c, g.dk[(row * HK + h) * d + c]);
        for (std::int64_t c = 0; c < dv; ++c)
          store(t, const_cast<void*>(a->dv.data), ov + c, g.dv[(row * HK + h) * dv + c]);
      }
  }
  if (f->sinks)
    for (std::int64_t h = 0; h < HQ; ++h) a->dsinks[h] = g.dsinks[h];
  return SA_OK;
}

}  // namespace

sa_status naive_attention_backward(void*, const sa_attention_backward_args* a) {
  return backward_entry(a, 0);
}

sa_status naive_attention_backward_ordered(const sa_attention_backward_args* a,
                                           std::uint64_t order_seed) {
  return backward_entry(a, order_seed);
}

namespace same_dtype {
Gradients attention_backward(const AttentionCase& c, const std::vector<float>& dout) {
  c.validate();
  Shape sh{c.batch,
           c.heads_q,
           c.heads_kv,
           c.d,
           c.dv,
           c.varlen() ? c.cu_q.data() : nullptr,
           c.varlen() ? c.cu_k.data() : nullptr,
           c.seqlen_q,
           c.seqlen_k};
  Features ft{c.scale,
              c.softcap,
              c.causal,
              c.top_left,
              c.window_left,
              c.window_right,
              c.alibi_slopes.empty() ? nullptr : c.alibi_slopes.data(),
              c.sinks.empty() ? nullptr : c.sinks.data(),
              c.key_padding_mask.empty() ? nullptr : c.key_padding_mask.data()};
  struct CaseAccess {
    const AttentionCase& c;
    const std::vector<float>& go;
    float q(std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t x) const {
      return c.q[(c.row_q(b, i) * c.heads_q + h) * c.d + x];
    }
    float k(std::int64_t b, std::int64_t j, std::int64_t h, std::int64_t x) const {
      return c.k[(c.row_k(b, j) * c.heads_kv + h) * c.d + x];
    }
    float v(std::int64_t b, std::int64_t j, std::int64_t h, std::int64_t x) const {
      return c.v[(c.row_k(b, j) * c.heads_kv + h) * c.dv + x];
    }
    float out(std::int64_t, std::int64_t, std::int64_t, std::int64_t) const { return 0.0f; }
    float lse(std::int64_t, std::int64_t, std::int64_t) const { return 0.0f; }
    float dout(std::int64_t b, std::int64_t i, std::int64_t h, std::int64_t x) const {
      return go[(c.row_q(b, i) * c.heads_q + h) * c.dv + x];
    }
  } A{c, dout};
  const AttnType ot = c.out_type;
  auto rnd = [ot](float x) {
    return ot == AttnType::bfloat16  ? round_to_bf16(x)
           : ot == AttnType::float16 ? round_to_f16(x)
                                     : x;
  };
  Grads g;
  backward_core(sh, ft, A, rnd, true, 0, g);
  return {std::move(g.dq), std::move(g.dk), std::move(g.dv), std::move(g.dsinks)};
}
}  // namespace same_dtype

}  // namespace sa::kernels
