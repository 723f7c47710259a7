#include "gate/results.hpp"
#include <cstdio>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
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
// JUnit's time attribute: a plain decimal (never "1e-05" or "NaN").
std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", std::isfinite(s) && s > 0 ? s : 0.0);
  return buf;
}
// "measured 3 > bound 2", or what is known when a number is missing.
std::string measured_vs_bound(const Verdict& v) {
  const bool m = !std::isnan(v.measured), b = !std::isnan(v.bound);
  if (!m && !b) return "no measurement";
  if (!b) return "measured " + num(v.measured);
  if (!m) return "no measurement (bound " + num(v.bound) + ")";
  return "measured " + num(v.measured) + (v.measured > v.bound ? " > " : " <= ") + "bound " +
         num(v.bound);
}
}  // namespace

// Validates against docs/schema/junit.xsd (tests/gate/ci_outputs_test.cpp).
void write_junit(std::ostream& os, const std::vector<RunRecord>& runs) {
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"softmax-audit\">\n";
  for (const auto& r : runs) {
    // One testcase per stable name; several verdicts under one name (the gate's
    // findings) become one testcase with the worst outcome and every body.
    std::vector<std::string> order;
    std::map<std::string, std::vector<const Verdict*>> groups;
    for (const auto& v : r.verdicts) {
      const std::string name = case_name(v);
      if (!groups.count(name)) order.push_back(name);
      groups[name].push_back(&v);
    }
    int fails = 0, errors = 0, skips = 0;
    for (const auto& name : order) {
      Outcome worst = Outcome::skip;
      for (const Verdict* v : groups[name])
        if (severity(v->outcome) > severity(worst)) worst = v->outcome;
      fails += worst == Outcome::fail;
      errors += worst == Outcome::error || worst == Outcome::incomplete;
      skips += worst == Outcome::skip;
    }
    os << "  <testsuite name=\"softmax-audit." << xml_escape(r.kernel) << "\" tests=\""
       << order.size() << "\" failures=\"" << fails << "\" errors=\"" << errors << "\" skipped=\""
       << skips << "\" time=\"" << seconds_text(r.seconds) << "\">\n";
    os << "    <properties><property name=\"origin\" value=\"" << xml_escape(r.origin)
       << "\"/></properties>\n";
    for (const auto& name : order) {
      const auto& vs = groups[name];
      const Verdict* worst = vs.front();
      std::string body;
      for (const Verdict* v : vs) {
        if (severity(v->outcome) > severity(worst->outcome)) worst = v;
        body += (body.empty() ? "" : "\n\n") + describe(*v);
      }
      const Verdict& w = *worst;
      os << "    <testcase classname=\"softmax-audit." << xml_escape(r.kernel) << "."
         << xml_escape(w.property) << "\" name=\"" << xml_escape(name) << "\">\n";
      if (w.outcome == Outcome::fail || w.outcome == Outcome::error ||
          w.outcome == Outcome::incomplete) {
        const char* tag = w.outcome == Outcome::fail ? "failure" : "error";
        const std::string type = w.outcome == Outcome::incomplete ? "incomplete" : w.rule.id;
        os << "      <" << tag << " message=\"" << xml_escape(w.claim + ": " + measured_vs_bound(w))
           << "\" type=\"" << xml_escape(type) << "\">" << xml_escape(body) << "</" << tag << ">\n";
      } else if (w.outcome == Outcome::skip) {
        os << "      <skipped message=\"" << xml_escape(w.note.empty() ? w.claim : w.note)
           << "\"/>\n";
      }
      os << "      <system-out>" << xml_escape(body) << "</system-out>\n    </testcase>\n";
    }
    os << "  </testsuite>\n";
  }
  os << "</testsuites>\n";
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
