// Exp passes of the CPU kernel: exps stored and summed, sums alone, the sum
// beside the maximum (log-softmax), and the scaling by 1/S (stored exps
// scaled, or exps recomputed and scaled in one fused pass).
// Compiled once per instruction set by foreach_target.h; the exported
// wrappers at the bottom pick the best one at run time.
#include "kernels/cpu/row_ops.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/row_exp.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/cpu/vec_types-inl.h"
#include "kernels/cpu/vec_load_store-inl.h"
#include "kernels/cpu/vec_exp-inl.h"
#include "theory/streamed_entropy.hpp"

HWY_BEFORE_NAMESPACE();
namespace sa::kernels::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---------------------------------------------------------------- exp passes
// The smallest float x with (x - m) s >= -103 (every such lane is live in
// ExpLive's sense, dh >= -104, with margin for the rounding of dh), never
// -inf (an -inf lane is always dead).
constexpr float kInf = std::numeric_limits<float>::infinity();
inline float LiveFloor(float m, const Scale& s) {
  const double t = static_cast<double>(m) - 103.0 / s.s;
  float xc = static_cast<float>(t);
  if (static_cast<double>(xc) < t) xc = std::nextafter(xc, kInf);
  return std::max(xc, -std::numeric_limits<float>::max());
}
// Whether every one of the count (a multiple of the vector length) values
// from x is >= xc (NaN: no).
template <class T>
HWY_INLINE bool BlockLive(DF d, const T* x, std::size_t count, VF xc) {
  const std::size_t N = hn::Lanes(d);
  auto ok = hn::Ge(LoadF(d, x), xc);
  for (std::size_t j = N; j < count; j += N) ok = hn::And(ok, hn::Ge(LoadF(d, x + j), xc));
  return hn::AllTrue(d, ok);
}

