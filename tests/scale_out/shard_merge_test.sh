#!/usr/bin/env bash
# Sharded sweeps merge to the unsharded sweep's bytes (issue 34):
#   1. shards 0/3, 1/3, 2/3 run through GNU parallel -j2 (plain background
#      processes where parallel is not installed, said so) and `merge` gives
#      sweep.csv, rows.json and sweep.json byte-identical to the unsharded run;
#   2. a shard killed with SIGKILL mid-run and started again gives the same bytes;
#   3. a shard sent SIGTERM mid-run exits 143 with a whole journal, and resumes;
#   4. a missing shard is named and the merge exits 3; one key with different
#      bits in two inputs is a determinism finding (exit 1); conflicting shard
#      sources and an OUT that is an input are one-line errors (exit 2).
#
#   tests/scale_out/shard_merge_test.sh CLI WORKDIR [MAX_LOG2_N]
#
# MAX_LOG2_N (default 18): the largest size; the sanitize build passes a
# smaller one (its rows are an order of magnitude slower).
set -uo pipefail
cli=${1:?usage: shard_merge_test.sh CLI WORKDIR [MAX_LOG2_N]}
work=${2:?usage: shard_merge_test.sh CLI WORKDIR [MAX_LOG2_N]}
max_log2=${3:-18}
schema=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../docs/schema" && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
# 2^4..2^18 and the six other sizes, 3 dtypes x 4 distributions: 252 rows, a
# few seconds; --no-timing makes the tables the same bytes on every run.
args=(--builtin cpu --min-log2-n 4 --max-log2-n "$max_log2" --no-timing)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
same_outputs() {  # dir dir: the three outputs byte-identical
  local f ok=0
  for f in sweep.csv rows.json sweep.json; do
    if ! cmp -s "$1/$f" "$2/$f"; then
      fail "$1/$f differs from $2/$f"
      diff <(head -c 2000 "$1/$f") <(head -c 2000 "$2/$f") | head -5
      ok=1
    fi
  done
  return $ok
}
rows_of() { grep -c '|' "$1/sweep.csv" 2>/dev/null || echo 0; }

"$cli" sweep --out full "${args[@]}" > full.log 2>&1 || { fail "unsharded sweep exited $?"; tail -5 full.log; exit 1; }
echo "unsharded: $(rows_of full) rows"

# 1. Three shards, two at a time.
if command -v parallel > /dev/null; then
  echo "running shards 0/3 1/3 2/3 with GNU parallel -j2"
  parallel --will-cite -j2 --joblog joblog "$cli" sweep --out 'shard{}' --shard '{}/3' "${args[@]}" \
    '>' 'shard{}.log' '2>&1' ::: 0 1 2 || fail "parallel: a shard failed (joblog: $(cat joblog))"
else
  echo "GNU parallel is not installed (Debian package parallel): running the shards as plain background processes, two at a time"
  "$cli" sweep --out shard0 --shard 0/3 "${args[@]}" > shard0.log 2>&1 &
  p0=$!
  "$cli" sweep --out shard1 --shard 1/3 "${args[@]}" > shard1.log 2>&1 &
  p1=$!
  wait $p0 || fail "shard 0/3 exited $?"
  "$cli" sweep --out shard2 --shard 2/3 "${args[@]}" > shard2.log 2>&1 &
  p2=$!
  wait $p1 || fail "shard 1/3 exited $?"
  wait $p2 || fail "shard 2/3 exited $?"
fi
total=$(($(rows_of shard0) + $(rows_of shard1) + $(rows_of shard2)))
[ "$total" -eq "$(rows_of full)" ] || fail "the shards hold $total rows, the unsharded run $(rows_of full)"
for k in 0 1 2; do [ "$(rows_of shard$k)" -gt 0 ] || fail "shard $k/3 holds no row"; done
for k in 0 1 2; do
  python3 "$schema/validate.py" "$schema/shard.schema.json" "shard$k/shard.json" \
    || fail "shard$k/shard.json does not match docs/schema/shard.schema.json"
done
"$cli" merge merged shard0 shard1 shard2 > merge.log 2>&1 || fail "merge exited $?: $(tail -3 merge.log)"
same_outputs full merged && echo "ok: merge of 3 shards is byte-identical to the unsharded run"

