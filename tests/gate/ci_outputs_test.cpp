// What a CI system reads, end to end through the command line (issue 13):
//  - no green run that checked nothing: a run whose requested checks could not
//    run exits 3 (incomplete) with its own verdict in the terminal, JUnit and
//    JSON; `sweep` and `fuzz` likewise;
//  - JUnit XML of passing AND failing runs validates against docs/schema/junit.xsd
//    (xmllint), with test names that do not change between the two;
//  - JSON outputs validate against docs/schema/*.schema.json (python3-jsonschema),
//    seeds are strings, non-finite numbers are "NaN"/"Infinity"/"-Infinity".
#include <gtest/gtest.h>

#include <set>

#include "gate_test_util.hpp"

using namespace gate_test;
using json = nlohmann::json;

namespace {

const std::string kCli = SA_GATE_CLI;
const std::string kGood = SA_GATE_EXAMPLE_KERNEL;
const std::string kBad = SA_GATE_BAD_KERNELS;
const std::string kVariants = SA_GATE_VARIANT_EXAMPLE;
const std::string kSchema = std::string(SA_GATE_SOURCE_DIR) + "/docs/schema/";

struct CliRun {
  Ran ran;
  json results;
  std::string junit, dir;
};

CliRun check(const std::string& args, const std::string& spec = "") {
  CliRun c;
  c.dir = temp_dir();
  std::string extra;
  if (!spec.empty()) {
    std::ofstream(c.dir + "/gate.toml") << spec;
    extra = " --spec " + q(c.dir + "/gate.toml");
  }
  c.ran = run(kCli + " check " + args + extra + " --json " + q(c.dir + "/r.json") + " --junit " +
              q(c.dir + "/r.xml"));
  const std::string j = slurp(c.dir + "/r.json");
  if (!j.empty()) c.results = json::parse(j);
  c.junit = slurp(c.dir + "/r.xml");
  return c;
}

const json* verdict(const CliRun& c, const std::string& property) {
  for (const auto& v : c.results["runs"][0]["verdicts"])
    if (v["property"] == property) return &v;
  return nullptr;
}

Ran xmllint(const std::string& xml_path) {
  return run("xmllint --noout --schema " + q(kSchema + "junit.xsd") + " " + q(xml_path));
}
Ran json_valid(const std::string& schema, const std::string& path) {
  return run("python3 " + q(kSchema + "validate.py") + " " + q(kSchema + schema) + " " + q(path));
}

std::set<std::string> testcase_names(const std::string& xml) {
  std::set<std::string> names;
  for (std::size_t at = 0; (at = xml.find("<testcase ", at)) != std::string::npos; ++at) {
    const std::size_t n = xml.find(" name=\"", at) + 7;
    names.insert(xml.substr(n, xml.find('"', n) - n));
  }
  return names;
}

}  // namespace

// --- No green run that checked nothing ---

TEST(Incomplete, SpecAskingForWhatTheKernelLacksIsNotAPass) {
  // The example kernel has neither attention nor bfloat16: before, PASS and exit 0.
  const CliRun c = check("--plugin " + q(kGood) + " --seed 3 --cases 5",
                         "ops = [\"attention\"]\ndtypes = [\"bfloat16\"]\n");
  EXPECT_EQ(c.ran.rc, 3) << c.ran.output;
  EXPECT_NE(c.ran.output.find("INCOMPLETE"), std::string::npos) << c.ran.output;
  EXPECT_EQ(c.ran.output.find("PASS"), std::string::npos) << c.ran.output;
  ASSERT_FALSE(c.results.is_null()) << c.ran.output;
  EXPECT_EQ(c.results["runs"][0]["summary"]["status"], "incomplete");
  const json* cov = verdict(c, "gate.coverage");
  ASSERT_NE(cov, nullptr);
  EXPECT_EQ((*cov)["outcome"], "incomplete");
  EXPECT_NE((*cov)["note"].get<std::string>().find("op attention"), std::string::npos);
  EXPECT_NE(c.junit.find("type=\"incomplete\""), std::string::npos) << c.junit;
  const Ran x = xmllint(c.dir + "/r.xml");
  EXPECT_EQ(x.rc, 0) << x.output;
}

