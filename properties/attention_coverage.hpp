// Coverage of the attention_v2 cases: which features a case has, the fixed
// cases that put every declared feature and every pair of declared features
// into at least `pair_cases` cases of each input type (a greedy pairwise
// covering design, as combinatorial testing builds them), the tally of what
// a run actually ran, and a shrinker that turns features off one at a time.
//
// The features of the table are the switches of the case generator a kernel
// declares (SA_ATTN_*), plus the shapes real kernels get wrong: queries
// fewer than keys and more than keys (causal and window alignment), and the
// top-left alignment where a position feature makes it matter.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/attention_case.hpp"
#include "core/verdict.hpp"
#include "properties/attention_cases.hpp"
#include "properties/suite.hpp"

namespace sa::props::detail {

// The coverage features the kernel declares and the spec allows, in table order.
std::vector<std::string> coverage_features(const AttnDomain& dom, const AttentionShapes& s);

// The coverage features a case has (whatever the kernel declares).
std::vector<std::string> features_of(const AttentionCase& c);

// The fixed cases: feature rows of a greedy pairwise covering design over
// `features` (k cases per feature and pair), each made a small case (lengths
// up to 65 x 64, head dims up to 64, except where the domain or spec rules
// them out). The rows depend on the features and k only; the values of
// each case on `seed`, so every seed runs the same design with other data.
std::vector<AttnParams> coverage_plan(bool fp8, const AttentionShapes& s, const AttnDomain& dom,
                                      const std::vector<std::string>& features, int k,
                                      std::uint64_t seed);

// The cases run per feature and per pair of features.
class CoverageTally {
 public:
  explicit CoverageTally(std::vector<std::string> features) : features_(std::move(features)) {}
  void add(const AttentionCase& c);
  int cases() const { return cases_; }
  // Every feature and every pair of features that can occur together, with
  // the cases run and k required.
  std::vector<CoverageCell> cells(int k) const;

 private:
  std::vector<std::string> features_;
  std::map<std::string, std::int64_t> count_;
  int cases_ = 0;
};

// Whether two coverage features can be in one case (e.g. fewer and more
// queries than keys cannot).
bool compatible(const std::string& a, const std::string& b);

// Greedy shrinking by the case's own switches: turns each feature off,
// shrinks batch, heads, head dims and lengths, while `fails` holds and the
// budget lasts, within 3 s (the fixed cases have no RapidCheck shrinks of their own).
// Candidates are moved into the kernel's domain `dom` (apply_domain), so a
// shrunk case is one the kernel declares it takes.
AttnParams shrink_attention(const AttnParams& p,
                            const std::function<bool(const AttnParams&)>& fails, int& budget,
                            const AttnDomain& dom);

}  // namespace sa::props::detail
