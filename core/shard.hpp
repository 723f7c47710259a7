// Which shard k of N this process runs (issue 34): from `--shard k/N` or
// from the scheduler that started it. A case belongs to shard case_id mod N
// (core/case_id.hpp), so every shard, on any machine, agrees on the split.
//
// Sources, each giving k and N:
//   --shard k/N                                   the command line
//   SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT   a Slurm job array; k is the
//       task id minus SLURM_ARRAY_TASK_MIN (0 when unset), so --array=1-4
//       runs shards 0..3 of 4; the array must have step 1
//   JOB_COMPLETION_INDEX                          a Kubernetes Indexed Job; N
//       is not in the pod's environment: pass --shard-count N (the Job's
//       completions)
//   GTEST_SHARD_INDEX, GTEST_TOTAL_SHARDS         GoogleTest's sharding
// Several sources that agree are one; two that disagree, a variable without
// its partner, or a value that is not a number in range is a one-line error
// (std::invalid_argument naming the source and what was expected).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sa {

struct Shard {
  std::uint64_t index = 0, count = 1;
  std::string source;  // where k/N came from, e.g. "--shard 1/3"
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
  bool owns(std::uint64_t case_id) const { return case_id % count == index; }
};

inline constexpr std::uint64_t kMaxShards = std::uint64_t(1) << 32;

namespace detail {
inline bool parse_u64(const std::string& s, std::uint64_t& out) {
  if (s.empty() || s.size() > 19) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  out = v;
  return true;
}
}  // namespace detail

// `shard_option`: the text of --shard ("" when not given); `count_option`:
// --shard-count (0 when not given); `env`: reads a variable (nullopt when
// unset; std::getenv's by default). Returns nullopt when nothing asks for
// sharding.
inline std::optional<Shard> resolve_shard(
    const std::string& shard_option, std::uint64_t count_option,
    const std::function<std::optional<std::string>(const char*)>& env = {}) {
  auto get = [&](const char* name) -> std::optional<std::string> {
    if (env) return env(name);
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  auto number = [](const std::string& what, const std::string& s) {
    std::uint64_t v = 0;
    if (!detail::parse_u64(s, v))
      throw std::invalid_argument(what + ": '" + s + "' is not a decimal integer; expected one");
    return v;
  };
  std::vector<Shard> found;
  auto add = [&](Shard s) {
    if (s.count < 1 || s.count > kMaxShards)
      throw std::invalid_argument(s.source + ": " + std::to_string(s.count) +
                                  " shards; expected 1 to 2^32");
    if (s.index >= s.count)
      throw std::invalid_argument(s.source + ": shard " + std::to_string(s.index) + " of " +
                                  std::to_string(s.count) + "; expected an index from 0 to " +
                                  std::to_string(s.count - 1));
    found.push_back(std::move(s));
  };
  if (!shard_option.empty()) {
    const auto slash = shard_option.find('/');
    if (slash == std::string::npos)
      throw std::invalid_argument("--shard " + shard_option +
                                  ": expected k/N, the shard index k from 0 to N - 1 and the "
                                  "number of shards N (e.g. --shard 0/4)");
    Shard s;
    s.source = "--shard " + shard_option;
    s.index = number(s.source, shard_option.substr(0, slash));
    s.count = number(s.source, shard_option.substr(slash + 1));
    add(s);
  }
  const auto sid = get("SLURM_ARRAY_TASK_ID"), scount = get("SLURM_ARRAY_TASK_COUNT");
  if (sid || scount) {
    if (!sid || !scount)
      throw std::invalid_argument(
          std::string(sid ? "SLURM_ARRAY_TASK_ID" : "SLURM_ARRAY_TASK_COUNT") + " is set without " +
          (sid ? "SLURM_ARRAY_TASK_COUNT" : "SLURM_ARRAY_TASK_ID") +
          "; expected both (a Slurm job array sets both)");
    const auto smin = get("SLURM_ARRAY_TASK_MIN");
    Shard s;
    const std::uint64_t id = number("SLURM_ARRAY_TASK_ID", *sid);
    const std::uint64_t min = smin ? number("SLURM_ARRAY_TASK_MIN", *smin) : 0;
    s.source = "SLURM_ARRAY_TASK_ID=" + *sid + " (SLURM_ARRAY_TASK_COUNT=" + *scount +
               (smin ? ", SLURM_ARRAY_TASK_MIN=" + *smin : std::string()) + ")";
    if (id < min)
      throw std::invalid_argument(s.source +
                                  ": the task id is below the array's first; expected "
                                  "an array of consecutive ids (--array=0-N-1)");
    s.index = id - min;
    s.count = number("SLURM_ARRAY_TASK_COUNT", *scount);
    add(s);
  }
  if (const auto jci = get("JOB_COMPLETION_INDEX")) {
    if (count_option == 0 && found.empty())
      throw std::invalid_argument("JOB_COMPLETION_INDEX=" + *jci +
                                  " is set but no shard count is given; expected --shard-count N "
                                  "(the Indexed Job's completions)");
    Shard s;
    s.source = "JOB_COMPLETION_INDEX=" + *jci;
    s.index = number("JOB_COMPLETION_INDEX", *jci);
    s.count = count_option ? count_option : found.front().count;
    if (count_option) s.source += " (--shard-count " + std::to_string(count_option) + ")";
    add(s);
  }
  const auto gi = get("GTEST_SHARD_INDEX"), gt = get("GTEST_TOTAL_SHARDS");
  if (gi || gt) {
    if (!gi || !gt)
      throw std::invalid_argument(
          std::string(gi ? "GTEST_SHARD_INDEX" : "GTEST_TOTAL_SHARDS") + " is set without " +
          (gi ? "GTEST_TOTAL_SHARDS" : "GTEST_SHARD_INDEX") + "; expected both");
    Shard s;
    s.source = "GTEST_SHARD_INDEX=" + *gi + " (GTEST_TOTAL_SHARDS=" + *gt + ")";
    s.index = number("GTEST_SHARD_INDEX", *gi);
    s.count = number("GTEST_TOTAL_SHARDS", *gt);
    add(s);
  }
  if (count_option && !found.empty() && found.front().count != count_option)
    throw std::invalid_argument("--shard-count " + std::to_string(count_option) + " and " +
                                found.front().source + " disagree; expected one number of shards");
  if (found.empty()) {
    if (count_option)
      throw std::invalid_argument("--shard-count " + std::to_string(count_option) +
                                  " without a shard index; expected --shard k/N or "
                                  "JOB_COMPLETION_INDEX");
    return std::nullopt;
  }
  for (std::size_t i = 1; i < found.size(); ++i)
    if (found[i].index != found[0].index || found[i].count != found[0].count)
      throw std::invalid_argument("conflicting shards: " + found[0].source + " is shard " +
                                  found[0].text() + ", " + found[i].source + " is shard " +
                                  found[i].text() + "; expected one source, or sources that agree");
  return found.front();
}

}  // namespace sa
