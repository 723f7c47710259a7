// Internal to the CPU attention (kernels/cpu/attention.cpp, the tiled path, and
// kernels/cpu/attention_decode.cpp, the few-query path): tile constants and the
// exact widening of q, k and v elements (bfloat16, float16, fp8) to float.
#pragma once

#include <cstdint>
#include <limits>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "core/fp8.hpp"
#include "core/quant.hpp"
#include "kernels/cpu/attention.hpp"

namespace sa::kernels::attn_detail {

constexpr std::int64_t Bk = cpu_attention_key_tile;
constexpr std::int64_t kMaxBq = cpu_attention_query_block;
constexpr std::int64_t kVecPad = 16;  // widest float vector of any target (AVX-512)
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// exp(x) for x below this is 0 in float32 (and in Highway's Exp, which returns
// exactly 0 below -104): clamping s - m here makes exp(-inf - m) an exact 0 and
// keeps e * (s - m) from becoming 0 * -inf.
constexpr float kExpFloor = -200.0f;

// Exact float values of the 256 patterns of an fp8 format.
struct Fp8Table {
  float v[256];
  explicit Fp8Table(Fp8Format f) {
    for (int b = 0; b < 256; ++b) v[b] = fp8_to_float(static_cast<std::uint8_t>(b), f);
  }
};
inline const float* fp8_table(sa_dtype t) {
  static const Fp8Table e4m3(Fp8Format::e4m3), e5m2(Fp8Format::e5m2);
  return t == SA_FP8_E4M3 ? e4m3.v : e5m2.v;
}

// Element idx of a q/k/v buffer of type t, exactly as float.
inline float load_elem(const void* base, sa_dtype t, std::int64_t idx) {
  switch (t) {
    case SA_F32:
      return static_cast<const float*>(base)[idx];
    case SA_BF16:
      return float_from_bf16(static_cast<const std::uint16_t*>(base)[idx]);
    case SA_F16:
      return float_from_f16(static_cast<const std::uint16_t*>(base)[idx]);
    case SA_FP4_E2M1:  // two per byte, element idx in byte idx / 2 (low nibble first)
      return load_fp4(base, idx);
    case SA_INT8:
      return static_cast<float>(static_cast<const std::int8_t*>(base)[idx]);
    default:
      return fp8_table(t)[static_cast<const std::uint8_t*>(base)[idx]];
  }
}

// n consecutive elements from idx, exactly as float (the type switch outside the loop).
inline void load_row(const void* base, sa_dtype t, std::int64_t idx, std::int64_t n, float* dst,
                     std::int64_t dst_stride = 1) {
  switch (t) {
    case SA_F32: {
      const float* p = static_cast<const float*>(base) + idx;
      for (std::int64_t c = 0; c < n; ++c) dst[c * dst_stride] = p[c];
      break;
    }
    case SA_BF16: {
      const std::uint16_t* p = static_cast<const std::uint16_t*>(base) + idx;
      for (std::int64_t c = 0; c < n; ++c) dst[c * dst_stride] = float_from_bf16(p[c]);
      break;
    }
    case SA_F16: {
      const std::uint16_t* p = static_cast<const std::uint16_t*>(base) + idx;
      for (std::int64_t c = 0; c < n; ++c) dst[c * dst_stride] = float_from_f16(p[c]);
      break;
    }
    default: {
      const float* tab = fp8_table(t);
      const std::uint8_t* p = static_cast<const std::uint8_t*>(base) + idx;
      for (std::int64_t c = 0; c < n; ++c) dst[c * dst_stride] = tab[p[c]];
    }
  }
}

// Query i's results: row (dv floats, scaled here by v_descale) rounded once to
// out_dtype, and lse, entropy and beta where the call asks for them.
inline void store_row(const AttentionHeadArgs& a, std::int64_t i, float* row, float lse, float H,
                      float beta) {
  if (a.v_descale != 1.0f)
    for (std::int64_t c = 0; c < a.dv; ++c) row[c] *= a.v_descale;
  if (a.out_dtype == SA_F32) {
    float* o = static_cast<float*>(a.out) + i * a.out_stride;
    for (std::int64_t c = 0; c < a.dv; ++c) o[c] = row[c];
  } else {
    const bool bf = a.out_dtype == SA_BF16;
    std::uint16_t* o = static_cast<std::uint16_t*>(a.out) + i * a.out_stride;
    for (std::int64_t c = 0; c < a.dv; ++c)
      o[c] = bf ? bf16_from_float(row[c]) : f16_from_float(row[c]);
  }
  if (a.lse) a.lse[i] = lse;
  if (a.entropy) a.entropy[i] = H;
  if (a.beta) a.beta[i] = beta;
}

// Element offset of key j's row of a's K (of its V when is_v) from a.k (a.v):
// j rows apart, or through the page table when a.pages is set.
inline std::int64_t kv_offset(const AttentionHeadArgs& a, bool is_v, std::int64_t j) {
  const std::int64_t rs = is_v ? a.v_stride : a.k_stride;
  if (!a.pages) return j * rs;
  const std::int64_t ps = a.page_size;
  return static_cast<std::int64_t>(a.pages[j / ps]) * (is_v ? a.v_page_stride : a.k_page_stride) +
         (j % ps) * rs;
}

}  // namespace sa::kernels::attn_detail

namespace sa::kernels {
// kernel.h's exact semantics for query i of a single-head call whose scores
// hold NaN or +inf (or whose sink is NaN or +inf), computed in double: the
// tiled and the few-query paths finish such rows with it (kernels/cpu/attention.cpp).
void cpu_attention_special_row(const AttentionHeadArgs& a, std::int64_t i, float* out, float* lse,
                               float* H, float* beta);
}  // namespace sa::kernels
