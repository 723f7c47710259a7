// Backward-pass and determinism mutants: tests/mutants/backward_mutants.cpp.
#pragma once

#include <vector>

#include "mutant_kernels.hpp"

namespace sa::mutants {

// Each mutant with the property id expected to catch it.
struct BackwardMutant {
  Mutant mutant;
  const char* caught_by;
};

std::vector<BackwardMutant> backward_mutants();

}  // namespace sa::mutants
