// The variant fuzzer: runs every property of the matrix against a variant
// on the property suite's search (properties/search.hpp: RapidCheck
// generators draw the cases, a failing case is shrunk through RapidCheck's
// shrink tree), and classifies dispersion empirically by sweeping n = 2^k.
// Each column is one registry row and one function in fuzz.cpp.
//
// Every cell is a sa::Verdict produced by running the property: pass (holds
// on every generated case), fail (with the minimal counterexample the search
// shrank to; a variant that throws fails the case it threw on), skip (not
// applicable, with the reason), error (a claim made without what it takes to
// check it, e.g. streaming without a merge; a dispersion sweep it threw in).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/verdict.hpp"
#include "variants/variant.hpp"

namespace sa::variants {

struct FuzzConfig {
  int cases = 100;         // random cases per property (before shrinking)
  std::uint64_t seed = 1;  // base seed; each (variant, property) derives its own
  int max_n = 16;          // longest generated row
  std::vector<double> gaps = {0.5, 1.0, 2.0, 3.0};  // dispersion gaps g
  double base = 1.0;    // dispersion rows: n-1 logits at base, the top at base + g (last)
  int max_log2_n = 20;  // dispersion sweep to n = 2^max_log2_n
};

struct PropertyInfo {
  std::string id;
  std::string column;  // short header for the terminal table
  std::string claim;
};

// The columns of the matrix, in order (dispersion columns per configured gap).
std::vector<PropertyInfo> fuzz_properties(const FuzzConfig& config);

// Dispersion of one variant at one gap.
struct DispersionCurve {
  double gap = 0;
  std::vector<int> log2_n;
  std::vector<double> top_weight;
  double slope_top = 0;   // d log2 w / d log2 n over the last 7 points
  double slope_rest = 0;  // d log2 (1 - w) / d log2 n over the last 7 points
  Dispersion measured = Dispersion::bounded;
};
DispersionCurve dispersion_curve(const Variant& v, double gap, const FuzzConfig& config);

struct VariantResult {
  std::string variant;
  std::string formula;
  bool wrong_formulation = false;
  std::string wrong_of;
  std::string origin;
  std::string citation;
  std::vector<std::string> not_claimed;  // Variant::not_claimed
  In2Kind in2_kind = In2Kind::none;      // Variant::in2_kind (two-row variants)
  std::string in2;                       // Variant::in2
  bool scalar_output = false;            // Variant::scalar_output
  std::vector<Verdict> cells;            // one per fuzz_properties() entry, same order
  std::vector<DispersionCurve> curves;   // the dispersion sweep behind each dispersion cell
  double seconds = 0;
};

VariantResult fuzz_variant(const Variant& v, const FuzzConfig& config);

struct Matrix {
  FuzzConfig config;
  std::vector<PropertyInfo> columns;
  std::vector<VariantResult> rows;
  double seconds = 0;
};

Matrix fuzz_all(const std::vector<const Variant*>& variants, const FuzzConfig& config);

// Terminal rendering: the matrix, its legend, then every failed claim and
// every finding with its counterexample.
std::string render_table(const Matrix& m);
// The legend of the terminal symbols (holds / lacks / FAIL! / n/a, dispersion, stream).
std::string legend();
// "yes", "no", "not supplied", "FAILS" or "error": the streamability of a row.
std::string streamable_word(const VariantResult& r);
nlohmann::json to_json(const Matrix& m);
nlohmann::json to_json(const Verdict& v);

// Whether a variant claims the property of a cell, i.e. a failure there is a
// defect rather than a finding about the formulation: every variant not marked
// wrong_formulation claims the special-value semantics of variant.h
// (special.*, except cells in Variant::not_claimed), its own rounding bound (f32_vs_reference) and
// its theory prediction (dispersion cells held to rule dispersion.theory). The other columns (sum
// to one, shift invariance, ...) say which of softmax's properties a formulation keeps and are
// findings, not claims.
bool claims(const VariantResult& r, const Verdict& cell);
// "variant: property (outcome)" for every claimed cell that failed or errored.
std::vector<std::string> claimed_failures(const Matrix& m);

// Cell lookup by property id (nullptr if absent).
const Verdict* cell(const VariantResult& r, const std::string& property_id);

}  // namespace sa::variants
