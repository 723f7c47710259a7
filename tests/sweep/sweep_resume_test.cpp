// The sweep is resumable: a sweep killed with SIGKILL part-way (and a torn,
// partial last line) continues where it stopped, and the table ends with
// every row exactly once and the rows written before the kill unchanged.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "kernels/naive/naive_kernel.hpp"
#include "properties/sweep.hpp"

namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

sa::props::SweepConfig small_config(const std::string& path) {
  sa::props::SweepConfig c;
  for (int k = 4; k <= 14; ++k) c.log2_sizes.push_back(k);
  c.distributions = {"gaussian", "spike"};
  c.dtypes = {sa::DType::float32, sa::DType::bfloat16};  // the naive kernel also has float16
  c.samples = 16;
  c.csv_path = path;
  return c;
}

TEST(SweepResume, KilledMidwayLosesAndRepeatsNothing) {
  const std::string path =
      ::testing::TempDir() + "sa_sweep_resume_" + std::to_string(::getpid()) + ".csv";
  std::remove(path.c_str());
  const sa::Kernel k(sa::kernels::naive_kernel(), "built-in");
  const std::size_t expected = 11 * 2 * 2;  // sizes x distributions x dtypes

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto c = small_config(path);
    c.on_row = [](const std::string&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
    };
    try {
      sa::props::run_sweep(k, c);
    } catch (...) {
      ::_exit(2);
    }
    ::_exit(0);
  }
  // Kill it once a few rows are durable.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (count_lines(slurp(path)) < 7 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the sweep finished before it could be killed";
  const std::string before = slurp(path);
  const std::string complete_before = before.substr(0, before.find_last_of('\n') + 1);
  const int rows_before = count_lines(complete_before) - 2;  // identity line and header
  ASSERT_GE(rows_before, 5);
  ASSERT_LT(static_cast<std::size_t>(rows_before), expected);
  // A torn write on top of the kill: a partial line without its newline.
  {
    std::ofstream out(path, std::ios::app);
    out << "naive|float32|torn-line-from-a-kill,1,2,3";
  }

  const auto rows = sa::props::run_sweep(k, small_config(path));
  EXPECT_EQ(rows.size(), expected);
  std::set<std::string> keys;
  for (const auto& r : rows) EXPECT_TRUE(keys.insert(r.key).second) << "repeated row " << r.key;
  EXPECT_EQ(keys.size(), expected);
  const std::string after = slurp(path);
  EXPECT_EQ(after.compare(0, complete_before.size(), complete_before), 0)
      << "rows written before the kill changed";
  EXPECT_EQ(after.find("torn-line"), std::string::npos) << "the partial line was kept";
  EXPECT_EQ(after.back(), '\n');
  // Running again adds nothing.
  const auto again = sa::props::run_sweep(k, small_config(path));
  EXPECT_EQ(again.size(), expected);
  EXPECT_EQ(slurp(path), after);
  std::remove(path.c_str());
}

TEST(SweepResume, RejectsForeignFile) {
  const std::string path =
      ::testing::TempDir() + "sa_sweep_foreign_" + std::to_string(::getpid()) + ".csv";
  {
    std::ofstream out(path);
    out << "something,else\n1,2\n";
  }
  const sa::Kernel k(sa::kernels::naive_kernel(), "built-in");
  EXPECT_THROW(sa::props::run_sweep(k, small_config(path)), std::invalid_argument);
  std::remove(path.c_str());
}

