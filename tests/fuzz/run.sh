#!/usr/bin/env bash
# make fuzz: run each libFuzzer harness for SECONDS, as many at a time as there are cores, from
# seed inputs built from the test fixtures, keeping the grown corpus in BUILD/corpus/TARGET.
# Inputs that crash, leak, time out or run out of memory are copied to
# tests/fuzz/regressions/TARGET/ (replayed by `make test` through tests/train/cli/test_fuzz_replay.sh);
# the run fails if there are any.
#   bash tests/fuzz/run.sh BUILD SECONDS TARGET...     (make fuzz FUZZ_SECONDS=600)
set -u
cd "$(dirname "$0")/../.."
build=$1 seconds=$2; shift 2
targets=("$@")
jobs=${FUZZ_JOBS:-$(nproc)}
export FUZZ_QUIET=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
export TMPDIR=${TMPDIR:-$([ -d /dev/shm ] && echo /dev/shm || echo /tmp)}

bash tests/fuzz/seeds.sh "$build/seeds" || exit 1

run_one() {
  local t=$1 corpus=$build/corpus/$1 artifacts=$build/artifacts/$1/
  rm -rf "$artifacts"; mkdir -p "$corpus" "$artifacts"
  local max_len=8192
  [ "$t" = checkpoint ] && max_len=65536
  local TIMEFORMAT='%U %S' # CPU seconds (user, system) of the fuzzer, for the summary
  { time "$build/fuzz_$t" -max_total_time="$seconds" -max_len=$max_len -timeout=20 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$artifacts" "$corpus" "$build/seeds/$t" \
      >"$build/logs/$t.log" 2>&1; } 2>"$build/logs/$t.cpu"
}
mkdir -p "$build/logs"
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  echo "fuzzing $t for ${seconds}s"
  run_one "$t" &
done
wait

found=0
for t in "${targets[@]}"; do
  log=$build/logs/$t.log
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  cpu=$(awk '{printf "%.1f", ($1 + $2) / 60}' "$build/logs/$t.cpu" 2>/dev/null)
  mkdir -p "tests/fuzz/regressions/$t"
  new=0
  for a in "$build/artifacts/$t"/*; do
    [ -f "$a" ] || continue
    cp "$a" "tests/fuzz/regressions/$t/"
    new=$((new + 1))
  done
  found=$((found + new))
  printf '%-12s %10s runs in %ss (%s CPU-minutes), %s, %d finding(s)%s\n' "$t" "${runs:-?}" "$seconds" \
    "${cpu:-?}" "${cov:-cov: ?}" "$new" \
    "$([ "$new" -gt 0 ] && echo " -> tests/fuzz/regressions/$t/ (log: $log)")"
  [ "$new" -gt 0 ] && grep -m1 -A12 'ERROR\|==.*==\|fuzz_' "$log" | sed 's/^/    /'
done
[ "$found" -eq 0 ]
