#!/usr/bin/env bash
# The CUDA kernels' checks on a machine with an NVIDIA GPU, in one bounded run
# (docs/gpu.md): the GPU's device tests, `check --builtin cuda` (the kernel in
# a kernel host only, scripts/gpu-hosted-check.sh; the default spec; more
# cases), a sweep to n = 2^27 on the device, the CUDA benchmarks
# (softmax bandwidth, attention TFLOP/s) and compute-sanitizer's memcheck and
# racecheck on the device tests. Every step has its own time limit and writes
# its log under OUT; at the end everything is packed into OUT/gpu-check.tgz and
# OUT/summary.txt says what passed, failed, skipped or ran out of time.
#
#   scripts/gpu-check.sh [BUILD_DIR [OUT]]      (defaults: build-gpu, $OUT or gpu-out)
#
# BUILD_DIR is built first when it holds no CLI (needs nvcc and the
# dependencies of scripts/install-deps.sh):
#   cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DSA_CUDA=ON \
#         -DCMAKE_CUDA_ARCHITECTURES=90
# A build made on another machine runs when its non-system libraries were
# copied to BUILD_DIR/sa-libs (scripts/gpu-stage.sh does that).
#
# Budget: GPU_CHECK_SECONDS (default 330) is split over the steps: the
# benchmarks first on a quiet GPU, then the rest side by side.
# Exit status: 0 when every step that ran passed, 1 otherwise; a step that ran
# out of time, and a device test that skipped (no usable GPU), count as not
# passed.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-build-gpu}
case $B in /*) ;; *) B=$here/$B ;; esac
O=${2:-${OUT:-gpu-out}}
mkdir -p "$O" || { echo "gpu-check: cannot create the output folder $O" >&2; exit 2; }
O=$(cd "$O" && pwd)
L=$O/logs
mkdir -p "$L"
budget=${GPU_CHECK_SECONDS:-330}
case $budget in '' | *[!0-9]*)
  echo "gpu-check: GPU_CHECK_SECONDS must be a whole number of seconds, got '$budget'" >&2
  exit 2 ;;
esac
start=$(date +%s)
summary=$O/summary.txt
: > "$summary"
say() { echo "$*" | tee -a "$summary"; }

if [ -d "$B/sa-libs" ]; then
  export LD_LIBRARY_PATH=$B/sa-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
cli=$B/cli/softmax-audit
if [ ! -x "$cli" ]; then
  say "# building $B (no CLI there yet)"
  cmake -S "$here" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSA_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" > "$L/configure.log" 2>&1 &&
    cmake --build "$B" -j "$(nproc)" --target softmax-audit cuda_host_test cuda_device_test \
      cuda_attention_v2_test cuda_backward_test cuda_device_long_test sa_bench_cuda \
      > "$L/build.log" 2>&1 || { say "build failed: $L/build.log"; tail -20 "$L/build.log"; exit 1; }
fi

{
  echo "# machine"
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
    --format=csv 2>&1
  nvidia-smi 2>&1 | sed -n 1,12p
  command -v nvcc > /dev/null && nvcc --version | tail -2
  command -v compute-sanitizer > /dev/null && compute-sanitizer --version | head -2
  lscpu | grep -E 'Model name|^CPU\(s\)' || true
  free -g | sed -n 1,2p
  "$cli" --version 2>&1 | head -3
} > "$L/machine.txt" 2>&1
cat "$L/machine.txt" >> "$summary"

# run NAME SECONDS COMMAND...: one step with its own limit; the result line
# goes to the summary (pass / FAIL rc / TIMEOUT after s).
run() {
  local name=$1 secs=$2
  shift 2
  local t0 rc
  t0=$(date +%s)
  timeout -k 10 "$secs" "$@" > "$L/$name.log" 2>&1
  rc=$?
  local took=$(($(date +%s) - t0))
  if [ $rc -eq 0 ] && grep -qE '^\[  SKIPPED \]|no CUDA device' "$L/$name.log"; then
    # A skipped device test checked nothing: never reported as a pass here.
    say "SKIPPED  $name (${took} s): $(grep -m1 -oE 'no CUDA device[^"]*' "$L/$name.log" ||
      grep -m1 -E '^\[  SKIPPED \]' "$L/$name.log")"
  elif [ $rc -eq 0 ]; then
    say "pass     $name (${took} s)"
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    say "TIMEOUT  $name (limit ${secs} s)"
  else
    say "FAIL     $name (exit $rc, ${took} s): $L/$name.log"
  fi
  return $rc
}
left() { echo $((budget - ($(date +%s) - start))); }

# 1. Benchmarks alone on the GPU (their figures need a quiet device).
bench=$B/bench/cuda/sa_bench_cuda
bench_s=$((budget / 4))
if [ -x "$bench" ]; then
  run bench "$bench_s" "$bench" --benchmark_min_time=0.05 \
    --benchmark_out="$L/bench.json" --benchmark_out_format=json
else
  say "skip     bench (no $bench: built without Google Benchmark?)"
fi

# 2. Everything else side by side: the GPU tests, the gate, the sweep (in
# shards, one process per shard, merged after), the sanitizers.
rest=$(($(left) - 25))
[ $rest -lt 60 ] && rest=60
export RC_PARAMS=${RC_PARAMS:-max_success=100}
pids=()
(
  for t in cuda_host_test cuda_device_test cuda_attention_v2_test cuda_backward_test; do
    run "$t" $((rest * 9 / 10)) "$B/tests/cuda/$t" --gtest_output="xml:$L/$t.xml" &
  done
  wait
) &
pids+=($!)
(
  run check-hosted $((rest / 6)) "$here/scripts/gpu-hosted-check.sh" "$cli" \
    "$L/check-hosted.json" --deadline $((rest / 6 - 10))
  run check-default $((rest / 3)) "$cli" check --builtin cuda --seed 1 \
    --json "$L/check-default.json" --junit "$L/check-default.xml"
  run check-more-cases $((rest * 2 / 5)) "$cli" check --builtin cuda --seed 2 --cases 400 \
    --deadline $((rest * 2 / 5 - 15)) --json "$L/check-more-cases.json"
) &
pids+=($!)
(
  shards=${SWEEP_SHARDS:-8}
  dirs=()
  for k in $(seq 0 $((shards - 1))); do
    dirs+=("$L/sweep-shard-$k")
    OMP_NUM_THREADS=${SWEEP_THREADS:-1} run "sweep-shard-$k" $((rest * 9 / 10)) "$cli" sweep --builtin cuda --max-log2-n 27 \
      --shard "$k/$shards" --out "$L/sweep-shard-$k" &
  done
  wait
  run sweep-merge 60 "$cli" merge "$L/sweep" "${dirs[@]}"
) &
pids+=($!)
(
  if command -v compute-sanitizer > /dev/null; then
    RC_PARAMS=max_success=3 run memcheck $((rest * 4 / 5)) compute-sanitizer --tool memcheck \
      --error-exitcode 99 "$B/tests/cuda/cuda_device_test" &
    RC_PARAMS=max_success=2 run racecheck $((rest * 4 / 5)) compute-sanitizer --tool racecheck \
      --error-exitcode 99 "$B/tests/cuda/cuda_attention_v2_test" \
      --gtest_filter='*MaskedTailTilesEqualAbsentKeys*:*SpecialRowsAtTileBoundaries*' &
    RC_PARAMS=max_success=2 run racecheck-backward $((rest * 4 / 5)) compute-sanitizer \
      --tool racecheck --error-exitcode 99 "$B/tests/cuda/cuda_backward_test" \
      --gtest_filter='*MaskedTailKeysEqualAbsentKeys*' &
    wait
  else
    say "skip     memcheck, racecheck (no compute-sanitizer on PATH)"
  fi
) &
pids+=($!)
wait "${pids[@]}"

# What the logs say, shortly: failures and skips of the tests, the gate's
# summaries, the sweep's closing lines and the bench's counters.
{
  echo "# details"
  for t in cuda_host_test cuda_device_test cuda_attention_v2_test cuda_backward_test; do
    [ -f "$L/$t.log" ] && grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests ran' "$L/$t.log" |
      sed "s/^/$t: /"
  done
  [ -f "$L/check-hosted.log" ] && { echo "## check-hosted"; grep -E '^(gpu-hosted-check|FAIL|pass)' "$L/check-hosted.log"; }
  for c in check-default check-more-cases; do
    [ -f "$L/$c.log" ] && { echo "## $c"; grep -vE '^\s*$' "$L/$c.log" | tail -25; }
  done
  [ -f "$L/sweep-merge.log" ] && { echo "## sweep"; tail -12 "$L/sweep-merge.log"; }
  for s in memcheck racecheck racecheck-backward; do
    [ -f "$L/$s.log" ] && { echo "## $s"; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Invalid|hazard|PASSED|FAILED' "$L/$s.log" | head -12; }
  done
  [ -f "$L/bench.log" ] && { echo "## bench"; grep -E '^BM_' "$L/bench.log"; }
} >> "$summary" 2>&1
tar czf "$O/gpu-check.tgz" -C "$O" logs summary.txt 2> /dev/null
if grep -qE '^(FAIL|TIMEOUT|SKIPPED) ' "$summary"; then
  echo "gpu-check: not everything passed; see $summary" >&2
  exit 1
fi
echo "gpu-check: every step passed ($summary)"
