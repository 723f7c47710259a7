// Softmax variants: what the fuzzer runs its property matrix against.
//
// A Variant is a float32 kernel plus (optionally) a high-precision reference
// of the same formula, a rounding-error bound tying the two together, and
// theory's prediction of how it disperses. Built-ins live in builtins.cpp;
// a user adds one with a single registration,
//
//     SA_REGISTER_VARIANT(my_variant, [] { sa::variants::Variant v; ...; return v; }());
//
// (any translation unit linked into the executable), or as a plugin shared
// library against include/softmax_audit/variant.h (load_plugin below).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "reference/mpfr.hpp"
#include "softmax_audit/variant.h"

namespace sa::variants {

enum class Dispersion { to_zero, bounded, to_one };
const char* name_of(Dispersion d);

struct Prediction {
  Dispersion cls;
  std::string source;  // theorem / derivation it comes from
};

// Streaming (include/softmax_audit/variant.h, ABI 2): a state folded chunk by
// chunk, merged across adjacent chunks and finished into the row's weights.
enum class StreamKind { not_supplied, bitwise, bounded, no };
const char* name_of(StreamKind k);

struct Stream {
  StreamKind kind = StreamKind::not_supplied;
  std::string note;  // kind no: why the normaliser has no merge state
  std::size_t state_bytes = 0;
  std::function<void(void* state)> init;  // the identity state
  // Folds chunk (items offset .. offset + chunk.size() of a row of row_n) into state.
  std::function<void(void* state, std::span<const float> chunk, std::size_t offset,
                     std::size_t row_n)>
      push;
  std::function<void(void* left, const void* right)> merge;  // left = left (+) right
  std::function<void(const void* state, std::span<const float> l, std::span<float> p)> finish;
  // kind bounded: max_i |streamed_i - exact_i| / 2^-24 for this row in `chunks` chunks.
  std::function<double(std::span<const double> l, std::size_t chunks)> bound;
  std::string bound_rule;

  // A two-row variant (Variant::in2_kind not none) streams with push2/finish2
  // (and bound2 when bounded) in place of push/finish/bound: each chunk of the
  // first row comes with the same keys' chunk of the second (variant.h ABI 4).
  std::function<void(void* state, std::span<const float> chunk, std::span<const float> chunk2,
                     std::size_t offset, std::size_t row_n)>
      push2;
  std::function<void(const void* state, std::span<const float> l, std::span<const float> l2,
                     std::span<float> out)>
      finish2;
  std::function<double(std::span<const double> l, std::span<const double> l2, std::size_t chunks)>
      bound2;
};

// Wraps typed callables over a trivially copyable State into a Stream.
template <class State, class Init, class Push, class Merge, class Finish>
Stream typed_stream(StreamKind kind, Init init, Push push, Merge merge, Finish finish) {
  Stream s;
  s.kind = kind;
  s.state_bytes = sizeof(State);
  s.init = [init](void* st) { *static_cast<State*>(st) = init(); };
  s.push = [push](void* st, std::span<const float> c, std::size_t off, std::size_t n) {
    push(*static_cast<State*>(st), c, off, n);
  };
  s.merge = [merge](void* a, const void* b) {
    merge(*static_cast<State*>(a), *static_cast<const State*>(b));
  };
  s.finish = [finish](const void* st, std::span<const float> l, std::span<float> p) {
    finish(*static_cast<const State*>(st), l, p);
  };
  return s;
}

// The same for a two-row variant: push(state, chunk, chunk2, offset, row_n),
// finish(state, l, l2, out).
template <class State, class Init, class Push, class Merge, class Finish>
Stream typed_stream2(StreamKind kind, Init init, Push push, Merge merge, Finish finish) {
  Stream s;
  s.kind = kind;
  s.state_bytes = sizeof(State);
  s.init = [init](void* st) { *static_cast<State*>(st) = init(); };
  s.push2 = [push](void* st, std::span<const float> c, std::span<const float> c2, std::size_t off,
                   std::size_t n) { push(*static_cast<State*>(st), c, c2, off, n); };
  s.merge = [merge](void* a, const void* b) {
    merge(*static_cast<State*>(a), *static_cast<const State*>(b));
  };
  s.finish2 = [finish](const void* st, std::span<const float> l, std::span<const float> l2,
                       std::span<float> out) {
    finish(*static_cast<const State*>(st), l, l2, out);
  };
  return s;
}

// A second input row (include/softmax_audit/variant.h, ABI 3).
enum class In2Kind { none, logits, per_key };
const char* name_of(In2Kind k);

struct Variant {
  std::string name;
  std::string formula;
  bool wrong_formulation = false;
  std::string wrong_of;  // the correct variant this one mis-states
  std::string origin = "builtin";
  // Cells of the special-value semantics (variant.h) this variant deliberately
  // does not claim because its published formula says otherwise (e.g.
  // softpick's masked items count in its denominator). Failing them is a
  // finding, not a defect (variants/fuzz.hpp, claims()). Plugins claim all.
  std::vector<std::string> not_claimed;