// y = exp((x - m) s) (biased); returns the double sum of the stored values
// (and *Tout = sum e (x - m) s when kT). m is the row max, so d <= 0.
// Sums: S in double lanes per vector. bfloat16 rows (no T) first sum blocks of
// 8 values per lane in float (relative error <= 8 u = 2^-21, far below
// bf16's 2^-8). T's terms (all <= 0, one sign) go to float lanes for blocks of
// 8 values per lane (relative error <= 8 u of T, as in Stream) and are then
// flushed to double; T only feeds H (theory.md T6), whose budget is
// 2 u (2.5 + 10 H) and T/S <= H.
// kLive: every (x - m) s of the row is >= -103 (the caller knows the row's
// minimum), so no lane is dead and the full vectors skip the dead-lane checks
// (the padded tail never does: its padding is -inf). Float32 rows that are
// not live decide it per block of 16 vectors (BlockLive, every x >= xc =
// LiveFloor): a wide row usually has only a few dead lanes, and a live block
// gives its lanes the same bits as the checked path (the checks only touch
// dead lanes; xc = +inf checks every block). bfloat16 rows, whose exp is
// cheaper, keep the checks on every vector (the block test cost them up to
// 10 %, docs/measurements.md). kSplit: how x - m is split (DiffSplitOf;
// float32 rows).
template <class T, class U, bool kT, bool kLive, bool store, int kSplit = kTwoSum>
double ExpStore(const T* x, U* y, std::int64_t n, float mf, const Scale& scale, float xcf,
                double* Tout) {
  constexpr bool kAcc = std::is_same_v<T, float>;
  constexpr bool kFloatS = !kAcc && !kT;
  const DF d;
  const DD dd;
  const std::size_t N = hn::Lanes(d);
  const ScaleV s = ScaleVOf(d, scale);
  const VF m = hn::Set(d, mf);
  const ExpTab tab = LoadExpTab(d);
  VD a0 = hn::Zero(dd), a1 = hn::Zero(dd), a2 = hn::Zero(dd), a3 = hn::Zero(dd);
  VD t0 = hn::Zero(dd), t1 = hn::Zero(dd), t2 = hn::Zero(dd), t3 = hn::Zero(dd);
  // e and the argument of one vector (dead lanes: e = 0 when stored).
  auto ev = [&](VF v, VF& h, auto live) SA_VEC_LAMBDA {
    VF l;
    h = Diff<kAcc, kSplit>(d, v, m, s, l);
    return ExpLive<kAcc, decltype(live)::value>(d, tab, h, l);
  };
  // T's factor: the argument, clamped where a dead lane has e = 0.
  auto targ = [&](VF h, auto live) SA_VEC_LAMBDA {
    if constexpr (decltype(live)::value) return h;
    return hn::Max(h, hn::Set(d, -104.0f));
  };
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  // Up to 8 pairs of vectors from i, their sums flushed to double at the end.
  auto block = [&](auto live) SA_VEC_LAMBDA {
    VF f0 = hn::Zero(d), f1 = hn::Zero(d), g0 = hn::Zero(d), g1 = hn::Zero(d);
    for (int b = 0; b < 8 && i + 2 * N <= len; ++b, i += 2 * N) {
      VF h0, h1, v0, v1;
      if constexpr (store) {  // stored values keep their order
        v0 = LoadF(d, x + i);
        v1 = LoadF(d, x + i + N);
      } else {
        LoadF2Unordered(d, x + i, v0, v1);
      }
      if constexpr (kFloatS && kLive) {
        if constexpr (!store) {  // the sum takes the product P u in its FMA
          VF P0, u0, P1, u1, l0, l1;
          ExpPartsBF16(d, tab, Diff<false>(d, v0, m, s, l0), P0, u0);
          ExpPartsBF16(d, tab, Diff<false>(d, v1, m, s, l1), P1, u1);
          f0 = hn::MulAdd(P0, u0, f0);
          f1 = hn::MulAdd(P1, u1, f1);
          continue;
        }
      }
      const VF e0 = ev(v0, h0, live);
      const VF e1 = ev(v1, h1, live);
      if constexpr (store) {
        StoreF(d, e0, y + i);
        StoreF(d, e1, y + i + N);
      }
      if constexpr (kFloatS) {
        f0 = hn::Add(f0, e0);
        f1 = hn::Add(f1, e1);
      } else {
        // The pair's halves added in double first (one rounding of 2^-53
        // relative): two accumulators instead of four, which keeps the loop
        // within AVX2's 16 vector registers (no spilled sums).
        AccD2(a0, a1, e0, e1);
      }
      if constexpr (kT) {
        g0 = hn::MulAdd(e0, targ(h0, live), g0);
        g1 = hn::MulAdd(e1, targ(h1, live), g1);
      }
    }
    if constexpr (kFloatS) {
      AccD(a0, a1, f0);
      AccD(a2, a3, f1);
    }
    if constexpr (kT) {
      AccD(t0, t1, g0);
      AccD(t2, t3, g1);
    }
  };
  if constexpr (kLive) {
    while (i + 2 * N <= len) block(std::true_type{});
  } else if constexpr (!kAcc) {
    (void)xcf;
    while (i + 2 * N <= len) block(std::false_type{});
  } else {
    const VF xc = hn::Set(d, xcf);
    while (i + 2 * N <= len) {
      if (BlockLive(d, x + i, std::min<std::size_t>(16 * N, (len - i) / (2 * N) * (2 * N)), xc))
        block(std::true_type{});
      else
        block(std::false_type{});
    }
  }
  // Leftover vectors and the padded tail: with the dead-lane checks.
  auto one = [&](VF v, U* out) SA_VEC_LAMBDA {
    VF l;
    const VF h = Diff<kAcc, kSplit>(d, v, m, s, l);
    const VF e = ExpLive<kAcc>(d, tab, h, l);
    if constexpr (store) StoreF(d, e, out);
    AccD(a0, a1, e);
    if constexpr (kT) AccD(t0, t1, hn::Mul(e, hn::Max(h, hn::Set(d, -104.0f))));
  };
  for (; i + N <= len; i += N) one(LoadF(d, x + i), store ? y + i : nullptr);
  if (i < len) {
    Tail<T> t(x + i, len - i);
    Tail<U> o(nullptr, 0);
    one(LoadF(d, t.in), o.out);
    o.count = len - i;
    if constexpr (store) o.flush(y + i);
  }
  if constexpr (kT) *Tout = SumD(hn::Add(hn::Add(t0, t1), hn::Add(t2, t3))) * kTwoM32;
  return SumD(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))) * kTwoM32;
}

