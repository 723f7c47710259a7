// What the gate finds in softmax libraries nobody here wrote (peers.hpp:
// Eigen, oneDNN, PyTorch, those found at build time), each with the numerical
// conventions it follows declared (docs/conventions.md): docs/calibration.md, "What the
// gate finds in oneDNN, Eigen and PyTorch".
//
// For each peer, the property suite runs over softmax and log_softmax in the
// peer's types with the default policy, at theta = 1 only (the libraries take
// no temperature: dividing the logits in bfloat16 first would be the
// wrapper's rounding, not the library's), once per seed. Prints one line per
// verdict that is not a pass (property[op/dtype], measured, bound, note,
// counterexample) and a summary per peer and seed.
//
//   peer_audit [--seed S]... [--cases N] [--expect] [--undeclared] [--conventions a,b]
// --undeclared: declare no convention (the notes then name the conventions
// each library's failures would hold under); --conventions: declare exactly
// these for every peer (what each convention changes, one at a time).
// --expect: exit 1 unless every seed finds exactly the library defects listed
// in kDefects below (each a true error, not a convention; kSometimes: the
// same defects seen by a random property on some seeds); without it the exit
// status is 0.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "kernels/kernel.hpp"
#include "peers.hpp"
#include "properties/suite.hpp"

namespace {

// The conventions each library follows (what it would declare).
// All three evaluate exp(x - max) / sum as written, so rows with +inf or all
// -inf give NaN (PyTorch documents it). oneDNN's bfloat16 softmax keeps
// exp(x - max) in the bfloat16 output between its passes (double_rounding:
// without it interface.sizes, sum_to_one and t7_apriori fail on bfloat16 by up
// to 1.5 ulp). flush_to_zero is declared by none: without it nothing more
// fails (`peer_audit --conventions ieee_special_values,double_rounding`).
// None of the three softmaxes has a temperature (no_temperature: the suite
// calls them at 1 only; temperature_only below does the same when --undeclared
// or --conventions leave it out).
const std::map<std::string, std::vector<std::string>> kConventions = {
    {"eigen", {"ieee_special_values", "no_temperature"}},
    {"onednn", {"double_rounding", "ieee_special_values", "no_temperature"}},
    {"torch", {"ieee_special_values", "no_temperature"}},
};

// Failures that are the library's own errors (peer, property[op/dtype]),
// found on every seed (edge rows and fixed inputs), with what the gate shows.
const std::set<std::string> kDefects = {
    // exp below about -88.7 is wrong: exp(-104) = 9.8e-40 (exact 2.3e-46) and
    // exp(-3.4e38) = 2.9e-39 where a masked key must weigh exactly 0.
    "eigen differential.ulp[softmax/float32]",
    "eigen special.values[softmax/float32]",
    // NaN is dropped (a max that ignores NaN): [1, nan, 2] gives finite weights.
    "onednn differential.ulp[softmax/float32]",
    "onednn differential.ulp[softmax/bfloat16]",
    "onednn special.values[softmax/float32]",
    "onednn special.values[softmax/bfloat16]",
    "onednn special.values[log_softmax/float32]",
    "onednn special.values[log_softmax/bfloat16]",
    // log-softmax is off by up to 1.43e-6 absolute: log(1) = 1.43e-6 for n = 1,
    // 56-81 float32 ulp at n = 2, 3 (its log is not faithful).
    "onednn differential.ulp[log_softmax/float32]",
    "onednn differential.ulp[log_softmax/bfloat16]",
    "onednn interface.sizes[log_softmax/float32]",
    "onednn interface.sizes[log_softmax/bfloat16]",
    // bfloat16 log-softmax rounds the sum to bfloat16 before the log: 2.5-11 ulp
    // at n = 2, 75-248 ulp on longer rows.
    "torch differential.ulp[log_softmax/bfloat16]",
    "torch interface.sizes[log_softmax/bfloat16]",
    "torch special.values[log_softmax/bfloat16]",
};
// Errors random cases find on some seeds only (the same defect as above on
// another property: NaN dropped under a permutation of a row with NaN).
const std::set<std::string> kSometimes = {
    "onednn metamorphic.permutation[softmax/float32]",
    "onednn metamorphic.permutation[softmax/bfloat16]",
};

// Whether a listed defect's peer runs its element type on this CPU (oneDNN
// has no bfloat16 softmax without AVX-512: those defects cannot show here).
bool runs_here(const std::string& defect) {
  const std::size_t slash = defect.rfind('/');
  const std::string peer = defect.substr(0, defect.find(' '));
  const std::string dtype = defect.substr(slash + 1, defect.size() - slash - 2);
  return sa::calibration::peer_has(peer, dtype);
}

std::string key(const std::string& peer, const sa::Verdict& v) {
  return peer + " " + v.property + "[" + v.op + "/" + v.dtype + "]";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::uint64_t> seeds;
  int cases = 100;
  bool expect = false, undeclared = false;
  std::string expect_isa;
  std::vector<std::string> only;  // --conventions a,b: declare exactly these for every peer
  bool override_conventions = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seed") && i + 1 < argc)
      seeds.push_back(std::strtoull(argv[++i], nullptr, 10));
    else if (!std::strcmp(argv[i], "--cases") && i + 1 < argc)
      cases = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--expect"))
      expect = true;
    else if (!std::strcmp(argv[i], "--undeclared"))
      undeclared = true;
    else if (!std::strcmp(argv[i], "--expect-isa") && i + 1 < argc)
      expect_isa = argv[++i];
    else if (!std::strcmp(argv[i], "--conventions") && i + 1 < argc) {
      override_conventions = true;
      std::string list = argv[++i];
      for (std::size_t a = 0; a <= list.size();) {
        const std::size_t b = std::min(list.find(',', a), list.size());
        if (b > a) only.push_back(list.substr(a, b - a));
        a = b + 1;
      }
    } else {
      std::fprintf(stderr,
                   "peer_audit: unknown argument '%s'; expected --seed S, --cases N, --expect, "
                   "--undeclared, --conventions a,b, --expect-isa avx2\n",
                   argv[i]);
      return 2;
    }
  }
  if (seeds.empty()) seeds = {1};
  if (cases < 1) {
    std::fprintf(stderr, "peer_audit: --cases must be >= 1\n");
    return 2;
  }
  for (const auto& line : sa::calibration::peer_platform()) std::printf("# %s\n", line.c_str());
  for (const auto& g : sa::calibration::peer_gaps())
    std::printf("# %s %s %s: not run here: %s\n", g.peer.c_str(), g.dtype.c_str(), g.ops.c_str(),
                g.why.c_str());
  if (!expect_isa.empty())
    if (const std::string above = sa::calibration::isa_above(expect_isa); !above.empty()) {
      std::fprintf(stderr, "peer_audit: --expect-isa %s: %s\n", expect_isa.c_str(), above.c_str());
      return 2;
    }
  std::map<std::uint64_t, std::set<std::string>> failures;
  std::set<std::string> present;
  for (const sa_kernel* p : sa::calibration::peer_kernels()) {
    const sa::Kernel k(p, "tests/calibration/peers.cpp");
    present.insert(k.name());
    for (std::uint64_t seed : seeds) {
      sa::props::SuiteConfig c;
      c.ops = {sa::Op::softmax, sa::Op::log_softmax};
      c.cases = cases;
      c.seed = seed;
      c.temperature = 1.0;
      c.temperature_only = true;
      if (override_conventions)
        c.conventions = only;
      else if (!undeclared)
        c.conventions = kConventions.at(k.name());
      int pass = 0, fail = 0, other = 0;
      for (const auto& v : sa::props::run_suite(k, c)) {
        if (v.outcome == sa::Outcome::pass) {
          ++pass;
          continue;
        }
        (v.outcome == sa::Outcome::fail ? fail : other)++;
        if (v.outcome == sa::Outcome::fail) failures[seed].insert(key(k.name(), v));
        std::printf("%s seed %llu: %s %s: measured %.6g, bound %.6g; %s; %s\n", k.name().c_str(),
                    static_cast<unsigned long long>(seed), key(k.name(), v).c_str(),
                    sa::name_of(v.outcome), v.measured, v.bound, v.note.c_str(),
                    v.counterexample.substr(0, 400).c_str());
      }
      std::printf("== %s (conventions: %s) seed %llu: %d pass, %d fail, %d other\n",
                  k.name().c_str(),
                  c.conventions.empty() ? "none" : sa::props::conventions_of(k, c).names().c_str(),
                  static_cast<unsigned long long>(seed), pass, fail, other);
    }
  }
  if (!expect || undeclared || override_conventions) return 0;
  bool ok = true;
  for (const auto& [seed, f] : failures) {
    for (const auto& x : f)
      if (!kDefects.count(x) && !kSometimes.count(x)) {
        std::printf("FAIL: seed %llu: %s fails and is not a listed defect\n",
                    static_cast<unsigned long long>(seed), x.c_str());
        ok = false;
      }
    for (const auto& x : kDefects)
      if (!f.count(x) && present.count(x.substr(0, x.find(' '))) && runs_here(x)) {
        std::printf("FAIL: seed %llu: the listed defect %s was not found\n",
                    static_cast<unsigned long long>(seed), x.c_str());
        ok = false;
      }
  }
  return ok ? 0 : 1;
}
