// The property suite: the paper's theorems and the known bug classes as
// properties that any kernel behind sa::Kernel is run through.
//
// This header is the contract between the suite and its front ends (the CLI's
// `check`, the audit report, the library users' GoogleTest binaries).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "core/verdict.hpp"
#include "kernels/kernel.hpp"
#include "properties/conventions.hpp"

namespace sa::props {

// The shapes and features of the interface-v2 attention cases (gate spec
// table [attention], docs/gate-spec.md; properties/attention.cpp draws
// them). An empty list means the suite's defaults there.
struct AttentionShapes {
  // Input types of the attention_v2 cases (fp8 included). Empty: the config's
  // `dtypes`, or every type (fp8 too) when `dtypes` is empty as well.
  std::vector<AttnType> types;
  std::vector<std::int64_t> head_dims;  // d, and dv when a case draws dv != d
  std::vector<std::pair<std::int64_t, std::int64_t>> lengths;  // (queries, keys) per sequence
  std::vector<std::int64_t> gqa_ratios;                        // query heads per key/value head
  // Features a case may draw (names: attention_features()); nullopt: all.
  std::optional<std::vector<std::string>> features;
  // Multiply-adds one case may cost the reference: larger cases lose batch
  // entries and heads first, then (for dims and lengths the spec does not
  // name) head dims and lengths. Dims and lengths the spec names are kept.
  double max_work = 8.0e6;
  // Coverage (attention_v2.coverage): every declared feature and every pair
  // of declared features is in at least this many cases of each input type;
  // fixed cases, built before the random ones, see to it (0: no requirement,
  // no fixed cases).
  int pair_cases = 3;
};

// The feature names of AttentionShapes::features, each one switch of the
// case generator: varlen, causal (both alignments), window, softcap, alibi,
// sinks, key_padding, bhsd (layout), strided (padded rows and heads),
// unequal_dv (value head dim != key head dim), adaptive (adaptive temperature), split_kv
// (num_splits > 1). A feature is drawn only where the kernel declares it as well.
const std::vector<std::string>& attention_features();

// What to run. Empty lists mean "everything applicable".
struct SuiteConfig {
  std::vector<Op> ops;              // operations to check
  std::vector<DType> dtypes;        // float32, bfloat16
  std::vector<std::int64_t> sizes;  // row lengths n (generators add their own too when empty)
  std::vector<std::string> distributions;  // generator names (see distributions())
  std::vector<std::string> rules;          // tolerance rule ids (see rules()); empty = all but the
                                           // opt-in "onednn_10eps"
  std::vector<std::string> properties;     // property ids to run (see properties()), or a family
                                        // ("differential", "metamorphic", "special"); empty = all
  int cases = 100;  // random cases per property
  // Seconds of shrinking one run may spend, shared by all its failures (0:
  // counterexamples are reported as found).
  double shrink_seconds = 20.0;
  std::uint64_t seed = 0;  // 0: RapidCheck's own random seed (printed in verdicts)
  double temperature = 1.0;
  // true (a gate spec's `temperature` key): random cases use `temperature`
  // only, instead of also 0.5, 2 and 3. Properties defined at theta = 1 (shift
  // invariance, merge algebra) and ones that compare two temperatures (T4's
  // monotonicity) still do what their definition needs.
  bool temperature_only = false;
  // interface.sizes calls every row op at n = 2^k - 1, 2^k, 2^k + 1 for
  // k = 0 .. max_log2_n (kernel.h allows any n >= 1; paths switch far above
  // the random properties' sizes). 16 by default; the `long` tests use 24.
  int max_log2_n = 16;
  AttentionShapes attention;  // attention_v2 cases
  // determinism.bitwise: calls per input of a row operation (attention: a
  // fifth of it, at least 10). FlashAttention's tests run 250 to expose
  // atomics races on a GPU.
  int determinism_repeats = 250;
  // Numerical conventions declared for the kernel (properties/conventions.hpp:
  // "double_rounding", "flush_to_zero"), besides those it declares itself in
  // kernel.h's capabilities flags (SA_CAP_DOUBLE_ROUNDING, SA_CAP_FLUSH_TO_ZERO).
  std::vector<std::string> conventions;
};

// The conventions a run holds `kernel` to: its own SA_CAP_* flags plus the
// config's. Throws std::invalid_argument naming an unknown convention.
Conventions conventions_of(const Kernel& kernel, const SuiteConfig& config);

// Called as the suite runs; every member may be empty.
struct SuiteObserver {
  // Before each kernel call: which property and a reproducible description of
  // the input about to be run (so a crash or hang can be attributed to it).
  std::function<void(const std::string& property, const std::string& input)> before_case;
  std::function<void(const Verdict&)> on_verdict;
  std::function<void(int done, int total)> progress;
};

// One row of the property registry: everything said of a property outside
// the code that checks it. `check --list`, docs/properties.md (generated by
// `check --list --markdown`, compared by the docs.registry test), the
// report's units, the progress total and the shard units of `check --shard`
// are derived from these rows.
struct PropertyInfo {
  std::string id;       // stable, "<family>.<name>", e.g. "metamorphic.shift_invariance"
  std::string claim;    // one sentence
  std::string rule;     // default rule id the bound comes from (rules())
  std::vector<Op> ops;  // the ops it judges (one verdict per op x element type)
  std::string measure;  // the unit of its measured value and bound
  // What a case needs beyond the op ("" if nothing): declared features,
  // element types, claims; without it the verdict says not applicable.
  std::string needs;
  // Where it is judged: "file.cpp fn[, fn...][; file.cpp fn...]", the
  // functions in properties/ that decide its verdict (one per case or per
  // verdict; several where the ops differ). NaiveSuite.RunnersExist holds
  // every name to a definition in that file.
  std::string runner;
  std::string family() const { return id.substr(0, id.find('.')); }
};

// A family: the properties sharing an id prefix, run by one runner in one
// source file. Where `shared_search` holds, one search (the same drawn cases)
// judges every property of the family, so they are one unit of work: one
// shard unit of `check --shard`, and a sub-selection still runs the search.
struct FamilyInfo {
  std::string name;    // the id prefix
  std::string source;  // the runner's file, properties/...
  bool shared_search;
  std::string what;  // one line
};

std::vector<PropertyInfo> properties();
std::vector<FamilyInfo> families();
// The registry row of `id`, or nullptr.
const PropertyInfo* find_property(const std::string& id);
std::vector<std::string> distributions();
std::vector<Rule> rules();

// An id gate specs may still name for checks that moved (issue 30: interface
// v1 attention is judged by the attention_v2 properties on its single-head
// cases, op `attention`). Selecting `id` (a live id also through its
// family or a prefix) also selects the ids in `to` when the run's ops name
// one of `ops`. A retired id (no longer a property: `retired`) is replaced
// by them (also in a run of every op).
struct PropertyAlias {
  std::string id;
  std::vector<std::string> to;
  std::vector<Op> ops;
  bool retired = false;
  std::string what;  // which checks moved where, one line
};
std::vector<PropertyAlias> property_aliases();
// `selected` (ids, families or prefixes, as SuiteConfig::properties holds
// them) with every alias they select resolved for a run of `ops` (empty:
// every op): retired ids replaced, the ids an alias moved checks to added;
// order kept, no duplicates. Unknown names pass through unchanged.
// retired_only: resolve the retired ids only (run_suite does so; a live
// id's alias is resolved where a run's selection is made: the gate spec,
// `check --property`, gate::planned_properties).
std::vector<std::string> resolve_aliases(const std::vector<std::string>& selected,
                                         const std::vector<Op>& ops, bool retired_only = false);

// MPFR precision of the reference in run_suite: the reference's own error
// (<= 2^-100 relative) cannot move a float32/bfloat16 verdict.
inline constexpr unsigned suite_mpfr_bits = 128;

// Runs every selected property applicable to the kernel (skipping, with a
// verdict saying why, what the kernel does not implement) and returns one
// verdict per property x op x dtype. Throws std::invalid_argument naming the
// field for an unknown distribution, rule or property, a size < 1, cases < 1
// or a temperature that is not finite and > 0. Deterministic for a given
// nonzero seed. See properties/README.md for the list and the bounds.
std::vector<Verdict> run_suite(const Kernel& kernel, const SuiteConfig& config,
                               SuiteObserver* observer = nullptr);

}  // namespace sa::props
