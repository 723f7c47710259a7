#!/usr/bin/env bash
# Sharded gate runs merge to the unsharded check's bytes (issue 34):
#   1. shards 0/3, 1/3, 2/3 of `check` run through GNU parallel -j2 (plain
#      background processes where parallel is not installed, said so) and
#      `merge` gives gate.json and gate.xml byte-identical to the unsharded
#      check's --json and --junit (all with --no-timing);
#   2. a shard killed with SIGKILL mid-run and started again journals the same
#      bytes, and merges to the same bytes;
#   3. a shard sent SIGTERM mid-run exits 143 with whole journal lines, and resumes;
#   4. a missing shard is named (exit 3); one unit with different bits in two
#      inputs is a determinism finding (exit 1); a shard without --out or
#      without a seed, conflicting shard sources, a folder rerun as another
#      shard and an OUT that is an input are one-line errors (exit 2).
#
#   tests/scale_out/check_shard_test.sh CLI WORKDIR
set -uo pipefail
cli=${1:?usage: check_shard_test.sh CLI WORKDIR}
work=${2:?usage: check_shard_test.sh CLI WORKDIR}
schema=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../docs/schema" && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
# 13 units of 13 properties (metamorphic.split_kv retired, issue 30), float32, 5 cases each: about 1.5 s a run. With
# attention_v2.coverage, whose table of cases per feature and feature pair
# the merge must carry as the unsharded run writes it.
args=(--builtin cpu --cases 5 --seed 7 --dtype float32 --property 'metamorphic.*'
      --property differential.ulp --property special.values --property attention_v2.coverage
      --no-timing -q)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
same() {  # file file
  if cmp -s "$1" "$2"; then return 0; fi
  fail "$1 differs from $2"
  diff <(head -c 3000 "$1") <(head -c 3000 "$2") | head -6
  return 1
}
units_of() { [ -f "$1/journal.jsonl" ] && grep -c '' "$1/journal.jsonl" || echo 0; }

"$cli" check "${args[@]}" --json full.json --junit full.xml > full.log 2>&1 \
  || { fail "unsharded check exited $?"; tail -5 full.log; exit 1; }

# 1. Three shards, two at a time.
if command -v parallel > /dev/null; then
  echo "running check shards 0/3 1/3 2/3 with GNU parallel -j2"
  parallel --will-cite -j2 --joblog joblog "$cli" check "${args[@]}" --out 'shard{}' --shard '{}/3' \
    '>' 'shard{}.log' '2>&1' ::: 0 1 2 || fail "parallel: a shard failed (joblog: $(cat joblog))"
else
  echo "GNU parallel is not installed (Debian package parallel): running the shards as plain background processes, two at a time"
  "$cli" check "${args[@]}" --out shard0 --shard 0/3 > shard0.log 2>&1 &
  p0=$!
  "$cli" check "${args[@]}" --out shard1 --shard 1/3 > shard1.log 2>&1 &
  p1=$!
  wait $p0 || fail "shard 0/3 exited $?"
  "$cli" check "${args[@]}" --out shard2 --shard 2/3 > shard2.log 2>&1 &
  p2=$!
  wait $p1 || fail "shard 1/3 exited $?"
  wait $p2 || fail "shard 2/3 exited $?"
fi
planned=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["units"]))' shard0/shard.json)
total=$(($(units_of shard0) + $(units_of shard1) + $(units_of shard2)))
[ "$total" -eq "$planned" ] && [ "$planned" -eq 13 ] || fail "the shards journaled $total units of $planned, expected 13"
for k in 0 1 2; do [ "$(units_of shard$k)" -gt 0 ] || fail "shard $k/3 journaled no unit"; done
grep -q '"cell": "varlen"' full.json || fail "the unsharded run has no attention_v2.coverage table"
for k in 0 1 2; do
  python3 "$schema/validate.py" "$schema/check-shard.schema.json" "shard$k/shard.json" \
    || fail "shard$k/shard.json does not match docs/schema/check-shard.schema.json"
