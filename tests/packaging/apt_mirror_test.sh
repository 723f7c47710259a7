#!/usr/bin/env bash
# scripts/apt-mirror.sh takes the mirror from the machine's apt configuration:
# one-line sources.list entries, deb822 .sources stanzas (a disabled stanza and
# a non-Debian repository are passed over), and a one-line error with exit 2
# when no Debian mirror is configured.
#   tests/packaging/apt_mirror_test.sh SOURCE_DIR
set -euo pipefail
src=${1:?usage: apt_mirror_test.sh SOURCE_DIR}
tool="$src/scripts/apt-mirror.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "apt_mirror_test: FAIL: $*" >&2; exit 1; }

# One-line format, options in brackets, deb-src and comments passed over.
r1="$work/one-line"; mkdir -p "$r1/etc/apt/sources.list.d"
cat >"$r1/etc/apt/sources.list" <<'L'
# deb http://commented.invalid/debian bookworm main
deb-src http://src-only.invalid/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/x.gpg] http://local-mirror.invalid/debian bookworm main
deb http://local-mirror.invalid/debian-security bookworm-security main
L
out=$("$tool" --root "$r1")
[ "$out" = $'main http://local-mirror.invalid/debian\nsecurity http://local-mirror.invalid/debian-security' ] ||
  fail "one-line sources.list: got '$out'"

# deb822: a non-Debian repository first (in apt's file order), a disabled
# stanza, then the Debian ones; *.disabled files are not read.
r2="$work/deb822"; mkdir -p "$r2/etc/apt/sources.list.d"
cat >"$r2/etc/apt/sources.list.d/a-vendor.sources" <<'L'
Types: deb
URIs: https://vendor.invalid/node
Suites: nodistro
Components: main
L
cat >"$r2/etc/apt/sources.list.d/b-off.list.disabled" <<'L'
deb http://disabled-file.invalid/debian bookworm main
L
cat >"$r2/etc/apt/sources.list.d/debian.sources" <<'L'
Types: deb
URIs: http://switched-off.invalid/debian
Suites: bookworm
Components: main
Enabled: no

Types: deb deb-src
# a comment inside a stanza
URIs: http://corp-mirror.invalid/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://corp-mirror.invalid/debian-security
Suites: bookworm-security
Components: main
L
out=$("$tool" --root "$r2")
[ "$out" = $'main http://corp-mirror.invalid/debian\nsecurity http://corp-mirror.invalid/debian-security' ] ||
  fail "deb822 sources: got '$out'"

# No Debian mirror at all: one line naming the files, exit 2.
r3="$work/none"; mkdir -p "$r3/etc/apt/sources.list.d"
cp "$r2/etc/apt/sources.list.d/a-vendor.sources" "$r3/etc/apt/sources.list.d/"
set +e
err=$("$tool" --root "$r3" 2>&1 >/dev/null); rc=$?
set -e
[ "$rc" -eq 2 ] || fail "no Debian mirror: exit $rc, expected 2"
[ "$(wc -l <<<"$err")" -eq 1 ] && grep -q "name no Debian mirror" <<<"$err" ||
  fail "no Debian mirror: expected one line naming the problem, got '$err'"
echo "apt_mirror_test: ok"
