#include "properties/generators.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "core/bfloat16.hpp"
#include "core/float16.hpp"

namespace sa::props {

const std::vector<std::string>& distribution_names() {
  static const std::vector<std::string> d = {"gaussian",        "uniform", "spike",
                                             "near_ties",       "offset",  "fa3_outliers",
                                             "onednn_overflow", "masked",  "special"};
  return d;
}

const std::vector<std::int64_t>& default_sizes() {
  static const std::vector<std::int64_t> s = {1,    2,    3,    5,    7,    8,    9,    15,   16,
                                              17,   31,   32,   33,   63,   64,   65,   127,  128,
                                              129,  255,  256,  257,  511,  512,  513,  1000, 1023,
                                              1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097};
  return s;
}

float to_dtype(DType t, double x) {
  const float f = static_cast<float>(x);
  if (t == DType::bfloat16) return round_to_bf16(f);
  if (t == DType::float16) return round_to_f16(f);  // |x| >= 65520 becomes +-inf
  return f;
}

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float lowest(DType t) {
  // bfloat16's largest finite value is (2 - 2^-7) 2^127; float16's 65504.
  if (t == DType::float16) return -65504.0f;
  return t == DType::bfloat16 ? -std::ldexp(2.0f - std::ldexp(1.0f, -7), 127)
                              : std::numeric_limits<float>::lowest();
}

double ulp_in(DType t, double c) {
  const int p = format_of(t).precision, emin = format_of(t).emin;
  if (c == 0.0) return std::ldexp(1.0, emin - p + 1);
  int e;
  std::frexp(c, &e);  // |c| in [2^(e-1), 2^e)
  return std::ldexp(1.0, std::max(e - 1, emin) - p + 1);
}

void fill_row(const RowParams& p, DType t, std::mt19937_64& rng, float* out) {
  const std::int64_t n = p.n;
  std::normal_distribution<double> N01(0.0, 1.0);
  std::uniform_real_distribution<double> U01(0.0, 1.0);
  auto idx = [&](std::int64_t m) {
    return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(m));
  };
  const int L = std::clamp(p.level, 0, 3);
  const std::string& d = p.dist;
  if (d == "uniform") {
    const double s = std::array<double, 4>{0.5, 4, 16, 40}[L];
    for (std::int64_t i = 0; i < n; ++i) out[i] = to_dtype(t, s * (2 * U01(rng) - 1));
  } else if (d == "spike") {
    const double s = std::array<double, 4>{2, 8, 30, 90}[L];
    for (std::int64_t i = 0; i < n; ++i) out[i] = 0.0f;
    out[idx(n)] = to_dtype(t, s);
  } else if (d == "near_ties") {
    const double c = to_dtype(t, 3.0 * N01(rng));
    const double u = ulp_in(t, c);
    for (std::int64_t i = 0; i < n; ++i)
      out[i] = to_dtype(t, c + u * static_cast<double>(static_cast<int>(rng() % 5) - 2));
  } else if (d == "offset") {
    const double s = std::array<double, 4>{1, 3, 10, 0.3}[L];
    const double C = (rng() & 1) ? 1e4 : -1e4;
    for (std::int64_t i = 0; i < n; ++i) out[i] = to_dtype(t, C + s * N01(rng));
  } else if (d == "fa3_outliers") {
    std::bernoulli_distribution B(0.001);
    for (std::int64_t i = 0; i < n; ++i) {
      double x = N01(rng);
      if (B(rng)) x += 10.0 * N01(rng);
      out[i] = to_dtype(t, x);
    }
  } else if (d == "onednn_overflow") {
    // lowest * min(1, theta): the scaled logit l/theta stays finite (no input overflow).
    const float low = to_dtype(t, double(lowest(t)) * std::min(1.0, p.temperature));
    for (std::int64_t i = 0; i < n; ++i) out[i] = low;
    const std::int64_t k = std::min<std::int64_t>(n, 1 + static_cast<std::int64_t>(rng() % 3));
    for (std::int64_t j = 0; j < k; ++j) out[idx(n)] = to_dtype(t, 88.0 + 2.0 * U01(rng));
  } else {  // gaussian, and the base of masked / special
    const double s = std::array<double, 4>{1, 0.1, 3, 10}[L];
    for (std::int64_t i = 0; i < n; ++i) out[i] = to_dtype(t, s * N01(rng));
  }
  if (d == "masked") {
    const std::int64_t w = std::max(1, p.tile);
    switch (p.mask % 7) {
      case 0:  // random keys, about 30%
        for (std::int64_t i = 0; i < n; ++i)
          if (U01(rng) < 0.3) out[i] = -kInf;
        break;
      case 1:  // a tile-aligned prefix
        for (std::int64_t i = 0; i < std::min(n, w); ++i) out[i] = -kInf;
        break;
      case 2:  // an unaligned prefix (one past the tile)
        for (std::int64_t i = 0; i < std::min(n, w + 1); ++i) out[i] = -kInf;
        break;
      case 3:  // every other tile, starting with the first (an all -inf first tile)
        for (std::int64_t i = 0; i < n; ++i)
          if ((i / w) % 2 == 0) out[i] = -kInf;
        break;
      case 4:  // all but the last item
        for (std::int64_t i = 0; i + 1 < n; ++i) out[i] = -kInf;
        break;
      case 5:  // fully masked row
        for (std::int64_t i = 0; i < n; ++i) out[i] = -kInf;
        break;
      case 6:  // a suffix from the last tile boundary (the ragged tail)
        for (std::int64_t i = (n - 1) / w * w; i < n; ++i)
          if (i > 0) out[i] = -kInf;
        break;
    }
  } else if (d == "special") {
    switch (p.mask % 5) {
      case 0:
        out[idx(n)] = kInf;
        break;
      case 1:
        out[idx(n)] = kInf;
        out[idx(n)] = kInf;
        break;
      case 2:
        out[idx(n)] = std::numeric_limits<float>::quiet_NaN();
        break;
      case 3:
        out[idx(n)] = -kInf;
        out[idx(n)] = kInf;
        break;
      case 4:
        for (std::int64_t i = 0; i < n; ++i) out[i] = kInf;
        break;
    }
  }
}

}  // namespace

