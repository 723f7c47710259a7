#include "kernels/cpu/backward.hpp"
#include "kernels/attention_v2_args.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "kernels/cpu/attention_v2.hpp"
#include "kernels/cpu/backward_tile.hpp"

namespace sa::kernels {
namespace {

thread_local std::string g_error;
std::atomic<std::int64_t> g_slot_budget{0};  // detail::set_backward_slot_budget
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr std::int64_t kTile = bwd::kBk;  // query rows per block, keys per tile

sa_status fail(sa_status s, std::string what) {
  g_error = std::move(what);
  return s;
}

inline float load(sa_dtype t, const void* p, std::int64_t i) {
  if (t == SA_BF16) return float_from_bf16(static_cast<const std::uint16_t*>(p)[i]);
  if (t == SA_F16) return float_from_f16(static_cast<const std::uint16_t*>(p)[i]);
  return static_cast<const float*>(p)[i];
}
inline void store(sa_dtype t, void* p, std::int64_t i, float v) {
  if (t == SA_BF16)
    static_cast<std::uint16_t*>(p)[i] = bf16_from_float(v);
  else if (t == SA_F16)
    static_cast<std::uint16_t*>(p)[i] = f16_from_float(v);
  else
    static_cast<float*>(p)[i] = v;
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
    return fail(SA_INVALID_ARGUMENT, std::string(op) + ": need n >= 1, rows >= 0, strides >= n");
  if (!(s->temperature > 0.0) || !std::isfinite(s->temperature))
    return fail(SA_INVALID_ARGUMENT, std::string(op) + ": temperature must be finite and > 0");
  return SA_OK;
}

// One row of either backward; `log` selects log-softmax's.
void row_backward(bool log, sa_dtype t, const sa_rows* s, const void* y, const void* dy, void* dx,
                  std::int64_t r, std::vector<float>& g) {
  const std::int64_t n = s->n, io = r * s->in_stride, oo = r * s->out_stride;
  const float inv = static_cast<float>(1.0 / s->temperature);
  const bool unit = s->temperature == 1.0;
  double S = 0.0;
  bool nan = false;
  for (std::int64_t i = 0; i < n; ++i) {
    const float yi = load(t, y, io + i), gi = load(t, dy, io + i);
    S += log ? static_cast<double>(gi) : static_cast<double>(yi) * gi;
    nan = nan || std::isnan(yi);
  }
  const float Sf = nan ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(S);
  for (std::int64_t i = 0; i < n; ++i) {
    const float yi = load(t, y, io + i), gi = load(t, dy, io + i);
    const float v = log ? gi - std::exp(yi) * Sf : yi * (gi - Sf);
    g[static_cast<std::size_t>(i)] = unit ? v : v * inv;
  }
  for (std::int64_t i = 0; i < n; ++i) store(t, dx, oo + i, g[static_cast<std::size_t>(i)]);
}

sa_status rows_backward(bool log, sa_dtype t, const sa_rows* s, const void* y, const void* dy,
                        void* dx) {
  g_error.clear();
  if (sa_status st = check_rows(log ? "log_softmax_backward" : "softmax_backward", t, s, y, dy, dx);
      st != SA_OK)
    return st;
#pragma omp parallel if (s->rows * s->n > 65536)
  {
    std::vector<float> g(static_cast<std::size_t>(s->n));
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < s->rows; ++r) row_backward(log, t, s, y, dy, dx, r, g);
  }
  return SA_OK;
}

// The call's inputs converted to packed float32: rows of [packed row][head][dim],
// each row padded with zeros to bwd::padded(dim) floats.
struct Packed {
  std::int64_t HQ, HK, d, dv, total_q, total_k;
  std::vector<float> q, k, v, dout, D, lse;         // D, lse: [row][HQ]
  std::vector<std::uint8_t> q_finite, dout_finite;  // [row][HQ]: every value finite
};

struct Geometry {
  const sa_attention_v2_args* f;
  bool varlen, top_left;
  std::int64_t len_q(std::int64_t b) const {
    return varlen ? f->cu_seqlens_q[b + 1] - f->cu_seqlens_q[b] : f->seqlen_q;
  }
  std::int64_t len_k(std::int64_t b) const {
    return varlen ? f->cu_seqlens_k[b + 1] - f->cu_seqlens_k[b] : f->seqlen_k;
  }
  std::int64_t q0(std::int64_t b) const { return varlen ? f->cu_seqlens_q[b] : b * f->seqlen_q; }
  std::int64_t k0(std::int64_t b) const { return varlen ? f->cu_seqlens_k[b] : b * f->seqlen_k; }
  // Element offset of (sequence b, packed row r, head h) in a tensor.
  std::int64_t at(std::int64_t sb, std::int64_t sh, std::int64_t ss, std::int64_t b,
                  std::int64_t r_in_seq, std::int64_t packed, std::int64_t h) const {
    return varlen ? h * sh + packed * ss : b * sb + h * sh + r_in_seq * ss;
  }
  // Visible key range [lo, hi) of query i by causal and window (key padding aside).
  void range(std::int64_t b, std::int64_t i, std::int64_t* lo, std::int64_t* hi) const {
    const std::int64_t Lk = len_k(b), off = top_left ? 0 : Lk - len_q(b);
    const std::int64_t diag = i + off, right = f->causal ? 0 : f->window_right;
    *lo = f->window_left >= 0 ? std::max<std::int64_t>(0, diag - f->window_left) : 0;
    *hi = right >= 0 ? std::min<std::int64_t>(Lk, diag + right + 1) : Lk;
    if (*hi < *lo) *hi = *lo;
  }
};

}  // namespace

