#!/usr/bin/env bash
# realpos finetune / predict end to end on the project's own fixtures (tests/fixtures/finetune):
# the transfer table for each kind of mismatch, shape conflicts and disallowed [model] changes,
# learning a trivially learnable task, predict = finetune's dev predictions (classification,
# regression, SQuAD), SQuAD scores against an independent Python implementation of the official
# formula, malformed TSV / JSON input; checkpoints, kill -9 / SIGTERM and --resume, dev evaluation
# every task.eval_every steps and the best checkpoint.
source "$(dirname "$0")/../../lib.sh"
FX=tests/fixtures/finetune
work=$tmp
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
has() { grep -qE -- "$2" "$1"; }

# checkpoints: absolute positions (the MLM head, no pooler) and relative-only method4 k = 4
"$RP" init $FX/tiny.ini --out "$work/abs.h5" 2>/dev/null || fail "init abs checkpoint"
"$RP" init $FX/tiny.ini --set model.absolute_position=no --set model.relative_position=method4 \
  --set model.relative_k=4 --out "$work/rel.h5" 2>/dev/null || fail "init rel checkpoint"

common=(--set train.threads=1 --set task.batch_size=8 --set task.lr=1e-3 --set train.log_interval=1000)
sst=(--set task.glue_task=sst2 --set task.train_file=$FX/sst_train.tsv --set task.dev_file=$FX/sst_dev.tsv)

# ---- transfer table -----------------------------------------------------------------------------
"$RP" finetune /dev/null "${sst[@]}" "${common[@]}" --set task.init_checkpoint="$work/abs.h5" \
  --set task.epochs=10 --set task.max_seq_len=16 --set train.run_dir="$work/sst" >"$work/sst.out" 2>"$work/sst.err"
check "finetune SST-2 layout exits 0" test $? -eq 0
t="$work/sst/parameters.txt" # the parameter table is in the run directory, the log has its counts
check "the launch summary names the counts and the table's file" has "$work/sst.err" \
  "^  parameters: 37 loaded, 0 grown, 4 initialised, 5 dropped from .*/abs.h5$"
check "the launch prints neither the configuration nor the table without --verbose" \
  bash -c "! grep -qE '^# effective configuration|^  loaded ' '$work/sst.err'"
check "table: encoder loaded (word embeddings, layer 1 FFN, shapes)" has "$t" \
  "^  loaded +bert/embeddings/word_embeddings/weight +\[115, 32\]$"
check "table: pooler newly initialised (the checkpoint has none)" has "$t" "^  initialised +bert/pooler/dense/weight +\[32, 32\]$"
check "table: classifier newly initialised" has "$t" "^  initialised +classifier/weight +\[2, 32\]$"
check "table: MLM head dropped" has "$t" "^  dropped +cls/predictions/transform/dense/weight +\[32, 32\]$"
check "table: summary 37 loaded, 4 initialised, 5 dropped" has "$t" "^  37 loaded, 0 grown, 4 initialised, 5 dropped$"
check "learns a learnable task: dev accuracy 1.0" has "$work/sst.out" "accuracy 1.0000"
check "dev metrics include the majority baseline, F1, Matthews" has "$work/sst.out" \
  "majority class '0': 0.6667\), F1 of '1' [0-9.]+, Matthews [0-9.]+ over 24 examples"
check "metrics.jsonl has train records and the dev result" has "$work/sst/metrics.jsonl" '"kind":"task_eval".*"accuracy":1[,}]'

# relative tables added and the absolute table grown past max_position 32
"$RP" finetune /dev/null "${sst[@]}" "${common[@]}" --set task.init_checkpoint="$work/abs.h5" \
  --set task.epochs=0.1 --set task.max_seq_len=48 --set model.relative_position=method4 --set model.relative_k=4 \
  --set task.lr=1e-30 --set train.run_dir="$work/grow" >"$work/grow.out" 2>"$work/grow.err"
t="$work/grow/parameters.txt"
check "drop-in: relative tables of each layer newly initialised" has "$t" \
  "^  initialised +bert/encoder/layer/1/attention/self/distance_embedding/weight +\[9, 16\]$"
check "max_seq_len 48 > max_position 32: position table grown, old rows loaded" has "$t" \
  "^  grown +bert/embeddings/position_embeddings/weight +\[32, 32\] -> \[48, 32\]: rows 0-31 loaded, 32-47 initialised$"
