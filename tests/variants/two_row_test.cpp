// The second input row (include/softmax_audit/variant.h, ABI 3 and 4; issue 36):
// a version-3 plugin's two-row functions load and are fuzzed with a second
// row; each planted wrong second-row handling in tests/variants/two_row_plugin.c
// is caught as a failed claim (exit 1) with a shrunk input naming both rows;
// a version-2 build of the example plugin loads and fuzzes as its version-3
// build; a malformed version-3 struct is refused with a message naming it;
// streaming with a second row (ABI 4): a correct two-state stream merges, a
// merge that forgets to rescale the second state is caught with a shrunk
// split, and a version-3 build of the example plugin fuzzes as its version-4
// build.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "variants/fuzz.hpp"

namespace sa::variants {
namespace {

const std::vector<Variant>& plugin() {
  static const std::vector<Variant> v = load_plugin(SA_VARIANT_TWO_ROW_PLUGIN);
  return v;
}

const Variant& plugin_variant(const std::string& name) {
  for (const auto& v : plugin())
    if (v.name == name) return v;
  throw std::runtime_error("no plugin variant " + name);
}

FuzzConfig quick() {
  FuzzConfig cfg;
  cfg.cases = 60;
  cfg.max_log2_n = 8;
  return cfg;
}

TEST(TwoRow, PluginLoadsItsSecondRowDeclarations) {
  ASSERT_EQ(plugin().size(), 6u);
  EXPECT_EQ(plugin_variant("two_diff").in2_kind, In2Kind::logits);
  EXPECT_EQ(plugin_variant("two_select_no_relu").in2_kind, In2Kind::per_key);
  EXPECT_TRUE(plugin_variant("two_laser_mask_v").scalar_output);
  EXPECT_FALSE(plugin_variant("two_diff").scalar_output);
  EXPECT_EQ(plugin_variant("two_diff").in2, "A2: the second logit row");
}

TEST(TwoRow, CorrectDifferentialAttentionPluginClaimsNothingFalse) {
  const auto r = fuzz_variant(plugin_variant("two_diff"), quick());
  for (const auto* p : {"special.neg_inf_mask", "special.nan", "special.pos_inf",
                        "f32_vs_reference", "shift_invariance", "permutation_equivariance"})
    EXPECT_EQ(cell(r, p)->outcome, Outcome::pass) << describe(*cell(r, p));
  EXPECT_EQ(cell(r, "sum_to_one")->outcome, Outcome::fail);  // 1 - 1/2: a finding
  Matrix m;
  m.rows.push_back(r);
  EXPECT_TRUE(claimed_failures(m).empty());
}

// Each planted bug: the claimed cell fails, its shrunk counterexample shows
// the second row, and the matrix reports a failed claim (the CLI's exit 1).
void expect_claim_fails(const std::string& name, const std::string& property) {
  const auto r = fuzz_variant(plugin_variant(name), quick());
  const Verdict* c = cell(r, property);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->outcome, Outcome::fail) << describe(*c);
  EXPECT_TRUE(claims(r, *c));
  EXPECT_NE(c->counterexample.find("in2 = "), std::string::npos) << c->counterexample;
  Matrix m;
  m.rows.push_back(r);
  bool named = false;
  for (const auto& f : claimed_failures(m)) named = named || f.find(property) != std::string::npos;
  EXPECT_TRUE(named) << name << " / " << property << " not among the failed claims";
  std::cout << name << " / " << property << ": " << c->counterexample << "\n";
}

TEST(TwoRow, KernelReadingTheSecondRowReversedFailsItsBound) {
  expect_claim_fails("two_diff_reversed", "f32_vs_reference");
}

TEST(TwoRow, SelectiveKernelWithoutTheReluFailsItsBound) {
  expect_claim_fails("two_select_no_relu", "f32_vs_reference");
}

TEST(TwoRow, LaserWhoseMaskedValuesLeakFailsTheMask) {
  expect_claim_fails("two_laser_mask_v", "special.neg_inf_mask");
}

// Streaming with a second row (ABI 4): the correct two-state stream merges to
// the whole row; the planted merge that adds A2's sums without rescaling is a
// failed claim, shrunk to a two-key split that shows both rows.
TEST(TwoRow, StreamedDifferentialAttentionPluginMerges) {
  const auto r = fuzz_variant(plugin_variant("two_diff_stream"), quick());
  EXPECT_EQ(cell(r, "streamable")->outcome, Outcome::pass) << describe(*cell(r, "streamable"));
  EXPECT_EQ(streamable_word(r), "yes");
  EXPECT_EQ(cell(r, "streamable")->rule.id, "stream.bounded");
}

TEST(TwoRow, SecondStateMergedWithoutRescaleIsCaughtWithAShrunkSplit) {
  expect_claim_fails("two_diff_stream_no_rescale2", "streamable");
  const auto r = fuzz_variant(plugin_variant("two_diff_stream_no_rescale2"), quick());
  const std::string& ce = cell(r, "streamable")->counterexample;
  EXPECT_NE(ce.find(" | "), std::string::npos) << ce;            // a split
  EXPECT_NE(ce.find("into 2 chunks"), std::string::npos) << ce;  // shrunk to two chunks
}

// A version-3 struct cannot claim streaming with a second row; a version-4 one
// that claims it must supply state_push2 and state_finish2.
int dummy_push2(void*, const float*, const float*, int64_t, int64_t, int64_t, void*) { return 0; }
int dummy_finish2(const void*, const float*, const float*, int64_t, float*, void*) { return 0; }
void dummy_init(void*, void*) {}
int dummy_merge(void*, const void*, void*) { return 0; }
int dummy_f2v4(const float*, const float*, int64_t, float*, void*) { return 0; }

TEST(TwoRow, StreamingWithASecondRowNeedsVersion4AndItsFunctions) {
  sa_variant c{};
  c.abi_version = 3;
  c.name = "two_stream";
  c.in2 = "A2";
  c.in2_kind = SA_IN2_LOGITS;
  c.forward2_f32 = dummy_f2v4;
  c.stream_kind = SA_STREAM_BOUNDED;
  c.state_bytes = 16;
  c.state_init = dummy_init;
  c.state_merge = dummy_merge;
  c.state_push2 = dummy_push2;  // past a version-3 struct: never read
  c.state_finish2 = dummy_finish2;
  try {
    from_c_abi(c, "plugin:x.so");
    ADD_FAILURE() << "a version-3 two-row stream accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("ABI version 3"), std::string::npos) << e.what();
  }
  c.abi_version = 4;
  c.state_finish2 = nullptr;
  try {
    from_c_abi(c, "plugin:x.so");
    ADD_FAILURE() << "a version-4 two-row stream without state_finish2 accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("state_finish2"), std::string::npos) << e.what();
  }
  c.state_finish2 = dummy_finish2;
  const Variant v = from_c_abi(c, "plugin:x.so");
  EXPECT_TRUE(v.stream.push2 && v.stream.finish2 && v.stream.bound2);
  EXPECT_EQ(v.stream.bound_rule.rfind("stream.generic2", 0), 0u) << v.stream.bound_rule;
}

// The example plugin compiled against the frozen version-3 header
// (tests/abi/v3/include): same matrix as the version-4 build.
TEST(TwoRow, Version3BuildOfTheExamplePluginLoadsAndFuzzesAsBefore) {
  const auto v3 = load_plugin(SA_VARIANT_EXAMPLE_V3_PLUGIN);
  const auto v4 = load_plugin(SA_VARIANT_EXAMPLE_PLUGIN);
  ASSERT_EQ(v3.size(), v4.size());
  FuzzConfig cfg = quick();
  cfg.cases = 40;
  std::vector<const Variant*> a, b;
  for (const auto& v : v3) a.push_back(&v);
  for (const auto& v : v4) b.push_back(&v);
  const Matrix m3 = fuzz_all(a, cfg), m4 = fuzz_all(b, cfg);
  ASSERT_EQ(m3.rows.size(), m4.rows.size());
  for (std::size_t r = 0; r < m3.rows.size(); ++r) {
    EXPECT_EQ(m3.rows[r].variant, m4.rows[r].variant);
    for (std::size_t k = 0; k < m3.rows[r].cells.size(); ++k) {
      EXPECT_EQ(m3.rows[r].cells[k].outcome, m4.rows[r].cells[k].outcome)
          << m3.rows[r].cells[k].property;
      EXPECT_EQ(m3.rows[r].cells[k].counterexample, m4.rows[r].cells[k].counterexample)
          << m3.rows[r].cells[k].property;
    }
  }
}

// The example plugin compiled against the frozen version-2 header
// (tests/abi/v2/include): same matrix as the version-3 build.
TEST(TwoRow, Version2BuildOfTheExamplePluginLoadsAndFuzzesAsBefore) {
  const auto v2 = load_plugin(SA_VARIANT_EXAMPLE_V2_PLUGIN);
  const auto v3 = load_plugin(SA_VARIANT_EXAMPLE_PLUGIN);
  ASSERT_EQ(v2.size(), v3.size());
  FuzzConfig cfg = quick();
  cfg.cases = 40;
  std::vector<const Variant*> a, b;
  for (const auto& v : v2) a.push_back(&v);
  for (const auto& v : v3) b.push_back(&v);
  const Matrix m2 = fuzz_all(a, cfg), m3 = fuzz_all(b, cfg);
  for (std::size_t r = 0; r < m2.rows.size(); ++r) {
    EXPECT_EQ(m2.rows[r].variant, m3.rows[r].variant);
    EXPECT_EQ(m2.rows[r].in2_kind, In2Kind::none);
    for (std::size_t k = 0; k < m2.rows[r].cells.size(); ++k)
      EXPECT_EQ(m2.rows[r].cells[k].outcome, m3.rows[r].cells[k].outcome)
          << m2.rows[r].cells[k].property;
  }
}

// The fuzzer moves the second row as its kind says: e^{a_i} / (sum e^a + sum e^b)
// is invariant under a shift of both rows but not of the first alone, so the same
// formula keeps shift invariance declared as a second logit row (shifted with the
// first) and lacks it declared as per-key data (never shifted).
Variant joint_softmax(In2Kind kind) {
  Variant v;
  v.name = std::string("joint_softmax_") + name_of(kind);
  v.formula = "e^{a_i} / (sum e^a + sum e^b)";
  v.in2_kind = kind;
  v.in2 = "b";
  auto f = [](auto a, auto b, auto o) {
    double m = -INFINITY, s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max({m, double(a[i]), double(b[i])});
    for (std::size_t i = 0; i < a.size(); ++i) s += std::exp(a[i] - m) + std::exp(b[i] - m);
    for (std::size_t i = 0; i < a.size(); ++i) o[i] = std::exp(a[i] - m) / s;
  };
  v.kernel32_2 = f;
  v.eval64_2 = f;
  v.reference_name = "float64";
  v.reference_unit_roundoff = 0x1p-53;
  return v;
}

TEST(TwoRow, SecondLogitRowIsShiftedWithTheFirstPerKeyDataIsNot) {
  const auto logits = fuzz_variant(joint_softmax(In2Kind::logits), quick());
  const auto per_key = fuzz_variant(joint_softmax(In2Kind::per_key), quick());
  EXPECT_EQ(cell(logits, "shift_invariance")->outcome, Outcome::pass)
      << describe(*cell(logits, "shift_invariance"));
  EXPECT_EQ(cell(per_key, "shift_invariance")->outcome, Outcome::fail);
}

int dummy_f2(const float*, const float*, int64_t, float*, void*) { return 0; }

// A version-3 struct that states a second row is checked before use.
TEST(TwoRow, MalformedVersion3StructIsRefusedWithItsName) {
  sa_variant c{};
  c.abi_version = 3;
  c.name = "bad_two_row";
  c.in2 = "A2";
  c.in2_kind = SA_IN2_LOGITS;
  try {
    from_c_abi(c, "plugin:x.so");
    ADD_FAILURE() << "no forward2_f32 accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad_two_row"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("forward2_f32"), std::string::npos) << e.what();
  }
  c.forward2_f32 = dummy_f2;
  c.in2_kind = 7;
  try {
    from_c_abi(c, "plugin:x.so");
    ADD_FAILURE() << "in2_kind 7 accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("in2_kind 7"), std::string::npos) << e.what();
  }
  c.in2_kind = SA_IN2_PER_KEY;
  EXPECT_NO_THROW(from_c_abi(c, "plugin:x.so"));
}

}  // namespace
}  // namespace sa::variants
