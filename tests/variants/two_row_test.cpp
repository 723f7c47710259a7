// The second input row (include/softmax_audit/variant.h, ABI 3; issue 36):
// a version-3 plugin's two-row functions load and are fuzzed with a second
// row; each planted wrong second-row handling in tests/variants/two_row_plugin.c
// is caught as a failed claim (exit 1) with a shrunk input naming both rows;
// a version-2 build of the example plugin loads and fuzzes as its version-3
// build; a malformed version-3 struct is refused with a message naming it.
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
  ASSERT_EQ(plugin().size(), 4u);
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
