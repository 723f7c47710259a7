// Accuracy of the "cpu" kernel against the MPFR reference, every row op x
// dtype, on random and adversarial rows (tests/cpu/cpu_test_support.hpp).
//
// Where the bounds come from (u = 2^-24, the float32 unit roundoff):
// - exp: argument d = (x - max) s is formed as a two-float sum (TwoSum + exact
//   product error; ~2^-47 relative). Table-driven on AVX-512/AVX2 (vec_exp-inl.h:
//   2^(j/L) from a register table, a cubic on |r| <= ln2/(2L), one final FMA):
//   |e - exp(d)| <= 0.58 ulp(e); elsewhere (and in streamed rescales)
//   Cody-Waite, a degree-7 polynomial (truncation < 0.07 ulp), 1 + p rounded
//   once: <= 0.75 ulp(e). The bounds below use 0.75 ulp < 2^-23 e.
//   bfloat16 rows use a shorter polynomial (table: quadratic, 0.9 u; else
//   degree-6 Chebyshev, 1.05e-8) and a one-constant reduction (<= 2.9e-7,
//   weights < e^-83 only): the float value before the bf16 rounding is
//   within ~2^-22 relative.
// - T (entropy, adaptive) is summed in float blocks of 8 terms per lane, all
//   of one sign: <= 8 u relative to T, and T/S <= H, so <= 8 u H in H, inside
//   the 2 u (2.5 + 10 H) entropy bound below.
// - sums: in double from the stored float exps; streamed rescaling uses
//   1 + expm1 in double when no 2^k scaling applies, so rescale factors add at
//   most 2^-24 relative per factor of at least e^-0.35 decay: <= 3.3 u total.
// - Each reported error is measured against the value computed by MPFR at 256
//   bits from the same (float or bfloat16) inputs, so input quantisation is
//   not counted (theory.md T7: report it separately).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#if defined(__SSE2__)
#include <xmmintrin.h>  // _mm_getcsr, _mm_setcsr
#endif

#include "cpu_test_support.hpp"
#include "hwy/targets.h"
#include "kernels/cpu/isa_limit.hpp"
#include "kernels/cpu/row_ops.hpp"
#include "theory/adaptive_temperature.hpp"

