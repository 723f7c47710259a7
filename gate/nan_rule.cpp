#include "gate/nan_rule.hpp"

namespace sa::gate {

NanRowRule nan_rule_for_row(const RowInputFacts& row, const props::Conventions& declared) {
  if (row.nan || row.pos_inf || row.beyond) return {true, {}};
  if (row.all_neg_inf) {
    if (declared.ieee_special_values) return {true, {}};
    return {false,
            " although the row holds no NaN input: every logit is -inf (a fully masked row, "
            "whose limits kernel.h defines: weights 0, log-softmax and lse -inf, entropy 0); "
            "NaN there holds under the ieee_special_values convention, which the kernel does "
            "not declare (kernel.h SA_CAP_IEEE_SPECIAL_VALUES, or the gate spec's conventions; "
            "docs/conventions.md): a policy difference if the kernel means it"};
  }
  return {false,
          " although the row holds no NaN or +inf input (kernel.h: outputs are NaN only for rows "
          "with a NaN)"};
}

}  // namespace sa::gate
