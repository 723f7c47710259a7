// What `check` writes and `report` reads: the results of gate runs.
//
// JSON (documented in docs/gate-spec.md, "Outputs"):
//   { "format": "softmax-audit-results", "version": 1,
//     "runs": [ { "kernel": {"name", "origin", "description"},
//                 "config": {...the effective spec...},
//                 "processes", "crashes", "hangs",
//                 "summary": {"pass", "fail", "skip", "error"},
//                 "verdicts": [ verdict, ... ] } ] }
// JUnit XML: one <testsuite> per run, one <testcase> per verdict that applied
// (property x op x dtype); failures carry the one-line verdict, then claim,
// measured, bound, rule and counterexample (write_junit).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "core/verdict.hpp"
#include "gate/spec.hpp"

namespace sa::gate {

struct RunRecord {
  std::string kernel, origin, description;
  nlohmann::json config = nlohmann::json::object();
  // gate/provenance.hpp: tool, build, host, kernel library and its SHA-256, seed, precision
  // (an empty object in results written before provenance existed).
  nlohmann::json provenance = nlohmann::json::object();
  int processes = 0, crashes = 0, hangs = 0;
  double seconds = 0;
  std::vector<Verdict> verdicts;
};

struct Tally {
  int pass = 0, fail = 0, skip = 0, error = 0, incomplete = 0;
  bool ok() const { return fail == 0 && error == 0; }
  // ok() and every requested check ran (no `incomplete` verdict, gate/coverage.hpp).
  bool complete() const { return ok() && incomplete == 0; }
};
// The run's one-word status: "pass", "fail" (a failure or error) or
// "incomplete" (no failure, but a requested check could not run).
const char* status_of(const Tally& t);
Tally tally(const std::vector<Verdict>& vs);

nlohmann::json config_to_json(const GateSpec& spec);
nlohmann::json results_to_json(const std::vector<RunRecord>& runs);
// Throws std::invalid_argument naming `origin` and the offending field.
std::vector<RunRecord> results_from_json(const nlohmann::json& j, const std::string& origin);
std::vector<RunRecord> load_results(const std::string& path);

// JUnit XML (docs/gate-spec.md, "JUnit"): one testcase per property x op x
// dtype that applied (not-applicable ones stay in the JSON and the report);
// each failure's message is its one-line verdict; failures with one root
// cause (root_causes) are one <failure>, the leader's, and the others are
// <skipped> testcases whose message names the leader.
void write_junit(std::ostream& os, const std::vector<RunRecord>& runs);
std::string xml_escape(const std::string& s);

// The one-line verdict: "property [op/dtype]: measured X > bound Y (rule)".
std::string verdict_line(const Verdict& v);
// The name a CI system tracks a verdict by: "property [op/dtype]", or the
// gate's own check (gate.*) alone.
std::string case_name(const Verdict& v);

// Failures (fail or error) of a run grouped by root cause: same op, same
// dtype and the same first failing case (the counterexample's shrunk input,
// without the seed, case number, shrink steps and the "at" position). Each
// group lists its verdicts in run order; the first is the leader. A failure
// with no counterexample is a group of its own.
std::vector<std::vector<const Verdict*>> root_causes(const std::vector<Verdict>& verdicts);

// GitHub Actions workflow commands: one "::error title=...::..." line per
// root cause (docs/gate-spec.md, "CI").
void write_github_annotations(std::ostream& os, const std::vector<RunRecord>& runs);
// A short Markdown summary for a CI job summary page: status and counts per
// kernel, then one line per root cause with the properties it broke.
std::string summary_markdown(const std::vector<RunRecord>& runs);

// The terminal summary: one line per failing verdict group, totals last.
void write_summary(std::ostream& os, const RunRecord& run, bool color);

// Progress of a long run, when `enabled`: on a terminal (`tty`) a one-line bar
// redrawn in place with the percentage and an estimate of the time left; off a
// terminal (CI logs) a plain line every 10 s with the same figures.
class ProgressBar {
 public:
  ProgressBar(std::ostream& os, bool enabled, bool tty = true)
      : os_(os), enabled_(enabled), tty_(tty) {}
  ~ProgressBar() { finish(); }
  void update(int done, int total, const std::string& label);
  void finish();

 private:
  std::ostream& os_;
  bool enabled_;
  bool tty_;
  long long start_ms_ = -1;
  bool drawn_ = false;
  int last_permille_ = -1;
  std::string last_label_;
  long long last_draw_ms_ = 0;
};

}  // namespace sa::gate
