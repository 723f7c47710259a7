// The conventions of real attention and softmax libraries (issue 31;
// properties/conventions.hpp, docs/conventions.md), held against stand-in
// kernels: the built-in CPU kernel (correct, kernel.h's semantics) with its
// outputs changed to one library's convention and nothing else.
//   lse_base2       attention_v2's lse in base 2 (FlashInfer's default), and
//                   attention_backward taking its lse in base 2;
//   masked_lse_inf  a fully masked attention row's lse +inf (FlashAttention 2
//                   and 3), and the backward taking +inf for it;
//   no_temperature  softmax and log_softmax without a temperature (PyTorch,
//                   ONNX Runtime): the stand-in ignores it.
// Claims: undeclared, each fails with a note naming the convention; declared
// by the kernel's SA_CAP_* flag or by the spec's `conventions`, it passes,
// and every judged verdict names it; the plain CPU kernel fails when it
// declares a convention it does not follow (a declaration is not a waiver).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernel.hpp"
#include "properties/suite.hpp"
#include "tests/conventions/verdicts.hpp"
#include "softmax_audit/kernel.h"

namespace {

const sa_kernel& inner() { return *sa::kernels::cpu_kernel(); }

enum class Mode { base2, masked_inf, no_temperature };

std::int64_t lse_count(const sa_attention_v2_args& a) {
  const std::int64_t total_q = a.cu_seqlens_q ? a.cu_seqlens_q[a.batch] : a.batch * a.seqlen_q;
  return total_q * a.heads_q;
}

// kernel.h's lse -> the convention's.
float to_convention(Mode m, float lse) {
  if (m == Mode::base2) return static_cast<float>(lse * std::numbers::log2e);
  if (m == Mode::masked_inf && lse == -INFINITY) return INFINITY;
  return lse;
}
// The convention's lse -> kernel.h's (what the CPU kernel's backward takes).
float from_convention(Mode m, float lse) {
  if (m == Mode::base2) return static_cast<float>(lse * std::numbers::ln2);
  if (m == Mode::masked_inf && lse == INFINITY) return -INFINITY;
  return lse;
}

template <Mode M>
sa_status forward(void*, const sa_attention_v2_args* a) {
  const sa_status s = inner().attention_v2(inner().ctx, a);
  if (s != SA_OK || a->lse == nullptr) return s;
  for (std::int64_t i = 0; i < lse_count(*a); ++i) a->lse[i] = to_convention(M, a->lse[i]);
  return s;
}

template <Mode M>
sa_status backward(void*, const sa_attention_backward_args* b) {
  sa_attention_v2_args f = *b->forward;
  std::vector<float> lse(static_cast<std::size_t>(lse_count(f)));
  for (std::size_t i = 0; i < lse.size(); ++i) lse[i] = from_convention(M, b->forward->lse[i]);
  f.lse = lse.data();
  sa_attention_backward_args c = *b;
  c.forward = &f;
  return inner().attention_backward(inner().ctx, &c);
}

template <sa_status (*Op)(void*, sa_dtype, const sa_rows*, const void*, void*)>
sa_status at_temperature_1(void*, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  sa_rows one = *s;
  one.temperature = 1.0;  // ignores the temperature it is given
  return Op(inner().ctx, t, &one, in, out);
}
sa_status inner_softmax(void* c, sa_dtype t, const sa_rows* s, const void* in, void* out) {
  return inner().softmax(c, t, s, in, out);
}

// The stand-in for mode M; `flags` are the SA_CAP_* bits it declares.
struct StandIn {
  sa_capabilities caps;
  sa_kernel k;
  StandIn(Mode m, std::uint32_t flags) {
    caps = *inner().capabilities;
    caps.flags |= flags;
    k = inner();
    k.name = "stand-in";
    k.capabilities = &caps;
    if (m == Mode::base2) {
      k.attention_v2 = forward<Mode::base2>;
      k.attention_backward = backward<Mode::base2>;
    } else if (m == Mode::masked_inf) {
      k.attention_v2 = forward<Mode::masked_inf>;
      k.attention_backward = backward<Mode::masked_inf>;
    } else {
      k.softmax = at_temperature_1<inner_softmax>;
    }
  }
};

sa::props::SuiteConfig attention_config(std::uint64_t seed, std::vector<std::string> props,
                                        std::vector<std::string> conventions = {}) {
  sa::props::SuiteConfig c;
  c.ops = {sa::Op::attention_v2, sa::Op::attention_backward};
  c.dtypes = {sa::DType::float32};
  c.properties = std::move(props);
  c.cases = 15;
  c.shrink_seconds = 1;  // the tests read notes, not shrunk counterexamples
  c.seed = seed;
  c.conventions = std::move(conventions);
  return c;
}

using sa::conventions_test::all;
using sa::conventions_test::verdict;

constexpr std::uint64_t kSeeds[] = {1, 2, 3};

TEST(LibraryConventions, LseBase2UndeclaredFailsNamingIt) {
  const StandIn s(Mode::base2, 0);
  for (std::uint64_t seed : kSeeds) {
    const auto vs = sa::props::run_suite(sa::Kernel(&s.k, "test"),
                                         attention_config(seed, {"attention_v2.rounding"}));
    const auto& v = verdict(vs, "attention_v2.rounding");
    EXPECT_EQ(v.outcome, sa::Outcome::fail) << "seed " << seed << ": " << all(vs);
    EXPECT_NE(v.note.find("holds under the lse_base2 convention"), std::string::npos) << v.note;
  }
}

TEST(LibraryConventions, LseBase2DeclaredPassesForwardAndBackward) {
  const StandIn by_flag(Mode::base2, SA_CAP_LSE_BASE2), by_spec(Mode::base2, 0);
  // Declared by the flag on seeds 1 and 3, by the spec on seed 2.
  for (std::uint64_t seed : kSeeds)
    for (const auto& [k, conv] :
         {seed == 2 ? std::pair{&by_spec.k, std::vector<std::string>{"lse_base2"}}
                    : std::pair{&by_flag.k, std::vector<std::string>{}}}) {
      const auto vs = sa::props::run_suite(
          sa::Kernel(k, "test"),
          attention_config(seed,
                           {"attention_v2.rounding", "attention_backward.rounding",
                            "attention_v2.cascade_equals_full"},
                           conv));
      for (const char* p : {"attention_v2.rounding", "attention_backward.rounding"}) {
        const auto& v = verdict(vs, p);
        EXPECT_EQ(v.outcome, sa::Outcome::pass) << "seed " << seed << ": " << all(vs);
        EXPECT_NE(v.note.find("under the declared conventions: lse_base2"), std::string::npos)
            << v.note;
      }
      // The cascade merges the parts' lse converted to kernel.h's natural log.
      EXPECT_EQ(verdict(vs, "attention_v2.cascade_equals_full").outcome, sa::Outcome::pass)
          << "seed " << seed << ": " << all(vs);
    }
}

TEST(LibraryConventions, ADeclarationIsNotAWaiver) {
  // The plain CPU kernel (natural-log lse) declaring lse_base2 fails.
  sa_capabilities caps = *inner().capabilities;
  caps.flags |= SA_CAP_LSE_BASE2;
  sa_kernel k = inner();
  k.capabilities = &caps;
  const auto vs =
      sa::props::run_suite(sa::Kernel(&k, "test"), attention_config(1, {"attention_v2.rounding"}));
  EXPECT_EQ(verdict(vs, "attention_v2.rounding").outcome, sa::Outcome::fail) << all(vs);
}

TEST(LibraryConventions, MaskedLseInfUndeclaredFailsNamingItDeclaredPasses) {
  const StandIn plain(Mode::masked_inf, 0), flagged(Mode::masked_inf, SA_CAP_MASKED_LSE_POS_INF);
  int named = 0;
  for (std::uint64_t seed : kSeeds) {
    const auto un = sa::props::run_suite(sa::Kernel(&plain.k, "test"),
                                         attention_config(seed, {"attention_v2.rounding"}));
    const auto& v = verdict(un, "attention_v2.rounding");
    // A seed whose cases hold no fully masked row cannot tell the kernels apart.
    if (v.outcome == sa::Outcome::fail) {
      EXPECT_NE(v.note.find("holds under the masked_lse_inf convention"), std::string::npos)
          << v.note;
      ++named;
    }
    const auto de = sa::props::run_suite(
        sa::Kernel(&flagged.k, "test"),
        attention_config(seed, {"attention_v2.rounding", "attention_backward.rounding",
                                "attention_v2.cascade_equals_full"}));
    // (the cascade's empty part: +inf, merged as kernel.h's -inf)
    for (const char* p : {"attention_v2.rounding", "attention_backward.rounding",
                          "attention_v2.cascade_equals_full"})
      EXPECT_EQ(verdict(de, p).outcome, sa::Outcome::pass) << "seed " << seed << ": " << all(de);
  }
  EXPECT_GE(named, 2) << "fully masked rows were drawn on fewer than 2 of 3 seeds";
}

sa::props::SuiteConfig row_config(std::uint64_t seed, std::vector<std::string> conventions = {}) {
  sa::props::SuiteConfig c;
  c.ops = {sa::Op::softmax, sa::Op::entropy};
  c.dtypes = {sa::DType::float32};
  c.properties = {"differential.ulp", "metamorphic.entropy_temperature"};
  c.cases = 30;
  c.seed = seed;
  c.conventions = std::move(conventions);
  return c;
}

TEST(LibraryConventions, NoTemperatureUndeclaredFailsNamingIt) {
  const StandIn s(Mode::no_temperature, 0);
  for (std::uint64_t seed : kSeeds) {
    const auto vs = sa::props::run_suite(sa::Kernel(&s.k, "test"), row_config(seed));
    const sa::Verdict* ulp = nullptr;
    for (const auto& v : vs)
      if (v.property == "differential.ulp" && v.op == "softmax") ulp = &v;
    ASSERT_NE(ulp, nullptr) << all(vs);
    EXPECT_EQ(ulp->outcome, sa::Outcome::fail) << "seed " << seed << ": " << all(vs);
    EXPECT_NE(ulp->note.find("holds under the no_temperature convention"), std::string::npos)
        << ulp->note;
  }
}

TEST(LibraryConventions, NoTemperatureDeclaredCallsAtTemperatureOneOnly) {
  const StandIn s(Mode::no_temperature, SA_CAP_NO_TEMPERATURE);
  for (std::uint64_t seed : kSeeds) {
    const auto vs = sa::props::run_suite(sa::Kernel(&s.k, "test"), row_config(seed));
    int ulp = 0, temp = 0;  // both properties must have given a verdict
    for (const auto& v : vs) {
      if (v.property == "differential.ulp" && v.op == "softmax") {
        ++ulp;
        EXPECT_EQ(v.outcome, sa::Outcome::pass) << "seed " << seed << ": " << sa::describe(v);
      }
      if (v.property == "metamorphic.entropy_temperature") {
        ++temp;
        EXPECT_EQ(v.outcome, sa::Outcome::skip) << sa::describe(v);
        EXPECT_NE(v.note.find("no_temperature"), std::string::npos) << v.note;
      }
    }
    EXPECT_EQ(ulp, 1) << all(vs);
    EXPECT_EQ(temp, 1) << all(vs);
  }
  // A spec temperature other than 1 contradicts the declaration: refused.
  sa::props::SuiteConfig c = row_config(1, {"no_temperature"});
  c.temperature = 2.0;
  const StandIn plain(Mode::no_temperature, 0);
  EXPECT_THROW(sa::props::run_suite(sa::Kernel(&plain.k, "test"), c), std::invalid_argument);
}

}  // namespace