namespace sa::cputest {
namespace {

using ref::Mp;

struct Case {
  Dist dist;
  std::int64_t n;
  std::uint64_t seed;
};
std::vector<Case> cases() {
  std::vector<Case> c;
  std::uint64_t seed = 1;
  for (Dist d : all_dists)
    for (std::int64_t n : sizes()) c.push_back({d, n, seed++});
  return c;
}
std::string where(const Case& c, std::int64_t i) {
  return std::string(name_of(c.dist)) + " n=" + std::to_string(c.n) + " i=" + std::to_string(i);
}

// Instruction-set prefix of the report lines (CpuTargets below), else empty.
std::string g_target;

void report(const char* what, const UlpStats& s) {
  std::printf(
      "[accuracy] %s%-28s elements=%lld correctly_rounded=%.5f max_ulps_apart=%lld "
      "max_ulp_error=%.3f\n",
      g_target.c_str(), what, static_cast<long long>(s.count), s.exact_fraction(),
      static_cast<long long>(s.max_apart), s.max_ulp_error);
}

// ---------------------------------------------------------------- softmax
// float32 claim: every weight within 2 ulp of the correctly rounded exact
// weight (ulps_apart <= 2). Derivation: p_i = e_i / S with e_i within 0.75
// ulp, S the exact sum of the stored e_i up to 2^-52, so S's relative error is
// at most the largest e error (< 2^-23); the two-float reciprocal makes the
// final product one rounding (0.5 ulp): total < 0.75 + 1 + 0.5 = 2.25 ulp of
// relative error in the worst case, i.e. at most 2 representable steps from
// the correctly rounded value. This is the target; common kernels
// (x - max rounded in float) reach ~17 ulp on the offset rows.
// bfloat16 claim: >= 99% correctly rounded and every weight within 1 bf16 ulp:
// the float32 value is within ~2^-22 relative, so the bf16 rounding differs
// from the correct one only when the exact value lies within 2^-22 of a
// bf16 rounding midpoint (a fraction ~2^-13 of values), and then by one step.
// float16 claim: >= 99.9% correctly rounded and every weight within 1 float16
// ulp, subnormals included: float16 rows run the float32 algorithm on the
// exactly widened row (within 2.25 ulp of float32, i.e. ~2^-23 relative) and
// round once, so the float16 rounding can differ from the correct one only
// within ~2^-23 relative of a float16 midpoint (a fraction ~2^-12 of values),
// and then by one step. Below 2^-14 the weights are float16 subnormals
// (multiples of 2^-24), which the float32 value resolves exactly as well.
// min_f16: the float16 fraction claimed (0.999 for weights; log-softmax keeps
// the bfloat16 claim, see there).
void check_low_precision_claim(DType t, const UlpStats& st, double min_f16 = 0.999) {
  EXPECT_LE(st.max_apart, 1) << st.worst;
  EXPECT_GE(st.exact_fraction(), t == DType::float16 ? min_f16 : 0.99);
}
void check_softmax(DType t, double theta, const char* label) {
  UlpStats st;
  for (const Case& c : cases()) {
    const auto x = generate(c.dist, c.n, c.seed, t);
    const auto out = kernel().softmax(t, RowBatch::single(x), theta);
    const auto ref = ref::softmax(widen(x), theta);
    for (std::int64_t i = 0; i < c.n; ++i) st.add(t, out[i], ref[i], where(c, i));
  }
  report(label, st);
  if (t == DType::float32) {
    EXPECT_LE(st.max_apart, 2) << st.worst;
  } else {
    check_low_precision_claim(t, st);
  }
}

TEST(CpuSoftmax, Float32WithinTwoUlpOfCorrectlyRounded) {
  check_softmax(DType::float32, 1.0, "softmax f32");
}
TEST(CpuSoftmax, Float16CorrectlyRounded999PerMilleAndWithinOneUlp) {
  check_softmax(DType::float16, 1.0, "softmax f16");
}
TEST(CpuSoftmax, Float16WithTemperature) {
  check_softmax(DType::float16, 0.7, "softmax f16 t=0.7");
}
TEST(CpuSoftmax, Float32WithTemperature) {
  check_softmax(DType::float32, 0.7, "softmax f32 theta=0.7");
  check_softmax(DType::float32, 3.0, "softmax f32 theta=3");
}
TEST(CpuSoftmax, Bfloat16CorrectlyRounded99PercentAndWithinOneUlp) {
  check_softmax(DType::bfloat16, 1.0, "softmax bf16");
}

// Long rows take other code paths (cpu_kernel.cpp: float32 three-pass up to
// row_f32_three_pass_max_n(), then online normaliser + recomputed exp;
// bfloat16 scratch row up to row_bf16_scratch_max_n() (2^18 to 2^22 by target
// and vendor), then exp twice, then the online normaliser past
// row_bf16_three_pass_max_n(); both limits by target and vendor, so each row
// below also runs the two-pass form directly). Same bounds.
// The longest rows are mostly masked (-inf, exact 0) so that the MPFR
// reference stays cheap; the finite logits are spread over the whole row.
// softmax of one row by the online normaliser and the fused exp * 1/S pass
// (row_ops.hpp), float32 or bfloat16 (x bf16-exact), at temperature 1.
std::vector<float> two_pass(DType t, const std::vector<float>& x) {
  namespace cpu = sa::kernels::cpu;
  const auto n = static_cast<std::int64_t>(x.size());
  const cpu::Scale s = cpu::Scale::of(1.0);
  std::vector<float> y(x.size());
  auto recip = [](double S, float& hi, float& lo) {
    const double r = 1.0 / S;
    hi = static_cast<float>(r);
    lo = static_cast<float>(r - static_cast<double>(hi));
  };
  float rh = 0, rl = 0;
  if (t == DType::float32) {
    const cpu::RowState st = cpu::row_normaliser_f32(x.data(), n, s);
    EXPECT_TRUE(st.ok);
    recip(st.S, rh, rl);
    cpu::row_exp_scale_f32(x.data(), y.data(), n, st.m, st.lo, s, rh, rl,
                           cpu::row_weights_normal(st.lo, st.m, s.s, st.S));
    return y;
  }
  std::vector<std::uint16_t> xb(x.size()), yb(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::uint32_t b;
    std::memcpy(&b, &x[i], 4);
    xb[i] = static_cast<std::uint16_t>(b >> 16);  // x is bf16-exact
  }
  const cpu::RowState st = cpu::row_normaliser_bf16(xb.data(), n, s);
  EXPECT_TRUE(st.ok);
  recip(st.S, rh, rl);
  cpu::row_exp_scale_bf16(xb.data(), yb.data(), n, st.m, st.lo, s, rh, rl);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::uint32_t b = std::uint32_t{yb[i]} << 16;
    std::memcpy(&y[i], &b, 4);
  }
  return y;
}

TEST(CpuSoftmax, LongRowPaths) {
  struct Long {
    DType t;
    std::int64_t n;
  };
  for (const Long& c : {Long{DType::float32, (std::int64_t{1} << 21) + 37},
                        Long{DType::bfloat16, (std::int64_t{1} << 18) + 37},
                        Long{DType::bfloat16, (std::int64_t{1} << 20) + 37},
                        Long{DType::bfloat16, (std::int64_t{1} << 21) + 37},
                        Long{DType::bfloat16, (std::int64_t{1} << 22) + 37}}) {
    UlpStats st;
    auto x = generate(Dist::normal, c.n, 7, c.t == DType::bfloat16);
    for (std::int64_t i = 0; i < c.n; ++i)
      if (i % 997 != 5) x[i] = -kInf;
    x[c.n - 1] = 3.25f;  // a late max (bf16-exact): the streamed lanes rescale
    x[c.n - 2] = 3.0f;
    const auto out = kernel().softmax(c.t, RowBatch::single(x));
    const auto ref = ref::softmax(widen(x));
    for (std::int64_t i = 0; i < c.n; ++i)
      if (x[i] != -kInf || i % 4096 == 0)
        st.add(c.t, out[i], ref[i], "long n=" + std::to_string(c.n));
    report(c.t == DType::float32 ? "softmax f32 long masked" : "softmax bf16 long masked", st);
    EXPECT_GT(out[5], 0.0f);  // the finite weights are not trivially 0
    EXPECT_LE(st.max_apart, c.t == DType::float32 ? 2 : 1) << st.worst;
    // The two-pass form (online normaliser, then the fused exp * 1/S pass),
    // called directly: the kernel takes it only past a length that depends
    // on the target and the CPU's vendor (row_f32_three_pass_max_n), which
    // on some machines is no length at all. Same bounds.
    const std::vector<float> two = two_pass(c.t, x);
    UlpStats st2;
    for (std::int64_t i = 0; i < c.n; ++i)
      if (x[i] != -kInf || i % 4096 == 0)
        st2.add(c.t, two[i], ref[i], "two-pass n=" + std::to_string(c.n));
    report(c.t == DType::float32 ? "softmax f32 two-pass" : "softmax bf16 two-pass", st2);
    EXPECT_GT(two[5], 0.0f);
    EXPECT_LE(st2.max_apart, c.t == DType::float32 ? 2 : 1) << st2.worst;
  }
}

// Rows of 2^18 + 37 with every logit finite, every 7th weight checked
// against MPFR at 128 bits (2 x 53 bits + margin is enough for a float or
// bf16 verdict, mpfr.hpp).
UlpStats long_finite_rows(DType t, std::initializer_list<Dist> dists, std::uint64_t seed) {
  UlpStats st;
  const std::int64_t n = (1 << 18) + 37;
  for (Dist d : dists) {
    const auto x = generate(d, n, seed, t == DType::bfloat16);
    const auto out = kernel().softmax(t, RowBatch::single(x));
    ref::PrecisionScope p(128);
    const auto ref = ref::softmax(widen(x));
    for (std::int64_t i = 0; i < n; i += 7) st.add(t, out[i], ref[i], name_of(d));
  }
  return st;
}

// The exp and scale passes' fast forms against their checked forms
// (cpu::set_checked_forms_only: dead-lane checks on every vector, TwoSum,
// ScaleDown96's per-vector check for every weight), which must give the
// same bits:
// - a row whose minimum lo is known splits x - m by the cheapest exact form
//   its range allows (Fast2Sum with -m first when no |x| has a larger
//   exponent than m, with x first when m <= 0, else TwoSum: vec_exp-inl.h,
//   DiffSplitOf); each form gives the same rounding and the same exact error.
//   The rows select each form, including |x| > m at m's exponent (exact by
//   Dekker's condition, which is on exponents) and the boundary m = 0;
// - a wide row (some (x - m) s < -103, an exact 0 weight) skips the checks
//   on blocks without such a lane (row_exp.cpp, BlockLive);
// - the scale passes' adaptive form (rows of 2^19 or more, below) blends
//   both roundings without a branch in blocks with subnormal weights.
// The fast forms run with flush-to-zero set: a block wrongly taken for one
// without subnormal weights (a plain multiply) then gives 0.
TEST(CpuSoftmax, KnownMinimumChangesNoBit) {
  namespace cpu = sa::kernels::cpu;
  std::mt19937_64 rng(2026);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  // Live rows per form, classified here by ilogb (the kernel reads exponent
  // fields): -max first, x first, TwoSum; then wide rows, and rows with a
  // subnormal weight. Each must be drawn, or the comparison says nothing
  // about it.
  int forms[5] = {0, 0, 0, 0, 0};
  for (int it = 0; it < 700; ++it) {
    const int shape = it % 7;
    const auto n = static_cast<std::int64_t>(shape >= 5 ? 600 + rng() % 1500 : 1 + rng() % 700);
    const double sigma = std::ldexp(1.0, static_cast<int>(rng() % 12) - 5);
    const double off =
        (static_cast<int>(rng() % 7) - 3) * std::ldexp(1.0, static_cast<int>(rng() % 10) - 3);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& v : x) v = static_cast<float>(off + sigma * nd(rng));
    const float top = *std::max_element(x.begin(), x.end());
    switch (shape) {
      case 0:  // max 1.5, one logit at -1.9375: the same exponent, larger magnitude
        for (float& v : x) v = std::clamp(v, -1.9375f, 1.5f);
        x[0] = 1.5f;
        x[static_cast<std::size_t>(n - 1)] = -1.9375f;
        break;
      case 1:  // max exactly 0
        for (float& v : x) v = std::min(v, 0.0f);
        x[0] = 0.0f;
        break;
      case 2:  // max 1.5, minimum -5 past its binade: TwoSum
        for (float& v : x) v = std::clamp(v, -5.0f, 1.5f);
        x[0] = 1.5f;
        x[static_cast<std::size_t>(n - 1)] = -5.0f;
        break;
      case 5:  // wide: 1 to 4 logits 100 to 115 below the max, in the last 40
        for (std::uint64_t k = 0, c = 1 + rng() % 4; k < c; ++k)
          x[static_cast<std::size_t>(n - 1 - static_cast<std::int64_t>(rng() % 40))] =
              top - static_cast<float>(100 + rng() % 16);
        break;
      case 6:  // weights near and below 2^-126: 1 in 16 logits 84 to 101 below the max
        for (float& v : x)
          if (rng() % 16 == 0) v = top - static_cast<float>(84 + rng() % 18);
        break;
      default:
        break;
    }
    const cpu::Scale s = cpu::Scale::of(it % 3 == 0 ? 1.0 : 0.3 + (rng() % 1000) / 300.0);
    float lo, m;
    cpu::row_range_f32(x.data(), n, &lo, &m);
    // The fast forms, then the checked ones. The fast forms run with
    // flush-to-zero set (x86): a block wrongly taken for one without
    // subnormal weights then gives 0 where the checked forms, which never
    // form a subnormal in floating point, give the subnormal.
    std::vector<float> a(x.size()), b(x.size()), c(x.size()), e(x.size());
#if defined(__SSE2__)
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8000u);
#endif
    double Ta = 0, Tb = 0;
    const double Sa = cpu::row_exp_store_f32(x.data(), a.data(), n, m, lo, s);
    const double Ua = cpu::row_sum_exp_T_f32(x.data(), n, m, lo, s, &Ta);
    const double Va = cpu::row_sum_exp_f32(x.data(), n, m, lo, s);
    const double r = 1.0 / Sa;
    const float rh = static_cast<float>(r), rl = static_cast<float>(r - rh);
    const bool normal = cpu::row_weights_normal(lo, m, s.s, Sa);
    cpu::row_exp_scale_f32(x.data(), c.data(), n, m, lo, s, rh, rl, normal);
    cpu::row_scale_f32(a.data(), n, rh, rl, normal);
#if defined(__SSE2__)
    _mm_setcsr(csr);
#endif
    cpu::set_checked_forms_only(true);
    const double Sb = cpu::row_exp_store_f32(x.data(), b.data(), n, m, lo, s);
    const double Ub = cpu::row_sum_exp_T_f32(x.data(), n, m, lo, s, &Tb);
    const double Vb = cpu::row_sum_exp_f32(x.data(), n, m, lo, s);
    cpu::row_exp_scale_f32(x.data(), e.data(), n, m, lo, s, rh, rl, false);
    cpu::row_scale_f32(b.data(), n, rh, rl, false);
    cpu::set_checked_forms_only(false);
    ASSERT_EQ(Sa, Sb) << "row " << it;
    ASSERT_EQ(Ua, Ub) << "row " << it;
    ASSERT_EQ(Ta, Tb) << "row " << it;
    ASSERT_EQ(Va, Vb) << "row " << it;
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "row " << it;
    ASSERT_EQ(std::memcmp(c.data(), e.data(), c.size() * 4), 0) << "row " << it;
    ASSERT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0) << "row " << it;
    // The same row in bfloat16: its exp passes decide dead blocks the same way.
    std::vector<std::uint16_t> xb(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) xb[i] = sa::bf16_from_float(x[i]);
    cpu::row_range_bf16(xb.data(), n, &lo, &m);
    double Tc = 0, Td = 0;
    std::vector<float> eb(x.size()), ec(x.size());
    const double Sc = cpu::row_exp_store_bf16(xb.data(), eb.data(), n, m, lo, s);
    const double Uc = cpu::row_sum_exp_T_bf16(xb.data(), n, m, lo, s, &Tc);
    const double Wc = cpu::row_sum_exp_bf16(xb.data(), n, m, lo, s);
    cpu::set_checked_forms_only(true);
    const double Sd = cpu::row_exp_store_bf16(xb.data(), ec.data(), n, m, lo, s);
    const double Ud = cpu::row_sum_exp_T_bf16(xb.data(), n, m, lo, s, &Td);
    const double Wd = cpu::row_sum_exp_bf16(xb.data(), n, m, lo, s);
    cpu::set_checked_forms_only(false);
    ASSERT_EQ(Sc, Sd) << "bf16 row " << it;
    ASSERT_EQ(Uc, Ud) << "bf16 row " << it;
    ASSERT_EQ(Tc, Td) << "bf16 row " << it;
    // The plain bfloat16 sum may add an exp unrounded, in the FMA that forms
    // it (explicitly on live rows; where the compiler contracts the product
    // into the add on live blocks): an S within its budget of 2^-21
    // relative (row_exp.cpp), not the same bits.
    ASSERT_LE(std::abs(Wc - Wd), std::ldexp(Wd, -21)) << "bf16 row " << it;
    ASSERT_EQ(std::memcmp(eb.data(), ec.data(), eb.size() * 4), 0) << "bf16 row " << it;
    cpu::row_range_f32(x.data(), n, &lo, &m);
    if ((static_cast<double>(lo) - m) * s.s >= -103.0)
      ++forms[m <= 0.0f ? 1 : lo == 0.0f || std::ilogb(lo) <= std::ilogb(m) ? 0 : 2];
    else if (std::all_of(a.begin(), a.begin() + std::min<std::int64_t>(n, 256),
                         [](float w) { return w > 0.0f; }))
      ++forms[3];  // wide, and its first block has no dead lane
    if (std::any_of(a.begin(), a.end(),
                    [](float w) { return w > 0.0f && w < std::numeric_limits<float>::min(); }))
      ++forms[4];
  }
  std::printf(
      "[split] live rows: -max first %d, x first %d, TwoSum %d; wide rows %d; rows with a "
      "subnormal weight %d\n",
      forms[0], forms[1], forms[2], forms[3], forms[4]);
  for (int f : forms) EXPECT_GE(f, 30);
  // Rows of 2^19 + 37 (the adaptive form of the weights' scaling, from
  // kSubAdaptiveMinN = 2^19 on): thirds with 1 in 8 weights near or below
  // 2^-126, none, and again such weights, so the passes switch to the blended
  // form and back; one row also has dead lanes.
  for (int wide = 0; wide < 2; ++wide) {
    const std::int64_t n = (std::int64_t{1} << 19) + 37;
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& v : x) v = nd(rng);
    x[0] = 6.0f;
    for (std::int64_t i = 0; i < n; ++i)
      if ((i < n / 3 || i > 2 * n / 3) && rng() % 8 == 0)
        x[static_cast<std::size_t>(i)] = 6.0f - static_cast<float>(84 + rng() % (wide ? 30 : 18));
    const cpu::Scale s = cpu::Scale::of(1.0);
    float lo, m;
    cpu::row_range_f32(x.data(), n, &lo, &m);
    std::vector<float> a(x.size()), b(x.size()), c(x.size()), e(x.size()), ea(x.size());
    std::vector<std::uint16_t> ha(x.size()), hb(x.size()), fa(x.size()), fb(x.size());
    const double S = cpu::row_exp_store_f32(x.data(), a.data(), n, m, lo, s);
    ea = a;
    const double r = 1.0 / S;
    const float rh = static_cast<float>(r), rl = static_cast<float>(r - rh);
    ASSERT_FALSE(cpu::row_weights_normal(lo, m, s.s, S));