# 2. SIGKILL mid-run, then the same command again.
"$cli" sweep --out killed1 --shard 1/3 "${args[@]}" > killed.log 2>&1 &
pid=$!
for _ in $(seq 1 3000); do [ "$(rows_of killed1)" -ge 3 ] && break; sleep 0.01; done
if kill -KILL $pid 2> /dev/null; then
  wait $pid 2> /dev/null
  rc=$?
  [ $rc -eq 137 ] || fail "the killed shard exited $rc, expected 137 (SIGKILL)"
  before=$(rows_of killed1)
  [ "$before" -lt "$(rows_of shard1)" ] || fail "the shard had finished before SIGKILL ($before rows)"
  "$cli" sweep --out killed1 --shard 1/3 "${args[@]}" > killed-rerun.log 2>&1 || fail "rerun after SIGKILL exited $?"
  cmp -s killed1/sweep.csv shard1/sweep.csv || fail "the restarted shard's table differs from the uninterrupted one"
  "$cli" merge merged-killed shard0 killed1 shard2 > merge-killed.log 2>&1 || fail "merge after SIGKILL exited $?"
  same_outputs full merged-killed && echo "ok: killed with SIGKILL after $before rows and restarted: same bytes"
else
  fail "the shard ended before it could be killed"
fi

# 3. SIGTERM mid-run: exit 143, a whole journal, and the rerun resumes.
"$cli" sweep --out termed2 --shard 2/3 "${args[@]}" > termed.log 2>&1 &
pid=$!
for _ in $(seq 1 3000); do [ "$(rows_of termed2)" -ge 3 ] && break; sleep 0.01; done
kill -TERM $pid 2> /dev/null || fail "the shard ended before SIGTERM"
wait $pid
rc=$?
if [ $rc -eq 143 ]; then echo "ok: SIGTERM: exit 143 after $(rows_of termed2) rows"; else fail "SIGTERM: exit $rc, expected 143"; fi
grep -q "SIGTERM" termed.log || fail "SIGTERM: no message on stderr"
[ "$(tail -c 1 termed2/sweep.csv | od -An -c | tr -d ' ')" = '\n' ] || fail "SIGTERM left a partial line"
"$cli" sweep --out termed2 --shard 2/3 "${args[@]}" > termed-rerun.log 2>&1 || fail "rerun after SIGTERM exited $?"
cmp -s termed2/sweep.csv shard2/sweep.csv && echo "ok: resumed after SIGTERM: the shard's table is the same bytes" \
  || fail "the resumed shard's table differs from the uninterrupted one"

# 4. A missing shard, a determinism finding, conflicting sources, an OUT that is an input.
"$cli" merge partial shard0 shard2 > partial.log 2>&1
rc=$?
[ $rc -eq 3 ] || fail "merge without shard 1/3 exited $rc, expected 3"
grep -q "shard 1/3 missing" partial.log || fail "the missing shard is not named: $(cat partial.log)"
[ "$(rows_of partial)" -eq $(($(rows_of shard0) + $(rows_of shard2))) ] || fail "the partial merge lost rows"
cp -r shard1 shard1-copy
awk -F, 'BEGIN { OFS = "," } NR == 4 { $10 = $10 + 0.25 } { print }' shard1/sweep.csv > shard1-copy/sweep.csv
"$cli" merge finding shard0 shard1 shard2 shard1-copy > finding.log 2>&1
rc=$?
[ $rc -eq 1 ] || fail "merge of two different copies of one shard exited $rc, expected 1"
grep -q "determinism finding: .*max_ulp_sampled" finding.log || fail "no determinism finding: $(cat finding.log)"
"$cli" merge same shard0 shard1 shard2 shard1 > /dev/null 2>&1 || fail "merge of two equal copies of one shard exited $?"
out=$(SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_COUNT=3 "$cli" sweep --out conflict --shard 0/3 "${args[@]}" 2>&1)
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <<< "$out")" -eq 1 ] && [[ $out == *"conflicting shards"* ]] \
  || fail "conflicting --shard and SLURM variables: exit $rc: $out"
[ ! -e conflict/sweep.csv ] || fail "a refused shard wrote a table"
sum_before=$(cat shard0/* | md5sum)
"$cli" sweep --out shard0 --shard 1/3 "${args[@]}" > reshard.log 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "shard.json.*plan of another" reshard.log \
  || fail "a folder of shard 0/3 rerun as shard 1/3: exit $rc: $(cat reshard.log)"
[ "$(cat shard0/* | md5sum)" = "$sum_before" ] || fail "the refused rerun changed the shard's folder"
"$cli" merge shard0 shard0 shard1 shard2 > clobber.log 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "same file" clobber.log || fail "merge into an input folder: exit $rc: $(cat clobber.log)"
[ "$(cat shard0/* | md5sum)" = "$sum_before" ] || fail "merge into an input folder changed it"

if [ $failures -eq 0 ]; then echo "shard_merge_test: all passed"; else echo "shard_merge_test: $failures failed"; fi
[ $failures -eq 0 ]
