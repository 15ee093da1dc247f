#!/usr/bin/env bash
# scripts/dev/point_pair.sh: two builds' suite point at once, one a core, cores swapped each round;
# a round's line per round and the median [min..max] of the rounds' ratios; a build that fails, a
# missing build and a bad argument end it with a message naming them. Short points (20 steps) of
# the real binary on both sides: the verdicts read the output's form and arithmetic, not speeds.
source "$(dirname "$0")/../../lib.sh"
P=scripts/dev/point_pair.sh
if [ "$(nproc)" -lt 2 ]; then
  expect_error "point_pair: one CPU is refused by name" "needs 2 CPUs" "$P" --out "$tmp/pp" a="$RP" b="$RP"
  exit 0
fi
out=$("$P" --rounds 3 --task reverse --out "$tmp/pp" new="$RP" old="$RP" -- --set task.max_steps=20 2>&1); rc=$?
rounds=$(grep -c '^round [123]: new [0-9.]* s (cpu [01]), old [0-9.]* s (cpu [01]), new/old [0-9.]*$' <<<"$out")
swapped=$(grep -c '^round 1: new .* (cpu 0), old .* (cpu 1)\|^round 2: new .* (cpu 1), old .* (cpu 0)' <<<"$out")
want=$(grep -o 'new/old [0-9.]*$' <<<"$out" | awk '{ print $2 }' | sort -n |
  awk '{ v[NR] = $1 } END { printf "reverse, new/old, 3 rounds: median %.3f [%.3f..%.3f]", v[2], v[1], v[3] }')
if [ $rc -eq 0 ] && [ "$rounds" = 3 ] && [ "$swapped" = 2 ] && [ "$(tail -n 1 <<<"$out")" = "$want" ] &&
   [ -s "$tmp/pp/data/reverse-train.txt" ] && [ -s "$tmp/pp/data/reverse-test.txt" ]
then pass "point_pair: three rounds, cores swapped, the median and range of their ratios"
else fail "point_pair: three rounds, cores swapped, the median and range of their ratios" "status $rc: $out"; fi
printf '#!/bin/sh\n[ "$1" = finetune ] && { echo "broken build" >&2; exit 3; }\nexec "%s" "$@"\n' "$RP" > "$tmp/broken"
chmod +x "$tmp/broken"
expect_error "point_pair: a build whose run fails ends it, named" "b ($tmp/broken) failed" \
  "$P" --rounds 1 --task reverse --out "$tmp/pp" a="$RP" b="$tmp/broken" -- --set task.max_steps=5
expect_error "point_pair: a missing build is refused" "$tmp/none is not an executable" "$P" a="$RP" b="$tmp/none"
expect_error "point_pair: an unknown option is refused" "unknown argument '--steps'" "$P" --steps 5 a="$RP" b="$RP"
expect_error "point_pair: realpos arguments only after --" "extra arguments go after --" "$P" a="$RP" b="$RP" --set x=1
