#!/usr/bin/env bash
# gate_bench.sh: wall and CPU time of the gate (`softmax-audit check --builtin
# cpu --jobs 1`, one gate process; --jobs N adds the parallel check), on a
# quiet machine and with two competing busy processes, and the
# ratio loaded/quiet of the median walls (issue 32: "the gate collapses under
# load"). A measurement script, not a test: it asserts nothing.
#
# Usage: bench/gate_bench.sh [options] [-- extra check arguments]
#   --bin PATH     the CLI (default build/cli/softmax-audit)
#   --repeats N    runs of each configuration (default 2; the median is used)
#   --modes LIST   comma-separated, of quiet and loaded (default quiet,loaded)
#   --audit        also time `audit --builtin cpu` (about 2x a check's time;
#                  off by default, as a loaded audit can take half an hour)
#   --seed S       the check's seed (default 1)
#   --jobs N       also time `check --jobs N` (name "check-jN"), alternating
#                  with the serial check in each repeat, and print the ratio
#                  serial wall / --jobs wall per mode
#
# Last, per mode, where the serial check's time went, from its JSON (the last
# repeat): per property family the wall seconds of its verdicts, the seconds
# inside the kernel's calls (kernel_seconds: each call's round trip to the
# kernel host included) and the judge's share per kernel second,
# (seconds - kernel_seconds) / kernel_seconds (issue 32's target: <= 30).
# Anything after `--` goes to `check` (e.g. `-- --cases 50` for a shorter run;
# say so next to any figure measured that way).
#
# The competing load is two `sh -c 'while :; do :; done'` loops (or stress-ng
# --cpu 2 where installed), started before and killed after each loaded run.
# Each run's wall, user and system CPU come from /usr/bin/time (the gate's
# child processes are waited for, so their CPU is included). The load average
# before each run is printed: on a machine shared with other jobs the figures
# are noisy, and the load average says how noisy.
set -u

bin=build/cli/softmax-audit
repeats=2
modes=quiet,loaded
audit=0
seed=1
jobs=
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --audit) audit=1; shift ;;
    --seed) seed=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "gate_bench.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -x "$bin" ] || { echo "gate_bench.sh: $bin is not an executable (build softmax-audit)" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "gate_bench.sh: needs /usr/bin/time (apt-get install time)" >&2; exit 2; }

tmp=$(mktemp -d /tmp/gate_bench.XXXXXX)
load_pids=()
stop_load() {
  for p in "${load_pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  load_pids=()
}
trap 'stop_load; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
start_load() {
  if command -v stress-ng >/dev/null 2>&1; then
    stress-ng --cpu 2 --timeout 3600 --quiet & load_pids+=($!)
  else
    sh -c 'while :; do :; done' & load_pids+=($!)
    sh -c 'while :; do :; done' & load_pids+=($!)
  fi
}

echo "cpu:            $(lscpu | sed -n 's/^Model name: *//p' | head -1) ($(nproc) CPUs online)"
echo "binary:         $bin ($("$bin" --version 2>/dev/null))"
echo "OMP_WAIT_POLICY in the environment: ${OMP_WAIT_POLICY:-unset}, GOMP_SPINCOUNT: ${GOMP_SPINCOUNT:-unset}"
echo "                (softmax-audit sets OMP_WAIT_POLICY=passive when both are unset;"
echo "                GOMP_SPINCOUNT=300000 gives libgomp's default spinning wait, the old behaviour)"
echo "check args:     --builtin cpu --seed $seed -q ${extra[*]:-}"

median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

# run_one MODE NAME CMD...: one timed run, appends "wall cpu" to $tmp/MODE.NAME
run_one() {
  local mode=$1 name=$2; shift 2
  [ "$mode" = loaded ] && start_load
  local la; la=$(cut -d' ' -f1 /proc/loadavg)
  /usr/bin/time -o "$tmp/t" -f '%e %U %S' "$@" >"$tmp/out" 2>&1
  local rc=$?
  [ "$mode" = loaded ] && stop_load
  # /usr/bin/time prefixes "Command exited with non-zero status" lines: take the last line
  read -r wall user sys < <(tail -1 "$tmp/t")
  local cpu; cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN{printf "%.2f", u+s}')
  printf '%-8s %-6s wall %8.2f s  user+sys %8.2f s  (user %s, sys %s)  exit %d  loadavg before %s\n' \
    "$name" "$mode" "$wall" "$cpu" "$user" "$sys" "$rc" "$la"
  echo "$wall $cpu" >>"$tmp/$mode.$name"
}

