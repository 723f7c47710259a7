// One batched attention problem as the suite holds it (interface v2,
// include/softmax_audit/kernel.h: sa_attention_v2_args), independent of the
// memory layout a kernel call uses.
//
// Logical storage is packed BSHD: token rows of every sequence one after the
// other (fixed lengths: sequence b's query i is row b * seqlen_q + i; varlen:
// row cu_q[b] + i), each row holding every head's vector. So
//   q[(row * heads_q + h) * d + c],  k[(row * heads_kv + h) * d + c],
//   v[(row * heads_kv + h) * dv + c], out[(row * heads_q + h) * dv + c],
//   lse / entropy / beta[row * heads_q + h].
// Values are float; for bfloat16, float16 and fp8 inputs they must already be
// representable in that type (the handle refuses others, naming the element).
// The call's layout (BSHD or BHSD, padding between rows and heads) is chosen
// by `layout`, `row_pad` and `head_pad`; results always come back packed BSHD.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace sa {

// Element types of an attention call (the fp8 formats are inputs only).
enum class AttnType { float32, bfloat16, float16, fp8_e4m3, fp8_e5m2 };
inline const char* name_of(AttnType t) {
  switch (t) {
    case AttnType::float32:
      return "float32";
    case AttnType::bfloat16:
      return "bfloat16";
    case AttnType::float16:
      return "float16";
    case AttnType::fp8_e4m3:
      return "fp8_e4m3";
    case AttnType::fp8_e5m2:
      return "fp8_e5m2";
  }
  return "?";
}
inline bool is_fp8(AttnType t) { return t == AttnType::fp8_e4m3 || t == AttnType::fp8_e5m2; }

enum class AttnLayout { bshd, bhsd };

struct AttentionCase {
  AttnType qkv = AttnType::float32;
  AttnType out_type = AttnType::float32;
  std::int64_t batch = 1, heads_q = 1, heads_kv = 1;
  std::int64_t seqlen_q = 0, seqlen_k = 0;  // per sequence (fixed lengths)
  std::int64_t d = 0, dv = 0;
  // Varlen: batch + 1 offsets each (empty: fixed lengths).
  std::vector<std::int32_t> cu_q, cu_k;
  std::vector<float> q, k, v;
  std::vector<std::uint8_t> key_padding_mask;  // empty, or one per key row (packed)
  double scale = 1.0;
  bool causal = false;
  bool top_left = false;  // alignment of causal, window and ALiBi (false: bottom-right)
  std::int64_t window_left = -1, window_right = -1;
  double softcap = 0.0;
  std::vector<float> alibi_slopes;  // empty or heads_q
  std::vector<float> sinks;         // empty or heads_q
  float q_descale = 1.0f, k_descale = 1.0f, v_descale = 1.0f;
  bool adaptive = false;
  std::int64_t num_splits = 0;
  // Call layout.
  AttnLayout layout = AttnLayout::bshd;
  std::int64_t row_pad = 0, head_pad = 0;  // extra elements after each head vector / row

  bool varlen() const { return !cu_q.empty(); }
  std::int64_t total_q() const { return varlen() ? cu_q.back() : batch * seqlen_q; }
  std::int64_t total_k() const { return varlen() ? cu_k.back() : batch * seqlen_k; }
  std::int64_t len_q(std::int64_t b) const { return varlen() ? cu_q[b + 1] - cu_q[b] : seqlen_q; }
  std::int64_t len_k(std::int64_t b) const { return varlen() ? cu_k[b + 1] - cu_k[b] : seqlen_k; }
  std::int64_t row_q(std::int64_t b, std::int64_t i) const {
    return (varlen() ? cu_q[b] : b * seqlen_q) + i;
  }
  std::int64_t row_k(std::int64_t b, std::int64_t j) const {
    return (varlen() ? cu_k[b] : b * seqlen_k) + j;
  }
  // Key/value head read by query head h.
  std::int64_t kv_head(std::int64_t h) const { return h / (heads_q / heads_kv); }
  // Throws std::invalid_argument naming the field and what was expected.
  void validate() const;
  // One line describing the shape and features (for counterexamples).
  std::string describe() const;
};