#if defined(__SSE2__)
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8000u);
#endif
    cpu::row_exp_scale_f32(x.data(), c.data(), n, m, lo, s, rh, rl, false);
    cpu::row_scale_to_bf16(ea.data(), ha.data(), n, rh, rl, false);
    cpu::row_scale_to_f16(ea.data(), fa.data(), n, rh, rl, false);
    cpu::row_scale_f32(a.data(), n, rh, rl, false);
#if defined(__SSE2__)
    _mm_setcsr(csr);
#endif
    cpu::set_checked_forms_only(true);
    EXPECT_EQ(cpu::row_exp_store_f32(x.data(), b.data(), n, m, lo, s), S) << "long row " << wide;
    EXPECT_EQ(std::memcmp(b.data(), ea.data(), b.size() * 4), 0) << "long row " << wide;
    b = ea;
    cpu::row_exp_scale_f32(x.data(), e.data(), n, m, lo, s, rh, rl, false);
    cpu::row_scale_to_bf16(ea.data(), hb.data(), n, rh, rl, false);
    cpu::row_scale_to_f16(ea.data(), fb.data(), n, rh, rl, false);
    cpu::row_scale_f32(b.data(), n, rh, rl, false);
    cpu::set_checked_forms_only(false);
    const auto subnormal = std::count_if(a.begin(), a.end(), [](float w) {
      return w > 0.0f && w < std::numeric_limits<float>::min();
    });
    EXPECT_GT(subnormal, n / 50) << "long row " << wide;
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "long row " << wide;
    EXPECT_EQ(std::memcmp(c.data(), e.data(), c.size() * 4), 0) << "long row " << wide;
    EXPECT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0) << "long row " << wide;
    EXPECT_EQ(ha, hb) << "long row " << wide;
    EXPECT_EQ(fa, fb) << "long row " << wide;
  }
}

