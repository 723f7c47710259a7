// Exact semantics of the "cpu" kernel (include/softmax_audit/kernel.h):
// special values, n = 1, argument errors with their text, strides, in place,
// threads vs one row, and the two merge operations.
//
// Every expectation here is exact (EXPECT_EQ / bit-for-bit) unless a bound
// is stated: these are conventions, not rounding questions.
#include <gtest/gtest.h>

#include <cstring>

#include "cpu_test_support.hpp"
#include "theory/adaptive_temperature.hpp"
#include "theory/streamed_entropy.hpp"

namespace sa::cputest {
namespace {

const sa_kernel& raw() { return *sa::kernels::cpu_kernel(); }
std::string last_error() {
  const char* e = raw().last_error(raw().ctx);
  return e ? e : "";
}

constexpr DType kTypes[] = {DType::float32, DType::bfloat16, DType::float16};

// Rows of length n with the special values placed at `at` (others N(0,1) or -inf).
std::vector<float> row_with(std::int64_t n, float fill_special, std::vector<std::int64_t> at,
                            bool others_masked = false) {
  auto x = generate(Dist::normal, n, 77, true);
  for (float& v : x) v = round_to_f16(v);  // bfloat16 and float16 values both
  if (others_masked)
    for (float& v : x) v = -kInf;
  for (auto i : at) x[static_cast<std::size_t>(i)] = fill_special;
  return x;
}

TEST(CpuSemantics, DescriptorAdvertisesEveryOp) {
  const Kernel& k = kernel();
  EXPECT_EQ(k.name(), "cpu");
  for (Op op : sa::all_ops) EXPECT_TRUE(k.supports(op)) << name_of(op);
  EXPECT_TRUE(k.supports(DType::float32));
  EXPECT_TRUE(k.supports(DType::bfloat16));
  EXPECT_TRUE(k.supports(DType::float16));
  EXPECT_EQ(k.adaptive_entropy(), SA_ENTROPY_SHANNON);
}

// Fully masked rows: weights 0, log-weights -inf, lse -inf, H 0, beta 1,
// state the identity (-inf, 0, 0). Sizes cover the vector tail and body.
TEST(CpuSemantics, FullyMaskedRow) {
  for (DType t : kTypes)
    for (std::int64_t n : {1, 5, 16, 17, 100}) {
      const RowBatch b = RowBatch::single(std::vector<float>(static_cast<std::size_t>(n), -kInf));
      for (float v : kernel().softmax(t, b)) EXPECT_EQ(v, 0.0f);
      for (float v : kernel().log_softmax(t, b)) EXPECT_EQ(v, -kInf);
      EXPECT_EQ(kernel().logsumexp(t, b)[0], -kInf);
      std::vector<sa_entropy_state> st;
      EXPECT_EQ(kernel().entropy(t, b, 1.0, &st)[0], 0.0f);
      EXPECT_EQ(st[0].m, -kInf);
      EXPECT_EQ(st[0].S, 0.0f);
      EXPECT_EQ(st[0].T, 0.0f);
      const auto a = kernel().adaptive_softmax(t, b);
      EXPECT_EQ(a.beta[0], 1.0f);
      EXPECT_EQ(a.entropy[0], 0.0f);
      for (float v : a.weights) EXPECT_EQ(v, 0.0f);
    }
}

// +inf logits: the k items at +inf share 1/k, others 0; log-weights -log k
// and -inf; lse +inf; H = log k; state (+inf, k, 0); adaptive beta = beta(log k).
TEST(CpuSemantics, PositiveInfinityShares) {
  for (DType t : kTypes)
    for (std::int64_t n : {1, 7, 33, 300})
      for (std::int64_t k : {1, 3}) {
        if (k > n) continue;
        std::vector<std::int64_t> at;
        for (std::int64_t j = 0; j < k; ++j) at.push_back((j * 13 + n - 1) % n);
        auto x = row_with(n, kInf, at);
        if (n > 5) x[2] = -kInf;  // a mask among them changes nothing
        const RowBatch b = RowBatch::single(x);
        const float w = in_dtype(t, static_cast<float>(1.0 / static_cast<double>(k)));
        const auto p = kernel().softmax(t, b);
        const auto lp = kernel().log_softmax(t, b);
        const float lw = in_dtype(t, static_cast<float>(-std::log(double(k))));
        for (std::int64_t i = 0; i < n; ++i) {
          const bool inf = x[i] == kInf;
          EXPECT_EQ(p[i], inf ? w : 0.0f) << "n=" << n << " k=" << k << " i=" << i;
          EXPECT_EQ(lp[i], inf ? lw : -kInf) << "n=" << n << " k=" << k << " i=" << i;
        }
        EXPECT_EQ(kernel().logsumexp(t, b)[0], kInf);
        std::vector<sa_entropy_state> st;
        const float H = kernel().entropy(t, b, 1.0, &st)[0];
        EXPECT_EQ(H, static_cast<float>(std::log(double(k))));
        EXPECT_EQ(st[0].m, kInf);
        EXPECT_EQ(st[0].S, static_cast<float>(k));
        EXPECT_EQ(st[0].T, 0.0f);
        const auto a = kernel().adaptive_softmax(t, b);
        EXPECT_EQ(a.entropy[0], H);
        EXPECT_EQ(a.beta[0],
                  static_cast<float>(theory::adaptive_beta<double>(std::log(double(k)))));
        for (std::int64_t i = 0; i < n; ++i) EXPECT_EQ(a.weights[i], x[i] == kInf ? w : 0.0f);
      }
}

// NaN anywhere (first, in the body, in the tail, beside +inf, in a masked
// row): every output of the row is NaN, the state too.
TEST(CpuSemantics, NaNPoisonsTheRow) {
  for (DType t : kTypes)
    for (std::int64_t n : {1, 16, 37, 1000})
      for (std::int64_t pos : {std::int64_t{0}, n / 2, n - 1}) {
        for (int variant = 0; variant < 3; ++variant) {
          auto x = row_with(n, kNaN, {pos}, variant == 2);
          if (variant == 1 && n > 1) x[(pos + 1) % n] = kInf;
          if (variant == 2) x[pos] = kNaN;
          const RowBatch b = RowBatch::single(x);
          const std::string where = "n=" + std::to_string(n) + " pos=" + std::to_string(pos) +
                                    " variant=" + std::to_string(variant);
          for (float v : kernel().softmax(t, b)) EXPECT_TRUE(std::isnan(v)) << where;
          for (float v : kernel().log_softmax(t, b)) EXPECT_TRUE(std::isnan(v)) << where;
          EXPECT_TRUE(std::isnan(kernel().logsumexp(t, b)[0])) << where;
          std::vector<sa_entropy_state> st;
          EXPECT_TRUE(std::isnan(kernel().entropy(t, b, 1.0, &st)[0])) << where;
          EXPECT_TRUE(std::isnan(st[0].m) && std::isnan(st[0].S) && std::isnan(st[0].T)) << where;
          const auto a = kernel().adaptive_softmax(t, b);
          EXPECT_TRUE(std::isnan(a.beta[0]) && std::isnan(a.entropy[0])) << where;
          for (float v : a.weights) EXPECT_TRUE(std::isnan(v)) << where;
        }
      }
}

// n = 1: weight exactly 1, log-weight 0, lse = x / theta, H = 0, beta 1.
TEST(CpuSemantics, SingleLogit) {
  for (DType t : kTypes)
    for (float v0 : {0.0f, -3.5f, 1e4f, -1e30f}) {
      const float v = in_dtype(t, v0);
      if (!std::isfinite(v)) continue;  // -1e30 is -inf in float16: a masked row, not n = 1
      const RowBatch b = RowBatch::single({v});
      EXPECT_EQ(kernel().softmax(t, b)[0], 1.0f);
      EXPECT_EQ(kernel().log_softmax(t, b)[0], 0.0f);
      EXPECT_EQ(kernel().logsumexp(t, b)[0], v);
      EXPECT_EQ(kernel().entropy(t, b)[0], 0.0f);
      const auto a = kernel().adaptive_softmax(t, b);
      EXPECT_EQ(a.beta[0], 1.0f);
      EXPECT_EQ(a.weights[0], 1.0f);
    }
}

// A -inf among finite logits gets weight exactly 0 and log-weight -inf.
TEST(CpuSemantics, MaskedLogitsAreExactlyZero) {
  for (DType t : kTypes) {
    auto x = generate(Dist::masked, 333, 3, t);
    const auto p = kernel().softmax(t, RowBatch::single(x));
    const auto lp = kernel().log_softmax(t, RowBatch::single(x));
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i] == -kInf) {
        EXPECT_EQ(p[i], 0.0f);
        EXPECT_EQ(lp[i], -kInf);
      } else {
        EXPECT_GT(p[i], 0.0f);
      }
  }
}

