// Properties of batched attention (interface v2, sa_kernel.attention_v2):
// cases at real tile sizes with every feature, held against the v2 reference
// (reference/attention.hpp) by two rules, plus metamorphic properties that
// need no reference.
//
//   attention_v2.rounding            every output within its a-priori rounding
//                                    budget (float32-internal arithmetic; rule
//                                    attention_rounding, below)
//   attention_v2.flash_attention_2x  low-precision types: max|out - ref| <=
//                                    2 max|baseline - ref| + fwd_atol, the
//                                    baseline the same-dtype naive attention
//                                    (FlashAttention's rule, theory.md T8)
//   attention_v2.masked_never_leak   NaN and huge values under every mask
//                                    (causal, window, key padding) change no
//                                    output bit
//   attention_v2.gqa_equals_repeated GQA/MQA equals the same call with each
//                                    key/value head repeated (bitwise, or
//                                    within twice the rounding budget)
//   attention_v2.varlen_equals_separate  a packed varlen call equals one call
//                                    per sequence (same tolerance)
//   attention_v2.key_permutation     permuting the keys together with their
//                                    values (and key-padding bytes) changes
//                                    no output beyond twice the rounding budget
//                                    (position-dependent features off)
//   attention_v2.head_independence   a head's outputs do not move when every
//                                    other head's inputs change (same tolerance)
//   attention_v2.sink_equals_extra_key  a sink equals one more key with score
//                                    exactly the sink and value 0 (same
//                                    tolerance; sinks raised far above every
//                                    score included)
//   attention_v2.window_within_causal   causal with window_left = L equals the
//                                    window (L, 0) without causal (L = -1:
//                                    infinite), whatever window_right a causal
//                                    call carries (same tolerance)
//   attention_v2.fp8_saturation      quantised inputs (fp8, fp4, int8) at the
//                                    format's largest value (times the run's
//                                    block scale):
//                                    every output finite and within the
//                                    largest |v| of its sequence times
//                                    v_descale (convex combination)
//   attention_v2.nan_propagates      NaN in an unmasked query and key element
//                                    (fp8: the format's NaN code; fp4, int8:
//                                    a NaN block scale) makes every
//                                    output of the rows that see it NaN, and
//                                    no other row's
//   attention_v2.mask_equals_removed_keys  a row under the boolean, block
//                                    and tree masks equals the row computed
//                                    with only the keys it sees (their bias
//                                    kept), within twice its rounding budget
//   attention_v2.trivial_masks_change_nothing  an attn_mask of ones and an
//                                    attn_bias of zeros (one element, every
//                                    stride 0) change no output beyond twice
//                                    the rounding budget
//   attention_v2.paged_equals_contiguous  a paged call (block table, pages
//                                    in shuffled physical order) equals the
//                                    same case with contiguous keys (within
//                                    twice the rounding budget)
//   attention_v2.chunked_prefill_equals_prefill  a causal bottom-right
//                                    prefill cut into two query chunks, the
//                                    first with only the keys written so far
//                                    (the rest of its cache unwritten: NaN
//                                    past seqused_k), equals the one call
//                                    (within twice the rounding budget)
//   attention_v2.large_offsets       the same paged case with its pages past
//                                    2^31 elements of sparsely reserved pools
//                                    (rounding's budget: offsets need 64 bits)
//   attention_v2.cascade_equals_full shared-prefix (cascade) attention: prefix
//                                    and suffix calls with lse merged by the
//                                    kernel's merge_attention_states_n equal
//                                    the full reference (budget derived below)
//
// Cases are drawn inside the kernel's declared domain (features, head dims,
// lengths: domain_of), so adaptive temperature and split-KV are drawn when
// declared, and no case is wasted on a feature the kernel does not take.
//
// Cases outside the kernel's declared capabilities are not applicable: they
// are never run, never errors, never passes, and each verdict names them.
//
// One attention path: interface v1's single-head `attention` is the case of
// one sequence and one head, causal bottom-right, with the key mask as key
// padding. Each input type the v1 slot carries (float32, bfloat16) gets a
// second search through it (Entry, op attention: Kernel::attention makes
// each case one v1 call) inside that domain, judged by the same functions,
// reference and budgets; the properties of features v1 does not carry
// (GQA, varlen, heads, sinks, window, fp8) give it no verdict.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numbers>
#include <cstring>
#include <random>
#include <set>
#include <string_view>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "core/fp8.hpp"
#include "core/quant.hpp"
#include "kernels/naive/attention_v2.hpp"
#include "properties/attention_cases.hpp"
#include "properties/inline_inputs.hpp"
#include "properties/attention_coverage.hpp"
#include "properties/budgets.hpp"
#include "properties/plan.hpp"
#include "properties/checks.hpp"
#include "properties/suite_internal.hpp"
#include "reference/attention.hpp"
#include "theory/adaptive_temperature.hpp"