check "the log says the position table grows" has "$work/grow.err" "absolute position table grows to 48 rows"
check "table summary with growth" has "$t" "^  36 loaded, 1 grown, 6 initialised, 5 dropped$"
check "stored config has the merged model" has "$work/grow/config.ini" "^max_position = 48$"
check "loaded tensors and the old position rows hold the checkpoint's values, new rows initialised" $PY -c "
import h5py, numpy as np, sys
a, b = h5py.File('$work/abs.h5')['model'], h5py.File('$work/grow/model.h5')['model']
names = []
a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) else None)
pos = 'bert/embeddings/position_embeddings/weight'
same = all(np.allclose(a[n][()], b[n][()], rtol=1e-6, atol=1e-20) for n in names if n in b and a[n].shape == b[n].shape)
old, new = b[pos][:32], b[pos][32:]
sys.exit(not (same and len(names) == 42 and np.allclose(old, a[pos][()], rtol=1e-6, atol=1e-20) and 0.01 < new.std() < 0.03))"

# drop-in t5 on the absolute checkpoint: the shared table starts at zero (step 0 = the checkpoint's
# model); drop-in alibi: the log says the outputs change from step 0
"$RP" finetune /dev/null "${sst[@]}" "${common[@]}" --set task.init_checkpoint="$work/abs.h5" \
  --set task.epochs=0.1 --set task.max_seq_len=16 --set model.relative_position=t5 --set model.t5_num_buckets=8 \
  --set task.lr=1e-30 --set train.run_dir="$work/t5" >"$work/t5.out" 2>"$work/t5.err"
t="$work/t5.err"
check "drop-in t5: the shared table is added" has "$work/t5/parameters.txt" \
  "^  initialised +bert/encoder/relative_attention_bias/weight +\[8, 2\]$"
check "drop-in t5: the added table starts at zero, not drawn" has "$work/t5/parameters.txt" \
  "the added relative tables start at 0 everywhere \(b\[bucket\(j - i\), h\] = 0\)"
check "drop-in t5: the log says step 0's outputs are the checkpoint model's" has "$t" \
  "none checkpoint -> t5: step 0's encoder outputs are exactly the checkpoint model's \(the t5 table starts where its term vanishes\)"
check "drop-in t5: the fine-tuned table is still zero at lr 1e-30" $PY -c "
import h5py, numpy as np, sys
w = h5py.File('$work/t5/model.h5')['model/bert/encoder/relative_attention_bias/weight'][()]
sys.exit(not (w.shape == (8, 2) and np.abs(w).max() < 1e-20))"
"$RP" finetune /dev/null "${sst[@]}" "${common[@]}" --set task.init_checkpoint="$work/abs.h5" \
  --set task.epochs=0.1 --set task.max_seq_len=16 --set model.relative_position=alibi \
  --set train.run_dir="$work/alibi" >/dev/null 2>"$work/alibi.err"
check "drop-in alibi: the log says the outputs change from step 0" has "$work/alibi.err" \
  "none checkpoint -> alibi: step 0's encoder outputs differ from the checkpoint model's \(ALiBi's bias is added, and it has no parameters that could start at zero\)"

# relative-only: longer sequences than pretraining need no change
"$RP" finetune /dev/null "${sst[@]}" "${common[@]}" --set task.init_checkpoint="$work/rel.h5" \
  --set task.epochs=0.1 --set task.max_seq_len=64 --set train.run_dir="$work/rel" >"$work/rel.out" 2>"$work/rel.err"
check "relative-only model at max_seq_len 64 (pretrained 32): runs, relative tables loaded" \
  has "$work/rel/parameters.txt" "^  loaded +bert/encoder/layer/0/attention/self/distance_embedding/weight +\[9, 16\]$"
check "relative-only: no position table, nothing grown" has "$work/rel/parameters.txt" "^  [0-9]+ loaded, 0 grown, 4 initialised, 5 dropped$"

# errors: a shape conflict names the parameter and both shapes; disallowed [model] change names the key
"$RP" finetune /dev/null "${sst[@]}" "${common[@]}" --set task.init_checkpoint="$work/rel.h5" \
  --set model.relative_k=8 --set train.run_dir="$work/err" >/dev/null 2>"$work/e1"
