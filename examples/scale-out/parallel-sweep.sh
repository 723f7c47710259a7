#!/usr/bin/env bash
# A sharded sweep on one machine (or several over ssh) with GNU parallel
# (Debian package parallel), then the merge (docs/scale-out.md):
#
#   examples/scale-out/parallel-sweep.sh OUT N JOBS [SWEEP OPTIONS...]
#
# e.g. `parallel-sweep.sh sweep-shards 2 2 --max-log2-n 20 --no-timing`. A
# rerun resumes: --joblog with --resume-failed runs again only the shards that
# failed or were stopped (each resumes from its table); finished ones are kept.
# On several hosts add `--sshloginfile HOSTS` and an OUT every host sees.
set -euo pipefail
out=${1:?usage: parallel-sweep.sh OUT N JOBS [SWEEP OPTIONS...]}
n=${2:?number of shards}
jobs=${3:?shards at once}
shift 3
mkdir -p "$out/logs"
sa=${SOFTMAX_AUDIT:-softmax-audit}
# GNU parallel sends SIGTERM to its jobs when it is interrupted: each shard
# then exits 143 and resumes on the next run.
parallel --will-cite -j"$jobs" --joblog "$out/joblog" --resume-failed \
  "$sa" sweep --out "$out/shard-{}" --shard "{}/$n" "$@" '>' "$out/logs/shard-{}.log" '2>&1' \
  ::: $(seq 0 $((n - 1)))
# Every shard folder there is: a shard that never started is named as missing (exit 3).
"$sa" merge "$out/merged" "$out"/shard-*
