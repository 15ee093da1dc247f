#!/usr/bin/env bash
# scripts/dev/profile_compare.py: two profile_step.sh runs side by side, each part's share and its
# CPU milliseconds a step (share x the bench's CPU seconds); a part missing from a run is 0; a
# directory without parts or without the bench's CPU line is refused by name.
source "$(dirname "$0")/../../lib.sh"
mk() { # mk DIR CPU_SECONDS "part share" ...
  local dir=$1 cpu=$2; shift 2; mkdir -p "$dir"
  { printf '%-60s %s\n' "part of the step" "% of step samples"; for line in "$@"; do
      printf '%-60s %6s%%\n' "${line% *}" "${line##* }"; done; echo "(samples from perf time 1 on)"; } > "$dir/parts.txt"
  echo "realpos: 2 threads, 1000 tokens/s; per step: forward 0.1 s, CPU $cpu s; AMD EPYC" > "$dir/bench.txt"
}
mk "$tmp/a" 0.500 "products: oneDNN bf16 50.0" "GELU 10.0" "layer norms (with the residual add) 4.0"
mk "$tmp/b" 0.400 "products: oneDNN bf16 60.0" "GELU 5.0" "dropout 2.5"
out=$("$PY" scripts/dev/profile_compare.py before="$tmp/a" after="$tmp/b" 2>&1)
want="| products: oneDNN bf16 | 50.0% (250.0 ms) | 60.0% (240.0 ms) |
| GELU | 10.0% (50.0 ms) | 5.0% (20.0 ms) |
| layer norms (with the residual add) | 4.0% (20.0 ms) | 0.0% (0.0 ms) |
| dropout | 0.0% (0.0 ms) | 2.5% (10.0 ms) |"
if [ "$(tail -n 4 <<<"$out")" = "$want" ] && head -n 1 <<<"$out" | grep -qF "before (CPU 500 ms a step) | after (CPU 400 ms a step)"
then pass "profile_compare: shares and CPU ms a step side by side, missing parts as 0"
else fail "profile_compare: shares and CPU ms a step side by side, missing parts as 0" "$out"; fi
rm "$tmp/b/bench.txt"; touch "$tmp/b/bench.txt"
expect_error "profile_compare: a bench report without its CPU line is refused" "$tmp/b/bench.txt: no 'CPU N s'" \
  "$PY" scripts/dev/profile_compare.py before="$tmp/a" after="$tmp/b"
expect_error "profile_compare: one run is refused (usage)" "Usage" "$PY" scripts/dev/profile_compare.py before="$tmp/a"
