// Case ids and sweep row seeds are the same on every build (issue 34): a
// table of known values, computed from the specification in
// core/case_id.hpp and docs/scale-out.md by an independent implementation
// (a few lines of Python, docs/scale-out.md "Case ids"), checked here. The
// sanitize preset builds this test with clang-14 and the default one with
// gcc, so CI checks both compilers against the same table.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <map>
#include <string>

#include "core/case_id.hpp"
#include "core/shard.hpp"

namespace {

TEST(CaseId, SplitMix64MatchesItsReference) {
  // The first output of Vigna's splitmix64.c from state 0 is 0xE220A8397B1DCDAF:
  // the hash of no bytes is mix(0 + gamma), that same number.
  EXPECT_EQ(sa::splitmix64_hash(""), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(sa::splitmix64_hash(""), 16294208416658607535ull);
  EXPECT_EQ(sa::splitmix64_mix(0), 0ull);
  EXPECT_EQ(sa::splitmix64_mix(1), 6238072747940578789ull);
  EXPECT_EQ(sa::splitmix64_mix(0x0123456789ABCDEFull), 12880392674509918508ull);
  EXPECT_EQ(sa::splitmix64_hash("a"), 13971819848363002055ull);
  EXPECT_EQ(sa::splitmix64_hash("12345678"), 17608736340504220676ull);
  EXPECT_EQ(sa::splitmix64_hash("123456789"), 5222994320443514605ull);
}

TEST(CaseId, KnownIds) {
  struct Known {
    sa::CaseKey key;
    std::uint64_t id;
  };
  const Known table[] = {
      {{"builtin:cpu", "sweep", "float32", {16}, "gaussian", 1.0, 1, 1, 0}, 2643923476944686448ull},
      {{"builtin:naive",
        "sweep",
        "bfloat16",
        {std::int64_t(1) << 24},
        "fa3_outliers",
        0.5,
        2,
        18446744073709551615ull,
        0},
       11768133230212413814ull},
      {{"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "softmax",
        "float16",
        {4, 1000},
        "spike",
        2.0,
        1,
        42,
        7},
       3580256662749505685ull},
      {{"builtin:cpu", "sweep", "float32", {31}, "uniform", 1.0, -1, 0, 0},
       10548830024262884287ull},
      {{"caf\xc3\xa9", "entropy", "float32", {}, "", 1e-300, 0, 7, 123456789},
       1487661348433322053ull},
  };
  for (const auto& k : table)
    EXPECT_EQ(sa::case_id(k.key), k.id) << k.key.kernel << " " << k.key.op;
}

TEST(CaseId, KnownSweepRowSeeds) {
  EXPECT_EQ(sa::sweep_row_seed(1, 16, "gaussian"), 2162280862399792680ull);
  EXPECT_EQ(sa::sweep_row_seed(1, 49, "spike"), 14204138783198002809ull);
  EXPECT_EQ(sa::sweep_row_seed(0, std::int64_t(1) << 30, "uniform"), 5171907253509022188ull);
  EXPECT_EQ(sa::sweep_row_seed(18446744073709551615ull, 1, "fa3_outliers"),
            11958298953450508462ull);
}

// Each field moves the id (a field left out of the encoding would not).
TEST(CaseId, EveryFieldCounts) {
  const sa::CaseKey base{"builtin:cpu", "sweep", "float32", {16}, "gaussian", 1.0, 1, 1, 0};
  const std::uint64_t id = sa::case_id(base);
  auto differs = [&](auto change) {
    sa::CaseKey k = base;
    change(k);
    return sa::case_id(k) != id;
  };
  EXPECT_TRUE(differs([](sa::CaseKey& k) { k.kernel = "builtin:naive"; }));
  EXPECT_TRUE(differs([](sa::CaseKey& k) { k.op = "softmax"; }));
  EXPECT_TRUE(differs([](sa::CaseKey& k) { k.dtype = "float16"; }));
  EXPECT_TRUE(differs([](sa::CaseKey& k) { k.shape = {17}; }));
  EXPECT_TRUE(differs([](sa::CaseKey& k) { k.shape = {16, 1}; }));
  EXPECT_TRUE(differs([](sa::CaseKey& k) { k.distribution = "spike"; }));
  EXPECT_TRUE(differs([](sa::CaseKey& k) { k.theta = 2.0; }));
  EXPECT_TRUE(differs([](sa::CaseKey& k) { k.level = 2; }));
  EXPECT_TRUE(differs([](sa::CaseKey& k) { k.seed = 2; }));
  EXPECT_TRUE(differs([](sa::CaseKey& k) { k.index = 1; }));
  // Field boundaries are encoded: moving a character from one string to the next changes the id.
  sa::CaseKey a = base, b = base;
  a.kernel = "ab", a.op = "c";
  b.kernel = "a", b.op = "bc";
  EXPECT_NE(sa::case_id(a), sa::case_id(b));
}

using Env = std::map<std::string, std::string>;
std::optional<sa::Shard> resolve(const std::string& opt, std::uint64_t count, const Env& env) {
  return sa::resolve_shard(opt, count, [&](const char* name) -> std::optional<std::string> {
    const auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
}
std::string error_of(const std::string& opt, std::uint64_t count, const Env& env) {
  try {
    resolve(opt, count, env);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Shard, FromEachSource) {
  EXPECT_FALSE(resolve("", 0, {}).has_value());
  auto s = resolve("1/3", 0, {});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->index, 1u);
  EXPECT_EQ(s->count, 3u);
  s = resolve("", 0,
              {{"SLURM_ARRAY_TASK_ID", "5"},
               {"SLURM_ARRAY_TASK_COUNT", "4"},
               {"SLURM_ARRAY_TASK_MIN", "2"}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->text(), "3/4");
  s = resolve("", 8, {{"JOB_COMPLETION_INDEX", "7"}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->text(), "7/8");
  s = resolve("", 0, {{"GTEST_SHARD_INDEX", "0"}, {"GTEST_TOTAL_SHARDS", "2"}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->text(), "0/2");
  // Sources that agree are one.
  s = resolve(
      "2/4", 4,
      {{"JOB_COMPLETION_INDEX", "2"}, {"GTEST_SHARD_INDEX", "2"}, {"GTEST_TOTAL_SHARDS", "4"}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->text(), "2/4");
  EXPECT_TRUE(s->owns(6));
  EXPECT_FALSE(s->owns(7));
}

TEST(Shard, ConflictsAndBadValuesAreOneLineErrors) {
  const std::string conflict =
      error_of("0/3", 0, {{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "3"}});
  EXPECT_NE(conflict.find("conflicting shards"), std::string::npos) << conflict;
  EXPECT_NE(conflict.find("--shard 0/3"), std::string::npos) << conflict;
  EXPECT_NE(conflict.find("SLURM_ARRAY_TASK_ID=1"), std::string::npos) << conflict;
  EXPECT_NE(error_of("", 0,
                     {{"GTEST_SHARD_INDEX", "0"},
                      {"GTEST_TOTAL_SHARDS", "2"},
                      {"SLURM_ARRAY_TASK_ID", "1"},
                      {"SLURM_ARRAY_TASK_COUNT", "2"}})
                .find("conflicting"),
            std::string::npos);
  EXPECT_NE(error_of("1/2", 3, {}).find("disagree"), std::string::npos);
  EXPECT_NE(error_of("", 0, {{"JOB_COMPLETION_INDEX", "1"}}).find("--shard-count"),
            std::string::npos);
  EXPECT_NE(error_of("", 4, {}).find("without a shard index"), std::string::npos);
  EXPECT_NE(error_of("", 0, {{"SLURM_ARRAY_TASK_ID", "1"}}).find("SLURM_ARRAY_TASK_COUNT"),
            std::string::npos);
  EXPECT_NE(error_of("", 0, {{"GTEST_TOTAL_SHARDS", "2"}}).find("GTEST_SHARD_INDEX"),
            std::string::npos);
  for (const char* bad : {"3/3", "1", "a/3", "1/0", "-1/3", "1/3/4", "1/ 3", "/3", "1/"}) {
    const std::string e = error_of(bad, 0, {});
    EXPECT_FALSE(e.empty()) << bad;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_NE(error_of("", 0, {{"SLURM_ARRAY_TASK_ID", "x"}, {"SLURM_ARRAY_TASK_COUNT", "3"}})
                .find("not a decimal integer"),
            std::string::npos);
}

}  // namespace
