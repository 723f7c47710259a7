// The gate spec's screening before toml++ (gate/spec.cpp, screen_toml; why:
// docs/fuzzing.md, "toml++"). Claim: every input of the classes on which
// toml++ 3.3.0 fails its own assertions or reaches TOML_UNREACHABLE (found
// by fuzz/gate_spec and fuzz/toml_parser, kept in
// fuzz/corpus/gate_spec/toml-*) is refused
// with a one-line SpecError naming the file and line, before toml++ sees it;
// and no valid TOML within the stated limits (size, nesting, ASCII outside
// strings and comments, no dates or times) is refused by the screen.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gate/spec.hpp"

using sa::gate::parse_gate_spec;
using sa::gate::SpecError;

namespace {

// The SpecError message for `text`, or "" when it parses.
std::string error_of(const std::string& text, const std::string& origin = "s.toml") {
  try {
    parse_gate_spec(text, origin);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

bool screened(const std::string& message) {
  return message.find("not a gate spec") != std::string::npos;
}

}  // namespace

TEST(SpecScreen, RefusesEveryCommittedToml3AssertionInput) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(SA_SOURCE_DIR) / "fuzz" / "corpus" / "gate_spec";
  int seen = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("toml-", 0) != 0) continue;  // toml-assert-*, toml-ub-*
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string m = error_of(ss.str(), name);
    EXPECT_TRUE(screened(m)) << name << " -> " << m;
    EXPECT_EQ(m.rfind(name + ":", 0), 0u) << m;       // names the file and line
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;  // one line
    ++seen;
  }
  EXPECT_GE(seen, 8) << "the regression inputs are missing from " << dir;
}

TEST(SpecScreen, RefusesNoKeyNoValueAndDatesWhereToml3Asserts) {
  for (const char* bad : {"a = [1,}]",
                          "a = [,]",
                          "a = [1,,2]",
                          "a = }",
                          "a = ,",
                          "a = ]",
                          "a = # nothing\n",
                          "a =",
                          "a = [1,",
                          "t = {x = ,}",
                          "a = [[1,}]]",
                          "a = [{x = [,]}]",
                          "[$a]",
                          "[[ $a]]",
                          "a.$ = 1",
                          "$ = 1",
                          "t = {$ = 1}",
                          "t = {a = 1, ]}",
                          "a = 1979-05-27T)7:32:00",
                          "a = 1979-05-27",
                          "a = 07:32:00",
                          "a = [1, 2-3]",
                          "a = 1979['''x'''",
                          "a = 1'x'",
                          "x = \"\xc9\xa3\"",
                          "x = '\xc3\xa9'",
                          "a\"b\" = 1",
                          "a$ = 1"}) {
    const std::string m = error_of(bad);
    EXPECT_TRUE(screened(m)) << bad << " -> " << m;
    EXPECT_EQ(m.rfind("s.toml:1", 0), 0u) << bad << " -> " << m;
  }
}

TEST(SpecScreen, RefusesWhatNoSpecNeeds) {
  EXPECT_TRUE(screened(error_of(std::string(64 * 1024 + 1, '#'))));
  EXPECT_TRUE(screened(error_of("a = [[[[[[[[[1]]]]]]]]]")));  // 9 deep
  EXPECT_TRUE(screened(error_of(std::string("a = 1\x01\n"))));
  EXPECT_TRUE(screened(error_of(std::string("a = 1\0", 6))));
  EXPECT_TRUE(screened(error_of("a\xc2\xa0= 1")));  // no-break space outside a string
  const std::string m = error_of("seed = 1\n\nsizes = [1,\n ,]\n");
  EXPECT_EQ(m.rfind("s.toml:4: not a gate spec", 0), 0u) << m;  // the line of the fault
}

TEST(SpecScreen, LetsValidTomlThrough) {
  // Valid TOML: whatever is wrong with these is said by the spec's own checks
  // or toml++, never by the screen.
  for (const char* ok :
       {"sizes = []", "sizes = [1, 2,]", "sizes = [\n  1, # one\n  2,\n]\n",
        "ops = [\"softmax\"] # \xc3\xa9 in a comment", "x = \"a = [1,}]\"", "x = 'a, ]}'",
        "x = \"\"\"multi\nline, ] } \"\"\"", "x = '''\n,}\n'''", "x = \"\\\"\"",
        "[t]\nx = {a = 1, b = [2, 3]}", "[[arr]]\nq = 1", "a-b_c.d = 1", "a = [[[[[[[[1]]]]]]]]",
        "x = {}", "x = [-1e-5, 1_000, +inf, -nan, 0x1F, 1E-3]", "x = [{}, {a = []}]",
        "cases = 3\r\nseed = 4\r\n"}) {
    const std::string m = error_of(ok);
    EXPECT_FALSE(screened(m)) << ok << " -> " << m;
  }
  EXPECT_EQ(error_of("sizes = [1, 2,]\ncases = 3\r\n"), "");
}