namespace sa::props::detail {
namespace {

using budget::u32;

}  // namespace

std::string describe(const AttnParams& p) {
  std::string r = "dist=" + p.dist + " batch=" + std::to_string(p.batch) +
                  " heads=" + std::to_string(p.heads_kv * p.group) + "/" +
                  std::to_string(p.heads_kv) + " sq=" + std::to_string(p.sq) +
                  " sk=" + std::to_string(p.sk) + " d=" + std::to_string(p.d) +
                  " dv=" + std::to_string(p.dv);
  if (p.varlen) r += " varlen";
  if (p.causal) r += p.top_left ? " causal(top-left)" : " causal(bottom-right)";
  if (p.wl >= 0 || p.wr >= 0)
    r += " window=(" + std::to_string(p.wl) + "," + std::to_string(p.wr) + ")";
  if (p.softcap > 0) r += " softcap=" + std::to_string(p.softcap);
  if (p.alibi) r += " alibi";
  if (p.sinks) r += " sinks";
  if (p.key_pad) r += p.left_pad ? " key_padding(left)" : " key_padding";
  if (p.bhsd) r += " bhsd";
  if (p.row_pad || p.head_pad)
    r += " pad=" + std::to_string(p.row_pad) + "/" + std::to_string(p.head_pad);
  if (p.descale) r += " descale#" + std::to_string(p.descale);
  if (p.scale_block)
    r += " block_scaled=" +
         (p.scale_block == kPerRowScale ? std::string("row") : std::to_string(p.scale_block)) +
         (p.scale_type == 1   ? "(e4m3)"
          : p.scale_type == 2 ? "(f32)"
                              : "");
  if (p.descale_bh) r += " descale_bh";
  if (p.adaptive) r += " adaptive";
  if (p.splits > 1) r += " splits=" + std::to_string(p.splits);
  if (p.page_size > 0)
    r += " paged=" + std::to_string(p.page_size) + (p.high_pages ? "(ids>65535)" : "");
  if (p.seqused) r += p.dense ? " seqused_k(dense)" : " seqused_k";
  if (p.bool_mask) r += " attn_mask#" + std::to_string(p.bool_mask);
  if (p.bias) r += " attn_bias#" + std::to_string(p.bias);
  if (p.block_q > 0)
    r += " block_mask(" + std::to_string(p.block_q) + "x" + std::to_string(p.block_k) + ")";
  if (p.tree) r += " tree_mask";
  if (p.v_in_k) r += " v=k[:dv]";
  if (p.plan) r += " fixed";
  return r + " seed=" + std::to_string(p.seed);
}

namespace {

// Head dims of the tile classes real kernels specialise (FlashAttention's
// test list), and query/key lengths that straddle 64-, 128- and 256-wide
// tiles, unequal both ways.
constexpr std::int64_t kHeadDims[] = {32, 40, 59, 64, 80, 96, 111, 128, 160, 192, 224, 256};
constexpr std::int64_t kSmallDims[] = {1, 3, 8, 16};
// Ordered from small to large, so shrinking (towards index 0) moves to
// shorter sequences while the failure holds.
constexpr std::int64_t kLengths[][2] = {
    {1, 1},       {7, 5},       {17, 40},   {40, 17},   {64, 65},   {65, 64}, {1, 239},
    {239, 1},     {128, 129},   {113, 203}, {127, 255}, {257, 256}, {799, 3}, {200, 1000},
    {1023, 1024}, {1024, 1023}, {33, 2049}, {2, 4097},  {3, 8191},  {1, 8192}};
constexpr std::int64_t kGroups[] = {1, 4, 8};
// Page sizes (FlashInfer's tests take 1, 5 and 16; serving stacks 16 to
// 256): powers of two and not, and above 128 where one page passes a
// 128-wide key tile.
constexpr std::int64_t kPageSizes[] = {16, 1, 5, 256, 7, 200, 64, 129, 128};
// Block-sparse masks' blocks (block_q x block_k): FlexAttention's 128 x 128
// default, non-square ones both ways, and small odd ones; lengths are drawn
// past one block so the last block of a row or column is partial.
constexpr std::int64_t kBlocks[][2] = {{128, 128}, {64, 128}, {128, 64}, {32, 16}, {7, 5}};

// Elements per block scale (OCP MX: 32).
constexpr std::int64_t kScaleBlocks[] = {32, 16, 8};
// int8 with float32 scales: per token and head (SageAttention's per-token
// K, vLLM's per-token-head KV cache), or per block of 32 or 64 elements.
constexpr std::int64_t kInt8ScaleBlocks[] = {kPerRowScale, 32, 64};

// Multiply-adds a case may cost the reference by default (keeps the default
// run short); a gate spec's [attention] max_work replaces it.
constexpr double kWorkCap = 8.0e6;

// SA_ATTN_* bit of each feature name of attention_features() (bhsd and
// strided share SA_ATTN_STRIDED).
std::uint32_t bit_of_feature(std::string_view f) {
  static const std::pair<const char*, std::uint32_t> bits[] = {
      {"varlen", SA_ATTN_VARLEN},
      {"causal", SA_ATTN_CAUSAL},
      {"window", SA_ATTN_WINDOW},
      {"softcap", SA_ATTN_SOFTCAP},
      {"alibi", SA_ATTN_ALIBI},
      {"sinks", SA_ATTN_SINKS},
      {"key_padding", SA_ATTN_KEY_PADDING},
      {"bhsd", SA_ATTN_STRIDED},
      {"strided", SA_ATTN_STRIDED},
      {"unequal_dv", SA_ATTN_UNEQUAL_HEAD_DIMS},
      {"gqa", SA_ATTN_GQA},
      {"adaptive", SA_ATTN_ADAPTIVE},
      {"split_kv", SA_ATTN_SPLIT_KV},
      {"paged_kv", SA_ATTN_PAGED_KV},
      {"seqused_k", SA_ATTN_SEQUSED_K},
      {"attn_mask", SA_ATTN_BOOL_MASK},
      {"attn_bias", SA_ATTN_BIAS},
      {"block_mask", SA_ATTN_BLOCK_MASK},
      {"tree_mask", SA_ATTN_TREE_MASK},
      {"block_scaled", SA_ATTN_BLOCK_SCALED},
      {"scale_e4m3", SA_ATTN_SCALE_E4M3},
      {"scale_f32", SA_ATTN_SCALE_F32},
      {"descale_bh", SA_ATTN_DESCALE_BH},
      {"mla", SA_ATTN_UNEQUAL_HEAD_DIMS}};
  for (const auto& [n, b] : bits)
    if (f == n) return b;
  return 0;
}

}  // namespace

bool feature_allowed(const AttentionShapes& s, const AttnDomain& dom, const char* feature) {
  return (dom.features & bit_of_feature(feature)) != 0 &&
         (!s.features ||
          std::find(s.features->begin(), s.features->end(), feature) != s.features->end());
}

std::pair<std::int64_t, std::int64_t> mla_dims(const AttentionShapes& s, const AttnDomain& dom,
                                               int prefer) {
  static const std::pair<std::int64_t, std::int64_t> kMla[] = {{576, 512}, {192, 128}};
  // (V a view of K has K's strides: the kernel must take any strides.)
  if (!feature_allowed(s, dom, "mla") || !(dom.features & SA_ATTN_STRIDED)) return {0, 0};
  auto ok = [&](std::int64_t x) {
    auto in = [x](const std::vector<std::int64_t>& l) {
      return l.empty() || std::find(l.begin(), l.end(), x) != l.end();
    };
    return in(s.head_dims) && in(dom.head_dims) &&
           (dom.max_head_dim <= 0 || x <= dom.max_head_dim) &&
           (dom.head_dim_multiple <= 1 || x % dom.head_dim_multiple == 0);
  };
  for (int i = 0; i < 2; ++i) {
    const auto m = kMla[(prefer + i) % 2];
    if (ok(m.first) && ok(m.second)) return m;
  }
  return {0, 0};
}

AttnDomain domain_of(const Kernel& k, AttnType t) {
  AttnDomain d;
  if (k.abi_version() < 2) return d;
  const sa_capabilities* cap = k.raw().capabilities;
  if (!cap) return d;
  d.features = k.attention_features(t);
  // Block scales with quantised inputs only, in the pairings of real
  // formats: fp8 E8M0 (MXFP8), fp4 E8M0 or e4m3 (MXFP4, NVFP4), int8 float32.
  const std::uint32_t keep = is_fp8(t)                 ? SA_ATTN_BLOCK_SCALED
                             : t == AttnType::fp4_e2m1 ? SA_ATTN_BLOCK_SCALED | SA_ATTN_SCALE_E4M3
                             : t == AttnType::int8     ? SA_ATTN_SCALE_F32
                                                       : 0u;
  d.features &= ~static_cast<std::uint32_t>(
      (SA_ATTN_BLOCK_SCALED | SA_ATTN_SCALE_E4M3 | SA_ATTN_SCALE_F32) & ~keep);
  if (!is_fp8(t)) d.features &= ~static_cast<std::uint32_t>(SA_ATTN_DESCALE_BH);  // fp8 only
  const Kernel::AttentionDomainCaps dc = k.attention_domain();
  d.required = dc.required & d.features;
  d.constraints = dc.constraints;
  d.head_dim_multiple = dc.head_dim_multiple > 1 ? dc.head_dim_multiple : 0;
  if (cap->head_dims)
    for (int i = 0; i < cap->num_head_dims; ++i)
      if (cap->max_head_dim <= 0 || cap->head_dims[i] <= cap->max_head_dim)
        d.head_dims.push_back(cap->head_dims[i]);
  d.max_head_dim = cap->max_head_dim;
  d.max_seqlen_q = cap->max_seqlen_q;
  d.max_seqlen_k = cap->max_seqlen_k;
  d.max_batch = cap->max_batch;
  d.max_heads = cap->max_heads;
  return d;
}

// Draws one case from the shapes `s` allows (the spec's [attention] table;
// the defaults above where it names nothing), inside the kernel's domain.
rc::Gen<AttnParams> gen_attention(bool fp8, const AttentionShapes& s, AttnDomain dom) {
  // Length pairs ordered by work, so shrinking (towards index 0) moves to
  // shorter sequences while the failure holds.
  // (kLengths is already in that order, by hand; a spec's list is sorted here.)
  std::vector<std::pair<std::int64_t, std::int64_t>> lengths = s.lengths;
  std::stable_sort(lengths.begin(), lengths.end(), [](const auto& a, const auto& b) {
    return a.first * a.second < b.first * b.second;
  });
  if (lengths.empty())
    for (const auto& L : kLengths) lengths.emplace_back(L[0], L[1]);
  // Inside the declared length limits: pairs beyond them are cut to the limit.
  for (auto& [lq, lk] : lengths) {
    if (dom.max_seqlen_q > 0) lq = std::min(lq, dom.max_seqlen_q);
    if (dom.max_seqlen_k > 0) lk = std::min(lk, dom.max_seqlen_k);
  }
  const std::vector<std::int64_t> groups =
      (dom.features & SA_ATTN_GQA) == 0
          ? std::vector<std::int64_t>{1}
          : (s.gqa_ratios.empty()
                 ? std::vector<std::int64_t>(std::begin(kGroups), std::end(kGroups))
                 : s.gqa_ratios);
  // Head dims: the spec's, else the kernel's declared list, else the tile
  // classes (and small dims a quarter of the time); never above max_head_dim.
  std::vector<std::int64_t> dims = !s.head_dims.empty() ? s.head_dims : dom.head_dims;
  if (!s.head_dims.empty() && !dom.head_dims.empty()) {  // the spec's dims the kernel takes
    std::erase_if(dims, [&](std::int64_t d) {
      return std::find(dom.head_dims.begin(), dom.head_dims.end(), d) == dom.head_dims.end();
    });
    if (dims.empty()) dims = dom.head_dims;
  }
  const bool own_dims = !dims.empty();
  std::vector<std::int64_t> tile_dims(std::begin(kHeadDims), std::end(kHeadDims)),
      small_dims(std::begin(kSmallDims), std::end(kSmallDims));
  const std::int64_t mult = dom.head_dim_multiple;
  for (auto* v : {&dims, &tile_dims, &small_dims})
    std::erase_if(*v, [&](std::int64_t d) {
      return (dom.max_head_dim > 0 && d > dom.max_head_dim) || (mult > 1 && d % mult != 0);
    });
  if (mult > 1 && small_dims.empty()) small_dims = {mult};
  if (!own_dims && small_dims.empty()) small_dims = {1};
  if (!own_dims && tile_dims.empty()) tile_dims = small_dims;
  if (own_dims && dims.empty()) dims = {mult > 1 ? mult : dom.max_head_dim};
  // Sequences with more queries than keys, where the kernel takes none: the
  // queries cut to the keys.
  if (dom.constraints & SA_ATTN_ONLY_Q_LE_K)
    for (auto& [lq, lk] : lengths) lq = std::min(lq, lk);
  return rc::gen::exec([fp8, s, dom, lengths, groups, dims, own_dims, tile_dims, small_dims] {
    AttnParams p;
    static const char* const dists[] = {"gaussian", "fa3_outliers", "small_int"};
    p.dist = dists[*rc::gen::inRange(0, 3)];
    std::size_t li = *rc::gen::inRange<std::size_t>(0, lengths.size());
    p.sq = lengths[li].first;
    p.sk = lengths[li].second;
    auto any_dim = [&] {
      return own_dims ? dims[*rc::gen::inRange<std::size_t>(0, dims.size())]
                      : tile_dims[*rc::gen::inRange<std::size_t>(0, tile_dims.size())];
    };
    const bool real_dims = own_dims || *rc::gen::inRange(0, 4) != 0;
    p.d = real_dims ? any_dim() : small_dims[*rc::gen::inRange<std::size_t>(0, small_dims.size())];
    p.dv = feature_allowed(s, dom, "unequal_dv") && *rc::gen::inRange(0, 5) == 4 ? any_dim() : p.d;
    p.group = groups[*rc::gen::inRange<std::size_t>(0, groups.size())];
    const bool batched = (dom.features & SA_ATTN_BATCHED) != 0;
    p.heads_kv = batched ? *rc::gen::inRange(1, 3) : 1;
    p.batch = batched ? *rc::gen::inRange(1, 4) : 1;
    if (!batched) p.group = 1;
    if (dom.max_batch > 0) p.batch = std::min(p.batch, dom.max_batch);
    while (dom.max_heads > 0 && p.heads_kv * p.group > dom.max_heads)
      (p.heads_kv > 1 ? p.heads_kv : p.group) /= 2;
    p.varlen = feature_allowed(s, dom, "varlen") && *rc::gen::inRange(0, 3) == 2;
    // Paged KV and seqused_k (drawn only where declared, so other kernels'
    // cases are drawn as before). Serving shapes: decode (one query per
    // sequence), speculative verification (2-8) and prefill as drawn; a page
    // above 128 tokens gets more keys than 128.
    p.page_size = feature_allowed(s, dom, "paged_kv") && *rc::gen::inRange(0, 2) == 1
                      ? kPageSizes[*rc::gen::inRange<std::size_t>(0, std::size(kPageSizes))]
                      : 0;
    // Ids across 65,535 need tiny head dims (a pool of 65,536 pages): only
    // where the kernel and the spec name no head dims of their own.
    const bool tiny_dims_ok =
        !own_dims && (dom.head_dim_multiple <= 1 || 8 % dom.head_dim_multiple == 0);
    if (p.page_size > 0 && tiny_dims_ok && *rc::gen::inRange(0, 4) == 3) {
      p.high_pages = true;
      p.page_size = *rc::gen::inRange(1, 4);
    }
    p.seqused = feature_allowed(s, dom, "seqused_k") && *rc::gen::inRange(0, 2) == 1;
    if (p.seqused && p.varlen) p.dense = *rc::gen::inRange(0, 2) == 1;
    // Block scales, of the types declared for the input type (domain_of):
    // E8M0 (MXFP8's and MXFP4's 32 elements per scale, and shorter runs,
    // 16, 8), e4m3 (NVFP4: 16), float32 (int8: per token and head, 32, 64).
    std::vector<int> kinds;
    if (feature_allowed(s, dom, "block_scaled")) kinds.push_back(0);
    if (feature_allowed(s, dom, "scale_e4m3")) kinds.push_back(1);
    if (feature_allowed(s, dom, "scale_f32")) kinds.push_back(2);
    if (fp8 && !kinds.empty() && *rc::gen::inRange(0, 2) == 1) {
      // (one kind: no draw, so fp8's cases are drawn as before)
      p.scale_type =
          kinds.size() > 1 ? kinds[*rc::gen::inRange<std::size_t>(0, kinds.size())] : kinds[0];
      if (p.scale_type == 0)
        p.scale_block = kScaleBlocks[*rc::gen::inRange<std::size_t>(0, std::size(kScaleBlocks))];
      else if (p.scale_type == 1)
        p.scale_block = 16;
      else
        p.scale_block =
            kInt8ScaleBlocks[*rc::gen::inRange<std::size_t>(0, std::size(kInt8ScaleBlocks))];
    }
    // FlashAttention 3's descales per (sequence, kv head), fp8 only.
    if (fp8 && feature_allowed(s, dom, "descale_bh") && *rc::gen::inRange(0, 2) == 1)
      p.descale_bh = true;
    if (p.page_size > 0 || p.seqused) {
      const int kind = *rc::gen::inRange(0, 3);
      if (kind == 1) p.sq = 1;
      if (kind == 2) p.sq = std::min<std::int64_t>(p.sq, *rc::gen::inRange(2, 9));
      if (p.page_size > 128 && p.sk <= 128) p.sk = p.page_size + 23;
    }
    // Masks beyond causal and window (drawn only where declared, so other
    // kernels' cases are drawn as before).
    if (feature_allowed(s, dom, "attn_mask") && *rc::gen::inRange(0, 3) == 2)
      p.bool_mask = *rc::gen::inRange(1, 5);
    if (feature_allowed(s, dom, "attn_bias") && *rc::gen::inRange(0, 3) == 2)
      p.bias = *rc::gen::inRange(1, 6);
    if (feature_allowed(s, dom, "block_mask") && *rc::gen::inRange(0, 3) == 2) {
      const auto* bl = kBlocks[*rc::gen::inRange<std::size_t>(0, std::size(kBlocks))];
      p.block_q = bl[0];
      p.block_k = bl[1];
      // Past one block both ways where the lengths allow (the last block
      // partial); lengths a spec names are kept.
      if (s.lengths.empty() && p.sk <= p.block_k &&
          (dom.max_seqlen_k == 0 || dom.max_seqlen_k > p.block_k + 37))
        p.sk = p.block_k + 37;
      if (s.lengths.empty() && p.sq > 1 && p.sq <= p.block_q &&
          (dom.max_seqlen_q == 0 || dom.max_seqlen_q > p.block_q + 21))
        p.sq = p.block_q + 21;
    }
    if (feature_allowed(s, dom, "tree_mask") && *rc::gen::inRange(0, 3) == 2) {
      p.tree = true;  // 2-8 draft tokens after a prefix
      p.sq = std::min<std::int64_t>(p.sq, *rc::gen::inRange(2, 9));
      p.sk = std::max<std::int64_t>(p.sk, p.sq);
    }
    // Shrink the batch, then the heads, then what the spec does not name (the
    // dims, else the lengths) until the case fits the cap.
    // Varlen sequences are drawn at 1..sq and 1..sk: a quarter of the work on average.
    auto work = [&] {
      return static_cast<double>(p.batch * p.heads_kv * p.group) * static_cast<double>(p.sq) *
             static_cast<double>(p.sk) * static_cast<double>(p.d + p.dv) / (p.varlen ? 4.0 : 1.0);
    };
    const double cap = s.max_work;
    while (work() > cap && p.batch > 1) --p.batch;
    while (work() > cap) {  // named GQA ratios are kept
      if (p.group > 1 && s.gqa_ratios.empty())
        p.group /= 2;
      else if (p.heads_kv > 1)
        --p.heads_kv;
      else
        break;
    }
    if (!own_dims) {
      while (work() > cap && p.d > 64) p.d = 64;
      while (work() > cap && p.dv > 64) p.dv = 64;
      while (work() > cap && p.d > 8) p.d = 8, p.dv = std::min<std::int64_t>(p.dv, 8);
    } else if (s.lengths.empty()) {
      while (work() > cap && li > 0) --li, p.sq = lengths[li].first, p.sk = lengths[li].second;
    }
    // A packed call is about several sequences: at least two (one may be empty).
    if (p.varlen && p.batch < 2 && (dom.max_batch == 0 || dom.max_batch >= 2)) p.batch = 2;
    if (p.high_pages) {  // a pool of 65,536 + pages stays a few MB
      const bool unequal = p.dv != p.d;
      p.d = std::min<std::int64_t>(p.d, 8);
      p.dv = unequal ? 2 * p.d : p.d;  // (8 and 16 stay unequal under a multiple of 8)
      p.heads_kv = 1;
      p.group = std::min<std::int64_t>(p.group, 4);
    }
    const int mask_kind = *rc::gen::inRange(0, 6);
    p.causal = feature_allowed(s, dom, "causal") && (mask_kind == 1 || mask_kind == 2);
    p.top_left = mask_kind == 2 || (mask_kind == 4 && *rc::gen::inRange(0, 2) == 1);
    if (feature_allowed(s, dom, "window") && mask_kind >= 3 && mask_kind <= 4) {
      p.wl = *rc::gen::inRange<std::int64_t>(-1, std::max<std::int64_t>(2, p.sk));
      p.wr = *rc::gen::inRange<std::int64_t>(-1, std::max<std::int64_t>(2, p.sk / 4));
    }
    // Every feature is drawn so that RapidCheck's shrinking (towards 0) turns
    // it off: a shrunk counterexample keeps only the features it needs.
    p.key_pad =
        feature_allowed(s, dom, "key_padding") && (mask_kind == 5 || *rc::gen::inRange(0, 6) == 5);
    p.left_pad = p.key_pad && *rc::gen::inRange(0, 2) == 1;
    p.softcap = feature_allowed(s, dom, "softcap") && *rc::gen::inRange(0, 4) == 3
                    ? 5.0 + *rc::gen::inRange(0, 46)
                    : 0.0;
    p.alibi = feature_allowed(s, dom, "alibi") && *rc::gen::inRange(0, 5) == 4;
    p.sinks = feature_allowed(s, dom, "sinks") && *rc::gen::inRange(0, 4) == 3;
    p.bhsd = feature_allowed(s, dom, "bhsd") && *rc::gen::inRange(0, 2) == 1;
    const bool strided = feature_allowed(s, dom, "strided");
    p.row_pad = strided && *rc::gen::inRange(0, 3) == 2 ? *rc::gen::inRange(1, 9) : 0;
    p.head_pad = strided && *rc::gen::inRange(0, 3) == 2 ? *rc::gen::inRange(1, 5) : 0;
    p.descale = fp8 ? *rc::gen::inRange(0, 4) : 0;
    p.adaptive = feature_allowed(s, dom, "adaptive") && *rc::gen::inRange(0, 4) == 3;
    // Split-KV: 2 or 3 parts, or more parts than some sequences have keys
    // (empty parts).
    static const std::int64_t kSplits[] = {0, 2, 3, 8, 64};
    p.splits = feature_allowed(s, dom, "split_kv") && *rc::gen::inRange(0, 3) == 2
                   ? kSplits[*rc::gen::inRange(1, 5)]
                   : 0;
    p.seed = *rc::gen::noShrink(rc::gen::inRange<std::uint64_t>(1, std::uint64_t(1) << 53));
    // MLA (DeepSeek's latent attention, FlashMLA): head dims 576/512 or
    // 192/128, many query heads over one latent key/value head, V most often
    // a prefix view of K; decode-like lengths keep the work within the cap.
    // Drawn last, and only where declared, so other cases are drawn as before.
    if (!p.high_pages && mla_dims(s, dom, 0).first > 0 && *rc::gen::inRange(0, 6) == 5) {
      const auto m = mla_dims(s, dom, *rc::gen::inRange(0, 2));
      p.d = m.first;
      p.dv = m.second;
      p.heads_kv = 1;
      if (batched && (dom.features & SA_ATTN_GQA) && s.gqa_ratios.empty()) p.group = 16;
      while (dom.max_heads > 0 && p.group > dom.max_heads) p.group /= 2;
      p.sq = std::min<std::int64_t>(p.sq, 4);
      p.v_in_k = *rc::gen::inRange(0, 4) != 0;
      while (work() > cap && p.group > 1 && s.gqa_ratios.empty()) p.group /= 2;
      while (work() > cap && p.batch > (p.varlen ? 2 : 1)) --p.batch;
      while (work() > cap && p.sk > 1) p.sk /= 2;
    }
    apply_domain(p, dom);
    return p;
  });
}

void apply_domain(AttnParams& p, const AttnDomain& dom) {
  const std::uint32_t r = dom.required;
  if (r & SA_ATTN_CAUSAL) p.causal = true;
  if ((r & SA_ATTN_WINDOW) && p.wl < 0 && p.wr < 0) p.wl = std::max<std::int64_t>(1, p.sk / 3);
  if ((r & SA_ATTN_SOFTCAP) && !(p.softcap > 0)) p.softcap = 30;
  if (r & SA_ATTN_ALIBI) p.alibi = true;
  if (r & SA_ATTN_SINKS) p.sinks = true;
  if (r & SA_ATTN_KEY_PADDING) p.key_pad = true;
  if (r & SA_ATTN_VARLEN) p.varlen = true;
  if (r & SA_ATTN_ADAPTIVE) p.adaptive = true;
  if ((r & SA_ATTN_PAGED_KV) && p.page_size == 0) p.page_size = 16;
  if (r & SA_ATTN_SEQUSED_K) p.seqused = true;
  if ((r & SA_ATTN_BOOL_MASK) && p.bool_mask == 0) p.bool_mask = 1;
  if ((r & SA_ATTN_BIAS) && p.bias == 0) p.bias = 1;
  if ((r & SA_ATTN_BLOCK_MASK) && p.block_q == 0) p.block_q = p.block_k = 128;
  if (r & SA_ATTN_TREE_MASK) p.tree = true;
  if ((r & SA_ATTN_BLOCK_SCALED) && p.scale_block == 0) p.scale_block = 32, p.scale_type = 0;
  if ((r & SA_ATTN_SCALE_E4M3) && p.scale_block == 0) p.scale_block = 16, p.scale_type = 1;
  if ((r & SA_ATTN_SCALE_F32) && p.scale_block == 0) p.scale_block = kPerRowScale, p.scale_type = 2;
  if (r & SA_ATTN_DESCALE_BH) p.descale_bh = true;
  if (dom.constraints & SA_ATTN_ONLY_BOTTOM_RIGHT) p.top_left = false;
  if ((dom.constraints & SA_ATTN_ONLY_WINDOW_RIGHT_0) && (p.wl >= 0 || p.wr >= 0)) p.wr = 0;
  if (dom.constraints & SA_ATTN_ONLY_Q_LE_K) p.sq = std::min(p.sq, p.sk);
  if (dom.head_dim_multiple > 1) {
    const std::int64_t m = dom.head_dim_multiple;
    p.d = std::max(m, p.d / m * m);
    p.dv = std::max(m, p.dv / m * m);
  }
}

namespace {

float round_to(AttnType t, double x) {
  const float f = static_cast<float>(x);
  switch (t) {
    case AttnType::bfloat16:
      return round_to_bf16(f);
    case AttnType::float16:
      return round_to_f16(f);
    default:  // float32 as is; the quantised types by core/quant.hpp's grid
      return round_to_elem(t, f);
  }
}

// Spread of the values drawn for q and k (qk) or v of input type t: fp8
// kernels see pre-scaled data; e2m1 and int8 values fill their grids.
double spread_of(AttnType t, bool qk) {
  switch (t) {
    case AttnType::fp8_e4m3:
    case AttnType::fp8_e5m2:
      return qk ? 4.0 : 1.0;
    case AttnType::fp4_e2m1:
      return 2.0;
    case AttnType::int8:
      return 40.0;
    default:
      return 1.0;
  }
}

}  // namespace

AttentionCase materialise(const AttnParams& p, AttnType t) {
  AttentionCase c;
  c.qkv = t;
  c.out_type = is_quantised(t) ? AttnType::bfloat16 : t;
  c.batch = p.batch;
  c.heads_kv = p.heads_kv;
  c.heads_q = p.heads_kv * p.group;
  // fp4 e2m1 (two per byte): head dims and padding even.
  const std::int64_t even = t == AttnType::fp4_e2m1 ? 1 : 0;
  c.d = p.d + (p.d & even);
  c.dv = p.dv + (p.dv & even);
  std::mt19937_64 g(p.seed);
  if (p.varlen) {
    // Lengths up to the pair's, some sequences empty: no queries (and half
    // of those no keys either), or, one in eight after the first, queries
    // and no keys (kernel.h: each of its query rows sees nothing: out 0, lse
    // -inf, or the sink's logit with sinks).
    c.cu_q = {0};
    c.cu_k = {0};
    for (std::int64_t b = 0; b < p.batch; ++b) {
      const bool empty = b > 0 && g() % 4 == 0;
      std::int64_t lq = empty ? 0 : 1 + static_cast<std::int64_t>(g() % p.sq);
      const bool no_keys = empty ? g() % 2 == 1 : b > 0 && g() % 8 == 0;
      std::int64_t lk = no_keys ? 0 : 1 + static_cast<std::int64_t>(g() % p.sk);
      if (p.plan && b == 0) lq = p.sq, lk = p.sk;
      // seqused_k: more sequences with queries and no used key (a cache
      // whose keys are all past seqused_k); dense calls: equal query lengths.
      if (p.seqused && b > 0 && g() % 4 == 0) lk = 0;
      if (p.dense) lq = p.sq;
      c.cu_q.push_back(c.cu_q.back() + static_cast<std::int32_t>(lq));
      c.cu_k.push_back(c.cu_k.back() + static_cast<std::int32_t>(lk));
    }
  } else {
    c.seqlen_q = p.sq;
    c.seqlen_k = p.sk;
  }
  std::normal_distribution<double> n01(0.0, 1.0);
  auto value = [&](double spread) {
    if (p.dist == "small_int") {
      // Sparse small integers times a power of two: exact in every type.
      const std::int64_t r = static_cast<std::int64_t>(g() % 8);
      return r < 5 ? 0.0 : std::ldexp(static_cast<double>(static_cast<int>(g() % 7) - 3), -1);
    }
    double x = n01(g) * spread;
    if (p.dist == "fa3_outliers" && g() % 64 == 0) x *= 10.0;
    return x;
  };
  static const float descales[] = {1.0f, 0.5f, 2.0f, 0.375f};
  const double qk_spread = spread_of(t, true), v_spread = spread_of(t, false);
  for (std::int64_t i = 0; i < c.total_q() * c.heads_q * c.d; ++i)
    c.q.push_back(round_to(t, value(qk_spread)));
  for (std::int64_t i = 0; i < c.total_k() * c.heads_kv * c.d; ++i)
    c.k.push_back(round_to(t, value(qk_spread)));
  for (std::int64_t i = 0; i < c.total_k() * c.heads_kv * c.dv; ++i)
    c.v.push_back(round_to(t, value(v_spread)));
  // MLA: V the first dv elements of each key vector (the call aliases them).
  if (p.v_in_k && c.dv <= c.d) {
    c.v_in_k = true;
    for (std::int64_t r = 0; r < c.total_k() * c.heads_kv; ++r)
      std::copy_n(c.k.begin() + r * c.d, c.dv, c.v.begin() + r * c.dv);
  }
  if (is_quantised(t)) {
    // int8 without block scales: integers up to about 127 times a tensor
    // descale near 2^-5 (per-tensor int8 quantisation).
    const float unit = t == AttnType::int8 && p.scale_block == 0 ? 0x1p-5f : 1.0f;
    c.q_descale = unit * descales[p.descale];
    c.k_descale = unit * descales[(p.descale + 1) % 4];
    c.v_descale = unit * descales[(p.descale + 2) % 4];
  }
  c.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.d)));
  c.causal = p.causal;
  c.top_left = p.top_left;
  c.window_left = p.wl;
  c.window_right = p.wr;
  c.softcap = p.softcap;
  if (p.alibi)
    for (std::int64_t h = 0; h < c.heads_q; ++h)
      c.alibi_slopes.push_back(std::ldexp(1.0f, -static_cast<int>(1 + (8 * (h + 1)) / c.heads_q)));
  if (p.sinks)
    for (std::int64_t h = 0; h < c.heads_q; ++h) c.sinks.push_back(static_cast<float>(n01(g)));
  if (p.key_pad) {
    c.key_padding_mask.assign(static_cast<std::size_t>(c.total_k()), 1);
    for (auto& m : c.key_padding_mask) m = g() % 5 == 0 ? 0 : 1;
    if (p.left_pad) {  // (its own generator: the case's other values stay as they were)
      std::mt19937_64 lp(p.seed ^ 0x1ef7'9add'0000ull);
      for (std::int64_t b = 0; b < c.batch; ++b) {
        const std::int64_t n = c.len_k(b), k0 = c.row_k(b, 0);
        // A partial run of at least one key; one sequence in six wholly padded.
        const std::int64_t pad =
            n == 0 || lp() % 6 == 0 ? n : 1 + static_cast<std::int64_t>(lp() % ((n + 1) / 2));
        for (std::int64_t j = 0; j < n; ++j)
          c.key_padding_mask[static_cast<std::size_t>(k0 + j)] = j < pad ? 0 : 1;
      }
    }
  }
  if (p.scale_block > 0 && is_quantised(t) && p.scale_type != 0) {
    // e4m3 and float32 block scales (NVFP4, int8): each run of a head's row
    // times its own scale s, one of its elements the format's largest (+-6,
    // +-127), so that the call's rule (core/quant.hpp run_scale) finds s
    // again: s = amax / 6 an e4m3 value (2^-3..0.9375), or s = amax / 127
    // in [2^-9, 2^-5) with 16 mantissa bits (int8 times s is exact in float32); its own
    // generator (the other values stay as they were).
    c.scale_type = p.scale_type == 1 ? ScaleType::e4m3 : ScaleType::f32;
    c.scale_block = p.scale_block == kPerRowScale ? c.d : p.scale_block;
    std::mt19937_64 bs(p.seed ^ 0x5ca1'e4f3'2000ull);
    auto scale_runs = [&](std::vector<float>& x, std::int64_t dim) {
      const float mx = quant_max(t);
      for (std::size_t r0 = 0; r0 < x.size(); r0 += static_cast<std::size_t>(dim))
        for (std::int64_t b0 = 0; b0 < dim; b0 += c.scale_block) {
          float s;
          if (c.scale_type == ScaleType::e4m3)  // e4m3 codes 0x20..0x37: 2^-3 .. 0.9375
            s = fp8_to_float(static_cast<std::uint8_t>(0x20 + bs() % 0x18), Fp8Format::e4m3);
          else
            s = std::ldexp(static_cast<float>(0x8000 + bs() % 0x8000),
                           -21 - static_cast<int>(bs() % 4));
          const std::int64_t n = std::min(dim, b0 + c.scale_block) - b0;
          const std::int64_t top =
              b0 + static_cast<std::int64_t>(bs() % static_cast<std::uint64_t>(n));
          for (std::int64_t i = b0; i < b0 + n; ++i) {
            float& e = x[r0 + static_cast<std::size_t>(i)];
            if (i == top) e = bs() % 2 ? mx : -mx;
            e *= s;
          }
        }
    };
    scale_runs(c.q, c.d);
    scale_runs(c.k, c.d);
    scale_runs(c.v, c.dv);
  } else if (p.scale_block > 0 && is_quantised(t)) {
    // Block scales: each run of scale_block elements of a head's row times
    // its own power of two (its own generator: the other values stay as
    // they were), q and k within 2^+-3, v within 2^+-6.
    c.scale_block = p.scale_block;
    std::mt19937_64 bs(p.seed ^ 0xb10c'5ca1'e000ull);
    auto scale_runs = [&](std::vector<float>& x, std::int64_t dim, int range) {
      for (std::size_t r0 = 0; r0 < x.size(); r0 += static_cast<std::size_t>(dim))
        for (std::int64_t b0 = 0; b0 < dim; b0 += p.scale_block) {
          const int e = static_cast<int>(bs() % static_cast<std::uint64_t>(2 * range + 1)) - range;
          for (std::int64_t i = b0; i < std::min(dim, b0 + p.scale_block); ++i)
            x[r0 + static_cast<std::size_t>(i)] =
                std::ldexp(x[r0 + static_cast<std::size_t>(i)], e);
        }
    };
    scale_runs(c.q, c.d, 3);
    scale_runs(c.k, c.d, 3);
    scale_runs(c.v, c.dv, 6);
  }
  if (p.descale_bh && is_fp8(t)) {
    // Descales per (sequence, kv head): each slab of q (a group's query
    // heads), k and v of one sequence and kv head times its own power of two
    // within 2^+-5 (its own generator), so a descale read for the wrong
    // sequence or head, or not at all, moves scores or outputs by 2x or more.
    // With V a view of K, v's slab takes k's factor (the call aliases them).
    c.descale_bh = true;
    std::mt19937_64 ds(p.seed ^ 0xde5c'a1eb'0000ull);
    auto factor = [&] { return static_cast<int>(ds() % 11) - 5; };
    const std::int64_t group = c.heads_q / c.heads_kv;
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t g = 0; g < c.heads_kv; ++g) {
        const int eq = factor(), ek = factor(), ev = c.v_in_k ? ek : factor();
        for (std::int64_t i = 0; i < c.len_q(b); ++i)
          for (std::int64_t h = g * group; h < (g + 1) * group; ++h)
            for (std::int64_t x = 0; x < c.d; ++x) {
              float& e = c.q[static_cast<std::size_t>((c.row_q(b, i) * c.heads_q + h) * c.d + x)];
              e = std::ldexp(e, eq);
            }
        for (std::int64_t j = 0; j < c.len_k(b); ++j) {
          const std::int64_t r = c.row_k(b, j) * c.heads_kv + g;
          for (std::int64_t x = 0; x < c.d; ++x)
            c.k[static_cast<std::size_t>(r * c.d + x)] =
                std::ldexp(c.k[static_cast<std::size_t>(r * c.d + x)], ek);
          for (std::int64_t x = 0; x < c.dv; ++x)
            c.v[static_cast<std::size_t>(r * c.dv + x)] =
                std::ldexp(c.v[static_cast<std::size_t>(r * c.dv + x)], ev);
        }
      }
  }
  c.layout = p.bhsd ? AttnLayout::bhsd : AttnLayout::bshd;
  c.row_pad = p.row_pad + (p.row_pad & even);
  c.head_pad = p.head_pad + (p.head_pad & even);
  c.adaptive = p.adaptive;
  c.num_splits = p.splits;
  // Drawn after every other value, so the rest of a case is the same paged or not.
  if (p.seqused) {
    for (std::int64_t b = 0; b < c.batch; ++b) {
      const std::uint64_t r = g();
      c.kv_extra.push_back(r % 3 == 0 ? 0 : 1 + static_cast<std::int32_t>((r >> 8) % 40));
    }
    c.dense_call = p.dense && c.varlen();
  }
  if (p.page_size > 0) {
    c.page_size = p.page_size;
    c.page_seed = g() >> 20;  // below 2^53: exact in a case file's numbers
    if (p.high_pages) c.page_id_base = 65536 - 1 - static_cast<std::int64_t>(g() % 8);
  }
  // Masks beyond causal and window, last (the rest of a case is the same
  // with or without them). Extents: the largest lengths, 1 where broadcast.
  const std::int64_t mq = std::max<std::int64_t>(c.max_len_q(), 1),
                     mk = std::max<std::int64_t>(c.max_len_k(), 1);
  auto shape = [&](MaskTensor& m, bool b, bool h, std::int64_t nq, std::int64_t nk, bool kt) {
    m.nb = b ? c.batch : 1;
    m.nh = h ? c.heads_q : 1;
    m.nq = nq;
    m.nk = nk;
    m.kt = kt;
    m.v.assign(static_cast<std::size_t>(m.nb * m.nh * m.nq * m.nk), 0.0f);
  };
  if (p.bool_mask) {
    const int kind = p.bool_mask;
    shape(c.attn_mask, kind == 1 || kind == 3, kind == 1 || kind == 4, mq, mk, kind >= 3);
    // A quarter of the keys masked; one row in eight masked whole.
    for (std::size_t r = 0; r < c.attn_mask.v.size(); r += static_cast<std::size_t>(mk)) {
      const bool whole = g() % 8 == 0;
      for (std::int64_t j = 0; j < mk; ++j)
        c.attn_mask.v[r + static_cast<std::size_t>(j)] = whole || g() % 4 == 0 ? 0.0f : 1.0f;
    }
  }
  if (p.bias) {
    const int kind = p.bias;
    MaskTensor& m = c.attn_bias;
    auto draw = [&] { return static_cast<float>(n01(g) * 1.5); };
    if (kind == 1) shape(m, true, true, mq, mk, false);
    if (kind == 2) shape(m, false, true, mq, mk, false);
    if (kind == 3) shape(m, false, true, 1, 1, false);
    if (kind == 4) shape(m, true, false, 1, mk, false);
    if (kind == 5) shape(m, false, false, mq, mk, true);
    if (kind == 2) {  // relative: bias[h][i][j] = table[h][i - j + mk - 1]
      for (std::int64_t h = 0; h < m.nh; ++h) {
        std::vector<float> table(static_cast<std::size_t>(mq + mk));
        for (float& x : table) x = draw();
        for (std::int64_t i = 0; i < mq; ++i)
          for (std::int64_t j = 0; j < mk; ++j)
            m.v[static_cast<std::size_t>((h * mq + i) * mk + j)] =
                table[static_cast<std::size_t>(i - j + mk - 1)];
      }
    } else {
      for (float& x : m.v) x = draw();
    }
  }
  if (p.block_q > 0) {
    c.block_q = p.block_q;
    c.block_k = p.block_k;
    const bool per = g() % 2 == 0;
    shape(c.block_mask, per, per, (mq + p.block_q - 1) / p.block_q,
          (mk + p.block_k - 1) / p.block_k, g() % 2 == 0);
    for (float& x : c.block_mask.v) x = g() % 3 == 0 ? 0.0f : 1.0f;
  }
  if (p.tree) {
    // Per sequence (and, half the time, per head) a random token tree over
    // the sequence's queries: query i sees draft token t iff t is i or an
    // ancestor of i (parent[t] < t).
    const bool per_head = g() % 2 == 0;
    shape(c.tree_mask, true, per_head, mq, mq, false);
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t h = 0; h < c.tree_mask.nh; ++h) {
        const std::int64_t lq = c.len_q(b);
        float* t = c.tree_mask.v.data() + (b * c.tree_mask.nh + h) * mq * mq;
        for (std::int64_t i = 0; i < lq; ++i) {
          std::int64_t pa = -1;  // a child of the prefix (a root), or of an earlier token
          if (i > 0) {
            const auto parent = static_cast<std::int64_t>(g() % static_cast<std::uint64_t>(i));
            pa = g() % 4 == 0 ? -1 : parent;
          }
          if (pa >= 0)
            for (std::int64_t x = 0; x < lq; ++x) t[i * mq + x] = t[pa * mq + x];
          t[i * mq + i] = 1.0f;
        }
      }
  }
  return c;
}

