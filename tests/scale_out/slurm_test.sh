#!/usr/bin/env bash
# A real single-node Slurm (issue 34): munged, slurmctld and slurmd configured
# and started here on localhost (own ports, state and sockets under WORKDIR;
# nothing system-wide is touched), torn down at the end. The example
# examples/scale-out/slurm-submit.sh submits a 4-task job array of shards and
# a merge job chained with --dependency=afterok; the merged table must be the
# unsharded sweep's bytes. Exit 77 (skipped, said why) without Debian's
# slurmctld, slurmd, slurm-client and munge, or when not root.
#
#   tests/scale_out/slurm_test.sh CLI WORKDIR
set -uo pipefail
cli=${1:?usage: slurm_test.sh CLI WORKDIR}
work=${2:?usage: slurm_test.sh CLI WORKDIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
for c in munged slurmctld slurmd sbatch scontrol sinfo; do
  command -v "$c" > /dev/null || PATH=$PATH:/usr/sbin
  command -v "$c" > /dev/null || { echo "SKIP: $c not found (Debian packages slurmctld slurmd slurm-client munge)"; exit 77; }
done
[ "$(id -u)" -eq 0 ] || { echo "SKIP: the daemons run as root here; not root"; exit 77; }
rm -rf "$work" && mkdir -p "$work"/{state,spool,munge,out} && cd "$work" || exit 1
chmod 700 munge
host=$(hostname -s)
port=$((20000 + ($$ % 5000) * 2))
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2> /dev/null; done
  [ -f munge/munged.pid ] && kill "$(cat munge/munged.pid)" 2> /dev/null
}
trap cleanup EXIT

# munge with its own key and socket.
dd if=/dev/urandom of=munge/munge.key bs=1024 count=1 status=none && chmod 400 munge/munge.key
munged --force --socket="$work/munge/sock" --key-file="$work/munge/munge.key" \
  --pid-file="$work/munge/munged.pid" --log-file="$work/munge/munged.log" \
  --seed-file="$work/munge/seed" || { echo "FAIL: munged did not start"; cat munge/munged.log; exit 1; }

mem=$(awk '/MemTotal/ { print int($2 / 1024 / 2) }' /proc/meminfo)
cat > slurm.conf << CONF
ClusterName=satest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/sock
CredType=cred/munge
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$work/slurm.conf
slurmctld -D -i > slurmctld.out 2>&1 &
pids+=($!)
slurmd -D -N "$host" > slurmd.out 2>&1 &
pids+=($!)
for _ in $(seq 1 60); do
  sinfo -h -o %T 2> /dev/null | grep -q idle && break
  sleep 1
done
sinfo -h -o %T 2> /dev/null | grep -q idle || {
  echo "FAIL: the node did not come up"; tail -20 slurmctld.log slurmd.log slurmctld.out slurmd.out; exit 1; }
echo "single-node Slurm up on $host, ports $port-$((port + 1))"

args="--builtin cpu --min-log2-n 4 --max-log2-n 12 --no-timing"
mkdir -p bin && ln -sf "$cli" bin/softmax-audit
export PATH=$work/bin:$PATH SA_OUT=$work/out N=4
export SA_SBATCH_OPTS="--cpus-per-task=1 --mem=500M --time=10"
# shellcheck disable=SC2086
submitted=$("$repo/examples/scale-out/slurm-submit.sh" $args) || { echo "FAIL: submit: $submitted"; exit 1; }
echo "$submitted"
merge=$(sed -n 's/.*merge: job \([0-9]*\).*/\1/p' <<< "$submitted")
[ -n "$merge" ] || { echo "FAIL: no merge job id"; exit 1; }
state=
for _ in $(seq 1 300); do
  state=$(scontrol show job "$merge" 2> /dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT | OUT_OF_MEMORY | NODE_FAIL) break ;; esac
  sleep 1
