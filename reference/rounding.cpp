#include "reference/rounding.hpp"

#include <mpfr.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"

namespace sa::ref {
namespace {

// Round x to p significant bits with exponent range [emin, emax], RNE.
double round_format(const Mp& x, const FloatFormat& f) {
  mpfr_srcptr src = x.backend().data();
  if (mpfr_nan_p(src)) return std::numeric_limits<double>::quiet_NaN();
  if (mpfr_inf_p(src)) return mpfr_sgn(src) > 0 ? INFINITY : -INFINITY;
  if (mpfr_zero_p(src)) return mpfr_signbit(src) ? -0.0 : 0.0;
  if (f.precision == 53) return mpfr_get_d(src, MPFR_RNDN);  // MPFR rounds subnormals correctly

  mpfr_t y;
  mpfr_init2(y, mpfr_get_prec(src) + 8);
  // MPFR exponent e: 2^(e-1) <= |x| < 2^e, so the format's exponent is e-1.
  const long E = static_cast<long>(mpfr_get_exp(src)) - 1;
  if (E >= f.emin) {
    mpfr_set_prec(y, f.precision);
    mpfr_set(y, src, MPFR_RNDN);  // exact RNE to p bits
  } else {
    // Below the normal range: round to a multiple of the smallest subnormal.
    const long q = f.emin - f.precision + 1;
    mpfr_set(y, src, MPFR_RNDN);  // exact (y has more precision than src)
    mpfr_mul_2si(y, y, -q, MPFR_RNDN);
    mpfr_rint(y, y, MPFR_RNDN);  // ties to even
    mpfr_mul_2si(y, y, q, MPFR_RNDN);
  }
  double r = mpfr_get_d(y, MPFR_RNDN);  // exact: p <= 24 bits in double's range
  mpfr_clear(y);
  const double max_finite = std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.emax);
  if (std::abs(r) > max_finite) r = std::copysign(INFINITY, r);
  return r;
}

std::int64_t ordered(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  const std::int64_t mag = u & 0x7fffffffu;
  return (u & 0x80000000u) ? -mag : mag;
}

}  // namespace

double round_to(DType t, const Mp& x) {
  precision_bits();
  return round_format(x, format_of(t));
}

float round_to_float32(const Mp& x) {
  return static_cast<float>(round_format(x, format_of(DType::float32)));
}

std::uint16_t round_to_bfloat16_bits(const Mp& x) {
  const float f = static_cast<float>(round_format(x, format_of(DType::bfloat16)));
  return static_cast<std::uint16_t>(float_bits(f) >> 16);  // exact: low half is zero
}

double ulp_at(DType t, const Mp& x) {
  const FloatFormat f = format_of(t);
  mpfr_srcptr src = x.backend().data();
  long E = f.emin;
  if (mpfr_regular_p(src)) E = std::max<long>(static_cast<long>(mpfr_get_exp(src)) - 1, f.emin);
  return std::ldexp(1.0, static_cast<int>(E - f.precision + 1));
}

double ulp_error(DType t, double computed, const Mp& exact) {
  mpfr_srcptr e = exact.backend().data();
  const bool exact_finite = mpfr_number_p(e);
  if (std::isnan(computed) || !std::isfinite(computed) || !exact_finite) {
    if (std::isnan(computed) && mpfr_nan_p(e)) return 0.0;
    if (std::isinf(computed) && mpfr_inf_p(e) && (computed > 0) == (mpfr_sgn(e) > 0)) return 0.0;
    // A finite exact value past the format's range correctly rounds to +-inf.
    if (std::isinf(computed) && exact_finite && round_to(t, exact) == computed) return 0.0;
    return INFINITY;
  }
  Mp diff = Mp(computed) - exact;
  diff = abs(diff) / Mp(ulp_at(t, exact));
  return diff.convert_to<double>();
}

bool rounding_undecided(DType t, const Mp& x, int bits) {
  mpfr_srcptr src = x.backend().data();
  if (!mpfr_number_p(src) || mpfr_zero_p(src)) return false;
  const Mp e = ldexp(abs(x), -bits);
  const double lo = round_to(t, Mp(x - e)), hi = round_to(t, Mp(x + e));
  return !(lo == hi && std::signbit(lo) == std::signbit(hi));
}

std::int64_t ulps_apart(DType t, double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<std::int64_t>::max();
  if (t == DType::float16) {
    const auto ha = f16_from_float(static_cast<float>(a)),
               hb = f16_from_float(static_cast<float>(b));
    if (static_cast<double>(float_from_f16(ha)) != a ||
        static_cast<double>(float_from_f16(hb)) != b)
      throw std::invalid_argument("ulps_apart: values are not float16 numbers");
    // float16 encodings ordered like float32's: magnitude bits, sign applied.
    auto ord = [](std::uint16_t h) -> std::int64_t {
      const std::int64_t mag = h & 0x7fff;
      return (h & 0x8000) ? -mag : mag;
    };
    const std::int64_t d = ord(ha) - ord(hb);
    return d < 0 ? -d : d;
  }
  if (t != DType::float32 && t != DType::bfloat16)
    throw std::invalid_argument("ulps_apart: only float32, bfloat16 and float16 are supported");
  const float fa = static_cast<float>(a), fb = static_cast<float>(b);
  if (static_cast<double>(fa) != a || static_cast<double>(fb) != b)
    throw std::invalid_argument("ulps_apart: values are not float32 numbers");
  std::int64_t d = ordered(fa) - ordered(fb);
  if (d < 0) d = -d;
  return t == DType::bfloat16 ? d >> 16 : d;
}

}  // namespace sa::ref
