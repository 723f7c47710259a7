// The suite's property-search loop: RapidCheck generators (rc::Gen) drive the
// cases, and shrinking walks rc::Shrinkable::shrinks() greedily (take the first
// smaller case that still fails, repeat), outside any test framework, so that
// run_suite works from a plain program. A property evaluates a case into
// several "slots" (e.g. one per tolerance rule) so one reference evaluation
// serves every rule; each failing slot is shrunk on its own.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "kernels/call_log.hpp"
#include "kernels/kernel.hpp"

namespace sa::props::detail {

// One slot of one case: pass when ratio <= 1 (measured <= bound).
struct Check {
  bool applicable = false;
  double ratio = 0;  // measured / bound (NaN/inf: fails)
  double measured = NAN, bound = NAN;
  std::string where;  // which element, got vs exact
  std::string unit;   // of measured and bound when it is not the property's usual one
  // When it fails: the convention the kernel did not declare under which it
  // would hold (conventions.hpp), else empty.
  std::string convention;

  bool fails() const { return applicable && !(ratio <= 1.0); }
  // A failure no undeclared convention explains: an error, not a policy difference.
  bool fails_outright() const { return fails() && convention.empty(); }
  // Keeps the worse of two checks: a failing one beats any passing one, and an
  // outright failure beats one a convention would explain.
  void worst(const Check& c) {
    if (!c.applicable) return;
    if (!applicable || (c.fails() && !fails()) ||
        (c.fails_outright() && fails() && !fails_outright()) ||
        (c.fails() == fails() && c.fails_outright() == fails_outright() && c.ratio > ratio))
      *this = c;
  }
};

inline Check make_check(double measured, double bound, std::string where = {}) {
  Check c;
  c.applicable = true;
  c.measured = measured;
  c.bound = bound;
  if (std::isnan(measured) || std::isnan(bound))
    c.ratio = INFINITY;
  else if (measured <= bound)
    c.ratio = bound > 0 ? measured / bound : 0.0;
  else
    c.ratio = bound > 0 ? measured / bound : INFINITY;
  c.where = std::move(where);
  return c;
}

template <class P>
struct SlotResult {
  Check worst;                   // worst passing (or the failing) check over all cases
  std::optional<P> worst_input;  // the case that gave `worst`
  std::optional<P> failing;      // shrunk failing input
  Check failing_check;
  int failing_case = -1;
  int shrink_steps = 0;
  int cases_applicable = 0;
  // Cases outside the kernel's declared capabilities (sa::NotApplicable, e.g.
  // n > max_n): never run, never errors, never passes; the first reason.
  int cases_not_applicable = 0;
  std::string not_applicable;
  std::string error;  // a kernel error (exception text) on some case
  // The kernel calls of the last evaluation of `failing` (kernels/call_log.hpp):
  // what a case file replays.
  std::vector<call_log::Call> calls;
  // Wall seconds of the whole search (cases, references, shrinking), split
  // evenly among its slots: the slots share every case, so each verdict the
  // search decides carries an equal part of its time (Verdict::seconds).
  double seconds = 0;
  double kernel_seconds = 0;  // of those, inside kernel calls (split the same way)
};

struct SearchOptions {
  int cases = 100;
  std::uint64_t seed = 1;
  int shrink_evaluations = 120;  // budget of property evaluations while shrinking
  double shrink_seconds = 1.5;
  // Seconds of shrinking left, shared by every search of one run_suite (null:
  // unlimited). When it is spent, counterexamples are reported as found.
  double* shrink_pool = nullptr;
  std::function<void()> on_cases_done;  // after the random cases, before shrinking
  std::function<void(int)> on_case;     // before each random case
};

// Greedy shrinking of a failing case.
template <class P, class Fails>
rc::Shrinkable<P> shrink_case(rc::Shrinkable<P> s, Fails fails, int& budget, int& steps,
                              std::chrono::steady_clock::time_point deadline) {
  bool progress = true;
  while (progress && budget > 0 && std::chrono::steady_clock::now() < deadline) {
    progress = false;
    auto seq = s.shrinks();
    while (auto c = seq.next()) {
      if (--budget < 0 || std::chrono::steady_clock::now() >= deadline) break;
      if (fails(c->value())) {
        s = *c;
        ++steps;
        progress = true;
        break;
      }
    }
  }
  return s;
}

// Runs the `fixed` cases (edge inputs every run checks, whatever the seed;
// reported as case -1, -2, ...), then `cases` cases of `gen`, through eval
// (P -> vector<Check>, `slots` long), then shrinks each failing slot with
// RapidCheck's shrinks and then with `extra_shrink` (P, fails-predicate,
// budget) -> P, which may be empty. Exceptions thrown by eval are caught per
// case and reported in `error`.
template <class P>
std::vector<SlotResult<P>> search(
    const rc::Gen<P>& gen, std::size_t slots, const SearchOptions& o,
    const std::function<std::vector<Check>(const P&)>& eval,
    const std::function<P(const P&, const std::function<bool(const P&)>&, int&)>& extra_shrink = {},
    const std::vector<P>& fixed = {}) {
  const auto started = std::chrono::steady_clock::now();
  const double kernel_started = kernel_call_seconds();
  std::vector<SlotResult<P>> out(slots);
  std::vector<std::optional<rc::Shrinkable<P>>> first_fail(slots);
  // Evaluates one case; false once every slot has failed outright (no need to go on).
  auto run_case = [&](const rc::Shrinkable<P>& s, int index) {
    std::vector<Check> cs;
    try {
      cs = eval(s.value());
    } catch (const NotApplicable& e) {
      for (auto& sr : out) {
        ++sr.cases_not_applicable;
        if (sr.not_applicable.empty()) sr.not_applicable = e.what();
      }
      return true;
    } catch (const std::exception& e) {
      for (auto& sr : out)
        if (sr.error.empty()) sr.error = e.what();
      return true;
    }
    for (std::size_t k = 0; k < slots && k < cs.size(); ++k) {
      if (!cs[k].applicable) continue;
      ++out[k].cases_applicable;
      // The first failing case, unless a later one fails outright where the
      // first one's failure a convention would explain.
      if (cs[k].fails() &&
          (!first_fail[k] || (cs[k].fails_outright() && !out[k].failing_check.fails_outright()))) {
        first_fail[k] = s;
        out[k].failing_case = index;
        out[k].failing_check = cs[k];
      }
      const Check before = out[k].worst;
      out[k].worst.worst(cs[k]);
      if (!before.applicable || before.ratio != out[k].worst.ratio ||
          before.where != out[k].worst.where)
        out[k].worst_input = s.value();
    }
    for (std::size_t k = 0; k < slots; ++k)
      if (!first_fail[k] || !out[k].failing_check.fails_outright()) return true;
    return false;
  };
  bool go_on = true;
  for (std::size_t j = 0; j < fixed.size() && go_on; ++j)
    go_on = run_case(rc::shrinkable::just(fixed[j]), -1 - static_cast<int>(j));
  rc::Random base(o.seed);
  for (int i = 0; i < o.cases && go_on; ++i) {
    const rc::Random r = base.split();
    const int size = std::max(
        5, std::min(rc::kNominalSize, (i + 1) * rc::kNominalSize / std::max(1, o.cases / 2)));
    rc::Shrinkable<P> s = gen(r, size);
    if (o.on_case) o.on_case(i);
    go_on = run_case(s, i);
  }
  if (o.on_cases_done) o.on_cases_done();
  const auto shrink_start = std::chrono::steady_clock::now();
  const auto pool_deadline =
      o.shrink_pool
          ? shrink_start +
                std::chrono::milliseconds(static_cast<long>(std::max(0.0, *o.shrink_pool) * 1000))
          : std::chrono::steady_clock::time_point::max();
  for (std::size_t k = 0; k < slots; ++k) {
    if (!first_fail[k]) continue;
    // An outright failure shrinks to outright failures only.
    const bool outright = out[k].failing_check.fails_outright();
    auto fails = [&](const P& p) {
      try {
        auto cs = eval(p);
        return k < cs.size() && (outright ? cs[k].fails_outright() : cs[k].fails());
      } catch (...) {
        return false;
      }
    };
    int budget = std::chrono::steady_clock::now() < pool_deadline ? o.shrink_evaluations : 0;
    const auto deadline = std::min(
        pool_deadline, std::chrono::steady_clock::now() +
                           std::chrono::milliseconds(static_cast<long>(o.shrink_seconds * 1000)));
    rc::Shrinkable<P> s = shrink_case(*first_fail[k], fails, budget, out[k].shrink_steps, deadline);
    P p = s.value();
    if (extra_shrink && budget > 0) p = extra_shrink(p, fails, budget);
    out[k].failing = p;
    call_log::Capture capture;
    try {
      auto cs = eval(p);
      if (k < cs.size() && cs[k].fails()) out[k].failing_check = cs[k];
    } catch (...) {
    }
    out[k].calls = capture.take();
  }
  if (o.shrink_pool)
    *o.shrink_pool -=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - shrink_start).count();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const double kernel_seconds = kernel_call_seconds() - kernel_started;
  for (auto& sr : out) {
    sr.seconds = seconds / static_cast<double>(std::max<std::size_t>(slots, 1));
    sr.kernel_seconds = kernel_seconds / static_cast<double>(std::max<std::size_t>(slots, 1));
  }
  return out;
}

}  // namespace sa::props::detail
