#include "gate/results.hpp"
#include <cstdio>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "gate/verdict_json.hpp"

namespace sa::gate {

using json = nlohmann::json;

Tally tally(const std::vector<Verdict>& vs) {
  Tally t;
  for (const auto& v : vs) switch (v.outcome) {
      case Outcome::pass:
        ++t.pass;
        break;
      case Outcome::fail:
        ++t.fail;
        break;
      case Outcome::skip:
        ++t.skip;
        break;
      case Outcome::error:
        ++t.error;
        break;
      case Outcome::incomplete:
        ++t.incomplete;
        break;
    }
  return t;
}

const char* status_of(const Tally& t) {
  return !t.ok() ? "fail" : t.incomplete ? "incomplete" : "pass";
}

json config_to_json(const GateSpec& spec) {
  const auto& c = spec.suite;
  json j;
  j["spec"] = spec.source;
  j["ops"] = json::array();
  for (Op op : c.ops) j["ops"].push_back(name_of(op));
  j["dtypes"] = json::array();
  for (DType t : c.dtypes) j["dtypes"].push_back(name_of(t));
  j["sizes"] = c.sizes;
  j["distributions"] = c.distributions;
  j["rules"] = c.rules;
  j["properties"] = c.properties;
  j["cases"] = c.cases;
  j["seed"] = std::to_string(c.seed);  // a string: 64-bit seeds survive every JSON reader
  j["temperature"] = c.temperature;
  j["temperature_only"] = c.temperature_only;
  j["required"] = spec.required;
  j["timeout"] = spec.timeout_s;
  j["deadline"] = spec.deadline_s;
  // Conventions the spec declared (the kernel's own SA_CAP_* ones are named in its verdicts).
  j["conventions"] = c.conventions;
  // The [attention] table as it applied (empty lists: the suite's defaults).
  const auto& a = c.attention;
  json att;
  att["dtypes"] = json::array();
  for (AttnType t : a.types) att["dtypes"].push_back(name_of(t));
  att["head_dims"] = a.head_dims;
  att["lengths"] = json::array();
  for (const auto& [q, k] : a.lengths) att["lengths"].push_back({q, k});
  att["gqa_ratios"] = a.gqa_ratios;
  att["features"] = a.features ? json(*a.features) : json("all");
  att["max_work"] = a.max_work;
  j["attention"] = att;
  // The [determinism] table as it applied.
  j["determinism"] = {{"repeats", c.determinism_repeats}};
  return j;
}

json results_to_json(const std::vector<RunRecord>& runs) {
  json out;
  out["format"] = "softmax-audit-results";
  out["version"] = 2;  // 2: seeds are strings, summary has incomplete/status
  out["runs"] = json::array();
  for (const auto& r : runs) {
    json j;
    j["kernel"] = {{"name", r.kernel}, {"origin", r.origin}, {"description", r.description}};
    j["config"] = r.config;
    j["provenance"] = r.provenance;
    j["processes"] = r.processes;
    j["crashes"] = r.crashes;
    j["hangs"] = r.hangs;
    j["seconds"] = r.seconds;
    const Tally t = tally(r.verdicts);
    j["summary"] = {{"pass", t.pass},
                    {"fail", t.fail},
                    {"skip", t.skip},
                    {"error", t.error},
                    {"incomplete", t.incomplete},
                    {"status", status_of(t)}};
    j["verdicts"] = json::array();
    for (const auto& v : r.verdicts) j["verdicts"].push_back(to_json(v));
    out["runs"].push_back(std::move(j));
  }
  return out;
}

std::vector<RunRecord> results_from_json(const json& j, const std::string& origin) {
  if (!j.is_object() || j.value("format", "") != "softmax-audit-results")
    throw std::invalid_argument(origin +
                                ": expected a results file written by `softmax-audit check "
                                "--json` (\"format\": \"softmax-audit-results\")");
  if (!j.contains("runs") || !j["runs"].is_array())
    throw std::invalid_argument(origin + ": key 'runs': expected an array");
  std::vector<RunRecord> out;
  int i = 0;
  for (const auto& r : j["runs"]) {
    const std::string at = origin + ": runs[" + std::to_string(i++) + "]";
    if (!r.is_object()) throw std::invalid_argument(at + ": expected an object");
    RunRecord rec;
    if (auto k = r.find("kernel"); k != r.end() && k->is_object()) {
      rec.kernel = k->value("name", "");
      rec.origin = k->value("origin", "");
      rec.description = k->value("description", "");
    }
    rec.config = r.value("config", json::object());
    rec.provenance = r.value("provenance", json::object());
    if (!rec.provenance.is_object()) rec.provenance = json::object();
    rec.processes = r.value("processes", 0);
    rec.crashes = r.value("crashes", 0);
    rec.hangs = r.value("hangs", 0);
    rec.seconds = r.value("seconds", 0.0);
    if (!r.contains("verdicts") || !r["verdicts"].is_array())
      throw std::invalid_argument(at + ": key 'verdicts': expected an array");
    int vi = 0;
    for (const auto& v : r["verdicts"]) {
      try {
        rec.verdicts.push_back(verdict_from_json(v));
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(at + ".verdicts[" + std::to_string(vi) + "]: " + e.what());
      }
      ++vi;
    }
    out.push_back(std::move(rec));
  }
  return out;
}

std::vector<RunRecord> load_results(const std::string& path) {
  const json j = read_json_file(path, "a results JSON file written by `softmax-audit check`");
  try {
    return results_from_json(j, path);
  } catch (const json::exception& e) {
    throw std::invalid_argument(path + ": " + e.what() +
                                "; expected a results JSON file written by `softmax-audit check`");
  }
}

std::string xml_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&apos;";
        break;
      default:
        if (c < 0x20 && c != '\n' && c != '\t' && c != '\r')
          o += ' ';  // not allowed in XML 1.0
        else
          o += static_cast<char>(c);
    }
  }
  return o;
}

