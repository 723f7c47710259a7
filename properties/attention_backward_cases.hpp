// The random attention_backward cases of the property suite
// (properties/backward.cpp), shared with the tests of the references that
// must hold on every case the suite draws
// (tests/reference/attention_backward_cr_test.cpp).
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/attention_case.hpp"
#include "properties/suite.hpp"

namespace sa::props::detail {

// The random shape and features of one case; values come from `seed`.
struct BwdParams {
  std::int64_t batch = 1, heads_kv = 1, group = 1, d = 1, dv = 1, sq = 1, sk = 1;
  bool varlen = false, causal = false, top_left = false, alibi = false, sinks = false,
       key_pad = false, bhsd = false;
  std::int64_t wl = -1, wr = -1, row_pad = 0;
  double softcap = 0;
  std::uint64_t seed = 1;
};

// One line naming the parameters (for counterexamples).
std::string describe(const BwdParams& p);

// Draws one case from the shapes `s` allows (the spec's [attention] table;
// the suite's defaults where it names nothing).
rc::Gen<BwdParams> gen_bwd(const AttentionShapes& s);

// The case's inputs for input type t (values representable in t) and its
// dout (N(0, 1) rounded to t), drawn from p.seed.
AttentionCase make_case(const BwdParams& p, AttnType t, std::vector<float>* dout);

}  // namespace sa::props::detail
