// Shared helpers of the CPU kernel tests: the kernel handle, input
// generators (random and adversarial), and error measurement against the
// MPFR reference.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"
#include "core/dtype.hpp"
#include "kernels/cpu/cpu_kernel.hpp"
#include "kernels/kernel.hpp"
#include "reference/rounding.hpp"
#include "reference/softmax.hpp"

namespace sa::cputest {

inline const Kernel& kernel() {
  static const Kernel k(sa::kernels::cpu_kernel(), "built-in");
  return k;
}

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kU = 5.9604644775390625e-08;  // 2^-24, float32 unit roundoff

// Input distributions. Each names an adversarial situation for softmax.
enum class Dist {
  normal,      // N(0, 1)
  wide,        // uniform [-100, 100]: weights spanning the whole float range
  offset_pos,  // 1e4 + N(0, 3): large common offset (x - max must not lose bits)
  offset_neg,  // -1e4 + N(0, 3)
  spike,       // N(0, 1) with one logit at +25: one weight near 1, the rest tiny
  near_ties,   // 5 + k ulps for small k: values equal up to a few ulps
  masked,      // N(0, 2) with ~30% -inf
  subnormal,   // N(0,1) with ~20% at -95..-100: weights in float's subnormal range
  ascending,   // sorted ascending, tiny increments (stresses streamed rescaling)
};
inline const char* name_of(Dist d) {
  switch (d) {
    case Dist::normal:
      return "normal";
    case Dist::wide:
      return "wide";
    case Dist::offset_pos:
      return "offset+1e4";
    case Dist::offset_neg:
      return "offset-1e4";
    case Dist::spike:
      return "spike";
    case Dist::near_ties:
      return "near_ties";
    case Dist::masked:
      return "masked";
    case Dist::subnormal:
      return "subnormal";
    case Dist::ascending:
      return "ascending";
  }
  return "?";
}
inline constexpr Dist all_dists[] = {Dist::normal,     Dist::wide,      Dist::offset_pos,
                                     Dist::offset_neg, Dist::spike,     Dist::near_ties,
                                     Dist::masked,     Dist::subnormal, Dist::ascending};

// Sizes: tiny, vector-width neighbours (4/8/16 lanes, x2 unrolling), off-powers of two.
inline const std::vector<std::int64_t>& sizes() {
  static const std::vector<std::int64_t> s = {1,   2,   3,   5,    7,    8,    15,   16,
                                              17,  31,  32,  33,   47,   63,   64,   65,
                                              100, 255, 257, 1000, 1023, 1025, 4097, 5000};
  return s;
}

inline std::vector<float> generate(Dist dist, std::int64_t n, std::uint64_t seed, bool bf16) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    float x = 0;
    switch (dist) {
      case Dist::normal:
        x = nd(rng);
        break;
      case Dist::wide:
        x = -100.0f + 200.0f * ud(rng);
        break;
      case Dist::offset_pos:
        x = 1e4f + 3.0f * nd(rng);
        break;
      case Dist::offset_neg:
        x = -1e4f + 3.0f * nd(rng);
        break;
      case Dist::spike:
        x = nd(rng);
        break;
      case Dist::near_ties: {
        float y = 5.0f;
        const int k = static_cast<int>(ud(rng) * 6);
        for (int j = 0; j < k; ++j) y = std::nextafter(y, 10.0f);
        x = y;
        break;
      }
      case Dist::masked:
        x = ud(rng) < 0.3f ? -kInf : 2.0f * nd(rng);
        break;
      case Dist::subnormal:
        x = ud(rng) < 0.2f ? -95.0f - 5.0f * ud(rng) : nd(rng);
        break;
      case Dist::ascending:
        x = 1.0f + 1e-5f * static_cast<float>(i);
        break;
    }
    v[static_cast<std::size_t>(i)] = x;
  }
  if (dist == Dist::spike)
    v[static_cast<std::size_t>(seed % static_cast<std::uint64_t>(n))] = 25.0f;
  if (dist == Dist::masked && n > 0) v[0] = 0.5f;  // keep at least one live logit
  if (bf16)
    for (float& x : v) x = round_to_bf16(x);
  return v;
}

// The same rows as values of dtype t (bfloat16 / float16: rounded to nearest
// even; the generators stay within float16's range, |x| <= 1e4 + 60).
inline std::vector<float> generate(Dist dist, std::int64_t n, std::uint64_t seed, DType t) {
  auto v = generate(dist, n, seed, t == DType::bfloat16);
  if (t == DType::float16)
    for (float& x : v) x = round_to_f16(x);
  return v;
}
// x rounded to dtype t (float32: unchanged).
inline float in_dtype(DType t, float x) {
  return t == DType::bfloat16 ? round_to_bf16(x) : t == DType::float16 ? round_to_f16(x) : x;
}

inline std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Error statistics of one output array against exact values.
struct UlpStats {
  std::int64_t count = 0;
  std::int64_t exact = 0;      // equal to the correctly rounded value
  std::int64_t max_apart = 0;  // max ulps between output and correctly rounded value
  double max_ulp_error = 0;    // max |out - exact| / ulp(exact)
  std::string worst;           // where max_apart occurred
  void add(DType t, float out, const ref::Mp& exact_value, const std::string& where) {
    const double cr = ref::round_to(t, exact_value);
    const std::int64_t a = ref::ulps_apart(t, out, cr);
    ++count;
    if (a == 0) ++exact;
    if (a > max_apart) {
      max_apart = a;
      worst = where + " out=" + std::to_string(out) + " cr=" + std::to_string(cr);
    }
    max_ulp_error = std::max(max_ulp_error, ref::ulp_error(t, out, exact_value));
  }
  double exact_fraction() const { return count ? static_cast<double>(exact) / count : 1.0; }
};

}  // namespace sa::cputest