done
"$cli" merge merged shard0 shard1 shard2 > merge.log 2>&1 || fail "merge exited $?: $(tail -3 merge.log)"
same full.json merged/gate.json && same full.xml merged/gate.xml \
  && echo "ok: merge of 3 check shards is byte-identical to the unsharded check (JSON and JUnit)"
# check --jobs 2 (cli/check_jobs.hpp): the same units side by side in two gate
# processes give the serial check's bytes; so do attention's per-type units
# (attention_v2 in two input types, attention_backward in two element types).
"$cli" check "${args[@]}" --jobs 2 --json jobs.json --junit jobs.xml > jobs.log 2>&1 \
  || fail "check --jobs 2 exited $?: $(tail -3 jobs.log)"
same full.json jobs.json && same full.xml jobs.xml \
  && echo "ok: check --jobs 2 is byte-identical to the serial check (JSON and JUnit)"
targs=(--builtin cpu --cases 2 --seed 7 --dtype float32 --dtype bfloat16
       --property attention_v2.coverage --property attention_backward.no_nan --no-timing -q)
"$cli" check "${targs[@]}" --json types1.json > types1.log 2>&1 || fail "serial per-type check exited $?"
"$cli" check "${targs[@]}" --jobs 3 --json types3.json > types3.log 2>&1 || fail "check --jobs 3 exited $?"
same types1.json types3.json && echo "ok: attention split per type in --jobs 3: the serial check's bytes"
grep -q '"dtype": "bfloat16"' types3.json || fail "the per-type check has no bfloat16 verdict"

# The whole run as one shard (0/1) is the unsharded run too.
"$cli" check "${args[@]}" --out whole --shard 0/1 > whole.log 2>&1 || fail "shard 0/1 exited $?"

# 2. SIGKILL mid-run (shard 0/1: every unit, one after another), then the same command.
"$cli" check "${args[@]}" --out killed --shard 0/1 > killed.log 2>&1 &
pid=$!
for _ in $(seq 1 3000); do [ "$(units_of killed)" -ge 2 ] && break; sleep 0.01; done
if kill -KILL $pid 2> /dev/null; then
  wait $pid 2> /dev/null
  before=$(units_of killed)
  [ "$before" -lt "$planned" ] || fail "the shard had finished before SIGKILL ($before units)"
  "$cli" merge merged-torn killed > merge-torn.log 2>&1
  rc=$?
  [ $rc -eq 3 ] && grep -q "shard 0/1 incomplete" merge-torn.log     || fail "merge of a killed shard: exit $rc, expected 3 naming it: $(tail -2 merge-torn.log)"
  "$cli" check "${args[@]}" --out killed --shard 0/1 > killed-rerun.log 2>&1 || fail "rerun after SIGKILL exited $?"
  grep -q "$before already journaled" killed-rerun.log || fail "the rerun did not resume: $(cat killed-rerun.log)"
  same killed/journal.jsonl whole/journal.jsonl
  "$cli" merge merged-killed killed > merge-killed.log 2>&1 || fail "merge after SIGKILL exited $?"
  same full.json merged-killed/gate.json && same full.xml merged-killed/gate.xml \
    && echo "ok: killed with SIGKILL after $before units and restarted: same bytes"
else
  fail "the shard ended before it could be killed"
fi

