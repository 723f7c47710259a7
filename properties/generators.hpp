// Input generators of the property suite (RapidCheck generators with
// shrinking) and the deterministic materialisation of their values.
//
// A generated case is a small set of shrinkable *parameters* (distribution,
// size, spread, mask pattern, seed of the values, temperature, ...); the
// values are a pure function of them (materialise()), so a counterexample is
// reproduced from its printed parameters alone, and RapidCheck shrinks the
// parameters (smaller n, smaller spread, temperature 1, fewer rows). After
// that the suite's own loop shrinks the values themselves (shrink.hpp).
//
// Distributions (distributions() lists the names; theory.md T8 and
// bug-classes.md say why each exists):
//   uniform          U(-s, s), s in {0.5, 4, 16, 40}
//   gaussian         N(0, s^2), s in {0.1, 1, 3, 10}
//   spike            flat 0 background, one item at +s (s in {2, 8, 30, 90})
//   near_ties        c + k ulp(c) for small integers k (c random): near-equal logits
//   offset           N(0, s^2) + C, C in {+1e4, -1e4} (large common offsets)
//   fa3_outliers     N(0,1) + N(0,100) * Bernoulli(0.001) (FlashAttention-3's test input;
//                    N(0,100) read as variance 100, i.e. standard deviation 10)
//   onednn_overflow  a few values in [88, 90], the rest at the type's lowest finite value
//                    times min(1, theta), so that l/theta stays finite (oneDNN's softmax
//                    filler: catches a missing or absolute-value max shift)
//   masked           gaussian with -inf masks: random, tile-aligned and unaligned prefixes
//                    for tile widths 8..128, every other tile, or the whole row
//   special          gaussian with +inf and/or NaN entries (and masks)
// Values are rounded to the dtype under test (float32, bfloat16 or float16) after
// generation, so the reference sees exactly what the kernel sees.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "core/dtype.hpp"
#include "kernels/kernel.hpp"

namespace sa::props {

const std::vector<std::string>& distribution_names();

// The default row lengths: 1 to 4097, with every power of two from 8 to 4096
// and its neighbours (tail and tile-boundary bugs live there).
const std::vector<std::int64_t>& default_sizes();

struct RowParams {
  std::string dist = "gaussian";
  std::int64_t n = 1;
  int level = 0;             // spread / scale level (0 = mildest)
  int mask = 0;              // mask pattern for "masked" (see materialise)
  int tile = 8;              // tile width the mask pattern aligns to
  int rows = 1;              // rows in the batch
  int pad = 0;               // stride = n + pad
  int out_pad = 0;           // output stride = n + out_pad (kernel.h: out_stride may differ)
  bool in_place = false;     // call with in == out (kernel.h allows it); output stride = stride
  double temperature = 1.0;  // theta
  std::uint64_t seed = 1;    // of the values
  std::uint64_t aux = 0;     // property-specific choice (an index, a shift, a permutation seed)
  std::vector<float>
      explicit_values;  // when non-empty: the values (rows x n), set by value shrinking
};

// A row batch of the dtype's values (rounded), stride n + pad, called with
// output stride n + out_pad or in place (RowBatch::out_stride, in_place).
RowBatch materialise(const RowParams& p, DType t);

// One-line reproducible description: parameters, then the values (all of
// them up to `max_values`, else the first ones and a summary).
std::string describe(const RowParams& p, const RowBatch& b, std::size_t max_values = 48);

struct RowGenOptions {
  std::vector<std::string> distributions;  // empty: all
  std::vector<std::int64_t> sizes;         // empty: default_sizes()
  std::vector<double> temperatures;        // first is the one shrinking aims at
  int max_rows = 2;
  bool finite_only = false;  // no masks, +inf, NaN (for rules defined on finite data)
};

rc::Gen<RowParams> gen_rows(const RowGenOptions& o);

// Edge rows the differential properties check on every run, whatever the seed
// (values exact in bfloat16 and float16 where they are finite), so that no
// verdict on them depends on the seed: underflow to subnormal and to zero
// (flush-to-zero shows), bfloat16's lowest finite value beside the max, a
// single item, a 64-item ramp (a second rounding shows), a NaN among finite
// values and two +inf among finite values (kernel.h's special values).
std::vector<RowParams> edge_rows(double temperature);

// The value of x in the dtype (bfloat16, float16: rounded to nearest even).
float to_dtype(DType t, double x);

}  // namespace sa::props
