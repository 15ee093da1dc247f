#!/usr/bin/env bash
# OpenMP parallel regions a training step opens, by the source line that opens them, and how many of
# them inside another region (a team of one and a futex wake each; test_step fails on any): `realpos
# bench` with an LD_PRELOAD counter on GOMP_parallel (scripts/dev/region_counts.c), run for STEPS and
# for 2 x STEPS steps, the difference divided by STEPS (start-up and the peak probes cancel).
# Usage: scripts/dev/region_counts.sh STEPS CONFIG.ini BENCH_ARGS...
#   e.g. OMP_NUM_THREADS=2 scripts/dev/region_counts.sh 3 configs/bert-mini.ini --batch-size 32 \
#        --seq-len 128 --set train.precision=bf16
# REALPOS=BINARY for another build than ./realpos. Regions opened by shared libraries (oneDNN,
# OpenBLAS) are listed by library and offset.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { sed -n 2,10p "$0" >&2; exit 2; }
steps=$1; shift
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -fopenmp -shared -fPIC -o "$out/region_counts.so" \
  scripts/dev/region_counts.c -ldl
for n in "$steps" $((2 * steps)); do
  REGION_COUNTS_OUT="$out/counts.$n" LD_PRELOAD="$out/region_counts.so" "${REALPOS:-./realpos}" bench "$@" --steps "$n" \
    --warmup 0 --probes start > "$out/bench.$n.log" 2>&1 || { cat "$out/bench.$n.log" >&2; exit 1; }
done
/usr/bin/python3 - "$out/counts.$steps" "$out/counts.$((2 * steps))" "$steps" <<'PY'
import subprocess, sys
def load(path):
    return {(obj, at): (int(c), int(n)) for obj, at, c, n in (line.split() for line in open(path))}
short, long_, steps = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
rows = []
for key, (c, n) in long_.items():
    c0, n0 = short.get(key, (0, 0))
    if c > c0:
        rows.append(((c - c0) / steps, (n - n0) / steps, key))
rows.sort(reverse=True)
print(f"per step: {sum(r[0] for r in rows):.0f} regions, {sum(r[1] for r in rows):.0f} inside another")
for calls, nested, (obj, at) in rows:
    where = f"{obj} {at}"
    if obj.endswith("realpos") or "realpos." in obj.split("/")[-1]:
        lines = subprocess.run(["addr2line", "-f", "-i", "-e", obj, hex(int(at, 16) - 1)], capture_output=True,
                               text=True).stdout.split("\n")
        where = " <- ".join(f"{lines[i]} ({lines[i + 1].split('/')[-1]})" for i in range(0, len(lines) - 1, 2))
    print(f"{calls:8.1f} {nested:8.1f}  {where}")
PY
