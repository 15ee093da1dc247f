#!/usr/bin/env bash
# Parity of the C engine with the independent PyTorch reference (scripts/reference.py, float64).
# For every case of the grid: realpos init, perturb every parameter (scripts/reference.py
# perturb), random padded batch, `realpos dump` vs `reference.py dump`, compare loss, logits and
# every gradient; then 20-step AdamW trajectories; then the reference's own self-checks; then a
# corrupted gradient must be reported. One PASS/FAIL line per case. Tolerances: docs/checkpoint.md.
set -u
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
REF=scripts/reference.py
CONFIG=tests/fixtures/parity.ini
REALPOS=${REALPOS:-./realpos}
B=3 L=12 SCALE=0.2 STEPS=20
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ ! -x "$REALPOS" ]; then
  echo "FAIL parity: $REALPOS is not built"
  exit 1
fi

main() {
labels=() sets=() kinds=()
add_case() { # KIND LABEL OVERRIDES... (KIND: dump or trajectory)
  kinds+=("$1"); labels+=("$2"); shift 2
  local s=""
  for o in "$@"; do s+=" --set $o"; done
  sets+=("$s")
}

# Basic BERT variants (2 layers, 2 heads; padded batches throughout).
add_case dump post-absolute model.norm=post
add_case dump pre-absolute model.norm=pre
add_case dump post-no-position model.absolute_position=no
add_case dump pre-3layers-4heads model.norm=pre model.num_layers=3 model.num_heads=4
# Relative grid: mode x residual x norm x k (k=3 < L, k=20 > L-1; k is unused by none).
for norm in post pre; do
  for res in no yes; do
    add_case dump "$norm-absolute-none-res_$res" model.norm=$norm model.residual_attention=$res
    for rel in shaw method1 method2 method3 method4; do
      for k in 3 20; do
        add_case dump "$norm-$rel-k$k-res_$res" model.norm=$norm model.residual_attention=$res \
          model.absolute_position=no model.relative_position=$rel model.relative_k=$k
      done
    done
    for k in 3 20; do
      add_case dump "$norm-absolute+method4-k$k-res_$res" model.norm=$norm \
        model.residual_attention=$res model.relative_position=method4 model.relative_k=$k
    done
  done
done
add_case dump pre-method2-k3-res_mean-3layers model.norm=pre model.num_layers=3 \
  model.absolute_position=no model.relative_position=method2 model.residual_attention=yes \
  model.residual_attention_mean=yes
# AdamW trajectories.
add_case trajectory trajectory-post-absolute model.norm=post
add_case trajectory trajectory-pre-method4-k3-res_yes model.norm=pre model.absolute_position=no \
  model.relative_position=method4 model.residual_attention=yes
add_case trajectory trajectory-post-method1-k3-nobiascorr model.norm=post \
  model.relative_position=method1 optim.bias_correction=no

n=${#labels[@]}
setup_jobs="$work/setup.jobs" check_jobs="$work/check.jobs"
: >"$setup_jobs"; : >"$check_jobs"
declare -A broken=()
fail() { echo "FAIL ${labels[$1]}: $2"; broken[$1]=1; }

# 1. C init, then (one python process) perturb + batch for every case.
for ((i = 0; i < n; i++)); do
  d="$work/$i"; mkdir -p "$d"
  # shellcheck disable=SC2086
  if ! "$REALPOS" init "$CONFIG" ${sets[$i]} --out "$d/init.h5" >"$d/init.log" 2>&1; then
    fail "$i" "realpos init failed: $(tail -n 1 "$d/init.log")"; continue
  fi
  echo "perturb --checkpoint $d/init.h5 --out $d/ckpt.h5 --seed $((100 + i)) --scale $SCALE" \
    >>"$setup_jobs"
  echo "make-batch --config $d/ckpt.h5 --batch-size $B --seq-len $L --seed $((200 + i)) --pad \
    --out $d/batch.h5" >>"$setup_jobs"
done
$PY $REF jobs "$setup_jobs" || echo "FAIL parity: reference.py perturb/make-batch jobs failed"

# 2. C dumps, then (one python process) reference dumps and comparisons.
for ((i = 0; i < n; i++)); do
  [ -n "${broken[$i]:-}" ] && continue
  d="$work/$i" steps=()
  [ "${kinds[$i]}" = trajectory ] && steps=(--train-steps $STEPS)
  if ! "$REALPOS" dump --checkpoint "$d/ckpt.h5" --batch "$d/batch.h5" --out "$d/c.h5" \
      "${steps[@]}" >"$d/dump.log" 2>&1; then
    fail "$i" "realpos dump failed: $(tail -n 1 "$d/dump.log")"; continue
  fi
  what=dump; [ "${kinds[$i]}" = trajectory ] && what=trajectory
  echo "dump --checkpoint $d/ckpt.h5 --batch $d/batch.h5 --out $d/ref.h5 ${steps[*]}" \
    >>"$check_jobs"
  echo "compare $d/c.h5 $d/ref.h5 --what $what --summary ${labels[$i]}" >>"$check_jobs"
done
$PY $REF jobs "$check_jobs" 2>"$work/check.err"
grep -v '^reference.py: job failed: compare ' "$work/check.err" | sed 's/^/  /' >&2

# 3. The reference's own checks (HF formulas, finite differences, AdamW = torch, ...).
$PY $REF selftest

# 4. Sensitivity: a gradient off by 1% of its tensor's largest entry in one element, and a
# gradient scaled by 1.01, must each be reported.
base="$work/0/c.h5"
if [ -f "$base" ] && [ -f "$work/0/ref.h5" ]; then
  $PY - "$base" "$work" <<'EOF'
import shutil, sys, h5py, numpy as np
base, work = sys.argv[1], sys.argv[2]
name = "grad/bert/encoder/layer/1/attention/self/query/weight"
for tag, edit in (("element", lambda g: g.flat.__setitem__(7, g.flat[7] + 0.01 * np.abs(g).max())),
                  ("scaled", lambda g: g.__imul__(np.float32(1.01)))):
    shutil.copyfile(base, f"{work}/corrupt_{tag}.h5")
    with h5py.File(f"{work}/corrupt_{tag}.h5", "r+") as f:
        g = f[name][()]
        edit(g)
        f[name][...] = g
EOF
  for tag in element scaled; do
    out=$($PY scripts/compare.py "$work/corrupt_$tag.h5" "$work/0/ref.h5")
    if [ $? -ne 0 ] && echo "$out" | grep -q '^FAIL grad/bert/encoder/layer/1/attention/self/query/weight ' \
        && [ "$(echo "$out" | grep -c '^FAIL ')" -eq 1 ]; then
      echo "PASS parity detects a corrupted gradient ($tag)"
    else
      echo "FAIL parity does not detect a corrupted gradient ($tag):"; echo "$out" | grep FAIL
    fi
  done
else
  echo "FAIL parity: no output of the first case to corrupt"
fi
}

main | tee "$work/log"
! grep -q '^FAIL ' "$work/log"
