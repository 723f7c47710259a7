#!/usr/bin/env bash
# Wall time of `check` on the default spec, for two builds of the CLI side by
# side (issue 29: the kernel host split must stay within 1.5x of before).
#
#   bench/gate_isolation_bench.sh BEFORE_CLI AFTER_CLI [PLUGIN] [REPEATS]
#
# BEFORE_CLI / AFTER_CLI: softmax-audit binaries (e.g. a build of main and
# build/cli/softmax-audit). PLUGIN: a kernel library checked as well (e.g.
# build/tests/gate/libsa_gate_example_kernel.so); REPEATS: runs per case
# (default 3), alternating the two binaries so that load on a shared machine
# hits both alike. Prints one line per run and the median per case.
# GATE_BENCH_BUILTIN=0 leaves out `--builtin cpu` (minutes per run on a
# 2-core machine) and times the plugin only.
set -euo pipefail
before=${1:?usage: $0 BEFORE_CLI AFTER_CLI [PLUGIN] [REPEATS]}
after=${2:?usage: $0 BEFORE_CLI AFTER_CLI [PLUGIN] [REPEATS]}
plugin=${3:-}
repeats=${4:-3}
for f in "$before" "$after"; do
  [[ -x $f ]] || { echo "$0: $f: not an executable" >&2; exit 2; }
done
[[ -z $plugin || -f $plugin ]] || { echo "$0: $plugin: no such plugin" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run() {  # label cli args...
  local label=$1 cli=$2
  shift 2
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  "$cli" check "$@" --seed 1 --json "$out/x.json" >"$out/log" 2>&1 || rc=$?
  t1=$(date +%s.%N)
  local s
  s=$(echo "$t1 - $t0" | bc -l)
  printf '%-28s rc=%d  %8.2f s\n' "$label" "$rc" "$s"
  echo "$label $s" >>"$out/times"
}

cases=()
[[ ${GATE_BENCH_BUILTIN:-1} != 0 ]] && cases+=("--builtin cpu")
[[ -n $plugin ]] && cases+=("--plugin $plugin")
((${#cases[@]})) || { echo "$0: nothing to time (GATE_BENCH_BUILTIN=0 and no PLUGIN)" >&2; exit 2; }
echo "machine: $(nproc) cores; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((i = 1; i <= repeats; ++i)); do
  for c in "${cases[@]}"; do
    name=${c%% *}
    # shellcheck disable=SC2086
    run "before $name #$i" "$before" $c
    # shellcheck disable=SC2086
    run "after  $name #$i" "$after" $c
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "medians:"
for c in "${cases[@]}"; do
  name=${c%% *}
  for which in before after; do
    m=$(grep "^$which *$name " "$out/times" | awk '{print $NF}' | sort -n |
      awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')
    printf '  %-7s %-10s %8.2f s\n' "$which" "$name" "$m"
  done
done
