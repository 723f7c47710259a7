// `softmax-audit report`: one self-contained HTML audit report from check
// results, an optional sweep and an optional variants matrix (gate/report.hpp).
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "core/output_file.hpp"
#include "gate/report.hpp"

namespace sa::cli {

void add_report_command(CLI::App& app) {
  auto in = std::make_shared<gate::ReportInputs>();
  auto out = std::make_shared<std::string>();
  auto no_plots = std::make_shared<bool>(false);
  CLI::App* c = app.add_subcommand(
      "report",
      "Write one self-contained HTML audit report (verdicts, theory curves, measurements)");
  c->add_option("--results", in->results, "Results of `check --json` (repeatable)")->required();
  c->add_option("--sweep", in->sweep, "Sweep measurements (JSON, docs/report-inputs.md)");
  c->add_option("--variants", in->variants, "Variants matrix (JSON, docs/report-inputs.md)");
  c->add_option("--out", *out, "The HTML file to write")->required();
  c->add_option("--title", in->title, "Title of the report");
  c->add_option("--gnuplot", in->gnuplot, "gnuplot program to draw the plots with");
  c->add_flag("--no-plots", *no_plots, "Do not run gnuplot");
  c->callback([in, out, no_plots] {
    if (*no_plots) in->gnuplot.clear();
    try {
      prepare_output(*out, "--out");
    } catch (const std::invalid_argument& e) {
      std::cerr << "softmax-audit report: error: " << e.what() << "\n";
      exit_code() = exit_usage;
      return;
    }
    std::ostringstream html;
    try {
      gate::write_report(*in, html);
    } catch (const std::exception& e) {
      std::cerr << "softmax-audit report: error: " << e.what() << "\n";
      exit_code() = exit_usage;
      return;
    }
    try {
      write_file_atomically(*out, html.str());
    } catch (const OutputError& e) {
      std::cerr << "softmax-audit report: error: " << e.what() << "\n";
      exit_code() = exit_usage;
      return;
    }
    if (!gate::gnuplot_available(in->gnuplot) && !*no_plots)
      std::cerr
          << "softmax-audit report: note: gnuplot not found; the report has tables but no plots\n";
    std::cout << "report written to " << *out << "\n";
    exit_code() = exit_pass;
  });
}

}  // namespace sa::cli
