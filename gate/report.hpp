// The audit report: ONE self-contained HTML file (inline SVG plots, no
// scripts, no network) for an auditor who will not read code.
//
// Inputs (docs/report-inputs.md): results files from `check --json`
// (required, one or more), optionally a sweep file and a variants matrix,
// both read loosely: unknown fields are ignored, missing sections are said to
// be missing. The theory curves (T1 bounds and n*, T4 entropy against
// temperature, T5 beta(H), T7 error bounds) are computed here from theory/.
// Plots are drawn by gnuplot (svg terminal); without gnuplot the report says
// so in place of each plot and still contains every table.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace sa::gate {

struct ReportInputs {
  std::vector<std::string> results;  // check --json files
  std::string sweep;                 // optional
  std::string variants;              // optional
  std::string title = "softmax-audit report";
  std::string gnuplot = "gnuplot";  // program to run ("" = do not plot)
};

// Throws std::invalid_argument naming the file and what was expected when an
// input cannot be read.
void write_report(const ReportInputs& in, std::ostream& html);

// Whether `program` runs (gnuplot --version succeeds).
bool gnuplot_available(const std::string& program);

}  // namespace sa::gate