check "shape conflict is fatal" test $? -ne 0
check "shape conflict names the parameter and both shapes" has "$work/e1" \
  "parameter 'bert/encoder/layer/0/attention/self/distance_embedding/weight': the checkpoint has shape \[9, 16\], the fine-tuning model needs \[17, 16\]"
"$RP" finetune /dev/null "${sst[@]}" "${common[@]}" --set task.init_checkpoint="$work/abs.h5" \
  --set model.hidden_size=64 --set train.run_dir="$work/err" >/dev/null 2>"$work/e2"
check "changing model.hidden_size is an error naming the key and both values" has "$work/e2" \
  "key 'model.hidden_size': expected the checkpoint's value 32 .* got 64"
"$RP" finetune /dev/null "${sst[@]}" "${common[@]}" --set task.init_checkpoint="$work/abs.h5" \
  --set model.max_position=16 --set train.run_dir="$work/err" >/dev/null 2>"$work/e3"
check "shrinking the position table is an error" has "$work/e3" "can grow when fine-tuning, not shrink, got 16"

# ---- predict = finetune's dev predictions -----------------------------------------------------------
"$RP" predict /dev/null "${sst[@]}" "${common[@]}" --set task.max_seq_len=16 --checkpoint "$work/sst/model.h5" \
  --input $FX/sst_dev.tsv --out "$work/sst_pred.tsv" >"$work/p.out" 2>"$work/p.err"
check "predict (classification) = finetune's dev predictions" cmp -s "$work/sst_pred.tsv" "$work/sst/dev_predictions.tsv"
check "predict prints the same metrics" has "$work/p.out" "accuracy 1.0000"
"$RP" predict /dev/null "${sst[@]}" "${common[@]}" --checkpoint "$work/abs.h5" --input $FX/sst_dev.tsv \
  --out "$work/x.tsv" >/dev/null 2>"$work/e4"
check "predict with a pretraining checkpoint is a clear error" has "$work/e4" "predict needs a checkpoint written by"

stsb=(--set task.glue_task=stsb --set task.train_file=$FX/scores.tsv --set task.dev_file=$FX/scores.tsv --set task.max_seq_len=32)
"$RP" finetune /dev/null "${stsb[@]}" "${common[@]}" --set task.init_checkpoint="$work/abs.h5" --set task.epochs=2 \
  --set train.run_dir="$work/stsb" >"$work/stsb.out" 2>"$work/stsb.err"
check "regression (STS-B layout): Pearson and Spearman reported" has "$work/stsb.out" "Pearson -?[0-9.]+, Spearman -?[0-9.]+ over 12 examples"
check "regression: one output" has "$work/stsb/parameters.txt" "^  initialised +classifier/weight +\[1, 32\]$"
"$RP" predict /dev/null "${stsb[@]}" "${common[@]}" --checkpoint "$work/stsb/model.h5" --input $FX/scores.tsv \
  --out "$work/stsb_pred.tsv" >/dev/null 2>&1
check "predict (regression) = finetune's dev predictions" cmp -s "$work/stsb_pred.tsv" "$work/stsb/dev_predictions.tsv"

mrpc=(--set task.glue_task=mrpc --set task.train_file=$FX/pairs.tsv --set task.dev_file=$FX/pairs.tsv --set task.max_seq_len=32)
"$RP" finetune /dev/null "${mrpc[@]}" "${common[@]}" --set task.init_checkpoint="$work/abs.h5" --set task.epochs=1 \
  --set train.run_dir="$work/mrpc" >"$work/mrpc.out" 2>"$work/mrpc.err"
check "MRPC layout with a BOM header: 12 pairs read, none malformed" \
  bash -c "grep -q 'pairs.tsv: 12 rows -> 12 sequences' '$work/mrpc.err' && ! grep -q 'malformed example' '$work/mrpc.err'"

squad=(--set task.type=squad --set task.train_file=$FX/squad_train.json --set task.dev_file=$FX/squad_dev.json
       --set task.max_seq_len=32 --set task.doc_stride=8 --set task.max_query_length=10 --set task.max_answer_length=5)
"$RP" finetune /dev/null "${squad[@]}" "${common[@]}" --set task.init_checkpoint="$work/rel.h5" --set task.epochs=30 \
  --set train.log_interval=5 --set train.run_dir="$work/squad" >"$work/squad.out" 2>"$work/squad.err"