// ---------------------------------------------------------------- argument errors
sa_rows shape(std::int64_t rows, std::int64_t n, std::int64_t is, std::int64_t os, double th = 1) {
  return sa_rows{rows, n, is, os, th};
}

TEST(CpuSemantics, InvalidArgumentsAreReportedWithText) {
  std::vector<float> in(64, 0.0f), out(64, 0.0f);
  float lse[4];
  auto expect = [&](sa_status got, sa_status want, const char* needle) {
    EXPECT_EQ(got, want);
    EXPECT_NE(last_error().find(needle), std::string::npos) << last_error();
  };
  sa_rows s = shape(1, 0, 0, 0);
  expect(raw().softmax(raw().ctx, SA_F32, &s, in.data(), out.data()), SA_INVALID_ARGUMENT, "n = 0");
  expect(raw().logsumexp(raw().ctx, SA_BF16, &s, in.data(), lse), SA_INVALID_ARGUMENT, "n = 0");
  s = shape(0, 0, 0, 0);  // n = 0 is invalid even with no rows
  expect(raw().entropy(raw().ctx, SA_F32, &s, in.data(), lse, nullptr), SA_INVALID_ARGUMENT,
         "n = 0");
  s = shape(-1, 4, 4, 4);
  expect(raw().softmax(raw().ctx, SA_F32, &s, in.data(), out.data()), SA_INVALID_ARGUMENT,
         "rows = -1");
  s = shape(2, 8, 4, 8);
  expect(raw().softmax(raw().ctx, SA_F32, &s, in.data(), out.data()), SA_INVALID_ARGUMENT,
         "in_stride");
  s = shape(2, 8, 8, 7);
  expect(raw().log_softmax(raw().ctx, SA_F32, &s, in.data(), out.data()), SA_INVALID_ARGUMENT,
         "out_stride");
  for (double th : {0.0, -1.0, double(NAN), double(INFINITY)}) {
    s = shape(1, 4, 4, 4, th);
    expect(raw().adaptive_softmax(raw().ctx, SA_F32, &s, in.data(), out.data(), nullptr, nullptr),
           SA_INVALID_ARGUMENT, "temperature");
  }
  s = shape(1, 4, 4, 4);
  expect(raw().softmax(raw().ctx, static_cast<sa_dtype>(7), &s, in.data(), out.data()),
         SA_UNSUPPORTED, "dtype 7");
  expect(raw().softmax(raw().ctx, SA_F32, &s, nullptr, out.data()), SA_INVALID_ARGUMENT,
         "input pointer");
  expect(raw().softmax(raw().ctx, SA_F32, nullptr, in.data(), out.data()), SA_INVALID_ARGUMENT,
         "shape");
  s = shape(2, 8, 8, 8);  // partially overlapping in/out
  expect(raw().softmax(raw().ctx, SA_F32, &s, in.data(), in.data() + 3), SA_INVALID_ARGUMENT,
         "overlap");
  expect(raw().merge_entropy_states(raw().ctx, -2, nullptr, nullptr, nullptr), SA_INVALID_ARGUMENT,
         "count = -2");
  expect(raw().merge_attention_states(raw().ctx, 1, 0, in.data(), lse, in.data(), lse, out.data(),
                                      lse),
         SA_INVALID_ARGUMENT, "dv = 0");
  // A good call after an error clears the message.
  s = shape(1, 4, 4, 4);
  EXPECT_EQ(raw().softmax(raw().ctx, SA_F32, &s, in.data(), out.data()), SA_OK);
  EXPECT_EQ(last_error(), "");
  // rows = 0 is a valid no-op.
  s = shape(0, 4, 4, 4);
  EXPECT_EQ(raw().softmax(raw().ctx, SA_F32, &s, nullptr, nullptr), SA_OK);
  // Through the C++ handle: a KernelError carrying the text.
  try {
    kernel().softmax(DType::float32, RowBatch::single({1.0f}), -2.0);
    ADD_FAILURE() << "expected KernelError";
  } catch (const KernelError& e) {
    EXPECT_EQ(e.status, SA_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("temperature"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------- strides, in place, threads
// Strided rows: every row equals the same row computed alone (bit for bit),
// and the padding between rows is never written.
TEST(CpuSemantics, StridesAndPaddingUntouched) {
  const std::int64_t rows = 37, n = 531, is = 560, os = 547;
  std::vector<float> in(static_cast<std::size_t>(rows * is), 123.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto x = generate(all_dists[r % 9], n, 1000 + r, false);
    std::copy(x.begin(), x.end(), in.begin() + r * is);
  }
  const sa_rows s = shape(rows, n, is, os, 1.3);
  const float sentinel = -7.25f;
  std::vector<float> out(static_cast<std::size_t>(rows * os), sentinel);
  ASSERT_EQ(raw().softmax(raw().ctx, SA_F32, &s, in.data(), out.data()), SA_OK);
  std::vector<float> lout(out.size(), sentinel);
  ASSERT_EQ(raw().log_softmax(raw().ctx, SA_F32, &s, in.data(), lout.data()), SA_OK);
  std::vector<float> aout(out.size(), sentinel), beta(rows), H(rows);
  ASSERT_EQ(
      raw().adaptive_softmax(raw().ctx, SA_F32, &s, in.data(), aout.data(), beta.data(), H.data()),
      SA_OK);
  for (std::int64_t r = 0; r < rows; ++r) {
    std::vector<float> x(in.begin() + r * is, in.begin() + r * is + n);
    const auto one = kernel().softmax(DType::float32, RowBatch::single(x), 1.3);
    const auto lone = kernel().log_softmax(DType::float32, RowBatch::single(x), 1.3);
    const auto aone = kernel().adaptive_softmax(DType::float32, RowBatch::single(x), 1.3);
    EXPECT_EQ(beta[r], aone.beta[0]);
    for (std::int64_t i = 0; i < os; ++i) {
      if (i < n) {
        EXPECT_EQ(out[r * os + i], one[i]);
        EXPECT_EQ(lout[r * os + i], lone[i]);
        EXPECT_EQ(aout[r * os + i], aone.weights[i]);
      } else {
        EXPECT_EQ(out[r * os + i], sentinel);
        EXPECT_EQ(lout[r * os + i], sentinel);
        EXPECT_EQ(aout[r * os + i], sentinel);
      }
    }
  }
}

// In place (in == out) gives the same bits as out of place, every dtype,
// including the special rows and the long-row (two-pass) path.
TEST(CpuSemantics, InPlaceEqualsOutOfPlace) {
  for (sa_dtype t : {SA_F32, SA_BF16, SA_F16})
    for (std::int64_t n :
         {std::int64_t{1}, std::int64_t{29}, std::int64_t{4096}, (std::int64_t{1} << 18) + 5}) {
      for (int special = 0; special < 3; ++special) {
        auto xf = generate(Dist::offset_pos, n, 4, true);
        if (special == 1) xf[n / 2] = kNaN;
        if (special == 2) xf[n - 1] = kInf;
        const std::size_t es = t == SA_F32 ? 4 : 2;
        std::vector<unsigned char> in(static_cast<std::size_t>(n) * es);
        for (std::int64_t i = 0; i < n; ++i) {
          if (t == SA_F32)
            std::memcpy(&in[i * 4], &xf[i], 4);
          else {
            const std::uint16_t b = t == SA_F16 ? f16_from_float(xf[i]) : bf16_from_float(xf[i]);
            std::memcpy(&in[i * 2], &b, 2);
          }
        }
        const sa_rows s = shape(1, n, n, n);
        using Fn = sa_status (*)(void*, sa_dtype, const sa_rows*, const void*, void*);
        for (Fn f : {raw().softmax, raw().log_softmax}) {
          std::vector<unsigned char> out(in.size()), io(in);
          ASSERT_EQ(f(raw().ctx, t, &s, in.data(), out.data()), SA_OK);
          ASSERT_EQ(f(raw().ctx, t, &s, io.data(), io.data()), SA_OK);
          EXPECT_EQ(std::memcmp(out.data(), io.data(), out.size()), 0)
              << "dtype " << t << " n=" << n << " special=" << special;
        }
        std::vector<unsigned char> out(in.size()), io(in);
        float b1, h1, b2, h2;
        ASSERT_EQ(raw().adaptive_softmax(raw().ctx, t, &s, in.data(), out.data(), &b1, &h1), SA_OK);
        ASSERT_EQ(raw().adaptive_softmax(raw().ctx, t, &s, io.data(), io.data(), &b2, &h2), SA_OK);
        EXPECT_EQ(std::memcmp(out.data(), io.data(), out.size()), 0) << "adaptive n=" << n;
      }
    }
}

// Many rows (threads) give the same bits as each row alone (one thread).
TEST(CpuSemantics, ThreadedRowsEqualSingleRows) {
  for (DType t : kTypes) {
    RowBatch b;
    b.rows = 64;
    b.n = 1500;
    b.stride = 1500;
    for (std::int64_t r = 0; r < b.rows; ++r) {
      const auto x = generate(all_dists[r % 9], b.n, 50 + r, t);
      b.data.insert(b.data.end(), x.begin(), x.end());
    }
    const auto all = kernel().softmax(t, b);
    std::vector<sa_entropy_state> st;
    const auto H = kernel().entropy(t, b, 1.0, &st);
    const auto lse = kernel().logsumexp(t, b);
    for (std::int64_t r = 0; r < b.rows; ++r) {
      const auto x = b.row(r);
      const RowBatch one = RowBatch::single({x.begin(), x.end()});
      const auto p = kernel().softmax(t, one);
      for (std::int64_t i = 0; i < b.n; ++i) ASSERT_EQ(all[r * b.n + i], p[i]);
      EXPECT_EQ(H[r], kernel().entropy(t, one)[0]);
      EXPECT_EQ(lse[r], kernel().logsumexp(t, one)[0]);
    }
  }
}

// ---------------------------------------------------------------- merges
// merge_entropy_states: merging the states of two halves of a row gives the
// whole row's entropy within the entropy bound (tests/cpu/cpu_accuracy_test.cpp)
// doubled (each half carries its own error); identities and specials exact.
TEST(CpuMerge, EntropyStatesOfSplitRows) {
  std::vector<sa_entropy_state> a, b;
  std::vector<double> exact;
  for (Dist d : all_dists)
    for (std::int64_t n : {2, 33, 1000}) {
      const auto x = generate(d, n, 9 + n, false);
      const std::int64_t cut = n / 3 + 1;
      std::vector<sa_entropy_state> sa, sb;
      kernel().entropy(DType::float32, RowBatch::single({x.begin(), x.begin() + cut}), 1.0, &sa);
      kernel().entropy(DType::float32, RowBatch::single({x.begin() + cut, x.end()}), 1.0, &sb);
      a.push_back(sa[0]);
      b.push_back(sb[0]);
      exact.push_back(ref::entropy(widen(x)).convert_to<double>());
    }
  const auto m = kernel().merge_entropy_states(a, b);
  const auto m2 = kernel().merge_entropy_states(b, a);
  for (std::size_t i = 0; i < m.size(); ++i) {
    const double H = theory::entropy_of(theory::EntropyState<double>{m[i].m, m[i].S, m[i].T});
    // States are float: S and T each rounded (u), so add 4u (1 + H) to the doubled bound.
    const double bound = 2 * (2 * kU * (2.5 + 10 * exact[i])) + 4 * kU * (1 + exact[i]) +
                         ref::ulp_at(DType::float32, ref::Mp(exact[i]));
    EXPECT_NEAR(H, exact[i], bound) << i;
    EXPECT_EQ(m[i].m, m2[i].m);  // commutative up to rounding; the max is exact
  }
  // Identity, NaN and +inf states.
  const sa_entropy_state id{-kInf, 0, 0}, s{1.5f, 3.0f, -0.5f}, nan{kNaN, kNaN, kNaN},
      inf2{kInf, 2, 0}, inf3{kInf, 3, 0};
  const auto r =
      kernel().merge_entropy_states(std::vector<sa_entropy_state>{id, s, id, s, inf2, s},
                                    std::vector<sa_entropy_state>{s, id, id, nan, inf3, inf2});
  EXPECT_EQ(r[0].m, s.m);
  EXPECT_EQ(r[0].S, s.S);
  EXPECT_EQ(r[0].T, s.T);
  EXPECT_EQ(r[1].S, s.S);
  EXPECT_EQ(r[2].m, -kInf);
  EXPECT_EQ(r[2].S, 0.0f);
  EXPECT_TRUE(std::isnan(r[3].m) && std::isnan(r[3].S) && std::isnan(r[3].T));
  EXPECT_EQ(r[4].m, kInf);
  EXPECT_EQ(r[4].S, 5.0f);
  EXPECT_EQ(r[5].m, kInf);
  EXPECT_EQ(r[5].S, 2.0f);
  EXPECT_EQ(r[5].T, 0.0f);
}

// merge_attention_states: out = w_a o_a + w_b o_b, w = exp(lse - L), each
// output one rounding of the double-precision value: within 1 ulp of the
// double evaluation (the weights are within 2^-50 of exact); special lse exact.
TEST(CpuMerge, AttentionStates) {
  const std::int64_t rows = 9, dv = 19;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd;
  std::vector<float> oa(rows * dv), ob(rows * dv), la(rows), lb(rows);
  for (auto& v : oa) v = nd(rng);
  for (auto& v : ob) v = nd(rng);
  for (std::int64_t r = 0; r < rows; ++r) {
    la[r] = 30.0f * nd(rng);
    lb[r] = la[r] + 3.0f * nd(rng);
  }
  la[1] = -kInf;          // only b
  lb[2] = -kInf;          // only a
  la[3] = lb[3] = -kInf;  // both empty: 0, -inf
  la[4] = kNaN;           // NaN
  la[5] = kInf;           // +inf part dominates
  la[6] = 1e4f;           // big offsets
  lb[6] = 1e4f + 1.0f;
  std::vector<float> L;
  const auto o = kernel().merge_attention_states(rows, dv, oa, la, ob, lb, &L);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < dv; ++j) {
      const float got = o[r * dv + j];
      const float a = oa[r * dv + j], b = ob[r * dv + j];
      if (r == 1)
        EXPECT_EQ(got, b);
      else if (r == 2 || r == 5)
        EXPECT_EQ(got, a);
      else if (r == 3)
        EXPECT_EQ(got, 0.0f);
      else if (r == 4)
        EXPECT_TRUE(std::isnan(got));
      else {
        const double mx = std::max<double>(la[r], lb[r]);
        const double Ld = mx + std::log(std::exp(la[r] - mx) + std::exp(lb[r] - mx));
        const double want = std::exp(la[r] - Ld) * a + std::exp(lb[r] - Ld) * b;
        EXPECT_NEAR(got, want, std::abs(want) * 2 * kU + 1e-12 * (std::abs(a) + std::abs(b)))
            << r << "," << j;
      }
    }
  }
  EXPECT_EQ(L[1], lb[1]);
  EXPECT_EQ(L[2], la[2]);
  EXPECT_EQ(L[3], -kInf);
  EXPECT_TRUE(std::isnan(L[4]));
  EXPECT_EQ(L[5], kInf);
  EXPECT_NEAR(L[6], 1e4 + 1 + std::log1p(std::exp(-1.0)),
              0.5 * ref::ulp_at(DType::float32, ref::Mp(1e4)));
  // out may alias a.
  std::vector<float> io(oa), lio(la);
  ASSERT_EQ(raw().merge_attention_states(raw().ctx, rows, dv, io.data(), lio.data(), ob.data(),
                                         lb.data(), io.data(), lio.data()),
            SA_OK);
  for (std::size_t i = 0; i < io.size(); ++i)
    if (!std::isnan(o[i])) EXPECT_EQ(io[i], o[i]);
}

}  // namespace
}  // namespace sa::cputest
