// A sharded `check` (issue 34; docs/scale-out.md, "Sharded gate runs"):
// what `check --shard k/N --out DIR` writes and `merge` reads.
//
// The unit of a shard is one property of the gate's plan (gate::
// planned_properties), or the properties of one family that share their
// searches (check_unit_of): one run_suite call that selects them alone,
// with every op and dtype of the run. Its case id is case_id() (core/
// case_id.hpp) over the kernel's identity, op "check:<unit>", no dtype,
// shape or distribution, the run's temperature, level 0, the run's seed and
// index 0; the unit belongs to shard id mod N. A property's searches draw
// their cases from the run's seed and the property, op and dtype alone
// (never from a stream shared with other properties), so a unit's verdicts
// are the same whichever other units ran in the same process.
//
// DIR/shard.json: the plan (every unit's key, id and shard, and the run
// record's fixed part), written before the first unit. DIR/journal.jsonl:
// one line per finished unit, each written by one write() and fsync'd
// (a SIGTERM meanwhile takes effect once the line is durable; a torn last
// line from a SIGKILL or power cut is dropped on resume).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/case_id.hpp"
#include "core/preempt.hpp"
#include "gate/isolation.hpp"
#include "gate/results.hpp"
#include "gate/spec.hpp"
#include "gate/verdict_json.hpp"

