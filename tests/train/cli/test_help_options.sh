#!/usr/bin/env bash
# Every command's --help describes every option its usage line names (issue 29: `prepare --help`
# did not list --part), and every option a cmd_*.c parses is in its command's usage line.
source "$(dirname "$0")/../../lib.sh"
missing=""; commands=0
for c in $("$RP" --help 2>&1 | awk '/^  realpos /{ print $2 }' | sort -u); do
  commands=$((commands + 1))
  help=$("$RP" "$c" --help 2>&1); usage=$(head -n 1 <<<"$help")
  for o in $(grep -oE -- '--[a-z][a-z-]*' <<<"$usage" | sort -u); do
    sed -n '/^options:/,$p' <<<"$help" | grep -qE -- "^  $o( |$)" || missing+=" $c:$o"
  done
done
if [ "$commands" -gt 10 ] && [ -z "$missing" ]; then pass "the help of each of $commands commands describes every option of its usage line"
else fail "options missing from --help" "$missing ($commands commands)"; fi
# The options the command line parsers take (CliOption tables and flags) appear in some usage line.
usage_lines=$("$RP" --help 2>&1)
unlisted=""
for o in $(grep -hoE '\{"[a-z][a-z-]*", &[a-z_]+\}|cli_take_flag\(&argc, argv, "[a-z-]+"\)' train/cli/*.c | grep -oE '"[a-z-]+"' | tr -d '"' | sort -u); do
  grep -qE -- "--$o\b" <<<"$usage_lines" || unlisted+=" --$o"
done
if [ -z "$unlisted" ]; then pass "every option the commands parse is in a usage line"
else fail "options parsed but not in any usage line" "$unlisted"; fi
