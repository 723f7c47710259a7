#!/bin/sh
# The commit a JSON result (and so an audit report) names is the commit the
# binary was built from, not the one of an earlier configure:
#   provenance_commit_test.sh CLI SOURCE_DIR WORKDIR
# Skipped (77) outside a git checkout.
set -u
cli=$1 src=$2 work=$3
head=$(git -C "$src" rev-parse HEAD 2>/dev/null) || { echo "not a git checkout: skipped"; exit 77; }
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
"$cli" check --builtin naive --property special.values --dtype float32 --json gate.json -q \
  > check.out 2>&1 || { cat check.out; echo "FAIL: check exited $?"; exit 1; }
got=$(sed -n 's/.*"git_commit": "\([0-9a-f]*\)\(-dirty\)\{0,1\}".*/\1/p' gate.json | head -n 1)
[ "$got" = "$head" ] || { echo "FAIL: the JSON names commit '$got', the sources are at $head (rebuild?)"; exit 1; }
echo "provenance names $got, the checked-out commit"
