#include "kernels/cpu/isa_limit.hpp"

#include <hwy/targets.h>

// The target this library's vector code dispatches to, compiled per target
// like the attention code beside it (foreach_target), so that a test can see
// the dispatch itself and not only Highway's list of supported targets.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/isa_limit.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace sa::kernels::cpu::HWY_NAMESPACE {
const char* IsaTargetName() { return hwy::TargetName(HWY_TARGET); }
}  // namespace sa::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <mutex>

namespace sa::kernels::cpu {
namespace {

struct Limit {
  const char* name;
  std::int64_t disabled;  // Highway targets the limit removes
};

// Every AVX-512 target Highway 1.0 defines (the kernel is compiled for HWY_AVX3).
constexpr std::int64_t kAvx512 = HWY_AVX3 | HWY_AVX3_DL;

const Limit* parse(const char* v) {
  static constexpr Limit kLimits[] = {
      {"AVX512", 0},
      {"AVX2", kAvx512},
      {"SSE4", kAvx512 | HWY_AVX2},
      {"EMU128", kAvx512 | HWY_AVX2 | HWY_SSE4 | HWY_SSSE3},
  };
  std::string s(v ? v : "");
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  for (const auto& l : kLimits)
    if (s == l.name) return &l;
  return nullptr;
}

const char* env() {
  const char* v = std::getenv("SA_CPU_MAX_ISA");
  return v && *v ? v : nullptr;
}

}  // namespace

void reapply_cpu_isa_limit() {
  const Limit* l = parse(env());
  if (!l || !l->disabled) return;
  // Highway 1.0.3: DisableTargets alone does not hold. Every call of
  // hwy::SupportedTargets() without a mock re-detects the CPU and resets the
  // dispatch to the best target, disabled or not (measured: AVX3 chosen with
  // AVX3 disabled, after any caller asked for the supported targets). With
  // the target mock set to the allowed targets, SupportedTargets answers from
  // the mock and leaves the dispatch alone. DisableTargets stays as well, for
  // a caller that clears the mock (SetSupportedTargetsForTest(0)).
  const std::int64_t detected = hwy::SupportedTargets();
  hwy::DisableTargets(l->disabled);
  hwy::SetSupportedTargetsForTest(detected & ~l->disabled);
  hwy::GetChosenTarget().Update(hwy::SupportedTargets());
}

void apply_cpu_isa_limit() {
  static std::once_flag once;
  std::call_once(once, reapply_cpu_isa_limit);
}

std::string cpu_isa_limit_error() {
  const char* v = env();
  if (!v || parse(v)) return "";
  return std::string("SA_CPU_MAX_ISA='") + v + "': expected AVX512, AVX2, SSE4 or EMU128";
}

HWY_EXPORT(IsaTargetName);

const char* vector_dispatch_target() {
  apply_cpu_isa_limit();
  return HWY_DYNAMIC_DISPATCH(IsaTargetName)();
}

const char* cpu_isa_limit() {
  const Limit* l = parse(env());
  return l && l->disabled ? l->name : "none";
}

// Before main: every vector entry point of this library dispatches after this.
[[maybe_unused]] const bool g_applied = (apply_cpu_isa_limit(), true);

}  // namespace sa::kernels::cpu
#endif  // HWY_ONCE
