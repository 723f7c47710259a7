#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: the built-in CUDA kernel runs in a kernel
# host, never in the judge or the gate (docs/isolation.md, "CUDA-memory
# kernels"). Runs `check --builtin cuda` through the gate and, while it runs,
# looks at every process under the gate five times a second:
#   - a process with the CUDA driver mapped (libcuda.so or /dev/nvidia* in
#     /proc/PID/maps) must not be the gate, nor the parent of a kernel host
#     (a judge); a kernel host is recognised by its seccomp filter: one more
#     than its parent's (Seccomp_filters in /proc/PID/status);
#   - at least one kernel host must be seen with the driver mapped (else the
#     sampling proved nothing: a judge's and a host's maps are readable only
#     by root, since both are not dumpable);
#   - the run must pass, with the checks the judge's guard makes on hosted
#     calls reported as passing (gate.in_bounds, gate.fp_environment).
#
#   scripts/gpu-hosted-check.sh CLI OUT_JSON [more check options...]
#
# Exit status: 0 when all of that holds, 1 otherwise, 2 for a usage error.
# scripts/gpu-check.sh runs it as its step check-hosted.
#
# For a dry run without a GPU: GPU_HOSTED_KERNEL (default "--builtin cuda")
# names another kernel and GPU_HOSTED_MAPS (default 'libcuda\.so|/dev/nvidia')
# what marks a process as holding the runtime, e.g. with the gate tests' fake
#   SA_CUDA_RUNTIME=build/tests/gate/fake-cuda/libcudart.so.12 \
#   GPU_HOSTED_KERNEL="--plugin build/tests/gate/hostile/libhostile_cuda_ok.so" \
#   GPU_HOSTED_MAPS='fake-cuda/libcudart' scripts/gpu-hosted-check.sh build/cli/softmax-audit x.json
set -u
if [ $# -lt 2 ]; then
  echo "usage: $0 CLI OUT_JSON [more check options...]" >&2
  exit 2
fi
cli=$1
json=$2
shift 2

# shellcheck disable=SC2086
"$cli" check ${GPU_HOSTED_KERNEL:---builtin cuda} --seed 3 --cases 20 --json "$json" "$@" &
gate=$!

filters() { awk '/^Seccomp_filters:/ {print $2}' "/proc/$1/status" 2> /dev/null; }
children() { cat /proc/"$1"/task/*/children 2> /dev/null; }
descendants() {
  local c
  for c in $(children "$1"); do
    echo "$c"
    descendants "$c"
  done
}
# Whether $1 holds the CUDA driver (maps readable and naming it).
maps=${GPU_HOSTED_MAPS:-'libcuda\.so|/dev/nvidia'}
has_cuda() { grep -qE "$maps" "/proc/$1/maps" 2> /dev/null; }
# Whether $1 is a kernel host: one seccomp filter more than its parent.
is_host() {
  local pp f pf
  pp=$(awk '/^PPid:/ {print $2}' "/proc/$1/status" 2> /dev/null)
  f=$(filters "$1")
  pf=$(filters "$pp")
  [ -n "$f" ] && [ -n "$pf" ] && [ "$f" -gt "$pf" ]
}

hosts_seen=0
bad=""
samples=0
while kill -0 "$gate" 2> /dev/null; do
  samples=$((samples + 1))
  for p in "$gate" $(descendants "$gate"); do
    has_cuda "$p" || continue
    if is_host "$p"; then
      hosts_seen=$((hosts_seen + 1))
      continue
    fi
    if [ "$p" = "$gate" ]; then
      bad="$bad gate($p)"
      continue
    fi
    for c in $(children "$p"); do
      if is_host "$c"; then
        bad="$bad judge($p, parent of host $c)"
        break
      fi
    done
  done
  sleep 0.2
done
wait "$gate"
rc=$?

status=0
echo "gpu-hosted-check: check exited $rc; $samples samples; $hosts_seen sightings of a kernel host with the CUDA driver mapped"
if [ $rc -ne 0 ]; then
  echo "FAIL: check --builtin cuda exited $rc"
  status=1
fi
if [ -n "$bad" ]; then
  echo "FAIL: the CUDA driver was mapped outside a kernel host:$bad"
  status=1
fi
if [ $hosts_seen -eq 0 ]; then
  echo "FAIL: no kernel host was seen with the CUDA driver mapped (the maps of non-dumpable processes are readable by root only: run as root)"
  status=1
fi
if [ -f "$json" ]; then
  for id in gate.in_bounds gate.fp_environment; do
    if ! python3 - "$json" "$id" << 'EOF'; then
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
sys.exit(0 if any(v.get("property") == sys.argv[2] and v.get("outcome") == "pass"
                  for r in runs for v in r["verdicts"]) else 1)
EOF
      echo "FAIL: $json has no passing $id verdict (the judge's guard did not see the calls)"
      status=1
    fi
  done
else
  echo "FAIL: no $json was written"
  status=1
fi
[ $status -eq 0 ] && echo "pass: the CUDA kernel ran only in kernel hosts"
exit $status
