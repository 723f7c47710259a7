#!/usr/bin/env bash
# Submits a sharded sweep as a Slurm job array of N tasks and a merge job that
# runs once every task has succeeded (docs/scale-out.md):
#
#   SA_OUT=/shared/sweep N=8 examples/scale-out/slurm-submit.sh [SWEEP OPTIONS...]
#
# SWEEP OPTIONS (default: --builtin cpu --max-log2-n 24 --no-timing) go to
# every shard unchanged; only the shard index differs between tasks.
# SA_SBATCH_OPTS: more sbatch options for both jobs (they override the
# scripts' #SBATCH lines), e.g. "--partition=short --cpus-per-task=2".
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${SA_OUT:?set SA_OUT to a folder every node sees}"
N=${N:-8}
export SA_OUT
if [ $# -gt 0 ]; then export SA_SWEEP_ARGS="$*"; fi
mkdir -p "$SA_OUT"
# shellcheck disable=SC2086  # SA_SBATCH_OPTS is a list of options
array=$(sbatch --parsable --export=ALL ${SA_SBATCH_OPTS:-} --array=0-$((N - 1)) "$here/slurm-sweep.sbatch")
array=${array%%;*}  # "jobid;cluster" on a multi-cluster setup
# shellcheck disable=SC2086
merge=$(sbatch --parsable --export=ALL ${SA_SBATCH_OPTS:-} --dependency=afterok:"$array" "$here/slurm-merge.sbatch")
echo "shards: job array $array (0-$((N - 1))); merge: job $merge (after every shard succeeded)"
echo "merged sweep: $SA_OUT/merged/sweep.csv"
