// What a run of the suite will cover, for front ends that split it into
// units (`check --jobs`, cli/check_jobs.hpp): the element types of the
// per-type attention families under a config.
#pragma once

#include <vector>

#include "properties/suite.hpp"

namespace sa::props {

// The input types attention_v2 runs under `config` (its attention.types, else
// its dtypes, else every type, fp8 included), in the order it runs them.
std::vector<AttnType> attention_types(const SuiteConfig& config);

// The element types attention_backward runs under `config` (its dtypes,
// else float32, bfloat16 and float16), in the order it runs them.
std::vector<AttnType> attention_backward_types(const SuiteConfig& config);

// The DType of a float32, bfloat16 or float16 attention type.
inline DType dtype_of(AttnType t) {
  return t == AttnType::bfloat16  ? DType::bfloat16
         : t == AttnType::float16 ? DType::float16
                                  : DType::float32;
}

}  // namespace sa::props
