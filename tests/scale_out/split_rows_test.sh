#!/usr/bin/env bash
# Rows larger than one machine (issue 34, item 5; docs/scale-out.md):
#   1. a row of 2^LOG2N float32 items cut into CHUNKS chunks over SHARDS
#      shards: phase 1 (chunk states), `merge` (T6), phase 2 (every element
#      against the merged state) and the final `merge` give row-states.json and
#      split-rows.csv byte-identical to the unsharded `sweep --row-chunks`;
#   2. (unless "equality-only") a chunk's state is the same bytes on 1 and 2
#      threads; a missing chunk is named (exit 3, at either
#      merge); a copy of a shard that differs in one chunk is a determinism
#      finding (exit 1); a kernel whose chunk entropy is wrong (MUTANT) is
#      caught at the phase-1 merge (exit 1, the chunk named), as is one whose
#      merge_entropy_states is wrong (MERGE_MUTANT: every chunk right, the
#      merged row over its budget), while the same kernel without either bug
#      (GOOD) passes; bad input is a one-line error (exit 2) before any work.
#
#   split_rows_test.sh CLI WORKDIR LOG2N CHUNKS SHARDS [GOOD.so MUTANT.so MERGE_MUTANT.so | equality-only]
set -uo pipefail
cli=${1:?usage: split_rows_test.sh CLI WORKDIR LOG2N CHUNKS SHARDS [GOOD MUTANT | equality-only]}
work=${2:?} log2n=${3:?} chunks=${4:?} shards=${5:?}
good=${6:-} mutant=${7:-} merge_mutant=${8:-}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
args=(--builtin cpu --distribution gaussian --dtype float32 --min-log2-n "$log2n"
  --max-log2-n "$log2n" --row-chunks "$chunks")
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect() {  # rc what command...: runs it, logs to what.log, checks the exit code
  local want=$1 what=$2
  shift 2
  "$@" > "$what.log" 2>&1
  local rc=$?
  [ $rc -eq "$want" ] || { fail "$what exited $rc, expected $want"; tail -5 "$what.log"; }
  return 0
}
# Runs `sweep ... --shard k/SHARDS --out DIR/k` for every k, two at a time.
run_shards() {  # dir extra-args...
  local dir=$1 k pids=()
  shift
  for ((k = 0; k < shards; k++)); do
    "$cli" sweep "${args[@]}" "$@" --shard "$k/$shards" --out "$dir/$k" > "$dir-$k.log" 2>&1 &
    pids+=($!)
    if [ ${#pids[@]} -eq 2 ]; then
      wait "${pids[0]}" || fail "$dir shard ${pids[0]} exited $?"
      pids=("${pids[1]}")
    fi
  done
  for p in "${pids[@]}"; do wait "$p" || fail "$dir shard exited $?"; done
}
section() { mark=$failures; }  # ok "...": said only when the section had no failure
ok() { [ $failures -eq "$mark" ] && echo "ok: $*"; }
mark=0
chunk_lines() { cat "$@" 2> /dev/null | grep -vc '^#'; }

start=$(date +%s.%N)
expect 0 full "$cli" sweep "${args[@]}" --out full
echo "unsharded: $(date +%s.%N | awk -v s="$start" '{printf "%.1f", $1 - s}') s; $(tail -1 full.log)"

# 1. Phase 1, merge, phase 2, merge.
start=$(date +%s.%N)
mkdir -p p1 p2
run_shards p1
most=$(((chunks + shards - 1) / shards))
for ((k = 0; k < shards; k++)); do  # dealt round-robin: each shard ceil(C/N) chunks at most
  held=$(chunk_lines "p1/$k/chunks.txt")
  [ "$held" -le "$most" ] || fail "shard $k/$shards holds $held chunks of the row, expected at most $most"
  [ "$chunks" -lt "$shards" ] || [ "$held" -ge 1 ] || fail "shard $k/$shards holds no chunk"
done
[ "$(chunk_lines p1/*/chunks.txt)" -eq "$chunks" ] || fail "phase 1's shards hold $(chunk_lines p1/*/chunks.txt) chunks, expected $chunks"
expect 0 merge1 "$cli" merge states p1/*
cmp -s states/row-states.json full/row-states.json || fail "states/row-states.json differs from the unsharded run's"
run_shards p2 --state states/row-states.json
[ "$(chunk_lines p2/*/elements.txt)" -eq "$chunks" ] || fail "phase 2's shards hold $(chunk_lines p2/*/elements.txt) chunks, expected $chunks"
expect 0 merge2 "$cli" merge merged p2/*
echo "sharded ($shards shards, two at a time, and two merges): $(date +%s.%N | awk -v s="$start" '{printf "%.1f", $1 - s}') s"
ok=1
for f in row-states.json split-rows.csv; do
  cmp -s "merged/$f" "full/$f" || { fail "merged/$f differs from full/$f"; ok=0; }
done
[ $ok -eq 1 ] && ok "the merged split row is byte-identical to the unsharded run ($(grep -c '|' merged/split-rows.csv) row, $(awk -F, 'NR > 2 {print $18}' merged/split-rows.csv) elements checked)"
grep -q "row .*budget" merge1.log || fail "the phase-1 merge printed no row verdict"
awk -F, 'NR > 2 && ($19 != 0 || $17 != 0) {exit 1}' merged/split-rows.csv || fail "the cpu kernel's split row has elements or chunks over their bounds"

if [ "$good" = "equality-only" ] || [ -z "$good" ]; then
  [ $failures -eq 0 ] && echo "split_rows_test: all passed" && exit 0
  echo "split_rows_test: $failures failure(s)"
  exit 1
fi

section
# The reference's chunk state runs in blocks of 2^16 items on every core: a
# row of 2^17 in 2 chunks (two blocks each) gives the same bytes on 1 and 2 threads.
bargs=(--builtin cpu --distribution gaussian --dtype float32 --min-log2-n 17 --max-log2-n 17 --row-chunks 2)
OMP_NUM_THREADS=1 expect 0 omp1 "$cli" sweep "${bargs[@]}" --out omp1
OMP_NUM_THREADS=2 expect 0 omp2 "$cli" sweep "${bargs[@]}" --out omp2
for f in chunks.txt row-states.json split-rows.csv; do
  cmp -s "omp1/$f" "omp2/$f" || fail "omp1/$f differs from omp2/$f (1 and 2 threads)"
done
ok "a chunk's reference state is the same bytes on 1 and 2 threads"

section
# 2. A missing chunk: the shard that holds chunk 0 left out, at both merges.
k0=$(grep -l "|c0	" p1/*/chunks.txt | head -1 | cut -d/ -f2)
others=()
for ((k = 0; k < shards; k++)); do [ "$k" = "$k0" ] || others+=("p1/$k"); done
expect 3 missing1 "$cli" merge missing1 "${others[@]}"
grep -q "shard $k0/$shards missing" missing1.log || fail "the phase-1 merge without shard $k0 does not name it: $(cat missing1.log)"
[ ! -e missing1/row-states.json ] || fail "an incomplete phase 1 wrote row-states.json"
expect 3 missing2 "$cli" merge missing2 "${others[@]/p1/p2}"
grep -q "shard $k0/$shards missing.*|c0" missing2.log || fail "the final merge without shard $k0 does not name its chunk: $(cat missing2.log)"
ok "a missing shard is named at both merges (exit 3)"