check "SQuAD: windows with doc_stride (6 questions -> more windows)" has "$work/squad.err" "6 questions in 2 contexts -> [0-9]+ windows of 32 tokens"
check "SQuAD: head qa_outputs [2, H], no pooler" bash -c "grep -qE '^  initialised +qa_outputs/weight +\[2, 32\]$' '$work/squad/parameters.txt' && ! grep -q pooler '$work/squad/parameters.txt'"
check "SQuAD: predictions.json has every question id" \
  $PY -c "import json,sys; p=json.load(open('$work/squad/predictions.json')); sys.exit(sorted(p)!=sorted(['q%d-dev'%i for i in range(1,7)]))"
ours=$(grep -o 'exact match [0-9.]*, F1 [0-9.]*' "$work/squad.out")
ref=$($PY tests/reference/squad_eval_reference.py $FX/squad_dev.json "$work/squad/predictions.json" | grep -o 'exact match [0-9.]*, F1 [0-9.]*')
check "SQuAD EM/F1 ($ours) equal the official formula in Python ($ref)" test -n "$ours" -a "$ours" = "$ref"
check "SQuAD: the training loss falls (first vs last log record)" $PY -c "
import json, sys
r = [json.loads(l) for l in open('$work/squad/metrics.jsonl') if '\"train\"' in l]
sys.exit(not (len(r) >= 2 and r[-1]['loss'] < 0.8 * r[0]['loss']))"
"$RP" predict /dev/null "${squad[@]}" "${common[@]}" --checkpoint "$work/squad/model.h5" --input $FX/squad_dev.json \
  --out "$work/squad_pred.json" >/dev/null 2>&1
check "predict (SQuAD) = finetune's predictions.json" cmp -s "$work/squad_pred.json" "$work/squad/predictions.json"

# ---- malformed input ----------------------------------------------------------------------------------
"$RP" finetune /dev/null "${common[@]}" --set task.glue_task=sst2 --set task.train_file=$FX/sst_bad.tsv \
  --set task.init_checkpoint="$work/abs.h5" --set task.epochs=0.5 --set task.max_seq_len=16 \
  --set train.run_dir="$work/bad" >/dev/null 2>"$work/bad.err"
check "malformed TSV rows skipped: the run completes" test $? -eq 0
check "wrong column count reported with file and line" has "$work/bad.err" "sst_bad.tsv: line 3: expected 2 tab-separated columns, got 1; skipped"
check "label outside the set reported with its line" has "$work/bad.err" "sst_bad.tsv: line 5: label '2' in column 1 is not one of task's labels; skipped"
check "skipped rows counted" has "$work/bad.err" "sst_bad.tsv: 3 malformed examples skipped"
check "only the 3 valid rows are used" has "$work/bad.err" "sst_bad.tsv: 6 rows -> 3 sequences"
"$RP" finetune /dev/null "${common[@]}" --set task.glue_task=sst2 --set task.train_file=$FX/sst_bad.tsv \
  --set task.init_checkpoint="$work/abs.h5" --set task.bad_examples=fatal --set task.max_seq_len=16 --set train.run_dir="$work/bad2" >/dev/null 2>"$work/bad2.err"
check "bad_examples = fatal stops at the first malformed row" \
  bash -c "[ \$(grep -c . '$work/bad2.err') -ge 1 ] && grep -q 'realpos: error: $FX/sst_bad.tsv: line 3: expected 2 tab-separated columns, got 1 (task.bad_examples = fatal)' '$work/bad2.err'"
"$RP" finetune /dev/null "${squad[@]}" "${common[@]}" --set task.train_file=$FX/squad_bad.json \
  --set task.init_checkpoint="$work/rel.h5" --set task.epochs=0.5 --set train.run_dir="$work/sbad" >/dev/null 2>"$work/sbad.err"
check "SQuAD: answer_start not at its text reported with the question id" has "$work/sbad.err" \
  "question q1-bad: answer 0: answer_start [0-9]+ does not point at its text \"Paris\"; skipped"
check "SQuAD: a question without \"question\" reported with its id" has "$work/sbad.err" "question q5-bad: no string \"question\"; skipped"
check "SQuAD: 4 of 6 questions used" has "$work/sbad.err" "4 questions in 2 contexts"
printf '{"version": "1.1"}' >"$work/nodata.json"
"$RP" predict /dev/null "${squad[@]}" "${common[@]}" --checkpoint "$work/squad/model.h5" --input "$work/nodata.json" \
  --out "$work/x.json" >/dev/null 2>"$work/e5"
