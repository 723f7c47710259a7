// Unit tests of the gate's parts: spec validation, verdict JSON, JUnit, the
// buffer guard (in process), the report without gnuplot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "gate/guard.hpp"
#include "gate/report.hpp"
#include "gate/results.hpp"
#include "gate/spec.hpp"
#include "gate/verdict_json.hpp"
#include "gate_test_util.hpp"

using namespace sa;
using namespace sa::gate;

TEST(GateSpec, DefaultsNeedNoFile) {
  const GateSpec s = parse_gate_spec("", "empty.toml");
  EXPECT_TRUE(s.suite.ops.empty());
  EXPECT_TRUE(s.suite.properties.empty());
  EXPECT_EQ(s.suite.cases, props::SuiteConfig{}.cases);
  EXPECT_GT(s.timeout_s, 0);
}

TEST(GateSpec, ReadsEveryKey) {
  const auto first = props::properties().at(0).id;
  const auto dist = props::distributions().at(0);
  const auto rule = props::rules().at(0).id;
  const GateSpec s = parse_gate_spec(
      "ops = [\"softmax\", \"logsumexp\"]\ndtypes = [\"float32\"]\nsizes = [1, 64, 4096]\n"
      "distributions = [\"" +
          dist + "\"]\nrules = [\"" + rule + "\"]\nproperties = [\"" + first +
          "\"]\ncases = 5\nseed = 42\ntimeout = 2.5\ntemperature = 0.5\ndeadline = 120\n",
      "g.toml");
  ASSERT_EQ(s.suite.ops.size(), 2u);
  EXPECT_EQ(s.suite.ops[1], Op::logsumexp);
  EXPECT_EQ(s.suite.dtypes, std::vector<DType>{DType::float32});
  EXPECT_EQ(s.suite.sizes, (std::vector<std::int64_t>{1, 64, 4096}));
  EXPECT_EQ(s.suite.properties, std::vector<std::string>{first});
  EXPECT_EQ(s.suite.cases, 5);
  EXPECT_EQ(s.suite.seed, 42u);
  EXPECT_DOUBLE_EQ(s.timeout_s, 2.5);
  EXPECT_DOUBLE_EQ(s.deadline_s, 120);
  EXPECT_DOUBLE_EQ(s.suite.temperature, 0.5);
}

TEST(GateSpec, PrefixSelectsProperties) {
  const auto first = props::properties().at(0).id;
  const auto stem = first.substr(0, first.find('.'));
  const GateSpec s = parse_gate_spec("properties = [\"" + stem + ".*\"]", "g.toml");
  EXPECT_FALSE(s.suite.properties.empty());
  // The family's ids, and those its ids moved checks to (props::property_aliases).
  auto moved_here = [&](const std::string& p) {
    for (const auto& a : props::property_aliases())
      if (a.id.rfind(stem + ".", 0) == 0 && std::find(a.to.begin(), a.to.end(), p) != a.to.end())
        return true;
    return false;
  };
  for (const auto& p : s.suite.properties)
    EXPECT_TRUE(p.rfind(stem + ".", 0) == 0 || moved_here(p)) << p;
  for (const auto& p : props::properties())
    if (p.family() == stem)
      EXPECT_NE(std::find(s.suite.properties.begin(), s.suite.properties.end(), p.id),
                s.suite.properties.end())
          << p.id;
}

