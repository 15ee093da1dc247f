#!/usr/bin/env bash
# realpos average: the mean of two checkpoints is their element-wise mean (float64 mean rounded to
# float32), one checkpoint averages to itself, --last N picks a run's newest checkpoints, the
# output is weights-only and names its inputs, eval / finetune / predict / export-hf accept it, and inputs with
# another model config or parameter table (or --out naming an input) are refused clearly.
source "$(dirname "$0")/../../lib.sh"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }

synthetic_vocab "$tmp/vocab.txt" 80
awk 'BEGIN { srand(3); for (d = 0; d < 40; d++) { for (s = 0; s < 6; s++) { line = "";
       for (w = 0; w < 8; w++) line = line (w ? " " : "") "w" int(rand() * rand() * 80); print line "." }
       print "" } }' >"$tmp/corpus.txt"
tiny_pretrain_ini "$tmp/run.ini" model.num_layers=2 model.max_position=64 model.absolute_position=no \
  model.relative_position=method4 model.relative_k=4 train.max_steps=40 train.warmup_steps=4 train.log_interval=10 \
  train.eval_interval=40 train.checkpoint_interval=10 train.keep_last=3 data.max_predictions_per_seq=5
"$RP" prepare "$tmp/run.ini" >"$tmp/prepare.log" 2>&1 && "$RP" pretrain "$tmp/run.ini" >"$tmp/pretrain.log" 2>&1
check "a tiny run keeps checkpoints at steps 20, 30, 40" test -s "$tmp/run/ckpt-0000020.h5" -a -s "$tmp/run/ckpt-0000040.h5"
c20=$tmp/run/ckpt-0000020.h5 c30=$tmp/run/ckpt-0000030.h5 c40=$tmp/run/ckpt-0000040.h5

"$RP" average "$c20" "$c40" --out "$tmp/mean2.h5" >"$tmp/avg.log" 2>&1
check "average of two checkpoints exits 0" test $? -eq 0 -a -s "$tmp/mean2.h5"
check "average of two = their element-wise mean (float64, rounded to float32), every /model dataset" "$PY" - \
  "$c20" "$c40" "$tmp/mean2.h5" <<'PY'
import h5py, numpy as np, sys
a, b, m = (h5py.File(p, "r") for p in sys.argv[1:])
names = []
a["model"].visit(lambda n: names.append(n) if isinstance(a["model"][n], h5py.Dataset) else None)
mset = []
m["model"].visit(lambda n: mset.append(n) if isinstance(m["model"][n], h5py.Dataset) else None)
ok = len(names) > 20 and sorted(names) == sorted(mset)
for n in names:
    want = ((a["model"][n][()].astype(np.float64) + b["model"][n][()].astype(np.float64)) / 2).astype(np.float32)
    got = m["model"][n][()]
    ok = ok and got.dtype == np.float32 and np.array_equal(got, want)
differ = sum(not np.array_equal(a["model"][n][()], b["model"][n][()]) for n in names)
sys.exit(0 if ok and differ == len(names) else 1)
PY
check "the average is weights-only: no /optimizer, no /train; /vocab and the config are the first input's" "$PY" - \
  "$c20" "$tmp/mean2.h5" <<'PY'
import h5py, sys
a, m = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
ok = "optimizer" not in m and "train" not in m and m["vocab"][()] == a["vocab"][()]
ok = ok and m.attrs["config"] == a.attrs["config"] and m.attrs["format"] == a.attrs["format"]
sys.exit(0 if ok else 1)
PY
check "the average's attributes list its inputs with their steps" "$PY" - "$c20" "$c40" "$tmp/mean2.h5" <<'PY'
import h5py, sys
m = h5py.File(sys.argv[3], "r")
text = m.attrs["averaged_inputs"]
text = text.decode() if isinstance(text, bytes) else text
sys.exit(0 if m.attrs["averaged_count"] == 2 and text == f"{sys.argv[1]}\t20\n{sys.argv[2]}\t40\n" else 1)
PY

"$RP" average "$c30" --out "$tmp/one.h5" >/dev/null 2>&1
check "average of one checkpoint is the identity (bit for bit)" "$PY" - "$c30" "$tmp/one.h5" <<'PY'
import h5py, numpy as np, sys
a, m = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a["model"].visit(lambda n: names.append(n) if isinstance(a["model"][n], h5py.Dataset) else None)
sys.exit(0 if names and all(np.array_equal(a["model"][n][()], m["model"][n][()]) for n in names) else 1)
PY

"$RP" average --last 2 "$tmp/run" --out "$tmp/last2.h5" >/dev/null 2>&1
"$RP" average "$c30" "$c40" --out "$tmp/explicit.h5" >/dev/null 2>&1
check "--last 2 RUN_DIR = the average of its two newest checkpoints (steps 30, 40)" "$PY" - \
  "$tmp/last2.h5" "$tmp/explicit.h5" "$c30" "$c40" <<'PY'