TEST(Incomplete, RequiredPropertySkippedOnAnOpIsIncomplete) {
  // special.values is required; the kernel lacks entropy, which the spec asks for.
  const CliRun c = check("--plugin " + q(kGood) + " --seed 3 --cases 5",
                         "ops = [\"softmax\", \"entropy\"]\ndtypes = [\"float32\"]\n"
                         "properties = [\"special.values\"]\nrequired = [\"special.values\"]\n");
  EXPECT_EQ(c.ran.rc, 3) << c.ran.output;
  const json* cov = verdict(c, "gate.coverage");
  ASSERT_NE(cov, nullptr) << c.ran.output;
  EXPECT_NE((*cov)["note"].get<std::string>().find("required special.values skipped on entropy"),
            std::string::npos)
      << cov->dump(2);
}

TEST(Incomplete, RequiredPropertiesThatRanPass) {
  const CliRun c = check("--plugin " + q(kGood) + " --seed 3 --cases 5",
                         "ops = [\"softmax\"]\ndtypes = [\"float32\"]\n"
                         "properties = [\"special.values\", \"differential.ulp\"]\n"
                         "required = [\"special.values\", \"differential.ulp\"]\n");
  EXPECT_EQ(c.ran.rc, 0) << c.ran.output;
  const json* cov = verdict(c, "gate.coverage");
  ASSERT_NE(cov, nullptr);
  EXPECT_EQ((*cov)["outcome"], "pass");
}

TEST(Incomplete, SpecRequiringAnUnknownPropertyIsAUsageError) {
  const CliRun c = check("--plugin " + q(kGood), "required = [\"no.such\"]\n");
  EXPECT_EQ(c.ran.rc, 2) << c.ran.output;
  EXPECT_NE(c.ran.output.find("'required'"), std::string::npos) << c.ran.output;
}

TEST(Incomplete, SweepOfATypeTheInterfaceLacksIsAUsageError) {
  const std::string dir = temp_dir();
  const Ran r = run(kCli + " sweep --builtin naive --out " + q(dir) +
                    " --min-log2-n 4 --max-log2-n 5 --dtype float64");
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_NE(r.output.find("float64"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("float16"), std::string::npos) << r.output;  // named as carried
}

// float16 (ABI version 2) is a sweep dtype: the naive kernel declares it.
TEST(Incomplete, SweepOfFloat16RunsOnTheNaiveKernel) {
  const std::string dir = temp_dir();
  const Ran r = run(kCli + " sweep --builtin naive --out " + q(dir) +
                    " --min-log2-n 4 --max-log2-n 5 --distribution uniform --dtype float16");
  EXPECT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("float16"), std::string::npos) << r.output;
}

TEST(Incomplete, SweepOfADtypeTheKernelLacksIsIncomplete) {
  const std::string dir = temp_dir();
  const Ran r = run(kCli + " sweep --plugin " + q(kGood) + " --out " + q(dir) +
                    " --min-log2-n 4 --max-log2-n 5 --distribution uniform --dtype bfloat16");
  EXPECT_EQ(r.rc, 3) << r.output;
  EXPECT_NE(r.output.find("INCOMPLETE"), std::string::npos) << r.output;
}

