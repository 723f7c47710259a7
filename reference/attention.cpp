#include "reference/attention.hpp"

#include <cmath>
#include <limits>
#include <type_traits>

#include "reference/attention_row.hpp"
#include "reference/mpfr.hpp"
#include "reference/rounding.hpp"

namespace sa::ref {

bool key_visible(const AttentionCase& c, std::int64_t b, std::int64_t i, std::int64_t j) {
  if (!c.key_padding_mask.empty() && c.key_padding_mask[c.row_k(b, j)] == 0) return false;
  const std::int64_t off = c.top_left ? 0 : c.len_k(b) - c.len_q(b);
  const std::int64_t diag = i + off;  // the key aligned with query i
  const std::int64_t right = c.causal ? 0 : c.window_right;
  if (right >= 0 && j > diag + right) return false;
  if (c.window_left >= 0 && j < diag - c.window_left) return false;
  return true;
}

// The masks of interface 2's appendix, read element by element from the
// case's own packed tensors (MaskTensor::at): the query's block is i /
// block_q, the key's j / block_k; the tree's draft tokens are the last Lq keys.
bool key_visible(const AttentionCase& c, std::int64_t b, std::int64_t h, std::int64_t i,
                 std::int64_t j) {
  if (!key_visible(c, b, i, j)) return false;
  if (c.attn_mask.used() && c.attn_mask.at(b, h, i, j) == 0) return false;
  if (c.block_mask.used() && c.block_mask.at(b, h, i / c.block_q, j / c.block_k) == 0) return false;
  if (c.tree_mask.used()) {
    const std::int64_t first_draft = c.len_k(b) - c.len_q(b);
    if (j >= first_draft && c.tree_mask.at(b, h, i, j - first_draft) == 0) return false;
  }
  return true;
}

float score_bias(const AttentionCase& c, std::int64_t b, std::int64_t h, std::int64_t i,
                 std::int64_t j) {
  return c.attn_bias.used() ? c.attn_bias.at(b, h, i, j) : 0.0f;
}

namespace {

template <class T>
AttentionValues run(const AttentionCase& c) {
  c.validate();
  AttentionValues r;
  const auto rows = static_cast<std::size_t>(c.total_q() * c.heads_q);
  r.out.assign(rows * static_cast<std::size_t>(c.dv), 0.0);
  r.lse.assign(rows, 0.0);
  r.entropy.assign(rows, 0.0);
  r.beta.assign(rows, 1.0);
  detail::RowScratch<T> sc;
  detail::RowValuesT<T> v;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t i = 0; i < c.len_q(b); ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h) {
        detail::attention_row<T>(c, b, h, i, sc, v);
        if constexpr (std::is_same_v<T, Mp>) {
          // Saturated softcap scores: again at the precision they need when
          // the double rounding is not decided at this one.
          bool undecided = rounding_undecided(DType::float64, v.lse, 200) ||
                           rounding_undecided(DType::float64, v.entropy, 200);
          for (const Mp& x : v.out)
            undecided = undecided || rounding_undecided(DType::float64, x, 200);
          const unsigned bits = detail::row_precision_bits(c, b, h, i, precision_bits());
          if (undecided && bits > precision_bits()) {
            const PrecisionScope prec(bits);
            detail::RowScratch<T> sc2;
            detail::attention_row<T>(c, b, h, i, sc2, v);
          }
        }
        const auto o = static_cast<std::size_t>(c.row_q(b, i) * c.heads_q + h);
        for (std::int64_t x = 0; x < c.dv; ++x)
          r.out[o * static_cast<std::size_t>(c.dv) + static_cast<std::size_t>(x)] =
              static_cast<double>(v.out[static_cast<std::size_t>(x)]);
        r.lse[o] = static_cast<double>(v.lse);
        r.entropy[o] = static_cast<double>(v.entropy);
        r.beta[o] = static_cast<double>(v.beta);
      }
  return r;
}

}  // namespace

AttentionValues attention_v2(const AttentionCase& c) { return run<long double>(c); }

AttentionValues attention_exact(const AttentionCase& c) {
  precision_bits();
  return run<Mp>(c);
}

}  // namespace sa::ref