// Whether every (x - m) s of a row with minimum lo is >= -103 (NaN: no).
inline bool RowLive(float lo, float m, const Scale& s) {
  return (static_cast<double>(lo) - static_cast<double>(m)) * s.s >= -103.0;
}
// ExpStore with the row's liveness and store flag as template arguments.
template <class T, class U, bool kT, int kSplit>
double ExpStoreLive(const T* x, U* y, std::int64_t n, float m, const Scale& s, bool store,
                    bool live, float xc, double* Tout) {
  if (store)
    return live ? ExpStore<T, U, kT, true, true, kSplit>(x, y, n, m, s, xc, Tout)
                : ExpStore<T, U, kT, false, true, kSplit>(x, y, n, m, s, xc, Tout);
  return live ? ExpStore<T, U, kT, true, false, kSplit>(x, y, n, m, s, xc, Tout)
              : ExpStore<T, U, kT, false, false, kSplit>(x, y, n, m, s, xc, Tout);
}
template <class T, class U, bool kT = false>
double ExpStoreRow(const T* x, U* y, std::int64_t n, float m, float lo, const Scale& s, bool store,
                   double* Tout = nullptr) {
  if (checked_forms_only())
    return ExpStoreLive<T, U, kT, kTwoSum>(x, y, n, m, s, store, false, kInf, Tout);
  const bool live = RowLive(lo, m, s);
  const float xc = live ? kInf : LiveFloor(m, s);  // (live rows never read it)
  if constexpr (std::is_same_v<T, float>) {
    switch (DiffSplitOf(lo, m)) {
      case kMFirst:
        return ExpStoreLive<T, U, kT, kMFirst>(x, y, n, m, s, store, live, xc, Tout);
      case kXFirst:
        return ExpStoreLive<T, U, kT, kXFirst>(x, y, n, m, s, store, live, xc, Tout);
      default:
        break;
    }
  }
  return ExpStoreLive<T, U, kT, kTwoSum>(x, y, n, m, s, store, live, xc, Tout);
}

// Sum of exp((x - m) s) over the elements different from m, and the number k
// of elements equal to m (each contributes exactly 1): S = k + rest keeps the
// small part exact enough for log1p (log-softmax of a dominant item).
template <class T>
double SumExpRest(const T* x, std::int64_t n, float mf, const Scale& scale, std::int64_t* k) {
  constexpr bool kAcc = std::is_same_v<T, float>;
  const DF d;
  const DD dd;
  const std::size_t N = hn::Lanes(d);
  const ScaleV s = ScaleVOf(d, scale);
  const VF m = hn::Set(d, mf);
  VD a0 = hn::Zero(dd), a1 = hn::Zero(dd);
  std::int64_t count = 0;
  auto one = [&](VF v) SA_VEC_LAMBDA {
    const MF at_max = hn::Eq(v, m);
    count += static_cast<std::int64_t>(hn::CountTrue(d, at_max));
    VF l;
    VF h = Diff<kAcc>(d, v, m, s, l);
    AccD(a0, a1, hn::IfThenZeroElse(at_max, ExpMasked<kAcc, kExpBias>(d, h, l)));
  };
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  for (; i + N <= len; i += N) one(LoadF(d, x + i));
  if (i < len) {
    Tail<T> t(x + i, len - i);
    one(LoadF(d, t.in));
  }
  *k = count;
  return SumD(hn::Add(a0, a1)) * kTwoM32;
}
// kForm (SubForm): kSubNone where every weight of the row is a normal float
// (row_scale_f32's `normal`), kSubAdaptive otherwise (kSubCheck: the checked
// form, checked_forms_only). The same bits in every form.
template <int kForm>
void ScaleF32T(float* y, std::int64_t n, float rhf, float rlf) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF rh = hn::Set(d, rhf * kTwo64), rl = hn::Set(d, rlf * kTwo64);
  const std::size_t len = static_cast<std::size_t>(n);
  std::size_t i = 0;
  SubBlocks<kForm>(d, i, len, [&](std::size_t end, auto sub, SubTrack& t) SA_VEC_LAMBDA {
    constexpr int kS = decltype(sub)::value;
    for (; i < end; i += 2 * N) {
      hn::StoreU(MulR<kS>(hn::LoadU(d, y + i), rh, rl, &t), d, y + i);
      hn::StoreU(MulR<kS>(hn::LoadU(d, y + i + N), rh, rl, &t), d, y + i + N);
    }
  });
  for (; i + N <= len; i += N) hn::StoreU(MulR(hn::LoadU(d, y + i), rh, rl), d, y + i);
  if (i < len) {
    Tail<float> t(y + i, len - i);
    hn::Store(MulR(hn::Load(d, t.in), rh, rl), d, t.out);
    t.flush(y + i);
  }
}

