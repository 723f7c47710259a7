// The CPU attention forward (kernels/cpu/attention.cpp, the interface v1
// entry) against the MPFR attention reference (reference/attention.hpp,
// attention_exact, on the single-head case), called through sa::Kernel
// only (Kernel::attention lays the case out as one v1 call).
//
// Claim: for every query row, out, lse, entropy and beta are within the
// a-priori bounds derived below of the exact values for the same (float32 or
// bfloat16-rounded) inputs; fully masked rows, NaN and +inf rows are exactly
// as include/softmax_audit/kernel.h says.
//
// Rounding analysis (u = 2^-24, float32 accumulation; first order in u with a
// margin; gamma_n = n u / (1 - n u), Higham's notation, as in theory.md T7):
//
// 1. Logit. The kernel computes s^ = fl(c fl(q.k)), c = fl(scale * beta^).
//    A length-d float32 dot product with any summation order satisfies
//    |fl(q.k) - q.k| <= gamma_d sum_c |q_c k_c| =: gamma_d A_ij, and each of the
//    two multiplications adds u, so |s^_ij - s_ij| <= |scale| beta A_ij (gamma_d + 3u)
//    =: beta E_i (max over visible j).
// 2. Weights. Each streamed weight e_j = exp(s_j - m) carries relative error
//    rho <= (2 + Delta) u             (Highway Exp <= 1 ulp = 2u; rounding of
//                                      s_j - m_running, amplified by exp: |s - m| u <= Delta u)
//         + R 3u + Delta u           (R rescales exp(m_old - m_new), each: std::exp 2u and
//                                      one multiplication; sum of |m_old - m_new| <= Delta)
//         + (P - 1) 4u (LM + 2)       (split merges: lse_p = fl(m + fl(log S)) is off by
//                                      <= u(|lse_p| + 2 |log S|) <= 2u (LM + 1) in absolute
//                                      terms, which is a relative error of the part's weight
//                                      exp(lse_p - L); two parts per merge)
//    where Delta is the spread of the logits used (beta delta), R = tiles + parts + 1,
//    P = number of parts, LM = beta max|s| + log nk + 1 bounds |lse_p|.
// 3. Softmax-weighted average. out = sum e_j v_j / sum e_j; the denominator is a
//    sum of positive terms along a chain of at most NS = Bk + tiles + parts
//    additions (lanes of one tile, lane reduction, one per tile, one per merge),
//    the numerator a chain of at most NO = keys per part + tiles + parts + 2 FMAs /
//    scalings / merges. With
//    sum_j p_j |v_jc| <= Vmax_c = max over visible keys |v_jc|:
//        |out^ - out| <= Vmax_c [ (exp(2 beta E) - 1) + 2 rho + gamma_NO + gamma_NS + 3u ]
//    (exp(2 beta E) - 1: logit perturbation, since each p_j moves by a factor in
//    [exp(-2 beta E), exp(2 beta E)]; 3u: division, merge rounding, the last scaling.)
//    Adaptive: out and lse are compared with the reference at the kernel's own
//    beta^ (per row, scale * beta^ exact in double), so 1.-4. apply with beta = beta^;
//    beta^ is checked separately against beta(H_ref) (5.). (Folding Dbeta into the
//    out bound via |d out / d beta| <= delta Vmax_c would be valid but ~1e-1 Vmax:
//    too loose to catch anything.)
//    bfloat16 output: + u_bf16 (|out| + the float32 bound), u_bf16 = 2^-8 (RNE).
// 4. lse = m + log S: 1-Lipschitz in the logits (beta E),
//    |log(S^/S)| <= rho + gamma_NS, log and the final addition: 2u log nk + u |lse|.
// 5. Entropy (pass at beta = 1): dH = -sum p_j (ds_j - mean ds)(s_j - s_mean), so
//    logit errors move H by <= 2 E delta; H^ = log S^ - T^/S^ with |T/S| <= delta and
//    T a same-sign sum: <= (rho + gamma_NS)(1 + 2 delta) + 4u delta + 3u log nk + 4u.
//    beta(H) = max(poly(H), 1) is Lipschitz with constant max |poly'| < 3 on
//    (0.5, 6] (|poly'(H)| <= 2.96 there; beta = 1 elsewhere), beta is evaluated in
//    double and rounded to float: Dbeta <= 3 bound_H + 8u beta.
// These worst-case bounds are loose (typical errors are sqrt-n-like, theory.md T7)
// but still sharp enough to fail a wrong kernel: each test also checks that the
// float32 part of the out bound is below 1e-3 Vmax, far below the change caused by
// one wrongly masked key (~ p_j ~ 1/nk) or a missed rescale (O(1)).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/bfloat16.hpp"
#include "core/dtype.hpp"
#include "core/verdict.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/kernel.hpp"
#include "reference/attention.hpp"
#include "reference/mpfr.hpp"

