// The floating-point formats the suite reasons about, and their unit roundoff.
//
// A format is described by its precision p (significand bits, hidden bit
// included) and its exponent range; unit roundoff u = 2^-p (round to nearest).
//   float64  p=53  emin=-1022  emax=1023
//   float32  p=24  emin=-126   emax=127
//   bfloat16 p=8   emin=-126   emax=127   (float32's range, 8-bit significand)
//   float16  p=11  emin=-14    emax=15
#pragma once

#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>

namespace sa {

enum class DType { float64, float32, bfloat16, float16 };

struct FloatFormat {
  const char* name;
  int precision;  // significand bits including the hidden bit
  int emin;       // exponent of the smallest normal number
  int emax;       // exponent of the largest finite number
};

constexpr FloatFormat format_of(DType t) {
  switch (t) {
    case DType::float64:
      return {"float64", 53, -1022, 1023};
    case DType::float32:
      return {"float32", 24, -126, 127};
    case DType::bfloat16:
      return {"bfloat16", 8, -126, 127};
    case DType::float16:
      return {"float16", 11, -14, 15};
  }
  return {"?", 0, 0, 0};
}

constexpr std::array<DType, 4> all_dtypes = {DType::float64, DType::float32, DType::bfloat16,
                                             DType::float16};

inline const char* name_of(DType t) { return format_of(t).name; }

// u = 2^-p: the largest relative error of one correctly rounded operation.
inline double unit_roundoff(DType t) { return std::ldexp(1.0, -format_of(t).precision); }

// Machine epsilon 2^(1-p): the gap between 1 and the next number (= 2u).
inline double machine_epsilon(DType t) { return std::ldexp(1.0, 1 - format_of(t).precision); }

// Accepts the names above and the usual short forms (f32, fp32, bf16, f16, half, f64, double).
inline std::optional<DType> parse_dtype(std::string_view s) {
  std::string v(s);
  for (auto& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (v == "float64" || v == "f64" || v == "fp64" || v == "double") return DType::float64;
  if (v == "float32" || v == "f32" || v == "fp32" || v == "float") return DType::float32;
  if (v == "bfloat16" || v == "bf16") return DType::bfloat16;
  if (v == "float16" || v == "f16" || v == "fp16" || v == "half") return DType::float16;
  return std::nullopt;
}

}  // namespace sa