// Float32 rows past the caches (three-pass path).
TEST(CpuSoftmax, Float32LongFiniteRow) {
  const UlpStats st =
      long_finite_rows(DType::float32, {Dist::normal, Dist::offset_pos, Dist::ascending}, 99);
  report("softmax f32 n=2^18+37", st);
  EXPECT_LE(st.max_apart, 2) << st.worst;
}

// bfloat16 rows past the float scratch row (2^18): max, then exp twice (sum;
// fused exp * 1/S rounded to bf16), PolyQ5 and the one-constant reduction
// (row_exp.cpp). Same claim as the short rows.
TEST(CpuSoftmax, Bfloat16LongFiniteRow) {
  const UlpStats st =
      long_finite_rows(DType::bfloat16, {Dist::normal, Dist::wide, Dist::offset_neg}, 101);
  report("softmax bf16 n=2^18+37", st);
  EXPECT_LE(st.max_apart, 1) << st.worst;
  EXPECT_GE(st.exact_fraction(), 0.99);
}

// ---------------------------------------------------------------- log_softmax
// Claim: float32 within 2.5 ulp (ulp_error). y = (x - m) s - L in double,
// rounded once (0.5 ulp); L = log k + log1p(rest / k) (k logits at the max m,
// rest the others' sum, from a max pass then a sum pass: no rescales), and
// rest's relative error eps < 2^-23 (exp) gives |dL| <= eps rest/(k + rest)
// <= eps (1 - p_max) <= eps |y_i| (y_i = log p_i <= log(1 - p_max) for
// i not at the max; for the max items y = -L itself), i.e. <= 2 ulp(y_i).
// bfloat16: within 1 ulp and >= 99% correctly rounded (as softmax).
void check_log_softmax(DType t, const char* label) {
  UlpStats st;
  for (const Case& c : cases()) {
    const auto x = generate(c.dist, c.n, c.seed, t);
    const auto out = kernel().log_softmax(t, RowBatch::single(x));
    const auto ref = ref::log_softmax(widen(x));
    for (std::int64_t i = 0; i < c.n; ++i) st.add(t, out[i], ref[i], where(c, i));
  }
  report(label, st);
  if (t == DType::float32) {
    EXPECT_LE(st.max_ulp_error, 2.5) << st.worst;
  } else {
    // float16 as bfloat16 (>= 99%): the float32 value is within 2.5 ulp, and
    // log-weights repeat within a row (near ties, spikes: many items share
    // one value), so a value near a float16 midpoint misses in groups
    // (measured 99.80%, the same as bfloat16's 99.80%).
    check_low_precision_claim(t, st, 0.99);
  }
}
TEST(CpuLogSoftmax, Float32) { check_log_softmax(DType::float32, "log_softmax f32"); }
TEST(CpuLogSoftmax, Bfloat16) { check_log_softmax(DType::bfloat16, "log_softmax bf16"); }
TEST(CpuLogSoftmax, Float16) { check_log_softmax(DType::float16, "log_softmax f16"); }