TEST(Incomplete, SweepOfAKernelNamedWithACommaMeasuresItsRows) {
  const std::string dir = temp_dir();
  const Ran r = run(kCli + " sweep --plugin " + q(kBad) + " --kernel-index 6 --out " + q(dir) +
                    " --min-log2-n 4 --max-log2-n 6 --distribution uniform --dtype float32");
  ASSERT_EQ(r.rc, 0) << r.output;
  // n = 16, 31, 32, 49, 64 (2^5 - 1 and 2^5 + 2^4 + 1 beside the powers of two).
  EXPECT_NE(r.output.find("5 rows"), std::string::npos) << r.output;
  // Resuming reads the quoted keys back: nothing is measured twice.
  const Ran again = run(kCli + " sweep --plugin " + q(kBad) + " --kernel-index 6 --out " + q(dir) +
                        " --min-log2-n 4 --max-log2-n 6 --distribution uniform --dtype float32");
  EXPECT_NE(again.output.find("5 rows"), std::string::npos) << again.output;
  const json s = json::parse(slurp(dir + "/sweep.json"));
  EXPECT_EQ(s["kernel"], "correct, \"quoted\"");
  const Ran v1 = json_valid("sweep.schema.json", dir + "/sweep.json");
  EXPECT_EQ(v1.rc, 0) << v1.output;
  const Ran v2 = json_valid("sweep-rows.schema.json", dir + "/rows.json");
  EXPECT_EQ(v2.rc, 0) << v2.output;
}

TEST(Incomplete, FuzzFailsWhenAPluginVariantFailsAPropertyItClaims) {
  // plugin_naive_softmax (not marked wrong_formulation) gives NaN for masked rows.
  const std::string dir = temp_dir();
  const Ran bad = run(kCli + " fuzz --plugin " + q(kVariants) +
                      " --variant plugin_naive_softmax --cases 20 --max-log2-n 10 --json " +
                      q(dir + "/v.json"));
  EXPECT_EQ(bad.rc, 1) << bad.output;
  EXPECT_NE(bad.output.find("FAIL plugin_naive_softmax: special."), std::string::npos)
      << bad.output;
  const Ran vj = json_valid("variants.schema.json", dir + "/v.json");
  EXPECT_EQ(vj.rc, 0) << vj.output;
  const Ran good = run("env -u RC_PARAMS " + kCli + " fuzz --plugin " + q(kVariants) +
                       " --variant plugin_softmax --cases 20 --max-log2-n 10 --seed 77");
  EXPECT_EQ(good.rc, 0) << good.output;
  // RapidCheck's own configuration line names the seed the command was given
  // (before: a seed RapidCheck drew itself, which reproduced nothing).
  const auto at = good.output.find("Using configuration:");
  if (at != std::string::npos)
    EXPECT_NE(good.output.find("seed=77", at), std::string::npos) << good.output;
}

// --- CI outputs that CI systems accept ---

