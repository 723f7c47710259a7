// The audit report (issue 19), through the command line: what it says must be
// right before it is pretty.
//  - the variant matrix is read from `fuzz --json` (the format the audit
//    writes) and drawn as a table of symbols whose failing cells link to their
//    counterexamples; any other format is refused naming the file;
//  - what was not audited (--not-audited NAME:REASON) is said, escaped;
//  - a sweep that was given is never reported as missing;
//  - every link points inside the page or at a file of the repository;
//  - provenance: a plugin's path and SHA-256, seed, MPFR precision, the build;
//  - the JSON twin validates against docs/schema/report.schema.json, and
//    `report --compare` names new failures, fixed failures and error growth
//    between two audits that differ.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <set>

#include "gate/provenance.hpp"
#include "gate/report.hpp"
#include "properties/suite.hpp"
#include "gate_test_util.hpp"

using namespace gate_test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kCli = SA_GATE_CLI;
const std::string kGood = SA_GATE_EXAMPLE_KERNEL;
const std::string kVariants = SA_GATE_VARIANT_EXAMPLE;
const std::string kSource = SA_GATE_SOURCE_DIR;
const std::string kSchema = kSource + "/docs/schema/";

Ran json_valid(const std::string& schema, const std::string& path) {
  return run("python3 " + q(kSchema + "validate.py") + " " + q(kSchema + schema) + " " + q(path) +
             " | head -c 2000");
}

// One small check of the example kernel, shared by the tests (a few seconds).
const std::string& good_results() {
  static const std::string path = [] {
    const std::string dir = temp_dir();
    const Ran r = run(kCli + " check --plugin " + q(kGood) + " --seed 5 --cases 5 --json " +
                      q(dir + "/r.json"));
    EXPECT_EQ(r.rc, 0) << r.output;
    return dir + "/r.json";
  }();
  return path;
}

// plugin_naive_softmax fails special-value claims it makes (a defect);
// plugin_softmax holds everything; the built-in sink_b1 has findings (it does
// not sum to one nor shift) and a streaming state.
const std::string& variants_json() {
  static const std::string path = [] {
    const std::string dir = temp_dir();
    const Ran r = run(kCli + " fuzz --plugin " + q(kVariants) +
                      " --variant plugin_naive_softmax --variant plugin_softmax --variant sink_b1 "
                      "--cases 20 "
                      "--max-log2-n 10 --json " +
                      q(dir + "/v.json"));
    EXPECT_EQ(r.rc, 1) << r.output;
    return dir + "/v.json";
  }();
  return path;
}

}  // namespace

// --out means a directory in every subcommand: report --out DIR writes
// DIR/report.html and DIR/report.json; a file name there is refused (exit 2)
// with the option that takes one.
TEST(GateReportContent, OutIsADirectoryAsInEverySubcommand) {
  const std::string dir = temp_dir();
  Ran r = run(kCli + " report --no-plots --results " + q(good_results()) + " --out " +
              q(dir + "/audit"));
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_FALSE(slurp(dir + "/audit/report.html").empty());
  EXPECT_FALSE(slurp(dir + "/audit/report.json").empty());
  r = run(kCli + " report --no-plots --results " + q(good_results()) + " --out " +
          q(dir + "/x.html"));
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("use --html"), std::string::npos) << r.output;
  r = run(kCli + " report --no-plots --results " + q(good_results()));
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("expected --out DIR"), std::string::npos) << r.output;
}

