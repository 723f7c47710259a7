// SA_CPU_MAX_ISA (kernels/cpu/isa_limit.hpp) reaches Highway's dispatch.
// Linked into the CPU kernel's test binaries; their forced-AVX2 CTest twins
// (label avx2) run them with SA_CPU_MAX_ISA=AVX2, so that a machine with
// AVX-512 also proves the AVX2 path and this test proves the limit held.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cstdlib>
#include <string>

#include "kernels/cpu/isa_limit.hpp"

namespace {

TEST(CpuIsaLimit, TheEnvironmentReachesTheDispatch) {
  const std::string limit = sa::kernels::cpu::cpu_isa_limit();
  if (limit == "none")
    GTEST_SKIP() << "SA_CPU_MAX_ISA is not set: the forced-AVX2 twins of this binary (ctest -L "
                    "avx2) check the limit";
  const std::int64_t supported = hwy::SupportedTargets();
  EXPECT_EQ(supported & (HWY_AVX3 | HWY_AVX3_DL), 0)
      << "SA_CPU_MAX_ISA=" << limit << " but Highway still offers an AVX-512 target";
  if (limit == "SSE4" || limit == "EMU128") EXPECT_EQ(supported & HWY_AVX2, 0);
  // The dispatch itself (Highway 1.0.3 chose a disabled AVX3 before the
  // limit re-chose from the masked set).
  const std::string chosen = sa::kernels::cpu::vector_dispatch_target();
  EXPECT_EQ(chosen, hwy::TargetName(supported & -supported)) << "SA_CPU_MAX_ISA=" << limit;
  EXPECT_EQ(chosen.rfind("AVX3", 0), std::string::npos) << "SA_CPU_MAX_ISA=" << limit;
  std::printf("[isa] SA_CPU_MAX_ISA=%s: the vector code dispatches to %s\n", limit.c_str(),
              chosen.c_str());
}

TEST(CpuIsaLimit, AnUnknownValueIsNamed) {
  const char* old = std::getenv("SA_CPU_MAX_ISA");
  const std::string saved = old ? old : "";
  setenv("SA_CPU_MAX_ISA", "avx9000", 1);
  const std::string e = sa::kernels::cpu::cpu_isa_limit_error();
  if (old)
    setenv("SA_CPU_MAX_ISA", saved.c_str(), 1);
  else
    unsetenv("SA_CPU_MAX_ISA");
  EXPECT_NE(e.find("SA_CPU_MAX_ISA='avx9000'"), std::string::npos) << e;
  EXPECT_NE(e.find("AVX2"), std::string::npos) << e;
  setenv("SA_CPU_MAX_ISA", "avx2", 1);  // case-insensitive
  EXPECT_EQ(sa::kernels::cpu::cpu_isa_limit_error(), "");
  if (old)
    setenv("SA_CPU_MAX_ISA", saved.c_str(), 1);
  else
    unsetenv("SA_CPU_MAX_ISA");
}

}  // namespace
