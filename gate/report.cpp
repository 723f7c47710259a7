#include "gate/report.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
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
#include <regex>
#include <array>
#include <cctype>
#include <set>
#include <sstream>

#include "core/dtype.hpp"
#include "gate/checks.hpp"
#include "gate/provenance.hpp"
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
// What a curve is, which decides how it is drawn: measured data solid with
// points, a theory curve or bound dashed, a marker (a ceiling, a threshold)
// dotted. A bound drawn for a data series takes the series' colour.
enum class Kind { data, theory, marker };
struct Series {
  std::string name;
  std::vector<std::pair<double, double>> pts;
  Kind kind = Kind::theory;
  int color = -1;  // index into kPalette; -1: the next free colour
};
struct Plot {
  std::string title, xlabel, ylabel;
  bool logx = false, logy = false;
  std::vector<Series> series;
  std::string key = "top right";
  std::optional<std::pair<double, double>> yrange;
};

// Okabe & Ito's colour-blind-safe palette (2008), without its yellow (too
// light on white). Past 7 colours, data series change point type and theory
// curves dash pattern, so no two curves look alike.
const char* const kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                "#E69F00", "#56B4E9", "#000000"};
constexpr int kColors = 7;

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
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    // Ends with the report (SIGINT, SIGTERM, even SIGKILL): never outlives it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
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
    // Many series: the legend goes under the plot, in two columns, so it never
    // covers the data and stays readable when the page scales the plot down.
    const bool crowded = drawn.size() > 4;
    const int key_rows = crowded ? static_cast<int>((drawn.size() + 1) / 2) : 0;
    g << "set terminal svg size 760," << 440 + 22 * key_rows
      << " dynamic enhanced font 'Helvetica,13' background rgb 'white'\n"
      << "set output " << gp_quote(base + ".svg") << "\n"
      << "set title " << gp_quote(p.title) << " noenhanced\nset xlabel " << gp_quote(p.xlabel)
      << " noenhanced\nset ylabel " << gp_quote(p.ylabel) << " noenhanced\nset grid\nset key "
      << (crowded ? std::string("outside below left maxcols 2 width -6") : p.key)
      << " font ',12' samplen 3\n";
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
    int next_color = 0;
    for (const Series* sp : drawn)
      if (sp->color >= next_color) next_color = sp->color + 1;
    for (std::size_t i = 0; i < drawn.size(); ++i) {
      const Series& s = *drawn[i];
      const int c = s.color >= 0 ? s.color : next_color++;
      const int cycle = c / kColors;
      g << (i ? ", " : "") << "$d" << i << " using 1:2 with ";
      if (s.kind == Kind::data)
        g << "linespoints lw 2 dt 1 pt " << (cycle % 2 ? 5 : 7) + 2 * (cycle / 2) << " ps 0.7";
      else if (s.kind == Kind::theory)
        g << "lines lw 2 dt " << (cycle % 2 ? 4 : 2);
      else
        g << "lines lw 1.5 dt 3";
      g << " lc rgb '" << kPalette[c % kColors] << "' title " << gp_quote(s.name) << " noenhanced";
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

// ------------------------------------------------------------ the model --
// Everything the report says, read once from the inputs; the HTML page and
// its JSON twin (docs/schema/report.schema.json) are both written from it.

// Where the repository's docs are, for links (ReportInputs::docs_root), and
// the anchors of docs/theory.md's theorem headings read from that file.
struct Docs {
  std::string href_base;                              // "" = no links (the docs are not at hand)
  std::map<std::string, std::string> theorem_anchor;  // "T7" -> GitHub-style slug
};

std::string slug(const std::string& heading) {  // GitHub's rule for heading anchors
  std::string o;
  for (unsigned char c : heading) {
    if (std::isalnum(c))
      o += static_cast<char>(std::tolower(c));
    else if (c == ' ' || c == '-')
      o += '-';
    else if (c >= 0x80)
      o += static_cast<char>(c);
  }
  return o;
}

Docs load_docs(const std::string& root, const std::string& href_base) {
  Docs d;
  if (root.empty()) return d;
  std::ifstream f(fs::path(root) / "docs" / "theory.md");
  if (!f) return d;
  d.href_base = href_base;
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("## T", 0) == 0 && line.size() > 5 &&
        std::isdigit(static_cast<unsigned char>(line[4])))
      d.theorem_anchor[line.substr(3, line.find('.') - 3)] = slug(line.substr(3));
  return d;
}

// The docs of the report being written (write_report sets it), for links in prose.
const Docs* g_docs = nullptr;
std::string linkify(const std::string& text, const Docs& docs);
std::string doc(const std::string& ref) {
  static const Docs none;
  return linkify(ref, g_docs ? *g_docs : none);
}

// Text with every mention of a repository document (docs/theory.md T7,
// theory.md T8, docs/variants.md, ...) escaped and turned into a link to that
// file in the repository (and to the theorem's heading), when the docs are at
// hand; the rest escaped.
std::string linkify(const std::string& text, const Docs& docs) {
  static const std::regex re(
      R"((docs/)?(theory|variants|bug-classes|kernel-contract|gate-spec|report-inputs|fuzzing)\.md( (T[1-8])(/T[1-8])?)?)");
  std::string out;
  auto begin = std::sregex_iterator(text.begin(), text.end(), re);
  std::size_t at = 0;
  for (auto it = begin; it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    out += esc(text.substr(at, static_cast<std::size_t>(m.position()) - at));
    at = static_cast<std::size_t>(m.position() + m.length());
    const std::string file = "docs/" + m[2].str() + ".md";
    const std::string label = file + (m[3].matched ? " " + m[4].str() + m[5].str() : "");
    if (docs.href_base.empty()) {
      out += "<code>" + esc(label) + "</code>";
      continue;
    }
    std::string href = docs.href_base + file;
    if (m[4].matched && m[2].str() == "theory" && docs.theorem_anchor.count(m[4].str()))
      href += "#" + docs.theorem_anchor.at(m[4].str());
    out += "<a href=\"" + esc(href) + "\"><code>" + esc(label) + "</code></a>";
  }
  return out + esc(text.substr(at));
}

// The unit of a verdict's measured value and bound: stated by the property
// in its note ("measured and bound in ulps of float32"), else the unit of its
// rule's quantity.
std::string unit_of(const Verdict& v) {
  static const std::string said = "measured and bound in ";
  if (const auto at = v.note.rfind(said); at != std::string::npos) {
    std::string u = v.note.substr(at + said.size());
    u = u.substr(0, u.find_first_of(";)\n"));
    if (!u.empty()) return u;
  }
  // Otherwise the quantity each property measures (its registry row).
  const std::string& p = v.property;
  if (p == "differential.onednn_10eps")
    return v.dtype == "float32" ? "relative" : "mismatches (1 = not the rounded reference)";
  if (const props::PropertyInfo* info = props::find_property(p)) return info->measure;
  if (const props::PropertyInfo* info = find_gate_check(p)) return info->measure;
  return "as stated by the claim";
}

struct NotAudited {
  std::string name, reason;
};

struct VariantCell {
  std::string id, symbol, outcome, claim, counterexample, note;
  double measured = NAN, bound = NAN;
  bool claimed = false;
};
struct VariantCurve {
  double gap = NAN;
  std::vector<std::pair<double, double>> pts;  // (n, largest weight)
};
struct VariantRow {
  std::string name, formula, origin, wrong_of, citation, streamable;
  std::vector<VariantCurve> curves;  // fuzz --json's "dispersion" (absent before version 3)
  bool wrong_formulation = false;
  std::vector<VariantCell> cells;  // one per column, same order ("" symbol: absent)
};
struct VariantMatrix {
  bool given = false;
  std::string problem;                              // why the file gave no matrix
  std::vector<std::array<std::string, 3>> columns;  // id, short header, claim
  std::vector<VariantRow> rows;
  nlohmann::json config;
};

// What went wrong, in one plain sentence for a reader who will not decode a
// counterexample: the kernel, operation and type; where it went wrong and
// what the kernel returned against the exact value (from the
// counterexample's "; at WHERE: got X, exact Y"); and how far over its bound
// the measurement is, in its unit. Empty for a verdict that did not fail.
std::string plain_statement(const std::string& kernel, const Verdict& v) {
  if (v.outcome != Outcome::fail && v.outcome != Outcome::error) return "";
  std::string s = kernel;
  if (!v.op.empty()) s += " " + v.op;
  if (!v.dtype.empty()) s += " " + v.dtype;
  s += ": ";
  if (v.outcome == Outcome::error)
    return s + (v.note.empty() ? std::string("the check could not be completed") : v.note) + ".";
  // The counterexample's last "; at ..." names the element and its values.
  const std::string& ce = v.counterexample;
  std::string at;
  if (const auto p = ce.rfind("; at "); p != std::string::npos) at = ce.substr(p + 5);
  static const std::regex got_re(
      R"(^(.*?):? got ([^ ,;]+),? (exact|expected|reference|want|wanted)( value)? ([^ ,;()]+))");
  std::smatch g;
  std::string where;
  if (!at.empty() && std::regex_search(at, g, got_re)) {
    where = g[1].str();
    s += (where.empty() ? std::string("the kernel") : where + ": the kernel") + " returned " +
         g[2].str() + " where the " + (g[3] == "exact" ? "exact" : g[3].str()) + " value is " +
         g[5].str();
  } else if (!at.empty()) {
    s += "at " + (at.size() > 160 ? at.substr(0, 160) + " ..." : at);
  } else {
    s += "the claim does not hold";
  }
  const std::string unit = unit_of(v);
  if (std::isnan(v.measured) || std::isinf(v.measured)) {
    s += " (measured " + num(v.measured) + ", bound " + num(v.bound) + " " + unit +
         ": a value that must be finite or equal is not)";
  } else if (std::isfinite(v.bound) && v.bound > 0) {
    s += " (" + num(v.measured, 3) + " " + unit + ", " + num(v.measured / v.bound, 3) +
         " times the bound of " + num(v.bound, 3) + ")";
  } else if (std::isfinite(v.bound)) {
    s += " (" + num(v.measured, 3) + " " + unit + " where the bound is " + num(v.bound, 3) + ")";
  }
  return s + ".";
}