namespace {

// Unit roundoff of a storage type.
double unit_of(AttnType t) {
  switch (t) {
    case AttnType::float32:
      return 0x1p-24;
    case AttnType::bfloat16:
      return 0x1p-8;
    case AttnType::float16:
      return 0x1p-11;
    case AttnType::fp8_e4m3:
      return 0x1p-4;
    case AttnType::fp8_e5m2:
      return 0x1p-3;
    // fp4 and int8 kernels quantise P to fp8 at most (SageAttention 2,
    // NVFP4 attention): e4m3's unit roundoff.
    case AttnType::fp4_e2m1:
    case AttnType::int8:
      return 0x1p-4;
  }
  return 1;
}

// The output types (fp8 is never one) as the budgets' storage types.
DType dtype_of_output(AttnType t) {
  return t == AttnType::bfloat16  ? DType::bfloat16
         : t == AttnType::float16 ? DType::float16
                                  : DType::float32;
}

// The a-priori budget of one query row (rule attention_rounding). A kernel
// computing in float32 (every score, exp, sum and P V product rounded to
// float32, exp/log/tanh faithful) with exact scores s_j, spread delta over the
// visible keys (and the sink), n live items:
//   score error  E_s = (d + 2) u M_j + 3 u |s_j|  [+ 4 u c for softcap c:
//                tanh, the two scalings] [+ 2 u |ALiBi term|] [+ 2 u (|bias| + |s_j|)
//                for attn_bias: one float32 addition], M_j = |scale| sum |q k|
//   weights      relative u (4 + (n - 1) + 3 delta) + 2 max E_s  (budgets.hpp, T7)
//   [fp8 inputs: P may be quantised to the input format before P V: + u_fp8]
//   [low_precision_p declared, bfloat16/float16 inputs: P rounded to the input
//    type before P V, the denominator perhaps summed from the rounded P:
//    + 2 u_t (conventions.hpp); undeclared, out_lp_extra holds that amount so
//    a failure within it names the convention]
//   out_c        P_c (weights' relative error + (n + 1) u), P_c = sum p_j |v_jc| |v_descale|,
//                plus the output's rounding (half an ulp; 1 ulp for float32)
//   lse          u (n + 3 + delta) + max E_s + u |lse|
//   entropy      budgets.hpp's entropy_abs with the weights' error, + 2 E_s (1 + H)
// Adaptive temperature (beta = beta(H) of the entropy above, kernel.h): the
// kernel's H is within H_abs, so its beta within dB = budgets.hpp's beta_abs;
// the weights exp(beta (s_j - m)) then carry beta times the score errors and
// 2 delta dB from beta's error, plus 2 beta max|s| u for forming beta s
// (the same terms as interface v1's adaptive attention, properties/attention.cpp);
// lse = beta m + log S gets beta E_s + dB max|s|; the entropy output is the
// one before the correction (its budget above).
// Split-KV (num_splits = n_p > 1): each part's weights exp(s_j - m_p) are
// rescaled by exp(m_p - m) when the parts are merged: one more exponential
// (faithful, u) of an argument with error up to delta u, and one product
// (u): + (2 + delta) u relative on every weight; the merged numerators and
// sums add the n_p parts: + n_p u on out and lse. Any summation order is
// already within the (n - 1) u the single-pass budget counts.
struct RowBudget {
  std::vector<double> out_abs;
  std::vector<double> out_lp_extra;  // 2 u_t P_c where low_precision_p is undeclared (else empty)
  double lse_abs = 0, H_abs = 0, beta_abs = 0;
  bool masked = true;
  bool fully_masked = false;  // no visible key and no sink: every score -inf
  std::int64_t seq = 0;       // the row's sequence (for finite_mask's hull)
  // alibi_lse_shift: beta c, c = slope_h (i + off) on a causal row without a
  // left window (conventions.hpp); 0 elsewhere.
  double lse_shift = 0;
  // lse_without_sink: log sum_j exp(beta s_j) over the visible keys only
  // (-inf with none), formed in double from the row's scores, and the error
  // of that evaluation; set on rows of a case with sinks.
  bool has_sink = false;
  double lse_keys = 0, lse_keys_err = 0;
};

std::vector<RowBudget> attention_budgets(const AttentionCase& c, const ref::AttentionValues& r) {
  std::vector<RowBudget> out(static_cast<std::size_t>(c.total_q() * c.heads_q));
  const double u = u32;
  const double scale = std::abs(c.scale * c.q_descale * c.k_descale);
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t Lq = c.len_q(b), Lk = c.len_k(b);
    const std::int64_t off = c.top_left ? 0 : Lk - Lq;
    for (std::int64_t i = 0; i < Lq; ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h) {
        const std::int64_t row = c.row_q(b, i), hk = c.kv_head(h);
        RowBudget& rb = out[static_cast<std::size_t>(row * c.heads_q + h)];
        rb.out_abs.assign(static_cast<std::size_t>(c.dv), 0.0);
        rb.seq = b;
        std::vector<double> s;
        std::vector<std::int64_t> js;
        double Es = 0;
        const float* q = c.q.data() + (row * c.heads_q + h) * c.d;
        for (std::int64_t j = 0; j < Lk; ++j) {
          if (!ref::key_visible(c, b, h, i, j)) continue;
          const float* k = c.k.data() + (c.row_k(b, j) * c.heads_kv + hk) * c.d;
          long double dot = 0, mag = 0;
          for (std::int64_t x = 0; x < c.d; ++x) {
            dot += static_cast<long double>(q[x]) * k[x];
            mag += std::abs(static_cast<long double>(q[x]) * k[x]);
          }
          double sj = static_cast<double>(dot) * c.scale * c.q_descale * c.k_descale;
          double e = (c.d + 2) * u * scale * static_cast<double>(mag) + 3 * u * std::abs(sj);
          if (c.softcap > 0) {
            sj = c.softcap * std::tanh(sj / c.softcap);
            e += 4 * u * c.softcap;
          }
          if (!c.alibi_slopes.empty()) {
            const double a = c.alibi_slopes[h] * std::abs(static_cast<double>(i + off - j));
            sj -= a;
            e += 2 * u * (a + std::abs(sj));
          }
          if (c.attn_bias.used()) {  // one more float32 addition (kernel.h's step 3b)
            const double bj = ref::score_bias(c, b, h, i, j);
            sj += bj;
            e += 2 * u * (std::abs(bj) + std::abs(sj));
          }
          Es = std::max(Es, e);
          s.push_back(sj);
          js.push_back(j);
        }
        const bool sink = !c.sinks.empty();
        if (s.empty() && !sink) {  // fully masked: exact zeros
          rb.fully_masked = true;
          continue;
        }
        rb.masked = s.empty();
        double m = -INFINITY, lo = INFINITY;
        for (double x : s) m = std::max(m, x), lo = std::min(lo, x);
        if (sink) m = std::max(m, double(c.sinks[h])), lo = std::min(lo, double(c.sinks[h]));
        const double delta = m - lo;
        const double live = static_cast<double>(s.size()) + (sink ? 1 : 0);
        const bool lp_input = c.qkv == AttnType::bfloat16 || c.qkv == AttnType::float16;
        const double lp = lp_input ? 2 * unit_of(c.qkv) : 0.0;  // low_precision_p's extra
        const bool lp_declared = active_conventions().low_precision_p;
        const std::size_t o = static_cast<std::size_t>(row * c.heads_q + h);
        // The entropy before any adaptive correction, and beta from it.
        const double maxabs = std::max(std::abs(m), std::abs(lo));
        budget::RowStats st;
        st.live = static_cast<std::int64_t>(live);
        st.max = m;
        st.spread = delta;
        st.max_abs = maxabs;
        st.theta_one = true;
        rb.H_abs = budget::entropy_abs(st, r.entropy[o]) + 2 * Es * (1 + std::abs(r.entropy[o]));
        const double beta = c.adaptive ? theory::adaptive_beta(r.entropy[o]) : 1.0;
        const double dB = c.adaptive ? budget::beta_abs(r.entropy[o], rb.H_abs) : 0.0;
        rb.beta_abs = dB;
        const double splits = c.num_splits > 1 ? static_cast<double>(c.num_splits) : 0.0;
        const double rel_w =
            u * (4 + budget::summation(live) + 3 * beta * delta +
                 (beta != 1.0 ? 2 * beta * maxabs : 0.0) + (splits > 0 ? 2 + delta : 0.0)) +
            2 * beta * Es + 2 * delta * dB + (is_quantised(c.qkv) ? unit_of(c.qkv) : 0.0) +
            (lp_declared ? lp : 0.0);
        double S = 0;
        std::vector<double> p(s.size());
        for (std::size_t x = 0; x < s.size(); ++x) S += (p[x] = std::exp(beta * (s[x] - m)));
        if (sink) S += std::exp(beta * (c.sinks[h] - m));
        rb.lse_shift = beta * alibi_lse_shift_of(c, b, i, h);
        if (sink) {
          rb.has_sink = true;
          double mk = -INFINITY, Sk = 0;
          for (double x : s) mk = std::max(mk, x);
          for (double x : s) Sk += std::exp(beta * (x - mk));
          rb.lse_keys = s.empty() ? -INFINITY : beta * mk + std::log(Sk);
          // Scores are double roundings of long-double dot products: a few
          // 2^-53 of each, carried through beta and the log-sum-exp.
          rb.lse_keys_err = 0x1p-48 * (beta * maxabs + live + std::abs(rb.lse_keys));
          if (s.empty()) rb.lse_keys_err = 0;
        }
        for (std::int64_t x = 0; x < c.dv; ++x) {
          double P = 0;
          for (std::size_t y = 0; y < s.size(); ++y)
            P += p[y] / S * std::abs(c.v[(c.row_k(b, js[y]) * c.heads_kv + hk) * c.dv + x]);
          P *= std::abs(c.v_descale);
          const double ex = r.out[o * c.dv + x];
          // The output's own rounding as the row operations count it (budgets.hpp).
          rb.out_abs[x] = budget::output_abs(dtype_of_output(c.out_type), ex,
                                             P * (rel_w + u * (live + 1 + splits)));
          if (lp > 0 && !lp_declared) {
            rb.out_lp_extra.resize(static_cast<std::size_t>(c.dv), 0.0);
            rb.out_lp_extra[x] = P * lp;
          }
        }
        rb.lse_abs =
            u * (live + 3 + beta * delta + (beta != 1.0 ? 2 * beta * maxabs : 0.0) + splits) +
            beta * Es + dB * maxabs + u * std::abs(r.lse[o]) +
            budget::ulp(DType::float32, r.lse[o]);
      }
  }
  return out;
}