check "SQuAD JSON without \"data\" is fatal with the file" has "$work/e5" "nodata.json: expected a top-level \"data\" array"
printf '{"data": [' >"$work/broken.json"
"$RP" predict /dev/null "${squad[@]}" "${common[@]}" --checkpoint "$work/squad/model.h5" --input "$work/broken.json" \
  --out "$work/x.json" >/dev/null 2>"$work/e6"
check "malformed JSON is fatal with file and line" has "$work/e6" "broken.json: SQuAD JSON: not valid JSON \(error at line 1,"
"$RP" predict /dev/null "${common[@]}" --set task.glue_task=none --set task.text_b_column=4 --set task.max_seq_len=16 \
  --checkpoint "$work/sst/model.h5" --input $FX/sst_dev.tsv --out "$work/x.tsv" >/dev/null 2>"$work/e7"
check "a layout reading a column the file lacks is fatal, naming file, line and column" has "$work/e7" \
  "sst_dev.tsv: line 1 has 2 columns, but the task reads column 4"

# ---- resume, signals, dev evaluation every eval_every steps, best checkpoint --------------------------
# Run A uninterrupted (144 steps, a checkpoint every 20, dev scored every 25); run B killed with
# SIGKILL right after its first checkpoint and resumed from RUN_DIR/latest; run C stopped by SIGTERM
# and resumed; run D without intermediate evaluations. All must end with the same weights.
same_model() { $PY - "$1" "$2" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r")["model"], h5py.File(sys.argv[2], "r")["model"]
names = []
a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) else None)
sys.exit(not (names and all(n in b and np.array_equal(a[n][()], b[n][()]) for n in names)))
PY
}
long=("${sst[@]}" "${common[@]}" --set task.init_checkpoint="$work/abs.h5" --set task.max_seq_len=16
      --set task.epochs=12 --set task.eval_every=25 --set train.checkpoint_interval=20 --set train.log_interval=10)
"$RP" finetune /dev/null "${long[@]}" --set train.run_dir="$work/ftA" >"$work/ftA.out" 2>"$work/ftA.err"
check "eval_every run finishes" test -s "$work/ftA/model.h5"
check "dev scored every 25 steps and at the end, with the step, in metrics.jsonl" bash -c \
  "[ \"\$(grep -o '\"kind\":\"task_eval\",\"step\":[0-9]*' '$work/ftA/metrics.jsonl' | cut -d: -f3 | xargs)\" = '25 50 75 100 125 144' ]"
check "best.h5 is kept and the best score logged" bash -c \
  "test -s '$work/ftA/best.h5' && grep -q '\"kind\":\"best\",\"step\":[0-9]*,\"metric\":\"accuracy\"' '$work/ftA/metrics.jsonl'"
