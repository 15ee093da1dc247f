#!/usr/bin/env bash
# bf16 mixed precision (train.precision = bf16, `realpos dump --precision bf16`) against the
# float64 PyTorch reference (tests/reference/reference.py, which computes in full precision) on a
# grid of models: loss, logits and every gradient within the bf16 tolerances of compare.py
# (--precision bf16; justified in docs/bf16.md), and a 20-step AdamW trajectory within them.
# Each case runs the portable emulation (REALPOS_BF16_EMULATE=1: every host) and, where the CPU
# has avx512_bf16 or amx_bf16, oneDNN; the two must agree within 2e-3 of each tensor's scale (one
# product agrees to fp32 accumulation, tests/core/test_gemm; through the model an accumulation
# difference can move a downstream operand across a bf16 rounding boundary, one bf16 ulp = 2^-7
# of that element: measured worst 1.7e-4), and the bf16 dump must fail the fp32 tolerances (its
# products did run in bf16).
set -u
cd "$(dirname "$0")/../../.."
source tests/train/model/parity_lib.sh  # PY, REF, CONFIG, REALPOS, work; add_case
B=3 L=12 SCALE=0.2 STEPS=20
parity_need_realpos parity_bf16

hardware=0
"$REALPOS" --version | grep -q '^oneDNN.*bf16: available' && hardware=1
[ $hardware -eq 1 ] || echo "SKIP parity_bf16 oneDNN cases: skipped: no avx512_bf16 on this CPU" \
  "($("$REALPOS" --version | sed -n 's/.*bf16: not available on \(.*\) (no avx512_bf16.*/\1/p'))"

add_case dump post-absolute model.norm=post
add_case dump pre-absolute model.norm=pre
add_case dump post-method4-k3-res_yes model.absolute_position=no model.relative_position=method4 \
  model.relative_k=3 model.residual_attention=yes
add_case dump pre-shaw-k20 model.norm=pre model.absolute_position=no model.relative_position=shaw model.relative_k=20
add_case dump post-method1-k3 model.relative_position=method1 model.relative_k=3
add_case trajectory trajectory-post-absolute model.norm=post
add_case trajectory trajectory-pre-method4-k3-res_yes model.norm=pre model.absolute_position=no \
  model.relative_position=method4 model.residual_attention=yes

n=${#labels[@]}
: >"$work/setup.jobs"; : >"$work/check.jobs"
for ((i = 0; i < n; i++)); do
  d="$work/$i"; mkdir -p "$d"
  # shellcheck disable=SC2086
  "$REALPOS" init "$CONFIG" ${sets[$i]} --out "$d/init.h5" >"$d/init.log" 2>&1 ||
    { echo "FAIL ${labels[$i]}: realpos init failed: $(tail -n 1 "$d/init.log")"; continue; }
  echo "perturb --checkpoint $d/init.h5 --out $d/ckpt.h5 --seed $((300 + i)) --scale $SCALE"
  echo "make-batch --config $d/ckpt.h5 --batch-size $B --seq-len $L --seed $((400 + i)) --pad --out $d/batch.h5"
done >>"$work/setup.jobs"
$PY $REF jobs "$work/setup.jobs" || echo "FAIL parity_bf16: reference.py perturb/make-batch failed"

for ((i = 0; i < n; i++)); do
  d="$work/$i" what=dump steps=()
  [ -f "$d/ckpt.h5" ] || continue
  [ "${kinds[$i]}" = trajectory ] && what=trajectory steps=(--train-steps $STEPS)
  backends=(emulated); [ $hardware -eq 1 ] && backends+=(onednn)
  for be in "${backends[@]}"; do
    emulate=0; [ "$be" = emulated ] && emulate=1
    if ! REALPOS_BF16_EMULATE=$emulate "$REALPOS" dump --checkpoint "$d/ckpt.h5" --batch "$d/batch.h5" \
        --out "$d/$be.h5" --precision bf16 "${steps[@]}" >"$d/$be.log" 2>&1; then
      echo "FAIL ${labels[$i]} ($be): realpos dump failed: $(tail -n 1 "$d/$be.log")"; continue
    fi
    echo "compare $d/$be.h5 $d/ref.h5 --what $what --precision bf16 --summary ${labels[$i]}-bf16-$be"
  done >>"$work/check.jobs"
  echo "dump --checkpoint $d/ckpt.h5 --batch $d/batch.h5 --out $d/ref.h5 ${steps[*]}" >"$work/ref.$i.jobs"
done
cat "$work"/ref.*.jobs "$work/check.jobs" >"$work/all.jobs" 2>/dev/null
$PY $REF jobs "$work/all.jobs" 2>"$work/check.err" | tee "$work/check.out"
grep -v '^reference.py: job failed: compare ' "$work/check.err" | sed 's/^/  /' >&2

# oneDNN = the emulation up to rounding flips; bf16 is not fp32 (the fp32 tolerances must fail).
for ((i = 0; i < n; i++)); do
  d="$work/$i"; [ "${kinds[$i]}" = dump ] && [ -f "$d/emulated.h5" ] && [ -f "$d/ref.h5" ] || continue
  if [ $hardware -eq 1 ] && [ -f "$d/onednn.h5" ]; then
    $PY - "$d/onednn.h5" "$d/emulated.h5" "${labels[$i]}" <<'PYEOF'
import sys, h5py, numpy as np
a, b, label = sys.argv[1:]
worst, name = 0.0, ""
with h5py.File(a) as fa, h5py.File(b) as fb:
    names = []
    fb.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and n != "loss" else None)
    for n in names:
        x, y = fa[n][()].astype(np.float64), fb[n][()].astype(np.float64)
        # a bias's scale is at least 0.1 of its weight's (compare.py's BIAS_FLOOR: the key bias's
        # gradient is zero in exact arithmetic, rounding noise in any other)
        weight = n[: -len("bias")] + "weight"
        floor = 0.1 * np.abs(fb[weight][()]).max() if n.endswith("/bias") and weight in fb else 0.0
        scale = max(np.abs(y).max(), floor, 1e-30)
        r = np.abs(x - y).max() / scale
        if r > worst: worst, name = r, n
print(f"{'PASS' if worst <= 2e-3 else 'FAIL'} {label}: oneDNN bf16 = the emulation up to accumulation order "
      f"(worst {name}: {worst:.2e} of its scale, tol 2e-3)")
PYEOF
  fi
  if $PY tests/reference/compare.py "$d/emulated.h5" "$d/ref.h5" >/dev/null; then
    echo "FAIL ${labels[$i]}: the bf16 dump passes the fp32 tolerances (were the products bf16?)"
  else
    echo "PASS ${labels[$i]}: the bf16 dump fails the fp32 tolerances (its products are bf16)"
  fi
done
