#!/usr/bin/env bash
# The Debian package on a fresh machine: `cpack -G DEB` in a build folder, then,
# in a minimal Debian 12 root built by mmdebstrap, `apt install ./softmax-audit_*.deb`
# and the gate on a built-in kernel from the installed CLI.
# Exit 0 when the package installs and the CLI runs, 1 when not, 2 on a setup error.
# Needs root and network access to the machine's configured Debian mirror
# (scripts/apt-mirror.sh reads it from apt's sources).
#   scripts/deb-check.sh BUILD_DIR
# CTest runs it under the label `deb` (not in the default run).
set -euo pipefail

build=${1:?usage: scripts/deb-check.sh BUILD_DIR}
say() { echo "deb-check: $*"; }
if [ "$(id -u)" -ne 0 ]; then echo "deb-check: must run as root (chroot and mounts)" >&2; exit 2; fi
if ! command -v mmdebstrap >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends mmdebstrap
fi

work=$(mktemp -d /var/tmp/sa-deb-check.XXXXXX)
root=$work/root
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -R "${mounted[i]}" 2>/dev/null || umount -lR "${mounted[i]}" || true; done
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

conf=$("$(dirname "${BASH_SOURCE[0]}")/apt-mirror.sh") || exit 2
mirror=$(awk '$1 == "main" { print $2 }' <<<"$conf")
security=$(awk '$1 == "security" { print $2 }' <<<"$conf")
sources=("deb $mirror bookworm main")
if [ -n "$security" ]; then sources+=("deb $security bookworm-security main"); fi

(cd "$build" && cpack -G DEB -B "$work/pkg" >/dev/null)
deb=$(ls "$work"/pkg/softmax-audit_*.deb)
say "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"

mmdebstrap --variant=minbase --quiet bookworm "$root" "${sources[@]}"
cp "$deb" "$root/root/"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount -t proc proc "$root/proc"; mounted+=("$root/proc")
mount --rbind /dev "$root/dev"; mount --make-rslave "$root/dev"; mounted+=("$root/dev")

in_root() {
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 chroot "$root" /bin/bash -c "cd /root && $1"
}
in_root "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ./$(basename "$deb") >/dev/null"
say "installed: $(in_root 'dpkg-query -W softmax-audit')"
in_root "test -f /usr/share/doc/softmax-audit/copyright"
in_root "softmax-audit bounds --spread 5.69 --temperature 1 --dtype bfloat16 | tail -3"
in_root "softmax-audit check --builtin naive --cases 5 --json gate.json >/dev/null && test -s gate.json"
# A package built with nvcc has the CUDA kernel (its runtime linked statically):
# with no driver in the root it must refuse with the one-line reason, exit 2,
# not fail to load (exit 127 was libcudart.so missing, before issue 14's fix).
if in_root "softmax-audit check --help" | grep -q "naive, cuda"; then
  set +e
  msg=$(in_root "softmax-audit check --builtin cuda --cases 1 2>&1 >/dev/null"); rc=$?
  set -e
  say "cuda kernel without a driver: exit $rc: $msg"
  # The reason must come from the CUDA runtime linked into the CLI, not from a
  # search for a shared libcudart.so (which a machine without CUDA lacks).
  if [ "$rc" -ne 2 ] || ! grep -q "no CUDA device is usable here" <<<"$msg" ||
     grep -q "libcudart.so" <<<"$msg"; then
    say "FAIL: expected exit 2 and the linked runtime's no-device reason"; exit 1
  fi
fi
say "the package installs and its CLI runs the gate"
