#!/usr/bin/env bash
# Documentation test: runs every softmax-audit command shown in README.md,
# docs/*.md and examples/*/README.md against a build, so the documentation
# cannot drift from the tool. It also checks that every relative link in those
# files and in every other folder's README.md resolves, and that
# a code block marked `<!-- doc-test: same as FILE -->` is FILE, whole.
#
#   scripts/doc-test.sh BUILD_DIR [--list]
#
# Taken from ```sh blocks: every line starting with `softmax-audit ` or
# `build/cli/softmax-audit `, and the lines that build an example
# (`cmake -S examples/X -B build-Y`, `cmake --build build-Y`), in file order
# (later commands read what earlier ones wrote: gate.json, sweep-out/,
# variants.json, build-kernel/). A trailing `# exits N` comment states the
# expected exit code (default 0). The ```toml block of docs/gate-spec.md is
# written to gate.toml first and checked on its own. They run in a scratch
# directory laid out like a checkout with a build: `build/` holds the CLI and
# the test suite's plugins, `examples/` and `include/` are the repository's.
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
  for f in "${documented[@]}"; do
    awk -v F="${f#"$repo"/}" '
      /^```/ { if (inb) { inb = 0 } else { inb = 1; sh = ($0 ~ /^```(sh|bash|console)?[[:space:]]*$/) && ($0 != "```") } next }
      inb && sh && /^[[:space:]]*(build\/cli\/)?softmax-audit / { sub(/^[[:space:]]+/, ""); print F "\t" NR "\t" $0 }
      inb && sh && /^cmake (-S examples\/[A-Za-z0-9_]+ -B build-[A-Za-z0-9_-]+|--build build-[A-Za-z0-9_-]+)[[:space:]]*$/ { print F "\t" NR "\t" $0 }
    ' "$f"
  done
}

# Relative links ([text](path) and images) must name a file or folder that
# exists, relative to the page, inside the repository; web links and in-page
# anchors are not followed.
check_links() {
  local f dir target bad=0
  for f in "${documented[@]}" "$repo"/*/README.md "$repo"/*/*/README.md; do
    [ -f "$f" ] || continue
    case ${f#"$repo"/} in build*) continue ;; esac   # build trees hold others' pages
    dir=$(dirname "$f")
    while IFS= read -r target; do
      target=${target#\](}; target=${target%)}; target=${target%%#*}
      case $target in ''|http://*|https://*|mailto:*) continue ;; esac
      if [ ! -e "$dir/$target" ]; then
        echo "FAIL ${f#"$repo"/}: link to '$target', which does not exist"
        bad=$((bad + 1))
      elif [[ $(realpath -m "$dir/$target") != "$(realpath "$repo")"/* ]]; then
        echo "FAIL ${f#"$repo"/}: link to '$target', outside the repository (a user's clone has nothing there)"
        bad=$((bad + 1))
      fi
    done < <(grep -oE '\]\([^)[:space:]]+\)' "$f")
  done
  return $bad
}

# A block right after `<!-- doc-test: same as FILE -->` must equal FILE.
check_copies() {
  local f line file bad=0
  for f in "${documented[@]}"; do
    while IFS=$'\t' read -r line file; do
      if ! diff -q <(awk -v L="$line" 'NR > L && /^```/ { if (inb) exit; inb = 1; next } inb' "$f") "$repo/$file" > /dev/null; then
        echo "FAIL ${f#"$repo"/}:$line: the block differs from $file"
        bad=$((bad + 1))
      fi
    done < <(awk '/^<!-- doc-test: same as [^ ]+ -->/ { print NR "\t" $5 }' "$f")
  done
  return $bad
}

documented=("$repo/README.md" "$repo"/docs/*.md "$repo"/examples/*/README.md)
mapfile -t entries < <(extract)
if [ ${#entries[@]} -eq 0 ]; then echo "doc-test: no documented commands found" >&2; exit 2; fi
if [ $list_only -eq 1 ]; then printf '%s\n' "${entries[@]}"; exit 0; fi

work=$(mktemp -d "${TMPDIR:-/tmp}/sa-doc-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/build" "$work/bin"
ln -s "$build/cli" "$work/build/cli"
ln -s "$build/tests" "$work/build/tests"
ln -s "$repo/examples" "$work/examples"
ln -s "$repo/include" "$work/include"
ln -s "$cli" "$work/bin/softmax-audit"
awk '/^```toml/ { inb = 1; next } /^```/ { inb = 0 } inb' "$repo/docs/gate-spec.md" > "$work/gate.toml"
cd "$work" || exit 2
export PATH="$work/bin:$PATH" NO_COLOR=1

failures=0
check_links || failures=$((failures + $?))
check_copies || failures=$((failures + $?))
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
    audit) [[ $cmd == *--cases* ]] || cmd+=" --cases 3 --sweep-max-log2-n 10"
           # A built-in kernel this machine cannot run (CUDA without a device) makes
           # the audit INCOMPLETE, exit 3, as its report says; that is not a doc error.
           [ "$want" -eq 0 ] && cmd="$cmd > audit.log 2>&1; rc=\$?; cat audit.log; \
if [ \$rc -eq 3 ] && grep -q '^Not audited here (no device)' audit.log; then exit 0; fi; exit \$rc" ;;
    sweep) cmd=${cmd/--max-log2-n 24/--max-log2-n 12} ;;
  esac
  run_one "$file:$line" "$want" "$base" "$cmd"
done

echo "doc-test: ${#entries[@]} documented commands (+ the gate spec, links, copies), $failures failed"
[ $failures -eq 0 ]
