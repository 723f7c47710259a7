#!/usr/bin/env bash
# Rows larger than one machine under Slurm (docs/scale-out.md, "Rows larger
# than one machine"): a row split into chunks over N array tasks, in two
# phases, each followed by a merge job, chained with --dependency=afterok:
#
#   SA_OUT=/shared/rows N=16 examples/scale-out/slurm-split-rows.sh [SWEEP OPTIONS...]
#
# SWEEP OPTIONS (default: a row of 2^32 in 64 chunks of the built-in cpu
# kernel, float32) go to every task of both phases unchanged; each task reads
# its shard from SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT. Phase 1 writes
# the chunks' states, its merge the row's (m, S, T) (SA_OUT/states), phase 2
# judges every element against it, and the last merge writes
# SA_OUT/merged/split-rows.csv and row-states.json. A phase-1 merge that finds
# a row over its budget exits 1 and (afterok) stops the chain.
# SA_SBATCH_OPTS: more sbatch options for every job (they come first, so a
# script's own options below win), e.g. "--partition=long --mem=4G".
set -euo pipefail
: "${SA_OUT:?set SA_OUT to a folder every node sees}"
N=${N:-16}
# Each option quoted for the job's shell (printf %q).
if [ $# -gt 0 ]; then args=$(printf '%q ' "$@"); else
  args="--builtin cpu --dtype float32 --distribution gaussian --min-log2-n 32 --max-log2-n 32 --row-chunks 64"
fi
mkdir -p "$SA_OUT"
q() { printf '%q' "$1"; }  # SA_OUT quoted for the job's shell
out=$(q "$SA_OUT")
sub() {  # sbatch options..., the job's command last
  local cmd=${*: -1}
  # shellcheck disable=SC2086  # SA_SBATCH_OPTS is a list of options
  sbatch --parsable --export=ALL ${SA_SBATCH_OPTS:-} "${@:1:$#-1}" --wrap "$cmd" | cut -d';' -f1
}
p1=$(sub --job-name=sa-rows-p1 --array=0-$((N - 1)) --output="$SA_OUT/rows-p1-%A_%a.log" \
  "exec softmax-audit sweep $args --out $out/p1/\$SLURM_ARRAY_TASK_ID")
m1=$(sub --job-name=sa-rows-m1 --dependency=afterok:"$p1" --output="$SA_OUT/rows-m1-%j.log" \
  "exec softmax-audit merge $out/states $out/p1/*")
p2=$(sub --job-name=sa-rows-p2 --dependency=afterok:"$m1" --array=0-$((N - 1)) \
  --output="$SA_OUT/rows-p2-%A_%a.log" \
  "exec softmax-audit sweep $args --state $out/states/row-states.json --out $out/p2/\$SLURM_ARRAY_TASK_ID")
m2=$(sub --job-name=sa-rows-m2 --dependency=afterok:"$p2" --output="$SA_OUT/rows-m2-%j.log" \
  "exec softmax-audit merge $out/merged $out/p2/*")
echo "phase 1: job array $p1; merge: job $m1; phase 2: job array $p2; merge: job $m2"
echo "merged rows: $SA_OUT/merged/split-rows.csv"
