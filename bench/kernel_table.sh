#!/usr/bin/env bash
# kernel_table.sh: the built-in CPU kernel's speed targets (issue 32, README
# "Speed of the built-in CPU kernel") measured on this machine, for every
# instruction set it runs (SA_CPU_MAX_ISA=AVX512, then AVX2; oneDNN is held
# to the same one), printed as one markdown table with the CPU model named.
# A measurement script, not a test: it asserts nothing.
#
#   bench/kernel_table.sh [BUILD_DIR] [ROUNDS] [RAW_DIR]   (defaults: build, 2)
#
# With RAW_DIR the benchmarks' own outputs are kept there; when RAW_DIR
# already holds a finished run, the table is printed from it again and
# nothing is measured.
#
# Each figure is a ratio of two timings taken in one process:
#   - softmax rows: build/bench/softmax_bench, ROUNDS runs, each the median of
#     3 repetitions of CPU time (its own ratio table); the figure is the range
#     of the runs' ratios. "fastest peer" is the fastest of oneDNN (single
#     thread), Eigen built with -march=native and Eigen built for AVX2;
#   - decode: bench/attention_bench BM_DecodeOverKvRead (decode time / a bare
#     read of the same K and V bytes, each repetition in one iteration),
#     3 x ROUNDS repetitions, range of the per-repetition ratios;
#   - paged KV: BM_PagedOverContiguousDecode (contiguous time / paged time),
#     3 x ROUNDS repetitions, range.
# A whole run (ROUNDS = 2) takes about 4 minutes per instruction set. The
# machine should be quiet: say so next to any figure taken while it was not.
set -euo pipefail
build=${1:-build}
rounds=${2:-2}
case $rounds in '' | *[!0-9]* | 0)
  echo "kernel_table: ROUNDS must be a whole number >= 1, got '$rounds'" >&2
  exit 2 ;;
esac
sb=$build/bench/softmax_bench
ab=$build/bench/attention_bench
for b in "$sb" "$ab"; do
  [ -x "$b" ] || { echo "kernel_table: $b not found; build the softmax_bench and attention_bench targets" >&2; exit 2; }
done
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
fam=$(awk -F': ' '/^cpu family/ { print $2; exit }' /proc/cpuinfo)
model=$(awk -F': ' '/^model[ \t]/ { print $2; exit }' /proc/cpuinfo)
isas=(AVX2)
grep -qw avx512f /proc/cpuinfo && isas=(AVX512 AVX2)
if [ -n "${3:-}" ]; then
  tmp=$3
  mkdir -p "$tmp"
else
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
fi
filter='^softmax_(f32/(cpu|onednn|eigen|eigen_avx2|memory_2pass)|bf16/cpu)/[0-9]+$|^adaptive_f32/(cpu|plain_softmax)/[0-9]+/[01]$'
[ -f "$tmp/done" ] || for isa in "${isas[@]}"; do
  for r in $(seq 1 "$rounds"); do
    echo "kernel_table: $isa softmax round $r" >&2
    SA_CPU_MAX_ISA=$isa OMP_NUM_THREADS=1 "$sb" --benchmark_filter="$filter" \
      --benchmark_min_time=0.1 > "$tmp/$isa.softmax.$r.txt" 2> /dev/null
  done
  echo "kernel_table: $isa decode and paged KV" >&2
  SA_CPU_MAX_ISA=$isa "$ab" --benchmark_filter='BM_DecodeOverKvRead|BM_PagedOverContiguousDecode' \
    --benchmark_repetitions=$((3 * rounds)) --benchmark_format=json > "$tmp/$isa.attn.json" 2> /dev/null
done
[ -f "$tmp/done" ] || uptime > "$tmp/done"
python3 - "$tmp" "$cpu" "$fam" "$model" "$(cat "$tmp/done")" "${isas[@]}" <<'PY'
import glob, json, re, sys
tmp, cpu, fam, model, up, isas = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:]
line = re.compile(r"^(.*?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S.*)?$")

def softmax_runs(isa):
    runs = []
    for f in sorted(glob.glob(f"{tmp}/{isa}.softmax.*.txt")):
        table, on = {}, False
        for l in open(f):
            if l.startswith("Ratio table"):
                on = True
                continue
            m = line.match(l.rstrip("\n")) if on else None
            if m:
                table[m.group(1).strip()] = (float(m.group(2)), float(m.group(3)), float(m.group(4)))
        runs.append(table)
    return runs

