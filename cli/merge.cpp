// `softmax-audit merge OUT INPUT...`: unites the --out folders of a sharded
// sweep (`sweep --shard k/N`) into OUT, as the unsharded sweep writes it:
// OUT/sweep.csv, OUT/rows.json and OUT/sweep.json, byte for byte the same
// when the shards ran with --no-timing (else every byte but the seconds
// column). docs/scale-out.md.
//
// The union is by row key. Each input's shard.json holds the sweep's plan
// (every case, its id and its shard): the inputs must be shards of one sweep.
// Two inputs holding one key with different bits (the seconds column aside)
// are a determinism finding (exit 1). A shard no input holds, or a shard
// whose table lacks some of its cases, is named, and the merged result is
// incomplete (exit 3); what the inputs hold is merged all the same, and an
// unsharded `sweep` into OUT with the same options measures the rest.
#include <fmt/core.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <map>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>

#include "cli/check_shard.hpp"
#include "cli/commands.hpp"
#include "cli/split_rows.hpp"
#include "cli/sweep_outputs.hpp"
#include "gate/coverage.hpp"
#include "gate/provenance.hpp"
#include "core/output_file.hpp"
#include "core/output_lock.hpp"
#include "properties/sweep.hpp"

namespace sa::cli {
namespace {

struct MergeOptions {
  std::string out;
  std::vector<std::string> inputs;
};

struct Input {
  std::string dir;
  nlohmann::json plan;
  std::uint64_t index = 0, count = 1;
  props::SweepTable table;
};

// The columns in which two lines of one key differ, the seconds column aside
// ("" when none does).
std::string differing_columns(const std::string& a, const std::string& b) {
  const auto names = props::csv_fields(props::sweep_csv_header());
  const auto fa = props::csv_fields(a), fb = props::csv_fields(b);
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < fa.size() && i < fb.size(); ++i)
    if (names[i] != "seconds" && fa[i] != fb[i])
      out += fmt::format("{}{} {} vs {}", out.empty() ? "" : "; ", names[i], fa[i], fb[i]);
  return out;
}

int run_merge_check(const MergeOptions& o);

// The command whose shard an input folder holds ("sweep", "check"), from its
// plan; "" when it has none that can be read.
std::string shard_command(const std::string& dir) {
  try {
    std::ifstream f(std::filesystem::path(dir) / kShardFile);
    if (!f) return "";
    return nlohmann::json::parse(f).value("command", "");
  } catch (const std::exception&) {
    return "";
  }
}

int run_merge(const MergeOptions& o) {
  namespace fs = std::filesystem;
  auto usage = [](const std::string& why) {
    fmt::print(stderr, "softmax-audit merge: error: {}\n", why);
    return exit_usage;
  };
  if (o.inputs.empty()) return usage("no INPUT given; expected the --out folders of the shards");
  if (is_audit_shard(o.inputs.front())) return run_merge_audit(o.out, o.inputs);
  if (shard_command(o.inputs.front()) == "check") return run_merge_check(o);
  if (shard_command(o.inputs.front()) == kSplitRowsCommand)
    return run_merge_split_rows(o.out, o.inputs);
  const std::string out_csv = (fs::path(o.out) / "sweep.csv").string(),
                    out_rows = (fs::path(o.out) / "rows.json").string(),
                    out_json = (fs::path(o.out) / "sweep.json").string();
  std::vector<Input> inputs;
  std::vector<NamedPath> read;
  for (const auto& dir : o.inputs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
      return usage("INPUT " + dir +
                   ": not a directory; expected the --out folder of a `sweep --shard k/N`");
    const std::string plan_path = (fs::path(dir) / kShardFile).string();
    const std::string csv = (fs::path(dir) / "sweep.csv").string();
    if (!fs::exists(plan_path, ec))
      return usage("INPUT " + dir + ": has no " + kShardFile +
                   "; expected the --out folder of a `sweep --shard k/N` (a sharded sweep writes "
                   "its plan there before its first row)");
    Input in;
    in.dir = dir;
    try {
      std::ifstream f(plan_path);
      in.plan = nlohmann::json::parse(f);
      if (in.plan.value("format", "") != "softmax-audit-shard" ||
          in.plan.value("version", 0) != 1 || in.plan.value("command", "") != "sweep")
        throw std::invalid_argument("not a sweep shard's plan of version 1");
      in.index = in.plan.at("shard").at("index").get<std::uint64_t>();
      in.count = in.plan.at("shard").at("count").get<std::uint64_t>();
      if (in.count < 1 || in.index >= in.count) throw std::invalid_argument("bad shard index");
      in.plan.at("cases").get_ref<const nlohmann::json::array_t&>();
    } catch (const std::exception& e) {
      return usage(plan_path + ": " + e.what() + "; expected the shard.json a sharded sweep wrote");
    }
    read.push_back({"INPUT", plan_path});
    read.push_back({"INPUT", csv});
    read.push_back({"INPUT", (fs::path(dir) / "rows.json").string()});
    read.push_back({"INPUT", (fs::path(dir) / "sweep.json").string()});
    inputs.push_back(std::move(in));
  }
  try {
    refuse_overlapping_paths(read, {{"OUT", out_csv}, {"OUT", out_rows}, {"OUT", out_json}});
  } catch (const std::invalid_argument& e) {
    return usage(e.what());
  }
  // One sweep: the same plan, table and kernel in every input.
  const Input& first = inputs.front();
  for (const Input& in : inputs) {
    for (const char* field : {"table_identity", "kernel_identity", "cases",
                              "temperature_series_only", "lacking_dtypes"})
      if (in.plan.value(field, nlohmann::json()) != first.plan.value(field, nlohmann::json()))
        return usage(fmt::format(
            "INPUT {} is a shard of another sweep than INPUT {} (their {} differ); expected "
            "shards of one sweep (the same command but for --shard)",
            in.dir, first.dir, field));
    if (in.count != first.count)
      return usage(
          fmt::format("INPUT {} is shard {}/{} and INPUT {} shard {}/{}; expected one "
                      "number of shards",
                      in.dir, in.index, in.count, first.dir, first.index, first.count));
  }
  const std::uint64_t count = first.count;
  const std::string identity = first.plan.at("table_identity").get<std::string>();
  std::map<std::string, std::uint64_t> shard_of;  // key -> shard
  std::vector<std::string> order;
  std::map<std::uint64_t, std::size_t> cases_of;  // shard -> its number of cases
  try {
    for (const auto& c : first.plan.at("cases")) {
      const std::string key = c.at("key").get<std::string>();
      const std::uint64_t s = c.at("shard").get<std::uint64_t>();
      if (s >= count || !shard_of.emplace(key, s).second)
        throw std::invalid_argument("case " + key + ": a shard out of range or a repeated key");
      order.push_back(key);
      ++cases_of[s];
    }
  } catch (const std::exception& e) {
    return usage(
        fmt::format("INPUT {}: its {} lists a bad case ({}); expected the shard.json a "
                    "sharded sweep wrote",
                    first.dir, kShardFile, e.what()));
  }
  // Each table, read whole, before OUT is touched.
  for (Input& in : inputs) {
    const std::string csv = (fs::path(in.dir) / "sweep.csv").string();
    std::error_code ec;
    try {
      if (fs::exists(csv, ec))
        in.table = props::read_sweep_table(csv);
      else  // the shard stopped before its first row: incomplete, not an error
        in.table.identity =
            count > 1 ? identity + fmt::format("; shard={}/{}", in.index, count) : identity;
    } catch (const std::invalid_argument& e) {
      return usage(fmt::format("INPUT {}: {}", in.dir, e.what()));
    }
    const std::string want =
        count > 1 ? identity + fmt::format("; shard={}/{}", in.index, count) : identity;
    if (in.table.identity != want)
      return usage(
          fmt::format("INPUT {}: its table's first line is \"{}\", its shard.json says "
                      "\"{}\"; expected the table of that shard",
                      csv, in.table.identity, want));
  }
  // The union by key.
  struct Entry {
    std::string line;
    const props::SweepRow* row;
    const Input* from;
  };
  std::map<std::string, Entry> merged;
  std::vector<std::string> findings;
  std::set<std::uint64_t> present;
  for (const Input& in : inputs) {
    present.insert(in.index);
    for (std::size_t i = 0; i < in.table.rows.size(); ++i) {
      const auto& r = in.table.rows[i];
      const auto s = shard_of.find(r.key);
      if (s == shard_of.end())
        return usage(
            fmt::format("INPUT {}: row {} is not a case of this sweep (its shard.json "
                        "does not list it); expected rows of the sweep only",
                        in.dir, r.key));
      if (s->second != in.index)
        return usage(fmt::format("INPUT {}: row {} belongs to shard {}/{}, not to this shard {}/{}",
                                 in.dir, r.key, s->second, count, in.index, count));
      const auto [it, fresh] = merged.emplace(r.key, Entry{in.table.lines[i], &r, &in});
      if (fresh) continue;
      const std::string diff = differing_columns(it->second.line, in.table.lines[i]);
      if (!diff.empty())
        findings.push_back(
            fmt::format("{} in {} and in {}: {}", r.key, it->second.from->dir, in.dir, diff));
    }
  }
  // OUT: created and locked; a table already there keeps every row it holds.
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (!fs::is_directory(o.out, ec)) return usage("OUT " + o.out + ": cannot create this directory");
  std::optional<OutputDirLock> lock;
  try {
    lock.emplace(o.out, "OUT");
  } catch (const std::invalid_argument& e) {
    return usage(e.what());
  }
  if (fs::exists(out_csv, ec)) {
    try {
      const auto old = props::read_sweep_table(out_csv);
      for (const auto& r : old.rows)
        if (!merged.count(r.key))
          return usage(
              fmt::format("OUT {}: its table holds row {} that no INPUT holds; expected "
                          "a new OUT folder, or one a merge of these shards wrote "
                          "(nothing was merged)",
                          o.out, r.key));
    } catch (const std::invalid_argument& e) {
      return usage(fmt::format("OUT {}: {} (nothing was merged)", o.out, e.what()));
    }
  }
  std::string csv_text = identity + "\n" + props::sweep_csv_header() + "\n";
  std::vector<props::SweepRow> rows;
  std::map<std::uint64_t, std::size_t> missing;  // shard -> cases absent
  for (const auto& key : order) {
    const auto it = merged.find(key);
    if (it == merged.end()) {
      ++missing[shard_of[key]];
      continue;
    }
    csv_text += it->second.line + "\n";
    rows.push_back(*it->second.row);
  }
  try {
    write_files_atomically(
        {{out_csv, csv_text},
         {out_rows, props::sweep_rows_json_text(rows)},
         {out_json, sweep_json_text(rows, first.plan.at("kernel").get<std::string>(),
                                    first.plan.value("temperature_series_only", false))}});
  } catch (const std::exception& e) {
    return usage(e.what());
  }
  fmt::print("merged {} input{} (shards of {}): {} of {} rows\n", inputs.size(),
             inputs.size() == 1 ? "" : "s", count, rows.size(), order.size());
  const int verdict = print_sweep_verdict(rows, out_csv, out_json);
  for (const auto& f : findings) fmt::print("determinism finding: {}\n", f);
  bool incomplete = false;
  for (std::uint64_t s = 0; s < count; ++s) {
    if (!missing.count(s)) continue;
    incomplete = true;
    if (!present.count(s))
      fmt::print(stderr,
                 "softmax-audit merge: shard {}/{} missing: no INPUT is that shard; its {} "
                 "case{} are absent\n",
                 s, count, missing[s], missing[s] == 1 ? "" : "s");
    else
      fmt::print(stderr,
                 "softmax-audit merge: shard {}/{} incomplete: {} of its {} cases are absent "
                 "(run it again: it resumes from its table)\n",
                 s, count, missing[s], cases_of[s]);
  }
  for (std::uint64_t s = 0; s < count && cases_of.size() < count; ++s)
    if (!present.count(s) && !cases_of.count(s))
      fmt::print(stderr, "softmax-audit merge: note: shard {}/{} has no case and no INPUT\n", s,
                 count);
  if (!findings.empty()) {
    fmt::print(stderr,
               "softmax-audit merge: FAIL: {} determinism finding{} (one key, different "
               "bits)\n",
               findings.size(), findings.size() == 1 ? "" : "s");
    return exit_fail;
  }
  if (verdict == exit_fail) return exit_fail;
  const auto lacking = first.plan.value("lacking_dtypes", nlohmann::json::array());
  if (incomplete || rows.empty() || !lacking.empty()) {
    fmt::print(stderr, "softmax-audit merge: INCOMPLETE: {}\n",
               incomplete     ? std::string("the merged sweep lacks the rows named above")
               : rows.empty() ? std::string("no row was measured; nothing was checked")
                              : "the kernel does not support --dtype " + lacking.dump() +
                                    "; those rows were not measured");
    return exit_incomplete;
  }
  return exit_pass;
}

// `merge` of a sharded check (`check --shard k/N --out DIR`): the union of
// the shards' journals by unit (a property, or a family sharing its searches) into OUT/gate.json
// and OUT/gate.xml, as the unsharded check writes its --json and --junit (byte for byte under
// --no-timing), with gate.coverage judged over the merged verdicts.
int run_merge_check(const MergeOptions& o) {
  namespace fs = std::filesystem;
  auto usage = [](const std::string& why) {
    fmt::print(stderr, "softmax-audit merge: error: {}\n", why);
    return exit_usage;
  };
  const std::string out_json = (fs::path(o.out) / "gate.json").string(),
                    out_junit = (fs::path(o.out) / "gate.xml").string();
  struct CheckInput {
    std::string dir;
    nlohmann::json plan;
    std::uint64_t index = 0, count = 1;
    std::vector<CheckUnitResult> units;
  };
  std::vector<CheckInput> inputs;
  std::vector<NamedPath> read;
  for (const auto& dir : o.inputs) {
    std::error_code ec;
    const std::string plan_path = (fs::path(dir) / kShardFile).string();
    if (!fs::is_directory(dir, ec) || !fs::exists(plan_path, ec))
      return usage("INPUT " + dir + ": not the --out folder of a `check --shard k/N` (no " +
                   kShardFile + "); expected the folders of shards of one check");
    CheckInput in;
    in.dir = dir;
    try {
      std::ifstream f(plan_path);
      in.plan = nlohmann::json::parse(f);
      if (in.plan.value("format", "") != "softmax-audit-shard" ||
          in.plan.value("version", 0) != 1 || in.plan.value("command", "") != "check")
        throw std::invalid_argument("not the plan of a sharded check, version 1");
      in.index = in.plan.at("shard").at("index").get<std::uint64_t>();
      in.count = in.plan.at("shard").at("count").get<std::uint64_t>();
      if (in.count < 1 || in.index >= in.count) throw std::invalid_argument("bad shard index");
      in.plan.at("units").get_ref<const nlohmann::json::array_t&>();
      in.plan.at("run").at("config");
    } catch (const std::exception& e) {
      return usage(plan_path + ": " + e.what() +
                   "; expected the shard.json a sharded check wrote (every INPUT a shard of one "
                   "check, or every one of one sweep)");
    }
    read.push_back({"INPUT", plan_path});
    read.push_back({"INPUT", (fs::path(dir) / kCheckJournal).string()});
    inputs.push_back(std::move(in));
  }
  try {
    refuse_overlapping_paths(read, {{"OUT", out_json}, {"OUT", out_junit}});
  } catch (const std::invalid_argument& e) {
    return usage(e.what());
  }
  // OUT is a folder of its own: never an input, never a shard's folder.
  {
    std::error_code ec;
    for (const auto& in : inputs)
      if (fs::exists(o.out, ec) && fs::equivalent(o.out, in.dir, ec))
        return usage("OUT " + o.out + " is the same folder as INPUT " + in.dir +
                     "; expected an OUT that is none of the inputs (nothing was merged)");
    if (fs::exists(fs::path(o.out) / kShardFile, ec) ||
        fs::exists(fs::path(o.out) / kCheckJournal, ec))
      return usage("OUT " + o.out + " is a shard's folder (it holds a " + kShardFile + " or " +
                   kCheckJournal +
                   "); expected a folder for the merged outputs (nothing was "
                   "merged)");
  }
  const CheckInput& first = inputs.front();
  for (const CheckInput& in : inputs) {
    for (const char* field : {"kernel_identity", "run", "properties", "units", "no_timing"})
      if (in.plan.value(field, nlohmann::json()) != first.plan.value(field, nlohmann::json()))
        return usage(fmt::format(
            "INPUT {} is a shard of another check than INPUT {} (their {} differ); expected "
            "shards of one check (the same command but for --shard and --out)",
            in.dir, first.dir, field));
    if (in.count != first.count)
      return usage(fmt::format(
          "INPUT {} is shard {}/{} and INPUT {} shard {}/{}; expected one number of shards", in.dir,
          in.index, in.count, first.dir, first.index, first.count));
  }
  const std::uint64_t count = first.count;
  std::vector<std::string> order;
  std::map<std::string, std::uint64_t> shard_of;
  std::map<std::uint64_t, std::size_t> units_of;
  try {
    for (const auto& u : first.plan.at("units")) {
      const std::string key = u.at("key").get<std::string>();
      const std::uint64_t s = u.at("shard").get<std::uint64_t>();
      if (s >= count || !shard_of.emplace(key, s).second)
        throw std::invalid_argument("unit " + key + ": a shard out of range or a repeated key");
      order.push_back(key);
      ++units_of[s];
    }
  } catch (const std::exception& e) {
    return usage(
        fmt::format("INPUT {}: its {} lists a bad unit ({})", first.dir, kShardFile, e.what()));
  }
  for (CheckInput& in : inputs) {
    try {
      in.units = read_check_journal((fs::path(in.dir) / kCheckJournal).string(), false);
    } catch (const std::invalid_argument& e) {
      return usage(fmt::format("INPUT {}: {}", in.dir, e.what()));
    }
    for (const auto& u : in.units) {
      const auto s = shard_of.find(u.key);
      if (s == shard_of.end())
        return usage(
            fmt::format("INPUT {}: unit {} is not one of this check's (its {} does not "
                        "list it)",
                        in.dir, u.key, kShardFile));
      if (s->second != in.index)
        return usage(
            fmt::format("INPUT {}: unit {} belongs to shard {}/{}, not to this shard {}/{}", in.dir,
                        u.key, s->second, count, in.index, count));
    }
  }
  // The union by unit; one unit with different bits in two inputs is a
  // determinism finding, named down to the verdict and field that differ.
  struct Entry {
    const CheckUnitResult* unit;
    const CheckInput* from;
  };
  std::map<std::string, Entry> merged;
  std::vector<std::string> findings;
  std::set<std::uint64_t> present;
  for (const CheckInput& in : inputs) {
    present.insert(in.index);
    for (const auto& u : in.units) {
      const auto [it, fresh] = merged.emplace(u.key, Entry{&u, &in});
      if (fresh) continue;
      const CheckUnitResult& a = *it->second.unit;
      if (a.verdicts == u.verdicts && a.crashes == u.crashes && a.hangs == u.hangs) continue;
      std::string what = "crashes/hangs differ";
      const auto ja = nlohmann::json::parse(a.verdicts), jb = nlohmann::json::parse(u.verdicts);
      if (ja.size() != jb.size())
        what = fmt::format("{} verdicts vs {}", ja.size(), jb.size());
      else
        for (std::size_t i = 0; i < ja.size(); ++i) {
          if (ja[i] == jb[i]) continue;
          std::string field;
          for (const auto& [k, v] : ja[i].items())
            if (!jb[i].contains(k) || jb[i][k] != v) {
              field =
                  fmt::format("{} {} vs {}", k, v.dump(), jb[i].value(k, nlohmann::json()).dump());
              break;
            }
          what = fmt::format("verdict {} [{}/{}]: {}", ja[i].value("property", ""),
                             ja[i].value("op", ""), ja[i].value("dtype", ""), field);
          break;
        }
      findings.push_back(
          fmt::format("{} in {} and in {}: {}", u.key, it->second.from->dir, in.dir, what));
    }
  }
  // The run record, as the unsharded check writes it.
  const nlohmann::json& run = first.plan.at("run");
  const bool no_timing = first.plan.value("no_timing", false);
  gate::RunRecord rec;
  rec.kernel = run.value("kernel", "");
  rec.origin = run.value("origin", "");
  rec.description = run.value("description", "");
  rec.config = run.at("config");
  std::uint64_t seed = 0;
  try {
    seed = std::stoull(rec.config.at("seed").get<std::string>());
  } catch (const std::exception&) {
    return usage(fmt::format("INPUT {}: its {} holds no seed", first.dir, kShardFile));
  }
  std::vector<std::vector<Verdict>> unit_verdicts;
  std::map<std::uint64_t, std::size_t> missing;
  bool have_provenance = false;
  for (const auto& key : order) {
    const auto it = merged.find(key);
    if (it == merged.end()) {
      ++missing[shard_of[key]];
      continue;
    }
    const CheckUnitResult& u = *it->second.unit;
    if (!have_provenance) rec.provenance = u.provenance, have_provenance = true;
    rec.processes += u.processes;
    rec.crashes += u.crashes;
    rec.hangs += u.hangs;
    rec.seconds += u.seconds;
    unit_verdicts.push_back(u.verdict_list);
  }
  if (!no_timing) rec.provenance["command_line"] = gate::base_provenance()["command_line"];
  std::vector<std::string> properties;
  try {
    properties = first.plan.at("properties").get<std::vector<std::string>>();
  } catch (const std::exception& e) {
    return usage(
        fmt::format("INPUT {}: its {} lists no properties ({})", first.dir, kShardFile, e.what()));
  }
  rec.verdicts = combine_unit_verdicts(unit_verdicts, properties, seed);
  try {
    rec.verdicts.push_back(
        gate::coverage_verdict(rec.verdicts, coverage_spec_of(rec.config), rec.kernel));
  } catch (const std::exception& e) {
    return usage(fmt::format("INPUT {}: its {} holds a config gate.coverage cannot read ({})",
                             first.dir, kShardFile, e.what()));
  }
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (!fs::is_directory(o.out, ec)) return usage("OUT " + o.out + ": cannot create this directory");
  std::optional<OutputDirLock> lock;
  try {
    lock.emplace(o.out, "OUT");
    std::ostringstream junit;
    gate::write_junit(junit, {rec});
    write_files_atomically(
        {{out_json, gate::results_to_json({rec}).dump(2) + "\n"}, {out_junit, junit.str()}});
  } catch (const std::exception& e) {
    return usage(e.what());
  }
  gate::write_summary(std::cout, rec, false);
  fmt::print(
      "merged {} input{} (shards of {}): {} of {} units; {} and {}\n", inputs.size(),
      inputs.size() == 1 ? "" : "s", count,
      order.size() -
          [&] {
            std::size_t m = 0;
            for (const auto& [s, n] : missing) m += n;
            return m;
          }(),
      order.size(), out_json, out_junit);
  for (const auto& f : findings) fmt::print("determinism finding: {}\n", f);
  for (std::uint64_t s = 0; s < count; ++s) {
    if (!missing.count(s)) continue;
    if (!present.count(s))
      fmt::print(stderr,
                 "softmax-audit merge: shard {}/{} missing: no INPUT is that shard; its {} "
                 "unit{} of properties {} absent\n",
                 s, count, missing[s], missing[s] == 1 ? "" : "s", missing[s] == 1 ? "is" : "are");
    else
      fmt::print(stderr,
                 "softmax-audit merge: shard {}/{} incomplete: {} of its {} units are absent "
                 "(run it again: it resumes from its journal)\n",
                 s, count, missing[s], units_of[s]);
  }
  if (!findings.empty()) {
    fmt::print(stderr,
               "softmax-audit merge: FAIL: {} determinism finding{} (one unit, different bits)\n",
               findings.size(), findings.size() == 1 ? "" : "s");
    return exit_fail;
  }
  const gate::Tally tally = gate::tally(rec.verdicts);
  if (!tally.ok()) return exit_fail;
  if (!missing.empty()) {
    fmt::print(stderr,
               "softmax-audit merge: INCOMPLETE: the merged check lacks the properties of the "
               "shards named above\n");
    return exit_incomplete;
  }
  return tally.incomplete ? exit_incomplete : exit_pass;
}
}  // namespace

void add_merge_command(CLI::App& app) {
  auto o = std::make_shared<MergeOptions>();
  CLI::App* c = app.add_subcommand(
      "merge",
      "Unite the --out folders of a sharded sweep, check or audit (--shard k/N) into OUT, as the "
      "unsharded run writes it (an audit's: each step merged, then the report); exit 1 on a "
      "determinism finding, 3 when a shard is missing or incomplete");
  c->add_option("OUT", o->out,
                "Folder for the merged sweep.csv, rows.json and sweep.json (a sweep's shards), "
                "gate.json and gate.xml (a check's), or row-states.json and split-rows.csv (the "
                "phases of a `sweep --row-chunks`)")
      ->required();
  c->add_option("INPUT", o->inputs, "The shards' --out folders")->required();
  c->callback([o] { exit_code() = run_merge(*o); });
}

}  // namespace sa::cli