const char* cpu_backward_last_error() { return g_error.empty() ? nullptr : g_error.c_str(); }

sa_status cpu_softmax_backward(void*, sa_dtype t, const sa_rows* s, const void* y, const void* dy,
                               void* dx) {
  return rows_backward(false, t, s, y, dy, dx);
}
sa_status cpu_log_softmax_backward(void*, sa_dtype t, const sa_rows* s, const void* y,
                                   const void* dy, void* dx) {
  return rows_backward(true, t, s, y, dy, dx);
}

sa_status cpu_attention_backward(void*, const sa_attention_backward_args* a) {
  g_error.clear();
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
  if ((qt != SA_F32 && qt != SA_BF16) || ot != qt)
    return fail(SA_UNSUPPORTED, "attention_backward: float32 or bfloat16 in, the same type out");
  if (f->adaptive)
    return fail(SA_UNSUPPORTED, "attention_backward: adaptive attention has no backward");
  if (f->batch < 0 || f->heads_q < 1 || f->heads_kv < 1 || f->heads_q % f->heads_kv != 0 ||
      f->head_dim < 1 || f->head_dim_v < 1)
    return fail(SA_INVALID_ARGUMENT,
                "attention_backward: need batch >= 0, heads_q a multiple of heads_kv >= 1, head "
                "dims >= 1");
  const bool varlen = f->cu_seqlens_q != nullptr;
  if (varlen != (f->cu_seqlens_k != nullptr))
    return fail(SA_INVALID_ARGUMENT, "attention_backward: cu_seqlens_q and _k both or neither");
  if (!f->q.data || !f->k.data || !f->v.data || !f->out || !f->lse || !a->dout.data ||
      !a->dq.data || !a->dk.data || !a->dv.data || (f->sinks && !a->dsinks))
    return fail(SA_INVALID_ARGUMENT,
                "attention_backward: q, k, v, out, lse, dout, dq, dk, dv (and dsinks with sinks) "
                "must not be NULL");
  if (f->window_left < -1 || f->window_right < -1 || !(f->softcap >= 0.0) ||
      !std::isfinite(f->softcap) || !std::isfinite(f->scale) ||
      (align != SA_ALIGN_BOTTOM_RIGHT && align != SA_ALIGN_TOP_LEFT))
    return fail(SA_INVALID_ARGUMENT,
                "attention_backward: window bounds >= -1, softcap >= 0, finite scale, alignment 0 "
                "or 1 expected");
  const sa_dtype t = f->qkv_dtype;
  const Geometry geo{f, varlen, align == SA_ALIGN_TOP_LEFT};
  const std::int64_t B = f->batch, HQ = f->heads_q, HK = f->heads_kv, d = f->head_dim,
                     dv = f->head_dim_v, G = HQ / HK;
  for (std::int64_t b = 0; b < B; ++b)
    if (geo.len_q(b) < 0 || geo.len_k(b) < 0)
      return fail(SA_INVALID_ARGUMENT, "attention_backward: cu_seqlens decrease");
  const std::int64_t dp = bwd::padded(d), dvp = bwd::padded(dv);
  Packed P{HQ,
           HK,
           d,
           dv,
           varlen ? f->cu_seqlens_q[B] : B * f->seqlen_q,
           varlen ? f->cu_seqlens_k[B] : B * f->seqlen_k};
  // Rows padded with zeros to dp / dvp floats, for whole vectors.
  P.q.assign(static_cast<std::size_t>(P.total_q * HQ * dp), 0.0f);
  P.dout.assign(static_cast<std::size_t>(P.total_q * HQ * dvp), 0.0f);
  P.D.resize(static_cast<std::size_t>(P.total_q * HQ));
  P.lse.resize(P.D.size());
  P.q_finite.resize(P.D.size());
  P.dout_finite.resize(P.D.size());
  P.k.assign(static_cast<std::size_t>(P.total_k * HK * dp), 0.0f);
  P.v.assign(static_cast<std::size_t>(P.total_k * HK * dvp), 0.0f);
  // Convert the inputs (and D_i = dout_i . out_i, lse) once.
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t Lq = geo.len_q(b), Lk = geo.len_k(b), q0 = geo.q0(b), k0 = geo.k0(b);
#pragma omp parallel for schedule(static) if (Lq * HQ * (d + dv) > 65536)
    for (std::int64_t i = 0; i < Lq; ++i)
      for (std::int64_t h = 0; h < HQ; ++h) {
        const std::int64_t row = (q0 + i) * HQ + h;
        const std::int64_t oq =
            geo.at(f->q.stride_b, f->q.stride_h, f->q.stride_s, b, i, q0 + i, h);
        bool fin = true;
        for (std::int64_t c = 0; c < d; ++c) {
          P.q[row * dp + c] = load(t, f->q.data, oq + c);
          fin = fin && std::isfinite(P.q[row * dp + c]);
        }
        P.q_finite[row] = fin;
        fin = true;
        const std::int64_t og = geo.at(a->dout.stride_b, a->dout.stride_h, a->dout.stride_s, b, i,
                                       q0 + i, h),
                           oo = geo.at(f->out_stride_b, f->out_stride_h, f->out_stride_s, b, i,
                                       q0 + i, h);
        float D = 0.0f;
        for (std::int64_t c = 0; c < dv; ++c) {
          const float g = load(t, a->dout.data, og + c);
          P.dout[row * dvp + c] = g;
          fin = fin && std::isfinite(g);
          D += g * load(t, f->out, oo + c);
        }
        P.D[row] = D;
        P.dout_finite[row] = fin;
        P.lse[row] = f->lse[varlen ? h * P.total_q + q0 + i : (b * HQ + h) * f->seqlen_q + i];
      }
#pragma omp parallel for schedule(static) if (Lk * HK * (d + dv) > 65536)
    for (std::int64_t j = 0; j < Lk; ++j)
      for (std::int64_t h = 0; h < HK; ++h) {
        const std::int64_t row = (k0 + j) * HK + h;
        const std::int64_t ok =
                               geo.at(f->k.stride_b, f->k.stride_h, f->k.stride_s, b, j, k0 + j, h),
                           ov =
                               geo.at(f->v.stride_b, f->v.stride_h, f->v.stride_s, b, j, k0 + j, h);
        for (std::int64_t c = 0; c < d; ++c) P.k[row * dp + c] = load(t, f->k.data, ok + c);
        for (std::int64_t c = 0; c < dv; ++c) P.v[row * dvp + c] = load(t, f->v.data, ov + c);
      }
  }
  const float scale = static_cast<float>(f->scale);
  const std::uint8_t* kpm = f->key_padding_mask;
  // Units of d(sink): (b, h, query tile); of the pass: (b, kv head, key tile).
  struct Unit {
    std::int64_t b, h, t;
  };
  std::vector<Unit> u1, u2;
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < HQ; ++h)
      for (std::int64_t q = 0; q < geo.len_q(b); q += kTile) u1.push_back({b, h, q});
    for (std::int64_t h = 0; h < HK; ++h)
      for (std::int64_t k = 0; k < geo.len_k(b); k += kTile) u2.push_back({b, h, k});
  }
  // Every key and value tile transposed once (d x kBk and dv x kBk floats,
  // zero past the sequence's last key).
  std::vector<std::int64_t> tile0(static_cast<std::size_t>(B) + 1, 0);
  for (std::int64_t b = 0; b < B; ++b) tile0[b + 1] = tile0[b] + (geo.len_k(b) + kTile - 1) / kTile;
  std::vector<float> KT(static_cast<std::size_t>(tile0[B] * HK * d * bwd::kBk), 0.0f),
      VT(static_cast<std::size_t>(tile0[B] * HK * dv * bwd::kBk), 0.0f);
  std::vector<std::uint8_t> KT_finite(static_cast<std::size_t>(tile0[B] * HK), 1);
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t Lk = geo.len_k(b), nt = tile0[b + 1] - tile0[b];
#pragma omp parallel for schedule(static) if (Lk * HK * (d + dv) > 65536)
    for (std::int64_t x = 0; x < nt * HK; ++x) {
      const std::int64_t tl = x / HK, hk = x % HK, id = (tile0[b] + tl) * HK + hk;
      float* kt = &KT[static_cast<std::size_t>(id * d * bwd::kBk)];
      float* vt = &VT[static_cast<std::size_t>(id * dv * bwd::kBk)];
      for (std::int64_t j = 0; j < std::min(kTile, Lk - tl * kTile); ++j) {
        const std::int64_t kr = (geo.k0(b) + tl * kTile + j) * HK + hk;
        for (std::int64_t c = 0; c < d; ++c) {
          kt[c * bwd::kBk + j] = P.k[kr * dp + c];
          if (!std::isfinite(P.k[kr * dp + c])) KT_finite[id] = 0;
        }
        for (std::int64_t c = 0; c < dv; ++c) vt[c * bwd::kBk + j] = P.v[kr * dvp + c];
      }
    }
  }
  // One thread's buffers: a block's P and dS, its rows' visible key ranges
  // and ALiBi diagonals, and the pass's gradient accumulators.
  struct Scratch {
    const float *kt = nullptr, *vt = nullptr;  // the tile in use
    std::vector<float> p, ds, acc, acc2;
    std::int64_t lo[kTile], hi[kTile], rlo[kTile], rhi[kTile], diag[kTile];
  };
  auto make_scratch = [&](std::size_t acc, std::size_t acc2) {
    Scratch s;
    s.p.assign(static_cast<std::size_t>(kTile * bwd::kBk), 0.0f);
    s.ds.assign(s.p.size(), 0.0f);
    s.acc.assign(acc, 0.0f);
    s.acc2.assign(acc2, 0.0f);
    return s;
  };
  // Selects the key tile starting at key j0 of kv head hk of sequence b.
  auto load_tile = [&](Scratch& s, std::int64_t b, std::int64_t hk, std::int64_t j0) {
    const std::int64_t id = (tile0[b] + j0 / kTile) * HK + hk;
    s.kt = &KT[static_cast<std::size_t>(id * d * bwd::kBk)];
    s.vt = &VT[static_cast<std::size_t>(id * dv * bwd::kBk)];
  };
  // The block of query rows [i0, i0 + nr) of head h against the loaded key
  // tile [j0, j0 + nc): P and dS into s.p, s.ds. s.lo/s.hi hold the rows'
  // visible key ranges (absolute). False when no row sees a key of the tile.
  auto block = [&](Scratch& s, std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t nr,
                   std::int64_t j0, std::int64_t nc) {
    const std::int64_t off = geo.top_left ? 0 : geo.len_k(b) - geo.len_q(b);
    bool any = false;
    for (std::int64_t r = 0; r < nr; ++r) {
      s.rlo[r] = std::clamp<std::int64_t>(s.lo[r] - j0, 0, nc);
      s.rhi[r] = std::clamp<std::int64_t>(s.hi[r] - j0, 0, nc);
      s.diag[r] = i0 + r + off - j0;
      any |= s.rhi[r] > s.rlo[r];
    }
    if (!any) return false;
    const std::int64_t row = (geo.q0(b) + i0) * HQ + h;
    bwd::Block k;
    k.nr = nr;
    k.nc = nc;
    k.d = d;
    k.dv = dv;
    k.q = &P.q[row * dp];
    k.q_stride = HQ * dp;
    k.dout = &P.dout[row * dvp];
    k.dout_stride = HQ * dvp;
    k.kt = s.kt;
    k.vt = s.vt;
    k.lse = &P.lse[row];
    k.D = &P.D[row];
    k.ld_stride = HQ;
    k.lo = s.rlo;
    k.hi = s.rhi;
    k.key_visible = kpm ? kpm + (varlen ? geo.k0(b) : b * f->seqlen_k) + j0 : nullptr;
    k.scale = scale;
    k.softcap = static_cast<float>(f->softcap);
    k.alibi = f->alibi_slopes != nullptr;
    k.slope = k.alibi ? f->alibi_slopes[h] : 0.0f;
    k.diag = s.diag;
    bwd::block_weights(k, s.p.data(), s.ds.data());
    return true;
  };
  // d(sink) = -sum over the head's rows of e^(sink - lse) D: a partial per
  // (sequence, head, query tile), summed in that order.
  std::vector<float> sink_part(f->sinks ? u1.size() : 0, 0.0f);
  if (f->sinks) {
#pragma omp parallel for schedule(static)
    for (std::size_t x = 0; x < u1.size(); ++x) {
      const Unit un = u1[x];
      for (std::int64_t i = un.t; i < std::min(geo.len_q(un.b), un.t + kTile); ++i) {
        const std::int64_t row = (geo.q0(un.b) + i) * HQ + un.h;
        if (P.lse[row] != -kInf) sink_part[x] -= std::exp(f->sinks[un.h] - P.lse[row]) * P.D[row];
      }
    }
    for (std::int64_t h = 0; h < HQ; ++h) a->dsinks[h] = 0.0f;
    for (std::size_t x = 0; x < u1.size(); ++x) a->dsinks[u1[x].h] += sink_part[x];
  }
  // One pass over the units (sequence, kv head, key tile): for every query
  // head of the group and every query block that sees the tile, P and dS;
  // dK and dV accumulate in the unit, and the block's dQ contribution dS K
  // goes to the unit's slot. The units run in waves of W slots; after a wave
  // every query row adds its slots in unit order, so dQ sums the key tiles in
  // order whatever W or the thread count (deterministic, no atomics).
  std::int64_t Lmax = 0;
  for (std::int64_t b = 0; b < B; ++b) Lmax = std::max(Lmax, geo.len_q(b));
  const std::int64_t nblk = (Lmax + kTile - 1) / kTile;
  const std::int64_t slot_floats = std::max<std::int64_t>(1, G * Lmax * dp);
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  // Slots per wave: what 16 MB holds, at least two per thread (a wave ends in
  // a barrier), at most the unit count.
  const std::int64_t budget_set = g_slot_budget.load(std::memory_order_relaxed);
  const std::int64_t slot_budget = budget_set > 0 ? budget_set : std::int64_t{16} << 20;
  const std::int64_t W = std::max<std::int64_t>(
      1, std::min(std::max<std::int64_t>(
                      slot_budget / (slot_floats * static_cast<std::int64_t>(sizeof(float))),
                      2 * std::int64_t{threads}),
                  static_cast<std::int64_t>(u2.size())));
  std::vector<float> slots(static_cast<std::size_t>(W * slot_floats));
  // Per slot and (head of the group, query block): written in this wave.
  std::vector<std::uint8_t> written(static_cast<std::size_t>(W * G * nblk));
  std::vector<float> dq(static_cast<std::size_t>(P.total_q * HQ * dp), 0.0f);
  // Reduction items of a wave: (b, h, query block), each adding the wave's
  // slots [xa, xb) (the units of (b, h / G)) in order.
  struct Item {
    std::int64_t b, h, blk;
    std::size_t xa, xb;
  };
  std::vector<Item> items;