IFS=, read -r -a mode_list <<<"$modes"
for mode in "${mode_list[@]}"; do
  for ((r = 1; r <= repeats; ++r)); do
    run_one "$mode" check "$bin" check --builtin cpu --seed "$seed" -q --jobs 1 --json "$tmp/check.json" "${extra[@]}"
    cp "$tmp/check.json" "$tmp/check-$mode.json" 2>/dev/null
    [ -n "$jobs" ] && run_one "$mode" "check-j$jobs" "$bin" check --builtin cpu --seed "$seed" -q \
      --jobs "$jobs" --json "$tmp/check-j.json" "${extra[@]}"
    [ "$audit" = 1 ] && run_one "$mode" audit "$bin" audit --out "$tmp/audit"
  done
done

if [ -f "$tmp/check.json" ]; then
  simd=$(python3 -c 'import json,sys
j=json.load(open(sys.argv[1]))
def find(o):
    if isinstance(o,dict):
        if "simd_target" in o: return o["simd_target"]
        for v in o.values():
            r=find(v)
            if r: return r
    if isinstance(o,list):
        for v in o:
            r=find(v)
            if r: return r
print(find(j) or "not recorded")' "$tmp/check.json" 2>/dev/null)
  echo "simd_target:    ${simd:-not recorded}"
fi

echo "--- medians over $repeats run(s) each"
for name in check ${jobs:+check-j$jobs} audit; do
  for mode in "${mode_list[@]}"; do
    f=$tmp/$mode.$name
    [ -f "$f" ] || continue
    w=$(cut -d' ' -f1 "$f" | median); c=$(cut -d' ' -f2 "$f" | median)
    printf '%-8s %-6s median wall %8.2f s  median user+sys %8.2f s\n' "$name" "$mode" "$w" "$c"
    eval "med_${name//-/_}_${mode}=$w"
  done
  q=med_${name//-/_}_quiet; l=med_${name//-/_}_loaded
  if [ -n "${!q:-}" ] && [ -n "${!l:-}" ]; then
    awk -v q="${!q}" -v l="${!l}" -v n="$name" 'BEGIN{printf "%-8s loaded/quiet wall ratio %.2f\n", n, l/q}'
  fi
done
if [ -n "$jobs" ]; then
  for mode in "${mode_list[@]}"; do
    s=med_check_$mode; j=med_check_j${jobs}_$mode
    [ -n "${!s:-}" ] && [ -n "${!j:-}" ] &&
      awk -v s="${!s}" -v j="${!j}" -v m="$mode" -v n="$jobs" \
        'BEGIN{printf "check %-6s serial wall / --jobs %s wall %.2f\n", m, n, s/j}'
  done
fi
for mode in "${mode_list[@]}"; do
  [ -f "$tmp/check-$mode.json" ] || continue
  echo "--- where the check's time went ($mode, last run): per family"
  python3 - "$tmp/check-$mode.json" <<'EOF2'
import collections, json, sys
fam = collections.defaultdict(lambda: [0.0, 0.0, 0])
for run in json.load(open(sys.argv[1]))["runs"]:
    for v in run["verdicts"]:
        f = fam[v["property"].split(".")[0]]
        f[0] += v.get("seconds", 0.0)
        f[1] += v.get("kernel_seconds", 0.0)
        f[2] += 1
print(f"{'family':<20} {'verdicts':>8} {'seconds':>9} {'in kernel':>10} {'judge/kernel':>13}")
for name, (s, k, n) in sorted(fam.items(), key=lambda x: -x[1][0]):
    if s <= 0:
        continue
    ratio = f"{(s - k) / k:.1f}" if k > 0 else "-"
    print(f"{name:<20} {n:>8} {s:>9.2f} {k:>10.3f} {ratio:>13}")
EOF2
done
