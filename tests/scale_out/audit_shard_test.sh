#!/usr/bin/env bash
# Sharded audits (`audit --shard k/N`, issue 34): every shard runs its part of
# the gate and of the sweeps into its own folder and writes audit-shard.json,
# no report; `merge OUT FOLDER...` merges each step's shards and writes the
# report. Claims:
#   1. two shards run side by side and merged give the unsharded audit's
#      verdicts (every field but timing), its sweep rows (every column but
#      seconds), its report status and its exit code;
#   2. a missing shard is named and the merged audit is INCOMPLETE (exit 3);
#   3. a shard given twice, an OUT inside an input, and a shard with a drawn
#      seed (--seed 0, here from a Slurm array's variables) are one-line
#      errors (exit 2) before any work.
#
#   tests/scale_out/audit_shard_test.sh CLI WORKDIR PLUGIN [CASES]
set -uo pipefail
cli=${1:?usage: audit_shard_test.sh CLI WORKDIR PLUGIN [CASES]}
work=${2:?usage: audit_shard_test.sh CLI WORKDIR PLUGIN [CASES]}
plugin=${3:?usage: audit_shard_test.sh CLI WORKDIR PLUGIN [CASES]}
cases=${4:-3}
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
args=(--plugin "$plugin" --cases "$cases" --seed 7 --sweep-max-log2-n 6 --no-variants)
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$cli" audit "${args[@]}" --out full > full.log 2>&1
rc_full=$?
"$cli" audit "${args[@]}" --out s0 --shard 0/2 > s0.log 2>&1 &
p0=$!
"$cli" audit "${args[@]}" --out s1 --shard 1/2 > s1.log 2>&1 &
p1=$!
wait $p0; rc0=$?
wait $p1; rc1=$?
for k in 0 1; do
  [ -f s$k/audit-shard.json ] || { fail "shard $k/2 wrote no audit-shard.json"; tail -5 s$k.log; }
  [ ! -e s$k/report.html ] || fail "shard $k/2 wrote a report (only merge should)"
done
"$cli" merge merged s0 s1 > merge.log 2>&1
rc_merge=$?
[ "$rc_merge" -eq "$rc_full" ] || { fail "merge exited $rc_merge, the unsharded audit $rc_full"; tail -8 merge.log; }
[ -f merged/report.html ] && [ -f merged/report.json ] || fail "merge wrote no report"
python3 - "$work" <<'PY' || fail "the merged audit differs from the unsharded one (above)"
import csv, glob, json, os, sys
w = sys.argv[1]
def verdicts(path):
    vs = [v for r in json.load(open(path))["runs"] for v in r["verdicts"]]
    drop = ("seconds", "kernel_seconds")
    return sorted(json.dumps({k: v for k, v in x.items() if k not in drop}, sort_keys=True) for x in vs)
full = glob.glob(os.path.join(w, "full", "results-*.json"))
ok = len(full) == 1
for f in full:
    name = os.path.basename(f)[len("results-"):-len(".json")]
    m = os.path.join(w, "merged", "check-" + name, "gate.json")
    a, b = verdicts(f), verdicts(m)
    if a != b:
        ok = False
        print("verdicts of", name, "differ:", len(a), "vs", len(b))
        for x, y in zip(a, b):
            if x != y: print(" ", x[:300], "\n  ", y[:300]); break
def rows(path):
    with open(path) as fh:
        r = list(csv.reader(l for l in fh if not l.startswith("#")))
    i = r[0].index("seconds") if "seconds" in r[0] else None
    return sorted(tuple(c for j, c in enumerate(x) if j != i) for x in r[1:])
for d in ("sweep", "sweep-temperature"):
    a, b = rows(os.path.join(w, "full", d, "sweep.csv")), rows(os.path.join(w, "merged", d, "sweep.csv"))
    if a != b or not a:
        ok = False
        print(d, "rows differ:", len(a), "vs", len(b))
sa, sb = (json.load(open(os.path.join(w, x, "report.json")))["status"] for x in ("full", "merged"))
if sa != sb:
    ok = False
    print("report status", sa, "vs", sb)
print("merged audit: verdicts, sweep rows and status as unsharded (%s)" % sa if ok else "")
sys.exit(0 if ok else 1)
PY

# 2. A missing shard.
"$cli" merge partial s0 > partial.log 2>&1
rc=$?
[ "$rc" -eq 3 ] && grep -q "1/2" partial.log || { fail "merge of shard 0 alone exited $rc, expected 3 naming shard 1/2"; tail -5 partial.log; }

# 3. Bad input: one line, exit 2, nothing written.
"$cli" merge twice s0 s0 s1 > twice.log 2>&1
rc=$?
[ "$rc" -eq 2 ] && [ ! -e twice ] || fail "a shard given twice: exit $rc, expected 2 and nothing written"
"$cli" merge s0/inside s0 s1 > inside.log 2>&1
rc=$?
[ "$rc" -eq 2 ] && [ ! -e s0/inside ] || fail "OUT inside an input: exit $rc, expected 2 and nothing written"
SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=2 "$cli" audit --plugin "$plugin" --cases 3 --seed 0 --out drawn > drawn.log 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q "SLURM" drawn.log && [ ! -e drawn ] \
  || { fail "a Slurm array shard with --seed 0: exit $rc, expected 2 naming SLURM, nothing written"; cat drawn.log; }
for f in twice.log inside.log drawn.log; do
  [ "$(grep -c '' "$f")" -eq 1 ] || { fail "$f: the error is not one line"; cat "$f"; }
done

if [ "$failures" -eq 0 ]; then echo "audit_shard_test: all passed"; else echo "audit_shard_test: $failures failed"; exit 1; fi
