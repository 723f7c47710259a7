// T6 (Appendix G): the one-pass (m, S, T) state gives the Shannon entropy and
// the log-sum-exp; any merge tree over any partition (empty and fully masked
// parts included) gives the same state in exact arithmetic. At 256 bits,
// agreement to 2^-200 relative. Also: the shift-stable form keeps its accuracy
// in double under a large common offset while the tempting
// "lse - mean logit" form loses it (the bug class "entropy by cancellation").
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "reference/softmax.hpp"
#include "tests/support/mp_testing.hpp"
#include "theory/streamed_entropy.hpp"

using sa::ref::Mp;
namespace th = sa::theory;

namespace {
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr double inf = std::numeric_limits<double>::infinity();

// Reduce [lo, hi) with a random merge tree; `cut` picks a split in (lo, hi).
th::EntropyState<Mp> tree_reduce(const std::vector<Mp>& z, std::size_t lo, std::size_t hi,
                                 const std::function<std::size_t(std::size_t, std::size_t)>& cut) {
  if (hi - lo == 1) return th::entropy_state_of(z[lo]);
  const std::size_t mid = cut(lo, hi);
  return th::entropy_merge(tree_reduce(z, lo, mid, cut), tree_reduce(z, mid, hi, cut));
}
}  // namespace

RC_GTEST_PROP(StreamedEntropy, MergeTreesEqualDirectEntropy, ()) {
  auto l = *sa::testing::bounded_logits(80, -20, 40);
  // Mask a random subset (possibly all) with -inf.
  const int masked = *rc::gen::inRange(0, static_cast<int>(l.size()) + 1);
  for (int i = 0; i < masked; ++i) l[*rc::gen::inRange<std::size_t>(0, l.size())] = kNegInf;
  std::vector<Mp> z(l.begin(), l.end());
  const auto cuts = *rc::gen::container<std::vector<unsigned>>(256, rc::gen::arbitrary<unsigned>());
  std::size_t k = 0;
  auto cut = [&](std::size_t lo, std::size_t hi) {  // a split point in (lo, hi)
    return lo + 1 + cuts[k++ % cuts.size()] % (hi - lo - 1);
  };
  const auto st = tree_reduce(z, 0, z.size(), cut);
  // Merging with explicit identities anywhere changes nothing.
  const auto st2 = th::entropy_merge(th::entropy_identity<Mp>(),
                                     th::entropy_merge(st, th::entropy_identity<Mp>()));
  const Mp direct = sa::ref::entropy(l);
  RC_ASSERT(abs(th::entropy_of(st) - direct) <= Mp(sa::testing::mp_tolerance()));
  RC_ASSERT(th::entropy_of(st2) == th::entropy_of(st));
  const Mp lse = sa::ref::log_sum_exp(l);
  if (isinf(lse))
    RC_ASSERT(isinf(th::log_sum_exp_of(st)) && th::log_sum_exp_of(st) < 0);
  else
    RC_ASSERT(abs(th::log_sum_exp_of(st) - lse) <=
              Mp(sa::testing::mp_tolerance()) * (1 + abs(lse)));
}

RC_GTEST_PROP(StreamedEntropy, PushEqualsMergeOfSingletons, ()) {
  const auto l = *sa::testing::bounded_logits(50, -5, 10);
  auto a = th::entropy_identity<Mp>(), b = th::entropy_identity<Mp>();
  for (double x : l) {
    a = th::entropy_push(a, Mp(x));
    b = th::entropy_merge(b, th::entropy_state_of(Mp(x)));
  }
  RC_ASSERT(a.m == b.m && a.S == b.S && a.T == b.T);
}

TEST(StreamedEntropy, UniformLogitsGiveLogN) {
  for (int n : {1, 2, 3, 7, 64, 1000}) {
    const std::vector<double> l(static_cast<std::size_t>(n), 2.5);
    const auto p = sa::ref::softmax(l);
    for (const Mp& x : p) EXPECT_EQ(x, Mp(1) / Mp(n)) << "n=" << n;  // exactly the rounded 1/n
    EXPECT_LE(abs(sa::ref::streamed_entropy(l) - log(Mp(n))), Mp(sa::testing::mp_tolerance()));
    EXPECT_LE(abs(sa::ref::entropy(l) - log(Mp(n))), Mp(sa::testing::mp_tolerance()));
  }
}

TEST(StreamedEntropy, SpecialValues) {
  // Identity, fully masked, +inf limit, NaN.
  EXPECT_EQ(th::entropy_of(th::entropy_identity<double>()), 0.0);
  EXPECT_EQ(th::log_sum_exp_of(th::entropy_identity<double>()), kNegInf);
  auto s = th::entropy_identity<double>();
  for (double x : {kNegInf, kNegInf}) s = th::entropy_push(s, x);
  EXPECT_TRUE(th::is_identity(s));
  s = th::entropy_identity<double>();
  for (double x : {1.0, inf, 3.0, inf, inf}) s = th::entropy_push(s, x);
  EXPECT_DOUBLE_EQ(th::entropy_of(s), std::log(3.0));  // three items share the weight
  EXPECT_EQ(th::log_sum_exp_of(s), INFINITY);
  s = th::entropy_push(s, std::nan(""));
  EXPECT_TRUE(std::isnan(th::entropy_of(s)));
  EXPECT_TRUE(
      std::isnan(th::entropy_of(th::entropy_push(th::entropy_state_of(1.0), std::nan("")))));
}

// In double, rows sharing a common offset c. The stable form's absolute error
// is independent of c: each of log S and T/S (|T/S| <= log n, S in [1, n]) is
// computed with relative error <= (n + 2) u, so
//     |H^ - H| <= (n + 2) u (2 log n + 1).
// The tempting form (m + log S) - U/S subtracts two numbers of size |c|, so its
// error grows like |c| u; at c = 1e6 it must exceed that bound tenfold on some row.
TEST(StreamedEntropy, ShiftStableWhereTheTemptingFormCancels) {
  const double u = std::ldexp(1.0, -53);
  double worst_cancelling = 0;
  double bound = 0;
  for (double c : {0.0, 1e2, 1e4, 1e6}) {
    for (int row = 0; row < 20; ++row) {
      std::vector<double> l;
      for (int i = 0; i < 1000; ++i) l.push_back(c + 0.001 * ((i * 7919 + row * 104729) % 6007));
      const int n = static_cast<int>(l.size());
      bound = (n + 2) * u * (2 * std::log(n) + 1);
      const double exact = sa::ref::entropy(l).convert_to<double>();
      auto s = th::entropy_identity<double>();
      for (double x : l) s = th::entropy_push(s, x);
      EXPECT_LE(std::abs(th::entropy_of(s) - exact), bound) << "offset " << c << " row " << row;
      double m = -INFINITY, S = 0, U = 0;
      for (double x : l) m = std::max(m, x);
      for (double x : l) {
        S += std::exp(x - m);
        U += std::exp(x - m) * x;
      }
      if (c == 1e6)
        worst_cancelling = std::max(worst_cancelling, std::abs((m + std::log(S)) - U / S - exact));
    }
  }
  EXPECT_GT(worst_cancelling, 10 * bound)
      << "the cancelling form was expected to lose digits at c = 1e6";
}
