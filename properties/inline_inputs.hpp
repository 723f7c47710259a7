// An attention counterexample's inputs, inline, when they are small (issue
// 35): a reader pastes them (pytest turns them into torch.tensor literals,
// python/softmax_audit/_literal.py) without opening the case file.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "core/attention_case.hpp"

namespace sa::props::detail {

// At most this many elements per tensor are printed.
inline constexpr std::size_t kInlineElements = 16;

// " q=[..] k=[..] v=[..] [dout=[..]] [sinks=..] [alibi_slopes=..]
// [key_padding_mask=..] scale=S (q, k, v packed [rows][heads][dim])", or ""
// when q, k, v or dout holds more than kInlineElements values.
inline std::string inline_inputs(const AttentionCase& c, const std::vector<float>* dout = nullptr) {
  if (c.q.size() > kInlineElements || c.k.size() > kInlineElements ||
      c.v.size() > kInlineElements || (dout && dout->size() > kInlineElements))
    return "";
  auto num = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", x);
    return std::string(buf);
  };
  auto list = [&](const auto& x) {
    std::string o = "[";
    for (std::size_t i = 0; i < x.size(); ++i)
      o += (i ? ", " : "") + num(static_cast<double>(x[i]));
    return o + "]";
  };
  std::string r = " q=" + list(c.q) + " k=" + list(c.k) + " v=" + list(c.v);
  if (dout) r += " dout=" + list(*dout);
  if (!c.sinks.empty() && c.sinks.size() <= kInlineElements) r += " sinks=" + list(c.sinks);
  if (!c.alibi_slopes.empty() && c.alibi_slopes.size() <= kInlineElements)
    r += " alibi_slopes=" + list(c.alibi_slopes);
  if (!c.key_padding_mask.empty() && c.key_padding_mask.size() <= kInlineElements)
    r += " key_padding_mask=" + list(c.key_padding_mask);
  return r + " scale=" + num(c.scale) + " (q, k, v packed [rows][heads][dim])";
}

}  // namespace sa::props::detail
