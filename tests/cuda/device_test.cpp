// The CUDA kernel against the MPFR reference, through sa::Kernel, for every
// operation x {float32, bfloat16}. Needs a GPU: without one every test skips
// with "no CUDA device: <reason>" (never a pass).
//
// Bounds: tests/cuda/bounds.hpp (theory.md T7's first-order model with CUDA's
// expf/logf accuracy and the kernel's rescale count from plan.hpp); each
// check below names the one it uses. Special values (kernel.h) must match the
// reference exactly: masked weight 0, fully masked rows, +inf sharing, NaN rows.
// Temperatures are powers of two so that l / theta is exact in float32 (the
// kernel rounds 1/theta's use to float32, and the bounds assume exact inputs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/bfloat16.hpp"
#include "core/verdict.hpp"
#include "kernels/cuda/cuda_kernel.hpp"
#include "kernels/cuda/plan.hpp"
#include "kernels/kernel.hpp"
#include "reference/softmax.hpp"
#include "tests/cuda/bounds.hpp"
#include "theory/adaptive_temperature.hpp"
#include "theory/streamed_entropy.hpp"

namespace {

using sa::DType;
using sa::RowBatch;
using sa::ref::Mp;
namespace ct = sa::cuda_test;
namespace cu = sa::kernels::cuda;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr DType kTypes[] = {DType::float32, DType::bfloat16};

const sa::Kernel& kernel() {
  static const sa::Kernel k(sa::kernels::cuda_kernel(), "built-in");
  return k;
}

// Built a second time as cuda_emulation_test, against the same kernel source
// compiled for the host SIMT emulator (kernels/cuda/emulation.hpp): the same
// checks then run without a GPU (host expf/logf, which are within the same
// bounds), except the largest cases.
#if defined(SA_CUDA_EMULATION)
constexpr bool kEmulated = true;
#define CUDA_SUITE CudaEmulated
#else
constexpr bool kEmulated = false;
#define CUDA_SUITE Cuda
#endif

class CUDA_SUITE : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kEmulated && sa::device_memory().alloc == nullptr)
      GTEST_SKIP() << "no CUDA device: " << sa::device_memory().why_unavailable();
  }
};
#define SKIP_WHEN_EMULATED() \
  if (kEmulated) GTEST_SKIP() << "too large for the host emulator; runs on a GPU"

float to_type(DType t, float x) { return t == DType::bfloat16 ? sa::round_to_bf16(x) : x; }

RowBatch random_rows(DType t, std::int64_t rows, std::int64_t n, std::uint64_t seed, float sigma,
                     std::int64_t pad = 0) {
  RowBatch b;
  b.rows = rows;
  b.n = n;
  b.stride = n + pad;
  b.data.assign(static_cast<std::size_t>(rows * b.stride), 0.f);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> N(0.f, sigma);
  for (auto& x : b.data) x = to_type(t, N(rng));
  return b;
}

std::vector<double> row_of(const RowBatch& b, std::int64_t r) {
  auto s = b.row(r);
  return {s.begin(), s.end()};
}

// Spread of the finite logits after dividing by theta (0 with fewer than two).
double spread_of(const std::vector<double>& l, double theta) {
  double lo = INFINITY, hi = -INFINITY;
  for (double x : l)
    if (std::isfinite(x)) lo = std::min(lo, x / theta), hi = std::max(hi, x / theta);
  return hi > lo ? hi - lo : 0.0;
}

bool is_nan_row(const std::vector<double>& l) {
  return std::any_of(l.begin(), l.end(), [](double x) { return std::isnan(x); });
}

double d(const Mp& x) { return static_cast<double>(x); }

// Exact-or-bounded comparison of one value: non-finite references and exact
// zeros must be matched exactly (kernel.h special values), the rest within bound.
bool close(double got, double ref, double bound) {
  if (std::isnan(ref)) return std::isnan(got);
  if (!std::isfinite(ref) || ref == 0.0) return got == ref;
  return std::abs(got - ref) <= bound;
}

sa::Verdict verdict(const std::string& prop, const std::string& claim, double measured,
                    double bound, const char* rule, DType t, const std::string& where) {
  sa::Verdict v = sa::check_at_most(
      prop, claim, measured, bound,
      {rule, "tests/cuda/bounds.hpp: theory.md T7 first-order model, expf 2 ulp / logf 1 ulp"});
  v.kernel = "cuda";
  v.dtype = sa::name_of(t);
  v.counterexample = where;
  return v;
}