  // float32 kernel under test (required).
  std::function<void(std::span<const float> l, std::span<float> p)> kernel32;
  // The same formula evaluated in float64: used for the dispersion sweep to
  // n = 2^20, where the MPFR reference would be too slow. Required.
  std::function<void(std::span<const double> l, std::span<double> p)> eval64;
  // High-precision reference (may be empty: then properties run on eval64).
  std::function<std::vector<ref::Mp>(std::span<const double> l)> reference;
  std::string reference_name = "mpfr-256";
  // Unit roundoff of whatever the mathematical properties run on.
  double reference_unit_roundoff = 0x1p-200;
  // Bound on max_i |kernel32_i - exact_i| / 2^-24 for this row (see T7).
  std::function<double(std::span<const double> l)> f32_bound;
  std::string f32_bound_rule;
  // Theory's prediction at gap g (empty = none).
  std::function<std::optional<Prediction>(double gap)> predict;
  // Where the formula comes from (paper, year, arXiv id), shown by `fuzz --list`.
  std::string citation;
  // Streaming interface (kind not_supplied when there is none).
  Stream stream;

  // ---- A second input row (ABI 3). in2_kind none: a one-row variant and the
  // fields below are unused. Otherwise the fuzzer calls only the two-row
  // functions (kernel32 etc. may be empty) with a second row l2 of the same
  // length, drawn from the logits' grid and moved with the first row as
  // in2_kind says (variant.h); scalar_output: one output per row.
  In2Kind in2_kind = In2Kind::none;
  std::string in2;  // what the second row means, one line (fuzz --list)
  bool scalar_output = false;
  std::function<void(std::span<const float> l, std::span<const float> l2, std::span<float> out)>
      kernel32_2;
  std::function<void(std::span<const double> l, std::span<const double> l2, std::span<double> out)>
      eval64_2;
  std::function<std::vector<ref::Mp>(std::span<const double> l, std::span<const double> l2)>
      reference_2;
  std::function<double(std::span<const double> l, std::span<const double> l2)> f32_bound_2;
  // The constant the second row holds in the dispersion sweep (A2 uniform, no
  // selection penalty, ...).
  double dispersion_in2 = 0.0;
};

class Registry {
 public:
  // Adds a variant; throws std::invalid_argument on a duplicate or empty name
  // or a missing kernel. Returns true (so it can initialise a static).
  bool add(Variant v);
  const Variant* find(const std::string& name) const;
  const std::vector<Variant>& all() const { return variants_; }

 private:
  std::vector<Variant> variants_;
};

// The process-wide registry (built-ins registered on first use).
Registry& registry();

// Loads every variant a plugin library exports (sa_variant_entry_at) and
// returns them (they are not added to the registry). The library stays loaded.
// Throws std::runtime_error naming the path on failure.
std::vector<Variant> load_plugin(const std::string& path);

// Adapts one C ABI description (used by load_plugin; exposed for tests).
Variant from_c_abi(const sa_variant& c, const std::string& origin);

}  // namespace sa::variants

#define SA_VARIANT_CONCAT2(a, b) a##b
#define SA_VARIANT_CONCAT(a, b) SA_VARIANT_CONCAT2(a, b)
// One-line registration of a variant from any translation unit of the program.
#define SA_REGISTER_VARIANT(ident, ...)                                                 \
  [[maybe_unused]] static const bool SA_VARIANT_CONCAT(sa_variant_registered_, ident) = \
      ::sa::variants::registry().add(__VA_ARGS__)
