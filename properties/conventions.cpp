#include "properties/conventions.hpp"

#include <cstdint>

#include "softmax_audit/kernel.h"

namespace sa::props {
namespace {

// One row per convention: its name, its field, and the kernel.h flag that
// declares it. Names, declaration by name or flag, and listing come from here.
struct Row {
  const char* name;
  bool Conventions::*field;
  std::uint32_t flag;
  const char* flag_name;  // kernel.h's name of `flag`
  const char* summary;    // one line, for `check --list`
};
constexpr Row kTable[] = {
    {"double_rounding", &Conventions::double_rounding, SA_CAP_DOUBLE_ROUNDING,
     "SA_CAP_DOUBLE_ROUNDING", "a bfloat16/float16 output may be rounded twice (+u_t |x|)"},
    {"flush_to_zero", &Conventions::flush_to_zero, SA_CAP_FLUSH_TO_ZERO, "SA_CAP_FLUSH_TO_ZERO",
     "results below 2^-125 may be 0"},
    {"ieee_special_values", &Conventions::ieee_special_values, SA_CAP_IEEE_SPECIAL_VALUES,
     "SA_CAP_IEEE_SPECIAL_VALUES",
     "rows with +inf, or all -inf, may give NaN (IEEE exp(z - max) / sum)"},
    {"low_precision_p", &Conventions::low_precision_p, SA_CAP_LOW_PRECISION_P,
     "SA_CAP_LOW_PRECISION_P",
     "attention's P rounded to the bfloat16/float16 input type before P V (+2 u_t sum p |v|)"},
    {"lse_base2", &Conventions::lse_base2, SA_CAP_LSE_BASE2, "SA_CAP_LSE_BASE2",
     "attention's lse in base 2, lse / ln 2 (FlashInfer), forward and backward"},
    {"masked_lse_inf", &Conventions::masked_lse_inf, SA_CAP_MASKED_LSE_POS_INF,
     "SA_CAP_MASKED_LSE_POS_INF",
     "a fully masked attention row has lse +inf (FlashAttention 2/3), out still 0"},
    {"no_temperature", &Conventions::no_temperature, SA_CAP_NO_TEMPERATURE, "SA_CAP_NO_TEMPERATURE",
     "the row operations have no temperature: called at temperature 1 only"},
    {"alibi_lse_shift", &Conventions::alibi_lse_shift, SA_CAP_ALIBI_LSE_SHIFT,
     "SA_CAP_ALIBI_LSE_SHIFT",
     "causal ALiBi as +slope j (FlashAttention): lse larger by slope (i + off), out unchanged"},
    {"lse_without_sink", &Conventions::lse_without_sink, SA_CAP_LSE_WITHOUT_SINK,
     "SA_CAP_LSE_WITHOUT_SINK", "attention's lse over the keys only, the sink left out"},
    {"finite_mask", &Conventions::finite_mask, SA_CAP_FINITE_MASK, "SA_CAP_FINITE_MASK",
     "masks by a large finite value (ONNX Runtime -10000): masked positions are read"},
};

const Row* row_of(std::string_view name) {
  for (const Row& r : kTable)
    if (name == r.name) return &r;
  return nullptr;
}

}  // namespace

const std::vector<std::string>& convention_names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (const Row& r : kTable) v.emplace_back(r.name);
    return v;
  }();
  return n;
}

bool declare_convention(Conventions& c, std::string_view name) {
  const Row* r = row_of(name);
  if (r) c.*r->field = true;
  return r != nullptr;
}

Conventions conventions_of_flags(std::uint32_t flags) {
  Conventions c;
  for (const Row& r : kTable)
    if (flags & r.flag) c.*r.field = true;
  return c;
}

std::uint32_t convention_flags() {
  std::uint32_t f = 0;
  for (const Row& r : kTable) f |= r.flag;
  return f;
}

std::uint32_t convention_flag(std::string_view name) {
  const Row* r = row_of(name);
  return r ? r->flag : 0;
}

std::string convention_flag_name(std::string_view name) {
  const Row* r = row_of(name);
  return r ? r->flag_name : "";
}

std::string convention_summary(std::string_view name) {
  const Row* r = row_of(name);
  return r ? r->summary : "";
}

std::string Conventions::names() const {
  std::string s;
  for (const Row& r : kTable)
    if (this->*r.field) s += std::string(s.empty() ? "" : ", ") + r.name;
  return s;
}

Conventions& active_conventions() {
  thread_local Conventions c;
  return c;
}

}  // namespace sa::props
