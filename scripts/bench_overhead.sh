#!/usr/bin/env bash
# Relative cost of the position modes and residual attention against the plain model, measured
# as the issue asks (tokens/s of whole training steps), interleaved and repeated so that drift in
# the machine's speed affects every variant alike: ROUNDS rounds of (plain, variants...), median
# tokens/s per variant. Usage: scripts/bench_overhead.sh [ROUNDS]   (run by make bench)
set -euo pipefail
cd "$(dirname "$0")/.."
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-Haswell}" OMP_WAIT_POLICY=PASSIVE
rounds=${1:-3}
out=build/bench; mkdir -p "$out"
# group | name | batch | seq | overrides
variants=(
  "seq128|plain (absolute)|32|128|"
  "seq128|method4 k=64|32|128|model.absolute_position=no model.relative_position=method4 model.relative_k=64"
  "seq128|residual|32|128|model.residual_attention=yes"
  "seq128|shaw k=64|32|128|model.absolute_position=no model.relative_position=shaw model.relative_k=64"
  "seq512|plain (absolute)|8|512|"
  "seq512|method4 k=511|8|512|model.absolute_position=no model.relative_position=method4 model.relative_k=511"
)
: >"$out/overhead.tsv"
for r in $(seq 1 "$rounds"); do
  for v in "${variants[@]}"; do
    IFS='|' read -r group name batch seq overrides <<<"$v"
    sets=(); for o in $overrides; do sets+=(--set "$o"); done
    ./realpos bench configs/bert-mini.ini "${sets[@]}" --batch-size "$batch" --seq-len "$seq" --steps 5 --warmup 1 \
      --json "$out/overhead-run.json" >/dev/null
    tps=$(/usr/bin/python3 -c "import json; print(json.load(open('$out/overhead-run.json'))['tokens_per_s'])")
    printf '%s\t%s\t%s\n' "$group" "$name" "$tps" >>"$out/overhead.tsv"
  done
done
/usr/bin/python3 - "$out/overhead.tsv" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    group, name, tps = line.rstrip("\n").split("\t")
    runs.setdefault((group, name), []).append(float(tps))
print(f"{'bert-mini, 2 threads':<30} {'median tok/s':>12} {'runs':>24} {'cost vs plain':>13}")
plain = {}
for (group, name), v in runs.items():
    med = statistics.median(v)
    if name.startswith("plain"):
        plain[group] = med
    cost = (1 - med / plain[group]) * 100
    label = f"{group} {name}"
    print(f"{label:<30} {med:>12.0f} {' '.join(f'{x:.0f}' for x in v):>24} {cost:>12.1f}%")
PY