namespace {

constexpr double u32 = 0x1p-24;
constexpr double ubf = 0x1p-8;
constexpr double kInf = std::numeric_limits<double>::infinity();

const sa_kernel* descriptor() {
  static const sa_kernel k = [] {
    sa_kernel d{};
    d.abi_version = SA_KERNEL_ABI_VERSION;
    d.struct_size = sizeof(sa_kernel);
    d.name = "cpu-attention-under-test";
    d.description = "sa::kernels::cpu_attention (tests/cpu_attention)";
    d.ops = SA_OP_ATTENTION | SA_OP_MERGE_ATTENTION_STATES;
    d.dtypes = SA_DTYPE_F32 | SA_DTYPE_BF16;
    d.memory = SA_MEMORY_HOST;
    d.adaptive_entropy = SA_ENTROPY_SHANNON;
    d.ctx = nullptr;
    d.attention = sa::kernels::cpu_attention;
    d.merge_attention_states = sa::kernels::merge_attention_partials;
    d.last_error = [](void*) { return sa::kernels::cpu_attention_last_error(); };
    return d;
  }();
  return &k;
}

const sa::Kernel& kernel() {
  static const sa::Kernel k(descriptor(), "built-in (tests/cpu_attention)");
  return k;
}

double gamma(double n) { return n * u32 / (1.0 - n * u32); }

struct Shape {
  std::int64_t nq = 16, nk = 16, d = 64, dv = 64;
  bool causal = false, adaptive = false;
  std::int64_t num_splits = 0;
  double scale = -1;  // < 0: 1/sqrt(d)
  double qsd = 1.0, ksd = 1.0, vsd = 1.0, vmean = 0.0;
  unsigned seed = 1;
};

float as_type(sa::DType t, double x) {
  const float f = static_cast<float>(x);
  return t == sa::DType::bfloat16 ? sa::round_to_bf16(f) : f;
}

// The inputs of one v1 call, as the tests build them (row-major, contiguous).
struct Input {
  std::int64_t nq = 0, nk = 0, d = 0, dv = 0;
  std::vector<float> q, k, v;
  std::vector<std::uint8_t> key_mask;  // empty or nk entries
  double scale = 1.0;
  bool causal = false, adaptive = false;
  std::int64_t num_splits = 0;
};

// The same problem as one case of the attention case type (one sequence, one head).
sa::AttentionCase case_of(sa::DType t, const Input& in) {
  sa::AttentionCase c;
  c.qkv = c.out_type = t == sa::DType::bfloat16 ? sa::AttnType::bfloat16 : sa::AttnType::float32;
  c.seqlen_q = in.nq, c.seqlen_k = in.nk, c.d = in.d, c.dv = in.dv;
  c.q = in.q, c.k = in.k, c.v = in.v;
  c.key_padding_mask = in.key_mask;
  c.scale = in.scale;
  c.causal = in.causal;
  c.adaptive = in.adaptive;
  c.num_splits = in.num_splits;
  return c;
}

sa::AttentionResult attend(sa::DType t, const Input& in) {
  return kernel().attention(case_of(t, in));
}

Input make_input(sa::DType t, const Shape& s) {
  std::mt19937_64 rng(s.seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  Input in;
  in.nq = s.nq;
  in.nk = s.nk;
  in.d = s.d;
  in.dv = s.dv;
  in.scale = s.scale < 0 ? 1.0 / std::sqrt(static_cast<double>(s.d)) : s.scale;
  in.causal = s.causal;
  in.adaptive = s.adaptive;
  in.num_splits = s.num_splits;
  for (std::int64_t i = 0; i < s.nq * s.d; ++i) in.q.push_back(as_type(t, s.qsd * nd(rng)));
  for (std::int64_t i = 0; i < s.nk * s.d; ++i) in.k.push_back(as_type(t, s.ksd * nd(rng)));
  for (std::int64_t i = 0; i < s.nk * s.dv; ++i)
    in.v.push_back(as_type(t, s.vmean + s.vsd * nd(rng)));
  return in;
}

// The problem in double (the bounds' arithmetic) and its exact reference.
struct Problem {
  std::int64_t nq = 0, nk = 0, d = 0, dv = 0;
  std::vector<double> q, k, v;
  std::vector<std::uint8_t> key_mask;
  double scale = 1.0;
  bool causal = false, adaptive = false;
};

Problem problem_of(const Input& in) {
  Problem p;
  p.nq = in.nq;
  p.nk = in.nk;
  p.d = in.d;
  p.dv = in.dv;
  p.q.assign(in.q.begin(), in.q.end());
  p.k.assign(in.k.begin(), in.k.end());
  p.v.assign(in.v.begin(), in.v.end());
  p.key_mask = in.key_mask;
  p.scale = in.scale;
  p.causal = in.causal;
  p.adaptive = in.adaptive;
  return p;
}

// Query i sees key j: the key mask and bottom-right causal (kernel.h).
bool key_visible(const Problem& p, std::int64_t i, std::int64_t j) {
  return (p.key_mask.empty() || p.key_mask[static_cast<std::size_t>(j)] != 0) &&
         (!p.causal || j <= i + (p.nk - p.nq));
}

// The MPFR reference (values rounded once to double); the inputs are float
// values, so the float32 case holds them exactly.
sa::ref::AttentionValues reference(const Problem& p) {
  sa::AttentionCase c;
  c.seqlen_q = p.nq, c.seqlen_k = p.nk, c.d = p.d, c.dv = p.dv;
  c.q.assign(p.q.begin(), p.q.end());
  c.k.assign(p.k.begin(), p.k.end());
  c.v.assign(p.v.begin(), p.v.end());
  c.key_padding_mask = p.key_mask;
  c.scale = p.scale;
  c.causal = p.causal;
  c.adaptive = p.adaptive;
  return sa::ref::attention_exact(c);
}

// The worst element of one output, by error / bound.
struct Worst {
  double err = 0, bound = 0, ratio = -1;
  std::string where;
  void see(double e, double b, const std::string& w) {
    const double r = std::isnan(e) ? kInf : (b > 0 ? e / b : (e > 0 ? kInf : 0.0));
    if (r > ratio) {
      ratio = r;
      err = std::isnan(e) ? kInf : e;
      bound = b;
      where = w;
    }
  }
};

// Exact-value comparison for special results (NaN, inf, exact 0).
bool same_special(double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want;
}

struct Report {
  std::vector<sa::Verdict> verdicts;
  double max_out_rel_bound = 0;   // float32 part of the out bound / Vmax, worst row
  sa::AttentionResult got;        // the kernel's result
  std::vector<double> out_bound;  // per output element (0 for exact special values)
  bool all_passed() const {
    return std::all_of(verdicts.begin(), verdicts.end(), [](const auto& v) { return v.passed(); });
  }
  std::string text() const {
    std::string s;
    for (const auto& v : verdicts) s += sa::describe(v) + "\n";
    return s;
  }
};

// Runs the kernel and the reference on `in` and compares with the bounds above.
Report check(sa::DType t, const Input& in) {
  const auto got = attend(t, in);
  // 128-bit MPFR: the reference's own relative error (<= 2^-100 for these sizes)
  // is negligible against every bound here (>= 2^-24); faster than the default 256.
  sa::ref::PrecisionScope precision(128);
  const auto p = problem_of(in);
  const auto ref = reference(p);
  const bool bf = t == sa::DType::bfloat16;
  const std::int64_t Bk = sa::kernels::cpu_attention_key_tile;
  const double ntiles = static_cast<double>((in.nk + Bk - 1) / Bk);
  const std::int64_t parts = std::clamp<std::int64_t>(
      in.num_splits, 1, std::min(in.nk, sa::kernels::cpu_attention_max_splits));
  const double keys_per_part = std::ceil(static_cast<double>(in.nk) / static_cast<double>(parts));
  const double R = ntiles + static_cast<double>(parts) + 1;
  const double NS = static_cast<double>(Bk) + ntiles + static_cast<double>(parts);
  const double NO = keys_per_part + ntiles + static_cast<double>(parts) + 2;
  const double lognk = std::log(static_cast<double>(in.nk));

  Worst wo, wl, wh, wb;
  Report rep;
  rep.out_bound.assign(got.out.size(), 0.0);
  for (std::int64_t i = 0; i < in.nq; ++i) {
    const std::string row = "row " + std::to_string(i);
    const double ref_lse = static_cast<double>(ref.lse[i]);
    const double ref_H = static_cast<double>(ref.entropy[i]);
    // v1: beta is 1 without the adaptive temperature, NaN rows included.
    const double ref_beta = in.adaptive ? static_cast<double>(ref.beta[i]) : 1.0;
    // Special rows: exact semantics of the header (the reference has the same).
    if (std::isnan(ref_H) || std::isinf(ref_lse)) {
      wl.see(same_special(got.lse[i], ref_lse) ? 0 : kInf, 0, row + " lse (special)");
      if (std::isinf(ref_lse) && ref_lse > 0) {  // +inf logits: H = log k exactly, rounded once
        wh.see(std::abs(got.entropy[i] - ref_H), 2 * u32 * std::abs(ref_H), row + " H (+inf)");
        wb.see(std::abs(got.beta[i] - ref_beta), 8 * u32 * ref_beta, row + " beta (+inf)");
      } else {
        wh.see(same_special(got.entropy[i], ref_H) ? 0 : kInf, 0, row + " H (special)");
        wb.see(same_special(got.beta[i], ref_beta) ? 0 : kInf, 0, row + " beta (special)");
      }
      for (std::int64_t c = 0; c < in.dv; ++c) {
        const double want = static_cast<double>(ref.out[i * in.dv + c]);
        const double g = got.out[i * in.dv + c];
        if (std::isnan(want) || ref_lse == -kInf) {
          wo.see(same_special(g, want) ? 0 : kInf, 0, row + " out (special)");
        } else {  // mean of the +inf keys' v, accumulated in double, rounded once (or to bf16)
          const double b = (bf ? ubf : 2 * u32) * std::abs(want) + 1e-300;
          rep.out_bound[i * in.dv + c] = b;
          wo.see(std::abs(g - want), b, row + " out (+inf) c=" + std::to_string(c));
        }
      }
      continue;
    }
    // Per-row quantities from the inputs (double precision is ample for bounds).
    double A = 0, smax = 0, smin = kInf, sabs = 0;
    std::vector<double> vmax(static_cast<std::size_t>(in.dv), 0.0);
    for (std::int64_t j = 0; j < in.nk; ++j) {
      if (!key_visible(p, i, j)) continue;
      double a = 0, s = 0;
      for (std::int64_t c = 0; c < in.d; ++c) {
        a += std::abs(p.q[i * in.d + c] * p.k[j * in.d + c]);
        s += p.q[i * in.d + c] * p.k[j * in.d + c];
      }
      s *= in.scale;
      A = std::max(A, a);
      smax = std::max(smax, s);
      smin = std::min(smin, s);
      sabs = std::max(sabs, std::abs(s));
      for (std::int64_t c = 0; c < in.dv; ++c)
        vmax[c] = std::max(vmax[c], std::abs(p.v[j * in.dv + c]));
    }
    const double delta = (smax - smin) * (1 + 1e-12) + 1e-300;
    const double E = std::abs(in.scale) * A * (gamma(static_cast<double>(in.d)) + 3 * u32);
    auto rho = [&](double spread, double beta) {
      const double LM = beta * sabs + lognk + 1;
      return (2 + spread) * u32 + R * 3 * u32 + spread * u32 +
             static_cast<double>(parts - 1) * 4 * u32 * (LM + 2);
    };
    const double rho1 = rho(delta, 1.0);
    const double bH = 2 * E * delta + (rho1 + gamma(NS)) * (1 + 2 * delta) + 4 * u32 * delta +
                      3 * u32 * lognk + 4 * u32;
    const double dbeta = in.adaptive ? 3 * bH + 8 * u32 * ref_beta : 0.0;
    // out and lse: with adaptive temperature they are checked against the
    // reference evaluated at the kernel's own beta^ (row i alone, scale * beta^,
    // visibility as a key mask), so the loose beta bound does not enter them;
    // beta^ itself is checked against beta(H) below.
    std::vector<double> want_out(static_cast<std::size_t>(in.dv));
    double want_lse = ref_lse, bh = 1.0;
    if (in.adaptive && std::isfinite(got.beta[i])) {
      Problem pr;
      pr.nq = 1;
      pr.nk = in.nk;
      pr.d = in.d;
      pr.dv = in.dv;
      pr.q.assign(p.q.begin() + i * in.d, p.q.begin() + (i + 1) * in.d);
      pr.k = p.k;
      pr.v = p.v;
      pr.key_mask.resize(static_cast<std::size_t>(in.nk));
      for (std::int64_t j = 0; j < in.nk; ++j) pr.key_mask[j] = key_visible(p, i, j) ? 1 : 0;
      bh = got.beta[i];
      pr.scale = in.scale * bh;  // exact in double: float beta^ times scale (<= 53 bits)
      const auto rr = reference(pr);
      for (std::int64_t c = 0; c < in.dv; ++c) want_out[c] = static_cast<double>(rr.out[c]);
      want_lse = static_cast<double>(rr.lse[0]);
    } else {
      for (std::int64_t c = 0; c < in.dv; ++c)
        want_out[c] = static_cast<double>(ref.out[i * in.dv + c]);
    }
    const double rho2 = rho(bh * delta, bh);
    const double out_rel = (std::exp(2 * bh * E) - 1) + 2 * rho2 + gamma(NO) + gamma(NS) + 3 * u32;
    rep.max_out_rel_bound = std::max(rep.max_out_rel_bound, out_rel);
    for (std::int64_t c = 0; c < in.dv; ++c) {
      const double want = want_out[c];
      double b = vmax[c] * out_rel;
      if (bf) b += ubf * (std::abs(want) + b);
      rep.out_bound[i * in.dv + c] = b;
      wo.see(std::abs(got.out[i * in.dv + c] - want), b, row + " out c=" + std::to_string(c));
    }
    const double bl = bh * E + rho2 + gamma(NS) + 2 * u32 * lognk + u32 * std::abs(want_lse) + u32 +
                      static_cast<double>(parts - 1) * 2 * u32 * (bh * sabs + lognk + 3);
    wl.see(std::abs(got.lse[i] - want_lse), bl, row + " lse");
    wh.see(std::abs(got.entropy[i] - ref_H), bH, row + " H");
    wb.see(std::abs(got.beta[i] - ref_beta), dbeta, row + " beta");
  }
  const sa::Rule rule{"attention.rounding",
                      "rounding analysis in tests/cpu_attention/attention_test.cpp "
                      "(gamma_d dot product, T7 softmax, T6 streamed entropy)"};
  auto add = [&](const char* prop, const char* what, const Worst& w) {
    auto v = sa::check_at_most(
        prop, std::string(what) + " within its a-priori bound (worst: " + w.where + ")", w.err,
        w.bound, rule);
    v.kernel = kernel().name();
    v.op = "attention";
    v.dtype = sa::name_of(t);
    rep.verdicts.push_back(v);
  };
  add("attention.out", "|out - out_ref|", wo);
  add("attention.lse", "|lse - lse_ref|", wl);
  add("attention.entropy", "|H - H_ref|", wh);
  add("attention.beta", "|beta - beta_ref|", wb);
  rep.got = got;
  return rep;
}

Report expect_ok(sa::DType t, const Input& in) {
  Report r = check(t, in);
  EXPECT_TRUE(r.all_passed()) << r.text();
  // Sharpness: the bound must be able to catch a wrongly masked key (see header).
  EXPECT_LT(r.max_out_rel_bound, 1e-3) << "bound too loose to be informative";
  return r;
}

class CpuAttention : public ::testing::TestWithParam<sa::DType> {};

TEST_P(CpuAttention, SquareNoMaskHeadDim64) {
  Shape s;
  s.nq = 100, s.nk = 100, s.d = 64, s.dv = 64, s.seed = 11;
  expect_ok(GetParam(), make_input(GetParam(), s));
}

TEST_P(CpuAttention, HeadDim128CausalQueriesFewerThanKeys) {
  Shape s;
  s.nq = 37, s.nk = 150, s.d = 128, s.dv = 128, s.causal = true, s.seed = 12;
  expect_ok(GetParam(), make_input(GetParam(), s));
}

TEST_P(CpuAttention, CausalMoreQueriesThanKeysHasFullyMaskedRows) {
  // Bottom-right alignment: query i sees keys j <= i - 20, so queries 0..19 see nothing.
  Shape s;
  s.nq = 90, s.nk = 70, s.d = 32, s.dv = 48, s.causal = true, s.seed = 13;
  const auto in = make_input(GetParam(), s);
  expect_ok(GetParam(), in);
  const auto out = attend(GetParam(), in);
  for (std::int64_t i = 0; i < 20; ++i) {
    EXPECT_EQ(out.lse[i], -std::numeric_limits<float>::infinity()) << "row " << i;
    EXPECT_EQ(out.entropy[i], 0.0f) << "row " << i;
    EXPECT_EQ(out.beta[i], 1.0f) << "row " << i;
    for (std::int64_t c = 0; c < s.dv; ++c) EXPECT_EQ(out.out[i * s.dv + c], 0.0f);
  }
  EXPECT_TRUE(std::isfinite(out.lse[20]));
}

TEST_P(CpuAttention, KeyMaskAlignedWithTile) {
  Shape s;
  s.nq = 20, s.nk = 200, s.d = 64, s.dv = 64, s.seed = 14;
  auto in = make_input(GetParam(), s);
  const std::int64_t Bk = sa::kernels::cpu_attention_key_tile;
  in.key_mask.assign(200, 1);
  for (std::int64_t j = Bk; j < 2 * Bk; ++j) in.key_mask[j] = 0;  // one whole tile masked
  expect_ok(GetParam(), in);
  in.causal = true;
  expect_ok(GetParam(), in);
}

TEST_P(CpuAttention, KeyMaskUnaligned) {
  Shape s;
  s.nq = 33, s.nk = 201, s.d = 40, s.dv = 24, s.seed = 15;
  auto in = make_input(GetParam(), s);
  const std::int64_t Bk = sa::kernels::cpu_attention_key_tile;
  std::mt19937 rng(5);
  in.key_mask.assign(201, 1);
  for (auto& m : in.key_mask) m = (rng() % 10) < 3 ? 0 : 1;
  for (std::int64_t j = Bk - 5; j < Bk + 7; ++j) in.key_mask[j] = 0;  // straddles a tile edge
  expect_ok(GetParam(), in);
  in.num_splits = 3;
  expect_ok(GetParam(), in);
}

TEST_P(CpuAttention, AllKeysMaskedGivesFullyMaskedRows) {
  Shape s;
  s.nq = 5, s.nk = 70, s.d = 16, s.dv = 8, s.seed = 16, s.adaptive = true;
  auto in = make_input(GetParam(), s);
  in.key_mask.assign(70, 0);
  in.num_splits = 4;
  expect_ok(GetParam(), in);
  const auto out = attend(GetParam(), in);
  for (std::int64_t i = 0; i < s.nq; ++i) {
    EXPECT_EQ(out.lse[i], -std::numeric_limits<float>::infinity());
    EXPECT_EQ(out.entropy[i], 0.0f);
    EXPECT_EQ(out.beta[i], 1.0f);
    for (std::int64_t c = 0; c < s.dv; ++c) EXPECT_EQ(out.out[i * s.dv + c], 0.0f);
  }
}

TEST_P(CpuAttention, AdaptiveTemperature) {
  // Logit scale chosen so rows have H in (0.85, 5.9), where beta > 1 (T5).
  for (bool causal : {false, true}) {
    Shape s;
    s.nq = 40, s.nk = 130, s.d = 64, s.dv = 64, s.adaptive = true, s.causal = causal, s.qsd = 2.0,
    s.seed = 17;
    const auto in = make_input(GetParam(), s);
    expect_ok(GetParam(), in);
    const auto out = attend(GetParam(), in);
    int corrected = 0;
    for (float b : out.beta) corrected += b > 1.01f;
    EXPECT_GT(corrected, 10) << "the test must exercise beta > 1";
    // And adaptive off on the same input reports beta 1 with the same entropy.
    auto plain_in = in;
    plain_in.adaptive = false;
    expect_ok(GetParam(), plain_in);
    const auto plain = attend(GetParam(), plain_in);
    for (std::int64_t i = 0; i < s.nq; ++i) {
      EXPECT_EQ(plain.beta[i], 1.0f);
      EXPECT_EQ(plain.entropy[i], out.entropy[i]) << "same pass-1 arithmetic, row " << i;
    }
  }
}

TEST_P(CpuAttention, SplitKvOneToSeven) {
  // Every split count within the bound of the reference, and hence of each other.
  Shape s;
  s.nq = 24, s.nk = 150, s.d = 64, s.dv = 64, s.seed = 18;
  for (bool adaptive : {false, true}) {
    s.adaptive = adaptive;
    s.qsd = adaptive ? 2.0 : 1.0;
    auto in = make_input(GetParam(), s);
    in.key_mask.assign(150, 1);
    for (std::int64_t j = 0; j < 150; j += 7) in.key_mask[j] = 0;
    in.num_splits = 1;
    const Report one = expect_ok(GetParam(), in);
    for (std::int64_t ns = 2; ns <= 7; ++ns) {
      in.num_splits = ns;
      SCOPED_TRACE("num_splits " + std::to_string(ns));
      const Report r = expect_ok(GetParam(), in);
      // Both within their bound of the reference -> within the sum of each other.
      for (std::size_t e = 0; e < r.got.out.size(); ++e)
        EXPECT_LE(std::abs(r.got.out[e] - one.got.out[e]), r.out_bound[e] + one.out_bound[e])
            << "element " << e;
    }
  }
}

TEST_P(CpuAttention, OddSizes) {
  for (auto [nq, nk, d, dv] :
       {std::array<std::int64_t, 4>{19, 77, 33, 17}, std::array<std::int64_t, 4>{1, 1, 1, 1},
        std::array<std::int64_t, 4>{3, 65, 7, 129}, std::array<std::int64_t, 4>{17, 64, 128, 64}}) {
    for (bool causal : {false, true}) {
      Shape s;
      s.nq = nq, s.nk = nk, s.d = d, s.dv = dv, s.causal = causal, s.seed = 19 + nq;
      SCOPED_TRACE("nq nk d dv " + std::to_string(nq) + " " + std::to_string(nk) + " " +
                   std::to_string(d) + " " + std::to_string(dv));
      expect_ok(GetParam(), make_input(GetParam(), s));
    }
  }
}

TEST_P(CpuAttention, LargeLogitsAndOffsetValues) {
  // Peaked rows (spread ~ 50) and v with a large mean: rescaling and cancellation.
  Shape s;
  s.nq = 20, s.nk = 190, s.d = 64, s.dv = 32, s.qsd = 6.0, s.vmean = 100.0, s.seed = 20;
  expect_ok(GetParam(), make_input(GetParam(), s));
}

TEST_P(CpuAttention, RunningMaxNotBlockMax) {
  // Logits ~ +60 in the first key tile and ~ -60 after it: a kernel that
  // rescales against the block max instead of the running max computes
  // exp(m_old - m_block) = exp(120), which overflows float32.
  const std::int64_t Bk = sa::kernels::cpu_attention_key_tile;
  Shape s;
  s.nq = 6, s.nk = 3 * Bk + 5, s.d = 8, s.dv = 16, s.seed = 22, s.scale = 1.0;
  auto in = make_input(GetParam(), s);
  for (std::int64_t i = 0; i < s.nq; ++i)
    for (std::int64_t c = 0; c < s.d; ++c) in.q[i * s.d + c] = c == 0 ? 1.0f : 0.0f;
  for (std::int64_t j = 0; j < s.nk; ++j)
    in.k[j * s.d] =
        as_type(GetParam(), (j < Bk ? 60.0 : -60.0) + 0.01 * static_cast<double>(j % 13));
  for (std::int64_t ns : {1, 2}) {
    in.num_splits = ns;
    expect_ok(GetParam(), in);
  }
  // Reversed: the running max rises by 120 between tiles (old state underflows to 0).
  for (std::int64_t j = 0; j < s.nk; ++j) in.k[j * s.d] = -in.k[j * s.d];
  expect_ok(GetParam(), in);
}

TEST_P(CpuAttention, NanAndInfinityRows) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Shape s;
  s.nq = 8, s.nk = 100, s.d = 16, s.dv = 8, s.causal = true, s.seed = 21;
  auto in = make_input(GetParam(), s);
  // k[:,0] != 0 so that q[i][0] = +inf gives logits +/-inf, never NaN.
  for (std::int64_t j = 0; j < s.nk; ++j)
    if (in.k[j * s.d] == 0.0f) in.k[j * s.d] = 1.0f;
  in.q[1 * s.d + 3] = nan;  // row 1: NaN everywhere
  in.q[2 * s.d + 0] = inf;  // row 2: +inf on keys with k[j][0] > 0
  in.key_mask.assign(100, 1);
  in.key_mask[10] = 0;  // masked key with NaN k and inf v: must not leak
  in.k[10 * s.d + 5] = nan;
  in.v[10 * s.dv + 2] = inf;
  in.k[99 * s.d + 1] = nan;  // last key: visible only to the last query (causal)
  for (bool adaptive : {false, true}) {
    in.adaptive = adaptive;
    for (std::int64_t ns : {1, 3}) {
      in.num_splits = ns;
      SCOPED_TRACE("adaptive " + std::to_string(adaptive) + " splits " + std::to_string(ns));
      expect_ok(GetParam(), in);
      const auto out = attend(GetParam(), in);
      EXPECT_TRUE(std::isnan(out.lse[1]) && std::isnan(out.entropy[1]) &&
                  std::isnan(out.out[s.dv]));
      if (adaptive)
        EXPECT_TRUE(std::isnan(out.beta[1]));
      else
        EXPECT_EQ(out.beta[1], 1.0f);
      EXPECT_EQ(out.lse[2], inf);
      EXPECT_TRUE(std::isnan(out.lse[7])) << "the last query sees the NaN key";
      EXPECT_TRUE(std::isfinite(out.lse[6]));
      for (std::int64_t c = 0; c < s.dv; ++c) EXPECT_TRUE(std::isfinite(out.out[6 * s.dv + c]));
    }
  }
}

// The same representative cases with every query-block size the kernel can
// choose (the automatic choice depends on the thread count and nq).
TEST_P(CpuAttention, EveryQueryBlockSize) {
  struct Restore {
    ~Restore() { sa::kernels::cpu_attention_set_query_block(0); }
  } restore;
  EXPECT_FALSE(sa::kernels::cpu_attention_set_query_block(6));
  EXPECT_FALSE(
      sa::kernels::cpu_attention_set_query_block(sa::kernels::cpu_attention_query_block + 4));
  for (std::int64_t bq : {std::int64_t{4}, sa::kernels::cpu_attention_small_query_block,
                          sa::kernels::cpu_attention_query_block}) {
    ASSERT_TRUE(sa::kernels::cpu_attention_set_query_block(bq));
    SCOPED_TRACE("query block " + std::to_string(bq));
    Shape s;
    s.nq = 90, s.nk = 150, s.d = 64, s.dv = 64, s.causal = true, s.seed = 23;
    auto in = make_input(GetParam(), s);
    expect_ok(GetParam(), in);
    in.causal = false;
    in.num_splits = 3;
    in.key_mask.assign(150, 1);
    for (std::int64_t j = 0; j < 150; j += 5) in.key_mask[j] = 0;
    expect_ok(GetParam(), in);
    s.nq = 70, s.nk = 40, s.adaptive = true, s.qsd = 2.0, s.seed = 24;  // nq > nk, causal, adaptive
    expect_ok(GetParam(), make_input(GetParam(), s));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CpuAttention,
                         ::testing::Values(sa::DType::float32, sa::DType::bfloat16),
                         [](const auto& info) { return std::string(sa::name_of(info.param)); });

// Property: random small problems (sizes, masks, causal, adaptive, splits) all
// within the bounds above, for both types.
RC_GTEST_PROP(CpuAttentionProperty, RandomProblemsWithinBounds, ()) {
  Shape s;
  s.nq = *rc::gen::inRange<std::int64_t>(1, 48);
  s.nk = *rc::gen::inRange<std::int64_t>(1, 140);
  s.d = *rc::gen::inRange<std::int64_t>(1, 40);
  s.dv = *rc::gen::inRange<std::int64_t>(1, 40);
  s.causal = *rc::gen::arbitrary<bool>();
  s.adaptive = *rc::gen::arbitrary<bool>();
  s.num_splits = *rc::gen::inRange<std::int64_t>(0, 8);
  s.qsd = *rc::gen::element(0.5, 1.0, 2.0, 4.0);
  s.seed = *rc::gen::arbitrary<unsigned>();
  const bool bf = *rc::gen::arbitrary<bool>();
  const sa::DType t = bf ? sa::DType::bfloat16 : sa::DType::float32;
  auto in = make_input(t, s);
  const int mask_kind = *rc::gen::inRange(0, 3);
  if (mask_kind > 0) {
    std::mt19937 rng(s.seed);
    in.key_mask.assign(static_cast<std::size_t>(s.nk), 1);
    for (auto& m : in.key_mask)
      m = static_cast<std::uint8_t>((rng() % 4) != 0 || mask_kind == 2 ? 1 : 0);
    if (mask_kind == 2)  // a masked run across a tile boundary
      for (std::int64_t j = 60; j < std::min<std::int64_t>(s.nk, 70); ++j) in.key_mask[j] = 0;
  }
  const std::int64_t bq = *rc::gen::element<std::int64_t>(0, 4, 16, 64);
  sa::kernels::cpu_attention_set_query_block(bq);
  const Report r = check(t, in);
  sa::kernels::cpu_attention_set_query_block(0);
  RC_ASSERT(r.all_passed());
  RC_ASSERT(r.max_out_rel_bound < 1e-3);
}

// merge_attention_states through the handle: log-sum-exp merge and identities.
TEST(CpuAttentionMerge, MatchesDoubleMergeAndIdentities) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const std::int64_t rows = 4, dv = 3;
  std::vector<float> oa = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 1, 1};
  std::vector<float> ob = {-1, 0, 1, 2, 2, 2, 0.5f, 0.25f, 0.125f, 3, 3, 3};
  std::vector<float> la = {0.5f, ninf, 3.0f, ninf};
  std::vector<float> lb = {-1.25f, 2.0f, ninf, ninf};
  std::vector<float> lse;
  const auto out = kernel().merge_attention_states(rows, dv, oa, la, ob, lb, &lse);
  // Row 0: both finite. Exact merge in double, then one rounding to float:
  // the kernel computes in double and rounds once, so <= u |x| + a few double ulps.
  const double L = std::log(std::exp(0.5) + std::exp(-1.25));
  EXPECT_NEAR(lse[0], L, 2 * u32 * std::abs(L));
  for (int c = 0; c < 3; ++c) {
    const double want = std::exp(0.5 - L) * oa[c] + std::exp(-1.25 - L) * ob[c];
    EXPECT_NEAR(out[c], want, 2 * u32 * std::abs(want) + 1e-12);
  }
  // Row 1: a is the identity -> b exactly; row 2: b identity -> a exactly.
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(out[3 + c], ob[3 + c]);
    EXPECT_EQ(out[6 + c], oa[6 + c]);
  }
  EXPECT_EQ(lse[1], 2.0f);
  EXPECT_EQ(lse[2], 3.0f);
  // Row 3: both empty -> 0 and -inf.
  EXPECT_EQ(lse[3], ninf);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(out[9 + c], 0.0f);
}

