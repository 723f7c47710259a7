#include "variants/fuzz.hpp"

#include <rapidcheck.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <cmath>
#include <functional>
#include <iomanip>
#include <limits>
#include <numeric>
#include <optional>
#include <sstream>

#include "properties/search.hpp"
#include "reference/rounding.hpp"

namespace sa::variants {
namespace {

using ref::Mp;
constexpr double kU32 = 0x1p-24;

// ---------------------------------------------------------------- inputs
// Logits are k + f/64 with k in [-12, 12] and f in [0, 64): float32 values,
// exact in every format, shrinking towards 0 (k by zig-zag, f towards 0).
double zigzag(int a) { return (a % 2 == 0) ? a / 2 : -(a + 1) / 2; }

rc::Gen<double> logit_gen() {
  return rc::gen::map(
      rc::gen::pair(rc::gen::inRange(0, 25), rc::gen::inRange(0, 64)),
      [](const std::pair<int, int>& kf) { return zigzag(kf.first) + kf.second / 64.0; });
}

// Choices that must not depend on RapidCheck's size parameter (which starts
// at 0 and would otherwise pin indices to 0 and booleans to false early on).
template <class T>
T pick(rc::Gen<T> g) {
  return *rc::gen::resize(100, std::move(g));
}
std::size_t pick_index(std::size_t n) {
  return static_cast<std::size_t>(pick(rc::gen::inRange(0, static_cast<int>(n))));
}
std::vector<bool> pick_flags(std::size_t n) {
  return pick(rc::gen::container<std::vector<bool>>(n, rc::gen::arbitrary<bool>()));
}

// A row of n in [1, max_n] logits. Ties matter (top-k, argmax, sorting), so
// item k copies item tie[k]'s value when tie[k] < k; shrinking drives tie[]
// to 0, i.e. towards all-equal rows.
std::vector<double> gen_row(int max_n) {
  const int n = *rc::gen::inRange(1, max_n + 1);
  auto l = *rc::gen::container<std::vector<double>>(static_cast<std::size_t>(n), logit_gen());
  const auto tie = pick(rc::gen::container<std::vector<int>>(static_cast<std::size_t>(n),
                                                             rc::gen::inRange(0, 2 * n)));
  for (std::size_t k = 1; k < l.size(); ++k)
    if (static_cast<std::size_t>(tie[k]) < k) l[k] = l[static_cast<std::size_t>(tie[k])];
  // A quarter of the rows are max-shifted (max exactly 0), as kernels see them
  // after the max subtraction; thresholds at 0 (relu, softpick, +1) live there.
  if (pick(rc::gen::inRange(0, 4)) == 0) {
    const double m = *std::max_element(l.begin(), l.end());
    for (auto& x : l) x -= m;  // exact: multiples of 2^-6 below 2^5
  }
  return l;
}

std::string fmt_row(std::span<const double> l) {
  std::ostringstream os;
  os << std::setprecision(9) << "[";
  for (std::size_t i = 0; i < l.size(); ++i) os << (i ? ", " : "") << l[i];
  os << "]";
  return os.str();
}
template <class T>
std::string fmt_vec(const std::vector<T>& v) {
  std::ostringstream os;
  os << std::setprecision(9) << "[";
  for (std::size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << static_cast<double>(v[i]);
  os << "]";
  return os.str();
}

// ---------------------------------------------------------------- evaluation
// One fuzzed input: the row of logits and, for a two-row variant (variant.h
// ABI 3), the second row of the same length drawn from the same grid.
struct Input {
  std::vector<double> l, l2;
};

bool two_row(const Variant& v) { return v.in2_kind != In2Kind::none; }
std::size_t out_n(const Variant& v, std::size_t n) { return v.scalar_output ? 1 : n; }

Input gen_input(const Variant& v, int max_n) {
  Input in;
  in.l = gen_row(max_n);
  if (two_row(v)) in.l2 = *rc::gen::container<std::vector<double>>(in.l.size(), logit_gen());
  return in;
}

// "l = [...]" and, for a two-row variant, ", in2 = [...]".
std::string fmt_in(const Input& in) {
  std::string s = "l = " + fmt_row(in.l);
  if (!in.l2.empty()) s += ", in2 = " + fmt_row(in.l2);
  return s;
}

bool has_reference(const Variant& v) {
  return two_row(v) ? bool(v.reference_2) : bool(v.reference);
}

std::vector<Mp> reference(const Variant& v, const Input& in) {
  return two_row(v) ? v.reference_2(in.l, in.l2) : v.reference(in.l);
}

// What the mathematical properties run on: the variant's reference (MPFR for
// built-ins) or, failing that, its float64 evaluation.
std::vector<Mp> math(const Variant& v, const Input& in) {
  if (has_reference(v)) return reference(v, in);
  std::vector<double> p(out_n(v, in.l.size()));
  if (two_row(v))
    v.eval64_2(in.l, in.l2, p);
  else
    v.eval64(in.l, p);
  return {p.begin(), p.end()};
}

std::vector<float> kernel(const Variant& v, const Input& in) {
  std::vector<float> lf(in.l.begin(), in.l.end()), p(out_n(v, in.l.size()));
  if (two_row(v)) {
    const std::vector<float> l2f(in.l2.begin(), in.l2.end());
    v.kernel32_2(lf, l2f, p);
  } else {
    v.kernel32(lf, p);
  }
  return p;
}

double max_abs(std::span<const double> l) {
  double a = 0;
  for (double x : l)
    if (std::isfinite(x)) a = std::max(a, std::abs(x));
  return a;
}

// Tolerance for exact identities evaluated on the reference: 2^10 (n+2) u_ref
// max(1, max|l|) covers the reference's own rounding (each weight is a few
// hundred operations at most, relative error ~ u_ref per operation, and
// arguments scale with |l|); violations of the identities the fuzzer finds
// are many orders of magnitude larger (for MPFR u_ref = 2^-200).
double tol(const Variant& v, std::span<const double> l) {
  return 1024.0 * (static_cast<double>(l.size()) + 2.0) * v.reference_unit_roundoff *
         std::max(1.0, max_abs(l));
}

double to_d(const Mp& x) { return x.convert_to<double>(); }

// ---------------------------------------------------------------- the engine
// A property runs on the property suite's search (properties/search.hpp): an
// rc::Gen draws a Case, the property's function judges it into one Check
// (pass when measured <= bound), and the first failing case is shrunk
// greedily through RapidCheck's shrink tree. A check's `where` reads
// "input : what was seen", the counterexample a failing cell shows.
using props::detail::Check;
using props::detail::make_check;

// One drawn case: the row(s), and the choices a property adds to them.
struct Case {
  Input in;
  std::size_t key = 0;      // the item a property raises or sets to NaN
  double amount = 0;        // the shift c, the raise d
  std::vector<bool> flags;  // per item: masked, +inf, perturbation sign; per gap: a cut
  std::vector<int> ints;    // permutation sort keys; merge order
};

Check judged(double measured, double bound, const std::string& input, const std::string& detail) {
  return make_check(measured, bound, input + " : " + detail);
}

std::uint64_t seed_for(std::uint64_t base, const std::string& a, const std::string& b) {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : a + "/" + b) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h ^ (base * 0x9E3779B97F4A7C15ull);
}

// ---------------------------------------------------------------- draws
rc::Gen<Case> draw_row(const Variant& v, int N) {
  return rc::gen::exec([&v, N] {
    Case c;
    c.in = gen_input(v, N);
    return c;
  });
}
// A shift c = k + f/64, k in [-20, 20]: exact when added to a logit.
rc::Gen<Case> draw_shift(const Variant& v, int N) {
  return rc::gen::exec([&v, N] {
    Case c;
    c.in = gen_input(v, N);
    c.amount = zigzag(pick(rc::gen::inRange(0, 41))) + pick(rc::gen::inRange(0, 64)) / 64.0;
    return c;
  });
}
// Sort keys of a permutation (a stable sort of the items by them).
rc::Gen<Case> draw_permutation(const Variant& v, int N) {
  return rc::gen::exec([&v, N] {
    Case c;
    c.in = gen_input(v, N);
    c.ints = pick(rc::gen::container<std::vector<int>>(
        c.in.l.size(), rc::gen::inRange(0, static_cast<int>(c.in.l.size()))));
    return c;
  });
}
// An item and a raise d in (0, 4], a multiple of 2^-6.
rc::Gen<Case> draw_raise(const Variant& v, int N) {
  return rc::gen::exec([&v, N] {
    Case c;
    c.in = gen_input(v, N);
    c.key = pick_index(c.in.l.size());
    c.amount = (1 + pick(rc::gen::inRange(0, 256))) / 64.0;
    return c;
  });
}
// Perturbation signs (true: down). A quarter of the cases move every logit up
// (finds steep spots at thresholds such as softpick's 0); the rest use random
// signs (break ties).
rc::Gen<Case> draw_signs(const Variant& v, int N) {
  return rc::gen::exec([&v, N] {
    Case c;
    c.in = gen_input(v, N);
    c.flags = pick_flags(c.in.l.size());
    if (pick(rc::gen::inRange(0, 4)) == 0) std::fill(c.flags.begin(), c.flags.end(), false);
    return c;
  });
}
// A non-empty set of items (flags), for -inf masks and +inf logits.
rc::Gen<Case> draw_items(const Variant& v, int N) {
  return rc::gen::exec([&v, N] {
    Case c;
    c.in = gen_input(v, N);
    c.flags = pick_flags(c.in.l.size());
    c.flags[pick_index(c.in.l.size())] = true;
    return c;
  });
}
rc::Gen<Case> draw_item(const Variant& v, int N) {
  return rc::gen::exec([&v, N] {
    Case c;
    c.in = gen_input(v, N);
    c.key = pick_index(c.in.l.size());
    return c;
  });
}
// A split into contiguous chunks (flags: a cut before item k + 1) and the
// order in which adjacent states are merged.
rc::Gen<Case> draw_split(const Variant& v, int N) {
  return rc::gen::exec([&v, N] {
    Case c;
    c.in = gen_input(v, N);
    const std::size_t n = c.in.l.size();
    c.flags = n > 1 ? pick_flags(n - 1) : std::vector<bool>{};
    const auto cuts = static_cast<std::size_t>(std::count(c.flags.begin(), c.flags.end(), true));
    c.ints = pick(rc::gen::container<std::vector<int>>(cuts, rc::gen::inRange(0, 64)));
    return c;
  });
}

// ---------------------------------------------------------------- properties
// One function per column of the matrix: the check of one case.

Check sum_to_one(const Variant& v, const Case& c) {
  Mp s(0);
  for (const auto& x : math(v, c.in)) s += x;
  return judged(std::abs(to_d(s - 1)), tol(v, c.in.l), fmt_in(c.in),
                "sum = " + std::to_string(to_d(s)));
}

Check sum_at_most_one(const Variant& v, const Case& c) {
  Mp s(0);
  for (const auto& x : math(v, c.in)) s += x;
  return judged(to_d(s - 1), tol(v, c.in.l), fmt_in(c.in), "sum = " + std::to_string(to_d(s)));
}

Check bounded_01(const Variant& v, const Case& c) {
  const auto p = math(v, c.in);
  double worst = 0;
  for (const auto& x : p) worst = std::max({worst, to_d(-x), to_d(x - 1)});
  return judged(worst, tol(v, c.in.l), fmt_in(c.in), "p = " + fmt_vec(p));
}

Check shift_invariance(const Variant& v, const Case& c) {
  const double shift = c.amount;
  Input shifted(c.in);
  for (auto& x : shifted.l) x += shift;  // exact: both are multiples of 2^-6 below 2^6
  // A second logit row moves with the first (variant.h SA_IN2_LOGITS).
  if (v.in2_kind == In2Kind::logits)
    for (auto& x : shifted.l2) x += shift;
  const auto p = math(v, c.in), q = math(v, shifted);
  double d = 0;
  for (std::size_t i = 0; i < p.size(); ++i) d = std::max(d, std::abs(to_d(p[i] - q[i])));
  std::ostringstream os;
  os << fmt_in(c.in) << ", c = " << shift;
  return judged(d, tol(v, shifted.l) * (1 + std::abs(shift)), os.str(),
                "p(l) = " + fmt_vec(p) + ", p(l+c) = " + fmt_vec(q));
}

Check permutation_equivariance(const Variant& v, const Case& c) {
  const auto& l = c.in.l;
  std::vector<std::size_t> perm(l.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](std::size_t a, std::size_t b) { return c.ints[a] < c.ints[b]; });
  Input permuted(c.in);
  for (std::size_t k = 0; k < l.size(); ++k) {
    permuted.l[k] = l[perm[k]];
    if (two_row(v)) permuted.l2[k] = c.in.l2[perm[k]];  // the second row moves with its item
  }
  const auto p = math(v, c.in), q = math(v, permuted);
  double d = 0;
  if (v.scalar_output)
    d = std::abs(to_d(q[0] - p[0]));  // one number per row: invariant
  else
    for (std::size_t k = 0; k < l.size(); ++k) d = std::max(d, std::abs(to_d(q[k] - p[perm[k]])));
  std::ostringstream os;
  os << fmt_in(c.in) << ", pi = [";
  for (std::size_t k = 0; k < perm.size(); ++k) os << (k ? ", " : "") << perm[k];
  os << "], permuted: " << fmt_in(permuted);
  return judged(d, tol(v, l), os.str(), "p(l) = " + fmt_vec(p) + ", p(permuted) = " + fmt_vec(q));
}

Check monotonicity(const Variant& v, const Case& c) {
  const std::size_t i = c.key;
  Input raised(c.in);
  raised.l[i] += c.amount;
  const auto p = math(v, c.in), q = math(v, raised);
  double worst = to_d(p[i] - q[i]);
  for (std::size_t j = 0; j < c.in.l.size(); ++j)
    if (j != i) worst = std::max(worst, to_d(q[j] - p[j]));
  std::ostringstream os;
  os << fmt_in(c.in) << ", raise l[" << i << "] by " << c.amount;
  // A negative `worst` (every weight moved the right way) is measured as 0.
  return judged(std::max(worst, 0.0), tol(v, raised.l), os.str(),
                "p before = " + fmt_vec(p) + ", after = " + fmt_vec(q));
}

Check continuity(const Variant& v, const Case& c) {
  const auto& l = c.in.l;
  Input moved(c.in);
  for (std::size_t k = 0; k < l.size(); ++k) moved.l[k] += c.flags[k] ? -0x1p-30 : 0x1p-30;
  const auto p = math(v, c.in), q = math(v, moved);
  double d = 0;
  for (std::size_t k = 0; k < p.size(); ++k) d = std::max(d, std::abs(to_d(q[k] - p[k])));
  std::string kind;
  if (!(d <= 0x1p-20)) {
    // Tell a jump from a steep slope: at 2^-50 a continuous function's change
    // shrinks by ~2^20, a jump's does not.
    Input lq(c.in);
    for (std::size_t k = 0; k < l.size(); ++k) lq.l[k] += c.flags[k] ? -0x1p-50 : 0x1p-50;
    const auto r2 = math(v, lq);
    double d2 = 0;
    for (std::size_t k = 0; k < p.size(); ++k) d2 = std::max(d2, std::abs(to_d(r2[k] - p[k])));
    std::ostringstream ks;
    if (d2 > d / 64)
      ks << "; jump discontinuity (change " << d2 << " at 2^-50)";
    else
      ks << "; continuous but steep: local Lipschitz constant ~" << d * 0x1p30;
    kind = ks.str();
  }
  std::ostringstream os;
  os << fmt_in(c.in) << ", perturbation 2^-30 * [";
  for (std::size_t k = 0; k < l.size(); ++k) os << (k ? ", " : "") << (c.flags[k] ? "-1" : "+1");
  os << "]";
  return judged(d, 0x1p-20, os.str(), "p = " + fmt_vec(p) + ", perturbed p = " + fmt_vec(q) + kind);
}

Check neg_inf_mask(const Variant& v, const Case& c) {
  const auto& l = c.in.l;
  // A masked item is absent from both rows: a second logit row is masked with
  // the first, per-item data keeps its (ignored) value; the reduced input drops
  // the item from both.
  Input lm(c.in), reduced;
  for (std::size_t k = 0; k < l.size(); ++k) {
    if (c.flags[k]) {
      lm.l[k] = -std::numeric_limits<double>::infinity();
      if (v.in2_kind == In2Kind::logits) lm.l2[k] = -std::numeric_limits<double>::infinity();
    } else {
      reduced.l.push_back(l[k]);
      if (two_row(v)) reduced.l2.push_back(c.in.l2[k]);
    }
  }
  const auto p = kernel(v, lm);
  std::string detail = "kernel = " + fmt_vec(p);
  double worst = 0;
  if (!v.scalar_output)
    for (std::size_t k = 0; k < l.size(); ++k)
      if (c.flags[k] && !(p[k] == 0.0f)) worst = std::numeric_limits<double>::infinity();
  if (reduced.l.empty()) {
    for (float x : p)
      if (!(x == 0.0f)) worst = std::numeric_limits<double>::infinity();
  } else {
    const auto q = kernel(v, reduced);
    detail += ", kernel without the masked items = " + fmt_vec(q);
    std::size_t j = 0;
    for (std::size_t k = 0; k < p.size(); ++k) {
      if (!v.scalar_output && c.flags[k]) continue;
      const auto apart = ref::ulps_apart(DType::float32, p[k], q[j++]);
      worst = std::max(worst, apart == INT64_MAX ? std::numeric_limits<double>::infinity()
                                                 : static_cast<double>(apart));
    }
  }
  return judged(worst, 2, fmt_in(lm), detail);
}

Check nan(const Variant& v, const Case& c) {
  Input in(c.in);
  in.l[c.key] = std::numeric_limits<double>::quiet_NaN();
  const auto p = kernel(v, in);
  const auto not_nan = std::count_if(p.begin(), p.end(), [](float x) { return !std::isnan(x); });
  return judged(static_cast<double>(not_nan), 0, fmt_in(in), "kernel = " + fmt_vec(p));
}

Check pos_inf(const Variant& v, const Case& c) {
  Input in(c.in), big(c.in);
  for (std::size_t k = 0; k < in.l.size(); ++k)
    if (c.flags[k]) {
      in.l[k] = std::numeric_limits<double>::infinity();
      big.l[k] = 0x1p60;
      if (v.in2_kind == In2Kind::logits) {  // +inf in both logit rows
        in.l2[k] = std::numeric_limits<double>::infinity();
        big.l2[k] = 0x1p60;
      }
    }
  const auto p = kernel(v, in);
  std::string detail = "kernel = " + fmt_vec(p);
  double worst = 0;
  for (float x : p)
    if (std::isnan(x)) worst = std::numeric_limits<double>::infinity();
  if (has_reference(v)) {
    const auto q = reference(v, big);
    detail += ", reference at 2^60 = " + fmt_vec(q);
    for (std::size_t k = 0; k < p.size(); ++k) {
      const double qk = to_d(q[k]);
      if (qk >= 0x1p10 && p[k] >= 0x1p10f) continue;  // both diverge with the logit
      const double d = std::abs(static_cast<double>(p[k]) - qk);
      worst = std::max(worst, std::isnan(d) ? std::numeric_limits<double>::infinity() : d);
    }
  }
  return judged(worst, 0x1p-20, fmt_in(in), detail);
}

// Measured as error / bound (bound 1), both in units of 2^-24.
Check f32_vs_reference(const Variant& v, const Case& c) {
  const auto p = kernel(v, c.in);
  const auto q = reference(v, c.in);
  double err = 0;
  for (std::size_t k = 0; k < p.size(); ++k) {
    const double e = std::isnan(p[k]) || to_d(q[k]) != to_d(q[k])
                         ? (std::isnan(p[k]) && to_d(q[k]) != to_d(q[k]) ? 0.0 : INFINITY)
                         : std::abs(to_d(Mp(static_cast<double>(p[k])) - q[k])) / kU32;
    err = std::max(err, e);
  }
  const double B = two_row(v) ? v.f32_bound_2(c.in.l, c.in.l2) : v.f32_bound(c.in.l);
  std::ostringstream os;
  os << "max error " << err << " u (u = 2^-24), bound " << B << " u; kernel = " << fmt_vec(p)
     << ", reference = " << fmt_vec(q);
  Check r = judged(B > 0 ? err / B : (err > 0 ? INFINITY : 0.0), 1.0, fmt_in(c.in), os.str());
  if (err > B) r.ratio = INFINITY;  // the claim is err <= B, whatever the quotient rounds to
  return r;
}

// ---------------------------------------------------------------- streaming
// A state buffer, aligned for any scalar type (variant.h promises 16 bytes).
struct StateBuf {
  std::vector<std::max_align_t> words;
  explicit StateBuf(std::size_t bytes)
      : words((bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t) + 1) {}
  void* data() { return words.data(); }
  const void* data() const { return words.data(); }
};

bool same_bits(float a, float b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

std::size_t bits_differing(const std::vector<float>& a, const std::vector<float>& b) {
  std::size_t d = 0;
  for (std::size_t k = 0; k < a.size(); ++k) d += !same_bits(a[k], b[k]);
  return d;
}

// Streams the row l (and, for a two-row variant, the second row l2, chunked at
// the same items) split into chunks starting at `starts`, and merges adjacent
// states in the order `order` (step t merges the pair at position order[t]
// mod (states left - 1)). Returns the finished outputs (out_n of them).
std::vector<float> stream_row(const Stream& st, const std::vector<float>& l,
                              const std::vector<float>& l2, std::size_t out_n,
                              const std::vector<std::size_t>& starts,
                              const std::vector<int>& order) {
  const bool two = !l2.empty();
  std::vector<StateBuf> states;
  for (std::size_t c = 0; c < starts.size(); ++c) {
    const std::size_t b = starts[c], e = c + 1 < starts.size() ? starts[c + 1] : l.size();
    states.emplace_back(st.state_bytes);
    st.init(states.back().data());
    const auto chunk = std::span<const float>(l).subspan(b, e - b);
    if (two)
      st.push2(states.back().data(), chunk, std::span<const float>(l2).subspan(b, e - b), b,
               l.size());
    else
      st.push(states.back().data(), chunk, b, l.size());
  }
  for (std::size_t t = 0; states.size() > 1; ++t) {
    const std::size_t j = static_cast<std::size_t>(order[t]) % (states.size() - 1);
    st.merge(states[j].data(), states[j + 1].data());
    states.erase(states.begin() + static_cast<std::ptrdiff_t>(j) + 1);
  }
  std::vector<float> p(out_n);
  if (two)
    st.finish2(states[0].data(), l, l2, p);
  else
    st.finish(states[0].data(), l, p);
  return p;
}

// The streaming state on one split: bit for bit with the float32 kernel where
// the variant claims bitwise, within its stated bound (measured as error /
// bound) of the whole-row reference otherwise; the identity state neutral on
// both sides, bit for bit.
Check streamable(const Variant& v, const Case& c) {
  const Stream& st = v.stream;
  const bool two = two_row(v), bitwise = st.kind == StreamKind::bitwise;
  const auto& l = c.in.l;
  const std::vector<float> lf(l.begin(), l.end()), l2f(c.in.l2.begin(), c.in.l2.end());
  const std::size_t on = out_n(v, l.size());
  std::vector<std::size_t> starts{0};
  for (std::size_t k = 1; k < l.size(); ++k)
    if (c.flags[k - 1]) starts.push_back(k);
  std::ostringstream in;
  in << "l = " << fmt_row(l) << ", split [";
  for (std::size_t k = 0; k < l.size(); ++k) {
    if (k > 0) in << (c.flags[k - 1] ? " | " : ", ");
    in << l[k];
  }
  in << "]";
  if (two) {
    in << ", in2 = [";
    for (std::size_t k = 0; k < l.size(); ++k) {
      if (k > 0) in << (c.flags[k - 1] ? " | " : ", ");
      in << c.in.l2[k];
    }
    in << "]";
  }
  in << " into " << starts.size() << " chunk" << (starts.size() == 1 ? "" : "s");
  if (starts.size() > 2) {
    in << ", merge order";
    for (int o : c.ints) in << " " << o;
  }
  const double bound = bitwise ? 0.0 : 1.0;
  const auto p = stream_row(st, lf, l2f, on, starts, c.ints);
  // Identity neutrality: the whole row in one chunk, then an identity state
  // merged on its left and on its right.
  const auto whole = stream_row(st, lf, l2f, on, {0}, {});
  StateBuf one(st.state_bytes), id(st.state_bytes), left(st.state_bytes);
  st.init(one.data());
  if (two)
    st.push2(one.data(), lf, l2f, 0, lf.size());
  else
    st.push(one.data(), lf, 0, lf.size());
  st.init(left.data());
  st.merge(left.data(), one.data());  // identity (+) s
  st.init(id.data());
  st.merge(one.data(), id.data());  // s (+) identity
  std::vector<float> pl(on), pr(on);
  if (two) {
    st.finish2(left.data(), lf, l2f, pl);
    st.finish2(one.data(), lf, l2f, pr);
  } else {
    st.finish(left.data(), lf, pl);
    st.finish(one.data(), lf, pr);
  }
  std::ostringstream det;
  if (bits_differing(pl, whole) + bits_differing(pr, whole) > 0) {
    det << "identity state not neutral: one chunk = " << fmt_vec(whole)
        << ", identity (+) it = " << fmt_vec(pl) << ", it (+) identity = " << fmt_vec(pr);
    return judged(INFINITY, bound, in.str(), det.str());
  }
  if (bitwise) {
    const auto k = kernel(v, c.in);
    const std::size_t d = bits_differing(p, k);
    det << d << " weight" << (d == 1 ? "" : "s") << " differ from the whole-row kernel: streamed "
        << fmt_vec(p) << ", whole row " << fmt_vec(k);
    return judged(static_cast<double>(d), 0.0, in.str(), det.str());
  }
  const auto q = math(v, c.in);
  double err = 0;
  for (std::size_t k = 0; k < on; ++k) {
    const double e = std::isnan(p[k]) ? INFINITY : std::abs(to_d(Mp(double(p[k])) - q[k])) / kU32;
    err = std::max(err, e);
  }
  const double B = two ? st.bound2(l, c.in.l2, starts.size()) : st.bound(l, starts.size());
  det << "max error " << err << " u (u = 2^-24), bound " << B << " u: streamed " << fmt_vec(p)
      << ", whole-row reference " << fmt_vec(q);
  Check r = judged(B > 0 ? err / B : (err > 0 ? INFINITY : 0.0), 1.0, in.str(), det.str());
  if (err > B) r.ratio = INFINITY;
  return r;
}

// ---------------------------------------------------------------- the registry
Verdict skip(const Variant& v, const PropertyInfo& info, std::string why, Rule rule = {}) {
  Verdict out;
  out.property = info.id;
  out.claim = info.claim;
  out.kernel = v.name;
  out.op = "variant";
  out.outcome = Outcome::skip;
  out.note = std::move(why);
  out.rule = std::move(rule);
  return out;
}

Verdict claimed_error(const Variant& v, const PropertyInfo& info, std::string why, Rule rule) {
  Verdict e = skip(v, info, std::move(why), std::move(rule));
  e.outcome = Outcome::error;
  return e;
}

// How a property is held for one variant: the verdict's bound and rule, or
// the verdict the cell gets without running (not applicable, or a claim made
// without what it takes to check it).
struct Holding {
  double bound = NAN;
  Rule rule;
  std::optional<Verdict> instead;
};

const Rule& exact_rule() {
  static const Rule r{
      "exact-identity",
      "mathematical identity checked on the reference; tolerance 2^10 (n+2) u_ref max(1,|l|) "
      "covers only the reference's own rounding"};
  return r;
}

// The weight properties (sums, [0, 1], monotonicity) are n/a for a variant
// whose output is one number per row (variant.h SA_OUT_SCALAR).
Holding weights_identity(const Variant& v, const PropertyInfo& info) {
  if (v.scalar_output)
    return {NAN,
            {},
            skip(v, info, "n/a: the output is one number per row (" + v.formula + "), not weights",
                 Rule{"n/a.scalar_output", "variant.h SA_OUT_SCALAR: no weights to hold to it"})};
  return {NAN, exact_rule(), std::nullopt};
}
Holding identity(const Variant&, const PropertyInfo&) { return {NAN, exact_rule(), std::nullopt}; }
Holding held_continuity(const Variant&, const PropertyInfo&) {
  return {0x1p-20,
          Rule{"continuity.lipschitz1024",
               "a function with Lipschitz constant <= 2^10 moves by <= 2^-20 under a 2^-30 "
               "perturbation; a jump discontinuity does not shrink with the perturbation"},
          std::nullopt};
}
Holding held_mask(const Variant&, const PropertyInfo&) {
  return {2,
          Rule{"special.mask",
               "include/softmax_audit/variant.h: -inf is a mask; exp(-inf) = 0 etc. add exact "
               "zeros, so only a reordering of exact terms may differ: <= 2 float32 ulps apart"},
          std::nullopt};
}
Holding held_nan(const Variant&, const PropertyInfo&) {
  return {0,
          Rule{"special.nan", "include/softmax_audit/variant.h: NaN anywhere -> the whole row NaN"},
          std::nullopt};
}
Holding held_pos_inf(const Variant&, const PropertyInfo&) {
  return {0x1p-20,
          Rule{"special.pos_inf",
               "include/softmax_audit/variant.h: +inf is the limit as the logit grows. Checked "
               "against the reference with 2^60 in place of +inf (finite logits <= 13, so the "
               "neglected terms are < e^-(2^59) for exponential normalisers and < 14 * 2^-60 for "
               "rational ones such as StableMax's 1/(1-x) or a power x^2); 2^-20 covers the "
               "float32 rounding of weights of a row of n <= 16"},
          std::nullopt};
}
Holding held_f32(const Variant& v, const PropertyInfo& info) {
  if (!has_reference(v) || !(two_row(v) ? bool(v.f32_bound_2) : bool(v.f32_bound)))
    return {NAN, {}, skip(v, info, "the variant has no reference to compare with")};
  return {1.0, Rule{"variant.f32_bound", v.f32_bound_rule}, std::nullopt};
}
// The streamability cell: "yes" (pass), a shrunk split (fail), or skip with
// "no: why" / "not supplied".
Holding held_stream(const Variant& v, const PropertyInfo& info) {
  const Stream& st = v.stream;
  const bool two = two_row(v);
  if (st.kind == StreamKind::not_supplied)
    return {NAN,
            {},
            skip(v, info, "not supplied: the variant has no streaming state",
                 Rule{"streamable.not_supplied", "no state/push/merge given: nothing to check"})};
  if (st.kind == StreamKind::no)
    return {NAN,
            {},
            skip(v, info, "no: " + st.note,
                 Rule{"streamable.none", "the variant states its normaliser has no merge state"})};
  const bool bitwise = st.kind == StreamKind::bitwise;
  if (!st.init || !st.merge || st.state_bytes == 0 || (two ? !st.push2 : !st.push) ||
      (two ? !st.finish2 : !st.finish))
    return {NAN,
            {},
            claimed_error(
                v, info,
                two ? "streaming claimed but state_bytes, init, push2, merge or finish2 is missing"
                    : "streaming claimed but state_bytes, init, push, merge or finish is missing",
                Rule{bitwise ? "stream.bitwise" : "stream.bounded",
                     "a streaming claim without the functions to check it: a claimed error"})};
  if (!bitwise && !(two ? bool(st.bound2) : bool(st.bound)))
    return {NAN,
            {},
            claimed_error(v, info, "bounded streaming claimed without a bound",
                          Rule{"stream.bounded",
                               "a streaming claim without the bound to check it: a claimed "
                               "error"})};
  if (bitwise)
    return {0.0,
            Rule{"stream.bitwise",
                 "the variant claims its merged state finishes to the float32 kernel's whole-row "
                 "weights bit for bit; identity neutrality is bit for bit"},
            std::nullopt};
  return {1.0,
          Rule{"stream.bounded", st.bound_rule +
                                     "; the reference is the variant's whole-row reference, which "
                                     "shares no code with push/merge; identity neutrality is bit "
                                     "for bit"},
          std::nullopt};
}

// One row of the registry: a column of the matrix, how a case is drawn, the
// function that checks it, and how the property is held for a variant.
struct RowProperty {
  const char* id;
  const char* column;  // short header for the terminal table
  const char* claim;
  rc::Gen<Case> (*draw)(const Variant&, int max_n);
  Check (*check)(const Variant&, const Case&);
  Holding (*held)(const Variant&, const PropertyInfo&);
};

const std::vector<RowProperty>& row_properties() {
  static const std::vector<RowProperty> rows = {
      {"sum_to_one", "sum1", "the weights sum to 1", draw_row, sum_to_one, weights_identity},
      {"sum_at_most_one", "sum<=1", "the weights sum to at most 1", draw_row, sum_at_most_one,
       weights_identity},
      {"bounded_01", "[0,1]", "every weight lies in [0, 1]", draw_row, bounded_01,
       weights_identity},
      {"shift_invariance", "shift", "p(l + c) = p(l) for every constant c", draw_shift,
       shift_invariance, identity},
      {"permutation_equivariance", "perm", "p(pi l) = pi p(l) for every permutation pi",
       draw_permutation, permutation_equivariance, identity},
      {"monotonicity", "monot", "raising l_i does not lower p_i and does not raise any other p_j",
       draw_raise, monotonicity, weights_identity},
      {"continuity", "contin",
       "perturbing each logit by 2^-30 changes no weight by more than 2^-20 (Lipschitz <= 1024)",
       draw_signs, continuity, held_continuity},
      {"special.neg_inf_mask", "-inf",
       "float32 kernel: a -inf logit gets weight exactly 0 and the rest equal the kernel on the "
       "row without it (all -inf: all zeros)",
       draw_items, neg_inf_mask, held_mask},
      {"special.nan", "NaN", "float32 kernel: a NaN logit makes every weight NaN", draw_item, nan,
       held_nan},
      {"special.pos_inf", "+inf",
       "float32 kernel: +inf logits give the limit as they grow (no NaN; within 2^-20 of the "
       "reference with 2^60 in place of +inf)",
       draw_items, pos_inf, held_pos_inf},
      {"f32_vs_reference", "f32~ref",
       "float32 kernel within the variant's stated rounding bound of its reference", draw_row,
       f32_vs_reference, held_f32},
      {"streamable", "stream",
       "the variant's streaming state (push/merge/finish) gives the whole row's weights for every "
       "split into contiguous chunks and every merge order (bit for bit with the float32 kernel "
       "where it claims bitwise, within its stated bound of the reference otherwise), and the "
       "identity state is neutral (bit for bit)",
       draw_split, streamable, held_stream},
  };
  return rows;
}

// Runs one property on one variant through the suite's search.
Verdict run_property(const Variant& v, const RowProperty& p, const FuzzConfig& cfg) {
  const PropertyInfo info{p.id, p.column, p.claim};
  Holding h = p.held(v, info);
  if (h.instead) return *h.instead;
  Verdict out;
  out.property = info.id;
  out.claim = info.claim;
  out.bound = h.bound;
  out.rule = std::move(h.rule);
  out.kernel = v.name;
  out.op = "variant";
  out.dtype =
      info.id.rfind("special", 0) == 0 || info.id == "f32_vs_reference" || info.id == "streamable"
          ? "float32"
          : v.reference_name;
  props::detail::SearchOptions o;
  o.cases = cfg.cases;
  o.seed = seed_for(cfg.seed, v.name, info.id);
  // A variant's case costs microseconds: shrink to the minimal counterexample
  // (bounded by evaluations, not by time, so the result is the same on a
  // loaded machine).
  o.shrink_evaluations = 100000;
  o.shrink_seconds = 3600;
  const auto check = p.check;
  const auto r = props::detail::search<Case>(p.draw(v, cfg.max_n), 1, o, [&](const Case& c) {
    // A variant that throws fails the case it threw on; the case is shrunk
    // like any other counterexample.
    try {
      return std::vector<Check>{check(v, c)};
    } catch (const std::exception& e) {
      return std::vector<Check>{
          judged(INFINITY, h.bound, fmt_in(c.in), std::string("the variant threw: ") + e.what())};
    }
  })[0];
  out.seconds = r.seconds;
  out.cases = r.cases_applicable;
  const std::string seed = "seed " + std::to_string(o.seed);
  if (r.failing) {
    out.outcome = Outcome::fail;
    out.measured = r.failing_check.measured;
    out.counterexample = r.failing_check.where;
    out.note = "minimal after shrinking (" + std::to_string(r.shrink_steps) +
               " steps); failed after " + std::to_string(r.failing_case) + " passing cases, " +
               seed;
  } else if (!r.error.empty()) {
    out.outcome = Outcome::error;
    out.note = r.error;
  } else {
    out.outcome = Outcome::pass;
    out.measured = r.worst.measured;
    out.note = std::to_string(r.cases_applicable) + " cases, " + seed + "; measured = worst case";
    if (r.worst.applicable) out.worst_case = r.worst.where;
  }
  return out;
}

double least_squares_slope(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
  }
  return sxy / sxx;
}

std::string gap_id(double g) {
  std::ostringstream os;
  os << "dispersion_g" << g;
  return os.str();
}
}  // namespace