TEST(JUnit, PassingAndFailingRunsValidateWithTheSameTestNames) {
  const CliRun pass = check("--plugin " + q(kBad) + " --kernel-index 6 --seed 11 --cases 10");
  ASSERT_EQ(pass.ran.rc, 0) << pass.ran.output;
  const CliRun fail = check("--plugin " + q(kBad) + " --kernel-index 0 --seed 11 --cases 10");
  ASSERT_EQ(fail.ran.rc, 1) << fail.ran.output;
  // The canary kernel overruns its output in every call: many gate.in_bounds findings.
  const CliRun canary = check("--plugin " + q(kBad) + " --kernel-index 4 --seed 11 --cases 10");
  ASSERT_EQ(canary.ran.rc, 1) << canary.ran.output;
  // A crash (SIGSEGV) and a hang in softmax at n >= 64: before, every property
  // whose softmax cases crashed or hung lost its softmax test names.
  const CliRun crash = check("--plugin " + q(kBad) + " --kernel-index 1 --seed 11 --cases 10");
  ASSERT_EQ(crash.ran.rc, 1) << crash.ran.output;
  const CliRun hang =
      check("--plugin " + q(kBad) + " --kernel-index 2 --seed 11 --cases 10 --timeout 2");
  ASSERT_EQ(hang.ran.rc, 1) << hang.ran.output;
  for (const CliRun* c : {&pass, &fail, &canary, &crash, &hang}) {
    const Ran x = xmllint(c->dir + "/r.xml");
    EXPECT_EQ(x.rc, 0) << x.output << "\n" << c->junit.substr(0, 3000);
    EXPECT_EQ(c->junit.find(" #2"), std::string::npos);  // before: gate.in_bounds #2 ... #8
    // The suite's <properties> come before its testcases; none inside a testcase.
    EXPECT_EQ(c->junit.find("<properties>", c->junit.find("<testcase")), std::string::npos);
  }
  // Its findings are one test, named as in a passing run.
  EXPECT_NE(canary.junit.find("name=\"gate.in_bounds\""), std::string::npos);
  EXPECT_EQ(canary.junit.find("name=\"gate.in_bounds ["), std::string::npos);
  EXPECT_EQ(testcase_names(pass.junit), testcase_names(fail.junit));
  EXPECT_EQ(testcase_names(pass.junit), testcase_names(crash.junit));
  EXPECT_EQ(testcase_names(pass.junit), testcase_names(hang.junit));
  EXPECT_NE(fail.junit.find("<failure"), std::string::npos);
  // The crashed property's softmax test is not a pass: the gate answered
  // the call that crashed (since issue 29 the suite outlives the kernel's
  // process) and the calls it no longer made with an error naming the crash.
  for (const auto& v : crash.results["runs"][0]["verdicts"])
    if (v["property"] == "differential.ulp" && v["op"] == "softmax" && v["dtype"] == "float32") {
      EXPECT_EQ(v["outcome"], "error") << v.dump();
      const std::string note = v["note"].get<std::string>();
      EXPECT_TRUE(note.find("crashed or hung earlier") != std::string::npos ||
                  note.find("killed by signal 11") != std::string::npos)
          << note;
      EXPECT_NE(note.find("gate.no_crash"), std::string::npos) << note;
    }
}

TEST(Json, ResultsValidateAndSeedsAreStrings) {
  // 2^53 + 1: a JSON number would read back as 2^53 in jq or JavaScript.
  const CliRun pass = check("--plugin " + q(kGood) + " --seed 9007199254740993 --cases 5");
  ASSERT_EQ(pass.ran.rc, 0) << pass.ran.output;
  EXPECT_EQ(pass.results["runs"][0]["config"]["seed"], "9007199254740993");
  const Ran v = json_valid("results.schema.json", pass.dir + "/r.json");
  EXPECT_EQ(v.rc, 0) << v.output;
  // Where a check's minutes go (issue 32): the suite's verdicts carry their
  // wall seconds, a number >= 0 (the schema says so too), and of those the
  // seconds inside the kernel's calls, between 0 and the verdict's seconds;
  // the kernel ran, so some verdict measured time in it.
  int timed = 0;
  double in_kernel = 0;
  for (const auto& v : pass.results["runs"][0]["verdicts"])
    if (v.contains("seconds")) {
      ++timed;
      EXPECT_TRUE(v["seconds"].is_number() && v["seconds"].get<double>() >= 0) << v.dump();
      ASSERT_TRUE(v.contains("kernel_seconds")) << v.dump();
      EXPECT_GE(v["kernel_seconds"].get<double>(), 0) << v.dump();
      EXPECT_LE(v["kernel_seconds"].get<double>(), v["seconds"].get<double>() * (1 + 1e-9) + 1e-9)
          << v.dump();
      in_kernel += v["kernel_seconds"].get<double>();
    }
  EXPECT_GT(timed, 0);
  EXPECT_GT(in_kernel, 0);
  const CliRun fail = check("--plugin " + q(kBad) + " --kernel-index 1 --seed 5 --cases 10");
  ASSERT_EQ(fail.ran.rc, 1) << fail.ran.output;
  const Ran vf = json_valid("results.schema.json", fail.dir + "/r.json");
  EXPECT_EQ(vf.rc, 0) << vf.output;
}

