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
for mode in shaw method1 method2 method3 method4 t5; do
  k=(--set model.relative_k=4); [ $mode = t5 ] && k=() # t5 has no truncation (relative_k would be refused)
  "$RP" pretrain "$tmp/p.ini" --init "$abs" "${one[@]}" --set optim.lr=0 --set model.relative_position=$mode \
    "${k[@]}" --set train.run_dir="$tmp/$mode" >"$tmp/$mode.log" 2>&1; rc=$?
  "$RP" dump --checkpoint "$tmp/$mode/ckpt-0000001.h5" --batch "$tmp/batch.h5" --out "$tmp/$mode-dump.h5" 2>/dev/null
  diff=$($PY -c "
import h5py, numpy as np
a, b = h5py.File('$tmp/abs-dump.h5')['logits'][()], h5py.File('$tmp/$mode-dump.h5')['logits'][()]
print('%.3g' % (np.abs(a - b).max() / np.abs(a).max()))" 2>/dev/null)
  check "pretrain --init ABSOLUTE.h5 --set model.relative_position=$mode trains (status $rc); its logits are the absolute model's (relative difference $diff)" \
    $PY -c "import sys; sys.exit(not ($rc == 0 and '$diff' != '' and float('$diff') <= 1e-7))"
done
t=$tmp/method4.log tab=$tmp/method4/parameters.txt
check "the transfer table of fine-tuning, in RUN_DIR/parameters.txt: the relative table initialised, the rest loaded" \
  bash -c "grep -qF 'parameters from $abs:' $tab &&
           grep -qE '^  initialised +bert/encoder/layer/0/attention/self/distance_embedding/weight +\[9, 8\]$' $tab &&
           grep -qE '^  26 loaded, 0 grown, 1 initialised, 0 dropped$' $tab"
check "... the launch logs its counts and where the table is, not the table" \
  bash -c "grep -qF 'initialised weights from $abs: 26 loaded, 0 grown, 1 initialised, 0 dropped ($tmp/method4/parameters.txt)' $t &&
           ! grep -qF 'parameters from $abs:' $t"
check "... with the line that says the added tables start where the scores stay the checkpoint's" \
  grep -qF "the added relative tables start at 0 everywhere (q_i·a_r + k_j·a_r = 0)" "$tab"
check "method1-3 start at 1" grep -qF "the added relative tables start at 1 everywhere (Σ_t q_it k_jt a_rt = q_i·k_j)" "$tmp/method3/parameters.txt"
check "t5: its shared table added at zero, and the log says step 0's outputs are the checkpoint's" \
  bash -c "grep -qE '^  initialised +bert/encoder/relative_attention_bias/weight +\[32, 2\]$' $tmp/t5/parameters.txt &&
           grep -qF \"none checkpoint -> t5: step 0's outputs are exactly the checkpoint model's (the t5 table starts where its term vanishes)\" $tmp/t5.log"
"$RP" pretrain "$tmp/p.ini" --init "$abs" "${one[@]}" --set model.relative_position=alibi \
  --set train.run_dir="$tmp/alibi" >"$tmp/alibi.log" 2>&1
check "alibi: the log says the outputs change from step 0 (nothing to start neutral)" \
  grep -qF "none checkpoint -> alibi: step 0's outputs differ from the checkpoint model's (ALiBi's bias is added, and it has no parameters that could start at zero)" "$tmp/alibi.log"
"$RP" pretrain "$tmp/p.ini" --init "$abs" "${one[@]}" --set model.relative_position=method4 --set model.relative_k=4 \
  --set train.run_dir="$tmp/verbose" --verbose >"$tmp/verbose.log" 2>&1
check "--verbose prints the table too" grep -qF "parameters from $abs:" "$tmp/verbose.log"
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