// Mean |m - l| under p (double estimate from the reference weights).
double mean_abs_gap(const std::vector<float>& x, const std::vector<Mp>& p) {
  double m = -INFINITY;
  for (float v : x) m = std::max(m, static_cast<double>(v));
  double g = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (x[i] != -kInf) g += p[i].convert_to<double>() * (m - x[i]);
  return g;
}
double mean_sq_gap(const std::vector<float>& x, const std::vector<Mp>& p) {
  double m = -INFINITY;
  for (float v : x) m = std::max(m, static_cast<double>(v));
  double g = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (x[i] != -kInf) g += p[i].convert_to<double>() * (m - x[i]) * (m - x[i]);
  return g;
}

// ---------------------------------------------------------------- logsumexp
// Claim: |lse - exact| <= 0.5 ulp(exact) + 2^-23 (2.5 + [bf16] 2 E_p|d|):
// m s + log S in double rounded once; S comes from the one-pass online
// normaliser, so eps_S <= 0.75 * 2^-23 (exp) + 3.3 u (rescales) < 2.4 * 2^-23
// (float32: exact two-float d; the 0.1 covers the ~2^-47 residues).
// bfloat16 rows form d = x - m in float without TwoSum: exact unless the
// exponents differ by > 16, else relative error <= 2u, which moves exp(d) by
// <= 2u|d|, i.e. S by <= 2u E_p|d|.
void check_lse(DType t, const char* label) {
  double worst_ratio = 0;
  std::string worst;
  for (const Case& c : cases()) {
    const auto x = generate(c.dist, c.n, c.seed, t);
    const auto out = kernel().logsumexp(t, RowBatch::single(x));
    const Mp exact = ref::log_sum_exp(widen(x));
    const auto p = ref::softmax(widen(x));
    const double bound = 0.5 * ref::ulp_at(DType::float32, exact) +
                         2 * kU * (2.5 + (t == DType::bfloat16 ? 2 * mean_abs_gap(x, p) : 0.0));
    const double err = std::abs((Mp(out[0]) - exact).convert_to<double>());
    if (err / bound > worst_ratio) {
      worst_ratio = err / bound;
      worst = where(c, 0);
    }
    EXPECT_LE(err, bound) << where(c, 0);
  }
  std::printf("[accuracy] %s%-28s max error / bound = %.3f (%s)\n", g_target.c_str(), label,
              worst_ratio, worst.c_str());
}
TEST(CpuLogSumExp, Float32) { check_lse(DType::float32, "logsumexp f32"); }
TEST(CpuLogSumExp, Bfloat16) { check_lse(DType::bfloat16, "logsumexp bf16"); }
// float16 rows take the float32 path on the exact widened row: the float32 claim.
TEST(CpuLogSumExp, Float16) { check_lse(DType::float16, "logsumexp f16"); }

