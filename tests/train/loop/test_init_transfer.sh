#!/usr/bin/env bash
# Continued pretraining as a drop-in (Huang et al. 2020): `pretrain --init ABSOLUTE.h5 --set
# model.relative_position=MODE` takes the checkpoint as fine-tuning does (train/model/transfer.h):
# the same table of loaded / initialised tensors, the added relative tables at the value that makes
# their term vanish, so the new model's logits are the absolute model's for every mode (a randomly
# initialised table would change them); a shape conflict names the parameter; the note on changed
# [model] keys no longer says a relative mode "changes no parameter".
source "$(dirname "$0")/../../lib.sh"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
export OMP_NUM_THREADS=1
synthetic_corpus "$tmp" 60 60 11
tiny_pretrain_ini "$tmp/p.ini" model.vocab_size=65 train.max_steps=4 data.max_seq_len=24 model.hidden_dropout=0 \
  model.attention_dropout=0
"$RP" prepare "$tmp/p.ini" >/dev/null 2>&1 && "$RP" pretrain "$tmp/p.ini" >/dev/null 2>&1 ||
  { fail "a tiny absolute pretraining run"; exit 1; }
abs=$tmp/run/ckpt-0000004.h5
one=(--set train.max_steps=1 --set train.log_interval=1)

# the logits of a batch (realpos dump) of each model after --init with lr 0 (the transferred weights,
# unchanged by the one step) against the absolute model's
$PY - "$tmp/batch.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    ids = np.array([[2, 10, 4, 11, 12, 13, 14, 3], [2, 13, 14, 15, 4, 16, 17, 3]], np.int32)
    f["input_ids"] = ids
    f["token_type_ids"] = np.zeros_like(ids)
    f["attention_mask"] = np.ones_like(ids)
    labels = np.full_like(ids, -100); labels[0, 2] = 20; labels[1, 4] = 21
    f["labels"] = labels
PY
$PY scripts/h5seal.py "$tmp/batch.h5" >/dev/null
"$RP" dump --checkpoint "$abs" --batch "$tmp/batch.h5" --out "$tmp/abs-dump.h5" || fail "dump of the absolute model"
for mode in shaw method1 method2 method3 method4; do
  "$RP" pretrain "$tmp/p.ini" --init "$abs" "${one[@]}" --set optim.lr=0 --set model.relative_position=$mode \
    --set model.relative_k=4 --set train.run_dir="$tmp/$mode" >"$tmp/$mode.log" 2>&1; rc=$?
  "$RP" dump --checkpoint "$tmp/$mode/ckpt-0000001.h5" --batch "$tmp/batch.h5" --out "$tmp/$mode-dump.h5" 2>/dev/null
  diff=$($PY -c "
import h5py, numpy as np
a, b = h5py.File('$tmp/abs-dump.h5')['logits'][()], h5py.File('$tmp/$mode-dump.h5')['logits'][()]
print('%.3g' % (np.abs(a - b).max() / np.abs(a).max()))" 2>/dev/null)
  check "pretrain --init ABSOLUTE.h5 --set model.relative_position=$mode trains (status $rc); its logits are the absolute model's (relative difference $diff)" \
    $PY -c "import sys; sys.exit(not ($rc == 0 and '$diff' != '' and float('$diff') <= 1e-7))"
done
t=$tmp/method4.log
check "the transfer table of fine-tuning: the relative table initialised, the rest loaded" \
  bash -c "grep -qF 'parameters from $abs:' $t &&
           grep -qE '^  initialised +bert/encoder/layer/0/attention/self/distance_embedding/weight +\[9, 8\]$' $t &&
           grep -qE '^  26 loaded, 0 grown, 1 initialised, 0 dropped$' $t"
check "... with the line that says the added tables start where the scores stay the checkpoint's" \
  grep -qF "the added relative tables start at 0 everywhere (q_i·a_r + k_j·a_r = 0)" "$t"
check "method1-3 start at 1" grep -qF "the added relative tables start at 1 everywhere (Σ_t q_it k_jt a_rt = q_i·k_j)" "$tmp/method3.log"
check "the stored method4 table is zero after no update (lr 0)" $PY -c "import h5py, sys
sys.exit(bool(h5py.File('$tmp/method4/ckpt-0000001.h5')['model/bert/encoder/layer/0/attention/self/distance_embedding/weight'][()].any()))"
check "the note on model.relative_position no longer says it changes no parameter" \
  bash -c "grep -qF \"note: key 'model.relative_position' = method4 here, none in $abs (the parameters may differ\" $t &&
           ! grep -q 'relative_position.*changes no parameter' $t"
check "... and a key that changes no parameter is still noted so" \
  bash -c "'$RP' pretrain '$tmp/p.ini' --init '$abs' ${one[*]} --set model.hidden_dropout=0.2 --set train.run_dir='$tmp/drop' 2>&1 |
           grep -qF \"note: key 'model.hidden_dropout' = 0.2 here, 0 in $abs (it changes no parameter)\""
"$RP" pretrain "$tmp/p.ini" --init "$tmp/method4/ckpt-0000001.h5" "${one[@]}" --set model.relative_position=method4 \
  --set model.relative_k=2 --set train.run_dir="$tmp/conflict" >"$tmp/conflict.log" 2>&1
check "a shape conflict is fatal, naming the parameter and both shapes" grep -qF \
  "parameter 'bert/encoder/layer/0/attention/self/distance_embedding/weight': the checkpoint has shape [9, 8], the pretraining model needs [5, 8]" \
  "$tmp/conflict.log"
exit 0
