#!/usr/bin/env bash
# scripts/dev/gemm_ceiling (the step's sgemm calls recorded and replayed) sees every GEMM of the
# step: in absolute mode and Methods 1-3 the FLOPs of the calls it records equal
# model_flops_per_step exactly, and with Shaw or Method 4 they equal bench_table.py's model of the
# relative kernels (flops_per_step), the figure behind make bench's "FLOP overhead". A GEMM the
# FLOP count misses, or a relative block plan the table's model does not follow, fails here.
source "$(dirname "$0")/../../lib.sh"

if scripts/dev/gemm_ceiling.sh --replays 1 configs/tiny.ini --batch-size 2 --seq-len 8 --steps 2 --warmup 0 \
    >"$tmp/build.out" 2>&1; then pass "gemm_ceiling builds and runs"
else fail "gemm_ceiling builds and runs" "$(tail -c 400 "$tmp/build.out")"; exit 0; fi
tool=build/profile/gemm_ceiling

# mode k B L (tiny: hidden 32, 2 heads, d = 16): blocks of 32 rows at L = 64; k = 70 > L - 1
cases=("none 0 2 16" "method1 8 2 32" "method2 8 2 48" "method3 8 2 32" "method3 5 2 64" "method3 70 1 64" "shaw 8 2 32" "method4 8 3 40" "method4 70 2 64"
       "shaw 20 1 64")
for c in "${cases[@]}"; do
  read -r mode k B L <<<"$c"
  sets=(--set model.relative_k="$((k > 0 ? k : 8))")
  [ "$mode" = none ] || sets+=(--set model.absolute_position=no --set model.relative_position="$mode")
  name="$mode k=$k B=$B L=$L"
  if ! OMP_NUM_THREADS=1 "$tool" --replays 1 configs/tiny.ini "${sets[@]}" --batch-size "$B" --seq-len "$L" \
      --steps 2 --warmup 0 --json "$tmp/run.json" >"$tmp/out" 2>&1; then
    fail "gemm_ceiling $name" "$(tail -c 300 "$tmp/out")"; continue
  fi
  ratio=$(awk -F' [|] ' '$1 == "1" { print $6 }' "$tmp/out")
  "$RP" config configs/tiny.ini "${sets[@]}" >"$tmp/effective.ini"
  "$PY" - "$tmp/effective.ini" "$B" "$L" "$ratio" "$name" "$tmp/run.json" <<'PY'
import json, sys
sys.path.insert(0, "scripts/dev")
from bench_table import flops_per_step, load_model_config
ini, B, L, ratio, name = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
model = load_model_config(ini)
M = json.load(open(sys.argv[6]))["labelled"]  # the synthetic batch's MLM labels
model_flops, all_flops = flops_per_step(model, B, L, M)
expected = all_flops / model_flops
try:
    got = float(ratio)
except ValueError:
    got = None
ok = got is not None and abs(got - expected) < 2e-6 and (not name.startswith(("none", "method1")) or got == 1.0)
print(("PASS " if ok else "FAIL ") + f"recorded GEMM FLOPs over model FLOPs, {name}" +
      ("" if ok else f": recorded {ratio}, expected {expected:.6f}"))
PY
done
