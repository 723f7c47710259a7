#include "gate/report.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "core/dtype.hpp"
#include "gate/results.hpp"
#include "gate/verdict_json.hpp"
#include "theory/adaptive_temperature.hpp"
#include "theory/critical_size.hpp"
#include "theory/dispersion.hpp"
#include "theory/entropy_temperature.hpp"
#include "theory/rounding_bounds.hpp"

namespace sa::gate {

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// HTML text and attribute values use the JUnit writer's escaping (gate/results.hpp).
std::string esc(const std::string& s) { return xml_escape(s); }

std::string num(double x, int prec = 6) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "+inf" : "-inf";
  std::ostringstream os;
  os.precision(prec);
  os << x;
  return os.str();
}

// ------------------------------------------------------------------ plots --
struct Series {
  std::string name;
  std::vector<std::pair<double, double>> pts;
  std::string style = "lines";  // lines | points | linespoints
  bool dashed = false;
};
struct Plot {
  std::string title, xlabel, ylabel;
  bool logx = false, logy = false;
  std::vector<Series> series;
  std::string key = "top right";
  std::optional<std::pair<double, double>> yrange;
};

// A gnuplot string literal for any text. Single-quoted: gnuplot expands
// backquoted commands and @macros in double-quoted strings and in the command
// line, never inside single quotes, where the only special character is the
// quote itself (written twice). Control characters, which could end the
// command, become spaces. Every string from an input (kernel names, sweep
// labels, file names) reaches the plot script only through this.
std::string gp_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) {
    if (c == '\'') {
      o += "''";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      o += ' ';
    } else {
      o += c;
    }
  }
  return o + "'";
}

