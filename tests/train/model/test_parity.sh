#!/usr/bin/env bash
# Parity of the C engine with the independent PyTorch reference (tests/reference/reference.py, float64).
# Each case of the grid: `realpos init` with --set overrides, noise on every parameter
# (reference.py perturb), a random padded batch, `realpos dump` vs `reference.py dump`, then
# loss, logits and every gradient compared (one PASS/FAIL line per case). Then 20-step AdamW
# trajectories, the reference's own self-checks, and a corrupted gradient that must be reported.
# Tolerances and their justification: docs/checkpoint.md. Python runs in two batched processes
# (`reference.py jobs`) to pay the torch import once.
set -u
cd "$(dirname "$0")/../../.."
source tests/train/model/parity_lib.sh
B=3 L=12 SCALE=0.2 STEPS=20

# Basic BERT variants (2 layers, 2 heads unless stated; every batch has padded rows).
add_case dump post-absolute model.norm=post
add_case dump pre-absolute model.norm=pre
add_case dump post-no-position model.absolute_position=no
add_case dump pre-3layers-4heads model.norm=pre model.num_layers=3 model.num_heads=4
# Relative grid: mode x residual x norm x k (k=3 < L, k=20 > L-1; none ignores k).
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
# T5 buckets (the shared table), ALiBi, RoPE: mode x residual x norm; t5 also with 8 buckets
# clipped at distance 6 (< L), beside absolute positions (the drop-in), and rope at theta 100.
for norm in post pre; do
  for res in no yes; do
    for rel in t5 alibi rope; do
      add_case dump "$norm-$rel-res_$res" model.norm=$norm model.residual_attention=$res \
        model.absolute_position=no model.relative_position=$rel
    done
  done
done
add_case dump post-t5-8buckets-d6-res_yes model.absolute_position=no model.relative_position=t5 \
  model.t5_num_buckets=8 model.t5_max_distance=6 model.residual_attention=yes
add_case dump pre-absolute+t5 model.norm=pre model.relative_position=t5
add_case dump post-rope-theta100-3layers-4heads model.absolute_position=no model.relative_position=rope \
  model.rope_theta=100 model.num_layers=3 model.num_heads=4
add_case dump pre-alibi-res_mean-3layers-4heads model.norm=pre model.absolute_position=no \
  model.relative_position=alibi model.residual_attention=yes model.residual_attention_mean=yes \
  model.num_layers=3 model.num_heads=4
add_case dump pre-method2-k3-res_mean-3layers model.norm=pre model.num_layers=3 \
  model.absolute_position=no model.relative_position=method2 model.residual_attention=yes \
  model.residual_attention_mean=yes
# AdamW trajectories (weight decay 0.1, lr 1e-3; without bias correction the first steps are
# sqrt(1-beta2)/(1-beta1) = 3.2 times larger, hence lr 3e-4 there).
add_case trajectory trajectory-post-absolute model.norm=post
add_case trajectory trajectory-pre-method4-k3-res_yes model.norm=pre model.absolute_position=no \
  model.relative_position=method4 model.residual_attention=yes
add_case trajectory trajectory-post-t5-res_yes model.norm=post model.absolute_position=no \
  model.relative_position=t5 model.residual_attention=yes
add_case trajectory trajectory-pre-alibi model.norm=pre model.absolute_position=no model.relative_position=alibi
add_case trajectory trajectory-post-rope-res_yes model.norm=post model.absolute_position=no \
  model.relative_position=rope model.residual_attention=yes
add_case trajectory trajectory-post-method1-k3-nobiascorr model.norm=post \
  model.relative_position=method1 optim.bias_correction=no optim.lr=3e-4

# Writes "$work/corrupt_<tag>.h5": a copy of dump $1 with the gradient $2 corrupted.
corrupt() {
  $PY - "$1" "$2" "$work" <<'EOF'
import shutil, sys, h5py, numpy as np
source, name, work = sys.argv[1:]
for tag in ("element", "scaled"):
    shutil.copyfile(source, f"{work}/corrupt_{tag}.h5")
    with h5py.File(f"{work}/corrupt_{tag}.h5", "r+") as f:
        g = f[name][()]
        if tag == "element":  # one element off by 1% of the tensor's largest entry
            g.flat[7] += np.float32(0.01) * np.abs(g).max()
        else:  # the whole tensor 1% too large
            g *= np.float32(1.01)
        f[name][...] = g
EOF
}

run_all() {
  # 1-2. init, perturb, a padded batch; C dumps against reference dumps
  parity_compare_cases parity 100 --pad "" ""

  # 3. The reference's own checks (HF formulas, finite differences, AdamW = torch, ...).
  $PY $REF selftest

  # 4. Sensitivity: compare must flag a corrupted gradient, and only that tensor.
  local grad=grad/bert/encoder/layer/1/attention/self/query/weight out status
  if [ ! -f "$work/0/ref.h5" ]; then
    echo "FAIL parity: no output of the first case to corrupt"; return
  fi
  corrupt "$work/0/c.h5" "$grad"
  for tag in element scaled; do
    out=$($PY tests/reference/compare.py "$work/corrupt_$tag.h5" "$work/0/ref.h5"); status=$?
    if [ $status -ne 0 ] && [ "$(grep -c '^FAIL ' <<<"$out")" -eq 1 ] &&
        grep -q "^FAIL $grad " <<<"$out"; then
      echo "PASS parity detects a corrupted gradient ($tag:" \
        "$(grep '^FAIL' <<<"$out" | cut -d' ' -f3-))"
    else
      echo "FAIL parity does not detect a corrupted gradient ($tag):"; grep '^FAIL' <<<"$out"
    fi
  done
}

parity_need_realpos parity
run_all | tee "$work/log"
! grep -q '^FAIL ' "$work/log"
