// The whole property suite inside a user's own GoogleTest binary.
//
//     #include <softmax_audit/suite/gate/gtest.hpp>     // installed; "gate/gtest.hpp" in-tree
//     extern "C" const sa_kernel* sa_kernel_entry(void);   // the user's kernel
//     SA_AUDIT_KERNEL_TESTS(MyKernel, sa_kernel_entry());
//
// registers one test per suite property, named MyKernel.<property id with '.'
// replaced by '_'>. The argument is evaluated when the tests run and may be a
// `const sa_kernel*`, an sa::Kernel, or the path of a plugin library. Each test
// runs its property in an isolated child process (gate/isolation.hpp): a
// crash or hang of the kernel fails that test, not the binary. Every failing
// verdict is reported with sa::describe (claim, measured, bound, rule,
// counterexample). Use SA_AUDIT_KERNEL_TESTS_WITH(Name, expr, config) to pass
// an sa::props::SuiteConfig (dtypes, sizes, cases, seed ...).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "gate/isolation.hpp"
#include "kernels/kernel.hpp"
#include "properties/suite.hpp"

namespace sa::gate {

inline Kernel as_kernel(const sa_kernel* k) { return Kernel(k, "linked into the test binary"); }
inline Kernel as_kernel(Kernel k) { return k; }
inline Kernel as_kernel(const std::string& plugin_path) { return load_plugin(plugin_path); }
inline Kernel as_kernel(const char* plugin_path) { return load_plugin(plugin_path); }

// Registers the tests; returns how many (so a static initialiser can call it).
inline int register_kernel_tests(const char* suite_name, std::function<Kernel()> make,
                                 props::SuiteConfig config = {}, IsolationOptions options = {}) {
  int count = 0;
  std::vector<std::string> ids = config.properties;
  if (ids.empty())
    for (const auto& p : props::properties()) ids.push_back(p.id);
  for (const auto& id : ids) {
    std::string test_name = id;
    for (char& c : test_name)
      if (c == '.' || c == '-' || c == ' ') c = '_';
    ::testing::RegisterTest(
        suite_name, test_name.c_str(), nullptr, id.c_str(), __FILE__, __LINE__,
        [make, config, options, id]() -> ::testing::Test* {
          struct PropertyTest : ::testing::Test {
            std::function<Kernel()> make;
            props::SuiteConfig config;
            IsolationOptions options;
            std::string id;
            void TestBody() override {
              const Kernel kernel = make();
              if (const std::string why = why_kernel_cannot_run(kernel); !why.empty())
                GTEST_SKIP() << why;
              props::SuiteConfig one = config;
              one.properties = {id};
              const IsolatedRun run = run_isolated(kernel, one, options);
              int checked = 0;
              for (const auto& v : run.verdicts) {
                if (v.outcome == Outcome::fail || v.outcome == Outcome::error)
                  ADD_FAILURE() << describe(v);
                else if (v.outcome == Outcome::pass && v.property.rfind("gate.", 0) != 0)
                  ++checked;
              }
              if (checked == 0 && !HasFailure())
                GTEST_SKIP() << "property " << id << " does not apply to kernel '" << kernel.name()
                             << "' (every verdict was a skip)";
            }
          };
          auto* t = new PropertyTest;
          t->make = make;
          t->config = config;
          t->options = options;
          t->id = id;
          return t;
        });
    ++count;
  }
  return count;
}

}  // namespace sa::gate

#define SA_AUDIT_KERNEL_TESTS_WITH(Name, kernel_expr, config)    \
  [[maybe_unused]] static const int sa_audit_registered_##Name = \
      ::sa::gate::register_kernel_tests(                         \
          #Name, [] { return ::sa::gate::as_kernel(kernel_expr); }, config)

#define SA_AUDIT_KERNEL_TESTS(Name, kernel_expr) \
  SA_AUDIT_KERNEL_TESTS_WITH(Name, kernel_expr, ::sa::props::SuiteConfig{})
