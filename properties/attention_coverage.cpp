// Coverage of the attention_v2 cases (attention_coverage.hpp).
#include "properties/attention_coverage.hpp"

#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <utility>

namespace sa::props::detail {
namespace {

constexpr const char* kTable[] = {
    "varlen",     "gqa",          "causal",     "window",        "top_left",
    "softcap",    "alibi",        "sinks",      "key_padding",   "strided",
    "unequal_dv", "adaptive",     "split_kv",   "fewer_queries", "more_queries",
    "paged_kv",   "seqused_k",    "attn_mask",  "attn_bias",     "block_mask",
    "tree_mask",  "block_scaled", "scale_e4m3", "scale_f32",     "descale_bh",
    "mla"};

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string pair_name(const std::string& a, const std::string& b) { return a + "+" + b; }

std::uint64_t mix(std::uint64_t x) {  // SplitMix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

bool compatible(const std::string& a, const std::string& b) {
  // mla is a shape (head dims 576/512 or 192/128, one latent head, V a view
  // of K), required alone: its own fixed rows (coverage_plan), no pairs.
  if (a != b && (a == "mla" || b == "mla")) return false;
  // One scale type per case: E8M0 (block_scaled), e4m3, float32.
  auto scaled = [](const std::string& x) {
    return x == "block_scaled" || x == "scale_e4m3" || x == "scale_f32";
  };
  if (a != b && scaled(a) && scaled(b)) return false;
  return !((a == "fewer_queries" && b == "more_queries") ||
           (a == "more_queries" && b == "fewer_queries"));
}

std::vector<std::string> coverage_features(const AttnDomain& dom, const AttentionShapes& s) {
  std::vector<std::string> out;
  const bool batched = (dom.features & SA_ATTN_BATCHED) != 0;
  bool fewer = false, more = false;
  if (s.lengths.empty()) {
    fewer = dom.max_seqlen_k == 0 || dom.max_seqlen_k >= 2;
    more = (dom.max_seqlen_q == 0 || dom.max_seqlen_q >= 2) &&
           !(dom.constraints & SA_ATTN_ONLY_Q_LE_K);
  } else {
    for (auto [lq, lk] : s.lengths) {
      if (dom.max_seqlen_q > 0) lq = std::min(lq, dom.max_seqlen_q);
      if (dom.max_seqlen_k > 0) lk = std::min(lk, dom.max_seqlen_k);
      fewer = fewer || lq < lk;
      more = more || (lq > lk && !(dom.constraints & SA_ATTN_ONLY_Q_LE_K));
    }
  }
  std::vector<std::int64_t> dims = !s.head_dims.empty() ? s.head_dims : dom.head_dims;
  for (const char* f : kTable) {
    const std::string n = f;
    bool on = false;
    if (n == "gqa")
      on = batched && (dom.features & SA_ATTN_GQA) && (dom.max_heads == 0 || dom.max_heads >= 2) &&
           (s.gqa_ratios.empty() ||
            std::any_of(s.gqa_ratios.begin(), s.gqa_ratios.end(), [](auto g) { return g > 1; }));
    else if (n == "strided")
      on = feature_allowed(s, dom, "strided") || feature_allowed(s, dom, "bhsd");
    else if (n == "top_left")
      on = !(dom.constraints & SA_ATTN_ONLY_BOTTOM_RIGHT) &&
           (feature_allowed(s, dom, "causal") || feature_allowed(s, dom, "window") ||
            feature_allowed(s, dom, "alibi"));
    else if (n == "fewer_queries")
      on = fewer;
    else if (n == "more_queries")
      on = more;
    else if (n == "unequal_dv")
      on = feature_allowed(s, dom, "unequal_dv") && (dims.empty() || dims.size() > 1);
    else if (n == "varlen")
      on = feature_allowed(s, dom, "varlen") && batched;
    else if (n == "mla")  // MLA head dims the kernel takes, V a prefix view of K
      on = mla_dims(s, dom, 0).first > 0;
    else
      on = feature_allowed(s, dom, f);
    if (on) out.push_back(n);
  }
  return out;
}

std::vector<std::string> features_of(const AttentionCase& c) {
  std::vector<std::string> f;
  bool fewer = false, more = false;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    fewer = fewer || (c.len_q(b) > 0 && c.len_q(b) < c.len_k(b));
    more = more || (c.len_k(b) > 0 && c.len_q(b) > c.len_k(b));
  }
  const bool window = c.window_left >= 0 || c.window_right >= 0;
  const std::pair<const char*, bool> all[] = {
      {"varlen", c.varlen()},
      {"gqa", c.heads_kv < c.heads_q},
      {"causal", c.causal},
      {"window", window},
      {"top_left", c.top_left && (c.causal || window || !c.alibi_slopes.empty())},
      {"softcap", c.softcap > 0},
      {"alibi", !c.alibi_slopes.empty()},
      {"sinks", !c.sinks.empty()},
      {"key_padding", !c.key_padding_mask.empty()},
      {"strided", c.layout != AttnLayout::bshd || c.row_pad > 0 || c.head_pad > 0},
      {"unequal_dv", c.dv != c.d},
      {"adaptive", c.adaptive},
      {"split_kv", c.num_splits > 1},
      {"fewer_queries", fewer},
      {"more_queries", more},
      {"paged_kv", c.paged()},
      {"seqused_k", c.seqused()},
      {"attn_mask", c.attn_mask.used()},
      {"attn_bias", c.attn_bias.used()},
      {"block_mask", c.block_mask.used()},
      {"tree_mask", c.tree_mask.used()},
      {"block_scaled", c.scale_block > 0 && c.scale_type == ScaleType::e8m0},
      {"scale_e4m3", c.scale_block > 0 && c.scale_type == ScaleType::e4m3},
      {"scale_f32", c.scale_block > 0 && c.scale_type == ScaleType::f32},
      {"descale_bh", c.descale_bh},
      {"mla", c.v_in_k && c.dv < c.d}};
  for (const auto& [n, on] : all)
    if (on) f.push_back(n);
  return f;
}

void CoverageTally::add(const AttentionCase& c) {
  ++cases_;
  const std::vector<std::string> f = features_of(c);
  for (std::size_t i = 0; i < f.size(); ++i) {
    ++count_[f[i]];
    for (std::size_t j = i + 1; j < f.size(); ++j) ++count_[pair_name(f[i], f[j])];
  }
}

std::vector<CoverageCell> CoverageTally::cells(int k) const {
  std::vector<CoverageCell> out;
  auto count = [&](const std::string& n) {
    const auto it = count_.find(n);
    return it == count_.end() ? std::int64_t{0} : it->second;
  };
  for (std::size_t i = 0; i < features_.size(); ++i)
    out.push_back({features_[i], count(features_[i]), k});
  for (std::size_t i = 0; i < features_.size(); ++i)
    for (std::size_t j = i + 1; j < features_.size(); ++j)
      if (compatible(features_[i], features_[j])) {
        const std::string n = pair_name(features_[i], features_[j]);
        out.push_back({n, count(n), k});
      }
  return out;
}

std::vector<AttnParams> coverage_plan(bool fp8, const AttentionShapes& s, const AttnDomain& dom,
                                      const std::vector<std::string>& all_features, int k,
                                      std::uint64_t seed) {
  std::vector<AttnParams> plan;
  // The pairwise design over every feature but mla (its rows follow).
  std::vector<std::string> features = all_features;
  std::erase(features, std::string("mla"));
  const std::size_t nf = features.size();
  if (k <= 0 || nf == 0) return plan;
  // need[i][j]: cases still owed to feature pair (i, j); need[i][i] to feature i.
  std::vector<std::vector<int>> need(nf, std::vector<int>(nf, 0));
  for (std::size_t i = 0; i < nf; ++i)
    for (std::size_t j = i; j < nf; ++j) need[i][j] = compatible(features[i], features[j]) ? k : 0;
  auto index = [&](const char* n) {
    const auto it = std::find(features.begin(), features.end(), n);
    return it == features.end() ? -1 : static_cast<int>(it - features.begin());
  };
  const int top_left = index("top_left"), fewer = index("fewer_queries"),
            more = index("more_queries");
  const int positions[] = {index("causal"), index("window"), index("alibi")};
  const int scale_kinds[] = {index("block_scaled"), index("scale_e4m3"), index("scale_f32")};
  // The design depends on the features and k only (a fixed generator).
  std::mt19937_64 g(0xc0'7e'4a'9eull);
  auto owed = [&] {
    for (std::size_t i = 0; i < nf; ++i)
      for (std::size_t j = i; j < nf; ++j)
        if (need[i][j] > 0) return true;
    return false;
  };
  std::vector<std::vector<bool>> rows;
  while (owed() && rows.size() < 200) {
    std::vector<bool> best;
    long best_score = -1;
    for (int cand = 0; cand < 60; ++cand) {
      std::vector<bool> on(nf);
      for (std::size_t i = 0; i < nf; ++i) on[i] = g() % 2 == 1;
      if (fewer >= 0 && more >= 0 && on[fewer] && on[more]) on[g() % 2 ? fewer : more] = false;
      // One scale type per case (compatible()): one of those on kept.
      std::vector<int> sc_on;
      for (int x : scale_kinds)
        if (x >= 0 && on[x]) sc_on.push_back(x);
      if (sc_on.size() > 1) {
        const int keep = sc_on[g() % sc_on.size()];
        for (int x : sc_on) on[x] = x == keep;
      }
      if (top_left >= 0 && on[top_left] &&
          std::none_of(std::begin(positions), std::end(positions),
                       [&](int p) { return p >= 0 && on[p]; })) {
        std::vector<int> ps;
        for (int p : positions)
          if (p >= 0) ps.push_back(p);
        on[ps[g() % ps.size()]] = true;
      }
      long score = 0;
      for (std::size_t i = 0; i < nf; ++i)
        for (std::size_t j = i; j < nf && on[i]; ++j)
          if (on[j] && need[i][j] > 0) score += need[i][j];
      if (score > best_score) best_score = score, best = on;
    }
    if (best_score <= 0) break;
    for (std::size_t i = 0; i < nf; ++i)
      for (std::size_t j = i; j < nf; ++j)
        if (best[i] && best[j] && need[i][j] > 0) --need[i][j];
    rows.push_back(best);
  }
  // Shapes: small, tile-straddling lengths in the relation the row asks for.
  static const std::pair<std::int64_t, std::int64_t>
      kFewer[] = {{17, 40}, {7, 33}, {64, 65}, {1, 65}},
      kMore[] = {{40, 17}, {33, 7}, {65, 64}, {9, 1}}, kEqual[] = {{32, 32}, {16, 16}, {1, 1}};
  auto pick_length = [&](std::size_t r, int rel) {  // rel: -1 fewer, 1 more, 0 neither
    std::vector<std::pair<std::int64_t, std::int64_t>> from;
    for (auto [lq, lk] : s.lengths) {
      if (dom.max_seqlen_q > 0) lq = std::min(lq, dom.max_seqlen_q);
      if (dom.max_seqlen_k > 0) lk = std::min(lk, dom.max_seqlen_k);
      if ((rel < 0 && lq < lk) || (rel > 0 && lq > lk) || rel == 0) from.emplace_back(lq, lk);
    }
    if (from.empty() && s.lengths.empty()) {
      if (rel < 0) from.assign(std::begin(kFewer), std::end(kFewer));
      if (rel > 0) from.assign(std::begin(kMore), std::end(kMore));
      if (rel == 0) from.assign(std::begin(kEqual), std::end(kEqual));
      for (auto& [lq, lk] : from) {
        if (dom.max_seqlen_q > 0) lq = std::min(lq, dom.max_seqlen_q);
        if (dom.max_seqlen_k > 0) lk = std::min(lk, dom.max_seqlen_k);
      }
      std::erase_if(from, [&](const auto& L) {
        return (rel < 0 && L.first >= L.second) || (rel > 0 && L.first <= L.second);
      });
    }
    if (from.empty())
      from.emplace_back(s.lengths.empty() ? 16 : s.lengths[0].first,
                        s.lengths.empty() ? 16 : s.lengths[0].second);
    std::stable_sort(from.begin(), from.end(), [](const auto& a, const auto& b) {
      return a.first * a.second < b.first * b.second;
    });
    return from[r % std::min<std::size_t>(from.size(), 4)];
  };
  std::vector<std::int64_t> dims = !s.head_dims.empty() ? s.head_dims : dom.head_dims;
  if (!s.head_dims.empty() && !dom.head_dims.empty())
    std::erase_if(dims, [&](std::int64_t d) {
      return std::find(dom.head_dims.begin(), dom.head_dims.end(), d) == dom.head_dims.end();
    });
  if (dims.empty()) dims = {64, 32, 8, 40, 16};
  std::erase_if(dims, [&](std::int64_t d) {
    return (dom.max_head_dim > 0 && d > dom.max_head_dim) ||
           (dom.head_dim_multiple > 1 && d % dom.head_dim_multiple != 0);
  });
  if (dims.empty())
    dims = {dom.head_dim_multiple > 1 ? dom.head_dim_multiple
                                      : std::max<std::int64_t>(1, dom.max_head_dim)};
  std::int64_t gqa_group = 4;
  if (!s.gqa_ratios.empty())
    for (std::int64_t r : s.gqa_ratios)
      if (r > 1) {
        gqa_group = r;
        break;
      }
  static const char* const dists[] = {"gaussian", "fa3_outliers", "small_int"};
  static const std::int64_t kSplits[] = {3, 64, 2};
  const bool batched = (dom.features & SA_ATTN_BATCHED) != 0;
  std::size_t paged_rows = 0;
  bool owe_256 = false;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    auto on = [&](const char* n) {
      const int i = index(n);
      return i >= 0 && rows[r][static_cast<std::size_t>(i)];
    };
    AttnParams p;
    p.plan = true;
    p.dist = dists[r % 3];
    const auto L = pick_length(r, on("fewer_queries") ? -1 : on("more_queries") ? 1 : 0);
    p.sq = L.first;
    p.sk = L.second;
    p.d = dims[r % dims.size()];
    p.dv = on("unequal_dv") ? dims[(r + 1) % dims.size()] : p.d;
    if (p.dv == p.d && on("unequal_dv")) p.dv = p.d > 1 ? p.d / 2 : 2;
    p.varlen = on("varlen");
    p.batch = batched ? (p.varlen ? 3 : 2) : 1;
    p.heads_kv = batched ? 2 : 1;
    p.group = on("gqa") ? gqa_group : 1;
    if (dom.max_batch > 0) p.batch = std::min(p.batch, dom.max_batch);
    while (dom.max_heads > 0 && p.heads_kv * p.group > dom.max_heads && p.heads_kv > 1)
      --p.heads_kv;
    while (dom.max_heads > 0 && p.heads_kv * p.group > dom.max_heads && p.group > 2) p.group /= 2;
    auto work = [&] {
      return static_cast<double>(p.batch * p.heads_kv * p.group) * static_cast<double>(p.sq) *
             static_cast<double>(p.sk) * static_cast<double>(p.d + p.dv);
    };
    while (work() > s.max_work && p.heads_kv > 1) --p.heads_kv;
    while (work() > s.max_work && p.batch > (p.varlen ? 2 : 1)) --p.batch;
    p.causal = on("causal");
    p.top_left = on("top_left");
    if (on("window")) {
      static const std::int64_t kWin[][2] = {{-3, -1}, {-4, 0}, {-1, 2}, {2, 1}};
      const auto* w = kWin[r % 4];
      p.wl = w[0] < -1 ? std::max<std::int64_t>(0, p.sk / -w[0]) : w[0];
      p.wr = w[1];
    }
    p.softcap = on("softcap") ? 5.0 + static_cast<double>((r * 7) % 46) : 0.0;
    p.alibi = on("alibi");
    p.sinks = on("sinks");
    p.key_pad = on("key_padding");
    // A quarter of the key-padding rows left-padded: a left-padded mask is
    // mostly ones, and the scattered masks are what catch a misindexed mask.
    p.left_pad = p.key_pad && r % 4 == 0;
    if (on("strided")) {
      const bool bhsd = feature_allowed(s, dom, "bhsd"),
                 strided = feature_allowed(s, dom, "strided");
      p.bhsd = bhsd && (!strided || r % 2 == 0);
      p.row_pad = strided && !p.bhsd ? 3 : 0;
      p.head_pad = strided && r % 4 == 1 ? 1 : 0;
    }
    p.adaptive = on("adaptive");
    p.splits = on("split_kv") ? kSplits[r % 3] : 0;
    p.descale = fp8 ? static_cast<int>(r % 4) : 0;
    if (on("paged_kv")) {
      // The kinds cycle over the paged rows; a 256-token page goes to a row
      // whose queries see keys past 128 (not top-left causal or window, not
      // more queries than keys), the next such row when this one is not.
      std::size_t pr = paged_rows++ % 4;
      const bool far_hidden =
          on("more_queries") || (on("top_left") && (on("causal") || on("window")));
      if (pr == 1 && far_hidden)
        pr = 0, owe_256 = true;
      else if (owe_256 && !far_hidden && pr != 2)
        pr = 1, owe_256 = false;
      // A page size that is not a power of two, one above 128 (with more
      // keys than 128 in one page), ids across 65,535 (tiny pages and
      // dims), and the common 16.
      static const std::int64_t kPages[] = {5, 256, 2, 16};
      p.page_size = kPages[pr];
      if (p.page_size > 128) p.sk = std::max<std::int64_t>(p.sk, 200);
      if (dom.max_seqlen_k > 0) p.sk = std::min(p.sk, dom.max_seqlen_k);
      const bool tiny_dims_ok = s.head_dims.empty() && dom.head_dims.empty() &&
                                (dom.head_dim_multiple <= 1 || 8 % dom.head_dim_multiple == 0);
      if (pr == 2 && tiny_dims_ok) {
        p.high_pages = true;
        // (8 and 16 stay unequal under a head-dim multiple of 8)
        const bool unequal = p.dv != p.d;
        p.d = std::min<std::int64_t>(p.d, 8);
        p.dv = unequal ? 2 * p.d : p.d;
        p.heads_kv = 1;
      }
    }
    p.seqused = on("seqused_k");
    static const std::int64_t kBlocks[] = {32, 16, 8};
    p.scale_block = on("block_scaled") ? kBlocks[r % 3] : 0;
    p.scale_type = 0;
    if (on("scale_e4m3")) p.scale_block = 16, p.scale_type = 1;  // NVFP4
    if (on("scale_f32"))                                         // int8: per token and head, per 32
      p.scale_block = r % 2 ? 32 : kPerRowScale, p.scale_type = 2;
    p.descale_bh = on("descale_bh");
    p.dense = p.seqused && p.varlen && r % 2 == 1;
    // Masks: the broadcast kinds cycle over the rows; block masks of
    // 128 x 128 (FlexAttention's default), 64 x 128 and 16 x 7 with keys past
    // one block (the last block partial); trees of up to 8 draft tokens.
    if (on("attn_mask")) p.bool_mask = 1 + static_cast<int>(r % 4);
    if (on("attn_bias")) p.bias = 1 + static_cast<int>(r % 5);
    if (on("block_mask")) {
      static const std::int64_t kBl[][2] = {{128, 128}, {64, 128}, {16, 7}};
      p.block_q = kBl[r % 3][0];
      p.block_k = kBl[r % 3][1];
      p.sk = std::max<std::int64_t>(p.sk, p.block_k + 37);
      if (dom.max_seqlen_k > 0) p.sk = std::min(p.sk, dom.max_seqlen_k);
      if (on("more_queries")) p.sq = std::max(p.sq, p.sk + 19);  // the row's length relation
      if (dom.max_seqlen_q > 0) p.sq = std::min(p.sq, dom.max_seqlen_q);
    }
    if (on("tree_mask")) {
      p.tree = true;
      p.sq = std::min<std::int64_t>(p.sq, 2 + static_cast<std::int64_t>(r % 7));
      // More draft tokens than keys where the row asks for it (every key a
      // draft token), else a prefix before them.
      if (on("more_queries"))
        p.sk = std::max<std::int64_t>(1, std::min(p.sk, p.sq - 1));
      else if (on("fewer_queries"))
        p.sk = std::max(p.sk, p.sq + 1);
    }
    p.seed = (mix(seed ^ mix(r + 1)) >> 11) | 1;
    apply_domain(p, dom);
    plan.push_back(p);
  }
  // Paged KV: the design's rows may all hide the keys a page kind needs
  // (top-left causal, windows, one key), so three rows more where every
  // query sees every key: pages of 5 tokens (not a power of two), of 256
  // with 200 keys (past a 128-token tile), and ids across 65,535.
  if (index("paged_kv") >= 0) {
    static const std::int64_t kClear[][3] = {{5, 17, 40}, {256, 17, 200}, {2, 7, 65}};
    for (std::size_t i = 0; i < 3; ++i) {
      AttnParams p;
      p.plan = true;
      p.dist = "gaussian";
      p.page_size = kClear[i][0];
      p.sq = kClear[i][1];
      p.sk = kClear[i][2];
      if (dom.max_seqlen_q > 0) p.sq = std::min(p.sq, dom.max_seqlen_q);
      if (dom.max_seqlen_k > 0) p.sk = std::min(p.sk, dom.max_seqlen_k);
      p.sq = std::min(p.sq, p.sk);
      p.d = p.dv = dims[i % dims.size()];
      p.batch = batched ? 2 : 1;
      p.heads_kv = batched ? 2 : 1;
      if (dom.max_batch > 0) p.batch = std::min(p.batch, dom.max_batch);
      if (dom.max_heads > 0) p.heads_kv = std::min(p.heads_kv, dom.max_heads);
      const bool tiny_dims_ok = s.head_dims.empty() && dom.head_dims.empty() &&
                                (dom.head_dim_multiple <= 1 || 8 % dom.head_dim_multiple == 0);
      if (i == 2 && tiny_dims_ok) {
        p.high_pages = true;
        p.d = p.dv = std::min<std::int64_t>(p.d, 8);
        p.heads_kv = 1;
      }
      p.descale = fp8 ? static_cast<int>(i % 4) : 0;
      p.seed = (mix(seed ^ mix(rows.size() + i + 1)) >> 11) | 1;
      apply_domain(p, dom);
      plan.push_back(p);
    }
  }
  // Masks: three rows more where the masks decide (no causal or window):
  // a 128 x 128 block mask over 200 queries and 300 keys (partial last
  // blocks both ways), a non-square 64 x 128 one over 129 x 257, and a tree
  // of 5 draft tokens after 35 prefix keys.
  if (index("block_mask") >= 0 || index("tree_mask") >= 0) {
    static const std::int64_t kClear[][4] = {
        {200, 300, 128, 128}, {129, 257, 64, 128}, {5, 40, 0, 0}};
    for (std::size_t i = 0; i < 3; ++i) {
      const bool tree = kClear[i][2] == 0;
      if (tree ? index("tree_mask") < 0 : index("block_mask") < 0) continue;
      AttnParams p;
      p.plan = true;
      p.dist = "gaussian";
      p.sq = kClear[i][0];
      p.sk = kClear[i][1];
      if (dom.max_seqlen_q > 0) p.sq = std::min(p.sq, dom.max_seqlen_q);
      if (dom.max_seqlen_k > 0) p.sk = std::min(p.sk, dom.max_seqlen_k);
      p.block_q = kClear[i][2];
      p.block_k = kClear[i][3];
      p.tree = tree;
      p.d = p.dv = dims[i % dims.size()];
      p.batch = batched ? 2 : 1;
      p.heads_kv = batched ? 2 : 1;
      if (dom.max_batch > 0) p.batch = std::min(p.batch, dom.max_batch);
      if (dom.max_heads > 0) p.heads_kv = std::min(p.heads_kv, dom.max_heads);
      p.descale = fp8 ? static_cast<int>(i % 4) : 0;
      p.seed = (mix(seed ^ mix(rows.size() + 16 + i)) >> 11) | 1;
      apply_domain(p, dom);
      plan.push_back(p);
    }
  }
  // MLA: k rows of DeepSeek's shapes where the kernel takes them (576/512
  // and 192/128 in turn, one latent key/value head for 16 query heads where
  // GQA is declared, V a prefix view of K): decode, a few queries (varlen
  // where declared) and a paged call (one pool for K and V) in turn.
  if (std::find(all_features.begin(), all_features.end(), "mla") != all_features.end()) {
    static const std::int64_t kMlaLengths[][2] = {{1, 64}, {4, 33}, {2, 100}};
    for (int i = 0; i < k; ++i) {
      const auto m = mla_dims(s, dom, i % 2);
      AttnParams p;
      p.plan = true;
      p.dist = i % 2 ? "fa3_outliers" : "gaussian";
      p.d = m.first;
      p.dv = m.second;
      p.v_in_k = true;
      p.sq = kMlaLengths[i % 3][0];
      p.sk = kMlaLengths[i % 3][1];
      if (dom.max_seqlen_q > 0) p.sq = std::min(p.sq, dom.max_seqlen_q);
      if (dom.max_seqlen_k > 0) p.sk = std::min(p.sk, dom.max_seqlen_k);
      p.batch = batched ? 2 : 1;
      if (dom.max_batch > 0) p.batch = std::min(p.batch, dom.max_batch);
      p.heads_kv = 1;
      p.group = batched && (dom.features & SA_ATTN_GQA) ? 16 : 1;
      while (dom.max_heads > 0 && p.group > dom.max_heads) p.group /= 2;
      p.varlen = i % 3 == 1 && feature_allowed(s, dom, "varlen") && p.batch >= 2;
      if (i % 3 == 2 && feature_allowed(s, dom, "paged_kv")) p.page_size = 64;
      p.descale = fp8 ? i % 4 : 0;
      p.seed = (mix(seed ^ mix(0x3a1a + static_cast<std::uint64_t>(i))) >> 11) | 1;
      apply_domain(p, dom);
      plan.push_back(p);
    }
  }
  return plan;
}

AttnParams shrink_attention(const AttnParams& p0,
                            const std::function<bool(const AttnParams&)>& fails, int& budget,
                            const AttnDomain& dom) {
  AttnParams p = p0;
  // One candidate per switch; the first that still fails is taken, and the
  // list is walked again from the start until none does or the budget ends.
  auto candidates = [&dom](const AttnParams& x) {
    std::vector<AttnParams> c;
    auto add = [&](auto&& change) {
      AttnParams y = x;
      change(y);
      apply_domain(y, dom);
      if (describe(y) != describe(x)) c.push_back(y);  // a change the domain left standing
    };
    if (x.batch > 1) add([](AttnParams& y) { y.batch = y.varlen ? 2 : 1; });
    if (x.batch > 2 && x.varlen) add([](AttnParams& y) { y.batch = 2; });
    if (x.heads_kv > 1) add([](AttnParams& y) { y.heads_kv = 1; });
    if (x.group > 2) add([](AttnParams& y) { y.group = 2; });
    if (x.splits > 1) add([](AttnParams& y) { y.splits = 0; });
    if (x.page_size > 0) add([](AttnParams& y) { y.page_size = 0, y.high_pages = false; });
    if (x.high_pages) add([](AttnParams& y) { y.high_pages = false; });
    if (x.seqused) add([](AttnParams& y) { y.seqused = y.dense = false; });
    if (x.dense) add([](AttnParams& y) { y.dense = false; });
    if (x.bool_mask) add([](AttnParams& y) { y.bool_mask = 0; });
    if (x.bias) add([](AttnParams& y) { y.bias = 0; });
    if (x.block_q > 0) add([](AttnParams& y) { y.block_q = y.block_k = 0; });
    if (x.tree) add([](AttnParams& y) { y.tree = false; });
    if (x.scale_block > 0) add([](AttnParams& y) { y.scale_block = 0, y.scale_type = 0; });
    if (x.descale_bh) add([](AttnParams& y) { y.descale_bh = false; });
    if (x.v_in_k) add([](AttnParams& y) { y.v_in_k = false; });
    if (x.adaptive) add([](AttnParams& y) { y.adaptive = false; });
    if (x.softcap > 0) add([](AttnParams& y) { y.softcap = 0; });
    if (x.sinks) add([](AttnParams& y) { y.sinks = false; });
    if (x.alibi) add([](AttnParams& y) { y.alibi = false; });
    if (x.key_pad) add([](AttnParams& y) { y.key_pad = y.left_pad = false; });
    if (x.left_pad) add([](AttnParams& y) { y.left_pad = false; });
    if (x.wl >= 0 || x.wr >= 0) add([](AttnParams& y) { y.wl = y.wr = -1; });
    if (x.causal) add([](AttnParams& y) { y.causal = false; });
    if (x.top_left) add([](AttnParams& y) { y.top_left = false; });
    if (x.bhsd) add([](AttnParams& y) { y.bhsd = false; });
    if (x.row_pad || x.head_pad) add([](AttnParams& y) { y.row_pad = y.head_pad = 0; });
    if (x.descale) add([](AttnParams& y) { y.descale = 0; });
    if (x.dv != x.d) add([](AttnParams& y) { y.dv = y.d; });
    if (x.d > 1 && x.dv == x.d)
      add([](AttnParams& y) { y.d = y.dv = std::max<std::int64_t>(1, y.d / 2); });
    if (x.sq > 1) add([](AttnParams& y) { y.sq = std::max<std::int64_t>(1, y.sq / 2); });
    if (x.sk > 1) add([](AttnParams& y) { y.sk = std::max<std::int64_t>(1, y.sk / 2); });
    if (x.dist != "small_int") add([](AttnParams& y) { y.dist = "small_int"; });
    return c;
  };
  // At most 3 s of wall: a case of the largest shapes costs about a second.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  bool progress = true;
  while (progress && budget > 0 && std::chrono::steady_clock::now() < deadline) {
    progress = false;
    for (const AttnParams& c : candidates(p)) {
      if (--budget < 0 || std::chrono::steady_clock::now() >= deadline) break;
      if (fails(c)) {
        p = c;
        progress = true;
        break;
      }
    }
  }
  return p;
}

}  // namespace sa::props::detail