void ScaleF32(float* y, std::int64_t n, float rhf, float rlf, bool normal) {
  WithSubForm(normal, n, [&](auto form) { ScaleF32T<decltype(form)::value>(y, n, rhf, rlf); });
}

// y (bfloat16) = e * (r_hi + r_lo), e float (a scratch row of stored exps).
// kForm: as in ScaleF32T. Pairs of vectors are rounded and packed together
// (StoreF2).
template <int kForm>
void ScaleToBF16T(const float* e, std::uint16_t* y, std::int64_t n, float rhf, float rlf) {
  const DF d;
  const std::size_t N = hn::Lanes(d);
  const VF rh = hn::Set(d, rhf * kTwo64), rl = hn::Set(d, rlf * kTwo64);
  const std::size_t len = static_cast<std::size_t>(n);
  std::size_t i = 0;
  SubBlocks<kForm>(d, i, len, [&](std::size_t end, auto sub, SubTrack& t) SA_VEC_LAMBDA {
    constexpr int kS = decltype(sub)::value;
    for (; i < end; i += 2 * N)
      StoreF2(d, MulR<kS>(hn::LoadU(d, e + i), rh, rl, &t),
              MulR<kS>(hn::LoadU(d, e + i + N), rh, rl, &t), y + i);
  });
  for (; i + N <= len; i += N) StoreF(d, MulR(hn::LoadU(d, e + i), rh, rl), y + i);
  if (i < len) {
    Tail<float> t(e + i, len - i);
    Tail<std::uint16_t> o(nullptr, 0);
    StoreF(d, MulR(hn::LoadU(d, t.in), rh, rl), o.out);
    o.count = len - i;
    o.flush(y + i);
  }
}
void ScaleToBF16(const float* e, std::uint16_t* y, std::int64_t n, float rhf, float rlf,
                 bool normal) {
  WithSubForm(normal, n,
              [&](auto form) { ScaleToBF16T<decltype(form)::value>(e, y, n, rhf, rlf); });
}

