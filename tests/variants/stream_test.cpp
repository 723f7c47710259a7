// The streamability column (issue 36): a variant that supplies a state, a
// push and a merge is held to the whole row for every split; a wrong merge is
// caught with a shrunk split, a non-neutral identity is caught, an older
// (version-1) plugin still loads, and a failed claim (exit 1) is told apart
// from a finding (exit 0) in the terminal and in the JSON.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fuzz_command.hpp"
#include "variants/formulas.hpp"
#include "variants/fuzz.hpp"

namespace sa::variants {
namespace {

const std::vector<Variant>& plugin() {
  static const std::vector<Variant> vs = load_plugin(SA_VARIANT_STREAM_PLUGIN);
  return vs;
}

const Variant& plugin_variant(const std::string& name) {
  for (const auto& v : plugin())
    if (v.name == name) return v;
  throw std::runtime_error("no plugin variant " + name);
}

Verdict stream_verdict(const Variant& v) {
  FuzzConfig cfg;
  cfg.cases = 100;
  const VariantResult r = fuzz_variant(v, cfg);
  const Verdict* c = cell(r, "streamable");
  if (!c) throw std::runtime_error("no streamable cell");
  return *c;
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

TEST(Streamability, PluginLoadsEveryVersion) {
  ASSERT_EQ(plugin().size(), 4u);
  EXPECT_EQ(plugin_variant("stream_softmax").stream.kind, StreamKind::bounded);
  // Version 1 ends at ctx: the loader reads nothing past it.
  EXPECT_EQ(plugin_variant("stream_v1_softmax").stream.kind, StreamKind::not_supplied);
  const Verdict v1 = stream_verdict(plugin_variant("stream_v1_softmax"));
  EXPECT_EQ(v1.outcome, Outcome::skip);
  EXPECT_EQ(v1.note.rfind("not supplied", 0), 0u) << v1.note;
}

// The example plugin compiled against the frozen version-1 header
// (tests/abi/v1/include): same matrix as the version-2 build, stream n/s.
TEST(Streamability, Version1BuildOfTheExamplePluginLoadsAndFuzzesAsBefore) {
  const auto v1 = load_plugin(SA_VARIANT_EXAMPLE_V1_PLUGIN);
  const auto v2 = load_plugin(SA_VARIANT_EXAMPLE_PLUGIN);
  ASSERT_EQ(v1.size(), 2u);
  FuzzConfig cfg;
  cfg.cases = 40;
  cfg.max_log2_n = 10;
  const Matrix m1 = fuzz_all({&v1[0], &v1[1]}, cfg), m2 = fuzz_all({&v2[0], &v2[1]}, cfg);
  for (std::size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(m1.rows[r].variant, m2.rows[r].variant);
    EXPECT_EQ(streamable_word(m1.rows[r]), "not supplied");
    for (std::size_t k = 0; k < m1.rows[r].cells.size(); ++k)
      EXPECT_EQ(m1.rows[r].cells[k].outcome, m2.rows[r].cells[k].outcome)
          << m1.rows[r].cells[k].property;
  }
}

TEST(Streamability, CorrectOnlineSoftmaxMergesToTheWholeRow) {
  const Verdict v = stream_verdict(plugin_variant("stream_softmax"));
  EXPECT_EQ(v.outcome, Outcome::pass) << describe(v);
  EXPECT_EQ(v.rule.id, "stream.bounded");
  EXPECT_LE(v.measured, 1.0);  // worst error / bound
}

TEST(Streamability, MergeWithoutRescaleIsCaughtWithAShrunkSplit) {
  const Verdict v = stream_verdict(plugin_variant("stream_softmax_no_rescale"));
  ASSERT_EQ(v.outcome, Outcome::fail) << describe(v);
  // Shrunk to the smallest witness: two items of different value, one per chunk.
  const std::string& ce = v.counterexample;
  EXPECT_NE(ce.find("into 2 chunks"), std::string::npos) << ce;
  EXPECT_EQ(count(ce.substr(0, ce.find(']')), ","), 1u) << ce;  // l has 2 items
  EXPECT_EQ(count(ce, " | "), 1u) << ce;
  EXPECT_GT(v.measured, 1.0);  // error / bound
}

TEST(Streamability, NonNeutralIdentityIsCaught) {
  const Verdict v = stream_verdict(plugin_variant("stream_softmax_bad_identity"));
  ASSERT_EQ(v.outcome, Outcome::fail) << describe(v);
  EXPECT_NE(v.counterexample.find("identity state not neutral"), std::string::npos)
      << v.counterexample;
  // Any row shows it: shrunk to one item.
  EXPECT_EQ(v.counterexample.rfind("l = [0], split [0] into 1 chunk", 0), 0u) << v.counterexample;
}

// A bitwise claim is checked bit for bit: an online softmax (close, not
// identical to the two-pass kernel) that claims bitwise fails.
TEST(Streamability, BitwiseClaimOfAnInexactMergeFails) {
  Variant v = plugin_variant("stream_softmax");
  v.name = "stream_softmax_claims_bitwise";
  v.stream.kind = StreamKind::bitwise;
  const Verdict c = stream_verdict(v);
  ASSERT_EQ(c.outcome, Outcome::fail) << describe(c);
  EXPECT_EQ(c.rule.id, "stream.bitwise");
  EXPECT_NE(c.counterexample.find("differ from the whole-row kernel"), std::string::npos)
      << c.counterexample;
}

// A claimed stream without its functions or bound is a claimed error (the run fails).
TEST(Streamability, ClaimWithoutFunctionsIsAClaimedError) {
  Variant v = plugin_variant("stream_softmax");
  v.name = "stream_softmax_without_bound";
  v.stream.bound = nullptr;
  FuzzConfig cfg;
  cfg.cases = 10;
  const Matrix m = fuzz_all({&v}, cfg);
  const Verdict* c = cell(m.rows[0], "streamable");
  EXPECT_EQ(c->outcome, Outcome::error) << describe(*c);
  EXPECT_TRUE(claims(m.rows[0], *c));
  EXPECT_EQ(claimed_failures(m).size(), 1u);
}

// Built-ins: the exact streams (hardmax's (max, count), a count for sigmoid
// and ReLU attention) hold bit for bit; the online-softmax family within its
// bound; sparsemax and entmax state they cannot be streamed.
TEST(Streamability, BuiltinsColumn) {
  std::vector<const Variant*> vs;
  for (const char* n : {"hardmax", "sigmoid_attention", "relu_attention", "softmax", "sink_b1",
                        "sparsemax", "entmax15", "stick_breaking"})
    vs.push_back(registry().find(n));
  for (const auto* v : vs) ASSERT_NE(v, nullptr);
  FuzzConfig cfg;
  const Matrix m = fuzz_all(vs, cfg);
  for (std::size_t k = 0; k < 3; ++k) {
    const Verdict* c = cell(m.rows[k], "streamable");
    EXPECT_EQ(c->outcome, Outcome::pass) << describe(*c);
    EXPECT_EQ(c->rule.id, "stream.bitwise") << m.rows[k].variant;
    EXPECT_EQ(streamable_word(m.rows[k]), "yes");
  }
  for (std::size_t k = 3; k < 5; ++k) {
    const Verdict* c = cell(m.rows[k], "streamable");
    EXPECT_EQ(c->outcome, Outcome::pass) << describe(*c);
    EXPECT_EQ(c->rule.id, "stream.bounded") << m.rows[k].variant;
  }
  EXPECT_EQ(streamable_word(m.rows[5]), "no");
  EXPECT_EQ(streamable_word(m.rows[6]), "no");
  EXPECT_EQ(streamable_word(m.rows[7]), "not supplied");
  const auto j = to_json(m);
  EXPECT_EQ(j["variants"][0]["streamable"], "yes");
  EXPECT_EQ(j["variants"][5]["streamable"], "no");
  EXPECT_EQ(j["variants"][7]["streamable"], "not supplied");
  EXPECT_TRUE(j["variants"][0]["cells"]["streamable"]["claimed"].get<bool>());
  EXPECT_FALSE(j["variants"][5]["cells"]["streamable"]["claimed"].get<bool>());
}

int run_cli(std::vector<std::string> args) {
  CLI::App app{"test"};
  sa::cli::add_fuzz_command(app);
  std::vector<const char*> argv{"softmax-audit"};
  for (auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code();
  }
  return 0;
}

// A wrong merge is a failed claim: exit 1, FAILS in the JSON. Findings alone
// (the sink's sum and shift cells) exit 0.
TEST(Streamability, FailedClaimExitsOneFindingExitsZero) {
  const auto out = std::filesystem::temp_directory_path() / "sa_stream_cli_test.json";
  ASSERT_EQ(run_cli({"fuzz", "--plugin", SA_VARIANT_STREAM_PLUGIN, "--variant",
                     "stream_softmax_no_rescale", "--variant", "sink_b1", "--cases", "60", "--json",
                     out.string()}),
            1);
  std::ifstream f(out);
  const auto j = nlohmann::json::parse(f);
  ASSERT_EQ(j["variants"].size(), 2u);
  EXPECT_EQ(j["variants"][0]["streamable"], "FAILS");
  EXPECT_TRUE(j["variants"][0]["cells"]["streamable"]["claimed"].get<bool>());
  EXPECT_EQ(j["variants"][1]["streamable"], "yes");
  EXPECT_EQ(j["variants"][1]["cells"]["sum_to_one"]["outcome"], "fail");
  EXPECT_FALSE(j["variants"][1]["cells"]["sum_to_one"]["claimed"].get<bool>());
  EXPECT_NE(j["legend"].get<std::string>().find("FAIL!"), std::string::npos);
  std::filesystem::remove(out);
  EXPECT_EQ(run_cli({"fuzz", "--variant", "sink_b1", "--cases", "30"}), 0);
}

TEST(Streamability, TerminalSymbolsTellClaimsFromFindings) {
  FuzzConfig cfg;
  cfg.cases = 60;
  const Matrix m =
      fuzz_all({&plugin_variant("stream_softmax_no_rescale"), registry().find("sink_b1")}, cfg);
  const std::string t = render_table(m);
  // The wrong merge's row carries FAIL! in the stream column; the sink's
  // findings read "lacks"; the legend explains both.
  const auto row0 = t.substr(t.find("\nstream_softmax_no_rescale"));
  EXPECT_NE(row0.substr(0, row0.find('\n', 1)).find("FAIL!"), std::string::npos) << t;
  const auto row1 = t.substr(t.find("\nsink_b1"));
  const std::string sink_line = row1.substr(0, row1.find('\n', 1));
  EXPECT_NE(sink_line.find("lacks"), std::string::npos) << t;
  EXPECT_EQ(sink_line.find("FAIL!"), std::string::npos) << t;
  EXPECT_NE(t.find("Legend:"), std::string::npos);
  EXPECT_NE(t.find("Failed claims"), std::string::npos);
  EXPECT_NE(t.find("Findings"), std::string::npos);
}

}  // namespace
}  // namespace sa::variants

namespace sa::variants {
namespace {

// `fuzz --list` names every variant with its citation and streamability; every
// built-in has a citation.
TEST(FuzzList, EveryVariantWithItsCitation) {
  for (const auto& v : registry().all())
    if (v.origin == "builtin") EXPECT_FALSE(v.citation.empty()) << v.name;
  testing::internal::CaptureStdout();
  const int rc = run_cli({"fuzz", "--list"});
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0);
  for (const auto& v : registry().all()) {
    const std::string head =
        v.name + (v.wrong_formulation ? " [wrong_formulation of " + v.wrong_of + "]" : "");
    const auto at = out.find(head + "  (" + v.origin + ")");
    ASSERT_NE(at, std::string::npos) << v.name;
    if (v.origin != "builtin") continue;
    const auto cit = out.find("citation: " + v.citation, at);
    EXPECT_NE(cit, std::string::npos) << v.name;
  }
  EXPECT_NE(out.find("streamable: no (the threshold tau"), std::string::npos) << out;
}

}  // namespace
}  // namespace sa::variants