namespace {
std::string num(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  std::ostringstream os;
  os.precision(17);
  os << x;
  return os.str();
}
int severity(Outcome o) {
  switch (o) {
    case Outcome::fail:
      return 4;
    case Outcome::error:
      return 3;
    case Outcome::incomplete:
      return 2;
    case Outcome::pass:
      return 1;
    case Outcome::skip:
      return 0;
  }
  return 0;
}
// A skip the kernel's capabilities or the property's own definition make
// (an op or dtype the kernel lacks, "not applicable ..."): left out of JUnit.
// Other skips (a measurement reported but not claimed, too few rows in this
// run) stay there as <skipped>, so the test names are the same in every run
// of one kernel.
bool not_applicable(const Verdict& v) {
  if (v.outcome != Outcome::skip) return false;
  for (const char* p : {"not applicable", "kernel does not implement ", "kernel does not support ",
                        "no generated case was applicable"})
    if (v.note.rfind(p, 0) == 0) return true;
  return false;
}
bool failed(const Verdict& v) {
  return v.outcome == Outcome::fail || v.outcome == Outcome::error ||
         v.outcome == Outcome::incomplete;
}
// JUnit's time attribute: a plain decimal (never "1e-05" or "NaN").
std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", std::isfinite(s) && s > 0 ? s : 0.0);
  return buf;
}
// "got X where the exact value is Y" from a counterexample's last
// "; at WHERE: got X, exact Y" (checks.hpp's wording), or "".
std::string got_where_exact(const std::string& ce) {
  const auto p = ce.rfind("; at ");
  if (p == std::string::npos) return "";
  static const std::regex got_re(
      R"(^(.*?):? got ([^ ,;]+),? (exact|expected|reference|kernel\.h's limit)( value)? ([^ ,;()]+))");
  std::smatch g;
  const std::string at = ce.substr(p + 5);
  if (!std::regex_search(at, g, got_re)) return "";
  const std::string exact = g[5].str();
  const bool exact_finite = exact != "nan" && exact != "inf" && exact != "-inf" && exact != "NaN" &&
                            exact != "Infinity" && exact != "-Infinity";
  return "got " + g[2].str() + " where the " + (g[3] == "exact" ? "exact" : g[3].str()) +
         " value is " + (exact_finite ? "finite (" + exact + ")" : exact) +
         (g[1].str().empty() ? "" : " at " + g[1].str());
}

