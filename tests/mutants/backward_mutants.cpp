// Backward mutants: the naive kernel's backward operations with one bug a
// real backward pass has shipped (issue 16's list), introduced around the
// naive kernel (changing what it is handed, or what it returned) so each bug
// is exactly the one named.
#include "backward_mutants.hpp"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/naive/attention_v2.hpp"
#include "kernels/naive/backward.hpp"
#include "kernels/naive/elements.hpp"

namespace sa::mutants {
namespace {

enum class Bug {
  d_missing,
  dq_scaled_twice,
  gqa_not_summed,
  mask_ignored,
  tail_nan,
  nondeterministic
};

using kernels::naive::load;
using kernels::naive::store;

std::size_t elem_size(sa_dtype t) { return t == SA_F32 ? 4 : 2; }

struct Geo {
  const sa_attention_v2_args* f;
  bool varlen() const { return f->cu_seqlens_q != nullptr; }
  std::int64_t len_q(std::int64_t b) const {
    return varlen() ? f->cu_seqlens_q[b + 1] - f->cu_seqlens_q[b] : f->seqlen_q;
  }
  std::int64_t len_k(std::int64_t b) const {
    return varlen() ? f->cu_seqlens_k[b + 1] - f->cu_seqlens_k[b] : f->seqlen_k;
  }
  std::int64_t total_q() const {
    return varlen() ? f->cu_seqlens_q[f->batch] : f->batch * f->seqlen_q;
  }
  std::int64_t total_k() const {
    return varlen() ? f->cu_seqlens_k[f->batch] : f->batch * f->seqlen_k;
  }
  // Offset of (sequence b, index r in it, head h) in a tensor of strides (sb, sh, ss), q or k side.
  std::int64_t at(std::int64_t sb, std::int64_t sh, std::int64_t ss, std::int64_t b, std::int64_t r,
                  std::int64_t h, bool q_side) const {
    if (!varlen()) return b * sb + h * sh + r * ss;
    const std::int64_t p = (q_side ? f->cu_seqlens_q[b] : f->cu_seqlens_k[b]) + r;
    return h * sh + p * ss;
  }
  std::int64_t packed(std::int64_t b, std::int64_t r, bool q_side) const {
    return (varlen() ? (q_side ? f->cu_seqlens_q[b] : f->cu_seqlens_k[b])
                     : b * (q_side ? f->seqlen_q : f->seqlen_k)) +
           r;
  }
};

std::atomic<std::uint64_t> g_calls{0};

sa_status mutant_call(Bug bug, const sa_attention_backward_args* a) {
  const sa_attention_v2_args* f = a->forward;
  sa_attention_v2_args m = *f;
  sa_attention_backward_args ma = *a;
  ma.forward = &m;
  const Geo g{f};
  const sa_dtype t = f->qkv_dtype;
  const std::int64_t HQ = f->heads_q, HK = f->heads_kv, d = f->head_dim, dv = f->head_dim_v;
  std::vector<unsigned char> zeros, k, v, dk, dvv;
  switch (bug) {
    case Bug::d_missing: {  // D_i = dout_i . out_i left out: out read as zeros
      zeros.assign(static_cast<std::size_t>(g.total_q() * HQ * dv + 1) * elem_size(t), 0);
      m.out = zeros.data();
      m.out_stride_b = f->seqlen_q * HQ * dv;
      m.out_stride_h = dv;
      m.out_stride_s = HQ * dv;
      return kernels::naive_attention_backward(nullptr, &ma);
    }
    case Bug::mask_ignored:  // the backward forgets every mask (the forward's lse is kept)
      m.key_padding_mask = nullptr;
      m.causal = 0;
      m.window_left = m.window_right = -1;
      return kernels::naive_attention_backward(nullptr, &ma);
    case Bug::nondeterministic:  // dk/dv summed in a different query order on every call
      return kernels::naive_attention_backward_ordered(a, ++g_calls);
    case Bug::gqa_not_summed: {  // dk, dv of a group: the first query head's only
      const std::int64_t G = HQ / HK, tk = g.total_k();
      const std::size_t e = elem_size(t);
      k.resize(static_cast<std::size_t>(tk * HQ * d + 1) * e);
      v.resize(static_cast<std::size_t>(tk * HQ * dv + 1) * e);
      dk.resize(k.size());
      dvv.resize(v.size());
      for (std::int64_t b = 0; b < f->batch; ++b)
        for (std::int64_t j = 0; j < g.len_k(b); ++j)
          for (std::int64_t h = 0; h < HQ; ++h) {
            const std::int64_t p = g.packed(b, j, false);
            const std::int64_t ok = g.at(f->k.stride_b, f->k.stride_h, f->k.stride_s, b, j, h / G,
                                         false),
                               ov = g.at(f->v.stride_b, f->v.stride_h, f->v.stride_s, b, j, h / G,
                                         false);
            std::memcpy(&k[static_cast<std::size_t>((p * HQ + h) * d) * e],
                        static_cast<const unsigned char*>(f->k.data) + ok * e, d * e);
            std::memcpy(&v[static_cast<std::size_t>((p * HQ + h) * dv) * e],
                        static_cast<const unsigned char*>(f->v.data) + ov * e, dv * e);
          }
      m.heads_kv = HQ;
      m.k = {k.data(), f->seqlen_k * HQ * d, d, HQ * d};
      m.v = {v.data(), f->seqlen_k * HQ * dv, dv, HQ * dv};
      ma.dk = {dk.data(), f->seqlen_k * HQ * d, d, HQ * d};
      ma.dv = {dvv.data(), f->seqlen_k * HQ * dv, dv, HQ * dv};
      const sa_status s = kernels::naive_attention_backward(nullptr, &ma);
      if (s != SA_OK) return s;
      for (std::int64_t b = 0; b < f->batch; ++b)
        for (std::int64_t j = 0; j < g.len_k(b); ++j)
          for (std::int64_t hk = 0; hk < HK; ++hk) {
            const std::int64_t p = g.packed(b, j, false);
            const std::int64_t ok = g.at(a->dk.stride_b, a->dk.stride_h, a->dk.stride_s, b, j, hk,
                                         false),
                               ov = g.at(a->dv.stride_b, a->dv.stride_h, a->dv.stride_s, b, j, hk,
                                         false);
            std::memcpy(static_cast<unsigned char*>(const_cast<void*>(a->dk.data)) + ok * e,
                        &dk[static_cast<std::size_t>((p * HQ + hk * G) * d) * e], d * e);
            std::memcpy(static_cast<unsigned char*>(const_cast<void*>(a->dv.data)) + ov * e,
                        &dvv[static_cast<std::size_t>((p * HQ + hk * G) * dv) * e], dv * e);
          }
      return SA_OK;
    }
    case Bug::dq_scaled_twice:
    case Bug::tail_nan: {
      const sa_status s = kernels::naive_attention_backward(nullptr, a);
      if (s != SA_OK) return s;
      for (std::int64_t b = 0; b < f->batch; ++b) {
        // tail_nan: a key length past one 64-wide tile that does not fill the last
        // tile leaves NaN in dq (an unmasked read past the tail).
        if (bug == Bug::tail_nan && !(g.len_k(b) > 64 && g.len_k(b) % 64 != 0)) continue;
        for (std::int64_t i = 0; i < g.len_q(b); ++i)
          for (std::int64_t h = 0; h < HQ; ++h) {
            const std::int64_t o =
                g.at(a->dq.stride_b, a->dq.stride_h, a->dq.stride_s, b, i, h, true);
            void* dq = const_cast<void*>(a->dq.data);
            for (std::int64_t c = 0; c < d; ++c) {
              const float x = load(t, dq, o + c);
              store(t, dq, o + c,
                    bug == Bug::tail_nan ? (c == 0 ? std::numeric_limits<float>::quiet_NaN() : x)
                                         : x * static_cast<float>(f->scale));
            }
          }
      }
      return SA_OK;
    }
  }
  return SA_INTERNAL_ERROR;
}

template <Bug B>
sa_status call(void*, const sa_attention_backward_args* a) {
  if (!a || !a->forward) return SA_INVALID_ARGUMENT;
  return mutant_call(B, a);
}

// softmax backward without the <dy, p> term: dx = y dy / theta.
sa_status softmax_no_dot(void*, sa_dtype t, const sa_rows* s, const void* y, const void* dy,
                         void* dx) {
  if (!s || !y || !dy || !dx || s->n < 1) return SA_INVALID_ARGUMENT;
  const float th = static_cast<float>(s->temperature);
  for (std::int64_t r = 0; r < s->rows; ++r)
    for (std::int64_t i = 0; i < s->n; ++i)
      store(t, dx, r * s->out_stride + i,
            load(t, y, r * s->in_stride + i) * load(t, dy, r * s->in_stride + i) / th);
  return SA_OK;
}

// softmax backward, correct out of place, wrong in place: the second half of
// each row uses a <dy, p> recomputed from dy after the first half of dx was
// written (over dy, when dx == dy).
sa_status softmax_reread_dy(void*, sa_dtype t, const sa_rows* s, const void* y, const void* dy,
                            void* dx) {
  if (!s || !y || !dy || !dx || s->n < 1) return SA_INVALID_ARGUMENT;
  const float th = static_cast<float>(s->temperature);
  auto dot = [&](std::int64_t r) {
    float S = 0.0f;
    for (std::int64_t i = 0; i < s->n; ++i)
      S += load(t, y, r * s->in_stride + i) * load(t, dy, r * s->in_stride + i);
    return S;
  };
  for (std::int64_t r = 0; r < s->rows; ++r) {
    const std::int64_t half = s->n / 2;
    float S = dot(r);
    for (std::int64_t i = 0; i < s->n; ++i) {
      if (i == half) S = dot(r);  // "refreshed" for the second half: reads dy again
      const float yi = load(t, y, r * s->in_stride + i), gi = load(t, dy, r * s->in_stride + i);
      store(t, dx, r * s->out_stride + i, yi * (gi - S) / th);
    }
  }
  return SA_OK;
}

const char* last_error(void*) {
  const std::string& e = kernels::naive_last_error();
  return e.empty() ? nullptr : e.c_str();
}

sa_kernel make(const char* name, const char* what,
               sa_status (*fn)(void*, const sa_attention_backward_args*)) {
  sa_kernel k{};
  k.abi_version = SA_KERNEL_ABI_VERSION;
  k.struct_size = sizeof(sa_kernel);
  k.name = name;
  k.description = what;
  k.dtypes = SA_DTYPE_F32 | SA_DTYPE_BF16;
  k.memory = SA_MEMORY_HOST;
  k.capabilities = kernels::naive_capabilities();  // claims deterministic and batch invariant
  k.last_error = last_error;
  k.ops = SA_OP_ATTENTION_V2 | SA_OP_ATTENTION_BACKWARD;
  k.attention_v2 = kernels::naive_attention_v2;
  k.attention_backward = fn;
  return k;
}

sa_kernel make_row(const char* name = "mutant_bwd_softmax_no_dot",
                   const char* what = "softmax backward without the <dy, p> term",
                   decltype(&softmax_no_dot) fn = softmax_no_dot) {
  sa_kernel k{};
  k.abi_version = SA_KERNEL_ABI_VERSION;
  k.struct_size = sizeof(sa_kernel);
  k.name = name;
  k.description = what;
  k.dtypes = SA_DTYPE_F32 | SA_DTYPE_BF16;
  k.memory = SA_MEMORY_HOST;
  k.last_error = last_error;
  k.ops = SA_OP_SOFTMAX_BACKWARD;
  k.softmax_backward = fn;
  return k;
}

}  // namespace

std::vector<BackwardMutant> backward_mutants() {
  static const sa_kernel ks[] = {
      make_row(),
      make("mutant_bwd_d_missing", "attention backward: D = rowsum(dO o O) term missing",
           call<Bug::d_missing>),
      make("mutant_bwd_dq_scaled_twice", "attention backward: dQ multiplied by the scale twice",
           call<Bug::dq_scaled_twice>),
      make("mutant_bwd_gqa_not_summed",
           "attention backward: dK/dV of a GQA group not summed over its query heads",
           call<Bug::gqa_not_summed>),
      make("mutant_bwd_mask_ignored", "attention backward: masks ignored in the backward",
           call<Bug::mask_ignored>),
      make("mutant_bwd_tail_nan",
           "attention backward: NaN in dQ when the key length is not a multiple of the 64 tile",
           call<Bug::tail_nan>),
      make("mutant_bwd_nondeterministic",
           "attention backward: dK/dV reduction order changes from call to call (atomics)",
           call<Bug::nondeterministic>),
      make_row("mutant_bwd_softmax_in_place",
               "softmax backward wrong in place (dx == dy): dy re-read after dx overwrote it",
               softmax_reread_dy),
  };
  static const char* const caught_by[] = {"backward.rounding",
                                          "attention_backward.rounding",
                                          "attention_backward.rounding",
                                          "attention_backward.gqa_group_sum",
                                          "attention_backward.masked_zero",
                                          "attention_backward.no_nan",
                                          "determinism.bitwise",
                                          "backward.rounding"};
  std::vector<BackwardMutant> out;
  for (std::size_t i = 0; i < std::size(ks); ++i)
    out.push_back({{ks[i].description, &ks[i]}, caught_by[i]});
  return out;
}

}  // namespace sa::mutants
