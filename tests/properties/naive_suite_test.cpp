// The correct naive kernel passes the whole property suite: no false alarms.
// (A failure here means the suite, a bound, or the naive kernel is wrong; the
// verdict printed says which claim, measured value, bound and input.)
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <fstream>
#include <cctype>
#include <set>
#include <sstream>

#include "kernels/naive/naive_kernel.hpp"
#include "properties/suite.hpp"

namespace {

sa::props::SuiteConfig config() {
  sa::props::SuiteConfig c;
  c.cases = 60;
  if (const char* s = std::getenv("SA_SUITE_CASES")) c.cases = std::atoi(s);
  c.seed = 20261121;
  if (const char* s = std::getenv("SA_SUITE_SEED")) c.seed = std::strtoull(s, nullptr, 10);
  return c;
}

TEST(NaiveSuite, EveryVerdictPassesOrSkips) {
  const sa::Kernel k(sa::kernels::naive_kernel(), "built-in");
  auto cfg = config();
  cfg.rules = {"ulp", "t7_apriori", "flash_attention_2x", "pytorch_fudge5", "onednn_10eps", "bias"};
  const auto t0 = std::chrono::steady_clock::now();
  const auto verdicts = sa::props::run_suite(k, cfg);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << verdicts.size() << " verdicts in " << s << " s\n";
  int pass = 0, skip = 0;
  for (const auto& v : verdicts) {
    if (v.outcome == sa::Outcome::pass) ++pass;
    if (v.outcome == sa::Outcome::skip) ++skip;
    const bool ok = v.outcome == sa::Outcome::pass || v.outcome == sa::Outcome::skip;
    // onednn_10eps is a convention a correct float32-accumulating kernel may miss at large n;
    // it is reported, not required (see properties/suite.cpp rules()).
    if (v.rule.id == "onednn_10eps") {
      if (!ok) std::cout << "(convention not met, informational)\n" << sa::describe(v) << "\n";
      continue;
    }
    EXPECT_TRUE(ok) << sa::describe(v);
    // The registry row of every verdict names the op it was given for
    // (docs/properties.md's ops column is what runs).
    if (v.property != "suite") {
      const sa::props::PropertyInfo* info = sa::props::find_property(v.property);
      ASSERT_NE(info, nullptr) << v.property << " has no registry row";
      bool op_listed = false;
      for (sa::Op op : info->ops) op_listed = op_listed || v.op == sa::name_of(op);
      EXPECT_TRUE(op_listed) << v.property << " judged op " << v.op
                             << ", which its registry row does not list";
    }
    if (std::getenv("SA_SUITE_VERBOSE")) std::cout << sa::describe(v) << "\n";
  }
  std::cout << pass << " pass, " << skip << " skip\n";
  EXPECT_GT(pass, 60);
}

TEST(NaiveSuite, ListsAreConsistent) {
  const auto props = sa::props::properties();
  const auto rules = sa::props::rules();
  for (const auto& p : props) {
    bool found = false;
    for (const auto& r : rules) found = found || r.id == p.rule;
    EXPECT_TRUE(found) << p.id << " names rule " << p.rule << " which rules() lacks";
  }
  EXPECT_GE(sa::props::distributions().size(), 9u);
  // Every property belongs to a family, names its ops and its unit, and ids
  // are unique.
  const auto fams = sa::props::families();
  std::set<std::string> ids;
  for (const auto& p : props) {
    EXPECT_TRUE(ids.insert(p.id).second) << p.id << " is in the registry twice";
    EXPECT_TRUE(std::any_of(fams.begin(), fams.end(),
                            [&](const sa::props::FamilyInfo& f) { return f.name == p.family(); }))
        << p.id << ": no family " << p.family();
    EXPECT_FALSE(p.ops.empty()) << p.id;
    EXPECT_FALSE(p.measure.empty()) << p.id;
    EXPECT_EQ(sa::props::find_property(p.id)->claim, p.claim);
  }
  EXPECT_EQ(sa::props::find_property("no.such_property"), nullptr);
}

// Every registry row names the functions that judge it, and each is defined
// in the file the row names (properties/<file>): the registry cannot point at
// code that moved or was renamed.
TEST(NaiveSuite, RunnersExist) {
  for (const auto& p : sa::props::properties()) {
    ASSERT_FALSE(p.runner.empty()) << p.id << " names no runner";
    std::stringstream parts(p.runner);
    for (std::string part; std::getline(parts, part, ';');) {
      part.erase(0, part.find_first_not_of(' '));
      const std::size_t sp = part.find(' ');
      ASSERT_NE(sp, std::string::npos) << p.id << ": '" << part << "' is not 'file.cpp fn, ...'";
      const std::string file = std::string(SA_SOURCE_DIR) + "/properties/" + part.substr(0, sp);
      std::ifstream in(file);
      ASSERT_TRUE(in) << p.id << ": no file " << file;
      const std::string text((std::istreambuf_iterator<char>(in)), {});
      std::stringstream fns(part.substr(sp + 1));
      for (std::string fn; std::getline(fns, fn, ',');) {
        fn.erase(0, fn.find_first_not_of(' '));
        // A definition: on a line starting with its return type, the name
        // and its parameter list, then a body before any ';'.
        bool defined = false;
        for (std::size_t at = 0; !defined && (at = text.find(fn + "(", at)) != std::string::npos;
             at += fn.size()) {
          const std::size_t line = text.rfind('\n', at) + 1;
          const char before = at > 0 ? text[at - 1] : '\n';
          const std::size_t end = text.find_first_of(";{", at);
          defined = std::isalpha(static_cast<unsigned char>(text[line])) &&
                    (before == ' ' || before == '*' || before == '&') && end != std::string::npos &&
                    text[end] == '{';
        }
        EXPECT_TRUE(defined) << p.id << ": " << fn << " is not defined in " << file;
      }
    }
  }
}

}  // namespace

