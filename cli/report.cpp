// `softmax-audit report`: one self-contained HTML audit report from check
// results, an optional sweep and an optional variants matrix, and its JSON
// twin next to it (gate/report.hpp); --compare diffs against an earlier twin.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli/commands.hpp"
#include "core/output_file.hpp"
#include "core/output_lock.hpp"
#include "gate/report.hpp"

namespace sa::cli {

namespace {

// The repository whose docs/ the report links to: --docs, else the source
// tree this program was built from, when it is still there.
void find_docs(gate::ReportInputs& in, const std::string& out, std::string docs) {
  namespace fs = std::filesystem;
#ifdef SA_SOURCE_DIR
  if (docs.empty()) docs = SA_SOURCE_DIR;
#endif
  std::error_code ec;
  if (docs.empty() || !fs::exists(fs::path(docs) / "docs" / "theory.md", ec)) return;
  const fs::path root = fs::weakly_canonical(fs::absolute(docs), ec);
  const fs::path from = fs::weakly_canonical(fs::absolute(out).parent_path(), ec);
  fs::path rel = root.lexically_relative(from);
  in.docs_root = root.string();
  in.docs_href = (rel.empty() ? root : rel).generic_string() + "/";
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto in = std::make_shared<gate::ReportInputs>();
  auto out = std::make_shared<std::string>();
  auto json_out = std::make_shared<std::string>();
  auto docs = std::make_shared<std::string>();
  auto no_plots = std::make_shared<bool>(false);
  CLI::App* c = app.add_subcommand(
      "report",
      "Write one self-contained HTML audit report (verdicts, theory curves, measurements) and "
      "its JSON twin");
  c->add_option("--results", in->results, "Results of `check --json` (repeatable)")->required();
  auto sweeps = std::make_shared<std::vector<std::string>>();
  c->add_option("--sweep", *sweeps,
                "Sweep measurements (`sweep`'s sweep.json, docs/report-inputs.md; repeatable)");
  c->add_option("--variants", in->variants, "Variants matrix (`fuzz --json`)");
  c->add_option("--not-audited", in->not_audited,
                "NAME:REASON of something the audit could not check (repeatable), e.g. "
                "'cuda:no CUDA device'");
  c->add_option("--compare", in->compare,
                "An earlier report's JSON twin: show new failures, fixed failures and error "
                "growth since then");
  // --out is a directory in every subcommand (sweep, audit, report); the
  // single files are --html and --json, as --json is a file everywhere.
  auto out_dir = std::make_shared<std::string>();
  auto* html_opt = c->add_option("--html", *out, "The HTML file to write ('-': standard output)");
  auto* dir_opt = c->add_option("--out", *out_dir,
                                "Directory to write report.html and report.json in (instead of "
                                "--html)");
  html_opt->excludes(dir_opt);
  c->add_option("--json", *json_out,
                "The JSON twin to write (default: the HTML file's name with .json; '-': standard "
                "output)");
  c->add_option("--docs", *docs,
                "Repository root whose docs/ the rule and theorem links point at (default: the "
                "source tree this program was built from, if present)");
  c->add_option("--title", in->title, "Title of the report");
  c->add_option("--gnuplot", in->gnuplot, "gnuplot program to draw the plots with");
  c->add_flag("--no-plots", *no_plots, "Do not run gnuplot");
  c->callback([in, out, out_dir, json_out, docs, no_plots, sweeps] {
    if (*no_plots) in->gnuplot.clear();
    if (out->empty() && out_dir->empty()) {
      std::cerr << "softmax-audit report: error: no output: expected --out DIR (writes "
                   "DIR/report.html and DIR/report.json) or --html FILE\n";
      exit_code() = exit_usage;
      return;
    }
    if (!out_dir->empty()) {
      if (std::filesystem::path(*out_dir).extension() == ".html") {
        std::cerr << "softmax-audit report: error: --out " << *out_dir
                  << ": --out is a directory in every subcommand; for one HTML file use --html "
                  << *out_dir << "\n";
        exit_code() = exit_usage;
        return;
      }
      std::error_code ec;
      std::filesystem::create_directories(*out_dir, ec);
      if (ec) {
        std::cerr << "softmax-audit report: error: --out " << *out_dir
                  << ": cannot create this directory (" << ec.message() << ")\n";
        exit_code() = exit_usage;
        return;
      }
      *out = (std::filesystem::path(*out_dir) / "report.html").string();  // twin: report.json
    }
    if (!sweeps->empty()) {
      in->sweep = sweeps->front();
      in->more_sweeps.assign(sweeps->begin() + 1, sweeps->end());
    }
    namespace fs = std::filesystem;
    std::vector<std::string> inputs = in->results;
    for (const std::string* s : {&in->sweep, &in->variants, &in->compare})
      if (!s->empty()) inputs.push_back(*s);
    inputs.insert(inputs.end(), in->more_sweeps.begin(), in->more_sweeps.end());
    auto is_input = [&](const std::string& path) {
      std::error_code ec;
      const fs::path a = fs::weakly_canonical(path, ec);
      if (ec) return false;
      for (const auto& i : inputs) {
        const fs::path b = fs::weakly_canonical(i, ec);
        if (!ec && a == b) return true;
      }
      return false;
    };
    // The twin's default: the HTML file's name with .json; .report.json when that is an input
    // (`check --json r.json` then `report --html r.html`).
    if (json_out->empty() && is_stdout_path(*out)) {
      std::cerr << "softmax-audit report: error: --html -: the JSON twin has no file name to "
                   "follow; expected --json FILE (or --json -, with --html FILE)\n";
      exit_code() = exit_usage;
      return;
    }
    if (json_out->empty()) {
      *json_out = fs::path(*out).replace_extension(".json").string();
      if (is_input(*json_out))
        *json_out = fs::path(*out).replace_extension(".report.json").string();
    }
    try {
      // Neither output may replace an input or the other output.
      std::vector<NamedPath> named_inputs;
      for (const auto& r : in->results) named_inputs.push_back({"--results", r});
      for (const auto& s : *sweeps) named_inputs.push_back({"--sweep", s});
      named_inputs.push_back({"--variants", in->variants});
      named_inputs.push_back({"--compare", in->compare});
      refuse_overlapping_paths(
          named_inputs, {{out_dir->empty() ? "--html" : "--out", *out}, {"--json", *json_out}});
      // Only checked here: an earlier report stays as it is until every input
      // has been read and the new one is whole.
      check_output(*out, "--html");
      check_output(*json_out, "--json");
    } catch (const std::invalid_argument& e) {
      std::cerr << "softmax-audit report: error: " << e.what() << "\n";
      exit_code() = exit_usage;
      return;
    }
    std::optional<OutputDirLock> lock;
    if (!out_dir->empty()) {
      try {
        lock.emplace(*out_dir, "--out");
      } catch (const std::invalid_argument& e) {
        std::cerr << "softmax-audit report: error: " << e.what() << "\n";
        exit_code() = exit_usage;
        return;
      }
    }
    find_docs(*in, *out, *docs);
    std::ostringstream html;
    nlohmann::json doc;
    try {
      gate::write_report(*in, html, &doc);
    } catch (const std::exception& e) {
      std::cerr << "softmax-audit report: error: " << e.what() << "\n";
      exit_code() = exit_usage;
      return;
    }
    try {
      // Both files, or neither: the HTML and its twin are renamed into place
      // only once both are written whole.
      write_files_atomically({{*out, html.str()}, {*json_out, doc.dump(2) + "\n"}});
    } catch (const OutputError& e) {
      std::cerr << "softmax-audit report: error: " << e.what() << "\n";
      exit_code() = exit_usage;
      return;
    }
    if (!gate::gnuplot_available(in->gnuplot) && !*no_plots)
      std::cerr
          << "softmax-audit report: note: gnuplot not found; the report has tables but no plots\n";
    // An output on standard output ('-') keeps stdout for itself alone.
    std::ostream& says = is_stdout_path(*out) || is_stdout_path(*json_out) ? std::cerr : std::cout;
    if (!doc["comparison"].is_null()) says << gate::describe_comparison(doc["comparison"]);
    says << "report written to " << (is_stdout_path(*out) ? "standard output" : *out)
         << " (JSON: " << (is_stdout_path(*json_out) ? "standard output" : *json_out) << ")\n";
    exit_code() = exit_pass;
  });
}

}  // namespace sa::cli