// The lse check of attention_v2.rounding under the declared conventions
// (conventions.hpp). The value a kernel's lse is held to is kernel.h's
// natural-log lse with, as declared: lse_without_sink, the keys' lse in its
// place (budget + its evaluation error, u |value| and its ulp: the value may
// lie far from the full lse); alibi_lse_shift, plus beta c (budget + 3u |beta c|
// and the shifted value's ulp); lse_base2, all of it over ln 2 (budget / ln 2
// plus one ulp of the base-2 value for its own rounding). masked_lse_inf allows
// +inf for a fully masked row. Undeclared, a failing lse that one convention
// alone would allow names it.
Check lse_check(float got, double exact, const RowBudget& b, const std::string& where) {
  const Conventions& cv = active_conventions();
  if (b.fully_masked && got == INFINITY) {
    if (cv.masked_lse_inf) return make_check(0.0, 0.0, where + ": +inf, every key masked");
    Check f = make_check(INFINITY, 0.0, where + ": +inf with every key masked (kernel.h: -inf)");
    f.convention = "masked_lse_inf";
    return f;
  }
  struct Form {
    double value, budget;
  };
  auto form = [&](bool keys_only, bool shift, bool base2) {
    Form f{exact, b.lse_abs};
    if (keys_only && b.has_sink) {
      f.value = b.lse_keys;
      if (std::isfinite(f.value))
        f.budget += b.lse_keys_err + u32 * std::abs(f.value) + budget::ulp(DType::float32, f.value);
    }
    if (shift && b.lse_shift != 0 && std::isfinite(f.value)) {
      f.value += b.lse_shift;
      f.budget += 3 * u32 * std::abs(b.lse_shift) + budget::ulp(DType::float32, f.value);
    }
    if (base2) {
      f.value *= std::numbers::log2e;
      f.budget = f.budget * std::numbers::log2e +
                 (std::isfinite(f.value) ? budget::ulp(DType::float32, f.value) : 0.0);
    }
    return f;
  };
  const Form f = form(cv.lse_without_sink, cv.alibi_lse_shift, cv.lse_base2);
  std::string what = where;
  if (cv.lse_without_sink && b.has_sink) what += " (keys only)";
  if (cv.alibi_lse_shift && b.lse_shift != 0) what += " (ALiBi shifted)";
  if (cv.lse_base2) what += " (base 2)";
  Check ch = elem(DType::float32, got, f.value, f.budget, what);
  if (ch.fails() && ch.convention.empty()) {
    // The one undeclared convention that alone would allow this lse (`skip`:
    // declared already, or one that changes nothing on this row).
    const struct {
      const char* name;
      bool skip;
      Form alt;
    } alts[] = {
        {"lse_base2", cv.lse_base2, form(cv.lse_without_sink, cv.alibi_lse_shift, true)},
        {"alibi_lse_shift", cv.alibi_lse_shift || b.lse_shift == 0,
         form(cv.lse_without_sink, true, cv.lse_base2)},
        {"lse_without_sink", cv.lse_without_sink || !b.has_sink,
         form(true, cv.alibi_lse_shift, cv.lse_base2)},
    };
    for (const auto& a : alts)
      if (!a.skip &&
          (static_cast<double>(got) == a.alt.value ||
           (std::isfinite(a.alt.value) && std::abs(got - a.alt.value) <= a.alt.budget))) {
        ch.convention = a.name;
        break;
      }
  }
  return ch;
}

// A row with every key masked (no sink) under finite_mask (conventions.hpp):
// out inside the convex hull of the sequence's values (every key of it, masked
// or not: which ones a finite mask weights depends on a value the kernel does
// not declare), coordinate by coordinate, with the weighted sum's rounding
// ((Lk + 2) u max|v| |v_descale|) and the output's own; lse a number; entropy in
// [0, log Lk] with the same relative slack. kernel.h's out 0 / lse -inf is one
// such answer only where 0 lies in the hull, so it is not asked for.
Check finite_mask_row(const AttentionCase& c, const AttentionResult& o, std::size_t row,
                      const RowBudget& b, const std::string& where) {
  const std::int64_t Lk = c.len_k(b.seq);
  const std::int64_t hk = c.kv_head(static_cast<std::int64_t>(row) % c.heads_q);
  Check worst = make_check(0.0, 0.0, where + ": every key masked, finite mask");
  // With ieee_special_values also declared, NaN is allowed here too (PyTorch's
  // composition: -inf masks, so 0/0 for such a row, and masked values read
  // through 0 * v in P V).
  if (active_conventions().ieee_special_values) {
    bool nan = !o.lse.empty() && std::isnan(o.lse[row]);
    for (std::int64_t x = 0; x < c.dv; ++x) nan = nan || std::isnan(o.out[row * c.dv + x]);
    if (nan) return make_check(0.0, 0.0, where + ": every key masked, NaN (ieee_special_values)");
  }
  if (!o.lse.empty() && std::isnan(o.lse[row]))
    worst.worst(make_check(INFINITY, 0.0, where + " lse: NaN with every key masked"));
  if (Lk == 0) {  // no key at all: nothing to weight, kernel.h's zeros
    for (std::int64_t x = 0; x < c.dv; ++x)
      worst.worst(elem(DType::float32, o.out[row * c.dv + x], 0.0, 0.0,
                       where + " out[" + std::to_string(x) + "] (no keys)"));
    return worst;
  }
  const double vd = c.v_descale;
  for (std::int64_t x = 0; x < c.dv; ++x) {
    double lo = INFINITY, hi = -INFINITY, mag = 0;
    for (std::int64_t j = 0; j < Lk; ++j) {
      const double v = vd * c.v[(c.row_k(b.seq, j) * c.heads_kv + hk) * c.dv + x];
      lo = std::min(lo, v), hi = std::max(hi, v), mag = std::max(mag, std::abs(v));
    }
    const double slack =
        (static_cast<double>(Lk) + 2) * u32 * mag + budget::ulp(dtype_of_output(c.out_type), mag);
    const double got = o.out[row * c.dv + x];
    const double off = std::isnan(got) ? INFINITY : std::max({0.0, lo - got, got - hi});
    Check ch = make_check(off, slack,
                          where + " out[" + std::to_string(x) + "] = " + fmt(got) +
                              (off > slack ? " outside" : " inside") + " the values' hull [" +
                              fmt(lo) + ", " + fmt(hi) + "]");
    worst.worst(ch);
  }
  if (!o.entropy.empty()) {
    const double H = o.entropy[row], top = std::log(static_cast<double>(Lk));
    const double slack = (static_cast<double>(Lk) + 4) * u32 * std::max(1.0, top);
    const double off = std::isnan(H) ? INFINITY : std::max({0.0, -H, H - top});
    worst.worst(make_check(off, slack,
                           where + " entropy " + fmt(H) + " vs [0, log Lk = " + fmt(top) + "]"));
  }
  return worst;
}

// Keeps the worse of `worst` and the check of one element, building the
// element's description (the costly part: millions of elements per case) only
// when it can become the worst.
// `lp_extra` > 0: a failure within budget + lp_extra names the undeclared
// low_precision_p convention.
template <class Where>
void consider(Check& worst, double got, double exact, double budget, Where where,
              const char* exact_word = "exact", double lp_extra = 0.0) {
  if (std::isfinite(got) && std::isfinite(exact) && exact != 0.0 && worst.applicable &&
      !worst.fails()) {
    const double r = std::abs(got - exact) / budget;
    if (r <= worst.ratio) return;  // the same ratio elem() computes: not the new worst
  }
  Check c = elem(DType::float32, got, exact, budget, where(), exact_word);
  if (c.fails() && c.convention.empty() && lp_extra > 0 && std::isfinite(got) &&
      std::isfinite(exact) && std::abs(got - exact) <= budget + lp_extra)
    c.convention = "low_precision_p";
  worst.worst(c);
}

// Collects why cases were not applicable (the reasons are named in verdicts).
struct NotApplicableLog {
  std::map<std::string, int> reasons;
  int count = 0;
  void add(const std::string& why) {
    ++count;
    ++reasons[why];
  }
  std::string text() const {
    if (count == 0) return {};
    std::string r = std::to_string(count) + " case(s) not applicable (";
    bool first = true;
    for (const auto& [w, n] : reasons) {
      r += (first ? "" : "; ") + w + (n > 1 ? " x" + std::to_string(n) : "");
      first = false;
    }
    return r + ")";
  }
};

AttnType attn_type_of(DType t) {
  return t == DType::bfloat16  ? AttnType::bfloat16
         : t == DType::float16 ? AttnType::float16
                               : AttnType::float32;
}

// describe(p), then the inputs themselves when every tensor is small
// (inline_inputs.hpp).
std::string describe_inline(const AttnParams& p, AttnType t) {
  try {
    return describe(p) + inline_inputs(materialise(p, t));
  } catch (const std::exception&) {
    return describe(p);
  }
}

Verdict attention_verdict(const Run& run, const std::string& id, const Rule& rule, Op op,
                          AttnType t, const SlotResult<AttnParams>& r, const NotApplicableLog& na) {
  Verdict v = slot_verdict<AttnParams>(run, id, claim_of(id), rule, op, DType::float32, r,
                                       [t](const AttnParams& p) { return describe_inline(p, t); });
  v.dtype = name_of(t);
  if (r.cases_applicable == 0 && v.outcome == Outcome::skip)
    v.note = "not applicable: " + (na.count ? na.text() : std::string("no case applied"));
  else if (na.count)
    v.note += (v.note.empty() ? "" : "; ") + na.text();
  return v;
}

// The kernel's own results as reference-shaped values, for the budgets of a
// derived case (attention_budgets uses them only for the output's own rounding and
// the lse/entropy magnitudes; the error terms come from the case itself).
ref::AttentionValues as_values(const AttentionCase& c, const AttentionResult& o) {
  ref::AttentionValues r;
  const std::size_t rows = static_cast<std::size_t>(c.total_q() * c.heads_q);
  r.out.assign(o.out.begin(), o.out.end());
  for (double& x : r.out)
    if (!std::isfinite(x)) x = 0;
  r.lse.assign(rows, 0.0);
  r.entropy.assign(rows, 0.0);
  for (std::size_t i = 0; i < rows && i < o.lse.size(); ++i)
    r.lse[i] = std::isfinite(o.lse[i]) ? o.lse[i] : 0.0;
  for (std::size_t i = 0; i < rows && i < o.entropy.size(); ++i)
    r.entropy[i] = std::isfinite(o.entropy[i]) ? o.entropy[i] : 0.0;
  return r;
}

// The case without its position-dependent features (causal, window, ALiBi,
// and the boolean, additive, block and tree masks, indexed by position).
// c with its descales per (sequence, kv head) taken out: each slab divided
// by the descale the call would pass (descales_bh), the elements themselves.
// For a property whose derived cases mix in values of their own (a sink's
// key) that one slab descale cannot hold together with the case's.
AttentionCase without_descale_bh(const AttentionCase& c) {
  if (!c.descale_bh) return c;
  AttentionCase r = c;
  r.descale_bh = false;
  const std::int64_t group = c.heads_q / c.heads_kv;
  for (int tensor = 0; tensor < 3; ++tensor) {
    const std::vector<float> f = descales_bh(c, tensor);
    std::vector<float>& x = tensor == 0 ? r.q : tensor == 1 ? r.k : r.v;
    const std::int64_t dim = tensor == 2 ? c.dv : c.d, heads = tensor == 0 ? c.heads_q : c.heads_kv;
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t s = 0; s < (tensor == 0 ? c.len_q(b) : c.len_k(b)); ++s)
        for (std::int64_t h = 0; h < heads; ++h) {
          const float d =
              f[static_cast<std::size_t>(b * c.heads_kv + (tensor == 0 ? h / group : h))];
          const std::int64_t row = (tensor == 0 ? c.row_q(b, s) : c.row_k(b, s)) * heads + h;
          for (std::int64_t e = row * dim; e < (row + 1) * dim; ++e)
            x[static_cast<std::size_t>(e)] /= d;
        }
  }
  return r;
}

AttentionCase without_positions(const AttentionCase& c) {
  AttentionCase r = c;
  r.causal = false;
  r.window_left = r.window_right = -1;
  r.alibi_slopes.clear();
  r.attn_mask = r.attn_bias = r.block_mask = r.tree_mask = MaskTensor{};
  r.block_q = r.block_k = 0;
  return r;
}

// Sequence b's part of a mask tensor, for a case of that sequence alone
// with nq queries and nk keys (extents of 1 stay broadcast).
MaskTensor sequence_mask(const MaskTensor& m, std::int64_t b, std::int64_t nq, std::int64_t nk) {
  if (!m.used()) return m;
  MaskTensor r = m;
  r.nb = 1;
  r.nq = m.nq > 1 ? std::max<std::int64_t>(nq, 1) : 1;
  r.nk = m.nk > 1 ? std::max<std::int64_t>(nk, 1) : 1;
  r.v.assign(static_cast<std::size_t>(r.nh * r.nq * r.nk), 0.0f);
  for (std::int64_t h = 0; h < r.nh; ++h)
    for (std::int64_t i = 0; i < r.nq; ++i)
      for (std::int64_t j = 0; j < r.nk; ++j)
        r.v[static_cast<std::size_t>((h * r.nq + i) * r.nk + j)] = m.at(b, h, i, j);
  return r;
}

// What compare_results holds of one row.
enum class Compare { all, lse_only, nothing };

// Holds `a` against `b` (two results of equivalent cases) under twice the
// rounding budget `rb` of one of them, out and lse, into `ch` (the worst
// element); `which(row)` says what of a row is compared.
template <class Where, class Which>
void compare_results(Check& ch, const AttentionCase& c, const std::vector<RowBudget>& rb,
                     const AttentionResult& a, const AttentionResult& b, const char* word,
                     Where where, Which which) {
  for (std::size_t row = 0; row < rb.size(); ++row) {
    if (rb[row].out_abs.empty() || which(row) == Compare::nothing) continue;
    if (which(row) == Compare::all)
      for (std::int64_t x = 0; x < c.dv; ++x) {
        const std::size_t e = row * c.dv + x;
        consider(
            ch, a.out[e], b.out[e], 2 * rb[row].out_abs[x],
            [&] { return where(row) + " out[" + std::to_string(x) + "]"; }, word);
      }
    if (row < a.lse.size() && row < b.lse.size())
      ch.worst(elem(DType::float32, a.lse[row], b.lse[row], 2 * rb[row].lse_abs,
                    where(row) + " lse", word));
  }
}

// The kernel entry a search calls: attention_v2, or the interface v1 slot
// (sa_kernel.attention) on the single-head cases it carries
// (Kernel::attention translates each case into one v1 call). Both are held
// by the same properties, reference and budgets; a verdict's op says which.
struct Entry {
  const Kernel& kernel;
  Op op;
  AttentionResult call(const AttentionCase& c) const {
    return op == Op::attention ? kernel.attention(c) : kernel.attention_v2(c);
  }
  std::string why_not(const AttentionCase& c) const {
    return op == Op::attention ? kernel.why_not_applicable_v1(c) : kernel.why_not_applicable(c);
  }
};

// What every attention_v2 property sees of one case: the kernel's result
// and the reference's, the case's budgets, and the call context. Each
// property below is one function judging one case into its Check (the
// search keeps the worst per property); run_attention calls those that
// apply to the case.
struct AttnCtx {
  const Run& run;
  const Entry& k;
  AttnType t;
  bool low;  // a low-precision input type (not float32)
  const AttnDomain& dom;
  const AttnParams& p;
  const AttentionCase& c;
  const AttentionResult& o;
  const ref::AttentionValues& r;
  const std::vector<RowBudget>& rb;
};

// attention_v2.rounding
void rounding(const AttnCtx& cx, Check& out) {
  const AttentionCase& c = cx.c;
  const AttentionResult& o = cx.o;
  const ref::AttentionValues& r = cx.r;
  const std::vector<RowBudget>& rb = cx.rb;
  for (std::size_t row = 0; row < rb.size(); ++row) {
    const RowBudget& b = rb[row];
    if (b.out_abs.empty()) continue;  // a row of an empty sequence slot
    auto w = [&] {
      return "row " + std::to_string(row / c.heads_q) + " head " + std::to_string(row % c.heads_q);
    };
    // A fully masked row (every score -inf, no sink) with NaN outputs:
    // what exp(s - max) / sum gives in IEEE arithmetic (PyTorch's SDPA,
    // ONNX Runtime), the ieee_special_values convention (kernel.h
    // SA_CAP_IEEE_SPECIAL_VALUES); kernel.h's own semantics is out 0, lse -inf.
    if (b.fully_masked && active_conventions().finite_mask) {
      out.worst(finite_mask_row(c, o, row, b, w()));
      continue;
    }
    if (b.fully_masked) {
      bool nan = !o.lse.empty() && std::isnan(o.lse[row]);
      for (std::int64_t x = 0; x < c.dv; ++x) nan = nan || std::isnan(o.out[row * c.dv + x]);
      if (nan) {
        if (active_conventions().ieee_special_values) continue;
        Check f = make_check(INFINITY, 0.0,
                             w() + ": every key masked, outputs NaN (kernel.h: out 0, lse -inf)");
        f.convention = "ieee_special_values";
        out.worst(f);
        continue;
      }
    }
    // A fully masked row's checks are gathered apart, to name finite_mask
    // when kernel.h's zeros fail but the finite-mask hull holds.
    Check fm;
    Check& dst = b.fully_masked ? fm : out;
    for (std::int64_t x = 0; x < c.dv; ++x) {
      const std::size_t e = row * c.dv + x;
      consider(
          dst, o.out[e], r.out[e], b.out_abs[x],
          [&] { return w() + " out[" + std::to_string(x) + "]"; }, "exact",
          b.out_lp_extra.empty() ? 0.0 : b.out_lp_extra[static_cast<std::size_t>(x)]);
    }
    if (!o.lse.empty()) dst.worst(lse_check(o.lse[row], r.lse[row], b, w() + " lse"));
    if (!o.entropy.empty())
      dst.worst(elem(DType::float32, o.entropy[row], r.entropy[row], b.H_abs, w() + " entropy"));
    if (c.adaptive && row < o.beta.size() && !b.masked)
      dst.worst(elem(DType::float32, o.beta[row], r.beta[row],
                     b.beta_abs + budget::ulp(DType::float32, r.beta[row]), w() + " beta"));
    // beta where the call returns it without the adaptive temperature (the
    // v1 slot always writes it): exactly 1 (kernel.h).
    if (!c.adaptive && row < o.beta.size())
      dst.worst(elem(DType::float32, o.beta[row], 1.0, 0.0, w() + " beta"));
    if (b.fully_masked) {
      if (fm.fails_outright() && !finite_mask_row(c, o, row, b, w()).fails())
        fm.convention = "finite_mask";
      out.worst(fm);
    }
  }
}