# 3. SIGTERM mid-run: exit 143, whole lines, and the rerun resumes.
"$cli" check "${args[@]}" --out termed --shard 0/1 > termed.log 2>&1 &
pid=$!
for _ in $(seq 1 3000); do [ "$(units_of termed)" -ge 2 ] && break; sleep 0.01; done
kill -TERM $pid 2> /dev/null || fail "the shard ended before SIGTERM"
wait $pid
rc=$?
if [ $rc -eq 143 ]; then echo "ok: SIGTERM: exit 143 after $(units_of termed) units"; else fail "SIGTERM: exit $rc, expected 143"; fi
grep -q "SIGTERM" termed.log || fail "SIGTERM: no message on stderr"
[ "$(tail -c 1 termed/journal.jsonl | od -An -c | tr -d ' ')" = '\n' ] || fail "SIGTERM left a partial line"
"$cli" check "${args[@]}" --out termed --shard 0/1 > termed-rerun.log 2>&1 || fail "rerun after SIGTERM exited $?"
same termed/journal.jsonl whole/journal.jsonl && echo "ok: resumed after SIGTERM: the same journal bytes"

# 4. A missing shard, a determinism finding, bad input.
"$cli" merge partial shard0 shard2 > partial.log 2>&1
rc=$?
[ $rc -eq 3 ] || fail "merge without shard 1/3 exited $rc, expected 3"
grep -q "shard 1/3 missing" partial.log || fail "the missing shard is not named: $(cat partial.log)"
cp -r shard1 shard1-copy
python3 - shard1-copy/journal.jsonl << 'EOF'
import json, sys
p = sys.argv[1]
lines = open(p).read().splitlines()
u = json.loads(lines[0])
for v in u["verdicts"]:
    if isinstance(v.get("measured"), (int, float)):
        v["measured"] = v["measured"] + 0.125
        break
lines[0] = json.dumps(u, separators=(",", ":"))
open(p, "w").write("\n".join(lines) + "\n")
EOF
"$cli" merge finding shard0 shard1 shard2 shard1-copy > finding.log 2>&1
rc=$?
[ $rc -eq 1 ] || fail "merge of two different copies of one shard exited $rc, expected 1"
grep -q "determinism finding: .*measured" finding.log || fail "no determinism finding: $(cat finding.log)"
"$cli" merge same shard0 shard1 shard2 shard1 > /dev/null 2>&1 || fail "merge of two equal copies of one shard exited $?"
one_line_exit2() {  # what, then the command
  local what=$1
  shift
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l <<< "$out")" -eq 1 ] || fail "$what: exit $rc, expected one line and exit 2: $out"
}
one_line_exit2 "--shard without --out" "$cli" check "${args[@]}" --shard 0/3
one_line_exit2 "--jobs 0" "$cli" check "${args[@]}" --jobs 0
one_line_exit2 "--jobs two" "$cli" check "${args[@]}" --jobs two
one_line_exit2 "--jobs with --shard" "$cli" check "${args[@]}" --jobs 2 --shard 0/3 --out jobshard
[ ! -e jobshard ] || fail "a refused --jobs shard created its folder"
one_line_exit2 "--shard without a seed" "$cli" check --builtin cpu --cases 5 --shard 0/3 --out noseed
[ ! -e noseed ] || fail "a refused shard created its folder"
one_line_exit2 "conflicting --shard and SLURM variables" \
  env SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_COUNT=3 "$cli" check "${args[@]}" --out conflict --shard 0/3
[ ! -e conflict ] || fail "a refused shard created its folder"
sum_before=$(cat shard0/* | md5sum)
one_line_exit2 "a folder of shard 0/3 rerun as shard 1/3" "$cli" check "${args[@]}" --out shard0 --shard 1/3
[ "$(cat shard0/* | md5sum)" = "$sum_before" ] || fail "the refused rerun changed the shard's folder"
"$cli" merge shard0 shard0 shard1 shard2 > clobber.log 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "same folder as INPUT" clobber.log || fail "merge into an input folder: exit $rc: $(cat clobber.log)"
[ "$(cat shard0/* | md5sum)" = "$sum_before" ] || fail "merge into an input folder changed it"

if [ $failures -eq 0 ]; then echo "check_shard_test: all passed"; else echo "check_shard_test: $failures failed"; fi
[ $failures -eq 0 ]