TEST(Json, DrawnSeedIsPrintedOnceAndRapidCheckAgrees) {
  const CliRun c = check("--plugin " + q(kGood) + " --cases 5");
  ASSERT_EQ(c.ran.rc, 0) << c.ran.output;
  const std::string seed = c.results["runs"][0]["config"]["seed"];
  ASSERT_FALSE(seed.empty());
  // RapidCheck prints "Using configuration: seed=N" when it draws its own seed;
  // the gate's children must not, or the line must name the gate's seed.
  const auto at = c.ran.output.find("seed=");
  if (at != std::string::npos)
    EXPECT_EQ(c.ran.output.substr(at + 5, seed.size()), seed) << c.ran.output;
}

TEST(Summary, VerdictsWithoutNumbersDoNotReadNaNGreaterThanNaN) {
  const CliRun c = check("--plugin " + q(kBad) + " --kernel-index 1 --seed 7 --cases 10");
  ASSERT_EQ(c.ran.rc, 1) << c.ran.output;
  EXPECT_EQ(c.ran.output.find("nan > bound nan"), std::string::npos) << c.ran.output;
  EXPECT_EQ(c.ran.output.find("NaN > bound NaN"), std::string::npos) << c.ran.output;
}

// --- Issue 35: standard output, non-power-of-two sweeps, CI output a reviewer reads ---

namespace {

// Runs `cmd` in `dir`; stdout and stderr apart.
struct Split {
  int rc = -1;
  std::string out, err;
};
Split run_split(const std::string& dir, const std::string& cmd) {
  const Ran r = run("(cd " + q(dir) + " && " + cmd + " 2>" + q(dir + "/stderr.txt") + ")");
  return {r.rc, r.output, slurp(dir + "/stderr.txt")};
}
int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

}  // namespace