// attention_v2.flash_attention_2x (low-precision outputs)
void flash_attention_2x(const AttnCtx& cx, Check& out) {
  const AttentionCase& c = cx.c;
  const AttentionResult& o = cx.o;
  const ref::AttentionValues& r = cx.r;
  const std::vector<RowBudget>& rb = cx.rb;
  const std::vector<float> base = kernels::same_dtype::attention_v2(c);
  double err = 0, berr = 0, emax = 0;
  const bool fin = active_conventions().finite_mask;
  for (std::size_t e = 0; e < r.out.size(); ++e) {
    // finite_mask: a fully masked row is held to its hull by rounding alone.
    if (fin && rb[e / static_cast<std::size_t>(c.dv)].fully_masked) continue;
    err = std::max(err, std::abs(o.out[e] - r.out[e]));
    if (std::isnan(o.out[e])) err = NAN;
    berr = std::max(berr, std::abs(base[e] - r.out[e]));
    emax = std::max(emax, std::abs(r.out[e]));
  }
  const double atol = 2.0 * budget::ulp(dtype_of_output(c.out_type), emax + 0.3);
  out = make_check(
      err, 2.0 * berr + atol,
      "max|out-ref| vs 2 x same-dtype baseline error " + fmt(berr) + " + fwd_atol " + fmt(atol));
}

// attention_v2.masked_never_leak: poison what every mask hides.
void masked_never_leak(const AttnCtx& cx, Check& out) {
  const Entry& k = cx.k;
  const AttnType t = cx.t;
  const AttentionCase& c = cx.c;
  const AttentionResult& o = cx.o;
  const std::vector<RowBudget>& rb = cx.rb;
  // The largest finite value of the input type (fp8, fp4, int8 have nothing
  // near 1e30). fp4 and int8 without block scales have no NaN: huge instead.
  const float huge = is_quantised(t) ? quant_max(t) : round_to(t, 1e30);
  const bool has_nan = !(t == AttnType::fp4_e2m1 || t == AttnType::int8) || c.scale_block > 0;
  const float nan = has_nan ? NAN : huge;
  // Poisons the keys hidden from every query of their sequence and counts
  // the outputs that changed. `finite` (finite_mask reads masked keys):
  // poison with what a finite mask still hides (each key negated, a
  // finite value for v), and leave out rows whose every key is masked
  // (they weight the poison itself). Returns -1 when nothing is hidden.
  // With descales per (sequence, kv head), the largest value of a slab is
  // the format's times its descale (which a largest element keeps).
  const std::vector<float> fk = descales_bh(c, 1), fv = descales_bh(c, 2);
  auto slab_huge = [&](const std::vector<float>& f, std::int64_t b, std::int64_t h) {
    return f.empty() ? huge : huge * f[static_cast<std::size_t>(b * c.heads_kv + h)];
  };
  auto poison_run = [&](bool finite, std::string* first) -> long {
    AttentionCase pc = c;
    bool poisoned = false;
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t j = 0; j < c.len_k(b); ++j) {
        const std::int64_t r0 = c.row_k(b, j);
        for (std::int64_t h = 0; h < c.heads_kv; ++h) {
          // Hidden from every query of every query head reading this
          // key/value head (the per-head masks: attn_mask, block, tree).
          bool hidden = true;
          for (std::int64_t i = 0; i < c.len_q(b) && hidden; ++i)
            for (std::int64_t hq = 0; hq < c.heads_q && hidden; ++hq)
              hidden = c.kv_head(hq) != h || !ref::key_visible(c, b, hq, i, j);
          if (!hidden) continue;
          poisoned = true;
          for (std::int64_t x = 0; x < c.d; ++x) {
            float& kx = pc.k[(r0 * c.heads_kv + h) * c.d + x];
            kx = finite ? -kx : x % 2 ? nan : slab_huge(fk, b, h);
          }
          for (std::int64_t x = 0; x < c.dv; ++x)
            pc.v[(r0 * c.heads_kv + h) * c.dv + x] = finite ? slab_huge(fv, b, h) : nan;
        }
      }
    if (!poisoned) return -1;
    const AttentionResult po = k.call(pc);
    long diff = 0;
    auto skip = [&](std::size_t row) { return finite && rb[row].fully_masked; };
    for (std::size_t e = 0; e < o.out.size(); ++e)
      if (!skip(e / static_cast<std::size_t>(c.dv)) && std::memcmp(&o.out[e], &po.out[e], 4) != 0 &&
          diff++ == 0)
        *first =
            "out element " + std::to_string(e) + ": " + fmt(o.out[e]) + " became " + fmt(po.out[e]);
    for (std::size_t e = 0; e < o.lse.size(); ++e)
      if (!skip(e) && std::memcmp(&o.lse[e], &po.lse[e], 4) != 0 && diff++ == 0)
        *first = "lse " + std::to_string(e) + ": " + fmt(o.lse[e]) + " became " + fmt(po.lse[e]);
    return diff;
  };
  const bool finite = active_conventions().finite_mask;
  std::string first;
  const long diff = poison_run(finite, &first);
  if (diff >= 0) {
    Check ch = make_check(static_cast<double>(diff), 0.0,
                          diff ? first + (finite ? " after finite values were put under "
                                                   "the masks (finite_mask)"
                                                 : " after NaN/huge values were put under "
                                                   "the masks")
                               : "masked keys poisoned, no output changed");
    ch.unit = "outputs changed";
    // Undeclared: a kernel that hides finite poison and leaks NaN reads
    // masked positions as a finite mask does.
    std::string unused;
    if (diff > 0 && !finite && poison_run(true, &unused) == 0) ch.convention = "finite_mask";
    out = ch;
  }
}

// attention_v2.gqa_equals_repeated
void gqa_equals_repeated(const AttnCtx& cx, Check& out) {
  const Entry& k = cx.k;
  const AttentionCase& c = cx.c;
  const AttentionResult& o = cx.o;
  const std::vector<RowBudget>& rb = cx.rb;
  const AttentionCase mc = with_repeated_kv_heads(c);
  if (k.why_not(mc).empty()) {
    const AttentionResult mo = k.call(mc);
    for (std::size_t row = 0; row < rb.size(); ++row)
      for (std::int64_t x = 0; x < c.dv && !rb[row].out_abs.empty(); ++x) {
        const std::size_t e = row * c.dv + x;
        consider(
            out, o.out[e], mo.out[e], 2 * rb[row].out_abs[x],
            [&] {
              return "row " + std::to_string(row / c.heads_q) + " head " +
                     std::to_string(row % c.heads_q) + " out[" + std::to_string(x) +
                     "] (GQA vs repeated heads)";
            },
            "repeated-heads");
      }
  }
}

// attention_v2.varlen_equals_separate
void varlen_equals_separate(const AttnCtx& cx, Check& out) {
  const Entry& k = cx.k;
  const AttentionCase& c = cx.c;
  const AttentionResult& o = cx.o;
  const std::vector<RowBudget>& rb = cx.rb;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    if (c.len_q(b) == 0) continue;
    AttentionCase sc = c;
    sc.batch = 1;
    if (c.seqused()) sc.kv_extra = {c.kv_extra[static_cast<std::size_t>(b)]};
    sc.cu_q = {0, static_cast<std::int32_t>(c.len_q(b))};
    sc.cu_k = {0, static_cast<std::int32_t>(c.len_k(b))};
    const std::int64_t q0 = c.row_q(b, 0), k0 = c.row_k(b, 0);
    sc.q.assign(c.q.begin() + q0 * c.heads_q * c.d,
                c.q.begin() + (q0 + c.len_q(b)) * c.heads_q * c.d);
    sc.k.assign(c.k.begin() + k0 * c.heads_kv * c.d,
                c.k.begin() + (k0 + c.len_k(b)) * c.heads_kv * c.d);
    sc.v.assign(c.v.begin() + k0 * c.heads_kv * c.dv,
                c.v.begin() + (k0 + c.len_k(b)) * c.heads_kv * c.dv);
    if (!c.key_padding_mask.empty())
      sc.key_padding_mask.assign(c.key_padding_mask.begin() + k0,
                                 c.key_padding_mask.begin() + k0 + c.len_k(b));
    // Masks: the sequence's own part (indices are per sequence, kernel.h).
    const std::int64_t lq = c.len_q(b), lk = c.len_k(b);
    sc.attn_mask = sequence_mask(c.attn_mask, b, lq, lk);
    sc.attn_bias = sequence_mask(c.attn_bias, b, lq, lk);
    if (c.block_mask.used())
      sc.block_mask = sequence_mask(c.block_mask, b, (lq + c.block_q - 1) / c.block_q,
                                    (lk + c.block_k - 1) / c.block_k);
    sc.tree_mask = sequence_mask(c.tree_mask, b, lq, lq);
    if (!k.why_not(sc).empty()) continue;
    const AttentionResult so = k.call(sc);
    for (std::int64_t i = 0; i < c.len_q(b); ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h) {
        const std::size_t row = static_cast<std::size_t>((q0 + i) * c.heads_q + h);
        const std::size_t srow = static_cast<std::size_t>(i * c.heads_q + h);
        for (std::int64_t x = 0; x < c.dv; ++x)
          consider(
              out, o.out[row * c.dv + x], so.out[srow * c.dv + x], 2 * rb[row].out_abs[x],
              [&] {
                return "sequence " + std::to_string(b) + " query " + std::to_string(i) + " head " +
                       std::to_string(h) + " out[" + std::to_string(x) + "] (packed vs alone)";
              },
              "separate-call");
      }
  }
}

// attention_v2.paged_equals_contiguous: the same case with its keys and
// values in contiguous buffers instead of the page pool (seqused_k and every
// other feature kept). Within twice the rounding budget, not bitwise: a
// kernel may tile a paged call by pages (FlashInfer's decode splits at page
// boundaries), so its sums may run in another order; a page read from the
// wrong place or past a sequence's used keys moves outputs far more (NaN).
void paged_equals_contiguous(const AttnCtx& cx, Check& out) {
  const Entry& k = cx.k;
  const AttentionCase& c = cx.c;
  AttentionCase cc = c;
  cc.page_size = 0;
  cc.page_id_base = 0;
  if (!k.why_not(cc).empty()) return;
  const AttentionResult co = k.call(cc);
  compare_results(
      out, c, cx.rb, cx.o, co, "contiguous-call",
      [&](std::size_t row) {
        return "row " + std::to_string(row / c.heads_q) + " head " +
               std::to_string(row % c.heads_q) + " (paged vs contiguous)";
      },
      [](std::size_t) { return Compare::all; });
}

// The queries [q_from[b], q_to[b]) of each sequence of c with the first
// keys[b] of its keys; with `unwritten`, the sequence's other keys stay in
// the call's buffer as slots past seqused_k (NaN: a cache not yet written).
// A fixed-length case needs the same counts for every sequence (the callers
// choose them so).
AttentionCase sub_case(const AttentionCase& c, const std::vector<std::int64_t>& q_from,
                       const std::vector<std::int64_t>& q_to, const std::vector<std::int64_t>& keys,
                       bool unwritten) {
  AttentionCase s = c;
  s.q.clear();
  s.k.clear();
  s.v.clear();
  s.key_padding_mask.clear();
  if (c.varlen()) {
    s.cu_q = {0};
    s.cu_k = {0};
  } else {
    s.seqlen_q = q_to[0] - q_from[0];
    s.seqlen_k = keys[0];
  }
  if (unwritten && !c.seqused()) s.kv_extra.assign(static_cast<std::size_t>(c.batch), 0);
  if (!unwritten) s.kv_extra.clear(), s.dense_call = false;
  const std::int64_t qw = c.heads_q * c.d, kw = c.heads_kv * c.d, vw = c.heads_kv * c.dv;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::size_t bu = static_cast<std::size_t>(b);
    const std::int64_t q0 = c.row_q(b, q_from[bu]), nq = q_to[bu] - q_from[bu], k0 = c.row_k(b, 0);
    s.q.insert(s.q.end(), c.q.begin() + q0 * qw, c.q.begin() + (q0 + nq) * qw);
    s.k.insert(s.k.end(), c.k.begin() + k0 * kw, c.k.begin() + (k0 + keys[bu]) * kw);
    s.v.insert(s.v.end(), c.v.begin() + k0 * vw, c.v.begin() + (k0 + keys[bu]) * vw);
    if (!c.key_padding_mask.empty())
      s.key_padding_mask.insert(s.key_padding_mask.end(), c.key_padding_mask.begin() + k0,
                                c.key_padding_mask.begin() + k0 + keys[bu]);
    if (c.varlen()) {
      s.cu_q.push_back(s.cu_q.back() + static_cast<std::int32_t>(nq));
      s.cu_k.push_back(s.cu_k.back() + static_cast<std::int32_t>(keys[bu]));
    }
    if (unwritten)
      s.kv_extra[bu] =
          (c.seqused() ? c.kv_extra[bu] : 0) + static_cast<std::int32_t>(c.len_k(b) - keys[bu]);
  }
  return s;
}

// Whether c's masks move with the bottom-right diagonal only (what a chunked
// prefill keeps): causal or a window ending at the diagonal, aligned
// bottom-right, so row i of a sequence sees keys j <= i + Lk - Lq.
bool chunkable(const AttentionCase& c) { return !c.top_left && (c.causal || c.window_right == 0); }

// attention_v2.chunked_prefill_equals_prefill: vLLM's and SGLang's chunked
// prefill, flash_attn_with_kvcache with cache_seqlens. Sequence b's queries
// are cut at q1_b into two calls: the first chunk's queries [0, q1_b) with
// the keys a causal row among them can see, the first Lk - Lq + q1_b (bottom-
// right alignment keeps every row on its diagonal: off = Lk - Lq in both
// calls), the other keys left in its buffer past seqused_k as NaN (where the
// kernel declares seqused_k: the cache slots the second chunk has not yet
// written); the second chunk's queries [q1_b, Lq) with every key. Each
// chunk's rows must equal the one call's within twice the rounding budget
// (each is within one budget of the same exact values); a kernel that aligns
// a chunk top-left, counts the buffer instead of seqused_k for the diagonal,
// or reads the unwritten slots moves outputs by far more (NaN). Sequences
// with Lq < 2, or whose first chunk would have no key (Lq >= Lk + cut),
// stay whole in the first chunk. Rows that see no key are left to
// attention_v2.rounding (kernel.h's values or a declared convention's).
//
// A case whose masks do not follow the diagonal (no causal, top-left, a
// window reaching right of it) is made causal bottom-right first, called
// whole, and its budgets taken from that result's magnitudes (as
// key_permutation does: no reference call).
void chunked_prefill_equals_prefill(const AttnCtx& cx, Check& out) {
  const Entry& k = cx.k;
  // (Explicit masks index each sequence's own queries and keys, and a tree
  // mask's draft tokens are the last Lq keys: cutting the queries changes
  // what they mean. attention_v2.mask_equals_removed_keys holds them.)
  if (cx.c.masks()) return;
  AttentionCase causal_case;
  AttentionResult causal_out;
  std::vector<RowBudget> causal_rb;
  if (!chunkable(cx.c)) {
    causal_case = cx.c;
    causal_case.causal = true;
    causal_case.top_left = false;
    if (!k.why_not(causal_case).empty()) return;
    causal_out = k.call(causal_case);
    causal_rb = attention_budgets(causal_case, as_values(causal_case, causal_out));
  }
  const bool own = chunkable(cx.c);
  const AttentionCase& c = own ? cx.c : causal_case;
  const AttentionResult& whole = own ? cx.o : causal_out;
  const std::vector<RowBudget>& rb = own ? cx.rb : causal_rb;
  std::mt19937_64 g(cx.p.seed ^ 0xc4c4c4ull);
  const std::size_t nb = static_cast<std::size_t>(c.batch);
  std::vector<std::int64_t> zero(nb, 0), q1(nb), lq(nb), k1(nb), lk(nb);
  // Fixed-length and dense calls cut every sequence at the same query.
  const bool same_cut = !c.call_varlen();
  std::int64_t lo = 1, hi = 0;  // the cut's range that suits every sequence
  for (std::size_t b = 0; b < nb; ++b) {
    lq[b] = c.len_q(static_cast<std::int64_t>(b));
    lk[b] = c.len_k(static_cast<std::int64_t>(b));
    lo = std::max(lo, lq[b] - lk[b] + 1);  // Lk - Lq + q1 >= 1: a first chunk sees a key
    hi = std::max(hi, lq[b] - 1);
  }
  for (std::size_t b = 0; b < nb; ++b) {
    std::int64_t l = std::max<std::int64_t>(1, lq[b] - lk[b] + 1), h = lq[b] - 1;
    if (same_cut) l = lo, h = std::min(hi, lq[b] - 1);
    q1[b] =
        l <= h ? l + static_cast<std::int64_t>(g() % static_cast<std::uint64_t>(h - l + 1)) : lq[b];
    if (same_cut && b > 0) q1[b] = q1[0];
    k1[b] = lk[b] - lq[b] + q1[b];
  }
  bool cut = false;
  for (std::size_t b = 0; b < nb; ++b) cut = cut || q1[b] < lq[b];
  if (!cut) return;  // no sequence can be cut
  // The first chunk with its cache's unwritten slots where the kernel takes
  // seqused_k, else with its keys alone.
  AttentionCase first = sub_case(c, zero, q1, k1, true);
  if (!k.why_not(first).empty()) first = sub_case(c, zero, q1, k1, false);
  const AttentionCase second = sub_case(c, q1, lq, lk, c.seqused());
  auto hold = [&](const AttentionCase& sc, const std::vector<std::int64_t>& from) {
    if (!k.why_not(sc).empty() || sc.total_q() == 0) return;
    const AttentionResult so = k.call(sc);
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t i = 0; i < sc.len_q(b); ++i)
        for (std::int64_t h = 0; h < c.heads_q; ++h) {
          const std::int64_t qi = from[static_cast<std::size_t>(b)] + i;
          const std::size_t row = static_cast<std::size_t>(c.row_q(b, qi) * c.heads_q + h),
                            srow = static_cast<std::size_t>(sc.row_q(b, i) * c.heads_q + h);
          // A row that sees no key is attention_v2.rounding's to judge
          // (kernel.h's 0 and -inf, or a declared convention's NaN or
          // average over the buffer, which a chunk holds less of).
          if (rb[row].out_abs.empty() || rb[row].fully_masked) continue;
          auto where = [&] {
            return "sequence " + std::to_string(b) + " query " + std::to_string(qi) + " head " +
                   std::to_string(h) + " (chunk cut at query " +
                   std::to_string(q1[static_cast<std::size_t>(b)]) + ")";
          };
          for (std::int64_t x = 0; x < c.dv; ++x)
            consider(
                out, so.out[srow * c.dv + x], whole.out[row * c.dv + x], 2 * rb[row].out_abs[x],
                [&] { return where() + " out[" + std::to_string(x) + "]"; }, "one-prefill");
          if (row < whole.lse.size() && srow < so.lse.size())
            out.worst(elem(DType::float32, so.lse[srow], whole.lse[row], 2 * rb[row].lse_abs,
                           where() + " lse", "one-prefill"));
        }
  };
  hold(first, zero);
  hold(second, q1);
}