RowBatch materialise(const RowParams& p, DType t) {
  RowBatch b;
  b.rows = std::max(1, p.rows);
  b.n = std::max<std::int64_t>(1, p.n);
  b.stride = b.n + std::max(0, p.pad);
  b.in_place = p.in_place;
  b.out_stride = p.in_place ? b.stride : b.n + std::max(0, p.out_pad);
  // Padding between rows holds NaN: a kernel that reads past n poisons its row.
  b.data.assign(static_cast<std::size_t>(b.rows * b.stride),
                std::numeric_limits<float>::quiet_NaN());
  if (!p.explicit_values.empty()) {
    for (std::int64_t r = 0; r < b.rows; ++r)
      for (std::int64_t i = 0; i < b.n; ++i)
        b.data[static_cast<std::size_t>(r * b.stride + i)] =
            to_dtype(t, p.explicit_values[static_cast<std::size_t>(r * b.n + i)]);
    return b;
  }
  std::mt19937_64 rng(p.seed);
  for (std::int64_t r = 0; r < b.rows; ++r) fill_row(p, t, rng, b.data.data() + r * b.stride);
  return b;
}

namespace {
std::string fmt_float(float x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  std::ostringstream os;
  os.precision(9);
  os << x;
  return os.str();
}
}  // namespace

std::string describe(const RowParams& p, const RowBatch& b, std::size_t max_values) {
  std::ostringstream os;
  os << "dist=" << p.dist << " n=" << b.n << " rows=" << b.rows << " stride=" << b.stride;
  if (b.in_place)
    os << " in_place";
  else if (b.out_stride != b.stride)
    os << " out_stride=" << b.out_stride;
  os << " level=" << p.level;
  if (p.dist == "masked" || p.dist == "special") os << " mask=" << p.mask << " tile=" << p.tile;
  os << " theta=" << p.temperature << " value_seed=" << p.seed << " aux=" << p.aux;
  if (!p.explicit_values.empty())
    os << (p.dist.rfind("edge_", 0) == 0 ? " (an edge row: run on every seed)"
                                         : " (values shrunk)");
  const std::size_t total = static_cast<std::size_t>(b.rows * b.n);
  os << " values=[";
  std::size_t shown = 0;
  for (std::int64_t r = 0; r < b.rows; ++r) {
    if (r) os << " | ";
    for (std::int64_t i = 0; i < b.n; ++i) {
      if (shown >= max_values) break;
      if (i) os << ", ";
      os << fmt_float(b.data[static_cast<std::size_t>(r * b.stride + i)]);
      ++shown;
    }
  }
  if (shown < total) {
    float lo = kInf, hi = -kInf;
    std::size_t ninf = 0, pinf = 0, nan = 0;
    for (std::int64_t r = 0; r < b.rows; ++r)
      for (float x : b.row(r)) {
        if (std::isnan(x))
          ++nan;
        else if (x == -kInf)
          ++ninf;
        else if (x == kInf)
          ++pinf;
        else {
          lo = std::min(lo, x);
          hi = std::max(hi, x);
        }
      }
    os << ", ... (" << total - shown << " more; finite range [" << fmt_float(lo) << ", "
       << fmt_float(hi) << "], -inf x" << ninf << ", +inf x" << pinf << ", nan x" << nan << ")";
  }
  os << "]";
  return os.str();
}

