// The random attention_v2 cases of the property suite (properties/
// attention_v2.cpp), shared with the tests of the references that must hold
// on every case the suite draws (tests/reference/attention_cr_test.cpp).
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/attention_case.hpp"
#include "kernels/kernel.hpp"
#include "properties/suite.hpp"

namespace sa::props::detail {

// The random shape and features of one case; values come from `seed`.
struct AttnParams {
  std::string dist;
  std::int64_t batch = 1, heads_kv = 1, group = 1, d = 1, dv = 1, sq = 1, sk = 1;
  bool varlen = false, causal = false, top_left = false, alibi = false, sinks = false,
       key_pad = false, bhsd = false, adaptive = false;
  // With key_pad: left padding (Hugging Face's batched prompts) instead of
  // scattered masked keys: each sequence's first keys masked, a run of 0 to
  // all of them.
  bool left_pad = false;
  std::int64_t splits = 0;  // num_splits (0: none)
  // A fixed coverage case (attention_coverage.hpp): with varlen, the first
  // sequence has exactly sq queries and sk keys (so the length relation the
  // case was built for holds); the others are drawn as usual.
  bool plan = false;
  std::int64_t wl = -1, wr = -1, row_pad = 0, head_pad = 0;
  double softcap = 0;
  int descale = 0;  // fp8: index into {1, 0.5, 2, 0.375}
  // Paged KV (kernel.h block_table): tokens per page, 0 contiguous;
  // high_pages: physical page ids across 65,535 (tiny pages and head dims,
  // so the pool stays a few MB).
  std::int64_t page_size = 0;
  bool high_pages = false;
  // seqused_k: NaN keys in the buffer past each sequence's used ones (and,
  // with varlen, some sequences with queries and no used key); dense: a
  // varlen case of equal query lengths called with fixed lengths.
  bool seqused = false, dense = false;
  // Masks beyond causal and window (kernel.h; drawn only where declared).
  // bool_mask: 0 none, 1 [batch][heads][q][k], 2 [1][1][q][k] (broadcast
  // over batch and heads), 3 [batch][1][q][k] key-major, 4 [1][heads][q][k]
  // key-major. bias: 0 none, 1 [batch][heads][q][k], 2 relative (per head,
  // a function of i - j), 3 per-head captured scalar [1][heads][1][1], 4 per
  // key [batch][1][1][k], 5 [1][1][q][k] key-major. block_q, block_k: a
  // block-sparse mask of those blocks (0: none). tree: speculative
  // decoding's token tree over each sequence's last queries-many keys.
  int bool_mask = 0, bias = 0;
  std::int64_t block_q = 0, block_k = 0;
  bool tree = false;
  // Block scales (quantised inputs only): elements per scale, 0 none;
  // kPerRowScale: one scale per head row (the case's head_dim). scale_type:
  // 0 E8M0 (MXFP8, MXFP4), 1 e4m3 (NVFP4), 2 float32 (int8).
  std::int64_t scale_block = 0;
  int scale_type = 0;
  // MLA: V a prefix view of K (the call aliases v to k; dv <= d).
  bool v_in_k = false;
  bool descale_bh = false;  // fp8: descales per (sequence, kv head)
  std::uint64_t seed = 1;
};

// One line naming the parameters (for counterexamples).
std::string describe(const AttnParams& p);

// The domain a kernel declares for attention_v2 (sa_capabilities): the
// SA_ATTN_* features, the head dims, the length, batch and head limits. Cases
// are drawn inside it, so no drawn case is refused for a declared reason.
struct AttnDomain {
  std::uint32_t features = ~0u;         // SA_ATTN_* bits
  std::vector<std::int64_t> head_dims;  // empty: any
  std::int64_t max_head_dim = 0, max_seqlen_q = 0, max_seqlen_k = 0, max_batch = 0,
               max_heads = 0;     // 0: no limit
  std::uint32_t required = 0;     // SA_ATTN_* every case has (attention_required)
  std::uint32_t constraints = 0;  // SA_ATTN_ONLY_*
  std::int64_t head_dim_multiple = 0;
};
// Every feature of interface v2 except adaptive and split-KV (the random
// cases of the reference tests, which predate them).
// (Paged KV and seqused_k change only the call's memory, never the keys the
// reference sees: they are not drawn there either.)
inline constexpr std::uint32_t kClassicFeatures =
    ~(SA_ATTN_ADAPTIVE | SA_ATTN_SPLIT_KV | SA_ATTN_PAGED_KV | SA_ATTN_SEQUSED_K |
      SA_ATTN_BOOL_MASK | SA_ATTN_BIAS | SA_ATTN_BLOCK_MASK | SA_ATTN_TREE_MASK |
      SA_ATTN_BLOCK_SCALED | SA_ATTN_DESCALE_BH);
// The domain for input type t (the features declared for that type).
AttnDomain domain_of(const Kernel& k, AttnType t);

// Whether a case may draw `feature` (a name of attention_features()): the
// spec allows it and the kernel declares it.
bool feature_allowed(const AttentionShapes& s, const AttnDomain& dom, const char* feature);

// MLA head dims (d, dv): (576, 512) or (192, 128), `prefer` 0 or 1 first,
// the first pair the spec and the domain allow (feature mla, the dims
// listed and within max_head_dim and head_dim_multiple); (0, 0) if none.
std::pair<std::int64_t, std::int64_t> mla_dims(const AttentionShapes& s, const AttnDomain& dom,
                                               int prefer);

// Draws one case from the shapes `s` allows (the spec's [attention] table;
// the suite's defaults where it names nothing) inside the kernel's domain
// AttnParams::scale_block of a scale per head row (int8 per token and head).
inline constexpr std::int64_t kPerRowScale = 1 << 20;

// `dom`: every declared feature, descales and block scales when `fp8` (any
// quantised input type: fp8, fp4, int8; domain_of keeps the scale types
// of the type).
rc::Gen<AttnParams> gen_attention(bool fp8, const AttentionShapes& s,
                                  AttnDomain dom = AttnDomain{
                                      kClassicFeatures, {}, 0, 0, 0, 0, 0, 0, 0, 0});

// Moves a case into the domain: required features on, the constrained forms
// (bottom-right only, window_right 0, queries <= keys), head dims rounded
// down to the declared multiple. Shrinking and fixed cases pass through it.
void apply_domain(AttnParams& p, const AttnDomain& dom);

// The case's inputs for input type t (values representable in t; fp8
// inputs get a bfloat16 output type), drawn from p.seed.
AttentionCase materialise(const AttnParams& p, AttnType t);

}  // namespace sa::props::detail