TEST(GateReportContent, VariantMatrixIsATableOfSymbolsReadFromFuzzJson) {
  const std::string dir = temp_dir();
  const Ran r = run(kCli + " report --no-plots --results " + q(good_results()) + " --variants " +
                    q(variants_json()) + " --html " + q(dir + "/r.html"));
  ASSERT_EQ(r.rc, 0) << r.output;
  const std::string h = slurp(dir + "/r.html");
  const auto at = h.find("<table class=\"matrix\" id=\"variant-matrix\">");
  ASSERT_NE(at, std::string::npos) << "no variant matrix table";
  const std::string matrix = h.substr(at, h.find("</table>", at) - at);
  EXPECT_NE(matrix.find("plugin_<wbr>naive_<wbr>softmax"), std::string::npos);
  EXPECT_NE(matrix.find("\u2713"), std::string::npos);  // holds
  EXPECT_NE(matrix.find("claimedfail"), std::string::npos) << "a claimed failure is not marked";
  // A failed claim and a finding have different symbols, and the legend says which is which.
  EXPECT_NE(matrix.find("\u2717"), std::string::npos) << "no failed-claim symbol";
  EXPECT_NE(matrix.find("\u25cb"), std::string::npos) << "no finding symbol";
  EXPECT_NE(h.find("<b>failed claim</b>"), std::string::npos);
  EXPECT_NE(h.find("<b>finding</b>"), std::string::npos);
  // The streamability column: the sink streams, the plugins supply no state.
  EXPECT_NE(matrix.find(">stream<"), std::string::npos);
  EXPECT_NE(matrix.find(">yes<"), std::string::npos);
  EXPECT_NE(matrix.find(">n/s<"), std::string::npos);
  // The sharpness curves: every variant's largest weight against n, with a table.
  const auto sharp = h.find("id=\"variant-sharpness\"");
  ASSERT_NE(sharp, std::string::npos) << "no largest-weight-against-n section";
  EXPECT_NE(h.find("<td>sink_b1</td>", sharp), std::string::npos);
  EXPECT_NE(matrix.find("href=\"#vce-0\""), std::string::npos) << "failing cell without a link";
  EXPECT_NE(h.find("<li id=\"vce-0\">"), std::string::npos) << "link to no counterexample";
  // The header is the fuzz table's short one, never a JSON path or blob.
  EXPECT_NE(matrix.find(">sum1<"), std::string::npos);
  EXPECT_EQ(h.find("cells."), std::string::npos);
  EXPECT_EQ(matrix.find("&quot;bound&quot;"), std::string::npos);
  EXPECT_NE(h.find("Legend:"), std::string::npos);
  // The twin says the same, and the report's status counts the claimed failure.
  const json doc = json::parse(slurp(dir + "/r.json"));
  ASSERT_TRUE(doc["variants"].is_object());
  EXPECT_EQ(doc["variants"]["rows"].size(), 3u);
  EXPECT_EQ(doc["variants"]["rows"][2]["streamable"], "yes");
  EXPECT_EQ(doc["variants"]["rows"][2]["cells"]["sum_to_one"]["symbol"], "\u25cb");
  EXPECT_EQ(doc["status"], "fail");

  // Any other format is refused, naming the file and what was expected.
  std::ofstream(dir + "/loose.json") << R"({"variants":[{"name":"softmax","max_weight":{"n":1}}]})";
  const Ran loose = run(kCli + " report --no-plots --results " + q(good_results()) +
                        " --variants " + q(dir + "/loose.json") + " --html " + q(dir + "/x.html"));
  EXPECT_EQ(loose.rc, 2) << loose.output;
  EXPECT_NE(loose.output.find("loose.json"), std::string::npos) << loose.output;
  EXPECT_NE(loose.output.find("softmax-audit-variants"), std::string::npos) << loose.output;
  // The right format with fields of the wrong types is shown as it is, never a crash.
  std::ofstream(dir + "/typed.json")
      << R"({"format":"softmax-audit-variants","columns":[{"id":7,"claim":[1]},3],)"
      << R"("variants":[{"name":5,"wrong_formulation":"yes","cells":{"7":{"outcome":3,"note":{}}}},"x"]})";
  const Ran typed = run(kCli + " report --no-plots --results " + q(good_results()) +
                        " --variants " + q(dir + "/typed.json") + " --html " + q(dir + "/t.html"));
  EXPECT_EQ(typed.rc, 0) << typed.output;
  EXPECT_NE(slurp(dir + "/t.html").find("id=\"variant-matrix\""), std::string::npos);
}