#pragma omp parallel
  {
    Scratch s =
        make_scratch(static_cast<std::size_t>(kTile * dp), static_cast<std::size_t>(kTile * dvp));
    for (std::size_t w0 = 0; w0 < u2.size(); w0 += static_cast<std::size_t>(W)) {
      const std::size_t wn = std::min(static_cast<std::size_t>(W), u2.size() - w0);
#pragma omp single
      {
        std::fill(written.begin(), written.end(), std::uint8_t{0});
        items.clear();
        for (std::size_t x = w0, y; x < w0 + wn; x = y) {
          for (y = x + 1; y < w0 + wn && u2[y].b == u2[x].b && u2[y].h == u2[x].h;) ++y;
          for (std::int64_t h = u2[x].h * G; h < (u2[x].h + 1) * G; ++h)
            for (std::int64_t k = 0; k * kTile < geo.len_q(u2[x].b); ++k)
              items.push_back({u2[x].b, h, k, x, y});
        }
      }
#pragma omp for schedule(dynamic)
      for (std::size_t x = w0; x < w0 + wn; ++x) {
        const Unit un = u2[x];
        const std::int64_t b = un.b, hk = un.h, Lq = geo.len_q(b), k0 = geo.k0(b), j0 = un.t;
        const std::int64_t nc = std::min(kTile, geo.len_k(b) - j0);
        float* slot = &slots[static_cast<std::size_t>((x - w0) * slot_floats)];
        std::uint8_t* wr = &written[static_cast<std::size_t>((x - w0) * G * nblk)];
        load_tile(s, b, hk, j0);
        std::fill(s.acc.begin(), s.acc.end(), 0.0f);
        std::fill(s.acc2.begin(), s.acc2.end(), 0.0f);
        const float* krows = &P.k[((k0 + j0) * HK + hk) * dp];
        for (std::int64_t h = hk * G; h < (hk + 1) * G; ++h)
          for (std::int64_t i0 = 0; i0 < Lq; i0 += kTile) {
            const std::int64_t nr = std::min(kTile, Lq - i0);
            for (std::int64_t r = 0; r < nr; ++r) geo.range(b, i0 + r, &s.lo[r], &s.hi[r]);
            if (!block(s, b, h, i0, nr, j0, nc)) continue;
            const std::int64_t row = (geo.q0(b) + i0) * HQ + h;
            bool q_fin = true, do_fin = true;
            for (std::int64_t r = 0; r < nr; ++r) {
              q_fin = q_fin && P.q_finite[row + r * HQ];
              do_fin = do_fin && P.dout_finite[row + r * HQ];
            }
            bwd::accumulate_cols(nr, nc, dp, s.ds.data(), &P.q[row * dp], HQ * dp, s.acc.data(), dp,
                                 q_fin);
            bwd::accumulate_cols(nr, nc, dvp, s.p.data(), &P.dout[row * dvp], HQ * dvp,
                                 s.acc2.data(), dvp, do_fin);
            float* part = slot + ((h - hk * G) * Lmax + i0) * dp;
            std::fill(part, part + nr * dp, 0.0f);
            bwd::accumulate_rows(nr, nc, dp, s.ds.data(), krows, HK * dp, part, dp,
                                 KT_finite[(tile0[b] + j0 / kTile) * HK + hk] != 0);
            wr[(h - hk * G) * nblk + i0 / kTile] = 1;
          }
        for (std::int64_t j = j0; j < j0 + nc; ++j) {
          const std::int64_t ok =
              geo.at(a->dk.stride_b, a->dk.stride_h, a->dk.stride_s, b, j, k0 + j, hk);
          const std::int64_t ov =
              geo.at(a->dv.stride_b, a->dv.stride_h, a->dv.stride_s, b, j, k0 + j, hk);
          for (std::int64_t c = 0; c < d; ++c)
            store(t, const_cast<void*>(a->dk.data), ok + c, s.acc[(j - j0) * dp + c] * scale);
          for (std::int64_t c = 0; c < dv; ++c)
            store(t, const_cast<void*>(a->dv.data), ov + c, s.acc2[(j - j0) * dvp + c]);
        }
      }
#pragma omp for schedule(static)
      for (std::size_t y = 0; y < items.size(); ++y) {
        const Item it = items[y];
        const std::int64_t hk = it.h / G, i0 = it.blk * kTile;
        const std::int64_t nr = std::min(kTile, geo.len_q(it.b) - i0);
        float* acc = &dq[static_cast<std::size_t>(((geo.q0(it.b) + i0) * HQ + it.h) * dp)];
        for (std::size_t x = it.xa; x < it.xb; ++x) {
          if (!written[static_cast<std::size_t>(((x - w0) * G + it.h - hk * G) * nblk + it.blk)])
            continue;
          const float* part = &slots[static_cast<std::size_t>((x - w0) * slot_floats +
                                                              ((it.h - hk * G) * Lmax + i0) * dp)];
          for (std::int64_t r = 0; r < nr; ++r)
            for (std::int64_t c = 0; c < dp; ++c) acc[r * HQ * dp + c] += part[r * dp + c];
        }
      }
    }
  }
