// Marks functions that compile for both host and CUDA device code, and the
// handful of math wrappers that must resolve the same way in both.
#pragma once

#if defined(__CUDACC__)
#define SA_HD __host__ __device__
#else
#define SA_HD
#endif

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

namespace sa::hd {

// exp/log for the state arithmetic of theory.md T6. On the device these map to
// CUDA's full-precision expf/logf (not the __expf intrinsics); on the host to
// std::exp/std::log. Other types (MPFR) go through argument-dependent lookup.
SA_HD inline float exp(float x) {
#if defined(__CUDA_ARCH__)
  return ::expf(x);
#else
  return std::exp(x);
#endif
}
SA_HD inline double exp(double x) {
#if defined(__CUDA_ARCH__)
  return ::exp(x);
#else
  return std::exp(x);
#endif
}
SA_HD inline float log(float x) {
#if defined(__CUDA_ARCH__)
  return ::logf(x);
#else
  return std::log(x);
#endif
}
SA_HD inline double log(double x) {
#if defined(__CUDA_ARCH__)
  return ::log(x);
#else
  return std::log(x);
#endif
}
template <class Real>
Real exp(const Real& x) {
  using std::exp;
  return exp(x);
}
template <class Real>
Real log(const Real& x) {
  using std::log;
  return log(x);
}

template <class Real>
SA_HD inline bool is_nan(const Real& x) {
  return !(x == x);
}

}  // namespace sa::hd