// ---------------------------------------------------------------- properties
std::vector<PropertyInfo> fuzz_properties(const FuzzConfig& config) {
  std::vector<PropertyInfo> p;
  for (const auto& row : row_properties()) p.push_back({row.id, row.column, row.claim});
  for (double g : config.gaps) {
    std::ostringstream col;
    col << "disp g=" << g;
    std::ostringstream claim;
    claim << "largest weight as n = 2^k grows to 2^" << config.max_log2_n << " (n-1 logits at "
          << config.base << ", the top at " << config.base << "+" << g
          << ", placed last) behaves as theory predicts";
    p.push_back({gap_id(g), col.str(), claim.str()});
  }
  return p;
}

DispersionCurve dispersion_curve(const Variant& v, double gap, const FuzzConfig& config) {
  DispersionCurve c;
  c.gap = gap;
  for (int k = 1; k <= config.max_log2_n; ++k) {
    const std::size_t n = std::size_t{1} << k;
    std::vector<double> l(n, config.base), p(n);
    l[n - 1] = config.base + gap;
    if (v.in2_kind != In2Kind::none)
      v.eval64_2(l, std::vector<double>(n, v.dispersion_in2), p);
    else
      v.eval64(l, p);
    c.log2_n.push_back(k);
    c.top_weight.push_back(p[n - 1]);
  }
  const std::size_t m = std::min<std::size_t>(7, c.top_weight.size());
  std::vector<double> x, yt, yr;
  bool all_one = true, any_zero = false;
  for (std::size_t i = c.top_weight.size() - m; i < c.top_weight.size(); ++i) {
    const double w = c.top_weight[i];
    x.push_back(c.log2_n[i]);
    yt.push_back(std::log2(std::max(w, 1e-300)));
    yr.push_back(std::log2(std::max(1.0 - w, 1e-300)));
    if (!(w >= 1.0 - 1e-12)) all_one = false;
    if (w <= 0) any_zero = true;
  }
  c.slope_top = least_squares_slope(x, yt);
  c.slope_rest = least_squares_slope(x, yr);
  // Classification: a fitted power law n^a with a < -0.05 (a factor 0.81 over
  // the last six doublings) is "tends to", anything flatter is "bounded";
  // weights within 1e-12 of 1 at every one of the last sizes are one-hot.
  if (all_one)
    c.measured = Dispersion::to_one;
  else if (any_zero || c.slope_top < -0.05)
    c.measured = Dispersion::to_zero;
  else if (c.slope_rest < -0.05)
    c.measured = Dispersion::to_one;
  else
    c.measured = Dispersion::bounded;
  return c;
}