#pragma omp parallel for schedule(static) if (P.total_q * HQ * d > 65536)
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < geo.len_q(b); ++i)
      for (std::int64_t h = 0; h < HQ; ++h) {
        const std::int64_t o =
            geo.at(a->dq.stride_b, a->dq.stride_h, a->dq.stride_s, b, i, geo.q0(b) + i, h);
        const float* g = &dq[static_cast<std::size_t>(((geo.q0(b) + i) * HQ + h) * dp)];
        for (std::int64_t c = 0; c < d; ++c)
          store(t, const_cast<void*>(a->dq.data), o + c, g[c] * scale);
      }
  return SA_OK;
}

namespace detail {
void set_backward_slot_budget(std::int64_t bytes) { g_slot_budget.store(bytes); }
}  // namespace detail

const sa_capabilities* cpu_capabilities_with_backward() {
  static const sa_capabilities caps = [] {
    sa_capabilities c = *cpu_capabilities();
    c.op_dtypes[9] = SA_DTYPE_F32 | SA_DTYPE_BF16 | SA_DTYPE_F16;   // softmax_backward
    c.op_dtypes[10] = SA_DTYPE_F32 | SA_DTYPE_BF16 | SA_DTYPE_F16;  // log_softmax_backward
    c.op_dtypes[11] = SA_DTYPE_F32 | SA_DTYPE_BF16;                 // attention_backward
    return c;
  }();
  return &caps;
}

}  // namespace sa::kernels