import h5py, numpy as np, sys
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a["model"].visit(lambda n: names.append(n) if isinstance(a["model"][n], h5py.Dataset) else None)
text = a.attrs["averaged_inputs"]
text = text.decode() if isinstance(text, bytes) else text
steps = [line.split("\t")[1] for line in text.splitlines()]
sys.exit(0 if steps == ["30", "40"] and all(np.array_equal(a["model"][n][()], b["model"][n][()]) for n in names) else 1)
PY
expect_error "--last N beyond the run's checkpoints is refused" "average --last 5 $tmp/run: the run's lineage ($tmp/run/lineage.tsv) has 3 checkpoints" \
  "$RP" average --last 5 "$tmp/run" --out "$tmp/x.h5"

# ---- the averaged checkpoint is accepted downstream -------------------------------------------------------
"$RP" eval "$tmp/run.ini" --checkpoint "$tmp/mean2.h5" >"$tmp/eval.out" 2>&1
check "eval accepts an averaged checkpoint" grep -q "^eval .*mlm loss [0-9.]*, accuracy" "$tmp/eval.out"
for split in train:40:3 dev:16:4; do  # label 1: words w0-w39, label 0: w40-w79
  awk -v n="${split#*:}" 'BEGIN { split(n, a, ":"); srand(a[2]); print "sentence\tlabel"
    for (i = 0; i < a[1]; i++) { y = i % 2; line = ""
      for (w = 0; w < 6; w++) line = line (w ? " " : "") "w" (y ? int(rand() * 40) : 40 + int(rand() * 40))
      print line "\t" y } }' >"$tmp/${split%%:*}.tsv"
done
ft=(--set task.glue_task=sst2 --set task.train_file=$tmp/train.tsv --set task.dev_file=$tmp/dev.tsv
    --set task.max_seq_len=16 --set task.batch_size=8 --set task.epochs=2 --set train.threads=1)
for seed in 1 2; do
  "$RP" finetune /dev/null "${ft[@]}" --set task.init_checkpoint="$tmp/mean2.h5" --set task.seed=$seed \
    --set train.run_dir="$tmp/ft$seed" >"$tmp/ft$seed.log" 2>&1
done
check "finetune starts from an averaged checkpoint" test -s "$tmp/ft1/model.h5" -a -s "$tmp/ft2/model.h5"
"$RP" average "$tmp/ft1/model.h5" "$tmp/ft2/model.h5" --out "$tmp/ft-mean.h5" >/dev/null 2>&1
"$RP" predict /dev/null "${ft[@]}" --checkpoint "$tmp/ft-mean.h5" --input "$tmp/dev.tsv" --out "$tmp/pred.tsv" \
  >"$tmp/pred.out" 2>&1
check "fine-tuned checkpoints average (heads included) and predict accepts the result" \
  test $? -eq 0 -a "$(wc -l <"$tmp/pred.tsv")" -ge 16

"$RP" export-hf "$tmp/mean2.h5" --out "$tmp/hf" >"$tmp/hf.log" 2>&1
check "export-hf accepts an averaged checkpoint" test $? -eq 0 -a -s "$tmp/hf/model.safetensors"

# ---- refusals -----------------------------------------------------------------------------------------------
"$RP" pretrain "$tmp/run.ini" --set model.relative_k=8 --set train.max_steps=10 --set train.run_dir="$tmp/k8" \
  >/dev/null 2>&1
expect_error "another model config is refused, naming the key, both values and both files" \
  "$tmp/k8/ckpt-0000010.h5: key 'model.relative_k' is 8, but $c20 has 4; averaged checkpoints must share the model config" \
  "$RP" average "$c20" "$tmp/k8/ckpt-0000010.h5" --out "$tmp/x.h5"
expect_error "another parameter table (pretraining vs fine-tuned heads) is refused, naming the dataset" \
  "$tmp/ft1/model.h5: dataset '/model/bert/pooler/dense/bias' [16] is not in $c20" \
  "$RP" average "$c20" "$tmp/ft1/model.h5" --out "$tmp/x.h5"
cp "$c40" "$tmp/reshaped.h5"
"$PY" -c "import h5py, numpy as np; f = h5py.File('$tmp/reshaped.h5', 'r+'); n = 'model/bert/encoder/layer/1/output/dense/bias'
del f[n]; f[n] = np.zeros(17, np.float32)"
"$PY" scripts/h5seal.py "$tmp/reshaped.h5" # a trusted edit: refresh the checksum realpos verifies
expect_error "a dataset of another shape is refused, naming both shapes" \
  "$tmp/reshaped.h5: dataset '/model/bert/encoder/layer/1/output/dense/bias' has shape [17], but $c20 has [16]" \
  "$RP" average "$c20" "$tmp/reshaped.h5" --out "$tmp/x.h5"
check "no output is written when the inputs are refused" test ! -e "$tmp/x.h5"
sum=$(md5sum <"$c30")
expect_error "--out equal to an input is refused" "the checkpoint '$c30' and --out '$tmp/run/./ckpt-0000030.h5' are the same file" \
  "$RP" average "$c20" "$c30" --out "$tmp/run/./ckpt-0000030.h5"
check "... and the input is untouched" test "$(md5sum <"$c30")" = "$sum"
expect_error "an input given twice is refused" "is given twice" "$RP" average "$c20" "$c20" --out "$tmp/x.h5"
expect_error "a missing input is named" "$tmp/nope.h5: no such file or directory" "$RP" average "$tmp/nope.h5" --out "$tmp/x.h5"