// y = exp((x - m) s) / S with 1/S = r_hi + r_lo.
// float32: exp rounded (ExpLive, biased), times the two-float 1/S, one
// rounding (MulR): the same bits as row_exp_store_f32 + row_scale_f32, so a
// row gives the same result in place (recomputed exp) as out of place
// (stored exp), which adaptive softmax relies on.
// bfloat16, fused: 1/S = rm 2^kr with rm in [1, 2), and
//     y = bf16(P (rm + r rm p(r)) 2^(kr - 32))
// with P and p of ExpPartsBF16 (P = T_j 2^(floor(K/L) + 32) on table targets,
// 2^(k + 32) otherwise) and rm p's coefficients premultiplied by rm; the
// product is formed at 2^-32 scale (normal) and the power of two 2^kr is an
// exact integer add to the exponent: the float value is within ~3 u, so the
// bf16 rounding is the correct one except within 1.8e-7 relative of a midpoint.
// bfloat16, kLive (the row's minimum lo is known): every result is a normal
// float, no lane is dead, and no vector needs a check. Otherwise vectors with
// a dead lane or a result below the normal range (or NaN) take the unfused
// path: ExpLive (biased), MulR, ScaleDown96 (correct subnormal rounding).
// float32: kLive as in ExpStore (RowLive): otherwise a block of 16 vectors
// with every x >= xc (LiveFloor) skips the dead-lane checks; kSub (SubForm)
// for the weights: kSubNone where every weight is normal
// (row_weights_normal), kSubAdaptive or kSubCheck (the checked form, with
// xc = +inf). The same bits in every form.
template <class T, bool kLive, int kSub = kSubCheck, int kSplit = kTwoSum>
void ExpScale(const T* x, T* y, std::int64_t n, float mf, const Scale& scale, float rhf, float rlf,
              float xcf = kInf) {
  constexpr bool kAcc = std::is_same_v<T, float>;
  const DF d;
  const hn::RebindToSigned<DF> di;
  using VI = hn::Vec<decltype(di)>;
  const std::size_t N = hn::Lanes(d);
  const ScaleV s = ScaleVOf(d, scale);
  const VF m = hn::Set(d, mf);
  const ExpTab tab = LoadExpTab(d);
  const VF rh = hn::Set(d, rhf * kTwo64), rl = hn::Set(d, rlf * kTwo64);
  int kr_int = 0;
  std::frexp(rhf, &kr_int);
  kr_int -= 1;                                // rhf = rm 2^kr, rm in [1, 2); kr <= 0 (S >= 1)
  const float rm = std::ldexp(rhf, -kr_int);  // rm's low part (< 2^-24 rm): below bf16's concern
  // Table targets: rm and rm p's coefficients at 2^-32 (the table carries
  // 2^32); all normal floats, each rounded once (< 2^-24 relative).
  const float rmb = rm * 0x1.0p-32f;
  const VF rmv = hn::Set(d, kTabBits > 0 ? rmb : rm);
  const VF c1 = hn::Set(d, rmb * kTabBF16C1), c2 = hn::Set(d, rmb * kTabBF16C2),
           c3 = hn::Set(d, rmb * kTabBF16C3);
  const VI kr23 = hn::Set(di, static_cast<std::int32_t>(static_cast<std::uint32_t>(kr_int) << 23));
  // Per-vector fast-path test: k + kr >= -125 (k = floor(K/L) or the
  // polynomial's k), tested on K.
  const VF k_min = hn::Set(d, static_cast<float>((-125 - kr_int) * (kTabBits > 0 ? kTabL : 1)));
  // w = rm e^(h - k ln2) in [0.98, 4.1) and e23 = k << 23.
  auto fused = [&](VF h, VF& k, VI& e23) SA_VEC_LAMBDA -> VF {
    if constexpr (kTabBits > 0) {
      const VF kf = TabK(d, h, k);
      const VF r = TabReduceBF16(d, k, h);
      const VF p = TabPolyBF16(r, c1, c2, c3);
      e23 = TabExp(d, kf);
      return hn::Mul(Lut(tab.h0, tab.h1, kf), hn::MulAdd(r, p, rmv));
    } else {
      const VF shifter = hn::Set(d, 12582912.0f);
      const VF kf = hn::MulAdd(h, hn::Set(d, 1.44269504088896341f), shifter);
      k = hn::Sub(kf, shifter);
      const VF r = ReduceBF16(d, k, h);
      e23 = hn::ShiftLeft<23>(hn::BitCast(di, kf));
      return hn::MulAdd(PolyQ5(d, r), hn::Mul(r, rmv), rmv);
    }
  };
  // One vector; live: std::bool_constant<kLive> for full vectors, false for
  // the padded tail.
  auto val = [&](VF v, auto live, auto sub, SubTrack* track) SA_VEC_LAMBDA -> VF {
    constexpr bool kL = decltype(live)::value;
    VF l;
    const VF h = Diff<kAcc, kSplit>(d, v, m, s, l);
    if constexpr (kAcc) {
      return MulR<decltype(sub)::value>(ExpLive<kAcc, kL>(d, tab, h, l), rh, rl, track);
    } else {
      VF k;
      VI e23;
      if constexpr (kL) {
        const VF w = fused(h, k, e23);
        return hn::BitCast(d, hn::Add(hn::BitCast(di, w), hn::Add(e23, kr23)));
      } else {
        const MF dead = hn::Lt(h, hn::Set(d, -104.0f));
        const VF w = fused(hn::IfThenElse(dead, hn::Set(d, -104.0f), h), k, e23);
        if (HWY_LIKELY(hn::AllTrue(d, hn::Or(dead, hn::Ge(k, k_min))))) {
          const VF e = hn::BitCast(d, hn::Add(hn::BitCast(di, w), hn::Add(e23, kr23)));
          return hn::IfThenZeroElse(dead, e);
        }
        return MulR(ExpLive<kAcc>(d, tab, h, l), rh, rl);
      }
    }
  };
  std::size_t i = 0;
  const std::size_t len = static_cast<std::size_t>(n);
  // The pairs of vectors from i to end.
  auto pairs = [&](std::size_t end, auto live, auto sub, SubTrack* t) SA_VEC_LAMBDA {
    for (; i < end; i += 2 * N) {
      VF v0, v1;
      LoadF2Blocked(d, x + i, v0, v1);
      StoreF2Blocked(d, val(v0, live, sub, t), val(v1, live, sub, t), y + i);
    }
  };
  using Check = std::integral_constant<int, kSubCheck>;
  if constexpr (!kAcc) {
    (void)xcf;
    pairs(len / (2 * N) * (2 * N), std::bool_constant<kLive>{}, Check{}, nullptr);
  } else {
    const VF xc = hn::Set(d, xcf);
    SubBlocks<kSub>(d, i, len, [&](std::size_t end, auto sub, SubTrack& t) SA_VEC_LAMBDA {
      if constexpr (kLive) {
        pairs(end, std::true_type{}, sub, &t);
      } else {
        if (BlockLive(d, x + i, end - i, xc))
          pairs(end, std::true_type{}, sub, &t);
        else
          pairs(end, std::false_type{}, sub, &t);
      }
    });
  }
  // The leftover vector and the padded tail (-inf padding: dead lanes).
  for (; i + N <= len; i += N)
    StoreF(d, val(LoadF(d, x + i), std::false_type{}, Check{}, nullptr), y + i);
  if (i < len) {
    Tail<T> t(x + i, len - i);
    StoreF(d, val(LoadF(d, t.in), std::false_type{}, Check{}, nullptr), t.out);
    t.flush(y + i);
  }
}