inline void AttentionCase::validate() const {
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("attention case: " + what);
  };
  auto s = [](std::int64_t x) { return std::to_string(x); };
  if (batch < 1 || heads_q < 1 || heads_kv < 1 || d < 1 || dv < 1)
    fail("batch, heads_q, heads_kv, d, dv must be >= 1 (got " + s(batch) + ", " + s(heads_q) +
         ", " + s(heads_kv) + ", " + s(d) + ", " + s(dv) + ")");
  if (heads_q % heads_kv != 0)
    fail("heads_q = " + s(heads_q) + " is not a multiple of heads_kv = " + s(heads_kv));
  if (varlen()) {
    if (static_cast<std::int64_t>(cu_q.size()) != batch + 1 ||
        static_cast<std::int64_t>(cu_k.size()) != batch + 1)
      fail("cu_q and cu_k need batch + 1 = " + s(batch + 1) + " offsets each");
    if (cu_q[0] != 0 || cu_k[0] != 0) fail("cu_q[0] and cu_k[0] must be 0");
    for (std::int64_t b = 0; b < batch; ++b)
      if (cu_q[b + 1] < cu_q[b] || cu_k[b + 1] < cu_k[b])
        fail("cu offsets must not decrease (at sequence " + s(b) + ")");
  } else {
    if (!cu_k.empty()) fail("cu_k given without cu_q");
    if (seqlen_q < 0 || seqlen_k < 0) fail("seqlen_q and seqlen_k must be >= 0");
  }
  auto expect = [&](const char* f, std::size_t got, std::int64_t want) {
    if (static_cast<std::int64_t>(got) != want)
      fail(std::string(f) + " has " + std::to_string(got) + " values, expected " + s(want));
  };
  expect("q", q.size(), total_q() * heads_q * d);
  expect("k", k.size(), total_k() * heads_kv * d);
  expect("v", v.size(), total_k() * heads_kv * dv);
  if (!key_padding_mask.empty()) expect("key_padding_mask", key_padding_mask.size(), total_k());
  if (!alibi_slopes.empty()) expect("alibi_slopes", alibi_slopes.size(), heads_q);
  if (!sinks.empty()) expect("sinks", sinks.size(), heads_q);
  if (window_left < -1 || window_right < -1) fail("window bounds must be >= -1 (-1: unbounded)");
  if (!(softcap >= 0) || !std::isfinite(softcap)) fail("softcap must be finite and >= 0");
  if (!std::isfinite(scale)) fail("scale must be finite");
  if (is_fp8(out_type))
    fail("fp8 is an input type only; out_type must be float32/bfloat16/float16");
  if (!is_fp8(qkv) && (q_descale != 1.0f || k_descale != 1.0f || v_descale != 1.0f))
    fail("descales apply to fp8 inputs only");
  if (row_pad < 0 || head_pad < 0) fail("row_pad and head_pad must be >= 0");
}

inline std::string AttentionCase::describe() const {
  std::string r = std::string(name_of(qkv)) +
                  (out_type != qkv ? std::string("->") + name_of(out_type) : "") +
                  " batch=" + std::to_string(batch) + " heads=" + std::to_string(heads_q) + "/" +
                  std::to_string(heads_kv);
  if (varlen()) {
    r += " varlen q=[";
    for (std::int64_t b = 0; b < batch; ++b) r += (b ? "," : "") + std::to_string(len_q(b));
    r += "] k=[";
    for (std::int64_t b = 0; b < batch; ++b) r += (b ? "," : "") + std::to_string(len_k(b));
    r += "]";
  } else {
    r += " sq=" + std::to_string(seqlen_q) + " sk=" + std::to_string(seqlen_k);
  }
  r += " d=" + std::to_string(d) + (dv != d ? " dv=" + std::to_string(dv) : "");
  if (causal) r += top_left ? " causal(top-left)" : " causal(bottom-right)";
  if (window_left >= 0 || window_right >= 0)
    r += " window=(" + std::to_string(window_left) + "," + std::to_string(window_right) + ")" +
         (causal     ? ""
          : top_left ? "tl"
                     : "br");
  if (softcap > 0) r += " softcap=" + std::to_string(softcap);
  if (!alibi_slopes.empty()) r += " alibi";
  if (!sinks.empty()) r += " sinks";
  if (!key_padding_mask.empty()) r += " key_padding";
  if (adaptive) r += " adaptive";
  if (num_splits > 1) r += " splits=" + std::to_string(num_splits);
  if (layout == AttnLayout::bhsd) r += " bhsd";
  if (row_pad || head_pad) r += " pad=" + std::to_string(row_pad) + "/" + std::to_string(head_pad);
  return r;
}

struct AttentionResult {
  std::vector<float> out;                 // total_q x heads_q x dv
  std::vector<float> lse, entropy, beta;  // total_q x heads_q
};

}  // namespace sa
