#!/usr/bin/env bash
# make bench: full training steps (forward, backward, AdamW) of realpos and of the PyTorch
# reference, side by side in one run, same shapes and threads. PyTorch runs in its best CPU
# configuration (tcmalloc preloaded, OMP_WAIT_POLICY=PASSIVE, threads = cores); realpos runs with
# the same OpenMP settings.
# Usage: scripts/bench.sh [--quick] [--only NAME]   Results: build/bench/results.json, then the
# interleaved overhead table of scripts/bench_overhead.sh (build/bench/overhead.tsv).
set -euo pipefail
cd "$(dirname "$0")/.."
export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-Haswell}"
threads=$(nproc)
steps=10; warmup=2; only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) steps=3; warmup=1 ;;
    --only) only="$2"; shift ;;
    *) echo "usage: $0 [--quick] [--only NAME]" >&2; exit 2 ;;
  esac
  shift
done
out=build/bench; mkdir -p "$out"
tcmalloc=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
[ -f "$tcmalloc" ] || { echo "bench: $tcmalloc missing (scripts/setup.sh installs libtcmalloc-minimal4)" >&2; exit 1; }

# name | config | batch | seq | overrides (space-separated section.key=value) | run torch (yes/no)
rows=(
  "mini|configs/bert-mini.ini|32|128||yes"
  "base|configs/bert-base.ini|8|128||yes"
  "mini-method4-k64|configs/bert-mini.ini|32|128|model.absolute_position=no model.relative_position=method4 model.relative_k=64|yes"
  "mini-residual|configs/bert-mini.ini|32|128|model.residual_attention=yes|yes"
  "mini-shaw-k64|configs/bert-mini.ini|32|128|model.absolute_position=no model.relative_position=shaw model.relative_k=64|no"
  "mini-method3-k16|configs/bert-mini.ini|32|128|model.absolute_position=no model.relative_position=method3 model.relative_k=16|no"
  "mini-seq512|configs/bert-mini.ini|8|512||yes"
  "mini-seq512-method4-k511|configs/bert-mini.ini|8|512|model.absolute_position=no model.relative_position=method4 model.relative_k=511|yes"
)

results=()
for row in "${rows[@]}"; do
  IFS='|' read -r name config batch seq overrides torch <<<"$row"
  [ -z "$only" ] || [ "$only" = "$name" ] || continue
  sets=(); for o in $overrides; do sets+=(--set "$o"); done
  echo "== $name: $config batch $batch seq $seq $overrides" >&2
  OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$threads ./realpos bench "$config" "${sets[@]}" --batch-size "$batch" --seq-len "$seq" \
    --steps "$steps" --warmup "$warmup" --json "$out/$name.realpos.json" >&2
  if [ "$torch" = yes ]; then
    LD_PRELOAD=$tcmalloc OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$threads /usr/bin/python3 scripts/reference.py bench \
      --config "$config" "${sets[@]}" --batch-size "$batch" --seq-len "$seq" --steps "$steps" --warmup "$warmup" \
      --threads "$threads" --label-frac 0.15 --json "$out/$name.torch.json" >&2
  else
    rm -f "$out/$name.torch.json"
  fi
  results+=("$name")
done

/usr/bin/python3 - "$out" "${results[@]}" <<'PY'
import json, os, sys
out, names = sys.argv[1], sys.argv[2:]
def load(p):
    return json.load(open(p)) if os.path.exists(p) else None
rows = []
base = {}
print(f"{'config':<26} {'realpos tok/s':>13} {'torch tok/s':>11} {'ratio':>6} {'GFLOP/s':>8} {'%peak':>6} "
      f"{'RSS MB':>7} {'torch RSS':>9} {'RSS ratio':>9} {'vs plain':>8}")
for n in names:
    r, t = load(f"{out}/{n}.realpos.json"), load(f"{out}/{n}.torch.json")
    ref = {"mini-method4-k64": "mini", "mini-residual": "mini", "mini-shaw-k64": "mini",
           "mini-method3-k16": "mini", "mini-seq512-method4-k511": "mini-seq512"}.get(n)
    rel = (r["tokens_per_s"] / base[ref] - 1) * 100 if ref in base else None
    base[n] = r["tokens_per_s"]
    row = {"name": n, "realpos": r, "torch": t,
           "speed_ratio": t and r["tokens_per_s"] / t["tokens_per_s"],
           "rss_ratio": t and r["peak_rss_mb"] / t["peak_rss_mb"],
           "peak_fraction": r["gflops"] / r["sgemm_peak_gflops"],
           "change_vs_plain_percent": rel}
    rows.append(row)
    fmt = lambda v, f: (f % v) if v is not None else "-"
    print(f"{n:<26} {r['tokens_per_s']:>13.0f} {fmt(t and t['tokens_per_s'], '%11.0f'):>11} "
          f"{fmt(row['speed_ratio'], '%6.2f'):>6} {r['gflops']:>8.1f} {100*row['peak_fraction']:>5.0f}% "
          f"{r['peak_rss_mb']:>7.0f} {fmt(t and t['peak_rss_mb'], '%9.0f'):>9} {fmt(row['rss_ratio'], '%9.2f'):>9} "
          f"{fmt(rel, '%+7.1f%%'):>8}")
json.dump(rows, open(f"{out}/results.json", "w"), indent=1)
print(f"sgemm peak measured in the same run: {rows[0]['realpos']['sgemm_peak_gflops']:.1f} GFLOP/s; "
      f"results in {out}/results.json")
PY

# The position-mode and residual costs, interleaved and repeated (the rows above run once each,
# in sequence, so their "vs plain" column carries the machine's drift).
[ -n "$only" ] || bash scripts/bench_overhead.sh 3
