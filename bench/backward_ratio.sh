#!/usr/bin/env bash
# The CPU kernel's attention backward against its own forward, on every
# instruction set this machine runs: bench/backward_bench (Google Benchmark;
# one forward and one backward call per iteration in one process) at
# n = 1024 and 4096, d = 64 and 128, with 1 thread and with 2, median of 3
# repetitions. Prints one table per instruction set, with the CPU model and the
# Highway target (SA_CPU_MAX_ISA limits the vector code; docs/measurements.md).
#
#   bench/backward_ratio.sh [BUILD_DIR]     (default: build)
set -euo pipefail
build=${1:-build}
bench=$build/bench/backward_bench
[ -x "$bench" ] || { echo "backward_ratio: $bench not found; build the backward_bench target" >&2; exit 2; }
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
isas=(AVX2)
grep -qw avx512f /proc/cpuinfo && isas=(AVX512 AVX2)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "CPU: $cpu ($(nproc) cores)"
for isa in "${isas[@]}"; do
  for th in 1 2; do
    SA_CPU_MAX_ISA=$isa OMP_NUM_THREADS=$th "$bench" \
      --benchmark_filter='BM_AttentionBackward/(1024|4096)/' --benchmark_repetitions=3 \
      --benchmark_report_aggregates_only=true --benchmark_format=json \
      > "$tmp/$isa-$th.json" 2> /dev/null
  done
  python3 - "$isa" "$tmp" <<'EOF'
import json, sys
isa, tmp = sys.argv[1], sys.argv[2]
print(f"\nSA_CPU_MAX_ISA={isa}: median of 3; ratio = backward time / forward time (FlashAttention ~2.5)")
print("| n | d | threads | backward ms | backward GFLOP/s | forward GFLOP/s | ratio |")
print("|---|---|---|---|---|---|---|")
for th in (1, 2):
    for b in json.load(open(f"{tmp}/{isa}-{th}.json"))["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        n, d = b["run_name"].split("/")[1:3]
        print(f"| {n} | {d} | {th} | {b['real_time']:.1f} | {b['GFLOPs']:.1f} | {b['fwd_GFLOPs']:.1f} | {b['ratio']:.2f} |")
EOF
done