// ---------------------------------------------------------------- exported (per target)
double ExpStoreF32(const float* x, float* y, std::int64_t n, float m, float lo, const Scale& s) {
  return ExpStoreRow(x, y, n, m, lo, s, true);
}
double SumExpF32(const float* x, std::int64_t n, float m, float lo, const Scale& s) {
  return ExpStoreRow<float, float>(x, nullptr, n, m, lo, s, false);
}
double SumExpBF16(const std::uint16_t* x, std::int64_t n, float m, float lo, const Scale& s) {
  return ExpStoreRow<std::uint16_t, float>(x, nullptr, n, m, lo, s, false);
}
double ExpStoreBF16(const std::uint16_t* x, float* y, std::int64_t n, float m, float lo,
                    const Scale& s) {
  return ExpStoreRow<std::uint16_t, float>(x, y, n, m, lo, s, true);
}
double ExpStoreTF32(const float* x, float* y, std::int64_t n, float m, float lo, const Scale& s,
                    double* T) {
  return ExpStoreRow<float, float, true>(x, y, n, m, lo, s, true, T);
}
double SumExpTF32(const float* x, std::int64_t n, float m, float lo, const Scale& s, double* T) {
  return ExpStoreRow<float, float, true>(x, nullptr, n, m, lo, s, false, T);
}
double SumExpTBF16(const std::uint16_t* x, std::int64_t n, float m, float lo, const Scale& s,
                   double* T) {
  return ExpStoreRow<std::uint16_t, float, true>(x, nullptr, n, m, lo, s, false, T);
}
double SumRestF32(const float* x, std::int64_t n, float m, const Scale& s, std::int64_t* k) {
  return SumExpRest(x, n, m, s, k);
}
double SumRestBF16(const std::uint16_t* x, std::int64_t n, float m, const Scale& s,
                   std::int64_t* k) {
  return SumExpRest(x, n, m, s, k);
}
// A live float32 row (RowLive) with the given split of x - m.
template <int kSplit>
void ExpScaleLiveF32(const float* x, float* y, std::int64_t n, float m, const Scale& s, float rh,
                     float rl, bool normal) {
  WithSubForm(normal, n, [&](auto form) {
    ExpScale<float, true, decltype(form)::value, kSplit>(x, y, n, m, s, rh, rl);
  });
}
void ExpScaleF32(const float* x, float* y, std::int64_t n, float m, float lo, const Scale& s,
                 float rh, float rl, bool normal) {
  if (checked_forms_only()) return ExpScale<float, false>(x, y, n, m, s, rh, rl);
  if (!RowLive(lo, m, s)) {
    const float xc = LiveFloor(m, s);
    return WithSubForm(normal, n, [&](auto form) {
      ExpScale<float, false, decltype(form)::value>(x, y, n, m, s, rh, rl, xc);
    });
  }
  switch (DiffSplitOf(lo, m)) {
    case kMFirst:
      return ExpScaleLiveF32<kMFirst>(x, y, n, m, s, rh, rl, normal);
    case kXFirst:
      return ExpScaleLiveF32<kXFirst>(x, y, n, m, s, rh, rl, normal);
    default:
      return ExpScaleLiveF32<kTwoSum>(x, y, n, m, s, rh, rl, normal);
  }
}
// Fused bfloat16 fast path for the whole row when its smallest weight
// exp((lo - m) s) / S stays normal with margin: (lo - m) s log2(e) >= -123 - kr.
void ExpScaleBF16(const std::uint16_t* x, std::uint16_t* y, std::int64_t n, float m, float lo,
                  const Scale& s, float rh, float rl) {
  int kr = 0;
  std::frexp(rh, &kr);
  const double t = (static_cast<double>(lo) - static_cast<double>(m)) * s.s * 1.4426950408889634;
  if (t >= -123.0 - (kr - 1))
    ExpScale<std::uint16_t, true>(x, y, n, m, s, rh, rl);
  else
    ExpScale<std::uint16_t, false>(x, y, n, m, s, rh, rl);
}

