#!/usr/bin/env bash
# Where a training step's time goes: CPU samples of `realpos bench` (perf record -F 1999, the bench's
# peak probes at start-up only: --probes start) bucketed by symbol into the parts of a step
# (scripts/dev/profile_buckets.py: products, attention, GELU, layer norms, conversions, ...).
# Start-up (weight initialisation, zeroing and first touch of the arenas, the peak probes) is left
# out of the step's shares by time: only samples after the last one in a start-up function (the
# probes run last before the first step) are bucketed. Bucketing start-up by symbol alone counted
# its arena zeroing (memset, 3.8% of a bf16 bert-mini record) and page faults (kernel) as the step's.
# Usage: scripts/dev/profile_step.sh OUT_DIR CONFIG.ini BENCH_ARGS...
#   e.g. scripts/dev/profile_step.sh /tmp/prof configs/bert-mini.ini --batch-size 32 --seq-len 128 \
#        --steps 20 --set train.precision=bf16
# Writes OUT_DIR/perf.data, OUT_DIR/bench.txt (the bench's own report) and OUT_DIR/parts.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { sed -n 2,12p "$0" >&2; exit 2; }
out="$1"; shift
command -v perf > /dev/null || { echo "profile_step: perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
mkdir -p "$out"
perf record -F 1999 -o "$out/perf.data" -- ./realpos bench "$@" --probes start > "$out/bench.txt" 2>&1 ||
  { cat "$out/bench.txt" >&2; exit 1; }
# the time of the last start-up sample (its symbols: weight initialisation, the peak probes)
cut=$(perf script -i "$out/perf.data" -F time,ip,sym 2> /dev/null |
  awk '/rng_normal|probe_gflops|gemm_bf16_shapes_gflops|sgemm_probe/ {t = $1} END {sub(":", "", t); print t}')
perf report -i "$out/perf.data" ${cut:+--time "$cut,"} --sort dso,symbol --stdio -F overhead,dso,sym 2> /dev/null |
  /usr/bin/python3 scripts/dev/profile_buckets.py | tee "$out/parts.txt"
echo "(samples from perf time ${cut:-the start} on: after the start-up)" | tee -a "$out/parts.txt"
grep -E "^bf16: the step's|real tokens/s|tokens/s" "$out/bench.txt" | head -3
