#!/bin/bash
# Every subcommand of `softmax-audit --help`, and every option of each
# subcommand's --help, appears in the bash and zsh completion scripts and in
# the man page (issue 35, item 7). The list comes from --help (CLI11's own
# rendering), not from the generator; the bash script must also load.
#   completion_test.sh CLI
set -u
cli=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
bash_s=$("$cli" completion bash) || fail "completion bash exited $?"
zsh_s=$("$cli" completion zsh) || fail "completion zsh exited $?"
man_s=$("$cli" man) || fail "man exited $?"
# roff writes '-' as '\-'
man_plain=$(printf '%s\n' "$man_s" | sed 's/\\-/-/g')
subs=$("$cli" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && /^  [a-z]/ {print $1}')
[ "$(echo "$subs" | wc -w)" -ge 8 ] || fail "found too few subcommands in --help: $subs"
for s in $subs; do
  grep -qw -- "$s)" <<< "$bash_s" || fail "bash completion lacks subcommand $s"
  grep -qw -- "$s)" <<< "$zsh_s" || fail "zsh completion lacks subcommand $s"
  grep -q -- "^\.SS \"softmax-audit $s\"" <<< "$man_plain" || fail "man page lacks subcommand $s"
  # Option rows of CLI11's table: "  -q,--quiet   ..." or "  --plugin TEXT  ...".
  opts=$("$cli" "$s" --help | grep -E '^ +-' | sed -E 's/^ +//; s/[ =].*//' | tr ',' '\n' | sort -u)
  [ -n "$opts" ] || fail "no options found in $s --help"
  # The man page section of this subcommand (up to the next .SS).
  section=$(printf '%s\n' "$man_plain" | awk -v h=".SS \"softmax-audit $s\"" '$0 == h {on = 1; next} /^\.SS / {on = 0} on')
  for o in $opts; do
    line=$(printf '%s\n' "$bash_s" | awk -v c="    $s)" '$0 == c {getline; print; exit}')
    case " ${line#*\'} " in *" $o "*) ;; *) fail "bash completion of $s lacks $o" ;; esac
    grep -q -- "$o" <<< "$zsh_s" || fail "zsh completion lacks $o"
    grep -q -- "$o" <<< "$section" || fail "man page section of $s lacks $o"
  done
done
# The script loads in bash and completes a subcommand and an option.
out=$(bash -c "$bash_s"$'\n''COMP_WORDS=(softmax-audit rep); COMP_CWORD=1; _softmax_audit; echo "${COMPREPLY[*]}"
COMP_WORDS=(softmax-audit check --cases-d); COMP_CWORD=2; _softmax_audit; echo "${COMPREPLY[*]}"') ||
  fail "the bash script does not load"
[ "$out" = "$(printf 'replay report\n--cases-dir')" ] || fail "bash completion gave: $out"
echo "completion and man page: ok"