// ---------------------------------------------------------------- entropy
// Claim: |H - H_exact| <= 0.5 ulp(H) + 2^-23 (2.5 + 10 H) [+ 2^-23 (2 H + 2 E_p d^2) for bf16].
// Derivation (theory.md T6, H = log S - T/S with T <= 0): every e_i has
// relative error eps' <= 0.75 * 2^-23 (exp) + 3.3 u (rescales) < 2.5 * 2^-23;
// T's terms e_i d_i add 2u (product and d rounded to float) and the float
// partial sums of T (<= 16 terms per lane before the double flush) add 16 u;
// all terms of T have one sign, so rel(T) <= eps' + 5 * 2^-23 and
// |d(T/S)| <= |T/S| (2 eps' + 5 * 2^-23); |d log S| <= eps'; and
// |T/S| = E_p[m - l] <= H because log S >= 0.
// bfloat16 rows' inexact d (above) add 2u|d_i| to e_i and to the T terms.
void check_entropy(DType t, double theta, const char* label) {
  double worst_ratio = 0;
  std::string worst;
  for (const Case& c : cases()) {
    const auto x = generate(c.dist, c.n, c.seed, t);
    std::vector<sa_entropy_state> states;
    const auto H = kernel().entropy(t, RowBatch::single(x), theta, &states);
    const Mp exact = ref::entropy(widen(x), theta);
    const double He = exact.convert_to<double>();
    std::vector<float> xs(x);
    for (float& v : xs) v = static_cast<float>(v / theta);  // for the gap estimates only
    const auto p = ref::softmax(widen(x), theta);
    double bound = 0.5 * ref::ulp_at(DType::float32, exact) + 2 * kU * (2.5 + 10 * He);
    if (t == DType::bfloat16) bound += 2 * kU * (2 * He + 2 * mean_sq_gap(xs, p));
    const double err = std::abs(H[0] - He);
    if (err / bound > worst_ratio) {
      worst_ratio = err / bound;
      worst = where(c, 0) + " H=" + std::to_string(He);
    }
    EXPECT_LE(err, bound) << where(c, 0) << " H=" << H[0] << " exact=" << He;
    // The state is consistent with the entropy and the row's log-sum-exp.
    const auto& s = states[0];
    EXPECT_NEAR(std::log(static_cast<double>(s.S)) - s.T / static_cast<double>(s.S), He,
                bound + 4 * kU * (1 + He))
        << where(c, 0);
    EXPECT_LE(s.T, 0.0f) << "T <= 0 when m is the row max (theory.md T6) " << where(c, 0);
  }
  std::printf("[accuracy] %s%-28s max error / bound = %.3f (%s)\n", g_target.c_str(), label,
              worst_ratio, worst.c_str());
}
TEST(CpuEntropy, Float32) { check_entropy(DType::float32, 1.0, "entropy f32"); }
TEST(CpuEntropy, Float32Temperature) {
  check_entropy(DType::float32, 2.5, "entropy f32 theta=2.5");
}
TEST(CpuEntropy, Bfloat16) { check_entropy(DType::bfloat16, 1.0, "entropy bf16"); }
TEST(CpuEntropy, Float16) { check_entropy(DType::float16, 1.0, "entropy f16"); }

// Shift invariance (theory.md T6): H(l + 1e4) equals H(l) within the bound;
// the tempting H = lse - E[l] form cancels catastrophically here.
TEST(CpuEntropy, ShiftInvariantAtLargeOffsets) {
  for (std::int64_t n : {17, 1000}) {
    auto x = generate(Dist::normal, n, 5, false);
    const double He = ref::entropy(widen(x)).convert_to<double>();
    for (float c : {1e4f, -1e4f}) {
      auto y = x;
      for (float& v : y) v += c;  // rounded in float: compare with the exact entropy of y
      const double Hy = ref::entropy(widen(y)).convert_to<double>();
      const float H = kernel().entropy(DType::float32, RowBatch::single(y))[0];
      EXPECT_NEAR(H, Hy, 0.5 * ref::ulp_at(DType::float32, Mp(Hy)) + 2 * kU * (2.5 + 10 * Hy));
      (void)He;
    }
  }
}