best=$($PY -c "
import json
r = [json.loads(l) for l in open('$work/ftA/metrics.jsonl') if '\"best\"' in l]
print('%.4f' % r[-1]['value'])")
"$RP" predict /dev/null "${sst[@]}" "${common[@]}" --set task.max_seq_len=16 --checkpoint "$work/ftA/best.h5" \
  --input $FX/sst_dev.tsv --out "$work/best_pred.tsv" >"$work/best.out" 2>/dev/null
check "predict with best.h5 reproduces the best dev accuracy ($best)" has "$work/best.out" "accuracy $best "

"$RP" finetune /dev/null "${long[@]}" --set task.eval_every=0 --set train.run_dir="$work/ftD" >/dev/null 2>&1
check "dev evaluations between steps do not change training (same weights as eval_every = 0)" \
  same_model "$work/ftA/model.h5" "$work/ftD/model.h5"
check "eval_every = 0: no best.h5, one dev evaluation" bash -c \
  "! test -e '$work/ftD/best.h5' && [ \$(grep -c task_eval '$work/ftD/metrics.jsonl') -eq 1 ]"

# SIGKILL right after the checkpoint of step 20 (the run raises it itself: the same step on any host)
REALPOS_TEST_SIGNAL_AT_STEP=KILL:20 "$RP" finetune /dev/null "${long[@]}" --set train.run_dir="$work/ftB" \
  >"$work/ftB1.out" 2>"$work/ftB1.err"
killed_at=$(head -n 1 "$work/ftB/latest" 2>/dev/null)
check "SIGKILL after step 20: latest names ckpt-0000020.h5, no model.h5 (latest: ${killed_at:-none})" \
  bash -c "[ '$killed_at' = ckpt-0000020.h5 ] && ! test -e '$work/ftB/model.h5'"
"$RP" finetune /dev/null "${long[@]}" --set train.run_dir="$work/ftB" --resume "$work/ftB/$killed_at" \
  --set task.init_checkpoint="$work/gone.h5" >"$work/ftB2.out" 2>"$work/ftB2.err"
killed_step=${killed_at#ckpt-}; killed_step=$((10#${killed_step%.h5}))
check "resumed run says where it resumed (its model built from that checkpoint, not task.init_checkpoint)" \
  has "$work/ftB2.err" "resumed from .*$killed_at at step $killed_step\b"
check "... one line names the checkpoint and its step, and nothing is transferred (the fresh half did: its table stays)" \
  bash -c "[ \$(grep -cE 'fine-tuning resumes from .*$killed_at at step $killed_step: its weights, not task.init_checkpoint' '$work/ftB2.err') -eq 1 ] &&
           ! grep -qE '^  parameters: ' '$work/ftB2.err' && grep -qE '^  parameters: [0-9]+ loaded, ' '$work/ftB1.err' &&
           grep -qF 'parameters from $work/abs.h5:' '$work/ftB/parameters.txt' && grep -qE '^  [0-9]+ loaded, ' '$work/ftB/parameters.txt'"
check "kill -9 + --resume: model.h5 bit-identical to the uninterrupted run" same_model "$work/ftA/model.h5" "$work/ftB/model.h5"
check "kill -9 + --resume: best.h5 bit-identical" same_model "$work/ftA/best.h5" "$work/ftB/best.h5"
check "kill -9 + --resume: same dev predictions" cmp -s "$work/ftA/dev_predictions.tsv" "$work/ftB/dev_predictions.tsv"

# SIGTERM after step 30: update 31 sees it, and its checkpoint is saved
REALPOS_TEST_SIGNAL_AT_STEP=TERM:30 "$RP" finetune /dev/null "${long[@]}" --set train.run_dir="$work/ftC" \
  --set train.checkpoint_interval=100000 >"$work/ftC1.out" 2>"$work/ftC1.err"; rc=$?
check "finetune: SIGTERM exits cleanly (status $rc) and saves the checkpoint of the step it stopped at" \
  bash -c "[ $rc -eq 0 ] && [ \"\$(head -n 1 '$work/ftC/latest')\" = ckpt-0000031.h5 ] && ! test -e '$work/ftC/model.h5'"
check "finetune: SIGTERM is logged with the step" has "$work/ftC1.err" "signal 15: saving a checkpoint at step 31\b"
"$RP" finetune /dev/null "${long[@]}" --set train.run_dir="$work/ftC" --set train.checkpoint_interval=100000 \
  --resume "$work/ftC/latest" >/dev/null 2>&1
check "SIGTERM + --resume: model.h5 bit-identical to the uninterrupted run" same_model "$work/ftA/model.h5" "$work/ftC/model.h5"
check "a resumed run appends to metrics.jsonl (both halves' records)" bash -c \
  "grep -q '\"step\":10,' '$work/ftC/metrics.jsonl' && grep -q '\"step\":144,' '$work/ftC/metrics.jsonl'"

head -n 30 $FX/sst_train.tsv >"$work/other_train.tsv"
expect_error "--resume with another task.train_file names the key and both values" \
  "key 'task.train_file': the checkpoint has $FX/sst_train.tsv, this run $work/other_train.tsv" \
  "$RP" finetune /dev/null "${long[@]}" --set train.run_dir="$work/ftC" --resume "$work/ftC/latest" \
  --set task.train_file="$work/other_train.tsv"
"$RP" finetune /dev/null "${long[@]}" --set train.run_dir="$work/ftE" --resume "$work/abs.h5" >/dev/null 2>"$work/e8"
check "--resume from a weights-only checkpoint is a clear error" has "$work/e8" "abs.h5: no training state to resume from"
"$RP" finetune /dev/null "${long[@]}" --set train.run_dir="$work/ftE" --resume "$work/missing.h5" >/dev/null 2>"$work/e9"
rc=$?
check "--resume from a missing checkpoint names it" bash -c "[ $rc -ne 0 ] && grep -q 'missing.h5' '$work/e9'"

# A checkpoint keeps its train file's identity (size, CRC-32): a resume after the file's contents
# changed under the same name is refused, naming the file and both versions. The log of a run
# capped by task.max_steps says both the epochs' steps and the cap.
cp $FX/sst_train.tsv "$work/edited_train.tsv"
edited=(--set task.train_file="$work/edited_train.tsv" --set task.init_checkpoint="$work/abs.h5" --set task.max_seq_len=16
        --set task.epochs=3 --set task.max_steps=6 --set train.checkpoint_interval=3)
"$RP" finetune /dev/null "${sst[@]}" "${common[@]}" "${edited[@]}" --set train.run_dir="$work/ftF" >/dev/null 2>"$work/ftF.err"
check "a fine-tune capped by task.max_steps logs the epochs' steps and the cap, not 'N epochs = 6 steps'" bash -c \
  "grep -qE '3 epochs would be [0-9]+ steps, capped by task.max_steps at 6 steps \(0\.[0-9]+ epochs\)' '$work/ftF.err' &&
   ! grep -q '3 epochs = 6 steps' '$work/ftF.err'"
check "... and names task.max_steps as the bound that ends the run" has "$work/ftF.err" "\(0\.[0-9]+ epochs\) of 1 x 8 \(warmup 0\): task.max_steps ends the run$"
# The launch line names the bound that ends the run (96 sequences, 12 steps an epoch; each run stops
# itself after step 1: only the launch lines matter). task.epochs = 3 is the default.
bound() { REALPOS_TEST_SIGNAL_AT_STEP=TERM:1 "$RP" finetune /dev/null "${sst[@]}" "${common[@]}" \
  --set task.init_checkpoint="$work/abs.h5" --set task.max_seq_len=16 --set train.run_dir="$work/bound$1" "${@:2}" \
  >/dev/null 2>"$work/bound$1.err"; }
bound 1 --set task.max_steps=30000
check "task.max_steps = 30000 with the default epochs: the launch line says the epochs (default) end the run at 36 steps" \
  has "$work/bound1.err" "96 sequences, 3 epochs = 36 steps of 1 x 8 \(warmup 3\): task.epochs \(its default\) ends the run$"
check "... and a note says task.max_steps is never reached, and why" has "$work/bound1.err" \
  "note: task.max_steps = 30000 is never reached: task.epochs = 3 \(the default\) ends the run first, after 36 steps \(30000 steps would be 2500 epochs: set task.epochs\)"
bound 2 --set task.max_steps=30000 --set task.epochs=1
check "both set, the epochs end the run first: said clearly" has "$work/bound2.err" \
  "note: task.epochs = 1 and task.max_steps = 30000 are both set: task.epochs ends the run first, after 12 steps; task.max_steps is never reached"
check "... the launch line names task.epochs" has "$work/bound2.err" "1 epochs = 12 steps of 1 x 8 \(warmup 1\): task.epochs ends the run$"
bound 3 --set task.epochs=2
check "task.max_steps = 0: the epochs end the run, no cap, no note" bash -c \
  "grep -qE '2 epochs = 24 steps of 1 x 8 \(warmup 2\): task.epochs ends the run \(task.max_steps = 0: no cap\)$' '$work/bound3.err' &&
   ! grep -q 'never reached' '$work/bound3.err'"
bound 4 --set task.epochs=1 --set task.max_steps=12
check "task.max_steps equal to the epochs' steps: both end the run at the same step" \
  has "$work/bound4.err" "1 epochs = 12 steps of 1 x 8 \(warmup 1\): task.epochs and task.max_steps end the run at the same step$"
sed -i '2s/\t1$/\t0/; 2s/\t0$/\t1/' "$work/edited_train.tsv"; cmp -s $FX/sst_train.tsv "$work/edited_train.tsv" &&
  sed -i '3s/^/an /' "$work/edited_train.tsv"
expect_error "--resume after task.train_file's contents changed (same name): refused, naming the file" \
  "now:        task.train_file $work/edited_train.tsv: " \
  "$RP" finetune /dev/null "${sst[@]}" "${common[@]}" "${edited[@]}" --set train.run_dir="$work/ftF" --resume "$work/ftF/latest"