// The page stride (k.stride_b) of a paged case's pool of head dim `dim`, as
// Kernel::attention_v2 lays it out (kernels/attention_v2_call.cpp layout_of).
std::int64_t page_stride(const AttentionCase& c, std::int64_t dim) {
  if (c.layout == AttnLayout::bshd)
    return c.page_size * (c.heads_kv * (dim + c.head_pad) + c.row_pad);
  return c.heads_kv * (c.page_size * (dim + c.row_pad) + c.head_pad);
}

// The lowest page id that puts a paged case's pages past 2^31 elements of
// its pools: of both pools when their address space (each behind a
// reservation as large as itself, gate/guard.cpp) stays within 40 GiB, else
// of the larger pool; 0 when no such id fits int32 with the case's pages.
std::int64_t large_page_base(const AttentionCase& c) {
  const std::int64_t sk = page_stride(c, c.d), sv = page_stride(c, c.dv);
  const std::int64_t es = c.qkv == AttnType::float32 ? 4 : is_quantised(c.qkv) ? 1 : 2;
  constexpr std::int64_t k31 = std::int64_t{1} << 31;
  std::int64_t pages = 4;
  for (std::int64_t b = 0; b < c.batch; ++b)
    pages += (c.key_buffer(b) + c.page_size - 1) / c.page_size;
  // (and within AttentionCase::validate's span of 2^34 elements)
  const std::int64_t span = c.page_size * c.heads_kv * std::max(c.d, c.dv);
  std::int64_t base = (k31 + std::min(sk, sv) - 1) / std::min(sk, sv);
  if (2 * base * (sk + sv) * es > (std::int64_t{40} << 30) ||
      (base + pages) * span > (std::int64_t{1} << 34))
    base = (k31 + std::max(sk, sv) - 1) / std::max(sk, sv);
  if (base + pages > INT32_MAX || base > (std::int64_t{1} << 30) ||
      (base + pages) * span > (std::int64_t{1} << 34))
    return 0;
  return base;
}

// attention_v2.large_offsets: the same paged case with its physical pages
// moved past 2^31 elements of the pools (ids from large_page_base up; the
// pools reserved sparsely, the pages below them never memory: nothing near
// 2^31 elements is allocated). The page ids enter no arithmetic, so the call
// is held to attention_v2.rounding's rule against the same reference. A
// kernel that computes page_id * stride_b in 32 bits wraps: in the gate its
// read lands in the pool's inaccessible reservation (a crash that names the
// pool and the case), in a process of its own (tests) it reads zeros and
// its outputs move far outside the budget.
void large_offsets(const AttnCtx& cx, Check& out) {
  const AttentionCase& c = cx.c;
  // (Block-scaled pools would need their scale pools as far out: left to
  // the unscaled cases, which reach the same element offsets. fp4 and int8
  // likewise: the built-in CPU kernel widens them into copies at the
  // elements' own offsets, which a pool past 2^31 elements makes 8 GiB.)
  if (c.scale_block > 0 || c.qkv == AttnType::fp4_e2m1 || c.qkv == AttnType::int8) return;
  AttentionCase lc = c;
  lc.page_id_base = large_page_base(c);
  if (lc.page_id_base == 0 || !cx.k.why_not(lc).empty()) return;
  const AttentionResult lo = cx.k.call(lc);
  const AttnCtx lx{cx.run, cx.k, cx.t, cx.low, cx.dom, cx.p, lc, lo, cx.r, cx.rb};
  Check ch;
  rounding(lx, ch);
  if (ch.applicable)
    ch.where =
        "pages from id " + std::to_string(lc.page_id_base) + " (past 2^31 elements): " + ch.where;
  out.worst(ch);
}

// The three cases of a cascade (shared prefix) built from a case c: its
// requests are c's sequences (their queries), the shared prefix is sequence
// 0's keys and values, and request b's own suffix is sequence b's keys (none
// for request 0: an empty part). Position features, sinks, the key padding
// mask, explicit masks, the adaptive temperature, seqused_k and paging are left out (a
// cascade splits the keys of plain attention); the rest (heads, GQA, head
// dims, scale, softcap, layout, padding, split-KV) is c's.
struct Cascade {
  AttentionCase prefix;  // one sequence: every request's queries against the prefix
  AttentionCase suffix;  // varlen: request b's queries against its suffix
  AttentionCase full;    // varlen: request b's queries against prefix ++ suffix (reference only)
};

Cascade cascade_of(const AttentionCase& c) {
  AttentionCase base = c;
  base.causal = base.top_left = false;
  base.window_left = base.window_right = -1;
  base.alibi_slopes.clear();
  base.sinks.clear();
  base.key_padding_mask.clear();
  base.adaptive = false;
  base.kv_extra.clear();
  base.dense_call = false;
  base.page_size = base.page_id_base = 0;
  base.page_seed = 0;
  // (Explicit masks index the case's own sequences: a cascade of plain
  // attention leaves them out too.)
  base.attn_mask = base.attn_bias = base.block_mask = base.tree_mask = MaskTensor{};
  base.block_q = base.block_k = 0;
  const std::int64_t hk = c.heads_kv;
  // Copies key rows [r0, r0 + n) of c (k and v) to the end of x.
  auto take = [&](AttentionCase& x, std::int64_t r0, std::int64_t n) {
    x.k.insert(x.k.end(), c.k.begin() + r0 * hk * c.d, c.k.begin() + (r0 + n) * hk * c.d);
    x.v.insert(x.v.end(), c.v.begin() + r0 * hk * c.dv, c.v.begin() + (r0 + n) * hk * c.dv);
  };
  const std::int64_t P = c.len_k(0), p0 = c.row_k(0, 0);
  Cascade r{base, base, base};
  for (AttentionCase* x : {&r.prefix, &r.suffix, &r.full}) x->k.clear(), x->v.clear();
  r.prefix.cu_q.clear();
  r.prefix.cu_k.clear();
  r.prefix.batch = 1;
  r.prefix.seqlen_q = c.total_q();
  r.prefix.seqlen_k = P;
  take(r.prefix, p0, P);
  for (AttentionCase* x : {&r.suffix, &r.full}) {
    x->cu_q.assign(1, 0);
    x->cu_k.assign(1, 0);
    x->seqlen_q = x->seqlen_k = 0;
  }
  for (std::int64_t b = 0; b < c.batch; ++b) {
    const std::int64_t own = b == 0 ? 0 : c.len_k(b);
    for (AttentionCase* x : {&r.suffix, &r.full})
      x->cu_q.push_back(static_cast<std::int32_t>(x->cu_q.back() + c.len_q(b)));
    r.suffix.cu_k.push_back(static_cast<std::int32_t>(r.suffix.cu_k.back() + own));
    r.full.cu_k.push_back(static_cast<std::int32_t>(r.full.cu_k.back() + P + own));
    take(r.suffix, c.row_k(b, 0), own);
    take(r.full, p0, P);
    take(r.full, c.row_k(b, 0), own);
  }
  return r;
}

// attention_v2.cascade_equals_full: cascade (shared-prefix) attention as
// FlashInfer's MultiLevelCascadeAttentionWrapper and vLLM's cascade path run
// it: the kernel's attention_v2 over the shared prefix (one call, every
// request's queries) and over each request's own suffix keys (a varlen call;
// request 0's suffix is empty: lse -inf, out 0), both with lse, merged by the
// kernel's own merge_attention_states_n, against the reference attention of
// each request over prefix ++ suffix (computed in one piece: no merge).
//
// Bound, per output element, from the parts' own rounding budgets (those of
// attention_v2.rounding for the prefix and the suffix cases: bo_p on out,
// bl_p on lse) and merge_attention_n_ulp's analysis of the merge (u = 2^-24,
// w_p = exp(l_p - L) with l_p the exact part lse, L the exact full lse,
// mag_p = w_p (|o_p| + bo_p), over the parts with keys):
//   sum_p w_p bo_p                 the parts' output errors, weighted;
//   (exp(2 sum_p bl_p) - 1) sum_p mag_p   the weights' relative change from
//                                  the parts' lse errors;
//   sum_p (8 + L - l_p) u mag_p    one two-part float32 merge;
// then the output's own rounding (output_abs). lse: sum_p w_p bl_p +
// ulp(L) + 4u. Only float32 outputs (the merge takes float32 parts).
void cascade_equals_full(const AttnCtx& cx, Check& out) {
  const AttentionCase& c = cx.c;
  const Kernel& kern = cx.k.kernel;
  if (c.len_k(0) < 1) return;  // no shared prefix
  const Cascade cs = cascade_of(c);
  if (!cx.k.why_not(cs.prefix).empty() || !cx.k.why_not(cs.suffix).empty()) return;
  const AttentionResult a = cx.k.call(cs.prefix), b = cx.k.call(cs.suffix);
  const std::int64_t rows = c.total_q() * c.heads_q, dv = c.dv;
  if (static_cast<std::int64_t>(a.lse.size()) != rows ||
      static_cast<std::int64_t>(b.lse.size()) != rows)
    return;
  const ref::AttentionValues rf = ref::attention_v2(cs.full), ra = ref::attention_v2(cs.prefix),
                             rs = ref::attention_v2(cs.suffix);
  // The parts as kernel.h's merge takes them (natural-log lse; a row without
  // keys out 0, lse -inf) where the kernel declares another form for its
  // attention_v2 (conventions.hpp; attention_v2.rounding holds it to that
  // form): lse_base2 converted (rounded once more: bl_p + 2 ulp), and a
  // keyless row's masked_lse_inf / ieee_special_values / finite_mask answer
  // replaced by kernel.h's.
  const Conventions& cv = active_conventions();
  const bool keyless_other = cv.masked_lse_inf || cv.ieee_special_values || cv.finite_mask;
  std::vector<std::vector<float>> po = {a.out, b.out}, pl = {a.lse, b.lse};
  const ref::AttentionValues* pr[] = {&ra, &rs};
  for (int p = 0; p < 2; ++p)
    for (std::int64_t row = 0; row < rows; ++row) {
      float& l = pl[p][static_cast<std::size_t>(row)];
      if (cv.lse_base2) l = static_cast<float>(static_cast<double>(l) * std::numbers::ln2);
      if (keyless_other && !std::isfinite(pr[p]->lse[static_cast<std::size_t>(row)])) {
        l = -INFINITY;
        std::fill_n(po[p].begin() + row * dv, dv, 0.0f);
      }
    }
  std::vector<float> ml;
  const std::vector<float> m = kern.merge_attention_states_n(rows, dv, po, pl, &ml);
  const std::vector<RowBudget> ba = attention_budgets(cs.prefix, ra),
                               bs = attention_budgets(cs.suffix, rs);
  struct Part {
    const ref::AttentionValues& r;
    const std::vector<RowBudget>& b;
  };
  const Part parts[] = {{ra, ba}, {rs, bs}};
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::size_t ri = static_cast<std::size_t>(row);
    const double L = rf.lse[ri];
    auto where = [&] {
      return "cascade (a prefix of " + std::to_string(c.len_k(0)) + " keys shared by " +
             std::to_string(c.batch) +
             " request(s), sequence 0's keys; request b's suffix: "
             "sequence b's keys, none for request 0) row " +
             std::to_string(row / c.heads_q) + " head " + std::to_string(row % c.heads_q) +
             " (prefix lse " + fmt(pl[0][ri]) + ", suffix lse " + fmt(pl[1][ri]) + ")";
    };
    double w[2] = {0, 0}, bl_sum = 0, lse_bound = budget::ulp(DType::float32, L) + 4 * u32;
    for (int p = 0; p < 2; ++p) {
      const double lp = parts[p].r.lse[ri];
      if (!std::isfinite(lp) || parts[p].b[ri].out_abs.empty()) continue;  // an empty part
      w[p] = std::exp(lp - L);
      const double bl =
          parts[p].b[ri].lse_abs + (cv.lse_base2 ? 2 * budget::ulp(DType::float32, lp) : 0.0);
      bl_sum += bl;
      lse_bound += w[p] * bl;
    }
    for (std::int64_t x = 0; x < dv; ++x) {
      const std::size_t e = static_cast<std::size_t>(row * dv + x);
      double internal = 0, mag = 0;
      for (int p = 0; p < 2; ++p) {
        if (w[p] == 0) continue;
        const double bo = parts[p].b[ri].out_abs[static_cast<std::size_t>(x)];
        const double mp = w[p] * (std::abs(parts[p].r.out[e]) + bo);
        mag += mp;
        internal += w[p] * bo + (8.0 + std::max(0.0, L - parts[p].r.lse[ri])) * u32 * mp;
      }
      internal += std::expm1(2.0 * bl_sum) * mag;
      consider(
          out, m[e], rf.out[e], budget::output_abs(DType::float32, rf.out[e], internal),
          [&] { return where() + " out[" + std::to_string(x) + "]"; }, "full-attention");
    }
    out.worst(elem(DType::float32, ml[ri], L, lse_bound, where() + " lse", "full-attention"));
  }
}

// attention_v2.key_permutation: keys permuted with their values and
// padding bytes, per sequence, on the case without position features.
void key_permutation(const AttnCtx& cx, Check& out) {
  const Entry& k = cx.k;
  const AttnParams& p = cx.p;
  const AttentionCase& c = cx.c;
  const AttentionCase c0 = without_positions(c);
  if (k.why_not(c0).empty()) {
    AttentionCase pc = c0;
    std::mt19937_64 g(p.seed ^ 0x9e3779b97f4a7c15ull);
    for (std::int64_t b = 0; b < c.batch; ++b) {
      std::vector<std::int64_t> perm(static_cast<std::size_t>(c.len_k(b)));
      for (std::size_t j = 0; j < perm.size(); ++j) perm[j] = static_cast<std::int64_t>(j);
      std::shuffle(perm.begin(), perm.end(), g);
      for (std::int64_t j = 0; j < c.len_k(b); ++j) {
        const std::int64_t to = c.row_k(b, j), from = c.row_k(b, perm[j]);
        std::copy_n(c.k.begin() + from * c.heads_kv * c.d, c.heads_kv * c.d,
                    pc.k.begin() + to * c.heads_kv * c.d);
        std::copy_n(c.v.begin() + from * c.heads_kv * c.dv, c.heads_kv * c.dv,
                    pc.v.begin() + to * c.heads_kv * c.dv);
        if (!c.key_padding_mask.empty()) pc.key_padding_mask[to] = c.key_padding_mask[from];
      }
    }
    const AttentionResult o0 = k.call(c0), po = k.call(pc);
    compare_results(
        out, c0, attention_budgets(c0, as_values(c0, o0)), po, o0, "unpermuted",
        [&](std::size_t row) {
          return "row " + std::to_string(row / c.heads_q) + " head " +
                 std::to_string(row % c.heads_q) + " (keys permuted)";
        },
        [](std::size_t) { return Compare::all; });
  }
}

// attention_v2.head_independence: every input of the other heads
// (queries of heads outside the checked group, keys and values of the
// other key/value heads, their ALiBi slopes and sinks) redrawn.
void head_independence(const AttnCtx& cx, Check& out) {
  const Entry& k = cx.k;
  const AttnType t = cx.t;
  const AttnParams& p = cx.p;
  const AttentionCase& c = cx.c;
  const AttentionResult& o = cx.o;
  const std::vector<RowBudget>& rb = cx.rb;
  std::mt19937_64 g(p.seed ^ 0x4ead);
  std::normal_distribution<double> n01(0.0, 1.0);
  const double spread = spread_of(t, true);
  // Checked: the query heads of one key/value head (MHA/GQA), or one
  // query head (MQA: a single key/value head is shared by all).
  const std::int64_t hk_star = static_cast<std::int64_t>(g() % c.heads_kv);
  const std::int64_t h_star = static_cast<std::int64_t>(g() % c.heads_q);
  auto checked = [&](std::int64_t h) {
    return c.heads_kv > 1 ? c.kv_head(h) == hk_star : h == h_star;
  };
  AttentionCase hc = c;
  // With descales per (sequence, kv head), a redrawn query head that shares
  // its slab with the checked one (MQA) is drawn times the slab's descale f:
  // the slab's largest element then stays at most f times the format's
  // largest, so the call's descale for it is f or a smaller power of two, and
  // the checked head's values, divided by it, stay fp8 elements (a larger
  // descale would push small ones below the format's subnormal grid).
  const std::vector<float> fq = descales_bh(c, 0);
  // (Rows in sequence order, as row by row: the draws are the same.)
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t i = 0; i < c.len_q(b); ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h) {
        if (checked(h)) continue;
        const float f =
            fq.empty() ? 1.0f : fq[static_cast<std::size_t>(b * c.heads_kv + c.kv_head(h))];
        for (std::int64_t x = 0; x < c.d; ++x)
          hc.q[(c.row_q(b, i) * c.heads_q + h) * c.d + x] = round_to(t, n01(g) * spread) * f;
      }
  if (c.heads_kv > 1)
    for (std::int64_t row = 0; row < c.total_k(); ++row)
      for (std::int64_t h = 0; h < c.heads_kv; ++h) {
        if (h == hk_star) continue;
        for (std::int64_t x = 0; x < c.d; ++x)
          hc.k[(row * c.heads_kv + h) * c.d + x] = round_to(t, n01(g) * spread);
        for (std::int64_t x = 0; x < c.dv; ++x)
          hc.v[(row * c.heads_kv + h) * c.dv + x] = round_to(t, n01(g));
      }
  for (std::int64_t h = 0; h < c.heads_q; ++h) {
    if (checked(h)) continue;
    if (!hc.alibi_slopes.empty()) hc.alibi_slopes[h] *= 2.0f;
    if (!hc.sinks.empty()) hc.sinks[h] += 1.0f;
  }
  const AttentionResult ho = k.call(hc);
  compare_results(
      out, c, rb, ho, o, "unchanged-heads",
      [&](std::size_t row) {
        return "row " + std::to_string(row / c.heads_q) + " head " +
               std::to_string(row % c.heads_q) + " (other heads redrawn)";
      },
      [&](std::size_t row) {
        return checked(static_cast<std::int64_t>(row % c.heads_q)) ? Compare::all
                                                                   : Compare::nothing;
      });
}