// Fields of an input document, whatever their JSON type: a string as is,
// anything else as its JSON text, a missing or null one as `def`. (An input of
// the wrong shape is shown, never a crash.)
std::string sget(const json& j, const char* k, const std::string& def = "") {
  if (!j.is_object()) return def;
  const auto it = j.find(k);
  if (it == j.end() || it->is_null()) return def;
  return it->is_string() ? it->get<std::string>() : it->dump();
}
bool bget(const json& j, const char* k) {
  if (!j.is_object()) return false;
  const auto it = j.find(k);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

// The cell symbol: holds / failed claim / finding / not applicable / error;
// dispersion cells show the measured limit of the top weight and whether
// theory predicted it; the streamable cell says yes / no / n/s (not supplied).
// A failed claim (a defect, exit 1) is \u2717; a finding (a property the
// formulation does not keep, exit 0) is \u25cb.
std::string variant_symbol(const std::string& id, const json& c) {
  const std::string o = sget(c, "outcome", "");
  const std::string failed = bget(c, "claimed") ? "\u2717" : "\u25cb";
  if (id.rfind("dispersion", 0) == 0 && o != "error" && o != "skip") {
    const std::string note = sget(c, "note", "");
    std::string cls = note.find("measured to_zero") != std::string::npos  ? "\u21920"
                      : note.find("measured to_one") != std::string::npos ? "\u21921"
                                                                          : "";
    if (cls.empty()) {
      double m = NAN;
      try {
        m = number_from_json(c.value("measured", json()));
      } catch (...) {
      }
      cls = "\u2192" + num(m, 2);
    }
    return cls + (o == "pass" ? " \u2713" : o == "fail" ? " " + failed : "");
  }
  if (id == "streamable") {
    if (o == "pass") return "yes";
    if (o == "skip") return sget(c, "note", "").rfind("no:", 0) == 0 ? "no" : "n/s";
  }
  return o == "pass"    ? "\u2713"
         : o == "fail"  ? failed
         : o == "skip"  ? "\u2013"
         : o == "error" ? "!"
                        : "?";
}

VariantMatrix load_variants(const std::string& path) {
  VariantMatrix m;
  if (path.empty()) return m;
  m.given = true;
  const json j = read_json(path, "a variants matrix written by `softmax-audit fuzz --json`");
  if (!j.is_object() || sget(j, "format", "") != "softmax-audit-variants" ||
      !j.contains("variants") || !j["variants"].is_array() || !j.contains("columns") ||
      !j["columns"].is_array())
    throw std::invalid_argument(path +
                                ": expected a variants matrix written by `softmax-audit fuzz "
                                "--json` (\"format\": \"softmax-audit-variants\", arrays "
                                "'columns' and 'variants'; docs/schema/variants.schema.json)");
  m.config = j.value("config", json::object());
  for (const auto& c : j["columns"]) {
    if (!c.is_object()) continue;
    const std::string id = sget(c, "id", "");
    m.columns.push_back({id, sget(c, "column", id), sget(c, "claim", "")});
  }
  for (const auto& r : j["variants"]) {
    if (!r.is_object()) continue;
    VariantRow row;
    row.name = sget(r, "name", "(unnamed)");
    row.formula = sget(r, "formula", "");
    row.origin = sget(r, "origin", "");
    row.wrong_formulation = bget(r, "wrong_formulation");
    row.wrong_of = sget(r, "wrong_of", "");
    row.citation = sget(r, "citation", "");
    row.streamable = sget(r, "streamable", "");
    // A two-row variant (variant.h ABI 3): say what its second row is next to the formula.
    if (r.contains("in2") && r["in2"].is_object())
      row.formula += " [second row (" + sget(r["in2"], "kind", "?") +
                     "): " + sget(r["in2"], "meaning", "") +
                     (bget(r["in2"], "scalar_output") ? "; one output per row" : "") + "]";
    if (r.contains("dispersion") && r["dispersion"].is_array())
      for (const auto& d : r["dispersion"]) {
        if (!d.is_object() || !d.contains("log2_n") || !d.contains("top_weight") ||
            !d["log2_n"].is_array() || !d["top_weight"].is_array())
          continue;
        VariantCurve c;
        try {
          c.gap = number_from_json(d.value("gap", json()));
        } catch (...) {
        }
        const json &ks = d["log2_n"], &ws = d["top_weight"];
        for (std::size_t k = 0; k < ks.size() && k < ws.size(); ++k) {
          if (!ks[k].is_number() || !ws[k].is_number()) continue;
          c.pts.emplace_back(std::ldexp(1.0, ks[k].get<int>()), ws[k].get<double>());
        }
        row.curves.push_back(std::move(c));
      }
    const json cells = r.value("cells", json::object());
    for (const auto& col : m.columns) {
      VariantCell cell;
      cell.id = col[0];
      if (cells.is_object() && cells.contains(col[0]) && cells[col[0]].is_object()) {
        const json& c = cells[col[0]];
        cell.symbol = variant_symbol(col[0], c);
        cell.outcome = sget(c, "outcome", "");
        cell.claim = sget(c, "claim", col[2]);
        cell.counterexample = sget(c, "counterexample", "");
        cell.note = sget(c, "note", "");
        cell.claimed = bget(c, "claimed");
        try {
          cell.measured = number_from_json(c.value("measured", json()));
          cell.bound = number_from_json(c.value("bound", json()));
        } catch (...) {
        }
      }
      row.cells.push_back(std::move(cell));
    }
    m.rows.push_back(std::move(row));
  }
  return m;
}

struct Model {
  std::string title, generated, status;
  std::vector<RunRecord> runs;
  std::vector<NotAudited> not_audited;
  std::vector<SweepSeries> sweep;
  VariantMatrix variants;
  json report_provenance;
  std::vector<Rule> rules;  // every rule a verdict cites, first-seen order
};

std::string rule_anchor(const Model& m, const std::string& id) {
  for (std::size_t i = 0; i < m.rules.size(); ++i)
    if (m.rules[i].id == id) return "rule-" + std::to_string(i);
  return "rules";
}

int rank_outcome(Outcome o) {
  return o == Outcome::fail         ? 0
         : o == Outcome::error      ? 1
         : o == Outcome::incomplete ? 2
         : o == Outcome::pass       ? 3
                                    : 4;
}
bool bad(Outcome o) { return o == Outcome::fail || o == Outcome::error; }

// The rules that decided a verdict of this run (pass, fail or error),
// first-seen order: a check that was skipped (not applicable) or incomplete
// (not run to its end) applied none.
std::vector<std::string> rules_applied(const RunRecord& r) {
  std::vector<std::string> ids;
  for (const auto& v : r.verdicts)
    if ((v.outcome == Outcome::pass || bad(v.outcome)) && !v.rule.id.empty() &&
        std::find(ids.begin(), ids.end(), v.rule.id) == ids.end())
      ids.push_back(v.rule.id);
  return ids;
}

std::string status_of_model(const Model& m) {
  Tally all;
  for (const auto& r : m.runs) {
    const Tally t = tally(r.verdicts);
    all.pass += t.pass, all.fail += t.fail, all.error += t.error, all.skip += t.skip,
        all.incomplete += t.incomplete;
  }
  for (const auto& row : m.variants.rows)
    for (const auto& c : row.cells)
      if (c.claimed && (c.outcome == "fail" || c.outcome == "error")) ++all.fail;
  if (!all.ok()) return "fail";
  if (all.incomplete || all.pass == 0 || !m.not_audited.empty()) return "incomplete";
  return "pass";
}

// Ops and dtypes a run checked (at least one verdict that was not a skip).
std::pair<std::set<std::string>, std::set<std::string>> checked_ops_dtypes(const RunRecord& r) {
  std::set<std::string> ops, dtypes;
  for (const auto& v : r.verdicts)
    if (v.outcome != Outcome::skip && v.property.rfind("gate.", 0) != 0) {
      if (!v.op.empty()) ops.insert(v.op);
      if (!v.dtype.empty()) dtypes.insert(v.dtype);
    }
  return {ops, dtypes};
}

std::string joined(const std::set<std::string>& s) {
  std::string o;
  for (const auto& x : s) o += (o.empty() ? "" : ", ") + x;
  return o.empty() ? "none" : o;
}

// What could not be checked, grouped: per kernel, the reason of its skip
// verdicts and which (property, op, dtype) it covers.
struct Unchecked {
  std::string kernel, reason;
  std::set<std::string> ops, dtypes;
  int count = 0;
};
std::vector<Unchecked> unchecked_of(const Model& m) {
  std::vector<Unchecked> out;
  for (const auto& r : m.runs)
    for (const auto& v : r.verdicts) {
      if (v.outcome != Outcome::skip && v.outcome != Outcome::incomplete) continue;
      std::string reason = v.note.empty() ? v.claim : v.note;
      if (v.outcome == Outcome::incomplete) reason = "incomplete: " + reason;
      auto it = std::find_if(out.begin(), out.end(), [&](const Unchecked& u) {
        return u.kernel == r.kernel && u.reason == reason;
      });
      if (it == out.end()) {
        out.push_back({r.kernel, reason, {}, {}, 0});
        it = out.end() - 1;
      }
      if (!v.op.empty()) it->ops.insert(v.op);
      if (!v.dtype.empty()) it->dtypes.insert(v.dtype);
      ++it->count;
    }
  return out;
}

// ---------------------------------------------------------- HTML sections --
// An identifier escaped, with break opportunities after its dots and
// underscores only (never inside a word).
std::string breakable(const std::string& id) {
  std::string o;
  for (char c : esc(id)) {
    o += c;
    if (c == '.' || c == '_') o += "<wbr>";
  }
  return o;
}

const char* kStyle = R"(<style>
*{box-sizing:border-box}
body{font-family:Helvetica,Arial,sans-serif;max-width:1100px;margin:1em auto;padding:0 1em;color:#222;line-height:1.45;overflow-wrap:break-word}
code{overflow-wrap:anywhere}code.id{overflow-wrap:normal;white-space:nowrap}code.prop{overflow-wrap:normal}
h1{border-bottom:3px solid #345;font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #aaa}
.scroll{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;margin:.6em 0;font-size:13px;max-width:100%}
th,td{border:1px solid #bbb;padding:3px 6px;vertical-align:top;text-align:left}
th{background:#eef}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.unit{color:#444;font-size:12px}
#summary-table{width:100%}#summary-table td.id{overflow-wrap:anywhere}#summary-table td.result{font-weight:bold}
span.statement{display:block;margin:.15em 0}
pre.ce{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere;word-break:normal;background:#f6f6f6;border:1px solid #ddd;padding:4px 6px;margin:2px 0;max-height:14em;overflow:auto}
pre.ce.short{max-height:4.6em;margin-bottom:.3em}
tr.detail td{background:#fcfcfc;font-size:12px;border-top:none}
.pass{background:#e5f6e5}.fail{background:#fbe1e1}.skip{background:#f3f3f3;color:#555}.error{background:#fff1cc}.incomplete{background:#fff1cc}
.noplot{background:#fff6d6;border:1px solid #e0c060;padding:.5em}.plot svg{max-width:100%;height:auto}
.explain{background:#f6f8fb;border-left:4px solid #678;padding:.4em .8em}
.headline{font-size:1.25em;font-weight:bold;padding:.5em .8em;border:2px solid #888}
.headline.pass{border-color:#3a3}.headline.fail{border-color:#c33}.headline.incomplete{border-color:#c90}
.filters{display:flex;flex-wrap:wrap;gap:.4em 1em;align-items:center;margin:.5em 0;font-size:13px}
table.matrix{font-size:12px}table.matrix td,table.matrix th{padding:2px 3px}table.matrix td.sym{text-align:center;white-space:nowrap}
table.matrix td.claimedfail{background:#f4b6b6;font-weight:bold}
table.matrix th.col{font-size:11px;white-space:normal}
dl.prov{display:grid;grid-template-columns:minmax(8em,max-content) 1fr;gap:2px 1em;font-size:13px;margin:.5em 0}
dl.prov dt{font-weight:bold}dl.prov dd{margin:0;font-family:monospace;overflow-wrap:anywhere}
</style>)";

// A few lines of inline script, no external ones: filters for the verdict
// table, and the page's own layout width (data-page-width), which the report's
// browser test compares with the window's.
const char* kScript = R"(<script>
(function(){
  function apply(){
    var f={};
    document.querySelectorAll('#verdict-filters select').forEach(function(s){f[s.name]=s.value;});
    var text=(document.getElementById('f-text')||{value:''}).value.toLowerCase(), shown=0;
    document.querySelectorAll('#verdict-table tbody.v').forEach(function(b){
      var ok=true;
      for(var k in f){
        if(f[k]==='*') continue;
        if(k==='outcome'&&f[k]==='problems'){ if(b.dataset.outcome==='pass'||b.dataset.outcome==='skip') ok=false; }
        else if(b.dataset[k]!==f[k]) ok=false;
      }
      if(ok&&text&&b.textContent.toLowerCase().indexOf(text)<0) ok=false;
      b.style.display=ok?'':'none'; if(ok) shown++;
    });
    var c=document.getElementById('f-count'); if(c) c.textContent=shown+' shown';
    var e=document.getElementById('f-empty'); if(e) e.style.display=shown?'none':'';
  }
  document.querySelectorAll('#verdict-filters select,#f-text').forEach(function(e){e.addEventListener('input',apply);});
  apply();
  function measure(){
    var d=document.documentElement;
    document.body.setAttribute('data-page-width',String(d.scrollWidth));
    document.body.setAttribute('data-client-width',String(d.clientWidth));
    document.body.setAttribute('data-window-width',String(window.innerWidth));
    document.body.setAttribute('data-page-height',String(document.documentElement.scrollHeight));
  }
  measure(); window.addEventListener('load',measure); window.addEventListener('resize',measure);
})();
</script>)";

void summary_section(std::ostream& h, const Model& m, const Docs& docs) {
  const std::string st = m.status;
  h << "<section id=\"summary\"><h2>Summary</h2>\n<p class=\"headline " << st << "\">"
    << (st == "pass"   ? "PASS: every claim checked holds."
        : st == "fail" ? "FAIL: some claims do not hold (below, with the shortest input that "
                         "shows each)."
                       : "INCOMPLETE: nothing failed, but not everything was checked (see "
                         "\"Not audited\").")
    << "</p>\n";
  // What was audited.
  h << "<p><b>Audited:</b> " << m.runs.size() << " kernel" << (m.runs.size() == 1 ? "" : "s")
    << ".</p>\n";
  // The result first, then the counts, then the long lists: at 800 px the
  // result is on screen however long the list of operations is (the table
  // wraps its text; it never needs scrolling sideways to show the result).
  h << "<table id=\"summary-table\"><tr><th class=\"result\">result</th><th>kernel</th>"
       "<th>failed</th><th>claims held</th><th>origin</th><th>operations checked</th>"
       "<th>types</th></tr>\n";
  for (const auto& r : m.runs) {
    const Tally t = tally(r.verdicts);
    const auto [ops, dtypes] = checked_ops_dtypes(r);
    const char* s = status_of(t);
    h << "<tr><td class=\"result " << s << "\">" << s << "</td><td class=\"id\">" << esc(r.kernel)
      << "</td><td class=\"num\">" << t.fail + t.error << "</td><td class=\"num\">" << t.pass
      << "</td><td class=\"id\">" << esc(r.origin) << "</td><td>" << esc(joined(ops)) << "</td><td>"
      << esc(joined(dtypes)) << "</td></tr>\n";
  }
  h << "</table>\n";
  int held = 0, checked = 0;
  for (const auto& r : m.runs) {
    const Tally t = tally(r.verdicts);
    held += t.pass, checked += t.pass + t.fail + t.error;
  }
  h << "<p><b>Holds:</b> " << held << " of " << checked
    << " claims checked (each: a kernel, a property, an operation and a type; "
       "<a href=\"#verdicts\">all verdicts</a>).</p>\n";
  std::size_t claimed_fail = 0, variant_findings = 0;
  for (const auto& row : m.variants.rows)
    for (const auto& c : row.cells)
      if (c.outcome == "fail" || c.outcome == "error")
        (c.claimed ? claimed_fail : variant_findings)++;
  if (m.variants.given)
    h << "<p><b>Softmax variants:</b> " << m.variants.rows.size() << " fuzzed; " << claimed_fail
      << " failure" << (claimed_fail == 1 ? "" : "s") << " of a property a variant claims, "
      << variant_findings << " finding" << (variant_findings == 1 ? "" : "s")
      << " about properties a formulation does not keep (<a href=\"#variants\">matrix</a>).</p>\n";
  // Not checked.
  h << "<p><b>Not checked:</b> ";
  if (m.not_audited.empty())
    h << "every kernel the audit was asked for was checked";
  else
    for (std::size_t i = 0; i < m.not_audited.size(); ++i)
      h << (i ? "; " : "") << "<b>" << esc(m.not_audited[i].name) << "</b> ("
        << esc(m.not_audited[i].reason) << ")";
  const auto un = unchecked_of(m);
  int skips = 0;
  for (const auto& u : un) skips += u.count;
  h << ". " << skips << " further checks were not applicable (<a href=\"#not-audited\">why</a>)."
    << (m.sweep.empty() ? " No sweep was given." : "")
    << (m.variants.given ? "" : " No variants matrix was given.") << "</p>\n";
  // Rules: those that decided a verdict on each kernel (a skipped check applied no rule).
  h << "<p><b>Rules applied:</b> ";
  for (std::size_t k = 0; k < m.runs.size(); ++k) {
    const auto ids = rules_applied(m.runs[k]);
    if (m.runs.size() > 1) h << (k ? "; " : "") << "<b>" << esc(m.runs[k].kernel) << "</b>: ";
    for (std::size_t i = 0; i < ids.size(); ++i)
      h << (i ? ", " : "") << "<a href=\"#" << rule_anchor(m, ids[i]) << "\">" << esc(ids[i])
        << "</a>";
    if (ids.empty()) h << "none";
  }
  if (m.runs.empty()) h << "none";
  h << ". The theorems are stated in " << linkify("docs/theory.md", docs) << ".</p>\n";
  // What fails, each with its shortest counterexample.
  struct Group {
    std::string kernel, property, op, dtype, claim, ce, unit, statement;
    double measured, bound;
    int count = 0;
  };
  std::vector<Group> fails;
  for (const auto& r : m.runs)
    for (const auto& v : r.verdicts) {
      if (!bad(v.outcome)) continue;
      auto it = std::find_if(fails.begin(), fails.end(), [&](const Group& g) {
        return g.kernel == r.kernel && g.property == v.property;
      });
      const std::string ce = v.counterexample.empty() ? v.note : v.counterexample;
      if (it == fails.end()) {
        fails.push_back({r.kernel, v.property, v.op, v.dtype, v.claim, ce, unit_of(v),
                         plain_statement(r.kernel, v), v.measured, v.bound, 1});
        continue;
      }
      ++it->count;
      if (!ce.empty() && (it->ce.empty() || ce.size() < it->ce.size())) {
        it->ce = ce, it->op = v.op, it->dtype = v.dtype, it->measured = v.measured,
        it->bound = v.bound, it->unit = unit_of(v), it->statement = plain_statement(r.kernel, v);
      }
    }
  if (fails.empty()) {
    h << "<p><b>Fails:</b> nothing.</p>\n";
  } else {
    h << "<p><b>Fails:</b> " << fails.size() << " propert" << (fails.size() == 1 ? "y" : "ies")
      << " (each with the shortest input that shows it):</p>\n<ul>\n";
    std::size_t shown = 0;
    for (const auto& g : fails) {
      if (++shown > 6) {
        h << "<li>and " << fails.size() - 6
          << " more (<a href=\"#verdicts\">verdicts</a>, filter: fail)</li>\n";
        break;
      }
      std::string ce = g.ce;
      if (ce.size() > 600) ce = ce.substr(0, 600) + " ...";
      // The property, then what went wrong in words (kernel, op, type, where, got
      // against exact, measured against bound in its unit), then the input.
      h << "<li title=\"" << esc(g.claim) << "\"><code>" << esc(g.property) << "</code> ("
        << g.count << " verdict" << (g.count == 1 ? "" : "s") << ")<span class=\"statement\">"
        << esc(g.statement)
        << "</span><pre class=\"ce short\" title=\"the input that reproduces it\">" << esc(ce)
        << "</pre></li>\n";
    }
    h << "</ul>\n";
  }
  h << "</section>\n";
}

void provenance_section(std::ostream& h, const Model& m) {
  h << "<section id=\"provenance\"><h2>Provenance</h2>\n<div class=\"explain\"><p>What "
       "produced these results: the tool and the commit it was built from, the machine, each "
       "kernel's binary, instruction set, seeds and reference precision, and the exact commands. "
       "Re-running a check's command with the same build reproduces its verdicts.</p></div>\n";
  auto str = [](const json& o, const char* k) -> std::string {
    if (!o.is_object() || !o.contains(k) || o[k].is_null()) return "";
    return o[k].is_string() ? o[k].get<std::string>() : o[k].dump();
  };
  // Build and machine: once when every check agrees with the report, else per check.
  h << "<dl class=\"prov\">";
  for (const char* k : {"tool_version", "git_commit", "compiler", "host_cpu"}) {
    const std::string mine = str(m.report_provenance, k);
    std::ostringstream others;
    for (const auto& r : m.runs) {
      const std::string theirs = str(r.provenance, k);
      if (theirs != mine)
        others << "<br>" << esc(theirs.empty() ? "not recorded" : theirs) << " <small>(check of "
               << esc(r.kernel) << ")</small>";
    }
    const std::string diff = others.str();
    h << "<dt>" << k << "</dt><dd>" << esc(mine)
      << (diff.empty() ? " <small>(this report and every check)</small>"
                       : " <small>(this report)</small>" + diff);
    h << "</dd>";
  }
  h << "<dt>generated</dt><dd>" << esc(m.generated) << "</dd></dl>\n";
  h << "<div class=\"scroll\"><table><tr><th>kernel</th><th>SIMD target</th><th>seed</th>"
       "<th>cases</th><th>MPFR bits</th><th>kernel library (path, SHA-256)</th></tr>\n";
  for (const auto& r : m.runs) {
    const json& p = r.provenance;
    const json lib = p.is_object() ? p.value("kernel_library", json()) : json();
    std::string seed = str(p, "seed");
    if (seed.empty()) seed = sget(r.config, "seed", "not recorded");
    h << "<tr><td>" << esc(r.kernel) << "</td><td>"
      << esc(p.empty() ? "not recorded" : str(p, "simd_target")) << "</td><td class=\"num\">"
      << esc(seed) << "</td><td class=\"num\">" << esc(str(p, "cases")) << "</td><td class=\"num\">"
      << esc(str(p, "mpfr_precision_bits")) << "</td><td>";
    if (lib.is_object())
      h << "<code>" << esc(str(lib, "path")) << "</code><br><code>" << esc(str(lib, "sha256"))
        << "</code>";
    else
      h << (p.empty() ? "not recorded (results from an older softmax-audit)"
                      : "built into softmax-audit (git_commit above)");
    h << "</td></tr>\n";
  }
  h << "</table></div>\n<p>Commands:</p>\n<pre class=\"ce\">"
    << esc(str(m.report_provenance, "command_line")) << "</pre>\n";
  for (const auto& r : m.runs)
    if (!str(r.provenance, "command_line").empty())
      h << "<pre class=\"ce\">" << esc(str(r.provenance, "command_line")) << "</pre>\n";
  if (m.variants.given && !m.variants.config.empty())
    h << "<p>Variants matrix configuration: <code>" << esc(m.variants.config.dump())
      << "</code></p>\n";
  h << "</section>\n";
}

void not_audited_section(std::ostream& h, const Model& m) {
  h << "<section id=\"not-audited\"><h2>Not audited</h2>\n<div class=\"explain\"><p>What this "
       "audit did not check, and why. Nothing here passed or failed: it was not "
       "tested.</p></div>\n";
  if (m.not_audited.empty())
    h << "<p>Every kernel the audit was asked for was checked.</p>\n";
  else {
    h << "<div class=\"scroll\"><table><tr><th>not audited</th><th>why</th></tr>\n";
    for (const auto& n : m.not_audited)
      h << "<tr class=\"skip\"><td>" << esc(n.name) << "</td><td>" << esc(n.reason)
        << "</td></tr>\n";
    h << "</table></div>\n";
  }
  const auto un = unchecked_of(m);
  if (!un.empty()) {
    h << "<p>Checks that did not apply to a kernel (skipped verdicts, grouped by reason):</p>\n"
         "<div class=\"scroll\"><table><tr><th>kernel</th><th>why not checked</th><th>ops</th>"
         "<th>types</th><th>checks</th></tr>\n";
    for (const auto& u : un)
      h << "<tr class=\"skip\"><td>" << esc(u.kernel) << "</td><td>" << esc(u.reason) << "</td><td>"
        << esc(joined(u.ops)) << "</td><td>" << esc(joined(u.dtypes)) << "</td><td class=\"num\">"
        << u.count << "</td></tr>\n";
    h << "</table></div>\n";
  }
  if (m.sweep.empty())
    h << "<p>No sweep of large n was given: sections 2, 3 and 6 show theory only.</p>\n";
  if (!m.variants.given) h << "<p>No variants matrix was given: section 7 is empty.</p>\n";
  h << "</section>\n";
}

void verdict_section(std::ostream& h, const Model& m) {
  h << "<h2 id=\"verdicts\">1. Verdicts</h2>\n<div class=\"explain\"><p>Each entry is one claim "
       "checked on one kernel, operation and data type. <b>measured</b> is what was observed, "
       "<b>bound</b> what it was held to, both in the <b>unit</b> column's unit, and <b>rule</b> "
       "where that bound comes from (a theorem of the paper, a rounding-error analysis, or a "
       "named convention; <a href=\"#rules\">list</a>). A failing entry carries a "
       "<b>counterexample</b>: an input that reproduces it. Entries named <code>gate.*</code> "
       "are the gate's own checks: the kernel did not crash, hang, access memory outside its "
       "buffers, or produce NaN from inputs without NaN. The table opens on the problems; the "
       "filters show the rest.</p></div>\n";
  if (m.runs.empty()) {
    h << "<p>No results were given.</p>\n";
    return;
  }
  h << "<div class=\"scroll\"><table><tr><th>kernel</th><th>origin</th><th>pass</th><th>fail</th>"
       "<th>error</th><th>skip</th><th>crashes</th><th>hangs</th><th>gate verdict</th></tr>\n";
  std::set<std::string> kernels, ops, dtypes;
  for (const auto& r : m.runs) {
    const Tally t = tally(r.verdicts);
    kernels.insert(r.kernel);
    for (const auto& v : r.verdicts) {
      if (!v.op.empty()) ops.insert(v.op);
      if (!v.dtype.empty()) dtypes.insert(v.dtype);
    }
    h << "<tr><td>" << esc(r.kernel) << "</td><td>" << esc(r.origin) << "</td><td class=\"num\">"
      << t.pass << "</td><td class=\"num\">" << t.fail << "</td><td class=\"num\">" << t.error
      << "</td><td class=\"num\">" << t.skip << "</td><td class=\"num\">" << r.crashes
      << "</td><td class=\"num\">" << r.hangs << "</td><td class=\"" << status_of(t)
      << " verdict\">" << (t.ok() ? "PASS" : "FAIL") << "</td></tr>\n";
  }
  h << "</table></div>\n";
  auto select = [&](const char* name, const char* label, const std::set<std::string>& values,
                    const char* first) {
    h << "<label>" << label << " <select name=\"" << name << "\">" << first
      << "<option value=\"*\">all</option>";
    for (const auto& v : values)
      h << "<option value=\"" << esc(v) << "\">" << esc(v) << "</option>";
    h << "</select></label>";
  };
  h << "<div class=\"filters\" id=\"verdict-filters\">";
  select("kernel", "kernel", kernels, "");
  select("op", "op", ops, "");
  select("dtype", "type", dtypes, "");
  select("outcome", "outcome", {"pass", "fail", "error", "skip", "incomplete"},
         "<option value=\"problems\">fail, error, incomplete</option>");
  h << "<label>text <input id=\"f-text\" type=\"search\" size=\"14\"></label>"
       "<span id=\"f-count\"></span></div>\n";
  h << "<div class=\"scroll\"><table "
       "id=\"verdict-table\"><thead><tr><th>outcome</th><th>kernel</th>"
       "<th>property</th><th>op</th><th>type</th><th>measured</th><th>bound</th><th>unit</th>"
       "<th>rule</th></tr></thead>\n";
  std::vector<std::pair<const RunRecord*, const Verdict*>> order;
  for (const auto& r : m.runs)
    for (const auto& v : r.verdicts) order.push_back({&r, &v});
  std::stable_sort(order.begin(), order.end(), [](auto& a, auto& b) {
    return rank_outcome(a.second->outcome) < rank_outcome(b.second->outcome);
  });
  for (const auto& [r, v] : order) {
    const char* o = name_of(v->outcome);
    std::string ce = bad(v->outcome) ? v->counterexample : v->worst_case;
    if (ce.size() > 4000) ce = ce.substr(0, 4000) + " ...";
    h << "<tbody class=\"v\" data-kernel=\"" << esc(r->kernel) << "\" data-op=\"" << esc(v->op)
      << "\" data-dtype=\"" << esc(v->dtype) << "\" data-outcome=\"" << o << "\"><tr class=\"" << o
      << "\"><td>" << o << "</td><td>" << esc(r->kernel) << "</td><td><code class=\"prop\">"
      << breakable(v->property) << "</code></td><td>" << esc(v->op) << "</td><td>" << esc(v->dtype)
      << "</td><td class=\"num\">" << num(v->measured) << "</td><td class=\"num\">" << num(v->bound)
      << "</td><td class=\"unit\">" << esc(unit_of(*v)) << "</td><td><a href=\"#"
      << rule_anchor(m, v->rule.id) << "\">" << esc(v->rule.id)
      << "</a></td></tr>\n<tr class=\"detail\"><td colspan=\"9\">";
    if (bad(v->outcome))
      h << "<b>What went wrong:</b> <span class=\"statement\">"
        << esc(plain_statement(r->kernel, *v)) << "</span><br><b>Claim:</b> ";
    h << esc(v->claim);
    if (!ce.empty())
      h << "<br><b>" << (bad(v->outcome) ? "counterexample" : "worst case")
        << ":</b><pre class=\"ce\">" << esc(ce) << "</pre>";
    if (!v->note.empty()) h << "<br><small>" << esc(v->note) << "</small>";
    h << "</td></tr></tbody>\n";
  }
  h << "</table></div>\n<p id=\"f-empty\" class=\"pass\" style=\"display:none\">No verdict "
       "matches the filters: with the default filter, no claim failed. Choose outcome \"all\" "
       "or \"pass\" to see the "
    << order.size()
    << " verdicts, each with its claim, measured value, bound and worst case.</p>\n";
}

// The coverage tables of the runs' coverage verdicts (attention_v2.coverage):
// per kernel, one row per feature and one column per input type, the cases
// run; feature pairs in a collapsed table below; a cell short of its
// requirement is marked.
void coverage_section(std::ostream& h, const Model& m) {
  bool any = false;
  for (const auto& r : m.runs)
    for (const auto& v : r.verdicts) any = any || !v.coverage.empty();
  if (!any) return;
  h << "<h3 id=\"coverage\">Coverage: cases run per declared feature</h3>\n<div "
       "class=\"explain\"><p>How many of the attention cases actually run had each feature the "
       "kernel declares, and each pair of them, per input type. Every cell must reach the "
       "required count (the spec's <code>[attention] pair_cases</code>); a cell marked "
       "<b>short</b> makes the run incomplete.</p></div>\n";
  for (const auto& r : m.runs) {
    std::vector<const Verdict*> cov;
    for (const auto& v : r.verdicts)
      if (!v.coverage.empty()) cov.push_back(&v);
    if (cov.empty()) continue;
    std::vector<std::string> cells;  // in the first verdict's order, then any others
    std::set<std::string> seen;
    for (const Verdict* v : cov)
      for (const auto& c : v->coverage)
        if (seen.insert(c.cell).second) cells.push_back(c.cell);
    auto table = [&](bool pairs) {
      h << "<div class=\"scroll\"><table><tr><th>" << (pairs ? "feature pair" : "feature")
        << "</th>";
      for (const Verdict* v : cov) h << "<th>" << esc(v->dtype) << "</th>";
      h << "</tr>\n";
      for (const auto& cell : cells) {
        if ((cell.find('+') != std::string::npos) != pairs) continue;
        h << "<tr><td><code>" << esc(cell) << "</code></td>";
        for (const Verdict* v : cov) {
          const auto it = std::find_if(v->coverage.begin(), v->coverage.end(),
                                       [&](const CoverageCell& c) { return c.cell == cell; });
          if (it == v->coverage.end()) {
            h << "<td class=\"num\">&ndash;</td>";
            continue;
          }
          const bool short_ = it->cases < it->required;
          h << "<td class=\"num" << (short_ ? " fail" : "") << "\">" << it->cases
            << (short_ ? " short (of " + std::to_string(it->required) + ")" : "") << "</td>";
        }
        h << "</tr>\n";
      }
      h << "</table></div>\n";
    };
    h << "<p><b>" << esc(r.kernel) << "</b></p>\n";
    table(false);
    h << "<details><summary>feature pairs</summary>\n";
    table(true);
    h << "</details>\n";
  }
}

void rules_section(std::ostream& h, const Model& m, const Docs& docs) {
  h << "<h2 id=\"rules\">Rules and theorems</h2>\n<div class=\"explain\"><p>Every rule a verdict "
       "above is held to, with where its bound comes from. The theorems are stated, with the "
       "paper's wording and the project's sharper forms, in "
    << linkify("docs/theory.md", docs) << " (T1 to T8); the variants' claims in "
    << linkify("docs/variants.md", docs)
    << ".</p></div>\n<div class=\"scroll\"><table><tr><th>rule</th>"
       "<th>where the bound comes from</th></tr>\n";
  for (std::size_t i = 0; i < m.rules.size(); ++i)
    h << "<tr id=\"rule-" << i << "\"><td><code class=\"id\">" << esc(m.rules[i].id)
      << "</code></td><td>" << linkify(m.rules[i].source, docs) << "</td></tr>\n";
  h << "</table></div>\n";
}

// Each sweep series in its own colour, solid with points; its bound (the
// sweep's per-row bound column: T7 at each row's spread, T1's upper bound)
// dashed in the same colour.
void sweep_plot(std::ostream& h, Plotter& P, const std::vector<SweepSeries>& sw, Section sec,
                Plot plot, const std::string& bound_word) {
  // The theory curves first, each its own colour; then each series and its bound.
  int color = 0;
  for (auto& s : plot.series) s.color = s.color >= 0 ? s.color : color++;
  for (const auto& s : plot.series) color = std::max(color, s.color + 1);
  for (const auto& s : sw)
    if (section_of(s) == sec) {
      plot.series.push_back({series_name(s), s.pts, Kind::data, color});
      if (!s.bound.empty())
        plot.series.push_back({series_name(s) + " " + bound_word, s.bound, Kind::theory, color});
      ++color;
    }
  h << P.svg(plot);
}

bool any_of(const std::vector<SweepSeries>& sw, Section sec) {
  return std::any_of(sw.begin(), sw.end(), [&](auto& s) { return section_of(s) == sec; });
}

std::string no_sweep(bool sweep_given, const std::string& wanted) {
  if (sweep_given)
    return "<p class=\"noplot\">The sweep given has no series for this section (it needs series "
           "with " +
           esc(wanted) + "; " + doc("docs/report-inputs.md") + "). Only the theory is drawn.</p>\n";
  return "<p class=\"noplot\">No sweep data for this section: no sweep was given (<code>--sweep "
         "sweep.json</code>, written by <code>softmax-audit sweep</code>). Only the theory is "
         "drawn.</p>\n";
}

// A dispersion symbol ("->0.82 ok") on two lines, so the matrix fits 800 px.
std::string sym_html(const std::string& sym) {
  const auto sp = sym.find(' ');
  return sp == std::string::npos ? esc(sym)
                                 : esc(sym.substr(0, sp)) + "<br>" + esc(sym.substr(sp + 1));
}

// Does the largest weight survive growing n? Every variant's dispersion curve
// at the gap nearest 2 (n - 1 logits at the base, the top one g above), over
// T1's bound for a spread of g (which softmax meets with equality).
void variant_sharpness(std::ostream& h, Plotter& P, const VariantMatrix& vm) {
  double gap = NAN;
  for (const auto& r : vm.rows)
    for (const auto& c : r.curves)
      if (std::isfinite(c.gap) && (!std::isfinite(gap) || std::abs(c.gap - 2) < std::abs(gap - 2)))
        gap = c.gap;
  if (!std::isfinite(gap)) return;
  h << "<h3 id=\"variant-sharpness\">Does the top item stay sharp as n grows?</h3>\n<div "
       "class=\"explain\"><p>The largest weight of each variant on rows of n &minus; 1 equal "
       "logits and one that leads them by g = "
    << num(gap, 3)
    << " (the dispersion columns' rows, evaluated in float64), against n, over the bound "
       "of "
    << doc("docs/theory.md T1") << " for a spread of g, which softmax meets, and "
    << doc("docs/theory.md T2")
    << "'s size n* past which softmax gives no weight above bfloat16's 2<sup>-8</sup>. A position- "
       "or length-dependent temperature "
       "(SSMax, log-n scaling, Llama 4's step form) keeps the top item only if its curve "
       "levels off instead of following the bound down; "
    << doc("docs/variants.md") << " tabulates the same curves.</p></div>\n";
  Plot p{"Largest weight against n, gap g = " + num(gap, 3),
         "n (row length, elements)",
         "largest weight (dimensionless)",
         true,
         true,
         {},
         "outside right"};
  Series t1{"T1 bound, spread g", {}, Kind::theory};
  std::vector<double> ns;
  for (const auto& r : vm.rows)
    for (const auto& c : r.curves)
      if (c.gap == gap)
        for (const auto& [n, w] : c.pts) ns.push_back(n);
  std::sort(ns.begin(), ns.end());
  ns.erase(std::unique(ns.begin(), ns.end()), ns.end());
  for (double n : ns) t1.pts.emplace_back(n, theory::dispersion_bounds(n, gap, 1.0).upper);
  p.series.push_back(t1);
  // T2: past n* (spread g, bfloat16's 2^-8) softmax cannot give any weight above 2^-8.
  const double nsb = theory::critical_size(DType::bfloat16, gap, 1.0);
  if (!ns.empty() && nsb <= ns.back()) {
    Series star{"T2 n* (bfloat16, spread g)", {{nsb, 1e-12}, {nsb, 1.0}}, Kind::marker};
    p.series.push_back(star);
  }
  // Down to the smallest weight any curve reaches (one-hot curves aside).
  double lowest = 1.0;
  for (const auto& r : vm.rows)
    for (const auto& c : r.curves)
      if (c.gap == gap)
        for (const auto& pt : c.pts)
          if (pt.second > 0) lowest = std::min(lowest, pt.second);
  p.yrange = std::pair{std::max(lowest / 2, 1e-300), 1.5};
  std::ostringstream table;
  table << "<table><tr><th>variant</th>";
  std::vector<double> cols;
  for (double n : ns)
    if (n == 16 || n == 1024 || n == 65536 || n == ns.back()) cols.push_back(n);
  for (double n : cols) table << "<th>n = " << num(n, 8) << "</th>";
  table << "</tr>\n";
  for (const auto& r : vm.rows)
    for (const auto& c : r.curves) {
      if (c.gap != gap) continue;
      p.series.push_back({r.name, c.pts, Kind::data});
      table << "<tr><td>" << esc(r.name) << "</td>";
      for (double n : cols) {
        double w = NAN;
        for (const auto& [x, y] : c.pts)
          if (x == n) w = y;
        table << "<td class=\"num\">" << num(w, 3) << "</td>";
      }
      table << "</tr>\n";
    }
  table << "</table>\n";
  h << P.svg(p) << table.str();
}

void variants_section(std::ostream& h, Plotter& P, const Model& m) {
  const VariantMatrix& vm = m.variants;
  h << "<h2 id=\"variants\">7. Softmax variants</h2>\n<div class=\"explain\"><p>Alternatives to "
       "softmax, each fuzzed against every property of the matrix (<code>softmax-audit fuzz"
       "</code>; "
    << doc("docs/variants.md")
    << "). Legend: <b>&#10003;</b> holds on every generated case; <b>&#10007;</b> (on <span "
       "style=\"background:#f4b6b6\">red</span>) a <b>failed claim</b>: the variant fails a "
       "property it claims (special values, its own rounding or streaming bound, its theory "
       "prediction), a defect that makes <code>fuzz</code> exit 1; <b>&#9675;</b> a "
       "<b>finding</b>: a property of softmax the formulation does not keep (exit 0); failing "
       "cells link to the shrunk counterexample; <b>&ndash;</b> does not apply; <b>!</b> the "
       "variant raised an error. Dispersion columns give the measured limit of the largest "
       "weight as n grows (&rarr;0 disperses, &rarr;1 sharpens, &rarr;c stays at c) and "
       "&#10003;/&#10007;/&#9675; whether theory predicted it. The <b>stream</b> column: "
       "<b>yes</b> the variant supplies a streaming state (push/merge) and every split of a row "
       "merged to the whole row; <b>no</b> the variant states its normaliser has no merge state; "
       "<b>n/s</b> not supplied. A name marked &#9888; is a deliberately wrong formulation. Hover "
       "a cell or header for its claim, a name for its formula and citation.</p></div>\n";
  if (!vm.given) {
    h << "<p class=\"noplot\">No variants matrix was given (<code>--variants "
         "matrix.json</code>, written by <code>softmax-audit fuzz --json</code>).</p>\n";
    return;
  }
  h << "<div class=\"scroll\"><table class=\"matrix\" id=\"variant-matrix\"><thead><tr>"
       "<th>variant</th>";
  for (const auto& c : vm.columns)
    h << "<th class=\"col\" title=\"" << esc(c[2]) << "\">" << esc(c[1]) << "</th>";
  h << "</tr></thead><tbody>\n";
  int ce_id = 0;
  std::ostringstream ces;
  for (const auto& r : vm.rows) {
    std::string name = esc(r.name);  // may break after an underscore
    for (std::size_t at = name.find('_'); at != std::string::npos; at = name.find('_', at + 6))
      name.insert(at + 1, "<wbr>");
    h << "<tr><td title=\"" << esc(r.formula + (r.citation.empty() ? "" : " [" + r.citation + "]"))
      << "\">" << (r.wrong_formulation ? "&#9888; " : "") << name << "</td>";
    for (const auto& c : r.cells) {
      const bool failing = c.outcome == "fail" || c.outcome == "error";
      std::string title = c.claim;
      if (!c.note.empty()) title += " — " + c.note;
      h << "<td class=\"sym " << (failing && c.claimed ? "claimedfail" : esc(c.outcome))
        << "\" title=\"" << esc(title) << "\">";
      if (failing) {
        const std::string id = "vce-" + std::to_string(ce_id++);
        h << "<a href=\"#" << id << "\">" << sym_html(c.symbol) << "</a>";
        ces << "<li id=\"" << id << "\"><b>" << esc(r.name) << "</b> / <code>" << esc(c.id)
            << "</code>" << (c.claimed ? " (claimed: a defect)" : " (finding)") << ": "
            << esc(c.claim) << "<pre class=\"ce\">"
            << esc(c.counterexample.empty() ? c.note : c.counterexample) << "</pre></li>\n";
      } else {
        h << (c.symbol.empty() ? std::string("\u00b7") : sym_html(c.symbol));
      }
      h << "</td>";
    }
    h << "</tr>\n";
  }
  h << "</tbody></table></div>\n<details><summary>Columns: what each claims</summary><ul>";
  for (const auto& c : vm.columns)
    h << "<li><b>" << esc(c[1]) << "</b> (<code>" << esc(c[0]) << "</code>): " << esc(c[2])
      << "</li>";
  h << "</ul></details>\n";
  for (const auto& r : vm.rows)
    if (r.wrong_formulation)
      h << "<p>&#9888; <b>" << esc(r.name) << "</b> deliberately mis-states " << esc(r.wrong_of)
        << ".</p>\n";
  const std::string list = ces.str();
  if (!list.empty())
    h << "<h3>Counterexamples of the variants (shrunk)</h3><ul>\n" << list << "</ul>\n";
  variant_sharpness(h, P, vm);
}

void error_section(std::ostream& h, Plotter& P, const std::vector<SweepSeries>& sw,
                   bool sweep_given) {
  h << "<h2 id=\"error\">2. Error against n, with the rounding-error bounds</h2>\n"
       "<div class=\"explain\"><p>How far each kernel's softmax is from the exact value (computed "
       "with 128-bit MPFR) as the row length n grows: the largest error over the row relative to "
       "its largest weight (max-norm, dimensionless). The dashed line of the same colour as a "
       "series is the a-priori bound of Blanchard, Higham &amp; Higham (2021) for the shifted "
       "softmax with a faithful exp that the t7_apriori rule applies to that series' own rows, "
       "(n + 4 + 2&delta;)&middot;u with &delta; each row's measured spread ("
    << doc("docs/theory.md T7")
    << "; "
       "u the unit roundoff: 2<sup>-24</sup> for float32, plus 2<sup>-8</sup> for bfloat16 "
       "outputs). A series below its own line is within what rounding can explain; the bound is "
       "pessimistic (errors typically grow like &radic;n) and says nothing once it passes 1.</p>"
       "</div>\n";
  Plot p{"Softmax error against n",
         "n (row length, elements)",
         "relative error (max-norm, dimensionless)",
         true,
         true,
         {},
         "top left"};
  if (!any_of(sw, Section::error)) {
    h << no_sweep(sweep_given, "a metric containing \"error\" or \"ulp\"")
      << "<p>Drawn for illustration only: the bound at spread &delta; = 10.</p>\n";
    const auto ns = logspace(1, 1 << 20, 60);
    for (auto [name, t] :
         {std::pair{"T7 bound float32 (illustration, delta=10)", DType::float32},
          std::pair{"T7 bound bfloat16 (illustration, delta=10)", DType::bfloat16}}) {
      Series s{name, {}, Kind::theory};
      for (double n : ns)
        s.pts.emplace_back(n, theory::shifted_softmax_error_bound(n, 10.0, unit_roundoff(t), 2.0) +
                                  (t == DType::bfloat16 ? unit_roundoff(DType::bfloat16) : 0.0));
      p.series.push_back(s);
    }
  }
  sweep_plot(h, P, sw, Section::error, p, "T7 bound");
}

void dispersion_section(std::ostream& h, Plotter& P, const std::vector<SweepSeries>& sw,
                        bool sweep_given) {
  h << "<h2 id=\"dispersion\">3. Dispersion: the largest coefficient against n (T1, T2)</h2>\n"
       "<p>Statement: "
    << doc("docs/theory.md T1 and docs/theory.md T2")
    << ".</p>\n"
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
  Plot p{"Largest softmax weight against n",
         "n (row length, elements)",
         "largest weight (probability, dimensionless)",
         true,
         true,
         {},
         "bottom left"};
  const auto ns = logspace(1, 1e9, 80);
  for (double d : {2.28, 5.69, 14.78}) {
    Series s{"T1 upper bound, delta=" + num(d, 3), {}, Kind::theory};
    for (double n : ns) s.pts.emplace_back(n, theory::dispersion_bounds(n, d, 1.0).upper);
    p.series.push_back(s);
  }
  Series star{"n* (float32, delta=5.69)", {}, Kind::marker};
  const double ns32 = theory::critical_size(DType::float32, 5.69, 1.0);
  star.pts = {{ns32, 1e-12}, {ns32, 1.0}};
  p.series.push_back(star);
  Series starb{"n* (bfloat16, delta=5.69)", {}, Kind::marker};
  const double nsb = theory::critical_size(DType::bfloat16, 5.69, 1.0);
  starb.pts = {{nsb, 1e-12}, {nsb, 1.0}};
  p.series.push_back(starb);
  p.yrange = std::pair{1e-10, 1.5};
  if (!any_of(sw, Section::dispersion))
    h << no_sweep(sweep_given, "a metric containing \"max_weight\"");
  sweep_plot(h, P, sw, Section::dispersion, p, "T1 bound");
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

void entropy_section(std::ostream& h, Plotter& P, const std::vector<SweepSeries>& sw,
                     bool sweep_given) {
  h << "<h2 id=\"entropy\">4. Entropy against temperature (T4)</h2>\n"
       "<p>Statement: "
    << doc("docs/theory.md T4")
    << ".</p>\n"
       "<div class=\"explain\"><p>Proposition 3.2: lowering the temperature &theta; always lowers "
       "the entropy of the softmax (dH/d&theta; = Var<sub>p</sub>[l]/&theta;<sup>3</sup> &ge; 0), "
       "from log n at high temperature down to log(number of tied maxima) as &theta; &rarr; 0. "
       "The curves are exact for a two-logit row with gap 5 and for fixed rows of 16 and 1024 "
       "logits "
       "in [&minus;3, 3]; the dotted lines are their ceilings log n. Lowering the temperature "
       "sharpens, but only as far as the logit spread allows (section 3). Measured series (the "
       "paper's Figure 5 on the audited kernel, from a sweep over temperatures; <code>audit</code> "
       "runs "
       "one at n = 2<sup>10</sup>) show the kernel's entropy, solid with points, on the exact "
       "entropy of the same rows, dashed in the same colour.</p></div>\n";
  Plot p{"Entropy against temperature",
         "temperature theta (dimensionless)",
         "entropy H (nats)",
         true,
         false,
         {},
         "bottom right"};
  const auto ts = logspace(0.01, 100, 80);
  Series two{"two logits, gap 5 (closed form)", {}, Kind::theory};
  for (double t : ts) two.pts.emplace_back(t, theory::two_logit_entropy(5.0 / t));
  p.series.push_back(two);
  for (int n : {16, 1024}) {
    const auto row = example_row(n);
    Series s{"fixed row, n=" + std::to_string(n), {}, Kind::theory};
    for (double t : ts)
      s.pts.emplace_back(t, theory::entropy_at(std::span<const double>(row), 1.0 / t));
    p.series.push_back(s);
    p.series.push_back({"ceiling log " + std::to_string(n),
                        {{0.01, std::log(n)}, {100, std::log(n)}},
                        Kind::marker});
  }
  if (!any_of(sw, Section::entropy_temperature))
    h << no_sweep(sweep_given, "a metric containing \"entropy\" with x = \"temperature\"");
  sweep_plot(h, P, sw, Section::entropy_temperature, p, "exact (MPFR)");
}

void adaptive_section(std::ostream& h, Plotter& P, const std::vector<SweepSeries>& sw) {
  h << "<h2 id=\"adaptive\">5. Adaptive temperature: the map &beta;(H) and its effect (T5)</h2>\n"
       "<p>Statement: "
    << doc("docs/theory.md T5")
    << ".</p>\n"
       "<div class=\"explain\"><p>The paper's adaptive temperature measures the entropy H of each "
       "softmax row and multiplies the logits by &beta;(H) = max(poly(H), 1) when H &gt; 0.5 "
       "(poly = &minus;0.037H<sup>4</sup> + 0.481H<sup>3</sup> &minus; 2.3H<sup>2</sup> + 4.917H "
       "&minus; 1.791), else 1. &beta; never goes below 1, so the correction can only sharpen. "
       "It acts only for H between about 0.85 and 5.94 and is largest (about 2.42) near H = 4.41: "
       "a near-uniform row of more than about 380 items (H &gt; 5.94) gets <b>no correction at "
       "all</b>. The second plot shows this on fixed rows of growing length.</p></div>\n";
  Plot p{"Adaptive inverse temperature beta(H)",
         "entropy H (nats)",
         "beta (inverse temperature, dimensionless)",
         false,
         false,
         {},
         "top right"};
  Series b{"beta(H) (paper, eq. 18)", {}, Kind::theory};
  for (int i = 0; i <= 400; ++i) {
    const double H = 7.0 * i / 400;
    b.pts.emplace_back(H, theory::adaptive_beta(H));
  }
  p.series.push_back(b);
  p.yrange = std::pair{0.8, 2.6};
  h << P.svg(p);
  Plot e{"Entropy before and after the adaptive correction",
         "n (row length, elements)",
         "entropy H (nats); beta (dimensionless)",
         true,
         false,
         {},
         "top left"};
  Series before{"H before", {}, Kind::theory}, after{"H after", {}, Kind::theory},
      beta{"beta applied", {}, Kind::marker};
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
    Plot m{"Measured adaptive-temperature series",
           "x (as the sweep names it)",
           "value (as the sweep names it)",
           false,
           false,
           {},
           "top right"};
    sweep_plot(h, P, sw, Section::adaptive, m, "bound");
  }
}

void streamed_section(std::ostream& h, Plotter& P, const std::vector<SweepSeries>& sw) {
  h << "<h2 id=\"streamed\">6. Streamed entropy: error against n (T6)</h2>\n"
       "<p>Statement: "
    << doc("docs/theory.md T6")
    << ".</p>\n"
       "<div class=\"explain\"><p>Entropy can be computed in one pass with three numbers per row "
       "(running maximum m, S = &Sigma;e<sup>l&minus;m</sup>, T = "
       "&Sigma;e<sup>l&minus;m</sup>(l&minus;m)), "
       "as H = log S &minus; T/S, which makes adaptive temperature usable in flash-style "
       "attention. "
       "This plot shows how far streamed kernels are from the exact entropy as n grows; the "
       "algebraically equal form (m + log S) &minus; U/S cancels catastrophically for large logits "
       "and would show here as a jump.</p></div>\n";
  if (!any_of(sw, Section::streamed)) {
    h << no_sweep(!sw.empty(), "a metric containing \"streamed\"");
    return;
  }
  Plot p{"Streamed entropy error against n",
         "n (row length, elements)",
         "absolute error (nats)",
         true,
         true,
         {},
         "top left"};
  sweep_plot(h, P, sw, Section::streamed, p, "bound");
}

void other_section(std::ostream& h, Plotter& P, const std::vector<SweepSeries>& sw) {
  if (!any_of(sw, Section::other)) return;
  h << "<h2 id=\"other\">Other measured series</h2>\n<p>Series from the sweep whose metric the "
       "report does not place in a section above.</p>\n";
  Plot p{
      "Other series", "x (as the sweep names it)", "value (as the sweep names it)", true, false, {},
      "top left"};
  sweep_plot(h, P, sw, Section::other, p, "bound");
}

json series_json(const std::vector<std::pair<double, double>>& pts) {
  json a = json::array();
  for (auto [x, y] : pts) a.push_back({number_to_json(x), number_to_json(y)});
  return a;
}

const char* section_name(Section s) {
  switch (s) {
    case Section::error:
      return "error";
    case Section::dispersion:
      return "dispersion";
    case Section::entropy_temperature:
      return "entropy_temperature";
    case Section::adaptive:
      return "adaptive";
    case Section::streamed:
      return "streamed";
    case Section::other:
      return "other";
  }
  return "other";
}

// The JSON twin: everything the page states, in docs/schema/report.schema.json's shape.
json model_json(const Model& m, const ReportInputs& in) {
  json d;
  d["format"] = "softmax-audit-report";
  d["version"] = 1;
  d["title"] = m.title;
  d["generated"] = m.generated;
  d["status"] = m.status;
  d["inputs"] = {{"results", in.results},
                 {"sweep", in.sweep.empty() ? json() : json(in.sweep)},
                 {"more_sweeps", in.more_sweeps},
                 {"variants", in.variants.empty() ? json() : json(in.variants)}};
  d["provenance"] = {{"report", m.report_provenance}, {"checks", json::array()}};
  d["kernels"] = json::array();
  d["verdicts"] = json::array();
  for (const auto& r : m.runs) {
    json p = r.provenance;
    p["kernel"] = r.kernel;
    d["provenance"]["checks"].push_back(p);
    const Tally t = tally(r.verdicts);
    const auto [ops, dtypes] = checked_ops_dtypes(r);
    d["kernels"].push_back({{"name", r.kernel},
                            {"origin", r.origin},
                            {"description", r.description},
                            {"ops_checked", ops},
                            {"dtypes_checked", dtypes},
                            {"summary",
                             {{"pass", t.pass},
                              {"fail", t.fail},
                              {"skip", t.skip},
                              {"error", t.error},
                              {"incomplete", t.incomplete},
                              {"status", status_of(t)}}},
                            {"rules_applied", rules_applied(r)},
                            {"processes", r.processes},
                            {"crashes", r.crashes},
                            {"hangs", r.hangs},
                            {"seconds", r.seconds}});
    for (const auto& v : r.verdicts) {
      json j = to_json(v);
      j["kernel"] = r.kernel;
      j["unit"] = unit_of(v);
      if (bad(v.outcome)) j["statement"] = plain_statement(r.kernel, v);
      d["verdicts"].push_back(j);
    }
  }
  d["not_audited"] = json::array();
  for (const auto& n : m.not_audited)
    d["not_audited"].push_back({{"name", n.name}, {"reason", n.reason}});
  d["not_applicable"] = json::array();
  for (const auto& u : unchecked_of(m))
    d["not_applicable"].push_back({{"kernel", u.kernel},
                                   {"reason", u.reason},
                                   {"ops", u.ops},
                                   {"dtypes", u.dtypes},
                                   {"count", u.count}});
  d["rules"] = json::array();
  for (const auto& r : m.rules) d["rules"].push_back({{"id", r.id}, {"source", r.source}});
  if (!m.variants.given) {
    d["variants"] = nullptr;
  } else {
    json v = {{"config", m.variants.config}, {"columns", json::array()}, {"rows", json::array()}};
    for (const auto& c : m.variants.columns)
      v["columns"].push_back({{"id", c[0]}, {"column", c[1]}, {"claim", c[2]}});
    for (const auto& r : m.variants.rows) {
      json row = {{"name", r.name},
                  {"formula", r.formula},
                  {"origin", r.origin},
                  {"citation", r.citation},
                  {"streamable", r.streamable},
                  {"wrong_formulation", r.wrong_formulation},
                  {"wrong_of", r.wrong_of},
                  {"cells", json::object()}};
      for (const auto& c : r.cells)
        if (!c.outcome.empty())
          row["cells"][c.id] = {{"symbol", c.symbol},
                                {"outcome", c.outcome},
                                {"claimed", c.claimed},
                                {"claim", c.claim},
                                {"measured", number_to_json(c.measured)},
                                {"bound", number_to_json(c.bound)},
                                {"counterexample", c.counterexample},
                                {"note", c.note}};
      v["rows"].push_back(row);
    }
    d["variants"] = v;
  }
  if (in.sweep.empty()) {
    d["sweep"] = nullptr;
  } else {
    json s = {{"series", json::array()}};
    for (const auto& x : m.sweep)
      s["series"].push_back({{"name", series_name(x)},
                             {"kernel", x.kernel},
                             {"dtype", x.dtype},
                             {"metric", x.metric},
                             {"section", section_name(section_of(x))},
                             {"points", series_json(x.pts)},
                             {"bound", series_json(x.bound)}});
    d["sweep"] = s;
  }
  d["comparison"] = nullptr;
  return d;
}

// Per kernel, what its check drew its cases from and the binary it called,
// read from a report twin's provenance (empty where not recorded).
struct RunIdentity {
  std::string seed, cases, sha256;
};
std::map<std::string, RunIdentity> runs_of(const json& doc) {
  std::map<std::string, RunIdentity> out;
  if (!doc.contains("provenance") || !doc["provenance"].is_object()) return out;
  const json& checks = doc["provenance"].value("checks", json());
  if (!checks.is_array()) return out;
  for (const auto& p : checks) {
    if (!p.is_object()) continue;
    const json lib = p.value("kernel_library", json());
    out[sget(p, "kernel", "")] = {sget(p, "seed", ""), sget(p, "cases", ""),
                                  lib.is_object() ? sget(lib, "sha256", "") : std::string()};
  }
  return out;
}

std::string key_of(const json& v) {
  return sget(v, "kernel", "") + "\x1f" + sget(v, "property", "") + "\x1f" + sget(v, "op", "") +
         "\x1f" + sget(v, "dtype", "");
}
bool bad_outcome(const std::string& o) { return o == "fail" || o == "error"; }
double num_of(const json& v, const char* k) {
  try {
    return number_from_json(v.value(k, json()));
  } catch (...) {
    return NAN;
  }
}

// One verdict per (kernel, property, op, dtype): a failing one first, else the
// one closest to its bound.
std::map<std::string, json> verdicts_by_key(const json& doc, const char* which) {
  if (!doc.is_object() || sget(doc, "format", "") != "softmax-audit-report" ||
      !doc.contains("verdicts") || !doc["verdicts"].is_array())
    throw std::invalid_argument(std::string(which) +
                                ": expected a report's JSON twin (\"format\": "
                                "\"softmax-audit-report\", written next to the HTML by "
                                "`softmax-audit report`)");
  std::map<std::string, json> out;
  for (const auto& v : doc["verdicts"]) {
    if (!v.is_object()) continue;
    const std::string k = key_of(v);
    auto it = out.find(k);
    if (it == out.end()) {
      out[k] = v;
      continue;
    }
    const bool nb = bad_outcome(sget(v, "outcome", "")),
               ob = bad_outcome(sget(it->second, "outcome", ""));
    const double nr = num_of(v, "measured") / num_of(v, "bound");
    const double orr = num_of(it->second, "measured") / num_of(it->second, "bound");
    if ((nb && !ob) || (nb == ob && nr > orr)) it->second = v;
  }
  return out;
}

json brief(const json& v) {
  return {{"kernel", sget(v, "kernel", "")},
          {"property", sget(v, "property", "")},
          {"op", sget(v, "op", "")},
          {"dtype", sget(v, "dtype", "")},
          {"outcome", sget(v, "outcome", "")},
          {"measured", v.value("measured", json())},
          {"bound", v.value("bound", json())},
          {"unit", sget(v, "unit", "")},
          {"counterexample", sget(v, "counterexample", "")}};
}

// One kernel whose run differs between two audits, in words: the seed or
// case count (other inputs drawn) and the kernel library's SHA-256.
std::string run_difference(const json& d) {
  auto or_none = [](const std::string& x) { return x.empty() ? std::string("not recorded") : x; };
  std::string s = "kernel " + sget(d, "kernel", "?") + ":";
  if (sget(d, "seed_before", "") != sget(d, "seed_after", ""))
    s += " seed " + or_none(sget(d, "seed_before", "")) + " -> " +
         or_none(sget(d, "seed_after", "")) + ";";
  if (sget(d, "cases_before", "") != sget(d, "cases_after", ""))
    s += " cases " + or_none(sget(d, "cases_before", "")) + " -> " +
         or_none(sget(d, "cases_after", "")) + ";";
  if (bget(d, "library_changed"))
    s += " kernel library SHA-256 " + or_none(sget(d, "sha256_before", "")) + " -> " +
         or_none(sget(d, "sha256_after", "")) + ";";
  s.pop_back();
  if (bget(d, "different_cases"))
    s += ". The runs drew different cases: its measurements are not compared (a difference is "
         "other inputs, not error growth), and a new or fixed failure may be one the other run "
         "did not draw";
  else
    s += ". Same cases, another binary: the changes below are the library's";
  return s;
}

void comparison_section(std::ostream& h, const json& c) {
  h << "<section id=\"comparison\"><h2>Changes since the earlier audit</h2>\n<p>Compared with "
       "the audit generated "
    << esc(sget(c["before"], "generated", "?")) << " (commit <code>"
    << esc(sget(c["before"], "git_commit", "?")) << "</code>, status "
    << esc(sget(c["before"], "status", "?")) << ").</p>\n";
  if (c.contains("runs_differ") && !c["runs_differ"].empty()) {
    h << "<div class=\"headline incomplete\" id=\"runs-differ\"><p>The two audits did not run "
         "the same way:</p><ul>\n";
    for (const auto& d : c["runs_differ"]) h << "<li>" << esc(run_difference(d)) << ".</li>\n";
    h << "</ul></div>\n";
  }
  auto rows = [&](const char* title, const json& list, bool growth) {
    h << "<h3>" << title << " (" << list.size() << ")</h3>\n";
    if (list.empty()) return;
    h << "<div class=\"scroll\"><table><tr><th>kernel</th><th>property</th><th>op</th><th>type</th>"
      << (growth ? "<th>before</th><th>after</th><th>factor</th>"
                 : "<th>before</th><th>now</th><th>measured</th><th>bound</th>")
      << "<th>unit</th></tr>\n";
    for (const auto& v : list) {
      h << "<tr><td>" << esc(sget(v, "kernel", "")) << "</td><td><code>"
        << esc(sget(v, "property", "")) << "</code></td><td>" << esc(sget(v, "op", ""))
        << "</td><td>" << esc(sget(v, "dtype", "")) << "</td>";
      if (growth)
        h << "<td class=\"num\">" << num(num_of(v, "before")) << "</td><td class=\"num\">"
          << num(num_of(v, "after")) << "</td><td class=\"num\">"
          << (v.contains("factor") ? num(num_of(v, "factor"), 3) : std::string("&ndash;"))
          << "</td>";
      else
        h << "<td>" << esc(sget(v, "outcome_before", "")) << "</td><td>"
          << esc(sget(v, "outcome", ""))
          << (bget(v, "different_cases") ? " <small>(the runs drew different cases)</small>" : "")
          << "</td><td class=\"num\">" << num(num_of(v, "measured")) << "</td><td class=\"num\">"
          << num(num_of(v, "bound")) << "</td>";
      h << "<td class=\"unit\">" << esc(sget(v, "unit", "")) << "</td></tr>\n";
    }
    h << "</table></div>\n";
  };
  rows("New failures", c["new_failures"], false);
  rows("Fixed failures", c["fixed_failures"], false);
  rows("Error growth (measured grew by more than 10%, same cases)", c["error_growth"], true);
  if (c.contains("different_cases") && !c["different_cases"].empty())
    rows("Different cases (measured differs by more than 10% on other inputs: not compared)",
         c["different_cases"], true);
  h << "<p>Checks added: " << c.value("checks_added", 0)
    << "; removed: " << c.value("checks_removed", 0)
    << ". Kernels added: " << esc(c["kernels_added"].dump())
    << "; removed: " << esc(c["kernels_removed"].dump()) << ".</p></section>\n";
}

}  // namespace

json compare_reports(const json& before, const json& after) {
  const auto a = verdicts_by_key(before, "--compare (the earlier report)");
  const auto b = verdicts_by_key(after, "the new report");
  json c;
  auto head = [](const json& d) {
    return json{{"generated", sget(d, "generated", "")},
                {"status", sget(d, "status", "")},
                {"git_commit", d.contains("provenance") && d["provenance"].is_object() &&
                                       d["provenance"].contains("report") &&
                                       d["provenance"]["report"].is_object()
                                   ? sget(d["provenance"]["report"], "git_commit", "")
                                   : std::string()}};
  };
  c["before"] = head(before);
  c["after"] = head(after);
  c["new_failures"] = json::array();
  c["fixed_failures"] = json::array();
  c["error_growth"] = json::array();
  // What each kernel's check drew its cases from (seed, cases) and which
  // binary it called (the library's SHA-256): a kernel whose seed or case
  // count changed was run on other inputs, so its measurements are not
  // comparable and a change in them is not error growth.
  const auto ra = runs_of(before), rb = runs_of(after);
  c["runs_differ"] = json::array();
  std::set<std::string> other_cases;
  for (const auto& [k, x] : rb) {
    const auto it = ra.find(k);
    if (it == ra.end()) continue;
    const RunIdentity& w = it->second;
    if (w.seed == x.seed && w.cases == x.cases && w.sha256 == x.sha256) continue;
    const bool drawn = w.seed != x.seed || w.cases != x.cases;
    if (drawn) other_cases.insert(k);
    c["runs_differ"].push_back({{"kernel", k},
                                {"seed_before", w.seed},
                                {"seed_after", x.seed},
                                {"cases_before", w.cases},
                                {"cases_after", x.cases},
                                {"sha256_before", w.sha256},
                                {"sha256_after", x.sha256},
                                {"different_cases", drawn},
                                {"library_changed", w.sha256 != x.sha256}});
  }
  c["different_cases"] = json::array();
  int added = 0, removed = 0;
  std::set<std::string> ka, kb;
  for (const auto& [k, v] : a) ka.insert(sget(v, "kernel", ""));
  for (const auto& [k, v] : b) kb.insert(sget(v, "kernel", ""));
  for (const auto& [k, v] : b) {
    const auto it = a.find(k);
    const std::string now = sget(v, "outcome", "");
    const std::string was = it == a.end() ? "absent" : sget(it->second, "outcome", "");
    if (it == a.end()) ++added;
    const bool drawn = other_cases.count(sget(v, "kernel", "")) > 0;
    if (bad_outcome(now) && !bad_outcome(was)) {
      json x = brief(v);
      x["outcome_before"] = was;
      if (drawn) x["different_cases"] = true;
      c["new_failures"].push_back(x);
    } else if (!bad_outcome(now) && bad_outcome(was) && now == "pass") {
      json x = brief(v);
      x["outcome_before"] = was;
      if (drawn) x["different_cases"] = true;
      c["fixed_failures"].push_back(x);
    }
    if (it == a.end()) continue;
    const double m0 = num_of(it->second, "measured"), m1 = num_of(v, "measured");
    const std::string unit = sget(v, "unit", "");
    if (!(std::isfinite(m0) && std::isfinite(m1) && unit == sget(it->second, "unit", "") &&
          unit.find("seconds") == std::string::npos))
      continue;
    json x = brief(v);
    x["before"] = number_to_json(m0);
    x["after"] = number_to_json(m1);
    if (drawn) {
      // Other inputs: a different number, not a growth; listed when it differs by 10%.
      if (std::fabs(m1 - m0) > 0.1 * std::max(std::fabs(m0), std::fabs(m1)))
        c["different_cases"].push_back(x);
    } else if (m1 > 0 && m1 > 1.1 * std::max(m0, 0.0)) {
      x["factor"] = m0 > 0 ? number_to_json(m1 / m0) : json("Infinity");
      c["error_growth"].push_back(x);
    }
  }
  for (const auto& [k, v] : a)
    if (!b.count(k)) ++removed;
  std::sort(c["error_growth"].begin(), c["error_growth"].end(),
            [](const json& x, const json& y) { return num_of(x, "factor") > num_of(y, "factor"); });
  c["checks_added"] = added;
  c["checks_removed"] = removed;
  c["kernels_added"] = json::array();
  c["kernels_removed"] = json::array();
  for (const auto& k : kb)
    if (!ka.count(k)) c["kernels_added"].push_back(k);
  for (const auto& k : ka)
    if (!kb.count(k)) c["kernels_removed"].push_back(k);
  return c;
}

std::string describe_comparison(const json& c) {
  std::ostringstream os;
  auto line = [&](const json& v) {
    os << "  " << sget(v, "kernel", "") << " " << sget(v, "property", "") << " "
       << sget(v, "op", "") << " " << sget(v, "dtype", "");
  };
  os << "Compared with the audit of " << sget(c["before"], "generated", "?") << ":\n";
  const json none = json::array();
  const json& differ = c.contains("runs_differ") ? c["runs_differ"] : none;
  for (const auto& d : differ) os << "NOTE: " << run_difference(d) << "\n";
  auto marked = [&](const json& v) {
    line(v);
    if (bget(v, "different_cases")) os << " (the runs drew different cases)";
    os << "\n";
  };
  os << c["new_failures"].size() << " new failure(s)\n";
  for (const auto& v : c["new_failures"]) marked(v);
  os << c["fixed_failures"].size() << " fixed failure(s)\n";
  for (const auto& v : c["fixed_failures"]) marked(v);
  os << c["error_growth"].size() << " measurement(s) grew by more than 10%\n";
  for (const auto& v : c["error_growth"])
    line(v), os << ": " << num(num_of(v, "before")) << " -> " << num(num_of(v, "after")) << " "
                << sget(v, "unit", "") << "\n";
  const json& other = c.contains("different_cases") ? c["different_cases"] : none;
  if (!other.empty()) {
    os << other.size()
       << " measurement(s) differ by more than 10% between runs that drew different cases (not "
          "compared: other inputs, not error growth)\n";
    for (const auto& v : other)
      line(v), os << ": " << num(num_of(v, "before")) << " -> " << num(num_of(v, "after")) << " "
                  << sget(v, "unit", "") << "\n";
  }
  return os.str();
}

bool gnuplot_available(const std::string& program) {
  if (program.empty()) return false;
  return run_program(program, {"--version"}, "");
}

void write_report(const ReportInputs& in, std::ostream& h, json* doc_out) {
  Model m;
  m.title = in.title;
  for (const auto& f : in.results) {
    auto r = load_results(f);
    m.runs.insert(m.runs.end(), r.begin(), r.end());
  }
  for (const auto& s : in.not_audited) {
    const auto colon = s.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
      throw std::invalid_argument("--not-audited '" + s +
                                  "': expected NAME:REASON (e.g. 'cuda:no CUDA device')");
    m.not_audited.push_back({s.substr(0, colon), s.substr(colon + 1)});
  }
  if (!in.sweep.empty()) m.sweep = load_sweep(in.sweep);
  for (const auto& f : in.more_sweeps) {
    auto more = load_sweep(f);
    m.sweep.insert(m.sweep.end(), more.begin(), more.end());
  }
  m.variants = load_variants(in.variants);
  json before;
  if (!in.compare.empty())
    before = read_json(in.compare, "a report's JSON twin written by `softmax-audit report`");
  for (const auto& r : m.runs)
    for (const auto& v : r.verdicts)
      if (!v.rule.id.empty() && std::none_of(m.rules.begin(), m.rules.end(),
                                             [&](const Rule& x) { return x.id == v.rule.id; }))
        m.rules.push_back(v.rule);
  m.report_provenance = base_provenance();
  const std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  m.generated = when;
  m.status = status_of_model(m);
  const Docs docs = load_docs(in.docs_root, in.docs_href);
  g_docs = &docs;

  json doc = model_json(m, in);
  if (!in.compare.empty()) {
    try {
      doc["comparison"] = compare_reports(before, doc);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(in.compare + ": " + e.what());
    }
  }

  Plotter P(in.gnuplot);
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>"
    << esc(in.title) << "</title>\n"
    << kStyle << "</head><body>\n<h1>" << esc(in.title) << "</h1>\n";
  h << "<p>Generated " << when << " by softmax-audit " << esc(tool_version()) << ". Inputs: ";
  for (const auto& f : in.results) h << "<code>" << esc(f) << "</code> ";
  if (!in.sweep.empty()) h << "sweep <code>" << esc(in.sweep) << "</code> ";
  for (const auto& f : in.more_sweeps) h << "sweep <code>" << esc(f) << "</code> ";
  if (!in.variants.empty()) h << "variants <code>" << esc(in.variants) << "</code>";
  h << ". The same content as JSON: the <code>.json</code> file written next to this one.</p>\n";
  if (!P.ok())
    h << "<p class=\"noplot\"><b>gnuplot was not found</b>, so this report has no plots; every "
         "table is complete. Install Debian's <code>gnuplot-nox</code> and run "
         "<code>softmax-audit report</code> again for the plots.</p>\n";
  summary_section(h, m, docs);
  if (!in.compare.empty()) comparison_section(h, doc["comparison"]);
  provenance_section(h, m);
  not_audited_section(h, m);
  h << "<div class=\"explain\"><p><b>How to read the rest.</b> Softmax turns scores into "
       "weights that sum to 1. The paper \"Softmax is not Enough (for Sharp Size Generalisation)\" "
       "(Veli&#269;kovi&#263; et al., ICML 2025) proves that these weights must spread out as "
       "inputs grow longer, and proposes an adaptive temperature to counter it. Section 1 lists "
       "every verdict; sections 2 to 6 show the theory the checks rest on together with the "
       "measurements supplied; section 7 the softmax variants.</p></div>\n<ol>"
       "<li><a href=\"#verdicts\">Verdicts</a></li><li><a href=\"#error\">Error against n</a></li>"
       "<li><a href=\"#dispersion\">Dispersion</a></li><li><a href=\"#entropy\">Entropy and "
       "temperature</a></li>"
       "<li><a href=\"#adaptive\">Adaptive temperature</a></li><li><a href=\"#streamed\">Streamed "
       "entropy</a></li>"
       "<li><a href=\"#variants\">Variants</a></li><li><a href=\"#rules\">Rules and "
       "theorems</a></li></ol>\n";
  verdict_section(h, m);
  coverage_section(h, m);
  const bool sweep_given = !in.sweep.empty();
  error_section(h, P, m.sweep, sweep_given);
  dispersion_section(h, P, m.sweep, sweep_given);
  entropy_section(h, P, m.sweep, sweep_given);
  adaptive_section(h, P, m.sweep);
  streamed_section(h, P, m.sweep);
  other_section(h, P, m.sweep);
  variants_section(h, P, m);
  rules_section(h, m, docs);
  h << kScript << "\n</body></html>\n";
  g_docs = nullptr;
  if (doc_out) *doc_out = std::move(doc);
}

}  // namespace sa::gate
