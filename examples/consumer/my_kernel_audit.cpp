// The whole softmax-audit property suite on "my" kernel, as GoogleTest tests:
// one test per property (ExampleKernel.<property>), each in an isolated process.
#include <gate/gtest.hpp>

extern "C" const sa_kernel* sa_kernel_entry(void);  // examples/outside_kernel/example_kernel.c

namespace {
sa::props::SuiteConfig config() {
  sa::props::SuiteConfig c;
  c.cases = 20;  // keep the example quick
  c.seed = 1;    // reproducible
  return c;
}
}  // namespace

SA_AUDIT_KERNEL_TESTS_WITH(ExampleKernel, sa_kernel_entry(), config());