namespace sa::cli {

inline constexpr const char* kCheckJournal = "journal.jsonl";

// The families whose properties share their searches (props::families(),
// shared_search): one differential search judges every tolerance rule of an
// op and dtype, one attention_v2 search every attention_v2 property (and
// counts attention_v2.coverage's cases) of an input type, and so on. A
// family's properties are one unit, so that no shard repeats another's
// search; every other property (each metamorphic one, interface.sizes,
// special.values) is a unit of its own.
inline std::string check_unit_of(const std::string& property) {
  const std::string family = property.substr(0, property.find('.'));
  for (const auto& f : props::families())
    if (f.shared_search && f.name == family && family.size() < property.size()) return family;
  return property;
}

struct CheckUnit {
  std::string key;                      // a family, or a property
  std::vector<std::string> properties;  // those of the plan it runs, in the plan's order
};

// The units of a plan, in the order their first property appears in it.
inline std::vector<CheckUnit> check_units(const std::vector<std::string>& plan) {
  std::vector<CheckUnit> out;
  for (const auto& p : plan) {
    const std::string key = check_unit_of(p);
    auto it =
        std::find_if(out.begin(), out.end(), [&](const CheckUnit& u) { return u.key == key; });
    if (it == out.end())
      out.push_back({key, {p}});
    else
      it->properties.push_back(p);
  }
  return out;
}

// The case id of a unit (its key: a family or a property).
inline std::uint64_t check_unit_id(const std::string& kernel_identity, const std::string& unit,
                                   double temperature, std::uint64_t seed) {
  CaseKey k;
  k.kernel = kernel_identity;
  k.op = "check:" + unit;
  k.dtype = "";
  k.shape = {};
  k.distribution = "";
  k.theta = temperature;
  k.level = 0;
  k.seed = seed;
  k.index = 0;
  return case_id(k);
}

// --no-timing: wall seconds and the facts of one process (its command line,
// the number of processes) are what two runs of one check never share; they
// are written as 0 (the command line left out) so that the output is the
// same bytes on every run, and a merge of shards the unsharded run's bytes.
inline void strip_timing(Verdict& v) {
  if (std::isfinite(v.seconds)) v.seconds = 0;
  if (std::isfinite(v.kernel_seconds)) v.kernel_seconds = 0;
}

// The verdicts of a gate run in the order check writes them, from the
// verdicts of its units (each one run_isolated call; an unsharded run is one
// unit): the suite's verdicts grouped by property in the plan's order (a
// property's own verdicts in the order it emitted them), then the gate's
// findings (gate.* verdicts that did not pass) in the order the units
// reported them, then one passing verdict per gate check that no unit found
// failing, in the order the units list them, "over every kernel call of this
// run" of all `plan_size` properties.
inline std::vector<Verdict> combine_unit_verdicts(const std::vector<std::vector<Verdict>>& units,
                                                  const std::vector<std::string>& plan,
                                                  std::uint64_t seed) {
  std::map<std::string, std::size_t> rank;
  for (std::size_t i = 0; i < plan.size(); ++i) rank.emplace(plan[i], i);
  auto is_gate = [](const Verdict& v) { return v.property.rfind("gate.", 0) == 0; };
  std::vector<Verdict> suite, findings, passes;
  std::set<std::string> failed_checks, passed_checks;
  for (const auto& u : units)
    for (const auto& v : u) {
      if (!is_gate(v))
        suite.push_back(v);
      else if (v.outcome != Outcome::pass) {
        findings.push_back(v);
        failed_checks.insert(v.property);
      }
    }
  for (const auto& u : units)
    for (const auto& v : u)
      if (is_gate(v) && v.outcome == Outcome::pass && !failed_checks.count(v.property) &&
          passed_checks.insert(v.property).second) {
        Verdict p = v;
        if (p.note.rfind("over every kernel call of this run", 0) == 0)
          p.note = "over every kernel call of this run (" + std::to_string(plan.size()) +
                   " properties, seed " + std::to_string(seed) + ")";
        passes.push_back(std::move(p));
      }
  std::stable_sort(suite.begin(), suite.end(), [&](const Verdict& a, const Verdict& b) {
    const auto ra = rank.find(a.property), rb = rank.find(b.property);
    const std::size_t ia = ra == rank.end() ? plan.size() : ra->second;
    const std::size_t ib = rb == rank.end() ? plan.size() : rb->second;
    return ia < ib;
  });
  suite.insert(suite.end(), findings.begin(), findings.end());
  suite.insert(suite.end(), passes.begin(), passes.end());
  return suite;
}

// The parts of a gate spec that gate.coverage reads (ops, dtypes, required),
// from the config a run record holds (gate::config_to_json).
inline gate::GateSpec coverage_spec_of(const nlohmann::json& config) {
  gate::GateSpec s;
  for (const auto& o : config.at("ops")) {
    const auto op = parse_op(o.get<std::string>());
    if (!op) throw std::invalid_argument("unknown op " + o.dump());
    s.suite.ops.push_back(*op);
  }
  for (const auto& d : config.at("dtypes")) {
    const auto t = parse_dtype(d.get<std::string>());
    if (!t) throw std::invalid_argument("unknown dtype " + d.dump());
    s.suite.dtypes.push_back(*t);
  }
  s.required = config.at("required").get<std::vector<std::string>>();
  return s;
}

// One finished unit, as its journal line holds it.
struct CheckUnitResult {
  std::string key;            // the property
  std::string line;           // the journal line (without its newline)
  std::string verdicts;       // the verdicts' JSON text: the bits merge compares
  nlohmann::json provenance;  // of the process that ran it, its command line left out
  int processes = 0, crashes = 0, hangs = 0;
  double seconds = 0;
  std::vector<Verdict> verdict_list;
};

inline std::string check_unit_line(const std::string& key, std::uint64_t id,
                                   const gate::IsolatedRun& run, double seconds,
                                   const nlohmann::json& provenance) {
  nlohmann::json j;
  j["unit"] = key;
  j["id"] = std::to_string(id);
  j["processes"] = run.processes;
  j["crashes"] = run.crashes;
  j["hangs"] = run.hangs;
  j["seconds"] = seconds;
  j["verdicts"] = nlohmann::json::array();
  for (const auto& v : run.verdicts) j["verdicts"].push_back(gate::to_json(v));
  j["provenance"] = provenance;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline CheckUnitResult parse_check_unit_line(const std::string& line) {
  const auto j = nlohmann::json::parse(line);
  CheckUnitResult r;
  r.key = j.at("unit").get<std::string>();
  r.line = line;
  r.processes = j.at("processes").get<int>();
  r.crashes = j.at("crashes").get<int>();
  r.hangs = j.at("hangs").get<int>();
  r.seconds = j.at("seconds").get<double>();
  r.provenance = j.at("provenance");
  r.verdicts = j.at("verdicts").dump();
  for (const auto& v : j.at("verdicts")) r.verdict_list.push_back(gate::verdict_from_json(v));
  return r;
}

// Reads a journal: every whole line (a line without its newline is a write a
// kill interrupted, and is not counted). With `repair`, such a partial last
// line is cut off the file (before new lines are appended). Throws
// std::invalid_argument naming the file and line when a whole line is not a
// unit's.
inline std::vector<CheckUnitResult> read_check_journal(const std::string& path, bool repair) {
  std::vector<CheckUnitResult> out;
  std::ifstream f(path, std::ios::binary);
  if (!f) return out;
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  f.close();
  const std::size_t keep = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  if (repair && keep < text.size()) {
    if (::truncate(path.c_str(), static_cast<off_t>(keep)) != 0)
      throw std::invalid_argument(path +
                                  ": cannot cut its partial last line: " + std::strerror(errno));
  }
  std::size_t at = 0, lineno = 0;
  while (at < keep) {
    const std::size_t nl = text.find('\n', at);
    ++lineno;
    const std::string line = text.substr(at, nl - at);
    at = nl + 1;
    try {
      out.push_back(parse_check_unit_line(line));
    } catch (const std::exception& e) {
      throw std::invalid_argument(path + ": line " + std::to_string(lineno) +
                                  " is not a finished unit of a sharded check (" + e.what() +
                                  "); expected the journal `check --shard` writes");
    }
  }
  return out;
}

// Appends one line and fsyncs it; a SIGTERM meanwhile takes effect once it is
// durable (core/preempt.hpp).
inline void append_journal_line(const std::string& path, const std::string& line) {
  const preempt::JournalWrite entry;
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  const std::string s = line + "\n";
  std::size_t done = 0;
  while (done < s.size()) {
    const ssize_t w = ::write(fd, s.data() + done, s.size() - done);
    if (w < 0) {
      const int e = errno;
      ::close(fd);
      throw std::runtime_error("cannot write " + path + ": " + std::strerror(e));
    }
    done += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::runtime_error("cannot fsync " + path + ": " + std::strerror(e));
  }
  ::close(fd);
}

}  // namespace sa::cli
