#!/usr/bin/env bash
# Replays, through gcc builds of the fuzz harnesses (build/fuzz/replay_TARGET; make sanitize uses
# its own), the seed inputs (tests/fuzz/seeds.sh) and every regression input in
# tests/fuzz/regressions/TARGET/ (inputs that once crashed a harness): each must be loaded or
# rejected with an error, never crash, abort, leak (the harness checks, see tests/fuzz/fuzz.h) or hang
# (5 minutes for all of a target's inputs).
source "$(dirname "$0")/../../lib.sh"
replay_dir=${FUZZ_REPLAY_DIR:-build/fuzz}
ls "$replay_dir"/replay_* >/dev/null 2>&1 || { fail "fuzz replay" "no $replay_dir/replay_* (make)"; exit 1; }
REALPOS="$RP" bash tests/fuzz/seeds.sh "$tmp/seeds" || { fail "fuzz replay: seed inputs" "seeds.sh failed"; exit 1; }
for bin in "$replay_dir"/replay_*; do
  t=${bin##*/replay_}
  inputs=("$tmp/seeds/$t")
  regressions=$(ls "tests/fuzz/regressions/$t" 2>/dev/null | wc -l)
  [ "$regressions" -gt 0 ] && inputs+=("tests/fuzz/regressions/$t")
  if out=$(FUZZ_QUIET=1 TMPDIR="$tmp" OMP_NUM_THREADS=1 timeout 300 "$bin" "${inputs[@]}" 2>&1); then
    pass "fuzz replay $t: seeds and $regressions regression input(s) without a crash ($(tail -n1 <<<"$out"))"
  else
    fail "fuzz replay $t" "$(tail -n 5 <<<"$out")"
  fi
done