// Runs `program` with `args` directly (no shell), standard output and error
// to `output` ("" = /dev/null). Returns true when it exited with status 0.
bool run_program(const std::string& program, const std::vector<std::string>& args,
                 const std::string& output) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    const int fd = output.empty() ? open("/dev/null", O_WRONLY)
                                  : open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      dup2(fd, STDOUT_FILENO);
      dup2(fd, STDERR_FILENO);
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execvp(program.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

class Plotter {
 public:
  explicit Plotter(std::string program) : program_(std::move(program)) {
    ok_ = !program_.empty() && gnuplot_available(program_);
    char tmpl[] = "/tmp/sa-report-XXXXXX";
    if (ok_ && mkdtemp(tmpl))
      dir_ = tmpl;
    else
      ok_ = false;
  }
  ~Plotter() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  bool ok() const { return ok_; }

  // Inline <svg> text, or an explanation of why there is no plot.
  std::string svg(const Plot& p) {
    if (!ok_)
      return "<p class=\"noplot\">Plot not drawn: gnuplot was not found (install Debian's "
             "<code>gnuplot-nox</code> and run the report again). The data are in the tables.</p>";
    std::vector<const Series*> drawn;
    for (const auto& s : p.series) {
      bool any = false;
      for (auto [x, y] : s.pts)
        any = any ||
              (std::isfinite(x) && std::isfinite(y) && (!p.logx || x > 0) && (!p.logy || y > 0));
      if (any) drawn.push_back(&s);
    }
    if (drawn.empty()) return "<p class=\"noplot\">No data to plot.</p>";
    const std::string base = dir_ + "/plot" + std::to_string(count_++);
    std::ofstream g(base + ".gp");
    // Many series: the legend goes beside the plot so it never covers the data.
    const bool crowded = drawn.size() > 5;
    g << "set terminal svg size " << (crowded ? "1000,460" : "760,430")
      << " dynamic enhanced font 'Helvetica,12' background rgb 'white'\n"
      << "set output " << gp_quote(base + ".svg") << "\n"
      << "set title " << gp_quote(p.title) << "\nset xlabel " << gp_quote(p.xlabel)
      << "\nset ylabel " << gp_quote(p.ylabel) << "\nset grid\nset key "
      << (crowded ? std::string("outside right top") : p.key) << " font '," << (crowded ? 9 : 10)
      << "'\n";
    if (p.logx) g << "set logscale x\nset format x '10^{%L}'\n";
    if (p.logy) g << "set logscale y\nset format y '10^{%L}'\n";
    if (p.yrange) g << "set yrange [" << p.yrange->first << ":" << p.yrange->second << "]\n";
    g.precision(17);
    for (std::size_t i = 0; i < drawn.size(); ++i) {
      g << "$d" << i << " << EOD\n";
      for (auto [x, y] : drawn[i]->pts)
        if (std::isfinite(x) && std::isfinite(y) && (!p.logx || x > 0) && (!p.logy || y > 0))
          g << x << " " << y << "\n";
      g << "EOD\n";
    }
    g << "plot ";
    for (std::size_t i = 0; i < drawn.size(); ++i) {
      const Series& s = *drawn[i];
      g << (i ? ", " : "") << "$d" << i << " using 1:2 with " << s.style << " lw 2"
        << (s.dashed ? " dt 2" : "") << (s.style != "lines" ? " pt 7 ps 0.6" : "") << " title "
        << gp_quote(s.name) << " noenhanced";
    }
    g << "\n";
    g.close();
    if (!run_program(program_, {base + ".gp"}, base + ".err")) {
      std::ifstream e(base + ".err");
      std::stringstream ss;
      ss << e.rdbuf();
      return "<p class=\"noplot\">Plot not drawn: gnuplot failed: " + esc(ss.str().substr(0, 500)) +
             "</p>";
    }
    std::ifstream in(base + ".svg");
    std::stringstream ss;
    ss << in.rdbuf();
    std::string s = ss.str();
    const auto at = s.find("<svg");
    if (at == std::string::npos)
      return "<p class=\"noplot\">Plot not drawn: gnuplot wrote no SVG.</p>";
    return "<div class=\"plot\">" + s.substr(at) + "</div>";
  }

 private:
  std::string program_, dir_;
  bool ok_ = false;
  int count_ = 0;
};

std::vector<double> logspace(double a, double b, int k) {
  std::vector<double> v;
  for (int i = 0; i < k; ++i) v.push_back(a * std::pow(b / a, static_cast<double>(i) / (k - 1)));
  return v;
}

// ------------------------------------------------------------ sweep input --
struct SweepSeries {
  std::string kernel, dtype, metric, xname, label;
  double spread = NAN;
  std::vector<std::pair<double, double>> pts, bound;
};

json read_json(const std::string& path, const char* what) { return read_json_file(path, what); }

std::vector<std::pair<double, double>> read_points(const json& pts, const std::string& metric,
                                                   std::string* xname) {
  std::vector<std::pair<double, double>> out;
  if (!pts.is_array()) return out;
  static const char* xkeys[] = {"x", "n", "temperature", "theta", "H", "entropy_in", "size"};
  static const char* ykeys[] = {"y", "value", "error", "measured"};
  for (const auto& p : pts) {
    try {
      if (p.is_array() && p.size() >= 2) {
        out.emplace_back(number_from_json(p[0]), number_from_json(p[1]));
      } else if (p.is_object()) {
        double x = NAN, y = NAN;
        for (const char* k : xkeys)
          if (p.contains(k)) {
            x = number_from_json(p[k]);
            if (xname && xname->empty()) *xname = k;
            break;
          }
        if (p.contains(metric))
          y = number_from_json(p[metric]);
        else
          for (const char* k : ykeys)
            if (p.contains(k)) {
              y = number_from_json(p[k]);
              break;
            }
        out.emplace_back(x, y);
      }
    } catch (const std::exception&) {
      // a malformed point is skipped (loose input)
    }
  }
  return out;
}

std::vector<SweepSeries> load_sweep_json(const std::string& path, const json& j);
std::vector<SweepSeries> load_sweep(const std::string& path) {
  const json j = read_json(path, "a sweep file (docs/report-inputs.md)");
  try {
    return load_sweep_json(path, j);
  } catch (const json::exception& e) {
    throw std::invalid_argument(path + ": " + e.what() +
                                "; expected a sweep file (docs/report-inputs.md)");
  }
}
std::vector<SweepSeries> load_sweep_json(const std::string& path, const json& j) {
  const json* arr = nullptr;
  if (j.is_array())
    arr = &j;
  else if (j.is_object() && j.contains("series") && j["series"].is_array())
    arr = &j["series"];
  if (!arr)
    throw std::invalid_argument(path +
                                ": key 'series': expected an array of series objects "
                                "(docs/report-inputs.md)");
  std::vector<SweepSeries> out;
  for (const auto& s : *arr) {
    if (!s.is_object()) continue;
    SweepSeries r;
    r.kernel = s.value("kernel", s.value("variant", std::string("(unnamed)")));
    r.dtype = s.value("dtype", "");
    r.metric = s.value("metric", "");
    r.xname = s.value("x", "");
    r.label = s.value("label", "");
    try {
      r.spread = s.contains("spread") ? number_from_json(s["spread"]) : NAN;
    } catch (...) {
    }
    r.pts = read_points(s.value("points", json::array()), r.metric, &r.xname);
    r.bound = read_points(s.value("bound", json::array()), "bound", nullptr);
    if (!r.pts.empty()) out.push_back(std::move(r));
  }
  return out;
}

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

enum class Section { error, dispersion, entropy_temperature, adaptive, streamed, other };
Section section_of(const SweepSeries& s) {
  const std::string& m = s.metric;
  if (has(m, "streamed")) return Section::streamed;
  if (has(m, "max_weight") || has(m, "max_coefficient") || has(m, "dispersion"))
    return Section::dispersion;
  if (has(m, "adaptive") || has(m, "beta")) return Section::adaptive;
  if (has(m, "entropy") && (s.xname == "temperature" || s.xname == "theta"))
    return Section::entropy_temperature;
  if (has(m, "error") || has(m, "ulp")) return Section::error;
  return Section::other;
}

std::string series_name(const SweepSeries& s) {
  if (!s.label.empty()) return s.label;
  std::string n = s.kernel;
  if (!s.dtype.empty()) n += " " + s.dtype;
  if (!s.metric.empty()) n += " " + s.metric;
  return n;
}

// --------------------------------------------------------------- sections --
const char* kStyle = R"(<style>
body{font-family:Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{border-bottom:3px solid #345}h2{margin-top:2em;border-bottom:1px solid #aaa}
table{border-collapse:collapse;margin:1em 0;font-size:13px}th,td{border:1px solid #bbb;padding:3px 6px;vertical-align:top}
th{background:#eef}td.ce{font-family:monospace;font-size:11px;max-width:420px;word-break:break-all}
.pass{background:#e5f6e5}.fail{background:#fbe1e1}.skip{background:#f3f3f3;color:#666}.error{background:#fff1cc}
.noplot{background:#fff6d6;border:1px solid #e0c060;padding:.5em}.plot svg{max-width:100%;height:auto}
.explain{background:#f6f8fb;border-left:4px solid #678;padding:.4em .8em}
.verdict{font-weight:bold;font-size:1.2em}
</style>)";

void verdict_section(std::ostream& h, const std::vector<RunRecord>& runs) {
  h << "<h2 id=\"verdicts\">1. Verdicts</h2>\n<div class=\"explain\"><p>Each row is one claim "
       "checked on one kernel, operation and data type. <b>measured</b> is what was observed, "
       "<b>bound</b> what it was held to, and <b>rule</b> where that bound comes from (a theorem "
       "of "
       "the paper, a rounding-error analysis, or a named convention). A failing row carries a "
       "<b>counterexample</b>: an input that reproduces the failure. Rows named "
       "<code>gate.*</code> "
       "are the gate's own checks: the kernel did not crash, hang, access memory outside its "
       "buffers, or produce NaN from inputs without NaN.</p></div>\n";
  if (runs.empty()) {
    h << "<p>No results were given.</p>\n";
    return;
  }
  h << "<table><tr><th>kernel</th><th>origin</th><th>pass</th><th>fail</th><th>error</th>"
       "<th>skip</th><th>crashes</th><th>hangs</th><th>gate verdict</th></tr>\n";
  for (const auto& r : runs) {
    const Tally t = tally(r.verdicts);
    h << "<tr><td>" << esc(r.kernel) << "</td><td>" << esc(r.origin) << "</td><td>" << t.pass
      << "</td><td>" << t.fail << "</td><td>" << t.error << "</td><td>" << t.skip << "</td><td>"
      << r.crashes << "</td><td>" << r.hangs << "</td><td class=\"" << (t.ok() ? "pass" : "fail")
      << " verdict\">" << (t.ok() ? "PASS" : "FAIL") << "</td></tr>\n";
  }
  h << "</table>\n";
  for (const auto& r : runs) {
    h << "<h3>Kernel " << esc(r.kernel) << "</h3>\n";
    if (!r.description.empty()) h << "<p>" << esc(r.description) << "</p>\n";
    std::vector<const Verdict*> order;
    for (const auto& v : r.verdicts) order.push_back(&v);
    auto rank = [](Outcome o) {
      return o == Outcome::fail ? 0 : o == Outcome::error ? 1 : o == Outcome::pass ? 2 : 3;
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](auto* a, auto* b) { return rank(a->outcome) < rank(b->outcome); });
    // Failures and errors are shown; passes and skips fold away under a summary line.
    auto table = [&](bool open_rows) {
      h << "<table><tr><th>outcome</th><th>property</th><th>op</th><th>dtype</th><th>claim</th>"
           "<th>measured</th><th>bound</th><th>rule</th><th>counterexample / worst case / "
           "note</th></tr>\n";
      for (const Verdict* v : order) {
        const bool bad = v->outcome == Outcome::fail || v->outcome == Outcome::error;
        if (bad != open_rows) continue;
        std::string ce = v->counterexample;
        if (ce.size() > 2000) ce = ce.substr(0, 2000) + " ...";
        const char* ce_word = bad ? "counterexample:" : "worst case:";
        h << "<tr class=\"" << name_of(v->outcome) << "\"><td>" << name_of(v->outcome)
          << "</td><td>" << esc(v->property) << "</td><td>" << esc(v->op) << "</td><td>"
          << esc(v->dtype) << "</td><td>" << esc(v->claim) << "</td><td>" << num(v->measured)
          << "</td><td>" << num(v->bound) << "</td><td title=\"" << esc(v->rule.source) << "\">"
          << esc(v->rule.id) << "<br><small>" << esc(v->rule.source)
          << "</small></td><td class=\"ce\">"
          << (ce.empty() ? "" : "<b>" + std::string(ce_word) + "</b> " + esc(ce))
          << (v->note.empty() ? "" : "<br><small>" + esc(v->note) + "</small>") << "</td></tr>\n";
      }
      h << "</table>\n";
    };
    const Tally t = tally(r.verdicts);
    if (t.fail + t.error > 0)
      table(true);
    else
      h << "<p class=\"pass\">Every claim checked on this kernel holds.</p>\n";
    h << "<details><summary>" << t.pass << " passing and " << t.skip
      << " skipped verdicts (claim, measured value, bound and rule of each)</summary>\n";
    table(false);
    h << "</details>\n";
  }
}

void sweep_plot(std::ostream& h, Plotter& P, const std::vector<SweepSeries>& sw, Section sec,
                Plot plot) {
  for (const auto& s : sw)
    if (section_of(s) == sec) {
      plot.series.push_back({series_name(s), s.pts, "linespoints", false});
      if (!s.bound.empty())
        plot.series.push_back({series_name(s) + " bound", s.bound, "lines", true});
    }
  h << P.svg(plot);
}

bool any_of(const std::vector<SweepSeries>& sw, Section sec) {
  return std::any_of(sw.begin(), sw.end(), [&](auto& s) { return section_of(s) == sec; });
}

const char* kNoSweep =
    "<p class=\"noplot\">No sweep data for this section (give <code>--sweep sweep.json</code>; "
    "see docs/report-inputs.md). Only the theory is drawn.</p>\n";

void error_section(std::ostream& h, Plotter& P, const std::vector<SweepSeries>& sw) {
  h << "<h2 id=\"error\">2. Error against n, with the rounding-error bounds</h2>\n"
       "<div class=\"explain\"><p>How far each kernel's softmax is from the exact value (computed "
       "in "
       "128-bit arithmetic) as the row length n grows. The dashed lines are the a-priori bound of "
       "Blanchard, Higham &amp; Higham (2021) for the shifted softmax with a faithful exp, the "
       "one the t7_apriori rule applies: (n + 4 + 2&delta;)&middot;u (docs/theory.md T7; "
       "(n + 2 + 2&delta;)&middot;u with a correctly rounded exp) "
       "(relative, max-norm; u the unit roundoff: 2<sup>-24</sup> for float32, 2<sup>-8</sup> for "
       "bfloat16), drawn here for spread &delta; = 10. A kernel below its line is within what "
       "rounding can explain; the bound is pessimistic (errors typically grow like &radic;n) and "
       "says nothing once it passes 1 (n &asymp; 1/u).</p></div>\n";
  Plot p{"Softmax error against n", "n (row length)", "relative error", true, true, {}, "top left"};
  const auto ns = logspace(1, 1 << 20, 60);
  for (auto [name, t] : {std::pair{"T7 bound float32 (delta=10)", DType::float32},
                         std::pair{"T7 bound bfloat16 (delta=10)", DType::bfloat16}}) {
    Series s{name, {}, "lines", true};
    for (double n : ns)
      s.pts.emplace_back(n, theory::shifted_softmax_error_bound(n, 10.0, unit_roundoff(t), 2.0));
    p.series.push_back(s);
  }
  if (!any_of(sw, Section::error)) h << kNoSweep;
  sweep_plot(h, P, sw, Section::error, p);
}

void dispersion_section(std::ostream& h, Plotter& P, const std::vector<SweepSeries>& sw) {
  h << "<h2 id=\"dispersion\">3. Dispersion: the largest coefficient against n (T1, T2)</h2>\n"
       "<div class=\"explain\"><p>The paper's Lemma 2.1: if every logit lies in an interval of "
       "width &delta;, every softmax weight is at most 1/(1 + "
       "(n&minus;1)e<sup>&minus;&delta;/&theta;</sup>), "
       "which tends to 0 as n grows: <b>no coefficient can stay sharp</b> on long inputs. The "
       "curves "
       "are this bound for spreads measured in real models (Gemma 2B: 2.28 to 14.78, mean 5.69). "
       "Past n* = 1 + (1/&epsilon; &minus; 1)e<sup>&delta;/&theta;</sup> (Theorem 2.2) every "
       "weight is below "
       "&epsilon;; with &epsilon; the unit roundoff of a type, a sharp answer is impossible in "
       "that type. "
       "Measured largest weights, when a sweep gives them, must lie under their curve.</p></div>\n";
  Plot p{"Largest softmax weight against n", "n", "largest weight", true, true, {}, "bottom left"};
  const auto ns = logspace(1, 1e9, 80);
  for (double d : {2.28, 5.69, 14.78}) {
    Series s{"T1 upper bound, delta=" + num(d, 3), {}, "lines", true};
    for (double n : ns) s.pts.emplace_back(n, theory::dispersion_bounds(n, d, 1.0).upper);
    p.series.push_back(s);
  }
  Series star{"n* (float32, delta=5.69)", {}, "lines", false};
  const double ns32 = theory::critical_size(DType::float32, 5.69, 1.0);
  star.pts = {{ns32, 1e-12}, {ns32, 1.0}};
  p.series.push_back(star);
  Series starb{"n* (bfloat16, delta=5.69)", {}, "lines", false};
  const double nsb = theory::critical_size(DType::bfloat16, 5.69, 1.0);
  starb.pts = {{nsb, 1e-12}, {nsb, 1.0}};
  p.series.push_back(starb);
  p.yrange = std::pair{1e-10, 1.5};
  if (!any_of(sw, Section::dispersion)) h << kNoSweep;
  sweep_plot(h, P, sw, Section::dispersion, p);
  h << "<table><tr><th>spread &delta; (&theta; = 1)</th><th>n* float32 (&epsilon; = "
       "2<sup>-24</sup>)</th>"
       "<th>n* bfloat16 (&epsilon; = 2<sup>-8</sup>)</th><th>n* float16 (&epsilon; = "
       "2<sup>-11</sup>)</th></tr>\n";
  for (double d : {0.09, 2.28, 5.69, 5.82, 14.78, 32.74})
    h << "<tr><td>" << d << "</td><td>" << num(theory::critical_size(DType::float32, d, 1.0), 4)
      << "</td><td>" << num(theory::critical_size(DType::bfloat16, d, 1.0), 4) << "</td><td>"
      << num(theory::critical_size(DType::float16, d, 1.0), 4) << "</td></tr>\n";
  h << "</table>\n";
}

std::vector<double> example_row(int n) {  // a fixed, reproducible row of logits in [-3, 3]
  std::vector<double> l(static_cast<std::size_t>(n));
  std::uint64_t s = 0x9E3779B97F4A7C15ull;
  for (auto& x : l) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = 6.0 * static_cast<double>(s >> 11) / 9007199254740992.0 - 3.0;
  }
  return l;
}

void entropy_section(std::ostream& h, Plotter& P, const std::vector<SweepSeries>& sw) {
  h << "<h2 id=\"entropy\">4. Entropy against temperature (T4)</h2>\n"
       "<div class=\"explain\"><p>Proposition 3.2: lowering the temperature &theta; always lowers "
       "the entropy of the softmax (dH/d&theta; = Var<sub>p</sub>[l]/&theta;<sup>3</sup> &ge; 0), "
       "from log n at high temperature down to log(number of tied maxima) as &theta; &rarr; 0. "
       "The curves are exact for a two-logit row with gap 5 and for fixed rows of 16 and 1024 "
       "logits "
       "in [&minus;3, 3]; the dotted lines are their ceilings log n. Lowering the temperature "
       "sharpens, but only as far as the logit spread allows (section 3).</p></div>\n";
  Plot p{"Entropy against temperature",
         "temperature theta",
         "entropy H (nats)",
         true,
         false,
         {},
         "bottom right"};
  const auto ts = logspace(0.01, 100, 80);
  Series two{"two logits, gap 5 (closed form)", {}, "lines", false};
  for (double t : ts) two.pts.emplace_back(t, theory::two_logit_entropy(5.0 / t));
  p.series.push_back(two);
  for (int n : {16, 1024}) {
    const auto row = example_row(n);
    Series s{"fixed row, n=" + std::to_string(n), {}, "lines", false};
    for (double t : ts)
      s.pts.emplace_back(t, theory::entropy_at(std::span<const double>(row), 1.0 / t));
    p.series.push_back(s);
    p.series.push_back(
        {"log " + std::to_string(n), {{0.01, std::log(n)}, {100, std::log(n)}}, "lines", true});
  }
  if (!any_of(sw, Section::entropy_temperature)) h << kNoSweep;
  sweep_plot(h, P, sw, Section::entropy_temperature, p);
}

void adaptive_section(std::ostream& h, Plotter& P, const std::vector<SweepSeries>& sw) {
  h << "<h2 id=\"adaptive\">5. Adaptive temperature: the map &beta;(H) and its effect (T5)</h2>\n"
       "<div class=\"explain\"><p>The paper's adaptive temperature measures the entropy H of each "
       "softmax row and multiplies the logits by &beta;(H) = max(poly(H), 1) when H &gt; 0.5 "
       "(poly = &minus;0.037H<sup>4</sup> + 0.481H<sup>3</sup> &minus; 2.3H<sup>2</sup> + 4.917H "
       "&minus; 1.791), else 1. &beta; never goes below 1, so the correction can only sharpen. "
       "It acts only for H between about 0.85 and 5.94 and is largest (about 2.42) near H = 4.41: "
       "a near-uniform row of more than about 380 items (H &gt; 5.94) gets <b>no correction at "
       "all</b>. The second plot shows this on fixed rows of growing length.</p></div>\n";
  Plot p{"Adaptive inverse temperature beta(H)",
         "entropy H (nats)",
         "beta",
         false,
         false,
         {},
         "top right"};
  Series b{"beta(H) (paper, eq. 18)", {}, "lines", false};
  for (int i = 0; i <= 400; ++i) {
    const double H = 7.0 * i / 400;
    b.pts.emplace_back(H, theory::adaptive_beta(H));
  }
  p.series.push_back(b);
  p.yrange = std::pair{0.8, 2.6};
  h << P.svg(p);
  Plot e{"Entropy before and after the adaptive correction",
         "n (row length)",
         "entropy H (nats)",
         true,
         false,
         {},
         "top left"};
  Series before{"H before", {}, "linespoints", false}, after{"H after", {}, "linespoints", false},
      beta{"beta applied", {}, "linespoints", true};
  std::vector<std::vector<std::string>> rows;
  for (double nd : logspace(2, 16384, 15)) {
    const int n = static_cast<int>(std::lround(nd));
    const auto row = example_row(n);
    const double H = theory::entropy_at(std::span<const double>(row), 1.0);
    const double bt = theory::adaptive_beta(H);
    const double H2 = theory::entropy_at(std::span<const double>(row), bt);
    before.pts.emplace_back(n, H);
    after.pts.emplace_back(n, H2);
    beta.pts.emplace_back(n, bt);
    rows.push_back({std::to_string(n), num(H, 4), num(bt, 4), num(H2, 4)});
  }
  e.series = {before, after, beta};
  h << P.svg(e);
  h << "<table><tr><th>n</th><th>H before</th><th>&beta;(H)</th><th>H after</th></tr>\n";
  for (auto& r : rows)
    h << "<tr><td>" << r[0] << "</td><td>" << r[1] << "</td><td>" << r[2] << "</td><td>" << r[3]
      << "</td></tr>\n";
  h << "</table>\n";
  if (any_of(sw, Section::adaptive)) {
    Plot m{"Measured adaptive-temperature series", "x", "value", false, false, {}, "top right"};
    sweep_plot(h, P, sw, Section::adaptive, m);
  }
}

void streamed_section(std::ostream& h, Plotter& P, const std::vector<SweepSeries>& sw) {
  h << "<h2 id=\"streamed\">6. Streamed entropy: error against n (T6)</h2>\n"
       "<div class=\"explain\"><p>Entropy can be computed in one pass with three numbers per row "
       "(running maximum m, S = &Sigma;e<sup>l&minus;m</sup>, T = "
       "&Sigma;e<sup>l&minus;m</sup>(l&minus;m)), "
       "as H = log S &minus; T/S, which makes adaptive temperature usable in flash-style "
       "attention. "
       "This plot shows how far streamed kernels are from the exact entropy as n grows; the "
       "algebraically equal form (m + log S) &minus; U/S cancels catastrophically for large logits "
       "and would show here as a jump.</p></div>\n";
  if (!any_of(sw, Section::streamed)) {
    h << "<p class=\"noplot\">No streamed-entropy data was given (sweep series with a metric "
         "containing \"streamed\", see docs/report-inputs.md).</p>\n";
    return;
  }
  Plot p{
      "Streamed entropy error against n", "n", "absolute error (nats)", true, true, {}, "top left"};
  sweep_plot(h, P, sw, Section::streamed, p);
}

void other_section(std::ostream& h, Plotter& P, const std::vector<SweepSeries>& sw) {
  if (!any_of(sw, Section::other)) return;
  h << "<h2 id=\"other\">Other measured series</h2>\n<p>Series from the sweep whose metric the "
       "report does not place in a section above.</p>\n";
  Plot p{"Other series", "x", "value", true, false, {}, "top left"};
  sweep_plot(h, P, sw, Section::other, p);
}

void variants_section(std::ostream& h, const std::string& path) {
  h << "<h2 id=\"variants\">7. Softmax variants</h2>\n<div class=\"explain\"><p>Alternatives to "
       "softmax fuzzed and measured by the variants tool: each row is a variant, each column a "
       "measurement, as given in the variants matrix.</p></div>\n";
  if (path.empty()) {
    h << "<p class=\"noplot\">No variants matrix was given (<code>--variants "
         "matrix.json</code>).</p>\n";
    return;
  }
  const json j = read_json(path, "a variants matrix (docs/report-inputs.md)");
  const json* rows = nullptr;
  if (j.is_array())
    rows = &j;
  else if (j.is_object())
    for (const char* k : {"variants", "rows", "matrix"})
      if (j.contains(k) && j[k].is_array()) {
        rows = &j[k];
        break;
      }
  if (!rows) {
    h << "<p class=\"noplot\">" << esc(path)
      << ": no array 'variants' (or 'rows'/'matrix') found; "
         "nothing to show.</p>\n";
    return;
  }
  std::vector<std::string> cols;
  std::vector<std::map<std::string, std::string>> table;
  auto cell = [](const json& v) -> std::string {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_number()) return num(v.get<double>());
    if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
    return v.dump();
  };
  for (const auto& r : *rows) {
    if (!r.is_object()) continue;
    std::map<std::string, std::string> m;
    for (auto it = r.begin(); it != r.end(); ++it) {
      if (it.value().is_object()) {
        for (auto jt = it.value().begin(); jt != it.value().end(); ++jt) {
          const std::string k = it.key() + "." + jt.key();
          if (std::find(cols.begin(), cols.end(), k) == cols.end()) cols.push_back(k);
          m[k] = cell(jt.value());
        }
      } else {
        if (std::find(cols.begin(), cols.end(), it.key()) == cols.end()) cols.push_back(it.key());
        m[it.key()] = cell(it.value());
      }
    }
    table.push_back(std::move(m));
  }
  h << "<table><tr>";
  for (auto& c : cols) h << "<th>" << esc(c) << "</th>";
  h << "</tr>\n";
  for (auto& r : table) {
    h << "<tr>";
    for (auto& c : cols) h << "<td>" << esc(r.count(c) ? r.at(c) : "") << "</td>";
    h << "</tr>\n";
  }
  h << "</table>\n";
}

}  // namespace

bool gnuplot_available(const std::string& program) {
  if (program.empty()) return false;
  return run_program(program, {"--version"}, "");
}

void write_report(const ReportInputs& in, std::ostream& h) {
  std::vector<RunRecord> runs;
  for (const auto& f : in.results) {
    auto r = load_results(f);
    runs.insert(runs.end(), r.begin(), r.end());
  }
  std::vector<SweepSeries> sweep;
  if (!in.sweep.empty()) sweep = load_sweep(in.sweep);
  if (!in.variants.empty()) read_json(in.variants, "a variants matrix (docs/report-inputs.md)");

  Plotter P(in.gnuplot);
  const std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << esc(in.title)
    << "</title>\n"
    << kStyle << "</head><body>\n<h1>" << esc(in.title) << "</h1>\n";
  h << "<p>Generated " << when << " by softmax-audit. Inputs: ";
  for (const auto& f : in.results) h << "<code>" << esc(f) << "</code> ";
  if (!in.sweep.empty()) h << "sweep <code>" << esc(in.sweep) << "</code> ";
  if (!in.variants.empty()) h << "variants <code>" << esc(in.variants) << "</code>";
  h << "</p>\n";
  if (!P.ok())
    h << "<p class=\"noplot\"><b>gnuplot was not found</b>, so this report has no plots; every "
         "table is complete. Install Debian's <code>gnuplot-nox</code> and run "
         "<code>softmax-audit report</code> again for the plots.</p>\n";
  h << "<div class=\"explain\"><p><b>How to read this report.</b> Softmax turns scores into "
       "weights that sum to 1. The paper \"Softmax is not Enough (for Sharp Size Generalisation)\" "
       "(Veli&#269;kovi&#263; et al., ICML 2025) proves that these weights must spread out as "
       "inputs "
       "grow longer, and proposes an adaptive temperature to counter it. This report says, for "
       "each kernel, whether it computes softmax and its relatives within the error the "
       "mathematics allows (section 1), and shows the theory the checks rest on (sections 2 to 6) "
       "together with any measurements supplied.</p></div>\n<ol>"
       "<li><a href=\"#verdicts\">Verdicts</a></li><li><a href=\"#error\">Error against n</a></li>"
       "<li><a href=\"#dispersion\">Dispersion</a></li><li><a href=\"#entropy\">Entropy and "
       "temperature</a></li>"
       "<li><a href=\"#adaptive\">Adaptive temperature</a></li><li><a href=\"#streamed\">Streamed "
       "entropy</a></li>"
       "<li><a href=\"#variants\">Variants</a></li></ol>\n";
  verdict_section(h, runs);
  error_section(h, P, sweep);
  dispersion_section(h, P, sweep);
  entropy_section(h, P, sweep);
  adaptive_section(h, P, sweep);
  streamed_section(h, P, sweep);
  other_section(h, P, sweep);
  variants_section(h, in.variants);
  h << "</body></html>\n";
}

}  // namespace sa::gate
