// gate.no_nan_output's rule for one row of a row operation (softmax,
// log_softmax, logsumexp, entropy, adaptive_softmax): whether a NaN output
// is a finding, given what the row's input holds and the conventions
// declared for the kernel (properties/conventions.hpp). A pure function, so
// that the guard (gate/guard.cpp) only gathers the facts and reports.
//
// kernel.h: an output is NaN only when its row holds a NaN input. Rows with
// +inf logits, or a finite logit whose l / theta is beyond float range (where
// a float kernel meets +inf legitimately), are left to special.values, which
// judges them against the limits (and ieee_special_values) itself. A row
// whose every logit is -inf (fully masked) has defined limits (weights 0,
// log-softmax and lse -inf, entropy 0), but IEEE arithmetic computed as
// written gives NaN there (0/0, -inf - -inf), which is what PyTorch and ONNX
// Runtime return: allowed when the kernel declares ieee_special_values, and
// otherwise a finding that names that convention.
#pragma once

#include <string>

#include "properties/conventions.hpp"

namespace sa::gate {

struct RowInputFacts {
  bool nan = false;          // some logit is NaN
  bool pos_inf = false;      // some logit is +inf
  bool beyond = false;       // some finite logit has |l / theta| > 3e38
  bool all_neg_inf = false;  // the row is non-empty and every logit is -inf
};

struct NanRowRule {
  bool nan_allowed = false;  // a NaN output in this row is no finding
  std::string why;           // when not allowed: what the finding says after "... is NaN"
};

NanRowRule nan_rule_for_row(const RowInputFacts& row, const props::Conventions& declared);

}  // namespace sa::gate