// "measured 3 > bound 2", or what is known when a number is missing; an
// infinite or NaN measurement in plain words ("got -inf where the exact
// value is finite (-0.69) at ...") rather than "measured Infinity".
std::string measured_vs_bound(const Verdict& v) {
  if (v.outcome == Outcome::fail &&
      (std::isinf(v.measured) || (std::isnan(v.measured) && !std::isnan(v.bound)))) {
    std::string s = got_where_exact(v.counterexample);
    if (s.empty())
      s = std::isnan(v.measured) ? "no finite measurement (NaN): a value that must be a number is "
                                   "not"
                                 : "an infinite error: a value that must be finite (or equal to "
                                   "the exact one) is not";
    return s + (std::isnan(v.bound) ? "" : " (bound " + num(v.bound) + ")");
  }
  const bool m = !std::isnan(v.measured), b = !std::isnan(v.bound);
  if (!m && !b) return "no measurement";
  if (!b) return "measured " + num(v.measured);
  if (!m) return "no measurement (bound " + num(v.bound) + ")";
  return "measured " + num(v.measured) + (v.measured > v.bound ? " > " : " <= ") + "bound " +
         num(v.bound);
}
// One line: line breaks and tabs become spaces, and it is cut at `max` bytes.
std::string one_line(std::string s, std::size_t max) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  if (s.size() > max) s = s.substr(0, max) + "...";
  return s;
}
// The first failing case of a counterexample: the shrunk input, without what
// differs between properties that failed on it (seed, case number, shrink
// steps, the position "at" which this property's check failed). When every
// input value is shown (values=[...] with no "more" elided), the input is
// those values and the shape alone: the generator's name and seeds, which
// only produced them, are dropped too.
std::string first_failing_case(const std::string& ce) {
  static const std::regex run_part(
      R"(\bseed=\d+ |\bcase=-?\d+ |edge case \d+ \(run on every seed\) |\(shrunk \d+ steps?\) )");
  static const std::regex generator_part(
      R"(dist=\S+ |level=\S+ |value_seed=\d+ |aux=\d+ |\(values shrunk\) |\(an edge row: run on every seed\) )");
  std::string k = ce;
  if (const auto at = k.find(" ; at "); at != std::string::npos) k.resize(at);
  k = std::regex_replace(k, run_part, "");
  if (k.find(" values=[") != std::string::npos &&
      k.find(" more; finite range") == std::string::npos)
    k = std::regex_replace(k, generator_part, "");
  return k;
}
}  // namespace

// The name a CI system tracks a test by: the same in passing and failing
// runs. Suite verdicts are one per property x op x dtype; the gate's own
// checks (gate.*) are one test each, whatever op or property they caught.
std::string case_name(const Verdict& v) {
  std::string n = v.property;
  if (v.property.rfind("gate.", 0) == 0) return n;
  if (!v.op.empty() || !v.dtype.empty())
    n += " [" + v.op + (v.op.empty() || v.dtype.empty() ? "" : "/") + v.dtype + "]";
  return n;
}

std::string verdict_line(const Verdict& v) {
  std::string l = case_name(v) + ": ";
  if (v.outcome == Outcome::fail || (!std::isnan(v.measured) && v.outcome != Outcome::incomplete))
    l += measured_vs_bound(v);
  else
    l += std::string(name_of(v.outcome)) + (v.note.empty() ? "" : ": " + one_line(v.note, 160));
  if (!v.rule.id.empty()) l += " (" + v.rule.id + ")";
  return one_line(l, 400);
}

std::vector<std::vector<const Verdict*>> root_causes(const std::vector<Verdict>& verdicts) {
  std::vector<std::vector<const Verdict*>> groups;
  std::map<std::string, std::size_t> by_key;
  for (const auto& v : verdicts) {
    if (!failed(v)) continue;
    if (v.counterexample.empty()) {
      groups.push_back({&v});
      continue;
    }
    const std::string key = v.op + '\n' + v.dtype + '\n' + first_failing_case(v.counterexample);
    const auto [it, fresh] = by_key.emplace(key, groups.size());
    if (fresh)
      groups.push_back({&v});
    else
      groups[it->second].push_back(&v);
  }
  return groups;
}

