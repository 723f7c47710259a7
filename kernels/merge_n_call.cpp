// sa::Kernel::merge_attention_states_n: the n-way split-KV merge of
// interface v2 (kernel.h's merge_attention_states_n), staged for host or
// device memory like every other call.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/call_internal.hpp"

namespace sa {

using detail::check_status;
using detail::Stage;

std::vector<float> Kernel::merge_attention_states_n(std::int64_t rows, std::int64_t dv,
                                                    const std::vector<std::vector<float>>& o,
                                                    const std::vector<std::vector<float>>& lse,
                                                    std::vector<float>* out_lse) const {
  if (!supports(Op::merge_attention_states_n))
    throw KernelError(SA_UNSUPPORTED,
                      "kernel '" + name_ + "' does not implement merge_attention_states_n");
  const auto need = static_cast<std::size_t>(rows * dv);
  if (o.size() != lse.size() || o.empty())
    throw std::invalid_argument("merge_attention_states_n: expected as many lse parts (" +
                                std::to_string(lse.size()) + ") as output parts (" +
                                std::to_string(o.size()) + "), at least one");
  for (std::size_t p = 0; p < o.size(); ++p)
    if (o[p].size() != need || lse[p].size() != static_cast<std::size_t>(rows))
      throw std::invalid_argument("merge_attention_states_n: part " + std::to_string(p) +
                                  ": expected rows*dv = " + std::to_string(need) + " outputs and " +
                                  std::to_string(rows) + " lse values");
  std::vector<float> out(need, NAN), l(static_cast<std::size_t>(rows), NAN);
  Stage st(memory());
  // The parts' lse arrays lie in one buffer, kGap NaN floats apart: not one
  // contiguous block (kernel.h gives each part its own pointer), so a kernel
  // that reads part p's lse at lse[0] + p * rows reads NaN and shifted values.
  constexpr std::size_t kGap = 8;
  const std::size_t lstride = l.size() + kGap;
  std::vector<float> lse_block(o.size() * lstride + kGap, NAN);
  for (std::size_t p = 0; p < o.size(); ++p)
    std::copy(lse[p].begin(), lse[p].end(),
              lse_block.begin() + static_cast<std::ptrdiff_t>(p * lstride));
  const auto* lse_d = static_cast<const float*>(st.in(lse_block.data(), lse_block.size() * 4));
  std::vector<const float*> po, pl;
  for (std::size_t p = 0; p < o.size(); ++p) {
    po.push_back(static_cast<const float*>(st.in(o[p].data(), need * 4)));
    pl.push_back(lse_d + p * lstride);
  }
  // The arrays of part pointers live where the kernel reads them.
  auto* dpo = static_cast<const float* const*>(st.in(po.data(), po.size() * sizeof(float*)));
  auto* dpl = static_cast<const float* const*>(st.in(pl.data(), pl.size() * sizeof(float*)));
  auto* out_d = static_cast<float*>(st.out(out.data(), need * 4));
  auto* l_d = static_cast<float*>(st.out(l.data(), l.size() * 4));
  check_status(*this, detail::timed_call([&] {
    return k_->merge_attention_states_n(k_->ctx, static_cast<std::int64_t>(o.size()), rows, dv, dpo,
                                        dpl, out_d, l_d);
  }),
               Op::merge_attention_states_n);
  st.fetch();
  if (out_lse) *out_lse = std::move(l);
  return out;
}

}  // namespace sa
