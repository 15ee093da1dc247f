#!/usr/bin/env bash
# Unpadded batches (data.padding = none, issue 38) against the independent float64 PyTorch
# reference (tests/reference/reference.py). Each case: `realpos init` with --set overrides, noise
# on every parameter, a batch of 5 sequences of lengths 1, 2, k-1, k+1 and L (k = 4, L = 12);
# `realpos dump --padding none` (the real tokens back to back, attention per sequence) against
# `reference.py dump --per-sequence` (each sequence run on its own, no padding and no mask: no
# code in common with the engine's unpadded path); loss, logits and every parameter gradient
# compared with compare.py's fp32 tolerances (docs/checkpoint.md: loss 1e-5 relative, each tensor
# max|a-b| <= 1e-4 of its largest reference entry). The grid: every position scheme (absolute,
# shaw, method1-4, t5, alibi, rope) x residual attention off/on x Post-/Pre-LN; then 20-step AdamW
# trajectories unpadded (dropout off, as dump --train-steps trains), each step's loss and
# gradient norm within 1e-4 relative, the final weights within 1e-2 lr S. Prints one PASS/FAIL
# line per case, then the worst error per scheme. Then bf16 products, unpadded, against the same
# reference within compare.py's bf16 tolerances (loss 5e-3 relative, tensors 6e-2, docs/bf16.md).
set -u
cd "$(dirname "$0")/../../.."
source tests/train/model/parity_lib.sh
K=4 L=12 SCALE=0.2 STEPS=20
LENGTHS=1,2,$((K - 1)),$((K + 1)),$L
B=5
scheme_sets() { # SCHEME: the overrides of a position scheme
  case $1 in
    absolute) echo "model.absolute_position=yes model.relative_position=none" ;;
    *) echo "model.absolute_position=no model.relative_position=$1 model.relative_k=$K" ;;
  esac
}
SCHEMES="absolute shaw method1 method2 method3 method4 t5 alibi rope"
for norm in post pre; do
  for res in no yes; do
    for scheme in $SCHEMES; do
      # shellcheck disable=SC2046
      add_case dump "unpadded-$norm-$scheme-res_$res" model.norm=$norm model.residual_attention=$res \
        $(scheme_sets "$scheme")
    done
  done
done
i=0
for scheme in $SCHEMES; do  # one trajectory per scheme, Post/Pre-LN and residual alternating
  norm=post res=no
  [ $((i % 2)) -eq 1 ] && norm=pre
  [ $((i / 2 % 2)) -eq 1 ] && res=yes
  # shellcheck disable=SC2046
  add_case trajectory "unpadded-trajectory-$norm-$scheme-res_$res" model.norm=$norm \
    model.residual_attention=$res $(scheme_sets "$scheme")
  i=$((i + 1))
done

run_all() {
  local n=${#labels[@]} i d what
  parity_compare_cases parity_unpadded 300 "--lengths $LENGTHS" "--padding none" --per-sequence
  # bf16 products (train.precision = bf16), unpadded, against the same reference within compare.py's
  # bf16 tolerances (docs/bf16.md): Post-LN with residual attention and Pre-LN without, every scheme,
  # and two trajectories; the portable emulation and, where the CPU has bf16, oneDNN
  local backends=(emulated) be emulate bf16_jobs="$work/bf16.jobs"
  "$REALPOS" --version | grep -q '^oneDNN.*bf16: available' && backends+=(onednn)
  : >"$bf16_jobs"
  for ((i = 0; i < n; i++)); do
    d="$work/$i" what=dump steps=()
    [ -f "$d/ref.h5" ] || continue
    case ${labels[$i]} in
      unpadded-post-*-res_yes | unpadded-pre-*-res_no) ;;
      unpadded-trajectory-post-absolute-* | unpadded-trajectory-pre-method4-*)
        what=trajectory steps=(--train-steps $STEPS) ;;
      *) continue ;;
    esac
    for be in "${backends[@]}"; do
      emulate=0; [ "$be" = emulated ] && emulate=1
      if ! REALPOS_BF16_EMULATE=$emulate "$REALPOS" dump --checkpoint "$d/ckpt.h5" --batch "$d/batch.h5" \
          --out "$d/$be.h5" --padding none --precision bf16 "${steps[@]}" >"$d/$be.log" 2>&1; then
        echo "FAIL ${labels[$i]} bf16 $be: realpos dump failed: $(tail -n 1 "$d/$be.log")"; continue
      fi
      echo "compare $d/$be.h5 $d/ref.h5 --what $what --precision bf16 --summary ${labels[$i]}-bf16-$be"
    done >>"$bf16_jobs"
  done
  $PY $REF jobs "$bf16_jobs" 2>/dev/null | sed 's/ worst \([^ ]*\) .*rel_err=\([^ ]*\) (tol \([^)]*\)).*/ worst \1 rel_err=\2 (tol \3)/'

  # a layout name that does not exist is refused by name
  local out
  for cmd in "dump --checkpoint $work/0/ckpt.h5 --batch $work/0/batch.h5 --out $work/bad.h5" \
      "attention $work/0/ckpt.h5 --input $work/0/batch.h5 --out $work/bad.h5"; do
    # shellcheck disable=SC2086
    out=$("$REALPOS" $cmd --padding packed 2>&1)
    if [ $? -ne 0 ] && grep -qF -- "--padding: expected none, longest or max_length, got 'packed'" <<<"$out" &&
        [ ! -e "$work/bad.h5" ]; then
      echo "PASS ${cmd%% *} --padding packed is refused by name"
    else
      echo "FAIL ${cmd%% *} --padding packed: $out"
    fi
  done
  # the parity table: per scheme, the worst of each quantity over Post/Pre-LN x residual off/on
  # (rel_err as compare.py measures it; the trajectory column: the worst step's loss)
  for ((i = 0; i < n; i++)); do
    [ -f "$work/$i/ref.h5" ] && echo "${kinds[$i]} ${labels[$i]} $work/$i/c.h5 $work/$i/ref.h5"
  done | $PY -c '
import sys
import h5py
sys.path.insert(0, "tests/reference")
import compare
worst = {}
for line in sys.stdin:
    kind, label, a, b = line.split()
    scheme = label.split("-")[-2]
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        checks = (compare.compare_dump if kind == "dump" else compare.compare_trajectory)(fa, fb)
    row = worst.setdefault(scheme, dict.fromkeys(("loss", "logits", "gradients", "steps"), 0.0))
    for _, text in checks:
        if "rel_err=" in text:
            rel = float(text.split("rel_err=")[1].split()[0])
            if kind == "trajectory":
                key = "steps" if text.startswith("loss[") else None
            else:
                key = text.split()[0] if text.split()[0] in ("loss", "logits") else "gradients"
            if key:
                row[key] = max(row[key], rel)
print("worst rel_err per scheme (tol: loss 1e-5, logits and gradients 1e-4, 20-step loss 1e-4):")
print("  %-9s %9s %9s %9s %12s" % ("scheme", "loss", "logits", "gradients", "20-step loss"))
for scheme, r in worst.items():
    print("  %-9s %9.1e %9.1e %9.1e %12.1e" % (scheme, r["loss"], r["logits"], r["gradients"], r["steps"]))
'
}

parity_need_realpos parity_unpadded
run_all | tee "$work/log"
! grep -q '^FAIL ' "$work/log"