// The longest bfloat16 row whose exps go to a float scratch row
// (cpu_kernel.cpp), measured per target and CPU vendor (docs/measurements.md):
// the point where exp twice overtakes the scratch traffic moves with the
// exp's cost against the memory's. Only speed changes: both paths compute
// the same exps and round each weight once.
std::int64_t Bf16ScratchMaxN() {
  static const bool amd = __builtin_cpu_is("amd");
#if HWY_TARGET == HWY_AVX2
  return std::int64_t{1} << (amd ? 22 : 20);
#else
  return std::int64_t{1} << (amd ? 20 : 18);
#endif
}
// The longest row that takes the three-pass softmax (max; exp stored and
// summed; scaled) rather than the two-pass one (online normaliser; exp again
// and scaled), float32 and bfloat16, per target and CPU vendor
// (cpu_kernel.cpp says what was measured). Both paths compute the same exps
// and round each weight once, under the same accuracy claim; their sums S
// are accumulated differently (the online normaliser rescales), so a weight
// may differ in its last bit between them.
constexpr std::int64_t kNoLimit = std::numeric_limits<std::int64_t>::max();
std::int64_t F32ThreePassMaxN() {
  static const bool amd = __builtin_cpu_is("amd");
#if HWY_TARGET == HWY_AVX2
  return amd ? kNoLimit : std::int64_t{1} << 21;
#else
  (void)amd;
  return std::int64_t{1} << 21;
#endif
}
std::int64_t Bf16ThreePassMaxN() {
  static const bool amd = __builtin_cpu_is("amd");
  return amd ? kNoLimit : std::int64_t{1} << 22;
}

}  // namespace HWY_NAMESPACE
}  // namespace sa::kernels::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sa::kernels::cpu {