// Old ids (props::property_aliases) select the ids their checks moved to, for
// the ops the spec runs; a retired id is replaced, never kept.
TEST(GateSpec, OldAttentionIdsAreAliases) {
  auto has = [](const std::vector<std::string>& v, const char* id) {
    return std::find(v.begin(), v.end(), id) != v.end();
  };
  const GateSpec a = parse_gate_spec(
      "ops = [\"attention\", \"merge_attention_states\"]\n"
      "properties = [\"differential.ulp\", \"differential.flash_attention_2x\", "
      "\"metamorphic.split_kv\"]\nrequired = [\"metamorphic.split_kv\"]\n",
      "old.toml");
  EXPECT_TRUE(has(a.suite.properties, "differential.ulp"));
  EXPECT_TRUE(has(a.suite.properties, "attention_v2.rounding"));
  EXPECT_TRUE(has(a.suite.properties, "attention_v2.flash_attention_2x"));
  EXPECT_FALSE(has(a.suite.properties, "metamorphic.split_kv"));
  EXPECT_TRUE(has(a.required, "attention_v2.rounding"));
  EXPECT_TRUE(has(a.required, "differential.ulp"));
  EXPECT_FALSE(has(a.required, "metamorphic.split_kv"));
  // Without the attention op, differential.ulp is what it always was.
  const GateSpec rows =
      parse_gate_spec("ops = [\"softmax\"]\nproperties = [\"differential.*\"]\n", "rows.toml");
  EXPECT_FALSE(has(rows.suite.properties, "attention_v2.rounding"));
  EXPECT_TRUE(has(rows.suite.properties, "differential.ulp"));
  // The family selects the live aliases; a retired id only by its name.
  const GateSpec fam = parse_gate_spec("properties = [\"metamorphic.*\"]\n", "fam.toml");
  EXPECT_FALSE(fam.suite.properties.empty());
  for (const auto& p : fam.suite.properties) EXPECT_EQ(p.rfind("metamorphic.", 0), 0u) << p;
  EXPECT_THROW(parse_gate_spec("properties = [\"metamorphic.split_kv_typo\"]\n", "bad.toml"),
               SpecError);
  // run_suite takes a retired id too (a config built without a spec).
  EXPECT_EQ(props::resolve_aliases({"metamorphic.split_kv"}, {Op::merge_attention_states}, true),
            (std::vector<std::string>{"attention_v2.rounding", "differential.ulp"}));
  EXPECT_EQ(props::resolve_aliases({"differential.ulp"}, {}, true),
            std::vector<std::string>{"differential.ulp"});
}

// The [attention] table (interface v2 cases): every key read as written.
TEST(GateSpec, ReadsTheAttentionTable) {
  const GateSpec s = parse_gate_spec(
      "ops = [\"attention_v2\"]\n[attention]\ndtypes = [\"bfloat16\", \"fp8_e5m2\"]\n"
      "head_dims = [59, 128]\nlengths = [[1, 239], [1023, 1024]]\ngqa_ratios = [1, 8]\n"
      "features = [\"causal\", \"varlen\"]\nmax_work = 2e6\n",
      "g.toml");
  const auto& a = s.suite.attention;
  EXPECT_EQ(a.types, (std::vector<AttnType>{AttnType::bfloat16, AttnType::fp8_e5m2}));
  EXPECT_EQ(a.head_dims, (std::vector<std::int64_t>{59, 128}));
  ASSERT_EQ(a.lengths.size(), 2u);
  EXPECT_EQ(a.lengths[1], (std::pair<std::int64_t, std::int64_t>{1023, 1024}));
  EXPECT_EQ(a.gqa_ratios, (std::vector<std::int64_t>{1, 8}));
  ASSERT_TRUE(a.features.has_value());
  EXPECT_EQ(*a.features, (std::vector<std::string>{"causal", "varlen"}));
  EXPECT_DOUBLE_EQ(a.max_work, 2e6);
  // No table: every default; features = []: no feature at all (not "all").
  EXPECT_FALSE(parse_gate_spec("", "g.toml").suite.attention.features.has_value());
  const GateSpec none = parse_gate_spec("[attention]\nfeatures = []\n", "g.toml");
  ASSERT_TRUE(none.suite.attention.features.has_value());
  EXPECT_TRUE(none.suite.attention.features->empty());
  // It shapes attention_backward cases too: a backward-only spec may hold it.
  const GateSpec bwd = parse_gate_spec(
      "ops = [\"attention_backward\"]\n[attention]\nfeatures = [\"sinks\"]\n", "g.toml");
  ASSERT_TRUE(bwd.suite.attention.features.has_value());
  EXPECT_EQ(*bwd.suite.attention.features, std::vector<std::string>{"sinks"});
}