// Issue 12, item 7: a table records its configuration (kernel, seed,
// samples, level) and refuses rows of another one, which used to be merged
// silently into the plotted series.
TEST(SweepTable, RefusesToMixAnotherSeed) {
  const std::string path =
      ::testing::TempDir() + "sa_sweep_mix_" + std::to_string(::getpid()) + ".csv";
  std::remove(path.c_str());
  const sa::Kernel k(sa::kernels::naive_kernel(), "built-in");
  auto c = small_config(path);
  c.log2_sizes = {4, 5};
  sa::props::run_sweep(k, c);
  const std::string before = slurp(path);
  c.seed = 2;
  try {
    sa::props::run_sweep(k, c);
    ADD_FAILURE() << "a sweep of another seed was appended to the table";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("another configuration"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("seed=2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(path), before) << "the refused run changed the table";
  c.seed = 1;
  c.samples = 17;
  EXPECT_THROW(sa::props::run_sweep(k, c), std::invalid_argument);
  std::remove(path.c_str());
}

// Issue 34: rows are drawn from specified seeds now ("draw=2" in the table's
// first line). A table written before (its rows from std::hash-derived seeds,
// no draw field) is refused, not resumed with rows of both kinds.
TEST(SweepTable, RefusesATableOfTheEarlierDraw) {
  const std::string path =
      ::testing::TempDir() + "sa_sweep_draw_" + std::to_string(::getpid()) + ".csv";
  std::remove(path.c_str());
  const sa::Kernel k(sa::kernels::naive_kernel(), "built-in");
  auto c = small_config(path);
  c.log2_sizes = {4};
  sa::props::run_sweep(k, c);
  std::string text = slurp(path);
  const std::size_t at = text.find("; draw=2\n");
  ASSERT_NE(at, std::string::npos) << text.substr(0, text.find('\n'));
  text.erase(at, std::string("; draw=2").size());
  std::ofstream(path, std::ios::trunc) << text;
  c.log2_sizes = {4, 5};
  try {
    sa::props::run_sweep(k, c);
    ADD_FAILURE() << "a table of the earlier draw was resumed";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("another configuration"), std::string::npos) << e.what();
  }
  EXPECT_EQ(slurp(path), text) << "the refused run changed the table";
  std::remove(path.c_str());
}

// A well-formed line that no sweep wrote (right field count, a key that does
// not match its fields, or text where a number belongs) is refused, naming
// the line; only a torn last line is dropped.
TEST(SweepTable, RefusesWellFormedForeignLines) {
  const std::string path =
      ::testing::TempDir() + "sa_sweep_garbage_" + std::to_string(::getpid()) + ".csv";
  const sa::Kernel k(sa::kernels::naive_kernel(), "built-in");
  auto c = small_config(path);
  c.log2_sizes = {4};
  for (int variant = 0; variant < 2; ++variant) {
    std::remove(path.c_str());
    sa::props::run_sweep(k, c);
    std::string text = slurp(path);
    std::string row = text.substr(text.find('\n', text.find('\n') + 1) + 1);
    row = row.substr(0, row.find('\n'));
    if (variant == 0)
      row.replace(0, row.find(','), "naive|float32|uniform|L1|t1|k4|s1|m16");  // key of another row
    else
      row.replace(row.rfind(','), std::string::npos, ",fast");  // text in a number column
    std::ofstream(path, std::ios::app) << row << "\n";
    try {
      sa::props::read_sweep_csv(path);
      ADD_FAILURE() << "accepted: " << row;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("line "), std::string::npos) << e.what();
    }
    EXPECT_THROW(sa::props::run_sweep(k, c), std::invalid_argument) << row;
  }
  std::remove(path.c_str());
}

// A kernel name holding commas and quotes is written as one CSV field, read
// back exactly, and resuming adds nothing (it used to drop every row and
// append them again on each resume).
TEST(SweepTable, NamesWithCommasAndQuotesRoundTrip) {
  const std::string path =
      ::testing::TempDir() + "sa_sweep_name_" + std::to_string(::getpid()) + ".csv";
  std::remove(path.c_str());
  sa_kernel renamed = *sa::kernels::naive_kernel();
  renamed.name = "naive, \"quoted\", `x`";
  const sa::Kernel k(&renamed, "test");
  auto c = small_config(path);
  c.log2_sizes = {4, 5};
  const auto first = sa::props::run_sweep(k, c);
  ASSERT_FALSE(first.empty());
  for (const auto& r : first) EXPECT_EQ(r.kernel, renamed.name);
  const std::string before = slurp(path);
  const auto again = sa::props::run_sweep(k, c);
  EXPECT_EQ(again.size(), first.size());
  EXPECT_EQ(slurp(path), before);
  std::remove(path.c_str());
}

}  // namespace