VariantResult fuzz_variant(const Variant& v, const FuzzConfig& cfg) {
  const auto t0 = std::chrono::steady_clock::now();
  ref::precision_bits();  // initialises the MPFR working precision (256 bits)
  VariantResult r;
  r.variant = v.name;
  r.formula = v.formula;
  r.wrong_formulation = v.wrong_formulation;
  r.wrong_of = v.wrong_of;
  r.origin = v.origin;
  r.citation = v.citation;
  r.not_claimed = v.not_claimed;
  r.in2_kind = v.in2_kind;
  r.in2 = v.in2;
  r.scalar_output = v.scalar_output;
  const auto props = fuzz_properties(cfg);
  auto info = [&](const std::string& id) {
    for (const auto& p : props)
      if (p.id == id) return p;
    return PropertyInfo{id, id, id};
  };
  for (const auto& p : row_properties()) {
    Verdict vd = run_property(v, p, cfg);
    if (vd.outcome == Outcome::pass && vd.property == "f32_vs_reference")
      vd.note +=
          "; measured = error / bound (error in units of 2^-24); reference: " + v.reference_name;
    if (vd.outcome == Outcome::pass && vd.property == "streamable")
      vd.note =
          std::string("yes (") + name_of(v.stream.kind) + "); " + vd.note +
          (v.stream.kind == StreamKind::bitwise ? " (differing weights)" : " (error / bound)");
    r.cells.push_back(std::move(vd));
  }
  for (double g : cfg.gaps) {
    const PropertyInfo pi = info(gap_id(g));
    Verdict vd;
    vd.property = pi.id;
    vd.claim = pi.claim;
    vd.kernel = v.name;
    vd.op = "variant";
    vd.dtype = "float64";
    if (v.scalar_output) {
      vd = skip(v, pi, "n/a: the output is one number per row, not weights");
      vd.rule = Rule{"n/a.scalar_output", "variant.h SA_OUT_SCALAR: no largest weight to sweep"};
      r.cells.push_back(vd);
      continue;
    }
    try {
      const auto curve = dispersion_curve(v, g, cfg);
      r.curves.push_back(curve);
      const double w = curve.top_weight.back();
      std::ostringstream os;
      os << "measured " << name_of(curve.measured) << ": w(2^10) = "
         << curve.top_weight[std::min<std::size_t>(9, curve.top_weight.size() - 1)] << ", w(2^"
         << cfg.max_log2_n << ") = " << w << ", slope log2 w = " << curve.slope_top
         << ", slope log2(1-w) = " << curve.slope_rest;
      vd.measured = w;
      vd.note = os.str();
      vd.counterexample.clear();
      const auto pred = v.predict ? v.predict(g) : std::nullopt;
      if (std::isnan(w)) {
        vd.outcome = Outcome::fail;
        vd.counterexample = "NaN weight at n = 2^" + std::to_string(cfg.max_log2_n);
      } else if (!pred) {
        vd.outcome = Outcome::skip;
        vd.note = "no theory prediction; " + vd.note;
        vd.rule = Rule{"dispersion.measured", "empirical only"};
      } else {
        vd.rule = Rule{"dispersion.theory", pred->source};
        vd.claim += std::string(": ") + name_of(pred->cls);
        vd.outcome = pred->cls == curve.measured ? Outcome::pass : Outcome::fail;
        if (vd.outcome == Outcome::fail)
          vd.counterexample = std::string("predicted ") + name_of(pred->cls) + ", " + vd.note;
      }
    } catch (const std::exception& e) {
      vd.outcome = Outcome::error;
      vd.note = std::string("the variant threw: ") + e.what();
    }
    r.cells.push_back(vd);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

Matrix fuzz_all(const std::vector<const Variant*>& variants, const FuzzConfig& config) {
  const auto t0 = std::chrono::steady_clock::now();
  Matrix m;
  m.config = config;
  m.columns = fuzz_properties(config);
  for (const Variant* v : variants) m.rows.push_back(fuzz_variant(*v, config));
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return m;
}

bool claims(const VariantResult& r, const Verdict& c) {
  if (r.wrong_formulation) return false;
  if (std::find(r.not_claimed.begin(), r.not_claimed.end(), c.property) != r.not_claimed.end())
    return false;
  if (c.property.rfind("special.", 0) == 0 || c.property == "f32_vs_reference") return true;
  // A supplied streaming state claims its merge (rule stream.bitwise / stream.bounded).
  if (c.property == "streamable") return c.rule.id.rfind("stream.", 0) == 0;
  return c.property.rfind("dispersion", 0) == 0 && c.rule.id == "dispersion.theory";
}

std::vector<std::string> claimed_failures(const Matrix& m) {
  std::vector<std::string> out;
  for (const auto& r : m.rows)
    for (const auto& c : r.cells)
      if ((c.outcome == Outcome::fail || c.outcome == Outcome::error) && claims(r, c))
        out.push_back(r.variant + ": " + c.property + " (" + name_of(c.outcome) + ")");
  return out;
}

const Verdict* cell(const VariantResult& r, const std::string& property_id) {
  for (const auto& c : r.cells)
    if (c.property == property_id) return &c;
  return nullptr;
}

namespace {
// Terminal symbols. A failed claim (a defect: exit 1) and a finding (a
// property the formulation does not keep: exit 0) look different.
constexpr const char* kHolds = "holds";
constexpr const char* kFinding = "lacks";
constexpr const char* kClaimFail = "FAIL!";

std::string cell_text(const VariantResult& r, const Verdict& v) {
  const bool claimed = claims(r, v);
  if (v.property.rfind("dispersion", 0) == 0) {
    if (v.outcome == Outcome::error) return "error";
    if (v.outcome == Outcome::skip && v.note.rfind("n/a", 0) == 0) return "n/a";
    std::string cls = v.note.find("measured to_zero") != std::string::npos  ? "->0"
                      : v.note.find("measured to_one") != std::string::npos ? "->1"
                                                                            : "";
    if (cls.empty()) {
      std::ostringstream os;
      os << std::fixed << std::setprecision(2) << "->" << v.measured;
      cls = os.str();
    }
    if (v.outcome == Outcome::pass) return cls + " ok";
    if (v.outcome == Outcome::fail) return cls + (claimed ? " FAIL!" : " off");
    return cls;
  }
  if (v.property == "streamable") {
    switch (v.outcome) {
      case Outcome::pass:
        return "yes";
      case Outcome::fail:
        return claimed ? kClaimFail : kFinding;
      case Outcome::skip:
        return v.note.rfind("no:", 0) == 0 ? "no" : "n/s";
      case Outcome::error:
        return "error";
    }
  }
  switch (v.outcome) {
    case Outcome::pass:
      return kHolds;
    case Outcome::fail:
      return claimed ? kClaimFail : kFinding;
    case Outcome::skip:
      return "n/a";
    case Outcome::error:
      return "error";
  }
  return "?";
}
}  // namespace

std::string streamable_word(const VariantResult& r) {
  const Verdict* c = cell(r, "streamable");
  if (!c) return "not supplied";
  switch (c->outcome) {
    case Outcome::pass:
      return "yes";
    case Outcome::fail:
      return "FAILS";
    case Outcome::error:
      return "error";
    case Outcome::skip:
      return c->note.rfind("no:", 0) == 0 ? "no" : "not supplied";
  }
  return "not supplied";
}

std::string legend() {
  return "Legend: holds = holds on every generated case; lacks = a finding: the formulation does "
         "not keep this property (exit 0); FAIL! = a failed claim: the variant fails a property "
         "it claims (special values, its own rounding or streaming bound, its theory "
         "prediction; exit 1); n/a = not applicable.\n"
         "  dispersion: ->0 disperses, ->c stays at c, ->1 sharpens; ok = as theory predicts, "
         "FAIL! = not as predicted (claimed), off = not as predicted for a formulation that "
         "claims nothing.\n"
         "  stream: yes = state/push/merge supplied and every split merges to the whole row; "
         "no = the variant states its normaliser has no merge state; n/s = not supplied.\n"
         "  ! before a name = wrong_formulation (a deliberately mis-stated variant: it claims "
         "nothing).\n";
}

std::string render_table(const Matrix& m) {
  std::ostringstream os;
  std::size_t w0 = 8;
  for (const auto& r : m.rows) w0 = std::max(w0, r.variant.size() + (r.wrong_formulation ? 2 : 0));
  w0 += 1;
  std::vector<std::size_t> widths;
  os << std::left << std::setw(static_cast<int>(w0)) << "variant";
  for (const auto& c : m.columns) {
    const std::size_t w =
        std::max<std::size_t>(c.column.size(), c.id.rfind("dispersion", 0) == 0 ? 10 : 5) + 1;
    widths.push_back(w);
    os << std::setw(static_cast<int>(w)) << c.column;
  }
  os << "\n";
  for (const auto& r : m.rows) {
    os << std::setw(static_cast<int>(w0))
       << (r.wrong_formulation ? "!" + r.variant + " " : r.variant);
    for (std::size_t k = 0; k < m.columns.size(); ++k) {
      const Verdict* v = cell(r, m.columns[k].id);
      os << std::setw(static_cast<int>(widths[k])) << (v ? cell_text(r, *v) : "-");
    }
    os << "\n";
  }
  os << legend();
  for (const auto& r : m.rows)
    if (r.wrong_formulation) os << "  " << r.variant << " mis-states " << r.wrong_of << "\n";
  for (const bool claimed : {true, false}) {
    os << (claimed ? "\nFailed claims (FAIL!: defects, exit 1; minimal counterexamples after "
                     "shrinking):\n"
                   : "\nFindings (lacks/off: properties the formulation does not keep, exit 0; "
                     "minimal counterexamples):\n");
    std::size_t listed = 0;
    for (const auto& r : m.rows)
      for (const auto& v : r.cells)
        if ((v.outcome == Outcome::fail || v.outcome == Outcome::error) &&
            claims(r, v) == claimed) {
          os << "  " << r.variant << " / " << v.property << ": "
             << (v.counterexample.empty() ? v.note : v.counterexample) << "\n";
          ++listed;
        }
    if (listed == 0) os << "  none\n";
  }
  os << std::fixed << std::setprecision(2) << "\n"
     << m.rows.size() << " variants, " << m.config.cases << " cases per property, seed "
     << m.config.seed << ", " << m.seconds << " s\n";
  return os.str();
}

nlohmann::json to_json(const Verdict& v) {
  // The one encoding of non-finite numbers in every JSON output (docs/schema/).
  auto num = [](double x) -> nlohmann::json {
    if (std::isnan(x)) return "NaN";
    if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
    return x;
  };
  return {{"property", v.property},
          {"claim", v.claim},
          {"measured", num(v.measured)},
          {"bound", num(v.bound)},
          {"rule", {{"id", v.rule.id}, {"source", v.rule.source}}},
          {"outcome", name_of(v.outcome)},
          {"counterexample", v.counterexample},
          {"kernel", v.kernel},
          {"op", v.op},
          {"dtype", v.dtype},
          {"note", v.note},
          {"worst_case", v.worst_case}};
}

nlohmann::json to_json(const Matrix& m) {
  nlohmann::json j;
  j["format"] = "softmax-audit-variants";
  // 2: seed as a string, non-finite numbers as "NaN"/"Infinity"/"-Infinity";
  // 3: the streamable column, per row "citation" and "streamable", "legend";
  //    later, additively: an optional per-row "in2" (two-row variants, variant.h ABI 3).
  j["version"] = 3;
  j["legend"] = legend();
  j["config"] = {{"cases", m.config.cases}, {"seed", std::to_string(m.config.seed)},
                 {"max_n", m.config.max_n}, {"gaps", m.config.gaps},
                 {"base", m.config.base},   {"max_log2_n", m.config.max_log2_n}};
  j["seconds"] = m.seconds;
  j["columns"] = nlohmann::json::array();
  for (const auto& c : m.columns)
    j["columns"].push_back({{"id", c.id}, {"column", c.column}, {"claim", c.claim}});
  j["variants"] = nlohmann::json::array();
  for (const auto& r : m.rows) {
    nlohmann::json row = {{"name", r.variant},
                          {"formula", r.formula},
                          {"wrong_formulation", r.wrong_formulation},
                          {"wrong_of", r.wrong_of},
                          {"origin", r.origin},
                          {"citation", r.citation},
                          {"streamable", streamable_word(r)},
                          {"seconds", r.seconds}};
    // The largest weight against n for each gap: the curve behind each
    // dispersion cell (does the top item stay sharp as n grows?).
    if (r.in2_kind != In2Kind::none)
      row["in2"] = {
          {"kind", name_of(r.in2_kind)}, {"meaning", r.in2}, {"scalar_output", r.scalar_output}};
    row["dispersion"] = nlohmann::json::array();
    for (const auto& c : r.curves)
      row["dispersion"].push_back({{"gap", c.gap},
                                   {"log2_n", c.log2_n},
                                   {"top_weight", c.top_weight},
                                   {"measured", name_of(c.measured)}});
    row["cells"] = nlohmann::json::object();
    for (const auto& v : r.cells) {
      row["cells"][v.property] = to_json(v);
      row["cells"][v.property]["claimed"] = claims(r, v);
    }
    j["variants"].push_back(row);
  }
  return j;
}

}  // namespace sa::variants
