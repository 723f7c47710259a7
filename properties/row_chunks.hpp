// A row larger than one machine (issue 34, item 5; docs/scale-out.md, "Rows
// larger than one machine"): the reference's side. A row of n logits is cut
// into chunks; each shard computes, for its chunks, the reference's partial
// state (m, S, T) in MPFR, and the states are combined with the streamed-
// entropy merge of theory T6 — written here again in the reference's own
// precision, not taken from theory/streamed_entropy.hpp, which the kernels
// use: a kernel and its judge never share an implementation.
//
// For a chunk with logits x_j and temperature theta, z_j = x_j / theta:
//   m = max_j z_j,  S = sum_j e^(z_j - m),  T = sum_j (z_j - m) e^(z_j - m)
// and two states merge as (m = max(m1, m2), a_i = e^(m_i - m)):
//   S = S1 a1 + S2 a2,  T = (T1 + (m1 - m) S1) a1 + (T2 + (m2 - m) S2) a2,
// with lse = m + log S and H = log S - T / S. Every quantity is an MPFR
// number of the precision in force (ref::PrecisionScope), z_j and m
// included (x_j / theta is not rounded to double).
//
// The per-element check needs the whole row's normaliser, which no chunk
// has. Two phases: (1) each shard publishes its chunks' states; (2) the
// merge publishes the global state, and each element's exact weight
// e^(z_j - m) / S is computed from it (element_weight below), in the shard
// that holds the element, against the kernel's weight. A shard never judges
// an element before the global state exists, so no element is judged
// against a partial normaliser.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/mpfr.hpp"

namespace sa::props {

struct ChunkState {
  ref::Mp m = -std::numeric_limits<double>::infinity();
  ref::Mp S = 0, T = 0;
  std::int64_t n = 0;  // items in the chunk (a fully masked item, -inf, counts)
};

// The reference's state of one chunk.
inline ChunkState reference_chunk_state(const float* x, std::int64_t n, double theta) {
  ChunkState s;
  s.n = n;
  const ref::Mp th(theta);
  bool any = false;
  for (std::int64_t j = 0; j < n; ++j) {
    if (std::isinf(x[j]) && x[j] < 0) continue;
    const ref::Mp z = ref::Mp(x[j]) / th;
    if (!any || z > s.m) s.m = z;
    any = true;
  }
  if (!any) return s;  // every item masked: S = T = 0, m = -inf
  for (std::int64_t j = 0; j < n; ++j) {
    if (std::isinf(x[j]) && x[j] < 0) continue;
    const ref::Mp d = ref::Mp(x[j]) / th - s.m;
    const ref::Mp e = exp(d);
    s.S += e;
    s.T += d * e;
  }
  return s;
}

// T6's merge, in the reference's precision. The identity (S = 0) is neutral.
inline ChunkState merge_chunk_states(const ChunkState& a, const ChunkState& b) {
  if (a.S == 0) {
    ChunkState r = b;
    r.n += a.n;
    return r;
  }
  if (b.S == 0) {
    ChunkState r = a;
    r.n += b.n;
    return r;
  }
  ChunkState r;
  r.n = a.n + b.n;
  r.m = a.m > b.m ? a.m : b.m;
  const ref::Mp da = a.m - r.m, db = b.m - r.m;
  const ref::Mp ea = exp(da), eb = exp(db);
  r.S = a.S * ea + b.S * eb;
  r.T = (a.T + da * a.S) * ea + (b.T + db * b.S) * eb;
  return r;
}

inline ref::Mp state_lse(const ChunkState& s) { return s.m + log(s.S); }
inline ref::Mp state_entropy(const ChunkState& s) { return log(s.S) - s.T / s.S; }

// Phase 2: the exact weight of an element with logit x, given the row's
// global state.
inline ref::Mp element_weight(float x, double theta, const ChunkState& global) {
  if (std::isinf(x) && x < 0) return ref::Mp(0);
  return exp(ref::Mp(x) / ref::Mp(theta) - global.m) / global.S;
}

// A state as text that reads back to the same MPFR values at the same
// precision: "n m S T", each number with enough decimal digits for it.
inline std::string chunk_state_text(const ChunkState& s) {
  const auto digits =
      static_cast<std::streamsize>(ref::digits10_for_bits(ref::precision_bits()) + 3);
  std::ostringstream os;
  os << s.n << ' ' << s.m.str(digits, std::ios_base::scientific) << ' '
     << s.S.str(digits, std::ios_base::scientific) << ' '
     << s.T.str(digits, std::ios_base::scientific);
  return os.str();
}

inline ChunkState chunk_state_from_text(const std::string& text) {
  std::istringstream is(text);
  std::string m, S, T;
  ChunkState s;
  if (!(is >> s.n >> m >> S >> T))
    throw std::invalid_argument("chunk state \"" + text + "\": expected \"n m S T\"");
  s.m = ref::Mp(m);
  s.S = ref::Mp(S);
  s.T = ref::Mp(T);
  return s;
}

}  // namespace sa::props
