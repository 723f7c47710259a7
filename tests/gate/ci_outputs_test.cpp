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
  EXPECT_NE(r.output.find("3 rows"), std::string::npos) << r.output;
  // Resuming reads the quoted keys back: nothing is measured twice.
  const Ran again = run(kCli + " sweep --plugin " + q(kBad) + " --kernel-index 6 --out " + q(dir) +
                        " --min-log2-n 4 --max-log2-n 6 --distribution uniform --dtype float32");
  EXPECT_NE(again.output.find("3 rows"), std::string::npos) << again.output;
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
  // the calls it no longer made with an error naming the crash.
  for (const auto& v : crash.results["runs"][0]["verdicts"])
    if (v["property"] == "differential.ulp" && v["op"] == "softmax" && v["dtype"] == "float32") {
      EXPECT_EQ(v["outcome"], "error") << v.dump();
      EXPECT_NE(v["note"].get<std::string>().find("crashed or hung earlier"), std::string::npos);
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
  // wall seconds, a number >= 0 (the schema says so too).
  int timed = 0;
  for (const auto& v : pass.results["runs"][0]["verdicts"])
    if (v.contains("seconds")) {
      ++timed;
      EXPECT_TRUE(v["seconds"].is_number() && v["seconds"].get<double>() >= 0) << v.dump();
    }
  EXPECT_GT(timed, 0);
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
