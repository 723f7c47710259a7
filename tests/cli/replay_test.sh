#!/bin/sh
# Replayable counterexamples (issue 35, item 2), end to end:
#   replay_test.sh CLI BROKEN_LIB GOOD_LIB WORKDIR BAD_KERNELS_LIB
# BROKEN_LIB returns lse = -inf for one-key attention (tests/cli/kernels/
# lse_one_key_kernel.c), GOOD_LIB is the example kernel it wraps. `check`
# must write the failing attention_v2 counterexample as a case file named in
# its JSON, with the inputs inline in the text and the infinite error in
# plain words; `replay` must reproduce the recorded numbers (exit 1) on the
# broken kernel and pass (exit 0) on the good one. Then the same for a row
# operation: BAD_KERNELS_LIB's kernel 7 forgets its remainder loop (kernel 6
# is correct), failing differential.ulp, interface.sizes and special.values.
set -u
cli=$1 broken=$2 good=$3 work=$4 bad=$5
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1

"$cli" check --plugin "$broken" --property attention_v2.rounding --dtype float32 --cases 16 \
  --seed 9 --json gate.json --junit gate.xml > check.out 2>&1
rc=$?
[ $rc -eq 1 ] || { cat check.out; fail "check exited $rc, expected 1 (a failing kernel)"; }
case_file=gate.cases/attention_v2.rounding.attention_v2.float32.npz
[ -f "$case_file" ] || { ls -R; cat check.out; fail "no case file $case_file"; }
[ -f gate.cases/attention_v2.rounding.attention_v2.float32.json ] || fail "no .json beside the case file"
grep -q "\"case_file\": \"$case_file\"" gate.json || fail "the JSON verdict does not name its case file"
grep -q "softmax-audit replay $case_file --plugin" check.out || { cat check.out; fail "no replay command printed"; }
# The shrunk case is small: its q, k, v are in the counterexample text.
grep -q ' q=\[' gate.json && grep -q ' k=\[' gate.json && grep -q ' v=\[' gate.json ||
  fail "the counterexample does not show q, k, v inline"
# An infinite error in plain words, never "measured Infinity".
grep -q "got -inf where the exact value is finite" gate.xml || { grep -o 'message="[^"]*"' gate.xml | head; fail "no plain-words infinite error in JUnit"; }
grep -q "measured Infinity" gate.xml check.out && fail "'measured Infinity' is still printed"

# The interface v1 slot's verdicts (op attention, issue 30) get case files
# too: BROKEN_LIB's v1 slot has the same bug, and replay calls that slot.
v1_case=gate.cases/attention_v2.rounding.attention.float32.npz
[ -f "$v1_case" ] || { ls gate.cases; cat check.out; fail "no case file $v1_case for the v1 slot"; }
"$cli" replay "$v1_case" --plugin "$broken" > replay-v1.out 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "STILL FAILS" replay-v1.out && ! grep -q CHANGED replay-v1.out ||
  { cat replay-v1.out; fail "replay of the v1 case on the broken kernel: exit $rc, expected 1 as recorded"; }
grep -q "attention" replay-v1.out || { cat replay-v1.out; fail "replay does not name the v1 op"; }

# A valid case file but no kernel named: one line, exit 2, nothing run.
"$cli" replay "$case_file" > none.out 2> none.err
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l < none.err)" -eq 1 ] && [ ! -s none.out ] &&
  grep -q "give exactly one of --plugin" none.err || { cat none.out none.err; fail "replay without a kernel: exit $rc"; }

# Replay on the broken kernel: still fails, with the recorded numbers.
"$cli" replay "$case_file" --plugin "$broken" > replay-broken.out 2>&1
rc=$?
[ $rc -eq 1 ] || { cat replay-broken.out; fail "replay on the broken kernel exited $rc, expected 1"; }
grep -q "STILL FAILS" replay-broken.out || fail "replay does not say it still fails"
grep -q "lse\[.*got -inf (inf ulp)  recorded -inf (inf ulp)" replay-broken.out ||
  { cat replay-broken.out; fail "replay does not show lse got -inf as recorded"; }
grep -q "CHANGED" replay-broken.out && { cat replay-broken.out; fail "replay on the same kernel gave other numbers"; }
grep -q " 0 differ from the recorded got" replay-broken.out || fail "no 'differ' count"

# Replay on the example kernel it wraps: the same call now passes.
"$cli" replay "$case_file" --plugin "$good" > replay-good.out 2>&1
rc=$?
[ $rc -eq 0 ] || { cat replay-good.out; fail "replay on the good kernel exited $rc, expected 0"; }
grep -q "PASSES now" replay-good.out || fail "replay does not say it passes now"
grep -q "CHANGED" replay-good.out || fail "the good kernel's lse should differ from the recorded -inf"

# A later run with the same --json removes the earlier run's case files (a
# passing one leaves none), so none is mistaken for its own.
mkdir -p again/gate.cases && cp "$case_file" again/gate.cases/ && : > again/gate.cases/notes.json
"$cli" check --plugin "$good" --property attention_v2.rounding --dtype float32 --cases 16 \
  --seed 3 --json again/gate.json -q > again.out 2>&1 || { cat again.out; fail "the example kernel should pass"; }
[ -e again/gate.cases/attention_v2.rounding.attention_v2.float32.npz ] &&
  fail "an earlier run's case file was left beside --json"
[ -e again/gate.cases/notes.json ] || fail "a file not named after a property was removed"

"$cli" check --plugin "$bad" --kernel-index 7 --property differential.ulp \
  --property interface.sizes --property special.values --dtype float32 --cases 20 --seed 5 \
  --cases-dir rows -q > rows.out 2>&1
rc=$?
[ $rc -eq 1 ] || { cat rows.out; fail "check of the remainder kernel exited $rc, expected 1"; }
for p in differential.ulp interface.sizes special.values; do
  [ -f "rows/$p.softmax.float32.npz" ] || { ls rows; fail "no case file for $p"; }
done
for p in differential.ulp interface.sizes special.values; do
  "$cli" replay "rows/$p.softmax.float32.npz" --plugin "$bad" --kernel-index 7 > r.out 2>&1
  rc=$?
  [ $rc -eq 1 ] && ! grep -q CHANGED r.out || { cat r.out; fail "replay of $p on the remainder kernel: exit $rc"; }
  "$cli" replay "rows/$p.softmax.float32.npz" --plugin "$bad" --kernel-index 6 > r.out 2>&1
  rc=$?
  [ $rc -eq 0 ] || { cat r.out; fail "replay of $p on the correct kernel 6: exit $rc, expected 0"; }
done
echo "replay round trip: ok"