// attention_v2.sink_equals_extra_key: sinks against one more key per
// sequence (the last), head dim d + 1: q' = (q, 1), k' = (k, 0), the extra
// key (0, t_h) with t_h the sink over the scale, value 0; key/value heads
// repeated per query head (each head has its own sink). The sink is then
// scale * t_h exactly as the kernel forms the extra key's score. Without
// the position features and softcap (the sink has none of them).
void sink_equals_extra_key(const AttnCtx& cx, Check& out) {
  const Entry& k = cx.k;
  const AttnType t = cx.t;
  const AttnDomain& dom = cx.dom;
  const AttnParams& p = cx.p;
  // (Per-head descales taken out: one slab descale cannot hold the sink's
  // key together with the case's keys.)
  const AttentionCase c = without_descale_bh(cx.c);
  AttentionCase sc = without_positions(c);
  sc.softcap = 0.0;
  std::mt19937_64 g(p.seed ^ 0x51c);
  std::normal_distribution<double> n01(0.0, 1.0);
  const double se = static_cast<double>(sc.scale) * sc.q_descale * sc.k_descale;
  std::vector<float> tk(static_cast<std::size_t>(c.heads_q));
  sc.sinks.resize(static_cast<std::size_t>(c.heads_q));
  // Head 0's sink 100 above the scores (not for fp8: t_h would pass the
  // format's range): a sink that must join the running max.
  for (std::int64_t h = 0; h < c.heads_q; ++h) {
    const double want =
        (c.sinks.empty() ? n01(g) : c.sinks[h]) + (h == 0 && !is_quantised(t) ? 100.0 : 0.0);
    tk[h] = round_to(t, want / se);
    sc.sinks[h] = static_cast<float>(se * tk[h]);
  }
  AttentionCase ec = sc;
  ec.sinks.clear();
  // The extra dimension padded with zeros to the kernel's head-dim
  // multiple (q' = (q, 1, 0...), k' = (k, 0, 0...)), and v padded with
  // zero columns where the kernel takes only head_dim_v == head_dim.
  // (fp4 e2m1: an even pad. fp4 and int8 with block scales: only where the
  // extra dimension starts a run of its own, whose scale the call finds
  // whatever the other runs' scales are.)
  const bool packed = t == AttnType::fp4_e2m1;
  if ((packed || t == AttnType::int8) && c.scale_block > 0 && c.d % c.scale_block != 0) return;
  std::int64_t pad = std::max<std::int64_t>(1, dom.head_dim_multiple);
  if (packed && pad % 2) pad *= 2;
  const std::int64_t vpad = c.d == c.dv && !(dom.features & SA_ATTN_UNEQUAL_HEAD_DIMS) ? pad : 0;
  ec.d = c.d + pad;
  ec.dv = c.dv + vpad;
  ec.heads_kv = c.heads_q;
  ec.q.clear();
  for (std::int64_t row = 0; row < c.total_q(); ++row)
    for (std::int64_t h = 0; h < c.heads_q; ++h) {
      ec.q.insert(ec.q.end(), c.q.begin() + (row * c.heads_q + h) * c.d,
                  c.q.begin() + (row * c.heads_q + h + 1) * c.d);
      ec.q.push_back(1.0f);
      ec.q.insert(ec.q.end(), static_cast<std::size_t>(pad - 1), 0.0f);
    }
  ec.k.clear();
  ec.v.clear();
  ec.key_padding_mask.clear();
  if (c.varlen())
    ec.cu_k = {0};
  else
    ec.seqlen_k = c.seqlen_k + 1;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    for (std::int64_t j = 0; j <= c.len_k(b); ++j) {
      const bool extra = j == c.len_k(b);
      const std::int64_t row = extra ? 0 : c.row_k(b, j);
      for (std::int64_t h = 0; h < c.heads_q; ++h) {
        const std::int64_t hk = c.kv_head(h);
        for (std::int64_t x = 0; x < c.d; ++x)
          ec.k.push_back(extra ? 0.0f : c.k[(row * c.heads_kv + hk) * c.d + x]);
        ec.k.push_back(extra ? tk[h] : 0.0f);
        ec.k.insert(ec.k.end(), static_cast<std::size_t>(pad - 1), 0.0f);
        for (std::int64_t x = 0; x < c.dv; ++x)
          ec.v.push_back(extra ? 0.0f : c.v[(row * c.heads_kv + hk) * c.dv + x]);
        ec.v.insert(ec.v.end(), static_cast<std::size_t>(vpad), 0.0f);
      }
      if (!c.key_padding_mask.empty())
        ec.key_padding_mask.push_back(extra ? 1 : c.key_padding_mask[row]);
    }
    if (c.varlen()) ec.cu_k.push_back(ec.cu_k.back() + static_cast<std::int32_t>(c.len_k(b) + 1));
  }
  if (k.why_not(sc).empty() && k.why_not(ec).empty()) {
    AttentionResult so = k.call(sc);
    AttentionResult eo = k.call(ec);
    // lse_without_sink: the sink's lse leaves it out, the extra key's
    // cannot; only the outputs are compared.
    if (active_conventions().lse_without_sink) so.lse.clear(), eo.lse.clear();
    if (vpad > 0) {  // the padded value columns dropped
      std::vector<float> out;
      for (std::size_t row = 0; row * ec.dv < eo.out.size(); ++row)
        out.insert(out.end(), eo.out.begin() + static_cast<std::ptrdiff_t>(row * ec.dv),
                   eo.out.begin() + static_cast<std::ptrdiff_t>(row * ec.dv + c.dv));
      eo.out = std::move(out);
    }
    // Head 0's raised sink leaves its outputs below 2^-100 (weights
    // exp(-100)): subnormal arithmetic no rounding budget bounds, so
    // only its lse is compared.
    compare_results(
        out, sc, attention_budgets(sc, as_values(sc, so)), so, eo, "extra-key",
        [&](std::size_t row) {
          return "row " + std::to_string(row / c.heads_q) + " head " +
                 std::to_string(row % c.heads_q) + " (sink vs extra key)";
        },
        [&](std::size_t row) {
          return row % c.heads_q == 0 && !is_quantised(t) ? Compare::lse_only : Compare::all;
        });
  }
}

// attention_v2.window_within_causal: causal with the case's left window
// (and its window_right, which causal overrides) against the window
// (window_left, 0) without causal.
void window_within_causal(const AttnCtx& cx, Check& out) {
  const Entry& k = cx.k;
  const AttentionCase& c = cx.c;
  AttentionCase cc = c, wc = c;
  cc.causal = true;
  cc.window_right = c.window_right >= 0 ? c.window_right : 3;  // ignored under causal
  wc.causal = false;
  wc.window_right = 0;
  if (k.why_not(cc).empty() && k.why_not(wc).empty()) {
    const AttentionResult co = k.call(cc), wo = k.call(wc);
    compare_results(
        out, cc, attention_budgets(cc, as_values(cc, co)), wo, co, "causal",
        [&](std::size_t row) {
          return "row " + std::to_string(row / c.heads_q) + " head " +
                 std::to_string(row % c.heads_q) + " (window (" + std::to_string(c.window_left) +
                 ", 0) vs causal)";
        },
        [](std::size_t) { return Compare::all; });
  }
}

// attention_v2.fp8_saturation: with quantised inputs (fp8, fp4, int8), values at +-the format's
// largest finite value (about 1 in 8 of v, 1 in 16 of q and k): every
// output is finite and |out| <= V (1 + u_fp8 + (n + 5) u) + ulp(V) with
// V = |v_descale| max |v| over the sequence's keys (out is a convex
// combination of v_descale v_j: the weights sum to at most 1; u_fp8 the
// P quantisation the rounding rule allows, (n + 5) u the float32 sums,
// ulp(V) the output's rounding up).
void fp8_saturation(const AttnCtx& cx, Check& out) {
  const Entry& k = cx.k;
  const AttnType t = cx.t;
  const AttnParams& p = cx.p;
  const AttentionCase& c = cx.c;
  AttentionCase fc = c;
  const float mx = quant_max(t);
  std::mt19937_64 g(p.seed ^ 0xf8);
  // Block scales: an element's largest value is the format's times its run's
  // scale (the scale the call gives the run, which a largest element keeps:
  // 2^e for E8M0, amax / the largest element for e4m3 and float32).
  // Descales per (sequence, kv head): the slab's descale times that (the
  // call's, descales_bh; a largest element keeps it).
  const std::int64_t group = c.heads_q / c.heads_kv;
  auto saturate = [&](std::vector<float>& vec, std::int64_t dim, int one_in, int tensor) {
    const std::vector<float> slab = descales_bh(c, tensor);
    const std::int64_t heads = tensor == 0 ? c.heads_q : c.heads_kv;
    const std::int64_t run = c.scale_block > 0 ? c.scale_block : dim;
    std::vector<float> y(static_cast<std::size_t>(run));
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (std::int64_t s = 0; s < (tensor == 0 ? c.len_q(b) : c.len_k(b)); ++s)
        for (std::int64_t h = 0; h < heads; ++h) {
          const std::int64_t row = (tensor == 0 ? c.row_q(b, s) : c.row_k(b, s)) * heads + h;
          const float f =
              slab.empty()
                  ? 1.0f
                  : slab[static_cast<std::size_t>(b * c.heads_kv + (tensor == 0 ? h / group : h))];
          for (std::int64_t r0 = 0; r0 < dim; r0 += run) {
            float* x = &vec[static_cast<std::size_t>(row * dim + r0)];
            const std::int64_t n = std::min(run, dim - r0);
            for (std::int64_t i = 0; i < n; ++i) y[static_cast<std::size_t>(i)] = x[i] / f;
            const float top =
                f * (c.scale_block > 0 ? mx * run_scale(t, c.scale_type, y.data(), n) : mx);
            for (std::int64_t i = 0; i < n; ++i)
              if (g() % static_cast<std::uint64_t>(one_in) == 0) x[i] = g() % 2 ? top : -top;
          }
        }
  };
  saturate(fc.v, c.dv, 8, 2);
  saturate(fc.q, c.d, 16, 0);
  saturate(fc.k, c.d, 16, 1);
  const AttentionResult fo = k.call(fc);
  const DType ot = dtype_of_output(fc.out_type);
  for (std::int64_t b = 0; b < c.batch; ++b) {
    std::vector<double> vmax(static_cast<std::size_t>(c.heads_kv * c.dv), 0.0);
    for (std::int64_t j = 0; j < c.len_k(b); ++j)
      for (std::int64_t e = 0; e < c.heads_kv * c.dv; ++e)
        vmax[e] = std::max<double>(vmax[e], std::abs(fc.v[c.row_k(b, j) * c.heads_kv * c.dv + e]));
    for (std::int64_t i = 0; i < c.len_q(b); ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h)
        for (std::int64_t x = 0; x < c.dv; ++x) {
          const double V = std::abs(fc.v_descale) * vmax[c.kv_head(h) * c.dv + x];
          const double bound =
              V * (1 + unit_of(t) + static_cast<double>(c.len_k(b) + 5) * u32) + budget::ulp(ot, V);
          const std::size_t e = (c.row_q(b, i) * c.heads_q + h) * c.dv + x;
          const double got = std::abs(static_cast<double>(fo.out[e]));
          Check ch = make_check(
              std::isfinite(got) ? got : INFINITY, bound,
              "sequence " + std::to_string(b) + " query " + std::to_string(i) + " head " +
                  std::to_string(h) + " out[" + std::to_string(x) + "] = " + fmt(fo.out[e]) +
                  " against |v_descale| max|v| = " + fmt(V) + " (inputs at +-" + fmt(mx) + ")");
          ch.unit = "absolute";
          if (ch.ratio > out.ratio || !out.applicable) out = ch;
        }
  }
}

// attention_v2.nan_propagates: NaN in one query element of a row that
// sees some key, and in one key element of a key some rows see (for
// fp8 inputs the format's NaN code): kernel.h, every output of each
// row whose inputs hold the NaN is NaN; no other row gets a NaN it
// did not have.
void nan_propagates(const AttnCtx& cx, Check& out) {
  const Entry& k = cx.k;
  const AttnParams& p = cx.p;
  const AttentionCase& c = cx.c;
  const AttentionResult& o = cx.o;
  // (fp4 and int8 hold no NaN: with block scales it is a run's scale.)
  if ((c.qkv == AttnType::fp4_e2m1 || c.qkv == AttnType::int8) && c.scale_block == 0) return;
  std::mt19937_64 g(p.seed ^ 0x7a7a);
  // Rows (b, i) with their visible keys; with the per-head masks (attn_mask,
  // block, tree) rows (b, i, h), a head seeing a key (else h = -1: any head).
  const bool per_head = c.attn_mask.used() || c.block_mask.used() || c.tree_mask.used();
  struct Seen {
    std::int64_t b, i, h;
  };
  std::vector<Seen> seen;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t i = 0; i < c.len_q(b); ++i)
      for (std::int64_t h = 0; h < (per_head ? c.heads_q : 1); ++h)
        for (std::int64_t j = 0; j < c.len_k(b); ++j)
          if (per_head ? ref::key_visible(c, b, h, i, j) : ref::key_visible(c, b, i, j)) {
            seen.push_back({b, i, per_head ? h : -1});
            break;
          }
  if (!seen.empty()) {
    AttentionCase nc = c;
    const auto [bq, iq, hq0] = seen[g() % seen.size()];
    const auto hq_draw = static_cast<std::int64_t>(g() % c.heads_q);
    const std::int64_t hq = per_head ? hq0 : hq_draw;
    nc.q[(c.row_q(bq, iq) * c.heads_q + hq) * c.d + static_cast<std::int64_t>(g() % c.d)] = NAN;
    // A key seen by the row of another random pick, on a random key/value
    // head (per-head masks: the one of the head that sees it).
    const auto [bk, ik, hk0] = seen[g() % seen.size()];
    std::vector<std::int64_t> vis;
    for (std::int64_t j = 0; j < c.len_k(bk); ++j)
      if (per_head ? ref::key_visible(c, bk, hk0, ik, j) : ref::key_visible(c, bk, ik, j))
        vis.push_back(j);
    const std::int64_t jk = vis[g() % vis.size()];
    const auto hk_draw = static_cast<std::int64_t>(g() % c.heads_kv);
    const std::int64_t hk = per_head ? c.kv_head(hk0) : hk_draw;
    nc.k[(c.row_k(bk, jk) * c.heads_kv + hk) * c.d + static_cast<std::int64_t>(g() % c.d)] = NAN;
    const AttentionResult no = k.call(nc);
    std::vector<char> hit(static_cast<std::size_t>(c.total_q() * c.heads_q), 0);
    hit[static_cast<std::size_t>(c.row_q(bq, iq) * c.heads_q + hq)] = 1;
    for (std::int64_t i = 0; i < c.len_q(bk); ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h)
        if (c.kv_head(h) == hk && ref::key_visible(c, bk, h, i, jk))
          hit[static_cast<std::size_t>(c.row_q(bk, i) * c.heads_q + h)] = 1;
    std::size_t wrong = 0;
    std::string first;
    auto bad = [&](std::size_t row, const char* what, float before, float after) {
      if (wrong++ == 0)
        first = "row " + std::to_string(row / c.heads_q) + " head " +
                std::to_string(row % c.heads_q) + " " + what + " = " + fmt(after) +
                (hit[row] ? " (its query or a key it sees holds the NaN: NaN expected)"
                          : " (no NaN in its inputs; " + fmt(before) + " without them)");
    };
    for (std::size_t row = 0; row < hit.size(); ++row) {
      for (std::int64_t x = 0; x < c.dv; ++x) {
        const std::size_t e = row * c.dv + x;
        if (hit[row] ? !std::isnan(no.out[e]) : std::isnan(no.out[e]) && !std::isnan(o.out[e]))
          bad(row, ("out[" + std::to_string(x) + "]").c_str(), o.out[e], no.out[e]);
      }
      if (row < no.lse.size() && (hit[row] ? !std::isnan(no.lse[row])
                                           : std::isnan(no.lse[row]) && !std::isnan(o.lse[row])))
        bad(row, "lse", o.lse[row], no.lse[row]);
    }
    Check ch =
        make_check(static_cast<double>(wrong), 0.0,
                   wrong ? first + "; NaN put in q of sequence " + std::to_string(bq) + " query " +
                               std::to_string(iq) + " head " + std::to_string(hq) +
                               " and in k of sequence " + std::to_string(bk) + " key " +
                               std::to_string(jk) + " kv head " + std::to_string(hk)
                         : "NaN in an unmasked query and key element: every row "
                           "holding it is NaN, no other row is");
    ch.unit = "outputs wrong";
    out = ch;
  }
}

