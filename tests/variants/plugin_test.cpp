// A variant built outside the suite as a shared library against
// include/softmax_audit/variant.h (examples/variant_plugin) loads through the
// same path as `softmax-audit fuzz --plugin`, and the fuzzer finds the bug its
// naive kernel carries.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fuzz_command.hpp"
#include "variants/fuzz.hpp"

namespace sa::variants {
namespace {

TEST(VariantPlugin, LoadsAndIsFuzzedLikeABuiltin) {
  const auto vs = load_plugin(SA_VARIANT_EXAMPLE_PLUGIN);
  ASSERT_EQ(vs.size(), 2u);
  EXPECT_EQ(vs[0].name, "plugin_softmax");
  EXPECT_EQ(vs[1].name, "plugin_naive_softmax");
  FuzzConfig cfg;
  cfg.cases = 60;
  const Matrix m = fuzz_all({&vs[0], &vs[1]}, cfg);
  // The shifted one holds everything softmax holds; it supplies no streaming state.
  for (const auto& v : m.rows[0].cells)
    EXPECT_EQ(v.outcome, v.property == "streamable" ? Outcome::skip : Outcome::pass) << describe(v);
  // The naive exp(l)/sum exp(l) kernel: exp(+inf)/inf and 0/0 are NaN.
  const Verdict* pinf = cell(m.rows[1], "special.pos_inf");
  const Verdict* mask = cell(m.rows[1], "special.neg_inf_mask");
  EXPECT_EQ(pinf->outcome, Outcome::fail);
  EXPECT_EQ(mask->outcome, Outcome::fail);
  // Shrunk to the smallest rows: [inf] and [-inf].
  EXPECT_EQ(pinf->counterexample.rfind("l = [inf]", 0), 0u) << pinf->counterexample;
  EXPECT_EQ(mask->counterexample.rfind("l = [-inf]", 0), 0u) << mask->counterexample;
}

TEST(VariantPlugin, BadPathIsAClearError) {
  try {
    load_plugin("/nonexistent/libnothing.so");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/libnothing.so"), std::string::npos)
        << e.what();
  }
}

int run_cli(std::vector<std::string> args) {
  CLI::App app{"test"};
  sa::cli::add_fuzz_command(app);
  std::vector<const char*> argv{"softmax-audit"};
  for (auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return e.get_exit_code();
  }
  return 0;
}

TEST(FuzzCommand, PluginThroughTheCliWritesJson) {
  const auto out = std::filesystem::temp_directory_path() / "sa_variants_cli_test.json";
  ASSERT_EQ(run_cli({"fuzz", "--plugin", SA_VARIANT_EXAMPLE_PLUGIN, "--variant",
                     "plugin_naive_softmax", "--cases", "40", "--json", out.string()}),
            1);  // it fails special-value semantics every variant claims: the run fails
  std::ifstream f(out);
  const auto j = nlohmann::json::parse(f);
  ASSERT_EQ(j["variants"].size(), 1u);
  const auto& cells = j["variants"][0]["cells"];
  EXPECT_EQ(cells["special.pos_inf"]["outcome"], "fail");
  EXPECT_EQ(cells["sum_to_one"]["outcome"], "pass");
  EXPECT_FALSE(cells["special.pos_inf"]["counterexample"].get<std::string>().empty());
  std::filesystem::remove(out);
}

TEST(FuzzCommand, UnknownVariantIsABadInput) {
  EXPECT_NE(run_cli({"fuzz", "--variant", "no_such_variant", "--cases", "1"}), 0);
}

}  // namespace
}  // namespace sa::variants