// Validates against docs/schema/junit.xsd (tests/gate/ci_outputs_test.cpp).
void write_junit(std::ostream& os, const std::vector<RunRecord>& runs) {
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"softmax-audit\">\n";
  for (const auto& r : runs) {
    // The leader of each failure's root cause, and the other names of each group.
    std::map<const Verdict*, const Verdict*> leader_of;
    std::map<const Verdict*, std::vector<std::string>> followers_of;
    for (const auto& g : root_causes(r.verdicts))
      for (const Verdict* v : g) {
        leader_of[v] = g.front();
        if (v != g.front()) {
          auto& f = followers_of[g.front()];
          if (std::find(f.begin(), f.end(), case_name(*v)) == f.end()) f.push_back(case_name(*v));
        }
      }
    // One testcase per stable name; several verdicts under one name (the gate's
    // findings) become one testcase with the worst outcome and every body.
    // Not-applicable verdicts (skip) are left out: they are in the JSON and the report.
    std::vector<std::string> order;
    std::map<std::string, std::vector<const Verdict*>> groups;
    int n_not_applicable = 0;
    for (const auto& v : r.verdicts) {
      if (not_applicable(v)) {
        ++n_not_applicable;
        continue;
      }
      const std::string name = case_name(v);
      if (!groups.count(name)) order.push_back(name);
      groups[name].push_back(&v);
    }
    // What each testcase reports: its worst verdict, and whether every failure
    // under its name has its root cause's leader under another name.
    struct Case {
      const Verdict* worst = nullptr;
      const Verdict* leader = nullptr;  // set when the testcase is a follower
    };
    std::map<std::string, Case> cases;
    int fails = 0, errors = 0, skips = 0;
    for (const auto& name : order) {
      Case c;
      for (const Verdict* v : groups[name])
        if (!c.worst || severity(v->outcome) > severity(c.worst->outcome)) c.worst = v;
      if (failed(*c.worst)) {
        bool all_follow = true;
        for (const Verdict* v : groups[name])
          if (failed(*v)) {
            const auto it = leader_of.find(v);
            const Verdict* l = it == leader_of.end() ? v : it->second;
            if (l == v || case_name(*l) == name)
              all_follow = false;
            else if (!c.leader)
              c.leader = l;
          }
        if (!all_follow) c.leader = nullptr;
      }
      if (c.leader || c.worst->outcome == Outcome::skip)
        ++skips;
      else {
        fails += c.worst->outcome == Outcome::fail;
        errors += c.worst->outcome == Outcome::error || c.worst->outcome == Outcome::incomplete;
      }
      cases[name] = c;
    }
    os << "  <testsuite name=\"softmax-audit." << xml_escape(r.kernel) << "\" tests=\""
       << order.size() << "\" failures=\"" << fails << "\" errors=\"" << errors << "\" skipped=\""
       << skips << "\" time=\"" << seconds_text(r.seconds) << "\">\n";
    os << "    <properties><property name=\"origin\" value=\"" << xml_escape(r.origin)
       << "\"/><property name=\"not_applicable\" value=\"" << n_not_applicable
       << " not-applicable check(s) left out (in the JSON results and the report)\"/>"
       << "<property name=\"testcase_time\" value=\"verdicts carry no time of their own: each "
          "testcase's time is 0, the testsuite's is the whole run\"/></properties>\n";
    for (const auto& name : order) {
      const auto& vs = groups[name];
      const Case& c = cases[name];
      const Verdict& w = *c.worst;
      std::string body;
      for (const Verdict* v : vs) {
        body += (body.empty() ? "" : "\n\n") + describe(*v);
        // A coverage verdict's table: one line per feature and feature pair.
        if (!v->coverage.empty()) {
          body += "\n  coverage (cases run / required):";
          for (const auto& cell : v->coverage)
            body += "\n    " + cell.cell + " " + std::to_string(cell.cases) + "/" +
                    std::to_string(cell.required) + (cell.cases < cell.required ? " SHORT" : "");
        }
      }
      os << "    <testcase classname=\"softmax-audit." << xml_escape(r.kernel) << "."
         << xml_escape(w.property) << "\" name=\"" << xml_escape(name) << "\" time=\"0\">\n";
      if (c.leader) {
        os << "      <skipped message=\""
           << xml_escape("same root cause as " + case_name(*c.leader) + ": " + verdict_line(w))
           << "\"/>\n";
      } else if (w.outcome == Outcome::skip) {
        os << "      <skipped message=\""
           << xml_escape(one_line(w.note.empty() ? w.claim : w.note, 400)) << "\"/>\n";
      } else if (failed(w)) {
        const char* tag = w.outcome == Outcome::fail ? "failure" : "error";
        const std::string type = w.outcome == Outcome::incomplete ? "incomplete" : w.rule.id;
        std::string message = verdict_line(w);
        std::string also;
        if (const auto f = followers_of.find(&w); f != followers_of.end())
          for (const auto& n : f->second) also += (also.empty() ? "" : ", ") + n;
        if (!also.empty()) message += "; the same root cause also breaks " + also;
        os << "      <" << tag << " message=\"" << xml_escape(message) << "\" type=\""
           << xml_escape(type) << "\">" << xml_escape(message + "\n\n" + body) << "</" << tag
           << ">\n";
      }
      os << "      <system-out>" << xml_escape(body) << "</system-out>\n    </testcase>\n";
    }
    os << "  </testsuite>\n";
  }
  os << "</testsuites>\n";
}