TEST(GateReportContent, SaysWhatWasNotAuditedAndNeverCallsAGivenSweepMissing) {
  const std::string dir = temp_dir();
  std::ofstream(dir + "/sweep.json")
      << R"({"series":[{"kernel":"k","dtype":"float32","metric":"softmax_max_rel_error","x":"n",
             "points":[[16,1e-8],[256,2e-8]],"bound":[[16,1e-6],[256,1.6e-5]]}]})";
  const Ran r =
      run(kCli + " report --no-plots --results " + q(good_results()) + " --sweep " +
          q(dir + "/sweep.json") +
          " --not-audited 'cuda:no CUDA device' --not-audited '<b>x</b>:why <i>' --html " +
          q(dir + "/r.html"));
  ASSERT_EQ(r.rc, 0) << r.output;
  const std::string h = slurp(dir + "/r.html");
  const auto sec = h.find("<section id=\"not-audited\">");
  ASSERT_NE(sec, std::string::npos);
  const std::string na = h.substr(sec, h.find("</section>", sec) - sec);
  EXPECT_NE(na.find("<td>cuda</td><td>no CUDA device</td>"), std::string::npos) << na;
  EXPECT_NE(na.find("&lt;b&gt;x&lt;/b&gt;"), std::string::npos) << na;
  EXPECT_EQ(h.find("<b>x</b>"), std::string::npos) << "an input reached the page unescaped";
  EXPECT_EQ(h.find("<i>"), std::string::npos);
  // The summary names it too, and an audit that skipped something is not a pass.
  EXPECT_NE(h.substr(0, sec).find("<b>cuda</b> (no CUDA device)"), std::string::npos);
  const json doc = json::parse(slurp(dir + "/r.json"));
  EXPECT_EQ(doc["status"], "incomplete");
  EXPECT_EQ(doc["not_audited"][0]["name"], "cuda");
  // Sections the sweep has no series for say so; none says no sweep was given.
  EXPECT_NE(h.find("The sweep given has no series"), std::string::npos);
  EXPECT_EQ(h.find("no sweep was given"), std::string::npos);
  EXPECT_EQ(h.find("illustration"), std::string::npos) << "drew δ = 10 although data was given";

  const Ran bad = run(kCli + " report --no-plots --results " + q(good_results()) +
                      " --not-audited cuda --html " + q(dir + "/x.html"));
  EXPECT_EQ(bad.rc, 2) << bad.output;
  EXPECT_NE(bad.output.find("--not-audited 'cuda': expected NAME:REASON"), std::string::npos)
      << bad.output;
}

TEST(GateReportContent, EveryLinkPointsIntoThePageOrTheRepository) {
  const std::string dir = temp_dir();
  const Ran r = run(kCli + " report --no-plots --results " + q(good_results()) + " --variants " +
                    q(variants_json()) + " --docs " + q(kSource) + " --html " + q(dir + "/r.html"));
  ASSERT_EQ(r.rc, 0) << r.output;
  const std::string h = slurp(dir + "/r.html");
  std::set<std::string> ids;
  const std::regex id_re("id=\"([^\"]+)\"");
  for (auto it = std::sregex_iterator(h.begin(), h.end(), id_re); it != std::sregex_iterator();
       ++it)
    ids.insert((*it)[1]);
  const std::regex href_re("href=\"([^\"]*)\"");
  int to_docs = 0, in_page = 0;
  const fs::path root = fs::canonical(kSource);
  for (auto it = std::sregex_iterator(h.begin(), h.end(), href_re); it != std::sregex_iterator();
       ++it) {
    const std::string href = (*it)[1];
    if (href.rfind("#", 0) == 0) {
      EXPECT_TRUE(ids.count(href.substr(1))) << "link to a missing anchor: " << href;
      ++in_page;
      continue;
    }
    EXPECT_EQ(href.find(':'), std::string::npos) << "link leaves the repository: " << href;
    const fs::path target = fs::weakly_canonical(fs::path(dir) / href.substr(0, href.find('#')));
    const std::string rel = target.lexically_relative(root).generic_string();
    EXPECT_TRUE(fs::exists(target) && rel.rfind("docs/", 0) == 0)
        << href << " is not a file under the repository's docs/";
    if (href.find("theory.md#t7-") != std::string::npos) ++to_docs;
  }
  EXPECT_GT(in_page, 10);
  EXPECT_GT(to_docs, 0) << "no rule links to docs/theory.md T7";
  // A rule source that names theory.md without its folder is linked to the repository's file.
  EXPECT_EQ(h.find(">theory.md T8"), std::string::npos);
}

// Every property the suite can report has a unit of its own in the report.
TEST(GateReportContent, EveryPropertyHasAUnit) {
  std::vector<sa::Verdict> vs;
  for (const auto& p : sa::props::properties()) {
    sa::Verdict v = sa::check_at_most(p.id, p.claim, 1, 2, {p.rule, "src"});
    v.op = "softmax", v.dtype = "float32";
    vs.push_back(v);
  }
  for (const char* g : {"gate.no_crash", "gate.no_hang", "gate.in_bounds", "gate.coverage"})
    vs.push_back(sa::check_at_most(g, "gate", 0, 0, {"gate", "src"}));
  sa::gate::RunRecord r;
  r.kernel = "k";
  r.verdicts = vs;
  const std::string dir = temp_dir();
  std::ofstream(dir + "/r.json") << sa::gate::results_to_json({r}).dump();
  sa::gate::ReportInputs in;
  in.results = {dir + "/r.json"};
  in.gnuplot.clear();
  std::ostringstream html;
  json doc;
  sa::gate::write_report(in, html, &doc);
  ASSERT_EQ(doc["verdicts"].size(), vs.size());
  for (const auto& v : doc["verdicts"])
    EXPECT_NE(v["unit"], "as stated by the claim") << v["property"] << " has no unit";
}

