#!/usr/bin/env bash
# Hostile inputs (issue 9): every one ends with a message naming the file/key/dataset and a
# non-zero exit, never a crash, a hang, a silent success or a lost checkpoint. Each class has a
# positive control next to it. Commands run under `timeout` so a hang is a failure, not a stall.
source "$(dirname "$0")/../../lib.sh"
FX=tests/fixtures/finetune
cfg=configs/tiny.ini
T="timeout 120"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
# expect_ok NAME PATTERN COMMAND...: exit 0 and PATTERN in the output (a positive control)
expect_ok() {
  local name=$1 pattern=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq 0 ] && grep -qF -- "$pattern" <<<"$out"; then pass "$name"
  else fail "$name" "status $rc: $(head -c 400 <<<"$out")"; fi
}
h5edit() { # FILE python-statements (f = the open file); then re-seal it (a trusted edit)
  "$PY" -c "import h5py, numpy as np; f = h5py.File('$1', 'r+'); $2; f.close()" && "$PY" scripts/h5seal.py "$1"
}
at() { # FILE OFFSET BYTES: overwrite in place
  printf '%s' "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

"$RP" init $cfg --out "$tmp/ok.h5" 2>/dev/null
expect_ok "control: inspect --verify accepts a fresh checkpoint" "present, right shapes, finite" \
  $T "$RP" inspect --verify "$tmp/ok.h5"

# ---- checkpoint integrity: checked before libhdf5 reads a byte ------------------------------------
# Bytes of the stored config text (an attribute in HDF5's global heap: corrupting it crashed or hung
# libhdf5), of a weight (the silent case), of the superblock, of the checksum header itself.
config_at=$(grep -boa '\[model\]' "$tmp/ok.h5" | head -1 | cut -d: -f1)
weight_at=$("$PY" -c "
import h5py; f = h5py.File('$tmp/ok.h5', 'r'); print(512 + f['model/bert/encoder/layer/0/attention/self/query/weight'].id.get_offset())")
size=$(stat -c %s "$tmp/ok.h5")
for spec in "heap:$config_at:X9" "heap-len:$((config_at - 12)):\\377\\377" "weight:$((weight_at + 40)):ab" \
            "superblock:520:zz" "tail:$((size - 3)):q" "header-crc:25:00000000"; do
  IFS=: read -r what off bytes <<<"$spec"
  cp "$tmp/ok.h5" "$tmp/c_$what.h5"; at "$tmp/c_$what.h5" "$off" "$(printf "$bytes")"
  expect_error "corrupt checkpoint ($what bytes) is refused before HDF5 reads it" "c_$what.h5: corrupt" \
    $T "$RP" inspect "$tmp/c_$what.h5"
done
expect_error "corrupt weight bytes: inspect --verify fails" "c_weight.h5: corrupt" $T "$RP" inspect --verify "$tmp/c_weight.h5"
cp "$tmp/ok.h5" "$tmp/long.h5"; printf 'extra' >>"$tmp/long.h5"
expect_error "bytes appended to a checkpoint" "long.h5: extended" $T "$RP" inspect "$tmp/long.h5"
head -c $((size - 100)) "$tmp/ok.h5" >"$tmp/short.h5"
expect_error "truncated checkpoint" "short.h5: truncated" $T "$RP" inspect "$tmp/short.h5"
"$PY" - "$tmp/ok.h5" "$tmp/legacy.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as src, h5py.File(sys.argv[2], "w") as dst:  # no user block
    dst.attrs.update(src.attrs)
    for k in src:
        src.copy(src[k], dst, k)
PY
expect_error "a checkpoint without checksum (older realpos, plain h5py) is refused, naming the fix" \
  "scripts/h5seal.py" $T "$RP" inspect "$tmp/legacy.h5"
"$PY" scripts/h5seal.py "$tmp/legacy.h5"
expect_ok "control: h5seal.py makes a trusted legacy file readable" "total parameters:" $T "$RP" inspect "$tmp/legacy.h5"

# ---- non-finite or absurd stored values ----------------------------------------------------------
q=model/bert/encoder/layer/0/attention/self/query/weight
cp "$tmp/ok.h5" "$tmp/nan.h5"; h5edit "$tmp/nan.h5" "d = f['$q']; a = d[()]; a[3, 5] = np.nan; d[...] = a"
expect_error "a NaN parameter is an error, naming the dataset" "dataset '$q': element 101 is nan" \
  $T "$RP" inspect "$tmp/nan.h5"
cp "$tmp/ok.h5" "$tmp/opt.h5" # add zero optimizer moments with step -1
h5edit "$tmp/opt.h5" "
names = []; f['model'].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
for k in ('exp_avg', 'exp_avg_sq'):
    for n in names: f['optimizer/' + k + '/' + n] = np.zeros(f['model/' + n].shape, np.float32)
f['optimizer'].attrs['step'] = np.int64(-1)"
expect_error "optimizer step -1 is an error" "attribute '/optimizer/step': expected an integer in [0, 2147483647], got -1" \
  $T "$RP" inspect --verify "$tmp/opt.h5"
h5edit "$tmp/opt.h5" "f['optimizer'].attrs['step'] = np.int64(4); d = f['optimizer/exp_avg_sq/${q#model/}']; a = d[()]; a[0, 0] = np.inf; d[...] = a"
expect_error "an infinite optimizer moment is an error" "dataset 'optimizer/exp_avg_sq/${q#model/}': element 0 is inf" \
  $T "$RP" inspect --verify "$tmp/opt.h5"

# ---- saving: disk full, missing or read-only directory, stale temp files -----------------------------
expect_error "init --out into a missing directory names the reason" "No such file or directory" \
  $T "$RP" init $cfg --out "$tmp/missing/dir/x.h5"
mkdir -p "$tmp/stale"
touch "$tmp/stale/ckpt-0000010.h5.tmp.2147483646" "$tmp/stale/latest.tmp.2147483646"
expect_ok "temp files of a killed save are removed at the next save" "removed $tmp/stale/ckpt-0000010.h5.tmp" \
  $T "$RP" init $cfg --out "$tmp/stale/x.h5"
check "... all of them, and the new file is complete" test ! -e "$tmp/stale/latest.tmp.2147483646" -a -s "$tmp/stale/x.h5"
mnt="$tmp/mnt"; mkdir -p "$mnt/full" "$mnt/ro"
fill_disk() { # leave about $1 bytes free on $mnt/full
  rm -f "$mnt/full/filler"
  local free=$(( $(stat -f -c '%a * %S' "$mnt/full") - $1 ))
  [ $free -le 0 ] || head -c $free /dev/zero >"$mnt/full/filler" 2>/dev/null
}
if mount -t tmpfs -o size=2m tmpfs "$mnt/full" 2>/dev/null && mount -t tmpfs -o ro,size=16k tmpfs "$mnt/ro"; then
  trap 'umount "$mnt/full" "$mnt/ro" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
  fill_disk 65536
  expect_error "disk full during a save: message with the reason" "No space left on device" \
    $T "$RP" init $cfg --out "$mnt/full/x.h5"
  check "disk full: the incomplete temp file is removed" test "$(ls -A "$mnt/full")" = filler
  expect_error "init --out into a read-only directory names the reason" "Read-only file system" \
    $T "$RP" init $cfg --out "$mnt/ro/x.h5"
else
  echo "SKIP disk-full and read-only saves: cannot mount a tmpfs (not root?)"
fi
ln -s /dev/full "$tmp/full.tsv" 2>/dev/null

# ---- configuration: real ranges, no allocation before the inputs are known, only used sections -------
expect_error "num_layers beyond what the model supports is a config error naming the key and range" \
  "key 'model.num_layers': expected an integer in [1, 64], got '1024'" $T "$RP" config $cfg --set model.num_layers=1024
expect_error "an absurd learning rate" "key 'optim.lr': expected a number in [0, 1], got '1e30'" \
  $T "$RP" config $cfg --set optim.lr=1e30
expect_error "an absurd fine-tuning learning rate" "key 'task.lr'" $T "$RP" config $cfg --set task.lr=1e30
: >"$tmp/empty.ini"
expect_error "pretrain with an empty INI names the missing key (before allocating the default model)" \
  "empty.ini: key 'data.vocab': expected a vocabulary file" $T "$RP" pretrain "$tmp/empty.ini" --set train.run_dir="$tmp/e"
printf '[model]\nhidden_size = 16\nnum_layers = 1\nnum_heads = 2\nintermediate_size = 32\nvocab_size = 50\nmax_position = 32\n' \
  >"$tmp/model_only.ini"
expect_ok "control: init with a model-only config (data.max_seq_len's default is not init's business)" "wrote" \
  $T "$RP" init "$tmp/model_only.ini" --out "$tmp/model_only.h5"
expect_ok "control: and the checkpoint reads back" "total parameters:" $T "$RP" inspect "$tmp/model_only.h5"
expect_error "out of memory names the keys that size the allocation" "out of memory allocating" \
  $T "$RP" init "$tmp/model_only.ini" --set model.hidden_size=65536 --set model.intermediate_size=1048576 \
  --set model.vocab_size=16777216 --out "$tmp/huge.h5"
expect_error "... naming [model] keys" "[model] hidden_size, num_layers, intermediate_size, vocab_size" \
  $T "$RP" init "$tmp/model_only.ini" --set model.hidden_size=65536 --set model.intermediate_size=1048576 \
  --set model.vocab_size=16777216 --out "$tmp/huge.h5"

# ---- same file as input and output ---------------------------------------------------------------
cp $FX/vocab.txt "$tmp/corpus.txt"
expect_error "vocab --corpus C --out C" "are the same file" $T "$RP" vocab --corpus "$tmp/corpus.txt" --size 100 --out "$tmp/corpus.txt"
check "... and the input is intact" cmp -s $FX/vocab.txt "$tmp/corpus.txt"
ln -sf "$tmp/ok.h5" "$tmp/link.h5"
expect_error "dump --checkpoint CK --out CK (through a symlink)" "are the same file" \
  $T "$RP" dump --checkpoint "$tmp/ok.h5" --batch "$tmp/ok.h5" --out "$tmp/link.h5"
expect_error "attention CK --out CK" "are the same file" $T "$RP" attention "$tmp/ok.h5" --input "$tmp/corpus.txt" --out "$tmp/./ok.h5"
expect_ok "control: the checkpoint is intact" "present, right shapes, finite" $T "$RP" inspect --verify "$tmp/ok.h5"
cp $cfg "$tmp/c.ini"
expect_error "init CONFIG --out CONFIG" "are the same file" $T "$RP" init "$tmp/c.ini" --out "$tmp/c.ini"
check "... and the config is intact" cmp -s $cfg "$tmp/c.ini"
mkdir -p "$tmp/sh"; cp "$tmp/corpus.txt" "$tmp/sh/index.json"
expect_error "prepare whose corpus is its own output index" "lies inside [data] shard_dir" \
  $T "$RP" prepare $cfg --set data.corpus="$tmp/sh/index.json" --set data.shard_dir="$tmp/sh" --set data.vocab=$FX/vocab.txt

# ---- vocabularies ---------------------------------------------------------------------------------
{ printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nw1\nw2\nw1\n'; } >"$tmp/dup_vocab.txt"
printf 'w1 w2\n' >"$tmp/text.txt"
expect_error "a vocabulary with a repeated token names both lines" "dup_vocab.txt line 8: token 'w1' repeats line 6" \
  $T "$RP" tokenize --vocab "$tmp/dup_vocab.txt" <"$tmp/text.txt"
{ printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n\n[MASK]\nw1\n'; } >"$tmp/blank_vocab.txt"
expect_error "a vocabulary with a blank line names it" "blank_vocab.txt line 5: empty line" \
  $T "$RP" tokenize --vocab "$tmp/blank_vocab.txt" <"$tmp/text.txt"
printf '\n \n\t\n' >"$tmp/empty_corpus.txt"
expect_error "vocab on an empty corpus" "empty_corpus.txt: no words" \
  $T "$RP" vocab --corpus "$tmp/empty_corpus.txt" --size 100 --out "$tmp/v.txt"
check "... writes no vocabulary" test ! -e "$tmp/v.txt"

# ---- pretraining data, eval, resume ------------------------------------------------------------------
synthetic_vocab "$tmp/pvocab.txt" 40
awk 'BEGIN { srand(3); for (d = 0; d < 30; d++) { for (s = 0; s < 5; s++) { line = "";
       for (w = 0; w < 8; w++) line = line (w ? " " : "") "w" int(rand() * 40); print line } print "" } }' >"$tmp/pcorpus.txt"
tiny_pretrain_ini "$tmp/p.ini" model.vocab_size=45 train.run_dir="$tmp/prun" data.corpus="$tmp/pcorpus.txt" \
  data.vocab="$tmp/pvocab.txt" data.shard_dir="$tmp/pshards" data.max_seq_len=16 data.max_predictions_per_seq=3 \
  data.eval_fraction=0.2
$T "$RP" prepare "$tmp/p.ini" >/dev/null 2>&1 && $T "$RP" pretrain "$tmp/p.ini" >"$tmp/p.log" 2>&1
check "control: a tiny pretraining run" test -s "$tmp/prun/ckpt-0000004.h5"
check "metrics at full precision (cJSON shortest round trip, not %.6f)" \
  grep -qE '"eval_loss":[0-9]+\.[0-9]{9,}' "$tmp/prun/metrics.jsonl"
head -c 20000 /dev/urandom | tr '\000-\012' '\n' >"$tmp/binary.bin" # lines and blank-line documents
expect_ok "prepare on binary data warns with the [UNK] fraction" "% of its" \
  $T "$RP" prepare "$tmp/p.ini" --set data.corpus="$tmp/binary.bin" --set data.shard_dir="$tmp/bshards"
ck="$tmp/prun/ckpt-0000004.h5"
expect_ok "eval says which [model] keys of the config it ignores" "key 'model.relative_k' = 99 differs from the checkpoint's" \
  $T "$RP" eval "$tmp/p.ini" --checkpoint "$ck" --set model.relative_k=99
cp "$ck" "$tmp/big.h5"
h5edit "$tmp/big.h5" "d = f['$q']; d[...] = np.full(d.shape, 3e38, np.float32)"
expect_error "eval with a non-finite loss exits non-zero, naming the checkpoint" "big.h5: the held-out loss is" \
  $T "$RP" eval "$tmp/p.ini" --checkpoint "$tmp/big.h5"
out=$($T "$RP" pretrain "$tmp/p.ini" --init "$tmp/big.h5" --set train.run_dir="$tmp/nanrun" 2>&1); rc=$?
check "a NaN stop in a run without checkpoints does not claim one is intact (status $rc)" \
  bash -c "[ $rc -ne 0 ] && grep -q 'the loss is' <<<'$(grep -F 'realpos: error' <<<"$out")' && ! grep -q intact <<<'$(grep -F 'realpos: error' <<<"$out")'"
for bad in -5 4611686018427387904; do
  cp "$ck" "$tmp/step.h5"; h5edit "$tmp/step.h5" "f['train/step'][0] = $bad"
  expect_error "resume from /train/step = $bad is an error" "dataset 'train/step': expected the optimizer's step count 4" \
    $T "$RP" pretrain "$tmp/p.ini" --resume "$tmp/step.h5" --set train.run_dir="$tmp/srun"
done
check "... and writes no checkpoint" test ! -e "$tmp/srun/ckpt-4611686018427387904.h5"
ln -s /dev/full "$tmp/fullrun" 2>/dev/null; mkdir -p "$tmp/mrun"; ln -sf /dev/full "$tmp/mrun/metrics.jsonl"
sed -n "1p;/^run /p" "$tmp/prun/latest" >"$tmp/mrun/latest" # the lineage of $ck: a resume may continue there
expect_error "metrics that cannot be written are an error" "metrics.jsonl: cannot write metrics: No space left on device" \
  $T "$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/mrun" --resume "$ck" --set train.max_steps=8
if mountpoint -q "$mnt/full"; then
  rm -f "$mnt/full/filler"
  mkdir -p "$mnt/full/run" && cp "$tmp/prun/ckpt-0000002.h5" "$mnt/full/run/" && echo ckpt-0000002.h5 >"$mnt/full/run/latest"
  fill_disk 24576
  expect_error "pretraining onto a full disk: a clear error" "No space left on device" \
    $T "$RP" pretrain "$tmp/p.ini" --resume "$mnt/full/run/ckpt-0000002.h5" --set train.run_dir="$mnt/full/run"
  check "... latest still names the previous checkpoint, which verifies; no temp file" bash -c \
    "[ \"\$(cat '$mnt/full/run/latest')\" = ckpt-0000002.h5 ] && '$RP' inspect --verify '$mnt/full/run/ckpt-0000002.h5' >/dev/null 2>&1 && ! ls '$mnt/full/run' | grep -q tmp"
fi
# SIGTERM during a long held-out evaluation: honoured promptly (the run saves and stops)
"$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/trun" --set train.eval_batches=100000000 \
  --set train.eval_interval=1 --set train.max_steps=1000 >"$tmp/t.log" 2>&1 &
pid=$!
for _ in $(seq 1 3000); do grep -q '"step":1,' "$tmp/trun/metrics.jsonl" 2>/dev/null && break; sleep 0.01; done
kill -TERM $pid; start=$(date +%s)
( sleep 60; kill -9 $pid 2>/dev/null ) & guard=$!
wait $pid; rc=$?; kill $guard 2>/dev/null
check "SIGTERM inside a huge eval loop: exits 0 and saves (status $rc, $(( $(date +%s) - start )) s)" \
  test $rc -eq 0 -a -n "$(ls "$tmp"/trun/ckpt-000000[12].h5 2>/dev/null)" # the stop lands after the next step

# ---- fine-tuning and prediction -----------------------------------------------------------------------
"$RP" init $FX/tiny.ini --out "$tmp/ft_init.h5" 2>/dev/null
common=(--set train.threads=1 --set task.batch_size=8 --set task.lr=1e-3 --set train.log_interval=1000)
sst=(--set task.glue_task=sst2 --set task.train_file=$FX/sst_train.tsv --set task.dev_file=$FX/sst_dev.tsv)
$T "$RP" finetune /dev/null "${sst[@]}" "${common[@]}" --set task.init_checkpoint="$tmp/ft_init.h5" \
  --set task.max_steps=3 --set task.max_seq_len=16 --set train.run_dir="$tmp/sst" >"$tmp/sst.out" 2>&1
check "control: a short SST-2 fine-tuning run" test -s "$tmp/sst/model.h5"
printf '[task]\nglue_task = cola\nmax_seq_len = 32\n' >"$tmp/cola.ini"
expect_ok "predict with another task's config: the checkpoint's [task] is used, the differing key reported" \
  "key 'task.glue_task' = cola differs from the checkpoint's sst2" \
  $T "$RP" predict "$tmp/cola.ini" --checkpoint "$tmp/sst/model.h5" --input $FX/sst_dev.tsv --out "$tmp/pred.tsv"
check "... and its predictions are finetune's dev predictions (SST-2 columns, max_seq_len 16)" \
  cmp -s "$tmp/pred.tsv" "$tmp/sst/dev_predictions.tsv"
# byte for byte at any thread count (finetune ran at 1): the products are split by shape, not by threads
for threads in 1 2; do
  "$RP" predict "$tmp/cola.ini" --checkpoint "$tmp/sst/model.h5" --input $FX/sst_dev.tsv \
    --out "$tmp/pred_t$threads.tsv" --set train.threads=$threads >/dev/null 2>&1
  check "... also at $threads thread(s)" cmp -s "$tmp/pred_t$threads.tsv" "$tmp/sst/dev_predictions.tsv"
done
cp $FX/sst_dev.tsv "$tmp/dev.tsv"
expect_error "predict --input X --out X" "are the same file" \
  $T "$RP" predict /dev/null --checkpoint "$tmp/sst/model.h5" --input "$tmp/dev.tsv" --out "$tmp/dev.tsv"
check "... and the input is intact" cmp -s $FX/sst_dev.tsv "$tmp/dev.tsv"
cp "$tmp/ft_init.h5" "$tmp/sst2_init.h5"; mkdir -p "$tmp/own"; cp "$tmp/ft_init.h5" "$tmp/own/model.h5"
expect_error "finetune whose init_checkpoint is its own output" "lies inside train.run_dir" \
  $T "$RP" finetune /dev/null "${sst[@]}" "${common[@]}" --set task.init_checkpoint="$tmp/own/model.h5" \
  --set train.run_dir="$tmp/own"
expect_error "task.labels with a repeated label" "task.labels" \
  $T "$RP" finetune /dev/null "${common[@]}" --set task.train_file=$FX/sst_train.tsv --set task.text_a_column=0 \
  --set task.label_column=1 --set task.labels="0 1 0" --set task.header=yes --set task.init_checkpoint="$tmp/ft_init.h5" \
  --set train.run_dir="$tmp/lab"
{ head -3 $FX/scores.tsv; printf '99\tmain\tfile\t2012\t0099\tnone\tnone\tgood film\tbad film\t1e30\n'; } >"$tmp/scores.tsv"
expect_error "an STS-B score of 1e30 names the file and line" "scores.tsv: line 4: score '1e30' in column 9 is outside [0, 5]" \
  $T "$RP" finetune /dev/null --set task.glue_task=stsb --set task.train_file="$tmp/scores.tsv" "${common[@]}" \
  --set task.bad_examples=fatal --set task.init_checkpoint="$tmp/ft_init.h5" --set train.run_dir="$tmp/stsb"
"$RP" init $FX/tiny.ini --set model.vocab_size=45 --set data.vocab="$tmp/pvocab.txt" --out "$tmp/w_init.h5" 2>/dev/null
expect_ok "fine-tuning text that the checkpoint's vocabulary turns into [UNK] warns with the fraction" \
  "% of its" $T "$RP" finetune /dev/null "${sst[@]}" "${common[@]}" --set task.init_checkpoint="$tmp/w_init.h5" \
  --set task.max_steps=1 --set task.max_seq_len=16 --set train.run_dir="$tmp/unk"

# SQuAD: trailing data, a repeated id, an empty question; evaluation answers every readable question
sq=$FX/squad_dev.json
{ cat $sq; echo '{"x": 1}'; } >"$tmp/trailing.json"
squad=(--set task.type=squad --set task.max_seq_len=32 --set task.doc_stride=8 --set task.max_query_length=8)
$T "$RP" finetune /dev/null "${squad[@]}" "${common[@]}" --set task.train_file=$FX/squad_train.json \
  --set task.init_checkpoint="$tmp/ft_init.h5" --set task.max_steps=2 --set train.run_dir="$tmp/squad" >/dev/null 2>&1
check "control: a short SQuAD fine-tuning run" test -s "$tmp/squad/model.h5"
expect_error "SQuAD JSON with data after the document names file and line" "trailing.json: SQuAD JSON: unexpected data after the JSON value at line $(( $(wc -l <$sq) + 1 ))" \
  $T "$RP" predict /dev/null --checkpoint "$tmp/squad/model.h5" --input "$tmp/trailing.json" --out "$tmp/p.json"
"$PY" - $sq "$tmp" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
qas = d["data"][0]["paragraphs"][0]["qas"]
dup = json.loads(json.dumps(d)); dup["data"][0]["paragraphs"][0]["qas"].append(dict(qas[0], question="again?"))
json.dump(dup, open(sys.argv[2] + "/dup.json", "w"))
empty = json.loads(json.dumps(d)); empty["data"][0]["paragraphs"][0]["qas"][1]["question"] = "  "
json.dump(empty, open(sys.argv[2] + "/empty.json", "w"))
off = json.loads(json.dumps(d)); off["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] += 3
json.dump(off, open(sys.argv[2] + "/offset.json", "w"))
PY
expect_error "SQuAD: a repeated question id (bad_examples = fatal) names it" "question id q1-dev appears more than once" \
  $T "$RP" predict /dev/null --checkpoint "$tmp/squad/model.h5" --input "$tmp/dup.json" --out "$tmp/p.json" \
  --set task.bad_examples=fatal
expect_error "SQuAD: an empty question (bad_examples = fatal) names its id" "question q2-dev: an empty \"question\" text" \
  $T "$RP" predict /dev/null --checkpoint "$tmp/squad/model.h5" --input "$tmp/empty.json" --out "$tmp/p.json" \
  --set task.bad_examples=fatal
expect_ok "SQuAD: a skipped question still counts, as 0 (6 questions in the denominator)" "over 6 questions" \
  $T "$RP" predict /dev/null --checkpoint "$tmp/squad/model.h5" --input "$tmp/empty.json" --out "$tmp/p.json"
expect_ok "SQuAD: a question whose answer_start misses its text is answered and counted" \
  "1 whose answer_start misses the text" \
  $T "$RP" predict /dev/null --checkpoint "$tmp/squad/model.h5" --input "$tmp/offset.json" --out "$tmp/p.json"
check "... predictions.json answers all 6 questions" \
  "$PY" -c "import json, sys; sys.exit(len(json.load(open('$tmp/p.json'))) != 6)"