// ---------------------------------------------------------------- adaptive softmax
// Claims (theory.md T5 with Shannon H, the kernel's adaptive_entropy):
// 1. H within the entropy bound above;
// 2. beta within |poly'(H)| * bound(H) + 0.5 ulp(beta) of beta(H_exact): beta is
//    continuous (poly(0.5) < 1) and Lipschitz with constant |poly'| where > 1;
// 3. the weights are softmax(beta_k * l / theta) for the kernel's own (float)
//    beta_k within 2 ulp (float32) / the bf16 softmax rule, because the kernel
//    rounds beta to float first and uses exactly that value.
double poly_slope(double H) {
  return std::abs(-4 * 0.037 * H * H * H + 3 * 0.481 * H * H - 2 * 2.3 * H + 4.917);
}
void check_adaptive(DType t, const char* label) {
  UlpStats st;
  EXPECT_EQ(kernel().adaptive_entropy(), SA_ENTROPY_SHANNON);
  for (const Case& c : cases()) {
    auto x = generate(c.dist, c.n, c.seed, t);
    if (c.dist == Dist::normal && c.n >= 100)  // also rows whose H lands where beta > 1
      for (float& v : x) v = in_dtype(t, v * 0.2f);
    const auto r = kernel().adaptive_softmax(t, RowBatch::single(x));
    const auto a = ref::adaptive_softmax(widen(x), 1.0, ref::EntropyDefinition::shannon);
    const double He = a.entropy.convert_to<double>();
    const double Hbound =
        0.5 * ref::ulp_at(DType::float32, a.entropy) + 2 * kU * (2.5 + 10 * He) +
        (t == DType::bfloat16 ? 2 * kU * (2 * He + 2 * mean_sq_gap(x, ref::softmax(widen(x)))) : 0);
    EXPECT_NEAR(r.entropy[0], He, Hbound) << where(c, 0);
    const double be = a.beta.convert_to<double>();
    const double bbound =
        (poly_slope(He) + 0.01) * Hbound + 0.5 * ref::ulp_at(DType::float32, a.beta);
    EXPECT_NEAR(r.beta[0], be, bbound) << where(c, 0) << " H=" << He;
    std::vector<double> scaled(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      scaled[i] = static_cast<double>(x[i]) * static_cast<double>(r.beta[0]);  // exact
    const auto p = ref::softmax(scaled);
    for (std::int64_t i = 0; i < c.n; ++i) st.add(t, r.weights[i], p[i], where(c, i));
  }
  report(label, st);
  if (t == DType::float32) {
    EXPECT_LE(st.max_apart, 2) << st.worst;
  } else {
    check_low_precision_claim(t, st);
  }
}
TEST(CpuAdaptive, Float32) { check_adaptive(DType::float32, "adaptive f32 (at own beta)"); }
TEST(CpuAdaptive, Bfloat16) { check_adaptive(DType::bfloat16, "adaptive bf16 (at own beta)"); }
TEST(CpuAdaptive, Float16) { check_adaptive(DType::float16, "adaptive f16 (at own beta)"); }

// ---------------------------------------------------------------- RapidCheck properties
// Random rows (size 1..300, offset in +-1e4, scale up to 40) with shrinking:
// float32 softmax within 2 ulp of correctly rounded (bound derived above).
RC_GTEST_PROP(CpuSoftmaxProperty, Float32WithinTwoUlp, ()) {
  const auto n = *rc::gen::inRange<std::int64_t>(1, 300);
  const auto offset = *rc::gen::inRange(-10000, 10000);
  const auto scale = *rc::gen::inRange(1, 40);
  const auto seed = *rc::gen::arbitrary<std::uint32_t>();
  auto x = generate(Dist::normal, n, seed, false);
  for (float& v : x) v = static_cast<float>(offset) + static_cast<float>(scale) * v;
  const auto out = kernel().softmax(DType::float32, RowBatch::single(x));
  const auto ref = ref::softmax(widen(x));
  for (std::int64_t i = 0; i < n; ++i) {
    const double cr = ref::round_to(DType::float32, ref[i]);
    RC_ASSERT(ref::ulps_apart(DType::float32, out[i], cr) <= 2);
  }
}

// bfloat16 softmax: every weight within one bf16 ulp of correctly rounded.
RC_GTEST_PROP(CpuSoftmaxProperty, Bfloat16WithinOneUlp, ()) {
  const auto n = *rc::gen::inRange<std::int64_t>(1, 300);
  const auto offset = *rc::gen::inRange(-10000, 10000);
  const auto seed = *rc::gen::arbitrary<std::uint32_t>();
  auto x = generate(Dist::normal, n, seed, false);
  for (float& v : x) v = round_to_bf16(static_cast<float>(offset) + 4.0f * v);
  const auto out = kernel().softmax(DType::bfloat16, RowBatch::single(x));
  const auto ref = ref::softmax(widen(x));
  for (std::int64_t i = 0; i < n; ++i) {
    const double cr = ref::round_to(DType::bfloat16, ref[i]);
    RC_ASSERT(ref::ulps_apart(DType::bfloat16, out[i], cr) <= 1);
  }
}

// Entropy within the derived bound on random rows with arbitrary offsets.
RC_GTEST_PROP(CpuEntropyProperty, Float32WithinBound, ()) {
  const auto n = *rc::gen::inRange<std::int64_t>(1, 300);
  const auto offset = *rc::gen::inRange(-10000, 10000);
  const auto scale = *rc::gen::inRange(0, 30);
  const auto seed = *rc::gen::arbitrary<std::uint32_t>();
  auto x = generate(Dist::normal, n, seed, false);
  for (float& v : x) v = static_cast<float>(offset) + static_cast<float>(scale) * v;
  const float H = kernel().entropy(DType::float32, RowBatch::single(x))[0];
  const Mp exact = ref::entropy(widen(x));
  const double He = exact.convert_to<double>();
  RC_ASSERT(std::abs(H - He) <=
            0.5 * ref::ulp_at(DType::float32, exact) + 2 * kU * (2.5 + 10 * He));
}

// ---------------------------------------------------------------- x - max split
// float32 rows form x - max exactly as hi + lo (TwoSum, or Fast2Sum where the
// row's range allows it: KnownMinimumChangesNoBit); a lost lo shows up as the
// ~17 ulp floor of a rounded x - max. Rows whose differences are mostly
// inexact, of three shapes (all negative over several binades: Fast2Sum with
// x first; a positive max with the min in its binade: with -max first; a min
// past it: TwoSum), are held to the 2 ulp claim.
TEST(CpuSoftmax, ExactSplitOfXMinusMax) {
  struct Row {
    const char* what;
    float lo, hi;
  };
  for (const Row& r :
       {Row{"all negative", -60.0f, -0.75f}, Row{"|min| in max's binade", -7.9f, 7.5f},
        Row{"min past max's binade", -40.0f, 5.0f}}) {
    UlpStats st;
    for (std::int64_t n : {33, 1000, 4097}) {
      std::mt19937_64 rng(static_cast<std::uint64_t>(n));
      std::uniform_real_distribution<float> ud(r.lo, r.hi);
      std::vector<float> x(static_cast<std::size_t>(n));
      for (float& v : x) v = ud(rng);
      x[0] = r.lo;  // the row's range is exactly [lo, hi]
      x[1] = r.hi;
      const auto out = kernel().softmax(DType::float32, RowBatch::single(x));
      const auto ref = ref::softmax(widen(x));
      for (std::int64_t i = 0; i < n; ++i)
        st.add(DType::float32, out[i], ref[i], std::string(r.what) + " n=" + std::to_string(n));
    }
    report((std::string("softmax f32 ") + r.what).c_str(), st);
    EXPECT_LE(st.max_apart, 2) << st.worst;
  }
}

// ---------------------------------------------------------------- every target
// The kernel is compiled for AVX-512, AVX2 and Highway's portable 128-bit
// target (kernels/cpu/CMakeLists.txt) and runs the best one the CPU has, so
// the others' code (AVX2's 16-entry exp table, the polynomial exp without a
// table) would go unchecked on this machine. Each one the CPU supports is
// forced in turn (Highway's target mock) and held to the claims above;
// unsupported ones are reported as skipped.
// float16 rows' conversions (row_widen_f16 / row_narrow_f16, Highway) give
// the same bits as core/float16.hpp (itself checked against MPFR on every
// encoding and midpoint): every one of the 65,536 encodings widened, and
// narrowed back; every float16 value, midpoint and their float32 neighbours
// narrowed (both signs, subnormals, the overflow tie at 65520); random float32
// bit patterns. Odd lengths exercise the vector tails.
void check_f16_conversions() {
  std::vector<std::uint16_t> all(65536);
  for (std::uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<std::uint16_t>(i);
  std::vector<float> wide(all.size());
  sa::kernels::cpu::row_widen_f16(all.data(), wide.data(), 65535);  // the tail path too
  sa::kernels::cpu::row_widen_f16(all.data() + 65535, wide.data() + 65535, 1);
  for (std::uint32_t i = 0; i < 65536; ++i) {
    const float want = sa::float_from_f16(all[i]);
    ASSERT_EQ(float_bits(wide[i]), float_bits(want)) << g_target << "widen 0x" << std::hex << i;
  }
  std::vector<float> xs;
  for (std::uint32_t i = 0; i < 0x7c00; ++i) {
    const float v = sa::float_from_f16(static_cast<std::uint16_t>(i));
    const float next =
        i + 1 < 0x7c00 ? sa::float_from_f16(static_cast<std::uint16_t>(i + 1)) : 65536.0f;
    const float mid = static_cast<float>((double(v) + next) / 2);
    for (float s : {1.0f, -1.0f})
      for (float x : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf)})
        xs.push_back(s * x);
  }
  for (float x : {kInf, -kInf, kNaN, -kNaN, 1e30f, -1e-30f, 70000.0f, 1e-40f}) xs.push_back(x);
  std::mt19937_64 rng(16);
  for (int i = 0; i < 100001; ++i) xs.push_back(float_from_bits(static_cast<std::uint32_t>(rng())));
  std::vector<std::uint16_t> h(xs.size());
  sa::kernels::cpu::row_narrow_f16(xs.data(), h.data(), static_cast<std::int64_t>(xs.size()));
  for (std::size_t i = 0; i < xs.size(); ++i)
    ASSERT_EQ(h[i], sa::f16_from_float(xs[i]))
        << g_target << "narrow " << std::hexfloat << xs[i] << " (element " << i << ")";
}
TEST(CpuFloat16, VectorConversionsMatchCore) { check_f16_conversions(); }