TEST(GateSpec, AttentionTableErrorsNameKeyAndExpectation) {
  struct Bad {
    const char* text;
    const char* must_say;
  };
  for (const Bad& b : {
           Bad{"attention = 3", "expected a table"},
           Bad{"[attention]\nshape = 1", "key 'attention.shape': unknown key"},
           Bad{"[attention]\nhead_dims = [0]", "in [1, 512]"},
           Bad{"[attention]\nhead_dims = []", "non-empty array"},
           Bad{"[attention]\nlengths = [[1, 2, 3]]", "[queries, keys] pairs"},
           Bad{"[attention]\nlengths = [5]", "[queries, keys] pairs"},
           Bad{"[attention]\nlengths = [[1, 999999]]", "in [1, 131072]"},
           Bad{"[attention]\ngqa_ratios = [65]", "in [1, 64]"},
           Bad{"[attention]\nfeatures = [\"dropout\"]", "expected one of: varlen"},
           Bad{"[attention]\ndtypes = [\"fp4\"]", "fp8_e4m3"},
           Bad{"[attention]\nmax_work = 0", "> 0"},
           Bad{"ops = [\"softmax\"]\n[attention]\nhead_dims = [64]", "'ops' names neither"},
       }) {
    try {
      parse_gate_spec(b.text, "bad.toml");
      ADD_FAILURE() << "accepted: " << b.text;
    } catch (const SpecError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("bad.toml"), std::string::npos) << m;
      EXPECT_NE(m.find(b.must_say), std::string::npos) << b.text << " -> " << m;
    }
  }
}

TEST(GateSpec, ReadsTheDeterminismTable) {
  // Claim: [determinism] repeats sets determinism.bitwise's call count; without
  // the table the suite's default (FlashAttention's 250) applies.
  EXPECT_EQ(parse_gate_spec("", "g.toml").suite.determinism_repeats, 250);
  EXPECT_EQ(parse_gate_spec("[determinism]\nrepeats = 37\n", "g.toml").suite.determinism_repeats,
            37);
  EXPECT_EQ(
      parse_gate_spec("properties = [\"determinism.*\"]\n[determinism]\nrepeats = 2\n", "g.toml")
          .suite.determinism_repeats,
      2);
  EXPECT_EQ(parse_gate_spec("[determinism]\n", "g.toml").suite.determinism_repeats, 250);
}

TEST(GateSpec, DeterminismTableErrorsNameKeyAndExpectation) {
  struct Bad {
    const char* text;
    const char* must_say;
  };
  for (const Bad& b : {
           Bad{"determinism = 3", "key 'determinism': expected a table"},
           Bad{"[determinism]\ncount = 5", "key 'determinism.count': unknown key"},
           Bad{"[determinism]\nrepeats = 1",
               "key 'determinism.repeats': expected an integer in "
               "[2, 100000], got 1"},
           Bad{"[determinism]\nrepeats = 100001", "in [2, 100000]"},
           Bad{"[determinism]\nrepeats = 2.5", "expected an integer"},
           Bad{"[determinism]\nrepeats = \"many\"", "expected an integer"},
           Bad{"properties = [\"backward.*\"]\n[determinism]\nrepeats = 9",
               "'properties' selects no determinism.* property"},
       }) {
    try {
      parse_gate_spec(b.text, "bad.toml");
      ADD_FAILURE() << "accepted: " << b.text;
    } catch (const SpecError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("bad.toml"), std::string::npos) << m;
      EXPECT_NE(m.find(b.must_say), std::string::npos) << b.text << " -> " << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << "one line: " << m;
    }
  }
}