section
# A determinism finding: a copy of shard k0's phase 2 with one number changed.
cp -r "p2/$k0" twin
sed -i '2s/\t[^\t]*$/\t0.5/' twin/elements.txt  # the chunk's sum of weights
expect 1 twin "$cli" merge twinned p2/* twin
grep -q "determinism finding: .*|c" twin.log || fail "two copies of a chunk with different bytes are no determinism finding: $(tail -3 twin.log)"
ok "a chunk with different bytes in two inputs is a determinism finding (exit 1)"

section
# The entropy mutant, caught at the phase-1 merge; the same kernel without the bug passes.
margs=(--plugin "$mutant" --dtype float32 --distribution gaussian --min-log2-n "$log2n" --max-log2-n "$log2n" --row-chunks "$chunks")
gargs=(--plugin "$good" --dtype float32 --distribution gaussian --min-log2-n "$log2n" --max-log2-n "$log2n" --row-chunks "$chunks")
for k in 0 1; do
  expect 0 "mutant-p1-$k" "$cli" sweep "${margs[@]}" --shard "$k/2" --out "mp1/$k"
  expect 0 "good-p1-$k" "$cli" sweep "${gargs[@]}" --shard "$k/2" --out "gp1/$k"
done
expect 1 mutant-merge "$cli" merge mstates mp1/0 mp1/1
grep -q "chunk .*|c[0-9]*: .*entropy.*OVER" mutant-merge.log || fail "the phase-1 merge does not name the mutant's chunk entropy: $(head -3 mutant-merge.log)"
expect 0 good-merge "$cli" merge gstates gp1/0 gp1/1
ok "the chunk-entropy mutant fails the phase-1 merge (exit 1), the same kernel without the bug passes"
section
# The merge mutant drops the incoming state when its maximum is below the
# running one, so a row whose chunks' log-sum-exps happen to rise from left to
# right (1 in C! rows) hides it: three rows (2^(L-2), 2^(L-1), 2^L), any of
# which shows it. (At L = 12 the single row of the other checks is such a row.)
xargs_=(--plugin "$merge_mutant" --dtype float32 --distribution gaussian --min-log2-n "$((log2n - 2))" --max-log2-n "$log2n" --row-chunks "$chunks")
for k in 0 1; do expect 0 "xmutant-p1-$k" "$cli" sweep "${xargs_[@]}" --shard "$k/2" --out "xp1/$k"; done
expect 1 xmutant-merge "$cli" merge xstates xp1/0 xp1/1
grep -q "row .*: OVER$" xmutant-merge.log || fail "the merge mutant's row is not over its budget: $(head -3 xmutant-merge.log)"
! grep -q "^chunk " xmutant-merge.log || fail "the merge mutant has a chunk over its budget (its chunks are right)"
ok "the merge_entropy_states mutant fails the phase-1 merge at the row (exit 1), its chunks pass"

section
# Bad input: one line, exit 2, nothing written.
expect 2 bad-chunks "$cli" sweep --builtin cpu --min-log2-n "$log2n" --max-log2-n "$log2n" --row-chunks 0 --out bad1
expect 2 bad-state-alone "$cli" sweep --builtin cpu --state states/row-states.json --out bad2
echo '{"format": "something else"}' > wrong.json
expect 2 bad-state "$cli" sweep "${args[@]}" --state wrong.json --shard 0/2 --out bad3
expect 2 clobber "$cli" sweep "${args[@]}" --state states/row-states.json --out states
expect 2 mixed "$cli" merge mixed p1/0 p2/1
expect 2 out-is-input "$cli" merge p2/0 p2/*
for f in bad-chunks bad-state-alone bad-state clobber mixed out-is-input; do
  [ "$(wc -l < $f.log)" -eq 1 ] || fail "$f: expected a one-line error, got: $(cat $f.log)"
done
for d in bad1 bad2 bad3 mixed; do [ ! -e "$d" ] || [ -z "$(ls -A "$d" | grep -v lock)" ] || fail "$d: written after an error: $(ls $d)"; done
cmp -s states/row-states.json full/row-states.json || fail "--out states clobbered the --state file"
ok "bad input is a one-line error (exit 2)"

[ $failures -eq 0 ] && echo "split_rows_test: all passed" && exit 0
echo "split_rows_test: $failures failure(s)"
exit 1
