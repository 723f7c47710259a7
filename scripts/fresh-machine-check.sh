#!/usr/bin/env bash
# The fresh-machine proof: README's "two commands" succeed on a Debian 12 machine
# that has nothing but a clone of this repository.
#
# Builds a minimal Debian 12 (bookworm) root with mmdebstrap from the machine's
# configured Debian mirror (scripts/apt-mirror.sh reads it from apt's sources),
# puts a `git clone` of this checkout into it (committed files only, as a user's
# clone would be), and runs the two commands of README.md's "The two commands"
# section there, verbatim (read from README.md, so they cannot drift), as root,
# one after the other in the same clone, printing how long each took.
# Exit 0 when both succeed, 1 when either fails, 2 on a usage or setup error.
#
# Needs root, network access to that mirror and about 8 GB of disk.
# Installs mmdebstrap with apt-get when it is missing. --mirror URL (and
# --security URL) replace the configured mirror (and security mirror).
#   scripts/fresh-machine-check.sh [--workdir DIR] [--keep] [--mirror URL] [--security URL]
# CTest runs it under the label `fresh-machine` (never in the default run):
#   ctest --test-dir build -L fresh-machine --output-on-failure
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
workdir=""
keep=0
mirror=""
security=""
while [ $# -gt 0 ]; do
  case "$1" in
    --workdir) workdir=${2:?--workdir needs a directory}; shift 2 ;;
    --keep) keep=1; shift ;;
    --mirror) mirror=${2:?--mirror needs a URL}; shift 2 ;;
    --security) security=${2:?--security needs a URL}; shift 2 ;;
    -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fresh-machine-check: unknown argument '$1' (expected --workdir DIR, --keep, --mirror URL, --security URL)" >&2; exit 2 ;;
  esac
done

say() { echo "fresh-machine-check: $*"; }
# The machine's configured Debian mirror, unless given.
if [ -z "$mirror" ]; then
  conf=$("$repo/scripts/apt-mirror.sh") || exit 2
  mirror=$(awk '$1 == "main" { print $2 }' <<<"$conf")
  [ -n "$security" ] || security=$(awk '$1 == "security" { print $2 }' <<<"$conf")
fi
sources=("deb $mirror bookworm main" "deb $mirror bookworm-updates main")
if [ -n "$security" ]; then sources+=("deb $security bookworm-security main"); fi
if [ "$(id -u)" -ne 0 ]; then
  echo "fresh-machine-check: must run as root (chroot and mounts); run it with sudo" >&2; exit 2
fi

# The two commands, exactly as README.md shows them.
mapfile -t commands < <(awk '
  /^## / { in_section = ($0 ~ /^## The two commands/); next }
  in_section && /^```/ { in_block = !in_block; next }
  in_section && in_block && !/^[[:space:]]*(#|$)/ { print }
' "$repo/README.md")
if [ ${#commands[@]} -ne 2 ]; then
  echo "fresh-machine-check: README.md's 'The two commands' section must hold exactly 2 commands in its sh block, found ${#commands[@]}" >&2
  exit 2
fi

if ! command -v mmdebstrap >/dev/null 2>&1; then
  say "installing mmdebstrap"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends mmdebstrap
fi

if [ -z "$workdir" ]; then workdir=$(mktemp -d /var/tmp/sa-fresh-machine.XXXXXX); fi
mkdir -p "$workdir"
root="$workdir/root"
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -R "${mounted[i]}" 2>/dev/null || umount -lR "${mounted[i]}" || true; done
  if [ "$keep" -eq 0 ]; then rm -rf --one-file-system "$workdir"; else say "kept $workdir"; fi
}
trap cleanup EXIT

t0=$(date +%s)
say "building a minimal Debian 12 root in $root from $mirror${security:+ and $security}"
mmdebstrap --variant=minbase --quiet bookworm "$root" "${sources[@]}"
say "root built in $(( $(date +%s) - t0 )) s"

# The clone a user would have: committed files of this checkout's HEAD only.
git clone --quiet "$repo" "$root/root/softmax-audit"
commit=$(git -C "$root/root/softmax-audit" rev-parse --short HEAD)
say "cloned $commit into /root/softmax-audit"
cp /etc/resolv.conf "$root/etc/resolv.conf"
for m in proc sys dev; do
  case $m in
    proc) mount -t proc proc "$root/proc" ;;
    sys) mount -t sysfs sysfs "$root/sys" ;;
    dev) mount --rbind /dev "$root/dev"; mount --make-rslave "$root/dev" ;;
  esac
  mounted+=("$root/$m")
done

status=0
results=()
for i in 0 1; do
  cmd=${commands[i]}
  say "command $((i + 1)): $cmd"
  start=$(date +%s)
  rc=0
  env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 TERM=dumb \
    chroot "$root" /bin/bash -c "cd /root/softmax-audit && $cmd" || rc=$?
  secs=$(( $(date +%s) - start ))
  verdict=$([ $rc -eq 0 ] && echo passed || echo "FAILED (exit $rc)")
  results+=("command $((i + 1)) $verdict in $((secs / 60)) min $((secs % 60)) s")
  say "${results[-1]}"
  if [ $rc -ne 0 ]; then status=1; break; fi
done

say "summary ($(date -u +%Y-%m-%d), commit $commit, $(nproc) cores):"
for r in "${results[@]}"; do say "  $r"; done
exit $status
