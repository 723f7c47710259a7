#include "kernels/cpu/merge_n.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace sa::kernels {
namespace {

thread_local std::string g_error;

sa_status fail(const std::string& what) {
  g_error = "merge_attention_states_n: " + what;
  return SA_INVALID_ARGUMENT;
}

}  // namespace

sa_status cpu_merge_attention_states_n(void*, std::int64_t parts, std::int64_t rows,
                                       std::int64_t dv, const float* const* o,
                                       const float* const* lse, float* out, float* out_lse) {
  g_error.clear();
  if (parts < 1) return fail("parts = " + std::to_string(parts) + "; expected >= 1");
  if (rows < 0) return fail("rows = " + std::to_string(rows) + "; expected >= 0");
  if (dv < 1) return fail("dv = " + std::to_string(dv) + "; expected >= 1");
  if (rows == 0) return SA_OK;
  if (!o || !lse || !out || !out_lse) return fail("a NULL array; expected host buffers");
  for (std::int64_t p = 0; p < parts; ++p)
    if (!o[p] || !lse[p])
      return fail("part " + std::to_string(p) + " is NULL; expected a host buffer");
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> w(static_cast<std::size_t>(parts)), acc(static_cast<std::size_t>(dv));
#pragma omp parallel for schedule(static) firstprivate(w, acc) if (rows * dv * parts > (1 << 16))
  for (std::int64_t r = 0; r < rows; ++r) {
    double m = -kInf;
    bool nan = false;
    std::int64_t at_inf = 0;
    for (std::int64_t p = 0; p < parts; ++p) {
      const double l = lse[p][r];
      nan = nan || std::isnan(l);
      at_inf += l == kInf;
      if (l > m) m = l;
    }
    float* y = out + r * dv;
    if (nan || m == -kInf) {  // NaN row, or every part empty
      for (std::int64_t c = 0; c < dv; ++c) y[c] = nan ? NAN : 0.0f;
      out_lse[r] = nan ? NAN : -INFINITY;
      continue;
    }
    double S = 0;
    for (std::int64_t p = 0; p < parts; ++p) {
      const double l = lse[p][r];
      w[static_cast<std::size_t>(p)] = at_inf       ? (l == kInf ? 1.0 : 0.0)
                                       : l == -kInf ? 0.0
                                                    : std::exp(l - m);
      S += w[static_cast<std::size_t>(p)];
    }
    std::fill(acc.begin(), acc.end(), 0.0);
    for (std::int64_t p = 0; p < parts; ++p) {
      const double wp = w[static_cast<std::size_t>(p)];
      if (lse[p][r] == -kInf) continue;  // an empty part is never read
      const float* x = o[p] + r * dv;
      for (std::int64_t c = 0; c < dv; ++c) acc[static_cast<std::size_t>(c)] += wp * x[c];
    }
    for (std::int64_t c = 0; c < dv; ++c)
      y[c] = static_cast<float>(acc[static_cast<std::size_t>(c)] / S);
    out_lse[r] = at_inf ? INFINITY : static_cast<float>(m + std::log(S));
  }
  return SA_OK;
}

const char* cpu_merge_n_last_error() { return g_error.empty() ? nullptr : g_error.c_str(); }

}  // namespace sa::kernels