// Each error names the file (with line), the key and what was expected.
TEST(GateSpec, ErrorsNameFileKeyAndExpectation) {
  struct Bad {
    const char* text;
    const char* must_say;
  };
  for (const Bad& b :
       {Bad{"colour = 1", "unknown key"}, Bad{"cases = 0", "in [1, 1000000]"},
        // Out of range values are refused before any work (issue 12, item 6): 2^32 + 1
        // cases used to run one case, huge sizes overflowed the generators.
        Bad{"cases = 4294967297", "got 4294967297"}, Bad{"sizes = [99999999999]", "16777216"},
        Bad{"timeout = 1e9", "<= 86400"}, Bad{"deadline = 0", ">= 0.01"},
        Bad{"temperature = inf", "finite"}, Bad{"cases = 1.5", "expected an integer"},
        Bad{"ops = [\"soft\"]", "softmax"}, Bad{"dtypes = \"float64\"", "float16"},
        Bad{"sizes = [0]", "in [1, 16777216]"}, Bad{"timeout = -1", ">= 0.01"},
        Bad{"properties = [\"no.such\"]", "selects no property"},
        Bad{"distributions = [\"cauchy\"]", "expected one of"}, Bad{"seed = -3", "in [0, "},
        Bad{"ops = [1]", "string"}, Bad{"x = = 1", "TOML"}}) {
    try {
      parse_gate_spec(b.text, "bad.toml");
      ADD_FAILURE() << "accepted: " << b.text;
    } catch (const SpecError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("bad.toml"), std::string::npos) << m;
      EXPECT_NE(m.find(b.must_say), std::string::npos) << b.text << " -> " << m;
    }
  }
}

// Issue 29, item 10: a timeout of 1e-300 s was accepted, and the kernel's
// constructor was then reported as hanging. Timeout and deadline are refused
// below 10 ms, naming the file and the key.
TEST(GateSpec, TinyTimeoutOrDeadlineIsRefusedNamingTheKey) {
  for (const char* text : {"timeout = 1e-300", "timeout = 0.001", "deadline = 1e-300"}) {
    try {
      parse_gate_spec(text, "tiny.toml");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const SpecError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("tiny.toml"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string(text).substr(0, std::string(text).find(' '))), std::string::npos)
          << m;
      EXPECT_NE(m.find(">= 0.01"), std::string::npos) << m;
    }
  }
  EXPECT_DOUBLE_EQ(parse_gate_spec("timeout = 0.01", "ok.toml").timeout_s, 0.01);
}

// no_temperature (issue 31): the kernel is called at temperature 1 only, so a
// spec that also asks for another temperature is refused before any work,
// naming both keys; with temperature 1, or none, it is accepted.
TEST(GateSpec, NoTemperatureWithAnotherTemperatureIsRefused) {
  for (const char* text : {"conventions = [\"no_temperature\"]\ntemperature = 2.0",
                           "temperature = 0.5\nconventions = \"no_temperature\""}) {
    try {
      parse_gate_spec(text, "nt.toml");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const SpecError& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("nt.toml"), std::string::npos) << m;
      EXPECT_NE(m.find("no_temperature"), std::string::npos) << m;
      EXPECT_NE(m.find("expected temperature 1"), std::string::npos) << m;
    }
  }
  EXPECT_EQ(parse_gate_spec("conventions = [\"no_temperature\"]\ntemperature = 1.0", "ok.toml")
                .suite.conventions,
            std::vector<std::string>{"no_temperature"});
  EXPECT_EQ(parse_gate_spec("conventions = [\"no_temperature\"]", "ok.toml").suite.conventions,
            std::vector<std::string>{"no_temperature"});
}

// Issue 29, item 10: a number beyond double's range (1e999) in a results file
// gave an error that did not name the file.
TEST(GateJson, NumberBeyondDoubleNamesTheFile) {
  const std::string path = gate_test::temp_dir() + "/huge.json";
  std::ofstream(path)
      << "{\"format\": \"softmax-audit-results\", \"runs\": [{\"seconds\": 1e999}]}\n";
  try {
    load_results(path);
    ADD_FAILURE() << "accepted a results file holding 1e999";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not an input error naming the file: " << e.what();
  }
}