HWY_EXPORT(ExpStoreF32);
HWY_EXPORT(SumExpF32);
HWY_EXPORT(SumExpBF16);
HWY_EXPORT(ExpStoreBF16);
HWY_EXPORT(ExpStoreTF32);
HWY_EXPORT(SumExpTF32);
HWY_EXPORT(SumExpTBF16);
HWY_EXPORT(SumRestF32);
HWY_EXPORT(SumRestBF16);
HWY_EXPORT(ExpScaleF32);
HWY_EXPORT(ExpScaleBF16);
HWY_EXPORT(ScaleToBF16);
HWY_EXPORT(ScaleF32);
HWY_EXPORT(Bf16ScratchMaxN);
HWY_EXPORT(F32ThreePassMaxN);
HWY_EXPORT(Bf16ThreePassMaxN);

std::int64_t row_bf16_scratch_max_n() { return HWY_DYNAMIC_DISPATCH(Bf16ScratchMaxN)(); }
std::int64_t row_f32_three_pass_max_n() { return HWY_DYNAMIC_DISPATCH(F32ThreePassMaxN)(); }
std::int64_t row_bf16_three_pass_max_n() { return HWY_DYNAMIC_DISPATCH(Bf16ThreePassMaxN)(); }

double row_exp_store_f32(const float* x, float* y, std::int64_t n, float m, float lo,
                         const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(ExpStoreF32)(x, y, n, m, lo, s);
}
double row_sum_exp_f32(const float* x, std::int64_t n, float m, float lo, const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(SumExpF32)(x, n, m, lo, s);
}
double row_sum_exp_bf16(const std::uint16_t* x, std::int64_t n, float m, float lo, const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(SumExpBF16)(x, n, m, lo, s);
}
double row_exp_store_bf16(const std::uint16_t* x, float* y, std::int64_t n, float m, float lo,
                          const Scale& s) {
  return HWY_DYNAMIC_DISPATCH(ExpStoreBF16)(x, y, n, m, lo, s);
}
void row_scale_to_bf16(const float* e, std::uint16_t* y, std::int64_t n, float rh, float rl,
                       bool normal) {
  HWY_DYNAMIC_DISPATCH(ScaleToBF16)(e, y, n, rh, rl, normal);
}
double row_exp_store_T_f32(const float* x, float* y, std::int64_t n, float m, float lo,
                           const Scale& s, double* T) {
  return HWY_DYNAMIC_DISPATCH(ExpStoreTF32)(x, y, n, m, lo, s, T);
}
double row_sum_exp_T_f32(const float* x, std::int64_t n, float m, float lo, const Scale& s,
                         double* T) {
  return HWY_DYNAMIC_DISPATCH(SumExpTF32)(x, n, m, lo, s, T);
}
double row_sum_exp_T_bf16(const std::uint16_t* x, std::int64_t n, float m, float lo, const Scale& s,
                          double* T) {
  return HWY_DYNAMIC_DISPATCH(SumExpTBF16)(x, n, m, lo, s, T);
}
double row_sum_exp_rest_f32(const float* x, std::int64_t n, float m, const Scale& s,
                            std::int64_t* k) {
  return HWY_DYNAMIC_DISPATCH(SumRestF32)(x, n, m, s, k);
}
double row_sum_exp_rest_bf16(const std::uint16_t* x, std::int64_t n, float m, const Scale& s,
                             std::int64_t* k) {
  return HWY_DYNAMIC_DISPATCH(SumRestBF16)(x, n, m, s, k);
}
void row_scale_f32(float* y, std::int64_t n, float rh, float rl, bool normal) {
  HWY_DYNAMIC_DISPATCH(ScaleF32)(y, n, rh, rl, normal);
}
void row_exp_scale_f32(const float* x, float* y, std::int64_t n, float m, float lo, const Scale& s,
                       float rh, float rl, bool normal) {
  HWY_DYNAMIC_DISPATCH(ExpScaleF32)(x, y, n, m, lo, s, rh, rl, normal);
}
void row_exp_scale_bf16(const std::uint16_t* x, std::uint16_t* y, std::int64_t n, float m, float lo,
                        const Scale& s, float rh, float rl) {
  HWY_DYNAMIC_DISPATCH(ExpScaleBF16)(x, y, n, m, lo, s, rh, rl);
}

}  // namespace sa::kernels::cpu
#endif  // HWY_ONCE