// A gate spec's [attention] table decides the attention_v2 cases: every case
// run has the named head dim, lengths and GQA ratio and no feature the table
// leaves out; a property whose subject the table rules out (no masks: nothing
// to leak) is skipped as not applicable, never passed.
TEST(NaiveSuite, AttentionShapesFromTheSpecAreWhatRuns) {
  const sa::Kernel k(sa::kernels::naive_kernel(), "built-in");
  sa::props::SuiteConfig cfg;
  cfg.cases = 48;  // 6 cases per type
  cfg.seed = 7;
  cfg.ops = {sa::Op::attention_v2};
  cfg.dtypes = {sa::DType::float32};
  cfg.properties = {"attention_v2.rounding", "attention_v2.masked_never_leak"};
  cfg.attention.head_dims = {59};
  cfg.attention.lengths = {{7, 5}, {64, 65}};
  cfg.attention.gqa_ratios = {4};
  cfg.attention.features = std::vector<std::string>{};
  std::vector<std::string> inputs;
  sa::props::SuiteObserver obs;
  obs.before_case = [&](const std::string& prop, const std::string& in) {
    if (prop.rfind("attention_v2", 0) == 0) inputs.push_back(in);
  };
  const auto verdicts = sa::props::run_suite(k, cfg, &obs);
  ASSERT_GE(inputs.size(), 6u);
  for (const auto& in : inputs) {
    EXPECT_NE(in.find(" d=59 dv=59"), std::string::npos) << in;
    EXPECT_TRUE(in.find("sq=7 sk=5") != std::string::npos ||
                in.find("sq=64 sk=65") != std::string::npos)
        << in;
    EXPECT_TRUE(in.find("heads=4/1") != std::string::npos ||
                in.find("heads=8/2") != std::string::npos)
        << in;
    for (const char* f :
         {"varlen", "causal", "window", "softcap", "alibi", "sinks", "key_padding", "bhsd", "pad="})
      EXPECT_EQ(in.find(f), std::string::npos) << f << " in " << in;
  }
  int rounding = 0, leak = 0;
  for (const auto& v : verdicts) {
    if (v.property == "attention_v2.rounding") {
      ++rounding;
      EXPECT_EQ(v.outcome, sa::Outcome::pass) << sa::describe(v);
    }
    if (v.property == "attention_v2.masked_never_leak") {
      ++leak;
      EXPECT_EQ(v.outcome, sa::Outcome::skip) << sa::describe(v);
      EXPECT_NE(v.note.find("not applicable"), std::string::npos) << v.note;
    }
  }
  EXPECT_EQ(rounding, 1);
  EXPECT_EQ(leak, 1);
}

// attention_v2.head_independence redraws the heads it does not check. With
// descales per (sequence, kv head) and one key/value head (MQA), the redrawn
// query heads share the checked head's slab, so they must be drawn on the
// slab's scale: drawn unscaled they raised the slab's largest element, the
// call's descale for it grew, and the checked head's small values, divided
// by it, fell off the fp8 subnormal grid ("q element ... is not a fp8_e4m3
// value": the whole attention unit of the type erred; seen on the H200 with
// check --builtin cuda --seed 2 --cases 400). Claim: on such cases the
// property measures (passes), never errs.
TEST(NaiveSuite, HeadIndependenceKeepsAnMqaSlabOnTheFp8Grid) {
  const sa::Kernel k(sa::kernels::naive_kernel(), "built-in");
  sa::props::SuiteConfig cfg;
  cfg.cases = 80;  // 10 random cases per type; seed 2 erred without the fix
  cfg.seed = 2;
  cfg.ops = {sa::Op::attention_v2};
  cfg.properties = {"attention_v2.head_independence"};
  cfg.attention.types = {sa::AttnType::fp8_e4m3, sa::AttnType::fp8_e5m2};
  cfg.attention.gqa_ratios = {4};
  cfg.attention.features = std::vector<std::string>{"descale_bh"};
  cfg.attention.pair_cases = 0;
  std::vector<std::string> inputs;
  sa::props::SuiteObserver obs;
  obs.before_case = [&](const std::string& prop, const std::string& in) {
    if (prop.rfind("attention_v2", 0) == 0) inputs.push_back(in);
  };
  const auto verdicts = sa::props::run_suite(k, cfg, &obs);
  int mqa_descaled = 0;
  for (const auto& in : inputs)
    if (in.find("heads=4/1") != std::string::npos && in.find("descale_bh") != std::string::npos)
      ++mqa_descaled;
  EXPECT_GE(mqa_descaled, 3);  // the cases the claim is about were drawn
  int seen = 0;
  for (const auto& v : verdicts) {
    if (v.property != "attention_v2.head_independence") continue;
    ++seen;
    EXPECT_EQ(v.outcome, sa::Outcome::pass) << sa::describe(v);
  }
  EXPECT_EQ(seen, 2);
}
