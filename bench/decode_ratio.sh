#!/usr/bin/env bash
# Decoding (single-query attention) against a bare read of the same K and V
# bytes, on every instruction set this machine runs: bench/attention_bench's
# BM_DecodeOverKvRead (Google Benchmark; each iteration times one bare read and
# one decode call in the same process) for the interface-v2 GQA decode (64
# sequences x 1 query x 4096 keys, 32 query heads on 8 key/value heads), the
# v2 single query (1 x 65536 keys, one head) and the version-1 entry on the
# same single query, d = 128, float32 / bfloat16 / float16 (the v1 entry takes
# float32 and bfloat16). REPS repetitions; prints min and median of the
# per-repetition ratio (decode time / read time; target <= 1.3), with the CPU
# model and the Highway target limit (SA_CPU_MAX_ISA; docs/measurements.md).
#
#   bench/decode_ratio.sh [BUILD_DIR] [REPS]     (defaults: build, 5)
set -euo pipefail
build=${1:-build}
reps=${2:-5}
bench=$build/bench/attention_bench
[ -x "$bench" ] || { echo "decode_ratio: $bench not found; build the attention_bench target" >&2; exit 2; }
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
isas=(AVX2)
grep -qw avx512f /proc/cpuinfo && isas=(AVX512 AVX2)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "CPU: $cpu ($(nproc) cores, OMP_NUM_THREADS=${OMP_NUM_THREADS:-default})"
for isa in "${isas[@]}"; do
  SA_CPU_MAX_ISA=$isa "$bench" --benchmark_filter='BM_DecodeOverKvRead' \
    --benchmark_repetitions="$reps" --benchmark_format=json > "$tmp/$isa.json" 2> /dev/null
  python3 - "$isa" "$tmp" "$reps" <<'PY'
import json, statistics, sys
isa, tmp, reps = sys.argv[1], sys.argv[2], sys.argv[3]
runs = {}
for b in json.load(open(f"{tmp}/{isa}.json"))["benchmarks"]:
    if b.get("run_type") != "iteration":
        continue
    runs.setdefault(b["label"], []).append(b)
print(f"\nSA_CPU_MAX_ISA={isa}: {reps} repetitions; ratio = decode time / bare-read time (wall, and process CPU time)")
print("| shape | dtype | ratio min | ratio median | ratio_cpu median | read GB/s median | decode GB/s median |")
print("|---|---|---|---|---|---|---|")
for label, bs in runs.items():
    shape, dtype = label.split()
    med = lambda k: statistics.median(b[k] for b in bs)
    print(f"| {shape} | {dtype} | {min(b['ratio'] for b in bs):.2f} | {med('ratio'):.2f} | "
          f"{med('ratio_cpu'):.2f} | {med('read_GB_per_s'):.1f} | {med('decode_GB_per_s'):.1f} |")
PY
done
