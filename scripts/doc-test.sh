#!/usr/bin/env bash
# Documentation test: runs every softmax-audit command shown in README.md and
# docs/*.md against a build, so the documentation cannot drift from the tool.
#
#   scripts/doc-test.sh BUILD_DIR [--list]
#
# Taken from ```sh blocks: every line starting with `softmax-audit ` or
# `build/cli/softmax-audit `, in file order (later commands read what earlier
# ones wrote: gate.json, sweep-out/, variants.json). A trailing `# exits N`
# comment states the expected exit code (default 0). The ```toml block of
# docs/gate-spec.md is written to gate.toml first and checked on its own.
# They run in a scratch directory in which `build/` holds the CLI, the
# test suite's plugins and `build/libmykernel.so` (the outside example kernel,
# examples/outside_kernel), and `examples/` is the repository's.
#
# Sizes: the documented commands run as written except where a default would
# take minutes on a 2-core CI machine; then a smaller size is appended and
# printed (check/audit: --cases 3, sweep: --max-log2-n 12, audit: no sweep
# beyond 2^10). Each rewrite is shown next to the documented line.
set -uo pipefail

build=$(cd "${1:?usage: scripts/doc-test.sh BUILD_DIR [--list]}" && pwd)
list_only=0
[ "${2:-}" = "--list" ] && list_only=1
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cli=$build/cli/softmax-audit
[ -x "$cli" ] || { echo "doc-test: $cli not found; build the softmax-audit target first" >&2; exit 2; }

# file<TAB>line-number<TAB>command
extract() {
  local f
  for f in "$repo/README.md" "$repo"/docs/*.md; do
    awk -v F="${f#"$repo"/}" '
      /^```/ { if (inb) { inb = 0 } else { inb = 1; sh = ($0 ~ /^```(sh|bash|console)?[[:space:]]*$/) && ($0 != "```") } next }
      inb && sh && /^[[:space:]]*(build\/cli\/)?softmax-audit / { sub(/^[[:space:]]+/, ""); print F "\t" NR "\t" $0 }
    ' "$f"
  done
}

mapfile -t entries < <(extract)
if [ ${#entries[@]} -eq 0 ]; then echo "doc-test: no documented commands found" >&2; exit 2; fi
if [ $list_only -eq 1 ]; then printf '%s\n' "${entries[@]}"; exit 0; fi

work=$(mktemp -d "${TMPDIR:-/tmp}/sa-doc-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/build" "$work/bin"
ln -s "$build/cli" "$work/build/cli"
ln -s "$build/tests" "$work/build/tests"
ln -s "$build/tests/gate/libsa_gate_example_kernel.so" "$work/build/libmykernel.so"
ln -s "$repo/examples" "$work/examples"
ln -s "$cli" "$work/bin/softmax-audit"
awk '/^```toml/ { inb = 1; next } /^```/ { inb = 0 } inb' "$repo/docs/gate-spec.md" > "$work/gate.toml"
cd "$work" || exit 2
export PATH="$work/bin:$PATH" NO_COLOR=1

failures=0
run_one() {  # where, expected exit, documented line, command to run
  local where=$1 want=$2 doc=$3 cmd=$4 rc start secs
  start=$(date +%s)
  bash -c "$cmd" > out.txt 2>&1
  rc=$?
  secs=$(($(date +%s) - start))
  if [ "$rc" -eq "$want" ]; then
    echo "ok   $where (${secs} s, exit $rc): $doc"
  else
    echo "FAIL $where: exit $rc, expected $want: $doc"
    [ "$cmd" != "$doc" ] && echo "     ran: $cmd"
    tail -n 15 out.txt | sed 's/^/     | /'
    failures=$((failures + 1))
  fi
  if [ "$cmd" != "$doc" ] && [ "$rc" -eq "$want" ]; then echo "     ran: $cmd"; fi
}

if [ -s gate.toml ]; then
  run_one "docs/gate-spec.md (toml block)" 0 "softmax-audit check --builtin naive --spec gate.toml" \
    "softmax-audit check --builtin naive --spec gate.toml --cases 3"
fi

for e in "${entries[@]}"; do
  IFS=$'\t' read -r file line doc <<< "$e"
  want=0
  if [[ $doc =~ \#[[:space:]]*exits[[:space:]]+([0-9]+) ]]; then want=${BASH_REMATCH[1]}; fi
  cmd=${doc%%  #*}                      # drop a trailing comment
  cmd=${cmd%"${cmd##*[![:space:]]}"}    # and trailing blanks
  base=$cmd
  sub=$(awk '{print $2}' <<< "$cmd")
  case $sub in
    check) [[ $cmd == *--cases* || $cmd == *--list* ]] || cmd+=" --cases 3" ;;
    audit) [[ $cmd == *--cases* ]] || cmd+=" --cases 3 --sweep-max-log2-n 10" ;;
    sweep) cmd=${cmd/--max-log2-n 24/--max-log2-n 12} ;;
  esac
  run_one "$file:$line" "$want" "$base" "$cmd"
done

echo "doc-test: ${#entries[@]} documented commands (+ the gate spec), $failures failed"
[ $failures -eq 0 ]