namespace {
// GitHub workflow-command escaping: the message (data) and a property value.
std::string gh_data(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '%')
      o += "%25";
    else if (c == '\r')
      o += "%0D";
    else if (c == '\n')
      o += "%0A";
    else
      o += c;
  }
  return o;
}
std::string gh_property(const std::string& s) {
  std::string o;
  for (char c : gh_data(s)) {
    if (c == ':')
      o += "%3A";
    else if (c == ',')
      o += "%2C";
    else
      o += c;
  }
  return o;
}
std::string md_cell(const std::string& s) {
  std::string o;
  for (char c : one_line(s, 300)) {
    if (c == '|' || c == '`' || c == '*' || c == '_' || c == '<' || c == '>' || c == '[' ||
        c == ']' || c == '\\')
      o += '\\';
    o += c;
  }
  return o;
}
}  // namespace

void write_github_annotations(std::ostream& os, const std::vector<RunRecord>& runs) {
  for (const auto& r : runs)
    for (const auto& g : root_causes(r.verdicts)) {
      const Verdict& l = *g.front();
      std::string msg = verdict_line(l);
      std::string also;
      for (const Verdict* v : g)
        if (v != g.front() && also.find(case_name(*v)) == std::string::npos)
          also += (also.empty() ? "" : ", ") + case_name(*v);
      if (!also.empty()) msg += "; the same root cause also breaks " + also;
      if (!l.counterexample.empty()) msg += "\ncounterexample: " + one_line(l.counterexample, 400);
      os << "::error title=" << gh_property("softmax-audit " + r.kernel + ": " + case_name(l))
         << "::" << gh_data(msg) << "\n";
    }
}

std::string summary_markdown(const std::vector<RunRecord>& runs) {
  std::ostringstream md;
  md << "## softmax-audit check\n\n| kernel | status | passed | failed | errors | incomplete | "
        "root causes |\n|---|---|---|---|---|---|---|\n";
  for (const auto& r : runs) {
    const Tally t = tally(r.verdicts);
    md << "| " << md_cell(r.kernel) << " | **" << status_of(t) << "** | " << t.pass << " | "
       << t.fail << " | " << t.error << " | " << t.incomplete << " | "
       << root_causes(r.verdicts).size() << " |\n";
  }
  for (const auto& r : runs) {
    const auto groups = root_causes(r.verdicts);
    if (groups.empty()) continue;
    md << "\n### " << md_cell(r.kernel) << ": " << groups.size() << " root cause(s)\n\n";
    for (const auto& g : groups) {
      md << "- " << md_cell(verdict_line(*g.front()));
      if (g.size() > 1) {
        std::string also;
        for (const Verdict* v : g)
          if (v != g.front() && also.find(case_name(*v)) == std::string::npos)
            also += (also.empty() ? "" : ", ") + case_name(*v);
        md << "; also breaks " << md_cell(also);
      }
      if (!g.front()->counterexample.empty())
        md << "  \n  counterexample: " << md_cell(g.front()->counterexample);
      md << "\n";
    }
  }
  const int skipped = [&] {
    int n = 0;
    for (const auto& r : runs) n += tally(r.verdicts).skip;
    return n;
  }();
  md << "\n"
     << skipped
     << " skipped check(s) (not applicable to the kernel, or reported but not claimed) are in "
        "the JSON results and the report.\n";
  return md.str();
}

namespace {
// Text from a kernel or an input as one terminal line: control characters
// are shown as \xNN, so nothing can start a new line (a fake PASS line in a
// CI log) or send escape sequences to the terminal.
std::string printable(const std::string& s) {
  std::string o;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      o += hex;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o;
}
}  // namespace

