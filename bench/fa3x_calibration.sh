#!/usr/bin/env bash
# Calibration of attention_backward.flash_attention_3x (docs/checks.md): for
# each head dim, SEEDS checks of the built-in CPU kernel's bfloat16 backward
# (100 random cases each), and per head dim the seeds whose verdict failed
# and the largest ratio of measured error to bound.
#   bench/fa3x_calibration.sh [SEEDS] [HEAD_DIM...]   (defaults: 50; 1 8 16 32 64 128)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cli=${SOFTMAX_AUDIT:-$here/build/cli/softmax-audit}
seeds=${1:-50}
shift || true
dims=("$@")
[ ${#dims[@]} -eq 0 ] && dims=(1 8 16 32 64 128)
[[ $seeds =~ ^[0-9]+$ ]] || { echo "fa3x_calibration.sh: SEEDS must be a count, got '$seeds'" >&2; exit 2; }
[ -x "$cli" ] || { echo "fa3x_calibration.sh: $cli not built (cmake --build build)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-9s %6s %7s %13s\n' "head dim" seeds failed "largest ratio"
for d in "${dims[@]}"; do
  [[ $d =~ ^[0-9]+$ ]] || { echo "fa3x_calibration.sh: a head dim must be a count, got '$d'" >&2; exit 2; }
  for s in $(seq 1 "$seeds"); do
    cat > "$work/spec.toml" <<EOT
ops = ["attention_backward"]
dtypes = ["bfloat16"]
properties = ["attention_backward.flash_attention_3x"]
cases = 800
seed = $((s * 7919 + d))
[attention]
head_dims = [$d]
EOT
    "$cli" check --builtin cpu --spec "$work/spec.toml" --jobs 1 --json "$work/$s.json" >/dev/null 2>&1 || true
  done
  python3 - "$d" "$work" "$seeds" <<'PY'
import json, sys
d, work, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
failed, worst, ran = 0, 0.0, 0
for s in range(1, n + 1):
    for run in json.load(open(f"{work}/{s}.json"))["runs"]:
        for v in run.get("verdicts", []):
            if v["property"] != "attention_backward.flash_attention_3x" or v["outcome"] == "skip":
                continue
            ran += 1
            failed += v["outcome"] != "pass"
            worst = max(worst, float(v["measured"]) / float(v["bound"]))
print(f"{d:<9} {ran:6d} {failed:7d} {worst:13.3f}")
PY
done