TEST(StdoutOutputs, DashMeansStandardOutputInEverySubcommand) {
  const std::string dir = temp_dir();
  const std::string correct = " --plugin " + q(kBad) + " --kernel-index 6 --seed 11 --cases 10";
  // check --json -: the JSON alone on stdout (valid), the summary on stderr, no file "-".
  const Split j = run_split(dir, kCli + " check" + correct + " --json -");
  ASSERT_EQ(j.rc, 0) << j.out << j.err;
  json parsed;
  ASSERT_NO_THROW(parsed = json::parse(j.out)) << j.out.substr(0, 500);
  EXPECT_EQ(parsed["format"], "softmax-audit-results");
  EXPECT_NE(j.err.find("PASS"), std::string::npos) << j.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/-"));
  std::ofstream(dir + "/r.json") << j.out;
  // check --junit -: the XML alone, valid.
  const Split x = run_split(dir, kCli + " check" + correct + " --junit -");
  ASSERT_EQ(x.rc, 0) << x.err;
  EXPECT_EQ(x.out.rfind("<?xml", 0), 0u) << x.out.substr(0, 300);
  std::ofstream(dir + "/r.xml") << x.out;
  const Ran lint = xmllint(dir + "/r.xml");
  EXPECT_EQ(lint.rc, 0) << lint.output;
  // Two outputs on stdout: refused before any work, one line naming both.
  const Split two = run_split(dir, kCli + " check" + correct + " --junit - --json -");
  EXPECT_EQ(two.rc, 2);
  EXPECT_NE(two.err.find("--junit - and --json -"), std::string::npos) << two.err;
  // fuzz --json -: the matrix JSON alone, the table on stderr.
  const Split f = run_split(dir, kCli + " fuzz --plugin " + q(kVariants) +
                                     " --variant plugin_softmax --cases 5 --max-log2-n 8 --json -");
  ASSERT_EQ(f.rc, 0) << f.err;
  json fj;
  EXPECT_NO_THROW(fj = json::parse(f.out)) << f.out.substr(0, 500);
  EXPECT_FALSE(fj.is_null());
  // report --json -: the report's JSON twin alone on stdout.
  const Split r =
      run_split(dir, kCli + " report --no-plots --results r.json --html rep.html --json -");
  ASSERT_EQ(r.rc, 0) << r.err;
  json rj;
  EXPECT_NO_THROW(rj = json::parse(r.out)) << r.out.substr(0, 500);
  EXPECT_TRUE(rj.is_object());
  EXPECT_TRUE(std::filesystem::exists(dir + "/rep.html"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/-"));
}

TEST(SweepSizes, DefaultSweepCatchesAForgottenRemainderLoop) {
  // Kernel 7 leaves out the last n % 8 items: right at every power of two.
  const std::string dir = temp_dir();
  const std::string args = " sweep --plugin " + q(kBad) + " --kernel-index 7 --min-log2-n 4 " +
                           "--max-log2-n 6 --distribution uniform --dtype float32";
  const Ran pow2 = run(kCli + args + " --powers-of-two-only --out " + q(dir + "/p"));
  EXPECT_EQ(pow2.rc, 0) << pow2.output;
  const Ran def = run(kCli + args + " --out " + q(dir + "/d"));
  EXPECT_EQ(def.rc, 1) << def.output;
  EXPECT_NE(def.output.find("5 rows"), std::string::npos) << def.output;
  EXPECT_NE(def.output.find("(2 over their bound"), std::string::npos) << def.output;
}

TEST(SweepSizes, ATableOfPowersOfTwoResumesWithTheOtherSizes) {
  // A table written with powers of two only (as every earlier sweep wrote it)
  // resumes: its rows are kept, the other sizes are added, nothing twice.
  const std::string dir = temp_dir();
  const std::string args = " sweep --plugin " + q(kBad) + " --kernel-index 6 --min-log2-n 4 " +
                           "--max-log2-n 6 --distribution uniform --dtype float32 --out " + q(dir);
  const Ran old = run(kCli + args + " --powers-of-two-only");
  ASSERT_EQ(old.rc, 0) << old.output;
  const std::string before = slurp(dir + "/sweep.csv");
  const Ran resumed = run(kCli + args);
  ASSERT_EQ(resumed.rc, 0) << resumed.output;
  const std::string after = slurp(dir + "/sweep.csv");
  EXPECT_EQ(after.rfind(before, 0), 0u);                         // appended to, never rewritten
  EXPECT_EQ(count_of(after, "\n"), count_of(before, "\n") + 2);  // n = 31 and 49
  EXPECT_NE(after.find("|n31|"), std::string::npos);
  EXPECT_NE(after.find("|n49|"), std::string::npos);
  const Ran again = run(kCli + args);
  EXPECT_EQ(slurp(dir + "/sweep.csv"), after) << again.output;
  const Ran v = json_valid("sweep-rows.schema.json", dir + "/rows.json");
  EXPECT_EQ(v.rc, 0) << v.output;
}

TEST(JUnit, OneFailurePerRootCauseForTheRemainderKernel) {
  const CliRun c = check("--plugin " + q(kBad) + " --kernel-index 7 --seed 11 --cases 10");
  ASSERT_EQ(c.ran.rc, 1) << c.ran.output;
  const Ran x = xmllint(c.dir + "/r.xml");
  EXPECT_EQ(x.rc, 0) << x.output;
  int failing = 0;
  for (const auto& v : c.results["runs"][0]["verdicts"])
    failing += v["outcome"] == "fail" || v["outcome"] == "error";
  const int failures = count_of(c.junit, "<failure ") + count_of(c.junit, "<error ");
  // Several properties broken by one case are one JUnit failure (the JSON keeps all).
  EXPECT_GT(failing, failures) << c.junit.substr(0, 4000);
  EXPECT_GE(failures, 1);
  EXPECT_EQ(count_of(c.junit, "<skipped message=\"same root cause as "), failing - failures)
      << c.junit.substr(0, 4000);
  EXPECT_NE(c.junit.find("the same root cause also breaks "), std::string::npos);
  // The message is the one-line verdict: test name, measured against bound.
  const auto m = c.junit.find("<failure message=\"");
  ASSERT_NE(m, std::string::npos);
  const std::string message = c.junit.substr(m + 18, c.junit.find('"', m + 18) - m - 18);
  EXPECT_NE(message.find(" [softmax/float32]: measured "), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  // Every testcase has a time.
  EXPECT_EQ(count_of(c.junit, "<testcase "), count_of(c.junit, "\" time=\"0\">"));
}

TEST(JUnit, NotApplicableChecksAreLeftOutAndStayInTheJson) {
  const CliRun c = check("--plugin " + q(kBad) + " --kernel-index 6 --seed 11 --cases 10");
  ASSERT_EQ(c.ran.rc, 0) << c.ran.output;
  // Not applicable: an op or dtype this kernel lacks (float32 softmax and
  // logsumexp only), or "not applicable" by the property's definition.
  const std::set<std::string> names = testcase_names(c.junit);
  int not_applicable = 0, other_skips = 0;
  for (const auto& v : c.results["runs"][0]["verdicts"]) {
    if (v["outcome"] != "skip") continue;
    const std::string note = v.value("note", "");
    const bool na = note.rfind("not applicable", 0) == 0 ||
                    note.rfind("kernel does not implement ", 0) == 0 ||
                    note.rfind("kernel does not support ", 0) == 0;
    (na ? not_applicable : other_skips) += 1;
    const std::string name = v["property"].get<std::string>() + " [" + v["op"].get<std::string>() +
                             "/" + v["dtype"].get<std::string>() + "]";
    if (na) EXPECT_EQ(names.count(name), 0u) << name;
  }
  ASSERT_GT(not_applicable, 100);  // before: 161 of 186 testcases were <skipped>
  // Skips of another kind (measured and reported, not claimed) stay <skipped>.
  EXPECT_EQ(count_of(c.junit, "<skipped "), other_skips) << c.junit.substr(0, 3000);
  EXPECT_NE(c.junit.find("value=\"" + std::to_string(not_applicable) +
                         " not-applicable check(s) left out"),
            std::string::npos);
  const Ran x = xmllint(c.dir + "/r.xml");
  EXPECT_EQ(x.rc, 0) << x.output;
}

TEST(CiOutputs, GithubAnnotationsAndMarkdownSummaryOnePerRootCause) {
  const std::string dir = temp_dir();
  const Ran r = run("env GITHUB_ACTIONS=true " + kCli + " check --plugin " + q(kBad) +
                    " --kernel-index 7 --seed 11 --cases 10 --json " + q(dir + "/r.json") +
                    " --junit " + q(dir + "/r.xml") + " --summary-md " + q(dir + "/s.md"));
  ASSERT_EQ(r.rc, 1) << r.output;
  const std::string junit = slurp(dir + "/r.xml");
  const int causes = count_of(junit, "<failure ") + count_of(junit, "<error ");
  EXPECT_EQ(count_of(r.output, "::error title=softmax-audit remainder%3A "), causes) << r.output;
  const std::string md = slurp(dir + "/s.md");
  EXPECT_NE(md.find("| remainder | **fail** |"), std::string::npos) << md;
  EXPECT_NE(md.find(std::to_string(causes) + " root cause(s)"), std::string::npos) << md;
  // Off GitHub, only when asked.
  const Ran off = run("env -u GITHUB_ACTIONS " + kCli + " check --plugin " + q(kBad) +
                      " --kernel-index 7 --seed 11 --cases 10");
  EXPECT_EQ(off.output.find("::error"), std::string::npos);
  const Ran asked = run("env -u GITHUB_ACTIONS " + kCli + " check --plugin " + q(kBad) +
                        " --kernel-index 7 --seed 11 --cases 10 --github-annotations");
  EXPECT_EQ(count_of(asked.output, "::error title="), causes) << asked.output;
}