rc::Gen<RowParams> gen_rows(const RowGenOptions& o) {
  std::vector<std::string> dists = o.distributions.empty() ? distribution_names() : o.distributions;
  if (o.finite_only)
    dists.erase(
        std::remove_if(dists.begin(), dists.end(),
                       [](const std::string& d) { return d == "masked" || d == "special"; }),
        dists.end());
  if (dists.empty()) dists = {"gaussian"};
  std::vector<std::int64_t> sizes = o.sizes.empty() ? default_sizes() : o.sizes;
  std::sort(sizes.begin(), sizes.end());
  std::vector<double> temps = o.temperatures.empty() ? std::vector<double>{1.0} : o.temperatures;
  const int max_rows = std::max(1, o.max_rows);
  return rc::gen::exec([=] {
    RowParams p;
    p.dist = dists[*rc::gen::inRange<std::size_t>(0, dists.size())];
    p.n = sizes[*rc::gen::inRange<std::size_t>(0, sizes.size())];
    p.level = *rc::gen::inRange(0, 4);
    p.mask = *rc::gen::inRange(0, 7);
    static const int tiles[] = {8, 16, 32, 64, 128};
    p.tile = tiles[*rc::gen::inRange(0, 5)];
    p.rows = *rc::gen::inRange(1, max_rows + 1);
    p.pad = *rc::gen::inRange(0, 3);
    // Layout of the call: in place for one case in four, else an output stride of its own.
    p.in_place = *rc::gen::inRange(0, 4) == 3;
    p.out_pad = p.in_place ? 0 : *rc::gen::inRange(0, 3);
    p.temperature = temps[*rc::gen::inRange<std::size_t>(0, temps.size())];
    p.seed = *rc::gen::noShrink(rc::gen::inRange<std::uint64_t>(1, std::uint64_t(1) << 53));
    p.aux = *rc::gen::noShrink(rc::gen::inRange<std::uint64_t>(0, std::uint64_t(1) << 53));
    return p;
  });
}

std::vector<RowParams> edge_rows(double temperature) {
  auto row = [&](const char* name, std::vector<float> v) {
    RowParams p;
    p.dist = name;
    p.n = static_cast<std::int64_t>(v.size());
    p.temperature = temperature;
    p.explicit_values = std::move(v);
    return p;
  };
  const float lowest = -0x1.fep127f;  // bfloat16's lowest finite value, exact in float32
  std::vector<float> ramp(64);
  for (std::size_t j = 0; j < ramp.size(); ++j) ramp[j] = -static_cast<float>(j) / 8;
  return {
      // exp(z - m) in [2^-126, 2^-125) (e^-87, flushed by two-step exps), subnormal
      // (e^-87.5 ... e^-100) and below half the smallest subnormal (e^-104).
      row("edge_underflow", {0, -86.5f, -87, -87.5f, -88, -90, -100, -104}),
      // exp of the lowest finite value minus the max: exactly 0.
      row("edge_lowest", {89, lowest, lowest, lowest, lowest, lowest, lowest, lowest}),
      // One item: softmax 1, log-softmax 0, entropy 0, exactly.
      row("edge_single", {3.5f}),
      // 64 weights spread over many binades: a second rounding to bfloat16/float16
      // shows on some of them.
      row("edge_ramp", ramp),
      // kernel.h's special values: NaN anywhere makes the whole row NaN; +inf items
      // share weight 1 (the limit).
      row("edge_nan", {1, NAN, 2, 0}),
      row("edge_inf", {1, INFINITY, 2, INFINITY}),
  };
}

}  // namespace sa::props