TEST(GateJson, VerdictRoundTripsIncludingNonFinite) {
  Verdict v = check_at_most("p.x", "claim", NAN, INFINITY, {"r", "src"});
  v.counterexample = "seed=1 <x>";
  v.kernel = "k";
  v.op = "softmax";
  v.dtype = "bfloat16";
  const Verdict w = verdict_from_json(nlohmann::json::parse(to_json(v).dump()));
  EXPECT_EQ(w.property, v.property);
  EXPECT_TRUE(std::isnan(w.measured));
  EXPECT_EQ(w.bound, INFINITY);
  EXPECT_EQ(w.outcome, Outcome::fail);
  EXPECT_EQ(w.rule.source, "src");
  EXPECT_EQ(w.counterexample, v.counterexample);
  EXPECT_THROW(verdict_from_json(nlohmann::json{{"outcome", "pass"}}), std::invalid_argument);
  EXPECT_THROW(verdict_from_json(nlohmann::json{{"property", "p"}, {"outcome", "maybe"}}),
               std::invalid_argument);
}

TEST(GateJunit, OneTestcasePerVerdictWithEscapedFailure) {
  RunRecord r;
  r.kernel = "k<1>";
  Verdict f = check_at_most("a.b", "x < y & z", 2, 1, {"T7", "src"});
  f.counterexample = "logits=[\"1\", <2>]";
  f.op = "softmax";
  f.dtype = "float32";
  Verdict p = check_at_most("a.b", "ok", 0, 1, {"T7", ""});
  p.op = "softmax";
  p.dtype = "bfloat16";
  r.verdicts = {f, p};
  std::ostringstream os;
  write_junit(os, {r});
  const std::string x = os.str();
  EXPECT_NE(x.find("tests=\"2\" failures=\"1\""), std::string::npos) << x;
  EXPECT_NE(x.find("logits=[&quot;1&quot;, &lt;2&gt;]"), std::string::npos) << x;
  EXPECT_EQ(x.find("<2>"), std::string::npos);
  EXPECT_NE(x.find("a.b [softmax/float32]"), std::string::npos);
}

