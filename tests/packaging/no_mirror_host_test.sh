#!/usr/bin/env bash
# No package-mirror or package-registry host is written into the repository:
# the scripts take the machine's configured Debian mirror from its apt
# configuration (scripts/apt-mirror.sh). Searches every tracked file (every
# file but build folders when the source is not a git checkout).
#   tests/packaging/no_mirror_host_test.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: no_mirror_host_test.sh SOURCE_DIR}
# Written with [.] so that this file does not match itself.
hosts='(deb|ftp|security|snapshot|archive|ftp[.][a-z]+)[.]debian[.]org|archive[.]ubuntu[.]com|security[.]ubuntu[.]com|pypi[.]org|files[.]pythonhosted[.]org|registry[.]npmjs[.]org|crates[.]io'
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  hits=$(cd "$src" && git ls-files -z | xargs -0 grep -nIE "$hosts" -- 2>/dev/null || true)
else
  hits=$(grep -rnIE "$hosts" --exclude-dir=.git --exclude-dir='build*' "$src" || true)
fi
if [ -n "$hits" ]; then
  echo "no_mirror_host_test: FAIL: package-mirror host names in the repository (expected none; use the machine's configured mirror):" >&2
  echo "$hits" >&2
  exit 1
fi
echo "no_mirror_host_test: ok"
