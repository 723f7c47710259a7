// A row cut into chunks across shards (issue 34, item 5): the chunks' reference
// states (m, S, T), published as text and combined with theory T6's merge in
// MPFR (properties/row_chunks.hpp), give the whole row's log-sum-exp, entropy
// and every element's exact weight, whatever the cut and the merge order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "properties/row_chunks.hpp"

namespace {

using sa::props::ChunkState;

std::vector<float> draw_row(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, 4.0f);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (auto& v : x) v = d(g);
  x[17] = 20.0f;  // a spike: the chunk holding it has the row's maximum
  for (std::size_t j = 100; j < 110; ++j) x[j] = -INFINITY;  // masked items
  return x;
}

// Cuts [0, n) at `cuts` (sorted; repeats make empty chunks) and returns each
// chunk's state as a shard publishes it: text, read back.
std::vector<ChunkState> chunk_states(const std::vector<float>& x, std::vector<std::int64_t> cuts,
                                     double theta) {
  cuts.insert(cuts.begin(), 0);
  cuts.push_back(static_cast<std::int64_t>(x.size()));
  std::vector<ChunkState> out;
  for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
    const ChunkState s =
        sa::props::reference_chunk_state(x.data() + cuts[c], cuts[c + 1] - cuts[c], theta);
    out.push_back(sa::props::chunk_state_from_text(sa::props::chunk_state_text(s)));
  }
  return out;
}

ChunkState fold(const std::vector<ChunkState>& parts) {
  ChunkState acc;
  for (const auto& p : parts) acc = sa::props::merge_chunk_states(acc, p);
  return acc;
}

ChunkState tree(const std::vector<ChunkState>& parts, std::size_t lo, std::size_t hi) {
  if (hi - lo == 1) return parts[lo];
  const std::size_t mid = (lo + hi) / 2;
  return sa::props::merge_chunk_states(tree(parts, mid, hi), tree(parts, lo, mid));
}

TEST(RowChunks, MergedChunkStatesGiveTheWholeRow) {
  const sa::ref::PrecisionScope prec(128);
  const double theta = 0.75;
  const std::vector<float> x = draw_row(1 << 14, 34);
  const ChunkState whole = sa::props::reference_chunk_state(x.data(), 1 << 14, theta);
  // Uneven chunks, an empty one (5000 twice) and one of masked items only (100..110).
  const std::vector<ChunkState> parts = chunk_states(x, {3, 100, 110, 5000, 5000, 9001}, theta);
  ASSERT_EQ(parts.size(), 7u);
  EXPECT_EQ(parts[2].S, 0) << "the chunk of masked items only is the identity";
  for (const ChunkState& merged : {fold(parts), tree(parts, 0, parts.size())}) {
    EXPECT_EQ(merged.n, whole.n);
    const double lse = sa::props::state_lse(merged).convert_to<double>();
    const double H = sa::props::state_entropy(merged).convert_to<double>();
    EXPECT_EQ(lse, sa::props::state_lse(whole).convert_to<double>());
    EXPECT_EQ(H, sa::props::state_entropy(whole).convert_to<double>());
    // In MPFR the two agree to the precision's last bits, not just in double
    // (entropy is judged with absolute budgets: an absolute difference).
    const sa::ref::Mp diff =
        abs(sa::props::state_entropy(merged) - sa::props::state_entropy(whole));
    EXPECT_LT(diff.convert_to<double>(), std::ldexp(1.0, -110));
    EXPECT_GT(H, 0.05) << "a row whose entropy is not lost to cancellation";
    // Phase 2: every element's exact weight from the merged global state.
    std::int64_t differ = 0;
    double sum = 0;
    for (float v : x) {
      const double w = sa::props::element_weight(v, theta, merged).convert_to<double>();
      differ += w != sa::props::element_weight(v, theta, whole).convert_to<double>();
      sum += w;
    }
    EXPECT_EQ(differ, 0) << "weights from the merged state differ from the whole row's";
    EXPECT_NEAR(sum, 1.0, 1e-12);
  }
  // An independent, plain double evaluation of the whole row (no merge).
  double m = -INFINITY, S = 0, T = 0;
  for (float v : x) m = std::max(m, double(v) / theta);
  for (float v : x) {
    if (std::isinf(v)) continue;
    const double d = double(v) / theta - m, e = std::exp(d);
    S += e, T += d * e;
  }
  EXPECT_NEAR(sa::props::state_lse(fold(parts)).convert_to<double>(), m + std::log(S), 1e-12);
  EXPECT_NEAR(sa::props::state_entropy(fold(parts)).convert_to<double>(), std::log(S) - T / S,
              1e-10);
}

TEST(RowChunks, StateTextReadsBackExactly) {
  const sa::ref::PrecisionScope prec(128);
  const std::vector<float> x = draw_row(1000, 7);
  const ChunkState s = sa::props::reference_chunk_state(x.data(), 1000, 1.0);
  const ChunkState r = sa::props::chunk_state_from_text(sa::props::chunk_state_text(s));
  EXPECT_EQ(r.n, s.n);
  EXPECT_TRUE(r.m == s.m && r.S == s.S && r.T == s.T);
  EXPECT_THROW(sa::props::chunk_state_from_text("12 nonsense"), std::invalid_argument);
}

}  // namespace
