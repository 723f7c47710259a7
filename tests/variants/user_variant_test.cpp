// A user adds a variant in C++ with one registration, and the fuzzer runs it
// like a built-in. The two variants here carry deliberate kernel bugs, so the
// kernel-side properties are shown to be able to fail.
#include <gtest/gtest.h>

#include <cmath>

#include "core/bfloat16.hpp"
#include "variants/formulas.hpp"
#include "variants/fuzz.hpp"

namespace {

using sa::variants::Variant;

// Softmax whose float32 kernel rounds its output to bfloat16: errors up to
// 2^-9 relative, far above T7's float32 bound.
Variant bf16_output_softmax() {
  Variant v;
  v.name = "user_bf16_output_softmax";
  v.formula = "softmax, output rounded to bfloat16 (deliberate accuracy bug)";
  v.origin = "test";
  v.kernel32 = [](std::span<const float> l, std::span<float> p) {
    sa::variants::formulas::softmax<float>(l, p);
    for (auto& x : p) x = sa::round_to_bf16(x);
  };
  v.eval64 = [](std::span<const double> l, std::span<double> p) {
    sa::variants::formulas::softmax<double>(l, p);
  };
  v.reference = [](std::span<const double> l) {
    std::vector<sa::ref::Mp> z(l.begin(), l.end()), p(l.size());
    sa::variants::formulas::softmax<sa::ref::Mp>(z, p);
    return p;
  };
  // T7 for shifted softmax with faithful exp, no argument rounding.
  v.f32_bound = [](std::span<const double> l) {
    return 2.0 * (static_cast<double>(l.size()) + 2.0 + 2.0 * 24.0);
  };
  v.f32_bound_rule = "T7 (spread <= 24 for the fuzzer's logits)";
  return v;
}

// Softmax that "sanitises" NaN into a mask: violates NaN propagation.
Variant nan_swallowing_softmax() {
  Variant v;
  v.name = "user_nan_as_mask_softmax";
  v.formula = "softmax with NaN replaced by -inf (deliberate special-value bug)";
  v.origin = "test";
  v.kernel32 = [](std::span<const float> l, std::span<float> p) {
    std::vector<float> c(l.begin(), l.end());
    for (auto& x : c)
      if (std::isnan(x)) x = -INFINITY;
    sa::variants::formulas::softmax<float>(c, p);
  };
  v.eval64 = [](std::span<const double> l, std::span<double> p) {
    sa::variants::formulas::softmax<double>(l, p);
  };
  return v;
}

SA_REGISTER_VARIANT(user_bf16, bf16_output_softmax());
SA_REGISTER_VARIANT(user_nan, nan_swallowing_softmax());

TEST(UserVariant, OneRegistrationPutsItInTheRegistry) {
  const auto* a = sa::variants::registry().find("user_bf16_output_softmax");
  const auto* b = sa::variants::registry().find("user_nan_as_mask_softmax");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(sa::variants::registry().find("softmax"), nullptr);  // built-ins are there too
  EXPECT_THROW(sa::variants::registry().add(bf16_output_softmax()),
               std::invalid_argument);  // duplicate name
}

TEST(UserVariant, KernelBugsAreFound) {
  sa::variants::FuzzConfig cfg;
  cfg.cases = 60;
  const auto m = sa::variants::fuzz_all({sa::variants::registry().find("user_bf16_output_softmax"),
                                         sa::variants::registry().find("user_nan_as_mask_softmax")},
                                        cfg);
  const auto* acc = sa::variants::cell(m.rows[0], "f32_vs_reference");
  EXPECT_EQ(acc->outcome, sa::Outcome::fail) << sa::describe(*acc);
  EXPECT_GT(acc->measured, 1.0);
  EXPECT_EQ(sa::variants::cell(m.rows[0], "sum_to_one")->outcome, sa::Outcome::pass);
  const auto* nan = sa::variants::cell(m.rows[1], "special.nan");
  EXPECT_EQ(nan->outcome, sa::Outcome::fail) << sa::describe(*nan);
  // No reference: the accuracy cell is not applicable, and says so.
  const auto* na = sa::variants::cell(m.rows[1], "f32_vs_reference");
  EXPECT_EQ(na->outcome, sa::Outcome::skip);
  EXPECT_FALSE(na->note.empty());
}

}  // namespace
