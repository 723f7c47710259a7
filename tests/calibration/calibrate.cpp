// Calibration of the vectorised_2x rule (properties/baseline.hpp) against
// softmax implementations nobody here wrote (peers.hpp: Eigen, oneDNN,
// PyTorch, those found at build time) and the built-in cpu and naive kernels.
//
// For every generator that gives rows the rule applies to (finite values,
// -inf masks), float32 and bfloat16, and n = 2^min .. 2^max, one row
// (properties/generators.hpp, the level the sweep uses) goes through every
// kernel; the exact weights come from double arithmetic over the whole row
// (exp(z - m) / S with S summed by Neumaier's compensated sum: relative error
// below 1e-14, seven orders under the smallest threshold, 4u = 2.4e-7), and
// every element is compared. Prints, per row, the baseline's max-norm
// relative error E(baseline), the threshold, and each kernel's E in units of
// u = 2^-24; then, per kernel, the largest E / threshold over all rows (a
// correct kernel must stay below 1; the naive kernel's sequential sum must
// exceed it at large n). Exit status 0 when every peer and the cpu kernel
// stay below their thresholds, 1 otherwise.
//
//   calibrate [--min-log2-n 0] [--max-log2-n 24] [--level 1] [--seed 1]
//             [--dist NAME]... [--lanes-study] [--expect-isa avx2]
// --lanes-study also prints E of the baseline summed in 1, 4, 16 lanes.
// The output starts with each peer's library version and instruction set, and
// names every operation a peer lacks on this CPU (its column shows "-"; e.g.
// oneDNN's bfloat16 softmax needs AVX-512). --expect-isa avx2: exit 2 unless
// every peer and the cpu kernel run at most AVX2 (the forced-AVX2 CTest run
// sets ONEDNN_MAX_CPU_ISA, ATEN_CPU_CAPABILITY and SA_CPU_MAX_ISA and proves
// with this that they took effect).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_kernel.hpp"
#include "kernels/cpu/row_ops.hpp"
#include "kernels/kernel.hpp"
#include "kernels/naive/naive_kernel.hpp"
#include "peers.hpp"
#include "properties/baseline.hpp"
#include "properties/generators.hpp"

namespace {

namespace bl = sa::props::baseline;
constexpr double u = 0x1p-24;

struct Neumaier {
  double s = 0, c = 0;
  void add(double x) {
    const double t = s + x;
    c += std::abs(s) >= std::abs(x) ? (s - t) + x : (x - t) + s;
    s = t;
  }
  double value() const { return s + c; }
};

std::vector<double> exact_weights(std::span<const float> row, double theta) {
  double m = -INFINITY;
  for (float x : row) m = std::max(m, double(x) / theta);
  std::vector<double> p(row.size(), 0.0);
  if (m == -INFINITY) return p;
  Neumaier S;
  for (std::size_t j = 0; j < row.size(); ++j) {
    p[j] = std::exp(double(row[j]) / theta - m);
    S.add(p[j]);
  }
  const double s = S.value();
  for (double& x : p) x /= s;
  return p;
}

struct Worst {
  double ratio = 0;  // E / threshold
  std::string where;
};

}  // namespace