// Issue 35: properties broken by the same input are one root cause, whatever
// generator, seed, case number, shrink steps or failing position they name.
TEST(GateJunit, FailuresOfOneFirstFailingCaseAreOneRootCause) {
  auto failing = [](const std::string& property, const std::string& dtype, const std::string& ce) {
    Verdict v = check_at_most(property, "claim of " + property, 2, 1, {"ulp", ""});
    v.op = "softmax";
    v.dtype = dtype;
    v.counterexample = ce;
    return v;
  };
  RunRecord r;
  r.kernel = "k";
  r.verdicts = {
      failing(
          "a.ulp", "float32",
          "seed=11 edge case 3 (run on every seed) (shrunk 0 steps) dist=edge_single n=1 rows=1 "
          "stride=1 level=0 theta=1 value_seed=1 aux=0 (an edge row: run on every seed) "
          "values=[0] ; at row 0 item 0: got 0, exact 1"),
      failing("b.sum", "float32",
              "seed=11 case=1 (shrunk 5 steps) dist=gaussian n=1 rows=1 stride=1 level=0 theta=1 "
              "value_seed=31 aux=13 (values shrunk) values=[0] ; at row 0 sum = 0"),
      failing("c.other_dtype", "bfloat16",
              "seed=11 case=1 (shrunk 5 steps) dist=gaussian n=1 rows=1 stride=1 level=0 theta=1 "
              "value_seed=31 aux=13 (values shrunk) values=[0] ; at row 0 sum = 0"),
      // Values elided: the generator's seeds then tell the inputs apart.
      failing("d.big", "float32",
              "seed=11 case=2 (shrunk 0 steps) dist=gaussian n=4096 rows=1 stride=4096 level=0 "
              "theta=1 value_seed=5 aux=6 values=[1, 2, ... (4094 more; finite range [0, 3], -inf "
              "x0, +inf x0, nan x0)]"),
      failing("e.big", "float32",
              "seed=11 case=4 (shrunk 0 steps) dist=gaussian n=4096 rows=1 stride=4096 level=0 "
              "theta=1 value_seed=7 aux=6 values=[1, 2, ... (4094 more; finite range [0, 3], -inf "
              "x0, +inf x0, nan x0)]"),
  };
  Verdict p = check_at_most("f.pass", "holds", 0, 1, {"ulp", ""});
  p.op = "softmax";
  p.dtype = "float32";
  r.verdicts.push_back(p);
  const auto groups = root_causes(r.verdicts);
  ASSERT_EQ(groups.size(), 4u);
  ASSERT_EQ(groups[0].size(), 2u);
  EXPECT_EQ(groups[0][0]->property, "a.ulp");
  EXPECT_EQ(groups[0][1]->property, "b.sum");
  std::ostringstream os;
  write_junit(os, {r});
  const std::string x = os.str();
  EXPECT_NE(x.find("tests=\"6\" failures=\"4\" errors=\"0\" skipped=\"1\""), std::string::npos)
      << x;
  EXPECT_NE(x.find("<failure message=\"a.ulp [softmax/float32]: measured 2 &gt; bound 1 (ulp); "
                   "the same root cause also breaks b.sum [softmax/float32]\""),
            std::string::npos)
      << x;
  EXPECT_NE(x.find("<skipped message=\"same root cause as a.ulp [softmax/float32]: b.sum "
                   "[softmax/float32]: measured 2 &gt; bound 1 (ulp)\""),
            std::string::npos)
      << x;
  // GitHub annotations: one per root cause, escaped as workflow commands.
  std::ostringstream gh;
  write_github_annotations(gh, {r});
  const std::string g = gh.str();
  std::size_t lines = 0;
  for (char c : g) lines += c == '\n';
  EXPECT_EQ(lines, 4u) << g;
  EXPECT_EQ(g.rfind("::error title=softmax-audit k%3A a.ulp [softmax/float32]::", 0), 0u) << g;
  EXPECT_NE(summary_markdown({r}).find("4 root cause(s)"), std::string::npos);
}

namespace {
// A host kernel that writes one float past the end of its output.
sa_status overrun_softmax(void*, sa_dtype, const sa_rows* s, const void*, void* out) {
  float* y = static_cast<float*>(out);
  for (std::int64_t i = 0; i <= s->n; ++i) y[i] = 1.0f / static_cast<float>(s->n);
  return SA_OK;
}
sa_kernel overrun_kernel() {
  sa_kernel k{};
  k.abi_version = SA_KERNEL_ABI_VERSION;
  k.struct_size = sizeof(sa_kernel);
  k.name = "overrun";
  k.ops = SA_OP_SOFTMAX;
  k.dtypes = SA_DTYPE_F32;
  k.memory = SA_MEMORY_HOST;
  k.softmax = overrun_softmax;
  return k;
}
}  // namespace

// Canary check (in process): n = 5 floats is 20 bytes, so one element past
// the end lands in the tail canary, not on the guard page.
TEST(GateGuard, CanaryCatchesOneElementPastTheEnd) {
  static const sa_kernel k = overrun_kernel();
  const Kernel inner(&k, "test");
  std::vector<GuardIncident> seen;
  GuardedKernel g(inner, {}, [&](const GuardIncident& i) { seen.push_back(i); });
  const auto y = g.kernel().softmax(DType::float32, RowBatch::single({1, 2, 3, 4, 5}));
  ASSERT_EQ(y.size(), 5u);  // the caller's buffer is intact
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].kind, "out_of_bounds_write");
  EXPECT_EQ(seen[0].op, "softmax");
  EXPECT_NE(seen[0].detail.find("4 bytes past the end of 'out'"), std::string::npos)
      << seen[0].detail;
}