// Bad input: SA_INVALID_ARGUMENT / SA_UNSUPPORTED with a message naming the field.
TEST(CpuAttentionErrors, NamesTheField) {
  Shape s;
  s.nq = 4, s.nk = 4, s.d = 8, s.dv = 8;
  auto in = make_input(sa::DType::float32, s);
  in.num_splits = -2;
  try {
    (void)attend(sa::DType::float32, in);
    ADD_FAILURE() << "negative num_splits accepted";
  } catch (const sa::KernelError& e) {
    EXPECT_EQ(e.status, SA_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("num_splits"), std::string::npos) << e.what();
  }
  // Fields sa::Kernel always fills correctly, exercised through its raw descriptor.
  const sa_kernel& raw = kernel().raw();
  std::vector<float> out(32), q(32, 0.0f);
  sa_attention_args a{};
  a.dtype = SA_F32;
  a.nq = a.nk = 4;
  a.d = a.dv = 8;
  a.q = a.k = a.v = q.data();
  a.out = out.data();
  a.q_stride = a.k_stride = a.v_stride = a.out_stride = 8;
  a.scale = 1.0;
  auto expect_error = [&](sa_attention_args b, sa_status want, const char* field) {
    EXPECT_EQ(raw.attention(raw.ctx, &b), want) << field;
    const char* msg = raw.last_error(raw.ctx);
    ASSERT_NE(msg, nullptr);
    EXPECT_NE(std::string(msg).find(field), std::string::npos) << msg;
  };
  auto b = a;
  b.scale = std::numeric_limits<double>::infinity();  // (a case refuses it before any call)
  expect_error(b, SA_INVALID_ARGUMENT, "scale");
  b = a;
  b.nq = 0;
  expect_error(b, SA_INVALID_ARGUMENT, "nq");
  b = a;
  b.k_stride = 7;
  expect_error(b, SA_INVALID_ARGUMENT, "k_stride");
  b = a;
  b.v = nullptr;
  expect_error(b, SA_INVALID_ARGUMENT, "v is NULL");
  b = a;
  const int seven = 7;  // as a C caller could store it (a C++ cast would be UB)
  static_assert(sizeof(b.dtype) == sizeof seven);
  std::memcpy(&b.dtype, &seven, sizeof seven);
  expect_error(b, SA_UNSUPPORTED, "dtype");
  EXPECT_EQ(raw.attention(raw.ctx, nullptr), SA_INVALID_ARGUMENT);
  EXPECT_EQ(raw.attention(raw.ctx, &a), SA_OK);
}

}  // namespace
