// Batched-attention (interface v2) mutants: tests/mutants/attention_v2_mutants.cpp.
#pragma once

#include <vector>

#include "mutant_kernels.hpp"

namespace sa::mutants {

std::vector<Mutant> attention_v2_mutants();

}  // namespace sa::mutants