TEST(GateReport, WithoutGnuplotSaysSoAndKeepsTables) {
  const std::string dir = gate_test::temp_dir();
  RunRecord r;
  r.kernel = "k";
  Verdict f = check_at_most("a.b", "claim", 2, 1, {"T7", "src"});
  f.counterexample = "seed=9 logits=[1, 2]";
  r.verdicts = {f};
  std::ofstream(dir + "/r.json") << results_to_json({r}).dump();
  std::ofstream(dir + "/sweep.json")
      << R"({"series":[{"kernel":"k","metric":"streamed_entropy_error","points":[[16,1e-7],[1024,"NaN"],{"n":4096,"value":3e-7}]}]})";
  ReportInputs in;
  in.results = {dir + "/r.json"};
  in.sweep = dir + "/sweep.json";
  in.gnuplot = "/nonexistent/gnuplot";
  std::ostringstream html;
  write_report(in, html);
  const std::string h = html.str();
  EXPECT_NE(h.find("gnuplot was not found"), std::string::npos);
  EXPECT_NE(h.find("seed=9 logits=[1, 2]"), std::string::npos);
  EXPECT_EQ(h.find("<svg"), std::string::npos);
  EXPECT_NE(h.find("No variants matrix"), std::string::npos);

  in.sweep = dir + "/missing.json";
  EXPECT_THROW(write_report(in, html), std::invalid_argument);
}

TEST(GateReport, WithGnuplotEmbedsSvg) {
  if (!gnuplot_available("gnuplot")) GTEST_SKIP() << "gnuplot not installed (Debian gnuplot-nox)";
  const std::string dir = gate_test::temp_dir();
  RunRecord r;
  r.kernel = "k";
  std::ofstream(dir + "/r.json") << results_to_json({r}).dump();
  ReportInputs in;
  in.results = {dir + "/r.json"};
  std::ostringstream html;
  write_report(in, html);
  const std::string h = html.str();
  EXPECT_GE(std::count(h.begin(), h.end(), '\n'), 10);
  std::size_t svgs = 0;
  for (std::size_t at = h.find("<svg"); at != std::string::npos; at = h.find("<svg", at + 1))
    ++svgs;
  EXPECT_GE(svgs, 5u);  // error, dispersion, entropy, beta(H), effect
  EXPECT_EQ(h.find("<?xml"), std::string::npos);
  // Self-contained: its few lines of script are inline, nothing is fetched.
  EXPECT_EQ(h.find("<script src"), std::string::npos);
  EXPECT_EQ(h.find("src=\"http"), std::string::npos);
  EXPECT_EQ(h.find("href=\"http"), std::string::npos);
}

// ------------------------------------------------------------------ issue 31
// gate.no_nan_output applies a declared ieee_special_values: a kernel that
// computes softmax as written (IEEE, as PyTorch and ONNX Runtime do) gives
// NaN for a row of -inf only; the guard lets that pass when the convention
// is declared and reports it, naming the convention, when it is not.
#include "gate/nan_rule.hpp"
#include "properties/suite.hpp"

namespace {
// exp(x - max) / sum, as written, in float: NaN for a row of -inf only.
sa_status ieee_softmax(void*, sa_dtype, const sa_rows* s, const void* in, void* out) {
  const auto* x = static_cast<const float*>(in);
  auto* y = static_cast<float*>(out);
  for (std::int64_t r = 0; r < s->rows; ++r) {
    const float* xr = x + r * s->in_stride;
    float* yr = y + r * s->out_stride;
    float m = -INFINITY;
    for (std::int64_t i = 0; i < s->n; ++i) m = std::fmax(m, xr[i]);
    float sum = 0;
    for (std::int64_t i = 0; i < s->n; ++i)
      sum += yr[i] = std::exp(static_cast<float>((xr[i] - m) / s->temperature));
    for (std::int64_t i = 0; i < s->n; ++i) yr[i] /= sum;
  }
  return SA_OK;
}
sa_kernel ieee_kernel() {
  sa_kernel k{};
  k.abi_version = SA_KERNEL_ABI_VERSION;
  k.struct_size = sizeof(sa_kernel);
  k.name = "ieee_softmax";
  k.ops = SA_OP_SOFTMAX;
  k.dtypes = SA_DTYPE_F32;
  k.memory = SA_MEMORY_HOST;
  k.softmax = ieee_softmax;
  return k;
}
}  // namespace