int main(int argc, char** argv) {
  int kmin = 0, kmax = 24, level = 1;
  std::uint64_t seed = 1;
  bool lanes_study = false;
  std::string only, expect_isa;  // one dtype, or both
  std::vector<std::string> dists;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "calibrate: error: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--min-log2-n")
      kmin = std::atoi(next());
    else if (a == "--max-log2-n")
      kmax = std::atoi(next());
    else if (a == "--level")
      level = std::atoi(next());
    else if (a == "--seed")
      seed = std::strtoull(next(), nullptr, 10);
    else if (a == "--dist")
      dists.push_back(next());
    else if (a == "--dtype")
      only = next();
    else if (a == "--lanes-study")
      lanes_study = true;
    else if (a == "--expect-isa")
      expect_isa = next();
    else {
      std::fprintf(stderr,
                   "calibrate: error: unknown argument '%s'; expected --min-log2-n, --max-log2-n, "
                   "--level, --seed, --dist, --dtype, --lanes-study, --expect-isa\n",
                   a.c_str());
      return 2;
    }
  }
  if (kmin < 0 || kmax > 26 || kmin > kmax) {
    std::fprintf(stderr, "calibrate: error: sizes 2^%d..2^%d: expected 0 <= min <= max <= 26\n",
                 kmin, kmax);
    return 2;
  }
  if (dists.empty())  // every generator whose rows the rule applies to (no NaN / +inf)
    dists = {"uniform", "gaussian",     "spike",           "near_ties",
             "offset",  "fa3_outliers", "onednn_overflow", "masked"};
  for (const auto& d : dists)
    if (std::find(sa::props::distribution_names().begin(), sa::props::distribution_names().end(),
                  d) == sa::props::distribution_names().end()) {
      std::fprintf(stderr, "calibrate: error: --dist %s: not a generator name\n", d.c_str());
      return 2;
    }

  std::vector<sa::Kernel> kernels;
  kernels.emplace_back(sa::kernels::cpu_kernel(), "built-in");
  std::printf("# cpu kernel: %s\n", sa::kernels::cpu::dispatch_target());
  for (const auto& line : sa::calibration::peer_platform()) std::printf("# %s\n", line.c_str());
  for (const auto& g : sa::calibration::peer_gaps())
    std::printf("# %s %s %s: not run here: %s\n", g.peer.c_str(), g.dtype.c_str(), g.ops.c_str(),
                g.why.c_str());
  if (!expect_isa.empty())
    if (const std::string above = sa::calibration::isa_above(expect_isa); !above.empty()) {
      std::fprintf(stderr, "calibrate: error: --expect-isa %s: %s\n", expect_isa.c_str(),
                   above.c_str());
      return 2;
    }
  kernels.emplace_back(sa::kernels::naive_kernel(), "built-in");
  for (const sa_kernel* k : sa::calibration::peer_kernels()) kernels.emplace_back(k, "peer");

  std::printf(
      "# E = max_j |q_j - p_j| / max_j p_j in units of u = 2^-24; threshold = %g E(baseline) "
      "+ (%g + %g sqrt(n)) u (+ 2^-8 for bfloat16); level %d, seed %llu\n",
      bl::kFactor, bl::kSlack, bl::kLambda, level, static_cast<unsigned long long>(seed));
  std::printf("%-9s %-15s %3s %12s %12s", "dtype", "dist", "k", "E(baseline)", "threshold");
  if (lanes_study)
    std::printf(" %10s %10s %10s %10s %10s %10s", "E(1 lane)", "E(4)", "E(8)", "E(16)", "E(32)",
                "E(64)");
  for (const auto& k : kernels) std::printf(" %12s", k.name().c_str());
  std::printf("\n");
  std::map<std::string, Worst> worst;
  for (sa::DType t : {sa::DType::float32, sa::DType::bfloat16})
    for (const auto& dist : dists)
      if (only.empty() || only == sa::name_of(t))
        for (int k = kmin; k <= kmax; ++k) {
          sa::props::RowParams p;
          p.dist = dist;
          p.n = std::int64_t(1) << k;
          p.level = level;
          p.seed = seed * 1000003ull + static_cast<std::uint64_t>(k) * 7919ull;
          const sa::RowBatch b = sa::props::materialise(p, t);
          const auto row = b.row(0);
          const std::vector<double> ex = exact_weights(row, 1.0);
          if (std::all_of(ex.begin(), ex.end(), [](double x) { return x == 0; })) {
            std::printf("%-9s %-15s %3d  fully masked: the special-value properties' case\n",
                        sa::name_of(t), dist.c_str(), k);
            continue;
          }
          const double Eb = bl::baseline_error(t, row, 1.0, ex);
          const double live = static_cast<double>(
              std::count_if(row.begin(), row.end(), [](float x) { return x != -INFINITY; }));
          const double thr = bl::vectorised_threshold(t, Eb, live);
          std::printf("%-9s %-15s %3d %12.4g %12.4g", sa::name_of(t), dist.c_str(), k, Eb / u,
                      thr / u);
          if (lanes_study)
            for (int lanes : {1, 4, 8, 16, 32, 64})
              std::printf(
                  " %10.4g",
                  bl::max_norm_rel_error(bl::vectorised_softmax(t, row, 1.0, lanes), ex) / u);
          for (const auto& kern : kernels) {
            if (!kern.supports(t)) {
              std::printf(" %12s", "-");
              continue;
            }
            const std::vector<float> q = kern.softmax(t, b, 1.0);
            const double E = bl::max_norm_rel_error(q, ex);
            const double r = std::isnan(E) ? INFINITY : E / thr;
            std::printf(" %11.4g%s", E / u, r > 1 ? "!" : " ");
            Worst& w = worst[kern.name() + " " + sa::name_of(t)];
            if (r > w.ratio || w.where.empty())
              w.ratio = std::max(w.ratio, r),
              w.where = dist + " n=2^" + std::to_string(k) + " E=" + std::to_string(E / u) + "u";
          }
          std::printf("\n");
          std::fflush(stdout);
        }
  std::printf("\n# largest E / threshold per kernel (> 1: flagged by vectorised_2x)\n");
  int rc = 0;
  for (const auto& [name, w] : worst) {
    std::printf("%-18s %10.4g  at %s\n", name.c_str(), w.ratio, w.where.c_str());
    if (w.ratio > 1 && name.rfind("naive", 0) != 0) rc = 1;
  }
  for (const auto& g : sa::calibration::peer_gaps())
    if (only.empty() || only == g.dtype)
      std::printf("%-18s %10s  (%s)\n", (g.peer + " " + g.dtype).c_str(), "not run", g.why.c_str());
  return rc;
}