void write_summary(std::ostream& os, const RunRecord& run, bool color) {
  const char* red = color ? "\033[31m" : "";
  const char* green = color ? "\033[32m" : "";
  const char* yellow = color ? "\033[33m" : "";
  const char* off = color ? "\033[0m" : "";
  const Tally t = tally(run.verdicts);
  os << "softmax-audit check: kernel '" << printable(run.kernel) << "' (" << printable(run.origin)
     << ")\n";
  for (const auto& v : run.verdicts) {
    if (v.outcome != Outcome::fail && v.outcome != Outcome::error &&
        v.outcome != Outcome::incomplete)
      continue;
    os << (v.outcome == Outcome::fail ? red : yellow) << "  " << name_of(v.outcome) << off << "  "
       << printable(case_name(v)) << ": " << measured_vs_bound(v) << " (" << v.rule.id << ")\n";
    if (!v.counterexample.empty()) {
      std::string ce = v.counterexample;
      if (ce.size() > 200) ce = ce.substr(0, 200) + "...";
      os << "        counterexample: " << printable(ce) << "\n";
    }
    if (!v.note.empty()) {
      std::string n = v.note;
      if (n.size() > 300) n = n.substr(0, 300) + "...";
      os << "        note: " << printable(n) << "\n";
    }
  }
  const char* head = !t.ok() ? "FAIL" : t.incomplete ? "INCOMPLETE" : "PASS";
  os << (!t.ok()        ? red
         : t.incomplete ? yellow
                        : green)
     << head << off << "  " << t.pass << " passed, " << t.fail << " failed, " << t.error
     << " errors, " << t.skip << " skipped";
  if (t.incomplete) os << ", " << t.incomplete << " incomplete (a requested check did not run)";
  if (run.crashes || run.hangs)
    os << "; " << run.crashes << " crash(es), " << run.hangs << " hang(s) isolated";
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", run.seconds);
  os << " (" << run.processes << " process(es), " << secs << " s)\n";
  // The cases actually run, per op: the fewest any passing or failing
  // verdict of the op was decided on, and the coverage verdicts' totals.
  std::map<std::string, std::pair<std::int64_t, std::string>> fewest;
  std::map<std::string, std::string> run_cases;
  for (const auto& v : run.verdicts) {
    if (v.cases < 0 || v.op.empty()) continue;
    if (!v.coverage.empty()) {
      run_cases[v.op] +=
          (run_cases[v.op].empty() ? "" : ", ") + v.dtype + " " + std::to_string(v.cases);
      continue;
    }
    if (v.outcome != Outcome::pass && v.outcome != Outcome::fail) continue;
    auto& f = fewest[v.op];
    if (f.second.empty() || v.cases < f.first) f = {v.cases, case_name(v)};
  }
  if (!fewest.empty()) {
    os << "  cases run:";
    bool first = true;
    for (const auto& [op, f] : fewest) {
      os << (first ? " " : "; ") << op;
      if (const auto it = run_cases.find(op); it != run_cases.end())
        os << " " << it->second << " per type,";
      os << " fewest " << f.first << " (" << printable(f.second) << ")";
      first = false;
    }
    os << "\n";
  }
}

void ProgressBar::update(int done, int total, const std::string& label) {
  if (!enabled_ || total <= 0) return;
  // A retried case (after a crash or hang) can count past the total: the
  // bar shows the whole, never more (a bar wider than itself threw before).
  done = std::clamp(done, 0, total);
  const int permille = static_cast<int>(1000.0 * done / total);
  if (permille == last_permille_ && label == last_label_) return;
  const long long now = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now().time_since_epoch())
                            .count();
  if (start_ms_ < 0) start_ms_ = now;
  // A terminal is redrawn at most 20 times a second; a log gets a line every 10 s.
  const long long gap = tty_ ? 50 : 10000;
  if ((drawn_ || !tty_) && now - last_draw_ms_ < gap && done < total) return;
  if (!tty_ && last_draw_ms_ == 0 && now - start_ms_ < gap) return;  // short runs stay silent
  last_draw_ms_ = now;
  last_permille_ = permille;
  last_label_ = label;
  std::string eta;
  if (done > 0 && done < total) {
    const long long left = (now - start_ms_) * (total - done) / done / 1000;
    eta = left >= 60
              ? " ~" + std::to_string(left / 60) + " min " + std::to_string(left % 60) + " s left"
              : " ~" + std::to_string(left) + " s left";
  }
  std::string l = label.size() > 40 ? label.substr(0, 37) + "..." : label;
  if (!tty_) {
    os_ << "progress: " << permille / 10 << "%" << eta << " " << l << "\n" << std::flush;
    return;
  }
  const int width = 30, filled = width * permille / 1000;
  os_ << "\r[" << std::string(filled, '#') << std::string(width - filled, '.') << "] "
      << permille / 10 << "%" << eta << " " << l << "\033[K" << std::flush;
  drawn_ = true;
}

void ProgressBar::finish() {
  if (drawn_) os_ << "\r\033[K" << std::flush;
  drawn_ = false;
}

}  // namespace sa::gate