// attention_v2.mask_equals_removed_keys: a row under the boolean, block
// and tree masks (and causal, window, key padding) equals the same row
// computed with only the keys it sees, unmasked: one query, one head, its
// visible keys and values in order, their bias values as a [1][1][1][n]
// bias, the same scale, softcap, sink, descales and adaptive temperature.
// Up to six rows per case, each with at least one key masked and one seen.
// The scores, hence the rounding budget of the row, are the same: within
// twice that budget (the two calls may sum in different orders). Cases
// without ALiBi (its distances change when keys are removed).
void mask_equals_removed_keys(const AttnCtx& cx, Check& out) {
  const Entry& k = cx.k;
  const AttentionCase& c = cx.c;
  const AttentionResult& o = cx.o;
  const std::vector<RowBudget>& rb = cx.rb;
  std::mt19937_64 g(cx.p.seed ^ 0x3a5cull);
  struct Pick {
    std::int64_t b, i, h;
  };
  std::vector<Pick> rows;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t i = 0; i < c.len_q(b); ++i)
      for (std::int64_t h = 0; h < c.heads_q; ++h) {
        std::int64_t seen = 0;
        for (std::int64_t j = 0; j < c.len_k(b); ++j) seen += ref::key_visible(c, b, h, i, j);
        if (seen > 0 && seen < c.len_k(b)) rows.push_back({b, i, h});
      }
  std::shuffle(rows.begin(), rows.end(), g);
  if (rows.size() > 6) rows.resize(6);
  for (const auto& bih : rows) {
    // (named copies: clang 14 cannot capture structured bindings in the lambdas below)
    const std::int64_t b = bih.b, i = bih.i, h = bih.h;
    const std::int64_t row = c.row_q(b, i), hk = c.kv_head(h);
    AttentionCase r;
    r.qkv = c.qkv;
    r.out_type = c.out_type;
    r.seqlen_q = 1;
    r.d = c.d;
    r.dv = c.dv;
    r.scale = c.scale;
    r.softcap = c.softcap;
    r.q_descale = c.q_descale;
    r.k_descale = c.k_descale;
    r.v_descale = c.v_descale;
    r.scale_block = c.scale_block;  // (whole head rows copied: the same runs)
    r.descale_bh = c.descale_bh;    // (the values are the products: the call re-derives)
    r.scale_type = c.scale_type;
    r.adaptive = c.adaptive;
    if (!c.sinks.empty()) r.sinks = {c.sinks[static_cast<std::size_t>(h)]};
    r.q.assign(c.q.begin() + (row * c.heads_q + h) * c.d,
               c.q.begin() + (row * c.heads_q + h + 1) * c.d);
    std::vector<float> bias;
    for (std::int64_t j = 0; j < c.len_k(b); ++j) {
      if (!ref::key_visible(c, b, h, i, j)) continue;
      const std::int64_t kr = c.row_k(b, j) * c.heads_kv + hk;
      r.k.insert(r.k.end(), c.k.begin() + kr * c.d, c.k.begin() + (kr + 1) * c.d);
      r.v.insert(r.v.end(), c.v.begin() + kr * c.dv, c.v.begin() + (kr + 1) * c.dv);
      if (c.attn_bias.used()) bias.push_back(ref::score_bias(c, b, h, i, j));
    }
    r.seqlen_k = static_cast<std::int64_t>(r.k.size()) / c.d;
    if (!bias.empty()) {
      r.attn_bias.nb = r.attn_bias.nh = r.attn_bias.nq = 1;
      r.attn_bias.nk = r.seqlen_k;
      r.attn_bias.v = bias;
    }
    if (!k.why_not(r).empty()) continue;
    const AttentionResult ro = k.call(r);
    const auto at = static_cast<std::size_t>(row * c.heads_q + h);
    auto where = [&](const std::string& what) {
      return "sequence " + std::to_string(b) + " query " + std::to_string(i) + " head " +
             std::to_string(h) + " " + what + " (masked vs the " + std::to_string(r.seqlen_k) +
             " seen keys alone)";
    };
    for (std::int64_t x = 0; x < c.dv; ++x)
      consider(
          out, o.out[at * c.dv + x], ro.out[x], 2 * rb[at].out_abs[x],
          [&] { return where("out[" + std::to_string(x) + "]"); }, "removed-keys");
    if (at < o.lse.size() && !ro.lse.empty())
      out.worst(elem(DType::float32, o.lse[at], ro.lse[0], 2 * rb[at].lse_abs, where("lse"),
                     "removed-keys"));
  }
}

// attention_v2.trivial_masks_change_nothing: a case without masks called
// again with the masks that mask nothing, each the kernel declares: an
// attn_mask of ones and an attn_bias of zeros, both one element broadcast
// over every (sequence, head, query, key) (all four strides 0). s + 0 is s
// exactly, so the scores, hence the row's rounding budget, are the same:
// within twice that budget (the kernel may take another path with masks).
void trivial_masks_change_nothing(const AttnCtx& cx, Check& out) {
  const AttentionCase& c = cx.c;
  AttentionCase mc = c;
  const AttentionShapes& s = cx.run.config.attention;
  if (feature_allowed(s, cx.dom, "attn_mask")) mc.attn_mask = {1, 1, 1, 1, {1.0f}, false};
  if (feature_allowed(s, cx.dom, "attn_bias")) mc.attn_bias = {1, 1, 1, 1, {0.0f}, false};
  if (!mc.masks()) return;
  if (!cx.k.why_not(mc).empty()) return;
  const AttentionResult mo = cx.k.call(mc);
  compare_results(
      out, c, cx.rb, mo, cx.o, "unmasked",
      [&](std::size_t row) {
        return "row " + std::to_string(row / c.heads_q) + " head " +
               std::to_string(row % c.heads_q) + " (an attn_mask of ones, an attn_bias of zeros)";
      },
      [](std::size_t) { return Compare::all; });
}

}  // namespace

namespace {

// The family's properties, one row each, in the order they judge a case:
// the registry id (properties/suite.cpp: claim, rule, unit), the function
// judging one case, whether the interface v1 slot carries the features it
// needs, and which cases it applies to (nullptr: every case).
struct AttentionProperty {
  const char* id;
  void (*judge)(const AttnCtx&, Check&);
  bool v1;
  bool (*applies)(const AttnCtx&);
};
const AttentionProperty kAttention[] = {
    {"attention_v2.rounding", rounding, true, nullptr},
    {"attention_v2.flash_attention_2x", flash_attention_2x, true,
     [](const AttnCtx& cx) { return cx.low; }},
    {"attention_v2.masked_never_leak", masked_never_leak, true, nullptr},
    {"attention_v2.gqa_equals_repeated", gqa_equals_repeated, false,
     [](const AttnCtx& cx) { return cx.c.heads_kv < cx.c.heads_q; }},
    {"attention_v2.varlen_equals_separate", varlen_equals_separate, false,
     [](const AttnCtx& cx) { return cx.c.varlen(); }},
    {"attention_v2.key_permutation", key_permutation, true, nullptr},
    {"attention_v2.head_independence", head_independence, false,
     [](const AttnCtx& cx) { return cx.c.heads_q > 1; }},
    {"attention_v2.sink_equals_extra_key", sink_equals_extra_key, false, nullptr},
    {"attention_v2.window_within_causal", window_within_causal, false, nullptr},
    {"attention_v2.fp8_saturation", fp8_saturation, false,  // (no fp8 input in v1)
     [](const AttnCtx& cx) { return is_quantised(cx.t); }},
    {"attention_v2.nan_propagates", nan_propagates, true, nullptr},
    {"attention_v2.paged_equals_contiguous", paged_equals_contiguous, false,
     [](const AttnCtx& cx) { return cx.c.paged(); }},
    {"attention_v2.mask_equals_removed_keys", mask_equals_removed_keys, false,
     [](const AttnCtx& cx) {
       return (cx.c.attn_mask.used() || cx.c.block_mask.used() || cx.c.tree_mask.used()) &&
              cx.c.alibi_slopes.empty();
     }},
    {"attention_v2.trivial_masks_change_nothing", trivial_masks_change_nothing, false,
     [](const AttnCtx& cx) {
       return (cx.dom.features & (SA_ATTN_BOOL_MASK | SA_ATTN_BIAS)) != 0 && !cx.c.masks();
     }},
    {"attention_v2.chunked_prefill_equals_prefill", chunked_prefill_equals_prefill, true, nullptr},
    {"attention_v2.large_offsets", large_offsets, false,
     [](const AttnCtx& cx) { return cx.c.paged(); }},
    {"attention_v2.cascade_equals_full", cascade_equals_full, false,
     [](const AttnCtx& cx) {
       return cx.c.out_type == AttnType::float32 && cx.k.op == Op::attention_v2 &&
              cx.k.kernel.declares(SA_ATTN_LSE) &&
              cx.k.kernel.supports(Op::merge_attention_states_n);
     }},
};
constexpr int kSlots = static_cast<int>(std::size(kAttention));
constexpr int kRound = 0;  // rounding: also where a refused case is recorded
constexpr const char* kCoverageId = "attention_v2.coverage";

// The features interface v1 attention carries (kernel.h sa_attention_args):
// one sequence, one head, causal bottom-right, the key mask, head_dim_v,
// row strides, the adaptive temperature and num_splits.
constexpr const char* kV1Features[] = {"causal",     "key_padding", "strided",
                                       "unequal_dv", "adaptive",    "split_kv"};

// The domain of the v1 slot for input type t: kernel.h's v1 arguments (one
// sequence, one head, causal bottom-right) and, for a kernel that also has
// attention_v2, within what it declares there for t (features, head dims,
// lengths): such a kernel's v1 slot is the single-head case of its
// attention_v2 (the built-in naive and CUDA kernels forward one to the
// other). A kernel with the v1 slot alone is held to every v1 feature.
AttnDomain v1_domain(const Kernel& k, AttnType t) {
  AttnDomain d =
      k.abi_version() >= 2 && k.supports(Op::attention_v2) ? domain_of(k, t) : AttnDomain{};
  d.features &= SA_ATTN_CAUSAL | SA_ATTN_KEY_PADDING | SA_ATTN_STRIDED | SA_ATTN_UNEQUAL_HEAD_DIMS |
                SA_ATTN_ADAPTIVE | SA_ATTN_SPLIT_KV | SA_ATTN_LSE | SA_ATTN_ENTROPY;
  d.required &= d.features;
  d.constraints |= SA_ATTN_ONLY_BOTTOM_RIGHT;
  d.max_batch = 1;
  d.max_heads = 1;
  return d;
}

// The spec's [attention] shapes restricted to the v1 features (bhsd, a
// layout of several heads, means nothing for one head).
AttentionShapes v1_shapes(const AttentionShapes& s) {
  AttentionShapes r = s;
  std::vector<std::string> f;
  for (const char* x : kV1Features)
    if (!s.features || std::find(s.features->begin(), s.features->end(), x) != s.features->end())
      f.emplace_back(x);
  r.features = f;
  return r;
}

// attention_v2.coverage: every declared feature and feature pair in at
// least pair_cases of the cases actually run by one entry's search for
// input type t (tally), of which plan_cases were the fixed coverage cases.
void coverage(const Run& run, Op op, AttnType t, const CoverageTally& tally,
              const NotApplicableLog& na, std::size_t plan_cases, std::size_t features,
              int pair_cases) {
  const std::vector<CoverageCell> cells = tally.cells(pair_cases);
  Verdict v;
  v.property = kCoverageId;
  v.claim = claim_of(v.property);
  v.rule = rule_by_id("pairwise_coverage");
  v.kernel = run.kernel.name();
  v.op = name_of(op);
  v.dtype = name_of(t);
  v.coverage = cells;
  v.cases = tally.cases();
  std::string short_cells;
  int n_short = 0;
  for (const auto& c : cells)
    if (c.cases < c.required) {
      if (n_short++ < 12)
        short_cells += (short_cells.empty() ? "" : ", ") + c.cell + " " + std::to_string(c.cases) +
                       " of " + std::to_string(c.required);
    }
  v.measured = n_short;
  v.bound = 0;
  v.outcome = n_short ? Outcome::incomplete : Outcome::pass;
  // A type the kernel does not take at all: nothing to cover.
  bool type_refused = tally.cases() == 0 && na.count > 0;
  for (const auto& [why, n] : na.reasons)
    type_refused =
        type_refused && (why.rfind("input type", 0) == 0 || why.rfind("output type", 0) == 0);
  if (type_refused) {
    v.outcome = Outcome::skip;
    v.measured = v.bound = NAN;
    v.coverage.clear();
    v.note = "not applicable: " + na.text();
    run.emit(v);
    return;
  }
  v.note = std::to_string(tally.cases()) + " cases run (" + std::to_string(plan_cases) +
           " fixed coverage cases, the rest random) over " + std::to_string(features) +
           " declared features and " + std::to_string(cells.size() - features) +
           " pairs, each required in " + std::to_string(pair_cases) + " case(s)";
  if (n_short)
    v.note += "; short: " + short_cells + (n_short > 12 ? ", ..." : "") +
              " (cases the kernel refused or that failed before running are not counted)";
  if (!na.text().empty()) v.note += "; " + na.text();
  v.note += "; measured and bound in cells short";
  v.seconds = 0;
  v.kernel_seconds = 0;
  run.emit(v);
}

// One input type of one entry: the search, its verdicts and the coverage verdict.
void run_entry_type(const Run& run, const Entry& entry, AttnType t) {
  const Kernel& k = run.kernel;
  const Op op = entry.op;
  NotApplicableLog na;
  const bool v1 = op == Op::attention;
  const AttnDomain dom = v1 ? v1_domain(k, t) : domain_of(k, t);
  const AttentionShapes shapes = v1 ? v1_shapes(run.config.attention) : run.config.attention;
  const std::vector<std::string> cov_features = coverage_features(dom, shapes);
  CoverageTally tally(cov_features);
  bool counting = true;  // the cases of the search, not those of shrinking
  const bool low = t != AttnType::float32;
  const std::string prop =
      std::string(v1 ? "attention_v2[attention/" : "attention_v2[") + name_of(t) + "]";
  std::function<std::vector<Check>(const AttnParams&)> eval = [&](const AttnParams& p) {
    std::vector<Check> cs(kSlots);
    const AttentionCase c = materialise(p, t);
    if (const std::string why = entry.why_not(c); !why.empty()) {
      if (counting) na.add(why);  // (a shrinking candidate outside the domain is no case)
      return cs;                  // nothing applicable
    }
    run.before(prop, describe(p));
    AttentionResult o;
    try {
      o = entry.call(c);
    } catch (const KernelError& e) {
      if (e.status != SA_UNSUPPORTED) throw;
      // The kernel refused a case inside the domain it declares: a failure
      // of that case (shrunk like any other), not an error of the property.
      cs[kRound] =
          make_check(INFINITY, 0.0,
                     std::string("the kernel refused a case its declaration allows: ") + e.what());
      cs[kRound].unit = "calls refused";
      return cs;
    }
    if (counting) tally.add(c);
    const ref::AttentionValues r = ref::attention_v2(c);
    const auto rb = attention_budgets(c, r);
    const AttnCtx cx{run, entry, t, low, dom, p, c, o, r, rb};
    // Each property that applies to the case judges it into its slot; the
    // v1 slot's cases carry none of the features of the others.
    for (int s = 0; s < kSlots; ++s) {
      const AttentionProperty& a = kAttention[s];
      if (s != kRound && !run.wants_property(a.id)) continue;
      if ((v1 && !a.v1) || (a.applies && !a.applies(cx))) continue;
      a.judge(cx, cs[static_cast<std::size_t>(s)]);
    }
    return cs;
  };
  SearchOptions so;
  so.shrink_pool = &run.shrink_pool;
  so.cases = std::max(6, run.config.cases / 8);
  so.seed = run.seed ^ 0xa772 ^ (static_cast<std::uint64_t>(t) * 0x9e37) ^ (v1 ? 0x5e1 : 0);
  so.on_cases_done = [&] { counting = false; };
  // The fixed coverage cases first (the same design on every seed, other
  // values), then the random ones; both shrink by the case's switches.
  const std::vector<AttnParams> plan = coverage_plan(is_quantised(t), shapes, dom, cov_features,
                                                     shapes.pair_cases, so.seed ^ 0xc0fe);
  auto res = search<AttnParams>(
      gen_attention(is_quantised(t), shapes, dom), kSlots, so, eval,
      [&](const AttnParams& p, const std::function<bool(const AttnParams&)>& fails, int& budget) {
        return shrink_attention(p, fails, budget, dom);
      },
      plan);
  for (int s = 0; s < kSlots; ++s) {
    const AttentionProperty& a = kAttention[s];
    if (a.judge == fp8_saturation && !is_quantised(t)) continue;  // quantised inputs only
    if ((v1 && !a.v1) || !run.wants_property(a.id)) continue;
    if (a.judge == flash_attention_2x && !low) {
      Verdict v = skip_verdict(run, a.id, claim_of(a.id), rule_of(a.id), op, DType::float32,
                               kFaFloat32Note);
      v.dtype = name_of(t);
      run.emit(v);
      continue;
    }
    run.emit(
        attention_verdict(run, a.id, rule_of(a.id), op, t, res[static_cast<std::size_t>(s)], na));
  }
  if (run.wants_property(kCoverageId))
    coverage(run, op, t, tally, na, plan.size(), cov_features.size(), shapes.pair_cases);
}

}  // namespace

// Per input type: attention_v2's search, then the v1 slot's (float32 and
// bfloat16, the types interface v1 attention is checked in) when the kernel
// has it; one progress unit-block per type.
void run_attention(const Run& run) {
  const Kernel& k = run.kernel;
  bool any = false;
  for (const AttentionProperty& a : kAttention) any = any || run.wants_property(a.id);
  // attention_v2.coverage counts the same search's cases: selected alone (a
  // run per property, after a crash or in a shard), it still runs it.
  any = any || run.wants_property(kCoverageId);
  if (!any) return;
  for (AttnType t : attention_types(run)) {
    for (const Op op : {Op::attention_v2, Op::attention}) {
      if (!run.wants_op(op)) continue;
      const bool v1 = op == Op::attention;
      if (v1 && t != AttnType::float32 && t != AttnType::bfloat16) continue;
      const bool has =
          v1 ? k.supports(Op::attention) : k.abi_version() >= 2 && k.supports(Op::attention_v2);
      // fp4 and int8 (appended to interface 2) only where declared: a kernel
      // without them gets one note per property, not a search of cases
      // that are all not applicable.
      bool undeclared = false;
      if (has && !v1 && (t == AttnType::fp4_e2m1 || t == AttnType::int8)) {
        const sa_capabilities* cap = k.raw().capabilities;
        const std::uint32_t in = cap && cap->op_dtypes[8] ? cap->op_dtypes[8] : k.raw().dtypes;
        undeclared = (in & (t == AttnType::int8 ? SA_DTYPE_INT8 : SA_DTYPE_FP4_E2M1)) == 0;
      }
      if (!has || undeclared) {
        for (const AttentionProperty& a : kAttention) {
          if (!run.wants_property(a.id) || (v1 && !a.v1)) continue;
          Verdict v = skip_verdict(
              run, a.id, claim_of(a.id), rule_of(a.id), op, DType::float32,
              undeclared ? std::string("not applicable: the kernel declares no ") + name_of(t) +
                               " input for attention_v2 (op_dtypes)"
              : v1 ? "not applicable: the kernel implements no attention (interface v1 slot)"
                   : "not applicable: the kernel implements no attention_v2 (interface v1 "
                     "kernel, or op not claimed)");
          v.dtype = name_of(t);
          run.emit(v);
        }
        continue;
      }
      run_entry_type(run, Entry{k, op}, t);
    }
    run.tick(kAttentionTypeUnits);
  }
}

std::vector<AttnType> attention_types(const Run& run) { return props::attention_types(run.config); }

}  // namespace sa::props::detail

namespace sa::props {

std::vector<AttnType> attention_types(const SuiteConfig& config) {
  std::vector<AttnType> types = config.attention.types;
  if (!types.empty()) {
  } else if (config.dtypes.empty())
    types = {AttnType::float32,  AttnType::bfloat16, AttnType::float16, AttnType::fp8_e4m3,
             AttnType::fp8_e5m2, AttnType::fp4_e2m1, AttnType::int8};
  else
    for (DType t : config.dtypes)
      if (t != DType::float64) types.push_back(detail::attn_type_of(t));
  return types;
}

const std::vector<std::string>& attention_features() {
  static const std::vector<std::string> names = {
      "varlen",       "causal",     "window",    "softcap",    "alibi",      "sinks",
      "key_padding",  "bhsd",       "strided",   "unequal_dv", "adaptive",   "split_kv",
      "paged_kv",     "seqused_k",  "attn_mask", "attn_bias",  "block_mask", "tree_mask",
      "block_scaled", "scale_e4m3", "scale_f32", "descale_bh", "mla"};
  return names;
}

}  // namespace sa::props
