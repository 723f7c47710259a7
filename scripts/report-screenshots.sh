#!/bin/sh
# Makes the two report screenshots README shows, from a build tree:
#   docs/report-pass.png  the first screen of a passing audit: the built-in kernels,
#                         `softmax-audit audit --cases 20 --sweep-max-log2-n 12`;
#   docs/report-fail.png  the first screen of a failing one: the deliberately biased
#                         outside kernel of tests/gate/kernels/bad_kernels.c (index 0)
#                         with the example variant plugin's matrix and CUDA not audited.
# Usage: scripts/report-screenshots.sh [BUILD_DIR]   (needs chromium and gnuplot)
set -eu
build=${1:-build}
cli=$build/cli/softmax-audit
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/sa-shots-XXXXXX)
# exit 3 (INCOMPLETE) where a built-in kernel cannot run here (CUDA without a device)
"$cli" audit --out "$work/pass" --cases 20 --sweep-max-log2-n 12 --seed 1 || test $? -eq 3
mkdir -p "$work/fail"
"$cli" check --plugin "$build/tests/gate/libsa_gate_bad_kernels.so" --kernel-index 0 --cases 20 \
  --seed 7 --json "$work/fail/results.json" >/dev/null || test $? -eq 1
"$cli" fuzz --plugin "$build/tests/gate/libsa_gate_variant_example.so" --cases 20 --seed 1 \
  --json "$work/fail/variants.json" >/dev/null || test $? -eq 1
"$cli" report --results "$work/fail/results.json" --variants "$work/fail/variants.json" \
  --not-audited 'cuda:no CUDA device on this machine' --title 'softmax-audit: an outside kernel' \
  --html "$work/fail/report.html"
for which in pass fail; do
  HOME=$work chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --window-size=900,1150 --screenshot="$here/docs/report-$which.png" \
    "file://$work/$which/report.html" 2>/dev/null
done
ls -l "$here/docs/report-pass.png" "$here/docs/report-fail.png"
rm -rf "$work"