// Rows checked against MPFR: all, or a sample (first, last, around 65,535, strided).
std::vector<std::int64_t> rows_to_check(std::int64_t rows, std::int64_t max_full = 64) {
  std::vector<std::int64_t> r;
  if (rows <= max_full) {
    for (std::int64_t i = 0; i < rows; ++i) r.push_back(i);
    return r;
  }
  for (std::int64_t i : {std::int64_t{0}, std::int64_t{1}, std::int64_t{2}}) r.push_back(i);
  for (std::int64_t i = 65530; i < 65542 && i < rows; ++i) r.push_back(i);
  for (std::int64_t i = 4099; i < rows; i += 40961) r.push_back(i);
  for (std::int64_t i = std::max<std::int64_t>(0, rows - 3); i < rows; ++i) r.push_back(i);
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

// --- per-op checks: each returns the number of failing rows (reported) ---

int check_softmax(DType t, const RowBatch& b, double theta, const std::vector<float>& got,
                  const std::string& tag) {
  const double R = static_cast<double>(cu::plan_rows(b.rows, b.n).max_rescales);
  int failures = 0;
  for (std::int64_t r : rows_to_check(b.rows)) {
    const auto l = row_of(b, r);
    const auto ref = sa::ref::softmax(l, theta);
    double norm = 0, err = 0;
    bool exact_ok = true;
    for (std::size_t i = 0; i < l.size(); ++i) {
      const double g = got[static_cast<std::size_t>(r * b.stride) + i], e = d(ref[i]);
      if (std::isnan(e) || e == 0.0)
        exact_ok &= close(g, e, 0);
      else
        norm = std::max(norm, e), err = std::max(err, std::abs(g - e));
    }
    const double bound = ct::softmax_rel(t, static_cast<double>(b.n), spread_of(l, theta), R) +
                         (norm > 0 ? ct::kUnderflow / norm : 0.0);
    const sa::Verdict v = verdict("cuda.softmax.max_rel", "max |p^ - p| / max p <= bound",
                                  norm > 0 ? err / norm : 0.0, bound, "T7.shifted+rescales", t,
                                  tag + " row " + std::to_string(r));
    if (!v.passed() || !exact_ok) {
      ++failures;
      ADD_FAILURE() << sa::describe(v) << (exact_ok ? "" : "\n  special values differ");
    }
  }
  return failures;
}

int check_log_softmax(DType t, const RowBatch& b, double theta, const std::vector<float>& got,
                      const std::string& tag) {
  const double R = static_cast<double>(cu::plan_rows(b.rows, b.n).max_rescales);
  int failures = 0;
  for (std::int64_t r : rows_to_check(b.rows)) {
    const auto l = row_of(b, r);
    const auto ref = sa::ref::log_softmax(l, theta);
    const double spread = spread_of(l, theta);
    for (std::size_t i = 0; i < l.size(); ++i) {
      const double g = got[static_cast<std::size_t>(r * b.stride) + i], e = d(ref[i]);
      const double bound = ct::log_softmax_abs(t, static_cast<double>(b.n), spread, R, e);
      if (!close(g, e, bound) && (e != 0.0 || std::abs(g) > bound)) {
        ++failures;
        ADD_FAILURE() << sa::describe(verdict("cuda.log_softmax.abs", "|y^ - y| <= bound",
                                              std::abs(g - e), bound, "T7.log_softmax", t,
                                              tag + " row " + std::to_string(r) + " i " +
                                                  std::to_string(i) + " ref " + std::to_string(e) +
                                                  " got " + std::to_string(g)));
        break;
      }
    }
  }
  return failures;
}

int check_logsumexp(DType t, const RowBatch& b, double theta, const std::vector<float>& got,
                    const std::string& tag) {
  const double R = static_cast<double>(cu::plan_rows(b.rows, b.n).max_rescales);
  int failures = 0;
  for (std::int64_t r : rows_to_check(b.rows)) {
    const auto l = row_of(b, r);
    const double e = d(sa::ref::log_sum_exp(l, theta));
    const double bound = ct::logsumexp_abs(static_cast<double>(b.n), spread_of(l, theta), R, e);
    const double g = got[static_cast<std::size_t>(r)];
    if (!close(g, e, bound) && (e != 0.0 || std::abs(g) > bound)) {
      ++failures;
      ADD_FAILURE() << sa::describe(verdict("cuda.logsumexp.abs", "|lse^ - lse| <= bound",
                                            std::abs(g - e), bound, "T7.logsumexp", t,
                                            tag + " row " + std::to_string(r) + " ref " +
                                                std::to_string(e) + " got " + std::to_string(g)));
    }
  }
  return failures;
}

int check_entropy(DType t, const RowBatch& b, double theta, const std::vector<float>& got,
                  const std::vector<sa_entropy_state>& states, const std::string& tag) {
  const double R = static_cast<double>(cu::plan_rows(b.rows, b.n).max_rescales);
  const double n = static_cast<double>(b.n);
  int failures = 0;
  for (std::int64_t r : rows_to_check(b.rows)) {
    const auto l = row_of(b, r);
    const double spread = spread_of(l, theta);
    const double H = d(sa::ref::entropy(l, theta));
    const auto st = sa::ref::entropy_state(l, theta);
    const double g = got[static_cast<std::size_t>(r)];
    const double bound = ct::entropy_abs(n, spread, R, H);
    const sa_entropy_state s = states[static_cast<std::size_t>(r)];
    std::string why;
    if (!close(g, H, bound) && (H != 0.0 || std::abs(g) > bound))
      why = "H: ref " + std::to_string(H) + " got " + std::to_string(g) + " bound " +
            std::to_string(bound);
    // State: m exact (a max of exact values); S and T within eps_S, eps_T relative.
    const double em = d(st.m), eS = d(st.S), eT = d(st.T);
    if (std::isnan(em)) {
      if (!std::isnan(s.m) || !std::isnan(s.S) || !std::isnan(s.T)) why += " state not NaN";
    } else {
      if (static_cast<double>(s.m) != em)
        why += " m " + std::to_string(s.m) + " vs " + std::to_string(em);
      if (!close(s.S, eS, ct::kMargin * ct::eps_S(n, spread, R) * std::abs(eS)))
        why += " S " + std::to_string(s.S) + " vs " + std::to_string(eS);
      if (!close(s.T, eT, ct::kMargin * ct::eps_T(n, spread, R) * std::abs(eT) + ct::kUnderflow))
        why += " T " + std::to_string(s.T) + " vs " + std::to_string(eT);
    }
    if (!why.empty()) {
      ++failures;
      ADD_FAILURE() << "cuda entropy " << sa::name_of(t) << " " << tag << " row " << r << ": "
                    << why << " (bounds: tests/cuda/bounds.hpp entropy_abs, eps_S, eps_T)";
    }
  }
  return failures;
}

int check_adaptive(DType t, const RowBatch& b, double theta, const sa::AdaptiveOutput& got,
                   const std::string& tag) {
  const double R = static_cast<double>(cu::plan_rows(b.rows, b.n).max_rescales);
  const double n = static_cast<double>(b.n);
  int failures = 0;
  for (std::int64_t r : rows_to_check(b.rows)) {
    const auto l = row_of(b, r);
    const double spread = spread_of(l, theta);
    const auto ref = sa::ref::adaptive_softmax(l, theta, sa::ref::EntropyDefinition::shannon);
    const double H = d(ref.entropy);
    const double gH = got.entropy[static_cast<std::size_t>(r)];
    const double gB = got.beta[static_cast<std::size_t>(r)];
    std::string why;
    const double bH = ct::entropy_abs(n, spread, R, H);
    if (!close(gH, H, bH) && !(H == 0.0 && std::abs(gH) <= bH))
      why += " H ref " + std::to_string(H) + " got " + std::to_string(gH);
    // beta = adaptive_beta(H^) as T5 defines it, up to float32 Horner rounding.
    const double want_beta = sa::theory::adaptive_beta<double>(gH);
    if (!close(gB, want_beta, ct::horner_abs(gH)))
      why += " beta " + std::to_string(gB) + " vs beta(H^) " + std::to_string(want_beta);
    // Weights against softmax(beta^ * l / theta), exactly.
    std::vector<Mp> z(l.size());
    for (std::size_t i = 0; i < l.size(); ++i) {
      z[i] = Mp(l[i]) / Mp(theta);
      if (std::isfinite(l[i])) z[i] *= Mp(gB);
    }
    const bool nan_row = is_nan_row(l);
    const auto w = nan_row ? std::vector<Mp>(l.size(), Mp(NAN)) : sa::ref::softmax_of(z);
    double norm = 0, err = 0;
    for (std::size_t i = 0; i < l.size(); ++i) {
      const double g = got.weights[static_cast<std::size_t>(r * b.stride) + i], e = d(w[i]);
      if (std::isnan(e) || e == 0.0) {
        if (!close(g, e, 0)) why += " special weight " + std::to_string(i);
      } else {
        norm = std::max(norm, e), err = std::max(err, std::abs(g - e));
      }
    }
    const double bound = ct::adaptive_rel(t, n, spread, std::isfinite(gB) ? gB : 1.0) +
                         (norm > 0 ? ct::kUnderflow / norm : 0.0);
    if (norm > 0 && err / norm > bound)
      why += " weights rel " + std::to_string(err / norm) + " > " + std::to_string(bound);
    if (!why.empty()) {
      ++failures;
      ADD_FAILURE() << "cuda adaptive_softmax " << sa::name_of(t) << " " << tag << " row " << r
                    << ":" << why << " (bounds: tests/cuda/bounds.hpp)";
    }
  }
  return failures;
}

// Runs every row op on the batch and checks it.
void check_all_row_ops(DType t, const RowBatch& b, double theta, const std::string& tag) {
  const sa::Kernel& k = kernel();
  SCOPED_TRACE(tag + " " + sa::name_of(t) + " rows=" + std::to_string(b.rows) +
               " n=" + std::to_string(b.n) + " theta=" + std::to_string(theta));
  check_softmax(t, b, theta, k.softmax(t, b, theta), tag);
  check_log_softmax(t, b, theta, k.log_softmax(t, b, theta), tag);
  check_logsumexp(t, b, theta, k.logsumexp(t, b, theta), tag);
  std::vector<sa_entropy_state> states;
  const auto H = k.entropy(t, b, theta, &states);
  check_entropy(t, b, theta, H, states, tag);
  check_adaptive(t, b, theta, k.adaptive_softmax(t, b, theta), tag);
}

TEST_F(CUDA_SUITE, RowOpsEverySizeAndPath) {
  // n = 1, tails around the warp (32, 1024), block (8192) and chunk (8192)
  // sizes, several chunks, strided rows.
  const std::int64_t sizes[] = {1,    2,    3,    31,   32,   33,   1000,  1023,
                                1024, 1025, 4099, 8191, 8192, 8193, 16384, 20011};
  std::uint64_t seed = 1;
  for (DType t : kTypes)
    for (std::int64_t n : sizes) {
      if (kEmulated && n > 8193) continue;  // the split path stays covered by 8193
      const RowBatch b = random_rows(t, 2, n, seed++, 3.f, n % 3 == 0 ? 5 : 0);
      check_all_row_ops(t, b, 1.0, "sizes seed " + std::to_string(seed - 1));
    }
}

TEST_F(CUDA_SUITE, RowOpsTemperatureAndLargeOffsets) {
  // theta = 0.5 and 2 (exact scalings); logits offset by 1e4 (shift
  // invariance; catches the cancelling entropy form of theory.md T6).
  for (DType t : kTypes)
    for (std::int64_t n : {std::int64_t{17}, std::int64_t{3000}, std::int64_t{9000}}) {
      const RowBatch b = random_rows(t, 2, n, 100 + static_cast<std::uint64_t>(n), 2.f);
      check_all_row_ops(t, b, 0.5, "theta 0.5");
      check_all_row_ops(t, b, 2.0, "theta 2");
      RowBatch shifted = b;
      for (auto& x : shifted.data) x = to_type(t, x + 10000.f);
      check_all_row_ops(t, shifted, 1.0, "offset 1e4");
    }
}

TEST_F(CUDA_SUITE, RowOpsSpecialValuesOnEveryPath) {
  // Fully masked rows, partial masks (including a whole chunk of -inf, the
  // "-inf tile" bug class), +inf logits (k share the weight), NaN rows,
  // placed at the start, the middle and the tail of each path.
  for (DType t : kTypes)
    for (std::int64_t n : {std::int64_t{1}, std::int64_t{5}, std::int64_t{40}, std::int64_t{3000},
                           std::int64_t{20000}}) {
      RowBatch b = random_rows(t, 8, n, 7 + static_cast<std::uint64_t>(n), 2.f);
      auto at = [&](std::int64_t r, std::int64_t i) -> float& {
        return b.data[static_cast<std::size_t>(r * b.stride + i)];
      };
      for (std::int64_t i = 0; i < n; ++i) at(0, i) = -kInf;     // fully masked
      for (std::int64_t i = 0; i < n; i += 2) at(1, i) = -kInf;  // half masked
      at(2, n - 1) = kInf;                                       // one +inf at the tail
      at(3, 0) = kInf, at(3, n / 2) = kInf;                      // +inf shared
      at(4, n / 2) = std::numeric_limits<float>::quiet_NaN();    // NaN row
      for (std::int64_t i = 0; i < std::min<std::int64_t>(n, 8192); ++i)
        at(5, i) = -kInf;                                // -inf chunk
      if (n > 1) at(6, n - 1) = -kInf, at(6, 0) = 30.f;  // sharp row
      at(7, n - 1) = 88.f;                               // exp(88) would overflow unshifted
      check_all_row_ops(t, b, 1.0, "specials");
    }
}

TEST_F(CUDA_SUITE, RowOpsNearTwoToTheTwenty) {
  // One row of 2^20 - 3 logits (split path, 128 chunks), reference at 128 bits
  // (2^20 operations at 2^-128 each stay far below 2^-24).
  SKIP_WHEN_EMULATED();
  sa::ref::PrecisionScope p(128);
  const sa::Kernel& k = kernel();
  for (DType t : kTypes) {
    const RowBatch b = random_rows(t, 1, (1 << 20) - 3, 99, 2.f);
    check_softmax(t, b, 1.0, k.softmax(t, b), "2^20");
    check_logsumexp(t, b, 1.0, k.logsumexp(t, b), "2^20");
    std::vector<sa_entropy_state> states;
    const auto H = k.entropy(t, b, 1.0, &states);
    check_entropy(t, b, 1.0, H, states, "2^20");
  }
}

// Checks that every row's weights sum to 1 within the componentwise bound
// (each weight's relative error is within softmax_rel, so is the sum's).
void check_row_sums(DType t, const RowBatch& b, const std::vector<float>& w) {
  const double R = static_cast<double>(cu::plan_rows(b.rows, b.n).max_rescales);
  int bad = 0;
  for (std::int64_t r = 0; r < b.rows && bad < 5; ++r) {
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    for (std::int64_t i = 0; i < b.n; ++i) {
      sum += w[static_cast<std::size_t>(r * b.stride + i)];
      const double x = b.data[static_cast<std::size_t>(r * b.stride + i)];
      lo = std::min(lo, x), hi = std::max(hi, x);
    }
    const double bound = ct::softmax_rel(t, static_cast<double>(b.n), hi - lo, R) +
                         static_cast<double>(b.n) * 0x1p-50;
    if (!(std::abs(sum - 1.0) <= bound)) {
      ++bad;
      ADD_FAILURE() << "row " << r << " of " << b.rows << " sums to " << sum << " (bound " << bound
                    << ")";
    }
  }
}

TEST_F(CUDA_SUITE, MoreThan65535RowsOnWarpAndBlockPaths) {
  // Warp path: 262,147 rows -> 65,537 blocks; block path: 65,543 rows -> one
  // block each. Every row must sum to 1; sampled rows (including 65,530-65,541
  // and the last) are compared with MPFR.
  SKIP_WHEN_EMULATED();
  const sa::Kernel& k = kernel();
  for (DType t : kTypes) {
    const RowBatch warp_rows = random_rows(t, 262147, 33, 5, 2.f);
    ASSERT_GT(cu::plan_rows(warp_rows.rows, warp_rows.n).grid, 65535);
    const auto w1 = k.softmax(t, warp_rows);
    check_row_sums(t, warp_rows, w1);
    check_softmax(t, warp_rows, 1.0, w1, "262147 rows");
    check_logsumexp(t, warp_rows, 1.0, k.logsumexp(t, warp_rows), "262147 rows");

    const RowBatch block_rows = random_rows(t, 65543, 1500, 6, 2.f);
    ASSERT_GT(cu::plan_rows(block_rows.rows, block_rows.n).grid, 65535);
    const auto w2 = k.softmax(t, block_rows);
    check_row_sums(t, block_rows, w2);
    check_softmax(t, block_rows, 1.0, w2, "65543 rows");
    std::vector<sa_entropy_state> states;
    const auto H = k.entropy(t, block_rows, 1.0, &states);
    check_entropy(t, block_rows, 1.0, H, states, "65543 rows");
  }
}

TEST_F(CUDA_SUITE, MergeEntropyStates) {
  // Claim: out = entropy_merge(a, b) (theory.md T6) within bounds.hpp's merge
  // bounds of the exact merge of the same float inputs; special values exact.
  std::mt19937_64 rng(11);
  std::normal_distribution<float> N(0.f, 5.f);
  std::uniform_real_distribution<float> U(1.f, 1000.f);
  std::vector<sa_entropy_state> a, b;
  for (int i = 0; i < 5000; ++i) {
    const float Sa = U(rng), Sb = U(rng);
    a.push_back({N(rng), Sa, -Sa * U(rng) / 100.f});
    b.push_back({N(rng), Sb, -Sb * U(rng) / 100.f});
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const sa_entropy_state id{-kInf, 0.f, 0.f}, x{1.f, 2.f, -0.5f}, pinf{kInf, 3.f, 0.f};
  const std::pair<sa_entropy_state, sa_entropy_state> specials[] = {
      {id, x}, {x, id}, {id, id}, {pinf, x}, {x, pinf}, {pinf, pinf}, {{nan, nan, nan}, x}, {x, x}};
  for (auto [p, q] : specials) a.push_back(p), b.push_back(q);
  const auto out = kernel().merge_entropy_states(a, b);
  int bad = 0;
  for (std::size_t i = 0; i < a.size() && bad < 5; ++i) {
    using MS = sa::theory::EntropyState<Mp>;
    const MS ea{Mp(a[i].m), Mp(a[i].S), Mp(a[i].T)}, eb{Mp(b[i].m), Mp(b[i].S), Mp(b[i].T)};
    const MS e = sa::theory::entropy_merge(ea, eb);
    // The |d| terms of bounds.hpp: the smaller part's scaled contributions.
    const bool a_big = a[i].m >= b[i].m;
    const sa_entropy_state& small = a_big ? b[i] : a[i];
    const double dd = std::isfinite(a[i].m) && std::isfinite(b[i].m)
                          ? std::abs(static_cast<double>(a[i].m) - b[i].m)
                          : 0.0;
    const double bsc = std::exp(-dd);
    const double bS = ct::merge_S_rel() * std::abs(d(e.S)) + ct::u32 * dd * bsc * small.S;
    const double bT = ct::merge_T_rel() * std::abs(d(e.T)) +
                      ct::u32 * dd * bsc * std::abs(small.T - dd * small.S) + ct::kUnderflow;
    const bool ok = (std::isnan(d(e.m)) ? std::isnan(out[i].m) : out[i].m == d(e.m)) &&
                    close(out[i].S, d(e.S), bS) && close(out[i].T, d(e.T), bT);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << "merge " << i << ": (" << out[i].m << ", " << out[i].S << ", " << out[i].T
                    << ") vs exact (" << d(e.m) << ", " << d(e.S) << ", " << d(e.T) << ")";
    }
  }
}

TEST_F(CUDA_SUITE, MergeAttentionStates) {
  // Claim: out = (e^{la} o_a + e^{lb} o_b) / (e^{la} + e^{lb}), L = log(e^{la} + e^{lb});
  // first-order bound: weights carry (2E + 2|la - lb| + 2) u, the combination
  // 2 u more, on |w_a o_a| + |w_b o_b|; L carries u (|L| + |la - lb| + E + 1 + L).
  // -inf parts contribute nothing; both -inf: out 0, L -inf; NaN: NaN.
  const std::int64_t rows = 300, dv = 70;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> N(0.f, 1.f), Nl(0.f, 4.f);
  std::vector<float> oa(rows * dv), ob(rows * dv), la(rows), lb(rows);
  for (auto& x : oa) x = N(rng);
  for (auto& x : ob) x = N(rng);
  for (auto& x : la) x = Nl(rng);
  for (auto& x : lb) x = Nl(rng);
  la[0] = -kInf;
  lb[1] = -kInf;
  la[2] = lb[2] = -kInf;
  la[3] = std::numeric_limits<float>::quiet_NaN();
  lb[4] = 1e4f, la[4] = -1e4f;
  std::vector<float> L;
  const auto out = kernel().merge_attention_states(rows, dv, oa, la, ob, lb, &L);
  int bad = 0;
  for (std::int64_t r = 0; r < rows && bad < 5; ++r) {
    const double a = la[r], b = lb[r];
    for (std::int64_t c = 0; c < dv; ++c) {
      const double g = out[r * dv + c];
      double e, bound = 0;
      if (std::isnan(a) || std::isnan(b))
        e = NAN;
      else if (a == -INFINITY && b == -INFINITY)
        e = 0;
      else if (a == -INFINITY)
        e = ob[r * dv + c];
      else if (b == -INFINITY)
        e = oa[r * dv + c];
      else {
        const Mp m = a > b ? Mp(a) : Mp(b);
        const Mp ea = exp(Mp(a) - m), eb = exp(Mp(b) - m), s = ea + eb;
        const Mp wa = ea / s, wb = eb / s;
        e = d(wa * Mp(oa[r * dv + c]) + wb * Mp(ob[r * dv + c]));
        bound = ct::kMargin * (2 * ct::kExpUnits + 2 * std::abs(a - b) + 4) * ct::u32 *
                    (d(wa) * std::abs(oa[r * dv + c]) + d(wb) * std::abs(ob[r * dv + c])) +
                ct::kUnderflow;
      }
      const bool ok =
          (bound == 0) ? (std::isnan(e) ? std::isnan(g) : g == e) : std::abs(g - e) <= bound;
      if (!ok) {
        ++bad;
        ADD_FAILURE() << "merge_attention row " << r << " c " << c << ": " << g << " vs " << e
                      << " (bound " << bound << ")";
        break;
      }
    }
    double eL;
    if (std::isnan(a) || std::isnan(b))
      eL = NAN;
    else if (a == -INFINITY && b == -INFINITY)
      eL = -INFINITY;
    else
      eL = d(log(exp(Mp(a)) + exp(Mp(b))));
    const double bL = std::isfinite(eL)
                          ? ct::kMargin * ct::u32 *
                                (std::abs(eL) + std::abs(a - b) + ct::kExpUnits + 1 + ct::kLogUnits)
                          : 0;
    if (!close(L[r], eL, bL) && !(eL == 0.0 && std::abs(L[r]) <= bL)) {
      ++bad;
      ADD_FAILURE() << "merge_attention row " << r << " lse " << L[r] << " vs " << eL;
    }
  }
}

// --- attention (interface v1) ---
//
// The v1 slot is the single-head case of attention_v2 (cuda_kernel.cpp
// translates the call; attention_v2_test.cpp holds attention_v2 to the
// reference). Claim: a v1 call returns the bits the same case gives through
// attention_v2, whatever v1 layout the handle chooses (its own row strides
// per operand, NaN between rows), and beta = 1; the adaptive temperature,
// which attention_v2 does not declare, is refused as unsupported.

struct AttnCase {
  std::int64_t nq, nk, d, dv;
  bool causal;
  int mask;  // 0 none, 1 random half, 2 all masked, 3 a masked run covering whole tiles
  std::int64_t splits;
  float sigma;
  bool nan_query = false;  // query 0 holds a NaN
  std::int64_t pad = 0;    // the v1 call's row padding (distinct strides per operand)
};

sa::AttentionCase make_attention(DType t, const AttnCase& c, std::uint64_t seed) {
  sa::AttentionCase in;
  in.qkv = in.out_type = t == DType::bfloat16 ? sa::AttnType::bfloat16 : sa::AttnType::float32;
  in.seqlen_q = c.nq, in.seqlen_k = c.nk, in.d = c.d, in.dv = c.dv;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> N(0.f, c.sigma), V(0.f, 1.f);
  in.q.resize(c.nq * c.d), in.k.resize(c.nk * c.d), in.v.resize(c.nk * c.dv);
  for (auto& x : in.q) x = to_type(t, N(rng));
  for (auto& x : in.k) x = to_type(t, N(rng));
  for (auto& x : in.v) x = to_type(t, V(rng));
  if (c.mask) {
    in.key_padding_mask.assign(c.nk, 1);
    for (std::int64_t j = 0; j < c.nk; ++j) {
      if (c.mask == 1) in.key_padding_mask[j] = (rng() % 2) ? 1 : 0;
      if (c.mask == 2) in.key_padding_mask[j] = 0;
      if (c.mask == 3) in.key_padding_mask[j] = (j >= 32 && j < 96) ? 0 : 1;
    }
  }
  if (c.nan_query) in.q[0] = std::numeric_limits<float>::quiet_NaN();
  in.scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  in.causal = c.causal;
  in.num_splits = c.splits;
  in.row_pad = c.pad;
  return in;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST_F(CUDA_SUITE, AttentionV1IsTheSingleHeadCaseOfV2) {
  const AttnCase cases[] = {
      {1, 1, 8, 8, false, 0, 0, 1.f},               // smallest
      {5, 37, 16, 24, false, 0, 0, 1.f, false, 3},  // tails in keys and columns, padded rows
      {5, 37, 16, 24, true, 0, 0, 1.f},             // causal nq < nk
      {40, 7, 16, 8, true, 0, 0, 1.f},              // causal nq > nk: first 33 queries fully masked
      {17, 200, 64, 64, false, 1, 3, 1.f, false, 1},  // random mask, 3 splits
      {17, 200, 64, 64, true, 3, 4, 2.f},             // masked whole tiles, causal, splits
      {9, 50, 32, 40, false, 2, 2, 1.f},              // every key masked
      {33, 1000, 128, 96, true, 0, 1, 3.f},           // long keys, sharper logits
      {4, 70, 256, 256, false, 0, 2, 1.f},            // largest head
      {3, 45, 7, 5, false, 0, 0, 1.f, false, 2},      // odd d
      {6, 90, 16, 16, false, 0, 2, 1.f, true},        // a NaN query row, split
  };
  std::uint64_t seed = 1000;
  for (DType t : kTypes)
    for (const AttnCase& c : cases) {
      if (kEmulated && c.nk * c.d * c.nq > 300000) {
        ++seed;
        continue;
      }
      const sa::AttentionCase in = make_attention(t, c, seed++);
      SCOPED_TRACE(in.describe());
      const sa::AttentionResult v1 = kernel().attention(in);
      sa::AttentionCase dense = in;
      dense.row_pad = 0;
      const sa::AttentionResult v2 = kernel().attention_v2(dense);
      ASSERT_EQ(v1.out.size(), v2.out.size());
      int bad = 0;
      for (std::size_t i = 0; i < v1.out.size() && bad < 3; ++i)
        if (!same_bits(v1.out[i], v2.out[i]))
          ++bad,
              ADD_FAILURE() << "out[" << i << "] " << v1.out[i] << " vs attention_v2 " << v2.out[i];
      for (std::size_t i = 0; i < v2.lse.size() && bad < 3; ++i)
        if (!same_bits(v1.lse[i], v2.lse[i]))
          ++bad, ADD_FAILURE() << "lse[" << i << "] " << v1.lse[i] << " vs " << v2.lse[i];
      for (std::size_t i = 0; i < v2.entropy.size() && bad < 3; ++i)
        if (!same_bits(v1.entropy[i], v2.entropy[i]))
          ++bad,
              ADD_FAILURE() << "entropy[" << i << "] " << v1.entropy[i] << " vs " << v2.entropy[i];
      for (float b : v1.beta) EXPECT_EQ(b, 1.0f);
    }
  sa::AttentionCase adaptive = make_attention(DType::float32, cases[1], 7);
  adaptive.adaptive = true;
  try {
    (void)kernel().attention(adaptive);
    ADD_FAILURE() << "adaptive v1 attention was accepted";
  } catch (const sa::KernelError& e) {
    EXPECT_EQ(e.status, SA_UNSUPPORTED) << e.what();
  }
}

}  // namespace
