// Deliberately broken copies of the naive kernel, one per bug class of
// docs/bug-classes.md, each behind the same C ABI. They exist to
// show that the property suite catches every class (tests/mutants).
#pragma once

#include <string>
#include <vector>

#include "softmax_audit/kernel.h"

namespace sa::mutants {

struct Mutant {
  std::string bug_class;  // the row of docs/bug-classes.md it reproduces
  const sa_kernel* kernel;
};

std::vector<Mutant> all_mutants();

}  // namespace sa::mutants
