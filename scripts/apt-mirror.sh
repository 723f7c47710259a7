#!/usr/bin/env bash
# The machine's configured Debian mirror, read from its apt configuration, so
# that the fresh-machine and package checks build their Debian root from the
# same mirror the machine itself uses (a local or company mirror included) and
# no mirror host is written into this repository.
#
# Reads /etc/apt/sources.list and /etc/apt/sources.list.d/*.list (one-line
# "deb [options] URI SUITE COMPONENT..." entries) and
# /etc/apt/sources.list.d/*.sources (deb822 stanzas: Types, URIs, Suites,
# Enabled), in apt's order. A Debian entry is one whose suite is a Debian
# codename or suite name (bookworm, trixie, stable, ... with -updates,
# -backports or -security). Prints
#   main URI        the first Debian entry's URI whose suite is not a security one
#   security URI    the first one whose suite ends in -security (or /updates),
#                   when there is one
# Exit 0, or 2 with a one-line error when the configuration names no Debian mirror.
#   scripts/apt-mirror.sh [--root DIR]   (DIR/etc/apt instead of /etc/apt: tests)
set -euo pipefail

root=""
while [ $# -gt 0 ]; do
  case "$1" in
    --root) root=${2:?--root needs a directory}; shift 2 ;;
    *) echo "apt-mirror: unknown argument '$1' (expected --root DIR)" >&2; exit 2 ;;
  esac
done

dir="$root/etc/apt"
files=()
[ -f "$dir/sources.list" ] && files+=("$dir/sources.list")
if [ -d "$dir/sources.list.d" ]; then
  while IFS= read -r -d '' f; do files+=("$f"); done < <(
    find "$dir/sources.list.d" -maxdepth 1 -type f \( -name '*.list' -o -name '*.sources' \) -print0 |
      sort -z)
fi

found=$(
  for f in "${files[@]}"; do
    case "$f" in
      *.sources) awk -v RS= '
          {
            types = ""; uris = ""; suites = ""; enabled = "yes"
            n = split($0, lines, "\n")
            for (i = 1; i <= n; i++) {
              line = lines[i]
              if (line ~ /^[[:space:]]*#/) continue
              if (match(line, /^[A-Za-z-]+:/)) {
                key = tolower(substr(line, 1, RLENGTH - 1)); val = substr(line, RLENGTH + 1)
                gsub(/^[[:space:]]+|[[:space:]]+$/, "", val)
                if (key == "types") types = val
                else if (key == "uris") uris = val
                else if (key == "suites") suites = val
                else if (key == "enabled") enabled = tolower(val)
              }
            }
            if (enabled == "no" || (" " types " ") !~ / deb /) next
            split(uris, u, /[[:space:]]+/)
            m = split(suites, s, /[[:space:]]+/)
            for (j = 1; j <= m; j++) print u[1], s[j]
          }' "$f" ;;
      *) awk '
          { sub(/#.*/, "") }
          $1 == "deb" {
            i = 2
            if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
            if (i + 1 <= NF) print $i, $(i + 1)
          }' "$f" ;;
    esac
  done
)

debian_suite='^(buster|bullseye|bookworm|trixie|forky|duke|sid|oldoldstable|oldstable|stable|testing|unstable)(-updates|-backports|-proposed-updates|-security|/updates)?$'
main=""
security=""
while read -r uri suite; do
  [ -n "$uri" ] || continue
  [[ $suite =~ $debian_suite ]] || continue
  if [[ $suite == *-security || $suite == */updates ]]; then
    [ -n "$security" ] || security=$uri
  else
    [ -n "$main" ] || main=$uri
  fi
done <<<"$found"

if [ -z "$main" ]; then
  echo "apt-mirror: $dir/sources.list and $dir/sources.list.d/*.list|*.sources name no Debian mirror; expected a 'deb' entry for a Debian suite (e.g. bookworm), or give the mirror to the calling script with --mirror URL" >&2
  exit 2
fi
echo "main $main"
[ -z "$security" ] || echo "security $security"