// The sweep behind the report's Figure 5: the kernel's entropy against the
// temperature, which T4 says cannot fall as the temperature rises, next to the
// exact entropy of the same rows.
TEST(GateReportContent, TemperatureSweepGivesFigureFiveSeries) {
  const std::string dir = temp_dir();
  const Ran r = run("cd " + q(dir) + " && " + kCli +
                    " sweep --builtin naive --out sw --temperature-series-only --min-log2-n 6 "
                    "--max-log2-n 6 --dtype float32 --distribution uniform --temperature 0.1 0.5 "
                    "1 2 8");
  ASSERT_EQ(r.rc, 0) << r.output;
  const Ran v = json_valid("sweep.schema.json", dir + "/sw/sweep.json");
  EXPECT_EQ(v.rc, 0) << v.output;
  const json s = json::parse(slurp(dir + "/sw/sweep.json"));
  ASSERT_EQ(s["series"].size(), 1u) << s.dump(2).substr(0, 2000);
  const json& f = s["series"][0];
  EXPECT_EQ(f["x"], "temperature");
  EXPECT_EQ(f["metric"], "entropy");
  ASSERT_EQ(f["points"].size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    const double h = f["points"][i][1], exact = f["bound"][i][1];
    EXPECT_NEAR(h, exact, 1e-5) << "theta " << f["points"][i][0];
    if (i) EXPECT_GE(h, f["points"][i - 1][1].get<double>() - 1e-6) << "H fell as theta rose";
  }
  EXPECT_NEAR(f["points"][4][1].get<double>(), std::log(64.0), 0.1);  // near log n when hot
  // The report draws it in section 4 with its exact curve.
  const Ran rep = run(kCli + " report --no-plots --results " + q(good_results()) + " --sweep " +
                      q(dir + "/sw/sweep.json") + " --html " + q(dir + "/r.html"));
  ASSERT_EQ(rep.rc, 0) << rep.output;
  const json doc = json::parse(slurp(dir + "/r.json"));
  ASSERT_EQ(doc["sweep"]["series"].size(), 1u);
  EXPECT_EQ(doc["sweep"]["series"][0]["section"], "entropy_temperature");
}