TEST(CpuTargets, EveryCompiledTargetMeetsTheSameClaims) {
  const std::int64_t supported = hwy::SupportedTargets();
  const std::string best = sa::kernels::cpu::dispatch_target();
  int ran = 0;
  for (std::int64_t t : {std::int64_t{HWY_AVX3}, std::int64_t{HWY_AVX2}, std::int64_t{HWY_EMU128},
                         std::int64_t{HWY_SCALAR}}) {
    const std::string name = hwy::TargetName(t);
    if (!(supported & t)) {
      std::printf("[targets] %s: not supported by this CPU, skipped\n", name.c_str());
      continue;
    }
    if (name == best) continue;  // every test above ran on it
    hwy::SetSupportedTargetsForTest(t);
    if (std::string(sa::kernels::cpu::dispatch_target()) != name) {
      std::printf("[targets] %s: not compiled into the kernel, skipped\n", name.c_str());
      continue;
    }
    g_target = name + ": ";
    check_softmax(DType::float32, 1.0, "softmax f32");
    check_softmax(DType::bfloat16, 1.0, "softmax bf16");
    check_softmax(DType::float16, 1.0, "softmax f16");
    check_f16_conversions();
    check_entropy(DType::float32, 1.0, "entropy f32");
    check_adaptive(DType::float32, "adaptive f32 (at own beta)");
    check_adaptive(DType::bfloat16, "adaptive bf16 (at own beta)");
    ++ran;
  }
  hwy::SetSupportedTargetsForTest(0);
  sa::kernels::cpu::reapply_cpu_isa_limit();  // SA_CPU_MAX_ISA's limit, if one is set
  g_target.clear();
  EXPECT_EQ(std::string(sa::kernels::cpu::dispatch_target()), best);
  // The portable baseline is always compiled in: at least it must have run
  // (zero would mean the target mock did not reach the kernel's dispatch).
  EXPECT_GE(ran, 1) << "no instruction set besides " << best << " could be forced";
  std::printf("[targets] %d target(s) besides %s checked\n", ran, best.c_str());
}

}  // namespace
}  // namespace sa::cputest