done
echo "merge job $merge: $state"
cat sa-merge-*.log 2> /dev/null | tail -3
"$cli" sweep --out unsharded $args > unsharded.log 2>&1 || { echo "FAIL: unsharded sweep"; exit 1; }
failures=0
[ "$state" = COMPLETED ] || { echo "FAIL: merge job ended $state"; failures=1; tail -5 sa-sweep-*.log; }
for k in 0 1 2 3; do [ -s "out/shard-$k/sweep.csv" ] || { echo "FAIL: shard $k wrote no table"; failures=1; }; done
for f in sweep.csv rows.json sweep.json; do
  cmp -s "out/merged/$f" "unsharded/$f" || { echo "FAIL: merged $f differs from the unsharded run's"; failures=1; }
done
# A task run again under its index (docs/scale-out.md: scontrol requeue) is
# the same shard (SLURM_ARRAY_TASK_COUNT is still 4), resumes its table and
# changes no byte of it.
array=$(sed -n 's/.*job array \([0-9]*\).*/\1/p' <<< "$submitted")
before=$(md5sum < out/shard-2/sweep.csv)
if scontrol requeue "${array}_2" > requeue.log 2>&1; then
  # Slurm makes a requeued job wait (its BeginTime) before it is eligible again: not here.
  scontrol update JobId="${array}_2" StartTime=now >> requeue.log 2>&1
  state=
  for _ in $(seq 1 60); do
    state=$(scontrol show job "${array}_2" 2> /dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1)
    [ "$state" = COMPLETED ] && grep -q "shard 2/4" sa-sweep-"${array}"_2.log && break
    sleep 1
  done
  [ "$state" = COMPLETED ] || {
    echo "FAIL: requeued task 2 ended $state: $(scontrol show job "${array}_2" | grep -o 'Reason=[^ ]*')"
    failures=1
  }
  [ "$(md5sum < out/shard-2/sweep.csv)" = "$before" ] || { echo "FAIL: the requeued task changed its table"; failures=1; }
  grep -q "shard 2/4" sa-sweep-"${array}"_2.log || { echo "FAIL: the requeued task is not shard 2/4"; failures=1; }
  [ "$(grep -c "Allocate JobId=${array}_2(" slurmctld.log)" -ge 2 ] || { echo "FAIL: task 2 did not run again"; failures=1; }
  echo "requeued task ${array}_2: $state"
else
  echo "FAIL: scontrol requeue ${array}_2: $(cat requeue.log)"
  failures=1
fi
# Rows larger than one machine: examples/scale-out/slurm-split-rows.sh chains
# two arrays of 2 tasks and two merge jobs; the merged rows are the bytes of
# the same split row run in one process.
rargs=(--builtin cpu --dtype float32 --distribution gaussian --min-log2-n 12 --max-log2-n 12
       --row-chunks 4)
rows=$(SA_OUT=$work/rows N=2 "$repo/examples/scale-out/slurm-split-rows.sh" "${rargs[@]}") \
  || { echo "FAIL: split rows submit: $rows"; failures=1; }
echo "$rows"
last=$(sed -n 's/.*merge: job \([0-9]*\)$/\1/p' <<< "$rows")
state=
for _ in $(seq 1 300); do
  state=$(scontrol show job "$last" 2> /dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
  case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT | OUT_OF_MEMORY | NODE_FAIL | "") [ -n "$state" ] && break ;; esac
  sleep 1
done
echo "split rows, last merge job $last: $state"
"$cli" sweep "${rargs[@]}" --out rows-full > rows-full.log 2>&1 || { echo "FAIL: split rows in one process"; failures=1; }
if [ "$state" = COMPLETED ]; then
  for f in split-rows.csv row-states.json; do
    cmp -s "rows/merged/$f" "rows-full/$f" || { echo "FAIL: split rows: merged $f differs from the one-process run's"; failures=1; }
  done
else
  echo "FAIL: split rows: the last merge job ended ${state:-unknown}"; tail -3 rows/rows-*.log; failures=1
fi
if [ $failures -eq 0 ]; then echo "slurm_test: all passed"; else echo "slurm_test: failed"; fi
[ $failures -eq 0 ]