TEST(Sha256, KnownAnswers) {
  using sa::gate::sha256_hex;
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(GateReportContent, ProvenanceNamesTheKernelBinaryBuildSeedAndPrecision) {
  const json res = json::parse(slurp(good_results()));
  const json& p = res["runs"][0]["provenance"];
  ASSERT_TRUE(p.is_object()) << res.dump(2).substr(0, 2000);
  const Ran sum = run("sha256sum " + q(kGood));
  ASSERT_EQ(sum.rc, 0);
  EXPECT_EQ(p["kernel_library"]["sha256"], sum.output.substr(0, 64));
  EXPECT_EQ(p["kernel_library"]["path"], fs::canonical(kGood).string());
  EXPECT_EQ(p["seed"], "5");
  EXPECT_EQ(p["mpfr_precision_bits"], 128);
  EXPECT_EQ(p["tool_version"], sa::gate::tool_version());
  EXPECT_NE(std::string(p["git_commit"]), "");
  EXPECT_NE(std::string(p["host_cpu"]).find("logical CPUs"), std::string::npos);
  EXPECT_NE(std::string(p["command_line"]).find(" check --plugin "), std::string::npos);
  // A built-in kernel names the instruction set it dispatched to.
  const std::string dir = temp_dir();
  std::ofstream(dir + "/g.toml") << "ops = [\"logsumexp\"]\ndtypes = [\"float32\"]\ncases = 2\n";
  const Ran cpu = run(kCli + " check --builtin cpu --spec " + q(dir + "/g.toml") + " --json " +
                      q(dir + "/cpu.json"));
  ASSERT_EQ(cpu.rc, 0) << cpu.output;
  const json c = json::parse(slurp(dir + "/cpu.json"))["runs"][0]["provenance"];
  EXPECT_TRUE(c["kernel_library"].is_null());
  const std::string simd = c["simd_target"];
  EXPECT_TRUE(simd == "AVX2" || simd == "AVX3" || simd.find("EMU128") != std::string::npos ||
              simd.find("SSE") != std::string::npos || simd.find("AVX3_") != std::string::npos)
      << simd;
  // The report shows them, and its twin and the results validate against their schemas.
  const Ran r = run(kCli + " report --no-plots --results " + q(good_results()) + " --results " +
                    q(dir + "/cpu.json") + " --html " + q(dir + "/r.html"));
  ASSERT_EQ(r.rc, 0) << r.output;
  const std::string h = slurp(dir + "/r.html");
  EXPECT_NE(h.find(sum.output.substr(0, 64)), std::string::npos);
  EXPECT_NE(h.find("<td>" + simd + "</td>"), std::string::npos);
  EXPECT_NE(h.find("<section id=\"provenance\">"), std::string::npos);
  const Ran v1 = json_valid("results.schema.json", good_results());
  EXPECT_EQ(v1.rc, 0) << v1.output;
  const Ran v2 = json_valid("report.schema.json", dir + "/r.json");
  EXPECT_EQ(v2.rc, 0) << v2.output;
}

// Two audits of one kernel that differ: one claim newly fails, one is fixed,
// one passing measurement grew fivefold, one stayed the same.
TEST(GateReportContent, CompareShowsNewAndFixedFailuresAndErrorGrowth) {
  using namespace sa;
  const std::string dir = temp_dir();
  auto write = [&](const std::string& name, double a, double b, double c) {
    gate::RunRecord r;
    r.kernel = "k";
    r.origin = "plugin";
    Verdict v1 = check_at_most("differential.ulp", "within budget", a, 2, {"ulp", "src"});
    v1.op = "softmax", v1.dtype = "float32";
    Verdict v2 =
        check_at_most("differential.t7_apriori", "within T7", b, 1e-6, {"t7_apriori", "s"});
    v2.op = "softmax", v2.dtype = "float32";
    if (v2.outcome == Outcome::fail) v2.counterexample = "logits=[1, 2]";
    Verdict v3 = check_at_most("differential.ulp", "within budget", c, 2, {"ulp", "src"});
    v3.op = "logsumexp", v3.dtype = "bfloat16";
    Verdict v4 =
        check_at_most("metamorphic.sum_to_one", "sums to 1", 0.5, 2, {"rounding_analysis", "s"});
    v4.op = "softmax", v4.dtype = "float32";
    r.verdicts = {v1, v2, v3, v4};
    std::ofstream(dir + "/" + name) << gate::results_to_json({r}).dump();
  };
  write("results-old.json", 3, 1e-7, 0.1);  // ulp fails, T7 holds, 0.1 ulp
  write("results-new.json", 1, 5e-6, 0.5);  // ulp fixed, T7 fails, 0.5 ulp (grew 5x)
  const Ran a = run(kCli + " report --no-plots --results " + q(dir + "/results-old.json") +
                    " --html " + q(dir + "/old.html"));
  ASSERT_EQ(a.rc, 0) << a.output;
  ASSERT_TRUE(fs::exists(dir + "/old.json")) << "no JSON twin next to the HTML";
  // What is not a report twin is refused, naming what was expected.
  const Ran wrong =
      run(kCli + " report --no-plots --results " + q(dir + "/results-new.json") + " --compare " +
          q(dir + "/results-old.json") + " --html " + q(dir + "/new.html"));
  EXPECT_EQ(wrong.rc, 2) << wrong.output;
  EXPECT_NE(wrong.output.find("softmax-audit-report"), std::string::npos) << wrong.output;
  // The twin may not overwrite an input.
  const Ran clobber =
      run(kCli + " report --no-plots --results " + q(dir + "/results-new.json") + " --json " +
          q(dir + "/results-new.json") + " --html " + q(dir + "/new.html"));
  EXPECT_EQ(clobber.rc, 2) << clobber.output;

  const Ran c = run(kCli + " report --no-plots --results " + q(dir + "/results-new.json") +
                    " --compare " + q(dir + "/old.json") + " --html " + q(dir + "/new.html"));
  ASSERT_EQ(c.rc, 0) << c.output;
  EXPECT_NE(c.output.find("1 new failure(s)\n  k differential.t7_apriori softmax float32"),
            std::string::npos)
      << c.output;
  EXPECT_NE(c.output.find("1 fixed failure(s)\n  k differential.ulp softmax float32"),
            std::string::npos)
      << c.output;
  EXPECT_NE(c.output.find("k differential.ulp logsumexp bfloat16: 0.1 -> 0.5 ulp"),
            std::string::npos)
      << c.output;
  const json doc = json::parse(slurp(dir + "/new.json"));
  const json& cmp = doc["comparison"];
  ASSERT_TRUE(cmp.is_object());
  ASSERT_EQ(cmp["new_failures"].size(), 1u);
  EXPECT_EQ(cmp["new_failures"][0]["counterexample"], "logits=[1, 2]");
  EXPECT_EQ(cmp["new_failures"][0]["outcome_before"], "pass");
  EXPECT_EQ(cmp["fixed_failures"].size(), 1u);
  // Growth: the bfloat16 ulp error (5x) and the T7 error (50x, now failing); the
  // unchanged sum_to_one is not listed.
  ASSERT_EQ(cmp["error_growth"].size(), 2u) << cmp.dump(2);
  EXPECT_EQ(cmp["error_growth"][0]["property"], "differential.t7_apriori");
  EXPECT_NEAR(cmp["error_growth"][1]["factor"].get<double>(), 5.0, 1e-9);
  EXPECT_EQ(cmp["checks_added"], 0);
  const std::string h = slurp(dir + "/new.html");
  EXPECT_NE(h.find("<section id=\"comparison\">"), std::string::npos);
  EXPECT_NE(h.find("New failures (1)"), std::string::npos);
  for (const char* twin : {"/old.json", "/new.json"}) {
    const Ran v = json_valid("report.schema.json", dir + twin);
    EXPECT_EQ(v.rc, 0) << v.output;
  }
  // Same audit twice: nothing changed.
  const Ran same = run(kCli + " report --no-plots --results " + q(dir + "/results-old.json") +
                       " --compare " + q(dir + "/old.json") + " --html " + q(dir + "/same.html"));
  ASSERT_EQ(same.rc, 0) << same.output;
  EXPECT_NE(same.output.find("0 new failure(s)\n0 fixed failure(s)\n0 measurement(s) grew"),
            std::string::npos)
      << same.output;
}

namespace {

// The report of one results file written from `runs` (HTML and twin).
struct Written {
  std::string html, out;  // the page; what report printed
  json doc;
  int rc = -1;
};
Written report_of(const std::string& dir, const std::vector<sa::gate::RunRecord>& runs,
                  const std::string& extra = "") {
  std::ofstream(dir + "/results.json") << sa::gate::results_to_json(runs).dump();
  Written w;
  const Ran r = run(kCli + " report --no-plots --results " + q(dir + "/results.json") + " " +
                    extra + " --html " + q(dir + "/r.html"));
  w.rc = r.rc, w.out = r.output;
  w.html = slurp(dir + "/r.html");
  const std::string twin = slurp(dir + "/r.json");
  if (!twin.empty()) w.doc = json::parse(twin);
  return w;
}

sa::Verdict verdict(const char* property, const char* rule, double measured, double bound,
                    const char* op, const char* dtype) {
  sa::Verdict v = sa::check_at_most(property, "the claim", measured, bound, {rule, "src"});
  v.op = op, v.dtype = dtype;
  return v;
}

}  // namespace

// Issue 35, item 6: the report of a failing kernel. Its summary table shows
// the result first (at 800 px it was the last column, off screen: the
// browser test measures it); each failure is said in plain words from the
// verdict's fields, not only as a seed string; "Rules applied" names only the
// rules that decided a verdict on the kernel (a skipped check applies none).
TEST(GateReportContent, FailingKernelIsSaidInWordsWithOnlyTheRulesThatRan) {
  sa::gate::RunRecord r;
  r.kernel = "k";
  r.origin = "plugin";
  sa::Verdict f = verdict("differential.ulp", "ulp", 1.2, 1, "softmax", "float32");
  f.counterexample =
      "seed=7 case=3 (shrunk 4 steps) n=9 logits=[0, -104, 1] ; at row 0 item 7: "
      "got 0, exact 6.8e-46";
  f.note = "measured and bound in ulps of float32";
  sa::Verdict p =
      verdict("metamorphic.sum_to_one", "rounding_analysis", 0.5, 2, "softmax", "float32");
  sa::Verdict s =
      verdict("attention_v2.rounding", "never_ran_here", NAN, 1, "attention", "float16");
  s.outcome = sa::Outcome::skip;
  s.note = "not applicable: the kernel has no attention";
  r.verdicts = {f, p, s};
  const std::string dir = temp_dir();
  const Written w = report_of(dir, {r});
  ASSERT_EQ(w.rc, 0) << w.out;
  const auto sum = w.html.find("<section id=\"summary\">");
  ASSERT_NE(sum, std::string::npos);
  const std::string summary = w.html.substr(sum, w.html.find("</section>", sum) - sum);
  // The result is the summary table's first column, and the table is not in a sideways scroller.
  const auto table = summary.find("<table");
  ASSERT_NE(table, std::string::npos);
  const std::regex first_th("<th[^>]*>([^<]*)</th>");
  std::smatch m;
  const std::string from_table = summary.substr(table);
  ASSERT_TRUE(std::regex_search(from_table, m, first_th));
  EXPECT_EQ(m[1], "result") << from_table.substr(0, 300);
  EXPECT_EQ(summary.find("<div class=\"scroll\"><table"), std::string::npos)
      << "the summary table scrolls sideways, hiding its last columns";
  // What went wrong, in words: where, what the kernel returned, the exact value, how far over.
  const std::string said =
      "k softmax float32: row 0 item 7: the kernel returned 0 where the exact value is 6.8e-46 "
      "(1.2 ulps of float32, 1.2 times the bound of 1).";
  EXPECT_NE(summary.find("<span class=\"statement\">" + said + "</span>"), std::string::npos)
      << summary;
  EXPECT_NE(w.html.find("<b>What went wrong:</b> <span class=\"statement\">" + said),
            std::string::npos);
  ASSERT_EQ(w.doc["verdicts"].size(), 3u);
  EXPECT_EQ(w.doc["verdicts"][0]["statement"], said);
  EXPECT_FALSE(w.doc["verdicts"][1].contains("statement")) << "a passing verdict has no failure";
  // Rules applied: the two that decided a verdict, not the skipped check's.
  const auto ra = summary.find("<b>Rules applied:</b>");
  ASSERT_NE(ra, std::string::npos);
  const std::string applied = summary.substr(ra, summary.find("</p>", ra) - ra);
  EXPECT_NE(applied.find(">ulp</a>"), std::string::npos) << applied;
  EXPECT_NE(applied.find(">rounding_analysis</a>"), std::string::npos) << applied;
  EXPECT_EQ(applied.find("never_ran_here"), std::string::npos) << applied;
  EXPECT_EQ(w.doc["kernels"][0]["rules_applied"], json::array({"ulp", "rounding_analysis"}));
  // The rules section still explains the skipped check's rule (its verdict row links to it).
  EXPECT_NE(w.html.find("<code class=\"id\">never_ran_here</code>"), std::string::npos);
  const Ran v = json_valid("report.schema.json", dir + "/r.json");
  EXPECT_EQ(v.rc, 0) << v.output;

  // Other shapes: an infinite error, an error verdict, no "at" in the counterexample.
  sa::Verdict inf = verdict("special.values", "ieee", INFINITY, 0, "log_softmax", "bfloat16");
  inf.counterexample = "fixed input \"[-inf, 0]\"; at item 0: got nan, exact -inf";
  sa::Verdict err = verdict("gate.no_crash", "gate", NAN, 0, "softmax", "float32");
  err.outcome = sa::Outcome::error;
  err.note = "kernel call failed: SIGSEGV";
  sa::Verdict bare = verdict("metamorphic.monotonicity", "t1", 0.25, 0, "softmax", "float32");
  r.verdicts = {inf, err, bare};
  const Written w2 = report_of(temp_dir(), {r});
  ASSERT_EQ(w2.rc, 0) << w2.out;
  EXPECT_EQ(w2.doc["verdicts"][0]["statement"],
            "k log_softmax bfloat16: item 0: the kernel returned nan where the exact value is -inf "
            "(measured +inf, bound 0 ulps: a value that must be finite or equal is not).");
  EXPECT_EQ(w2.doc["verdicts"][1]["statement"], "k softmax float32: kernel call failed: SIGSEGV.");
  EXPECT_EQ(w2.doc["verdicts"][2]["statement"],
            "k softmax float32: the claim does not hold (0.25 absolute (weight) where the bound "
            "is 0).");
}

// Two audits whose checks drew other cases (another seed) are not compared
// as error growth: the report and the terminal say the seed changed and list
// the differing measurements apart; a changed kernel library (SHA-256) is
// said as prominently, and with the same seed its growth is growth.
TEST(GateReportContent, CompareSaysWhenSeedOrLibraryChangedAndDoesNotCallNoiseGrowth) {
  using namespace sa;
  auto audit = [&](const std::string& dir, const char* seed, const char* sha, double ulp) {
    gate::RunRecord r;
    r.kernel = "k";
    r.origin = "plugin";
    r.provenance = {{"seed", seed},
                    {"cases", 20},
                    {"kernel_library", {{"path", "/x/libk.so"}, {"sha256", sha}}}};
    r.verdicts = {
        verdict("differential.ulp", "ulp", ulp, 2, "softmax", "float32"),
        verdict("metamorphic.sum_to_one", "rounding_analysis", 0.5, 2, "softmax", "float32")};
    const Written w = report_of(dir, {r});
    EXPECT_EQ(w.rc, 0) << w.out;
    return dir + "/r.json";
  };
  const std::string a = temp_dir(), b = temp_dir(), c = temp_dir();
  const std::string sha1(64, 'a'), sha2(64, 'b');
  const std::string before = audit(a, "1", sha1.c_str(), 0.45);
  // Another seed, same library: 0.45 -> 1.0 ulp is other inputs, not a growth of 2.22.
  gate::RunRecord r;
  r.kernel = "k";
  r.origin = "plugin";
  r.provenance = {
      {"seed", "2"}, {"cases", 20}, {"kernel_library", {{"path", "/x/libk.so"}, {"sha256", sha1}}}};
  r.verdicts = {
      verdict("differential.ulp", "ulp", 1.0, 2, "softmax", "float32"),
      verdict("metamorphic.sum_to_one", "rounding_analysis", 0.5, 2, "softmax", "float32")};
  const Written w = report_of(b, {r}, "--compare " + q(before));
  ASSERT_EQ(w.rc, 0) << w.out;
  EXPECT_NE(w.out.find("NOTE: kernel k: seed 1 -> 2. The runs drew different cases"),
            std::string::npos)
      << w.out;
  EXPECT_NE(w.out.find("0 measurement(s) grew by more than 10%\n"), std::string::npos) << w.out;
  EXPECT_NE(w.out.find("1 measurement(s) differ by more than 10% between runs that drew "
                       "different cases"),
            std::string::npos)
      << w.out;
  const json& cmp = w.doc["comparison"];
  EXPECT_EQ(cmp["error_growth"].size(), 0u) << cmp.dump(2);
  ASSERT_EQ(cmp["different_cases"].size(), 1u) << cmp.dump(2);
  EXPECT_FALSE(cmp["different_cases"][0].contains("factor"));
  ASSERT_EQ(cmp["runs_differ"].size(), 1u);
  EXPECT_EQ(cmp["runs_differ"][0]["seed_before"], "1");
  EXPECT_EQ(cmp["runs_differ"][0]["seed_after"], "2");
  EXPECT_EQ(cmp["runs_differ"][0]["different_cases"], true);
  EXPECT_EQ(cmp["runs_differ"][0]["library_changed"], false);
  const auto sec = w.html.find("<section id=\"comparison\">");
  ASSERT_NE(sec, std::string::npos);
  const std::string section = w.html.substr(sec, w.html.find("</section>", sec) - sec);
  EXPECT_NE(section.find("id=\"runs-differ\""), std::string::npos);
  EXPECT_NE(section.find("seed 1 -&gt; 2"), std::string::npos) << section;
  EXPECT_NE(section.find("Error growth (measured grew by more than 10%, same cases) (0)"),
            std::string::npos);
  EXPECT_EQ(section.find("2.22"), std::string::npos) << "noise called a growth factor";
  const Ran v = json_valid("report.schema.json", b + "/r.json");
  EXPECT_EQ(v.rc, 0) << v.output;

  // Same seed, another library: said, and its growth is growth.
  r.provenance["seed"] = "1";
  r.provenance["kernel_library"]["sha256"] = sha2;
  const Written lib = report_of(c, {r}, "--compare " + q(before));
  ASSERT_EQ(lib.rc, 0) << lib.out;
  EXPECT_NE(lib.out.find("NOTE: kernel k: kernel library SHA-256 " + sha1 + " -> " + sha2),
            std::string::npos)
      << lib.out;
  EXPECT_NE(lib.out.find("1 measurement(s) grew by more than 10%\n  k differential.ulp"),
            std::string::npos)
      << lib.out;
  EXPECT_EQ(lib.doc["comparison"]["runs_differ"][0]["library_changed"], true);
  EXPECT_EQ(lib.doc["comparison"]["runs_differ"][0]["different_cases"], false);
}
