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
#include <map>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/sweep_outputs.hpp"
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

int run_merge(const MergeOptions& o) {
  namespace fs = std::filesystem;
  auto usage = [](const std::string& why) {
    fmt::print(stderr, "softmax-audit merge: error: {}\n", why);
    return exit_usage;
  };
  if (o.inputs.empty()) return usage("no INPUT given; expected the --out folders of the shards");
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

}  // namespace

void add_merge_command(CLI::App& app) {
  auto o = std::make_shared<MergeOptions>();
  CLI::App* c = app.add_subcommand(
      "merge",
      "Unite the --out folders of a sharded sweep (sweep --shard k/N) into OUT, as the unsharded "
      "sweep writes it; exit 3 when a shard is missing or incomplete");
  c->add_option("OUT", o->out, "Folder for the merged sweep.csv, rows.json and sweep.json")
      ->required();
  c->add_option("INPUT", o->inputs, "The shards' --out folders")->required();
  c->callback([o] { exit_code() = run_merge(*o); });
}

}  // namespace sa::cli
