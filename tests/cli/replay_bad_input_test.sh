#!/bin/sh
# `softmax-audit replay` and `check --cases-dir` on bad input (issue 35): one
# line naming the input and what was expected, exit 2, before any work.
#   replay_bad_input_test.sh CLI GOOD_LIB WORKDIR
set -u
cli=$1 good=$2 work=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
expect2() {  # expect2 WHAT PATTERN CMD...
  what=$1 pattern=$2
  shift 2
  "$@" > out.txt 2> err.txt
  rc=$?
  [ $rc -eq 2 ] || { cat out.txt err.txt; fail "$what: exit $rc, expected 2"; }
  [ "$(wc -l < err.txt)" -eq 1 ] || { cat err.txt; fail "$what: expected one line"; }
  grep -q -- "$pattern" err.txt || { cat err.txt; fail "$what: no '$pattern'"; }
  [ -s out.txt ] && { cat out.txt; fail "$what: work was done (stdout not empty)"; }
  return 0
}
expect2 "missing case file" "case file nope.npz: cannot be read; expected a .npz" \
  "$cli" replay nope.npz --plugin "$good"
printf 'not a zip' > junk.npz
expect2 "not a zip" "case file junk.npz: not a zip archive" "$cli" replay junk.npz --plugin "$good"
# A zip without case.json (an empty archive: just the end record).
printf 'PK\005\006\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000\000' > empty.npz
expect2 "no case.json" "has no case.json member" "$cli" replay empty.npz --plugin "$good"
: > plain-file
expect2 "cases dir is a file" "--cases-dir plain-file: exists and is not a directory" \
  "$cli" check --plugin "$good" --cases-dir plain-file --cases 1
expect2 "cases dir -" "--cases-dir -: expected a directory" \
  "$cli" check --plugin "$good" --cases-dir - --cases 1
expect2 "cases dir holds the json" "--json d/special.values.x.json: lies in the cases directory d" \
  "$cli" check --plugin "$good" --cases-dir d --json d/special.values.x.json --cases 1
expect2 "bad tolerance" "--tolerance-ulps -1: expected a finite number >= 0" \
  "$cli" replay junk.npz --plugin "$good" --tolerance-ulps -1
echo "bad input: ok"
