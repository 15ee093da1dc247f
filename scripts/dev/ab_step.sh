#!/usr/bin/env bash
# Two realpos binaries' training step, interleaved: ROUNDS rounds of `realpos bench` with each binary
# (the order alternating between rounds), the same batches for both (the bench's draws are a function
# of the config); per round the ratio OLD / NEW of seconds per step, wall and CPU (user + sys, which a
# shared host's load inflates less), then their medians and [min..max]. Ratios above 1: NEW is faster.
# Usage: scripts/dev/ab_step.sh OLD NEW ROUNDS CONFIG.ini BENCH_ARGS...
#   e.g. scripts/dev/ab_step.sh ./realpos.base ./realpos 7 configs/synthetic.ini \
#        --lengths-from /tmp/reverse-2k.txt --steps 300 --warmup 5 --probes start
# OMP_NUM_THREADS is the caller's.
set -euo pipefail
[ $# -ge 4 ] || { sed -n 2,9p "$0" >&2; exit 2; }
old=$1 new=$2 rounds=$3; shift 3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
  for side in $order; do
    bin=$old; [ "$side" = new ] && bin=$new
    "$bin" bench "$@" --json "$out/$side.json" > "$out/$side.log" 2>&1 || { cat "$out/$side.log" >&2; exit 1; }
  done
  /usr/bin/python3 - "$out/old.json" "$out/new.json" "$r" <<'PY' | tee -a "$out/rounds.txt"
import json, sys
o, n = (json.load(open(f)) for f in sys.argv[1:3])
print(f"round {sys.argv[3]}: s/step old {o['seconds_per_step']:.6f} new {n['seconds_per_step']:.6f} "
      f"wall {o['seconds_per_step'] / n['seconds_per_step']:.3f}; CPU s/step old {o['cpu_seconds_per_step']:.6f} "
      f"new {n['cpu_seconds_per_step']:.6f} cpu {o['cpu_seconds_per_step'] / n['cpu_seconds_per_step']:.3f}; "
      f"real tok/s old {o['real_tokens_per_s']:.0f} new {n['real_tokens_per_s']:.0f}")
PY
done
/usr/bin/python3 - "$out/rounds.txt" <<'PY'
import re, statistics, sys
wall, cpu = [], []
for line in open(sys.argv[1]):
    wall.append(float(re.search(r"wall ([\d.]+)", line).group(1)))
    cpu.append(float(re.search(r"cpu ([\d.]+)", line).group(1)))
print(f"old/new over {len(wall)} rounds: wall {statistics.median(wall):.3f} [{min(wall):.3f}..{max(wall):.3f}], "
      f"CPU {statistics.median(cpu):.3f} [{min(cpu):.3f}..{max(cpu):.3f}]")
PY