TEST(GateNanRule, IeeeSpecialValuesAllowsNanOnRowsOfMinusInfinityOnly) {
  props::Conventions none, ieee;
  ieee.ieee_special_values = true;
  RowInputFacts finite, masked, nan, pos_inf;
  masked.all_neg_inf = true;
  nan.nan = true;
  pos_inf.pos_inf = true;
  EXPECT_FALSE(nan_rule_for_row(finite, none).nan_allowed);
  EXPECT_FALSE(nan_rule_for_row(finite, ieee).nan_allowed);
  EXPECT_FALSE(nan_rule_for_row(masked, none).nan_allowed);
  EXPECT_NE(nan_rule_for_row(masked, none).why.find("ieee_special_values"), std::string::npos);
  EXPECT_EQ(nan_rule_for_row(finite, none).why.find("ieee_special_values"), std::string::npos);
  EXPECT_TRUE(nan_rule_for_row(masked, ieee).nan_allowed);
  EXPECT_TRUE(nan_rule_for_row(nan, none).nan_allowed);      // kernel.h: NaN in, NaN out
  EXPECT_TRUE(nan_rule_for_row(pos_inf, none).nan_allowed);  // left to special.values
}

TEST(GateGuard, NanOnAMaskedRowPassesOnlyUnderADeclaredIeeeSpecialValues) {
  static const sa_kernel k = ieee_kernel();
  const Kernel inner(&k, "test");
  std::vector<GuardIncident> seen;
  GuardedKernel g(inner, {}, [&](const GuardIncident& i) { seen.push_back(i); });
  const std::vector<float> masked = {-INFINITY, -INFINITY, -INFINITY};
  {
    props::Conventions c;
    c.ieee_special_values = true;
    const props::ConventionScope scope(c);
    const auto y = g.kernel().softmax(DType::float32, RowBatch::single(masked));
    ASSERT_TRUE(std::isnan(y[0]));  // the stand-in is IEEE
    EXPECT_TRUE(seen.empty()) << seen[0].detail;
    // A finite row is still held to kernel.h under the convention.
    g.kernel().softmax(DType::float32, RowBatch::single({1, 2, 3}));
    EXPECT_TRUE(seen.empty());
  }
  g.kernel().softmax(DType::float32, RowBatch::single(masked));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].kind, "nan_output");
  EXPECT_NE(seen[0].detail.find("ieee_special_values"), std::string::npos) << seen[0].detail;
}

// Through the suite, as the gate runs it: special.values feeds fully masked
// rows; the conventions run_suite holds the kernel to (here the spec's
// `conventions`) reach the guard.
TEST(GateGuard, RunSuiteDeclaredIeeeSpecialValuesReachesTheNanCheck) {
  static const sa_kernel k = ieee_kernel();
  const Kernel inner(&k, "test");
  for (bool declared : {true, false}) {
    std::vector<GuardIncident> seen;
    GuardedKernel g(inner, {}, [&](const GuardIncident& i) { seen.push_back(i); });
    props::SuiteConfig cfg;
    cfg.properties = {"special.values"};
    cfg.ops = {Op::softmax};
    cfg.dtypes = {DType::float32};
    cfg.cases = 5;
    cfg.seed = 1;
    if (declared) cfg.conventions = {"ieee_special_values"};
    props::run_suite(g.kernel(), cfg);
    std::size_t nan = 0;
    for (const auto& i : seen)
      if (i.kind == "nan_output") {
        ++nan;
        EXPECT_NE(i.detail.find("ieee_special_values"), std::string::npos) << i.detail;
      }
    if (declared)
      EXPECT_EQ(nan, 0u);
    else
      EXPECT_GT(nan, 0u) << "special.values fed no fully masked row";
  }
}
