// The audit report: ONE self-contained HTML file (inline SVG plots, a few
// lines of inline script for its filters, nothing fetched from a network) for
// an auditor who will not read code, and its machine-readable twin: the same
// content as one JSON document (docs/schema/report.schema.json), which
// `report --compare OLD.json` diffs against an earlier audit.
//
// Inputs (docs/report-inputs.md): results files from `check --json`
// (required, one or more), optionally a sweep file (read loosely: unknown
// fields are ignored, missing sections are said to be missing) and the
// variants matrix of `fuzz --json`. The theory curves (T1 bounds and n*, T4 entropy against
// temperature, T5 beta(H), T7 error bounds) are computed here from theory/.
// Plots are drawn by gnuplot (svg terminal); without gnuplot the report says
// so in place of each plot and still contains every table.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace sa::gate {

struct ReportInputs {
  std::vector<std::string> results;      // check --json files
  std::string sweep;                     // optional
  std::vector<std::string> more_sweeps;  // optional further sweeps (e.g. over temperatures)
  std::string variants;                  // optional: fuzz --json
  // What the audit could not check, each "NAME:REASON" (e.g. a CUDA kernel
  // without a device); shown in the summary and the "Not audited" section.
  std::vector<std::string> not_audited;
  std::string compare;  // optional: an earlier report's JSON twin
  std::string title = "softmax-audit report";
  std::string gnuplot = "gnuplot";  // program to run ("" = do not plot)
  // The repository root whose docs/ the rule and theorem links point at, and
  // the href prefix that reaches it from where the HTML is written ("" = no
  // links; the docs are then named in plain text).
  std::string docs_root, docs_href;
};

// Throws std::invalid_argument naming the file and what was expected when an
// input cannot be read (and for a malformed --not-audited entry). Writes the
// HTML to `html` and, when `doc` is given, the JSON twin to it.
void write_report(const ReportInputs& in, std::ostream& html, nlohmann::json* doc = nullptr);

// What changed from `before` to `after` (two JSON twins): new failures, fixed
// failures, error growth (measured grew by more than 10% in the same unit),
// checks and kernels added or removed. Throws std::invalid_argument when
// either is not a report document.
nlohmann::json compare_reports(const nlohmann::json& before, const nlohmann::json& after);

// The comparison in a few lines for the terminal.
std::string describe_comparison(const nlohmann::json& cmp);

// Whether `program` runs (gnuplot --version succeeds).
bool gnuplot_available(const std::string& program);

}  // namespace sa::gate