def rng(vals):
    if not vals:
        return "—"
    lo, hi = f"{min(vals):.2f}", f"{max(vals):.2f}"
    return lo if lo == hi else lo + "–" + hi

def cell(runs, key):  # the ratio column of one row, per run
    return [t[key][2] for t in runs if key in t]

def fastest_peer(runs, n, isa):
    # ours / the fastest peer = the largest of ours / peer. Eigen built with
    # -march=native is AVX-512 code: a peer of the AVX-512 column only.
    keys = [f"softmax f32 n={n}: cpu / oneDNN", f"softmax f32 n={n}: cpu / Eigen (AVX2 build)"]
    if isa != "AVX2":
        keys.append(f"softmax f32 n={n}: cpu / Eigen")
    return [max(t[k][2] for k in keys if k in t) for t in runs if any(k in t for k in keys)]

cols = {}
for isa in isas:
    runs = softmax_runs(isa)
    c = {}
    sizes = [256, 4096, 65536, 1 << 20, 1 << 22, 1 << 24]
    names = {256: "256", 4096: "4096", 65536: "65536", 1 << 20: "2^20", 1 << 22: "2^22", 1 << 24: "2^24"}
    c["peer"] = ", ".join(f"{names[n]}: {rng(fastest_peer(runs, n, isa))}" for n in sizes)
    c["onednn"] = ", ".join(f"{names[n]}: {rng(cell(runs, f'softmax f32 n={n}: cpu / oneDNN'))}" for n in sizes)
    c["mem"] = ", ".join(f"{names[n]}: {rng(cell(runs, f'softmax f32 n={n}: memory limit / cpu'))}"
                         for n in (1 << 22, 1 << 24))
    c["bf16"] = ", ".join(f"{names[n]}: {rng(cell(runs, f'softmax n={n}: time f32 / time bf16'))}"
                          for n in (1 << 20, 1 << 22, 1 << 24))
    ad = lambda s: [v for n in (4096, 65536, 1 << 20)
                    for v in cell(runs, f"adaptive n={n}{s}: / softmax")]
    c["ad_sharp"] = rng(ad(" beta>1"))
    c["ad_flat"] = rng(ad(" N(0,1) beta=1"))
    att = json.load(open(f"{tmp}/{isa}.attn.json"))["benchmarks"]
    dec, paged = {}, {}
    for b in att:
        if b.get("run_type") != "iteration":
            continue
        if b["name"].startswith("BM_DecodeOverKvRead"):
            dec.setdefault(tuple(b["label"].split()), []).append(b["ratio"])
        elif b["name"].startswith("BM_PagedOverContiguousDecode"):
            paged.setdefault(b["label"].rsplit(", ", 1)[-1], []).append(b["ratio"])
    for shape in ("gqa", "single", "v1"):
        c["dec_" + shape] = " / ".join(rng(dec.get((shape, t), [])) for t in ("f32", "bf16", "f16")
                                       if (shape, t) in dec)
    c["paged"] = " / ".join(rng(paged.get(t, [])) for t in ("f32", "bf16", "f16"))
    cols[isa] = c

print(f"CPU: {cpu} (family {fam} model {model}); load: {up.split('load average:')[-1].strip()}")
print()
print("| target | " + " | ".join(isas) + " |")
print("|---|" + "---|" * len(isas))
rows = [
    ("f32 softmax ≤ 1.0× the fastest peer (oneDNN; Eigen built for AVX2, and for AVX-512 in that column), by n", "peer"),
    ("f32 softmax / oneDNN alone, by n", "onednn"),
    ("f32 ≥ 0.8 of the two-pass memory limit, n ≥ 2^22", "mem"),
    ("bf16 ≥ 1.5× f32 (time f32 / time bf16), n ≥ 2^20", "bf16"),
    ("adaptive ≤ 1.6× plain, β > 1 rows (n = 4096 … 2^20)", "ad_sharp"),
    ("adaptive, β = 1 rows", "ad_flat"),
    ("decode ≤ 1.3× a bare read, v2 GQA 64 × 4096 keys (f32 / bf16 / f16)", "dec_gqa"),
    ("decode, v2 1 query × 65536 keys (f32 / bf16 / f16)", "dec_single"),
    ("decode, v1 entry 1 × 65536 (f32 / bf16)", "dec_v1"),
    ("paged KV decode ≥ 0.8× contiguous, pages of 16 (f32 / bf16 / f16)", "paged"),
]
for what, key in rows:
    print(f"| {what} | " + " | ".join(cols[i][key] for i in isas) + " |")
PY
