#!/usr/bin/env bash
# Nothing a user does loses a run (issue 18): every file argument is checked before it is opened,
# every path written is compared with every path read before any work (core/io/paths.h), every
# writer is whole or nothing with the system's reason on failure (core/io/atomic_file.h), JSON is
# read strictly (core/io/json.h), and what import-hf writes loads everywhere. Each refusal has a
# positive control; commands run under `timeout` so that a hang (a FIFO) is a failure.
source "$(dirname "$0")/../../lib.sh"
FX=tests/fixtures/finetune
T="timeout 20"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
expect_ok() { # NAME PATTERN COMMAND...: exit 0 and PATTERN in the output
  local name=$1 pattern=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq 0 ] && grep -qF -- "$pattern" <<<"$out"; then pass "$name"
  else fail "$name" "status $rc: $(head -c 400 <<<"$out")"; fi
}
no_temp() { ! ls -A "$1" 2>/dev/null | grep -q '\.tmp\.'; } # DIR holds no NAME.tmp.PID

"$RP" init $FX/tiny.ini --out "$tmp/mlm.h5" >/dev/null 2>&1 || fail "setup: init"
"$RP" export-hf "$tmp/mlm.h5" --out "$tmp/hf" >/dev/null 2>&1 || fail "setup: export-hf"
common=(--set train.threads=1 --set task.batch_size=8 --set task.max_steps=1 --set task.max_seq_len=16
        --set train.log_interval=1000 --set task.init_checkpoint="$tmp/mlm.h5")
"$RP" finetune /dev/null --set task.glue_task=sst2 --set task.train_file=$FX/sst_train.tsv "${common[@]}" \
  --set train.run_dir="$tmp/sst" >/dev/null 2>&1 || fail "setup: an SST-2 fine-tuning"
"$RP" export-hf "$tmp/sst/model.h5" --out "$tmp/hfcls" >/dev/null 2>&1 || fail "setup: export-hf of the classifier"
"$RP" import-hf "$tmp/hf" --out "$tmp/imported.h5" >/dev/null 2>&1 || fail "setup: import-hf" # holds /vocab
has() { grep -qF -- "$2" <<<"$1"; } # TEXT PATTERN

# ---- every file argument is stat'ed first: a FIFO is named, never opened (it would block) ----------
mkfifo "$tmp/fifo"; mkdir -p "$tmp/adir"
expect_error "a FIFO as the config" "fifo: config file is a FIFO (named pipe), expected a regular file" \
  $T "$RP" config "$tmp/fifo"
expect_error "a directory as the config" "adir: config file is a directory, expected a regular file" \
  $T "$RP" config "$tmp/adir"
expect_error "a FIFO as the vocabulary" "fifo: tokenize: --vocab is a FIFO" $T "$RP" tokenize --vocab "$tmp/fifo" </dev/null
expect_error "a FIFO as a vocab corpus" "fifo: --corpus is a FIFO" \
  $T "$RP" vocab --corpus "$tmp/fifo" --size 50 --out "$tmp/v.txt"
expect_error "a FIFO as the checkpoint" "fifo: the checkpoint is a FIFO" $T "$RP" inspect "$tmp/fifo"
expect_error "a directory as the checkpoint: a run directory without a checkpoint yet" \
  "adir: a directory with no checkpoint yet" $T "$RP" inspect "$tmp/adir"
expect_error "a FIFO as the prepare corpus" "fifo: corpus file ([data] corpus) is a FIFO" \
  $T "$RP" prepare configs/tiny.ini --set data.corpus="$tmp/fifo" --set data.vocab=$FX/vocab.txt \
  --set data.shard_dir="$tmp/shards"
for f in config.json model.safetensors vocab.txt; do
  cp -r "$tmp/hf" "$tmp/hf-$f"; rm "$tmp/hf-$f/$f"; mkfifo "$tmp/hf-$f/$f"
  expect_error "import-hf with $f a FIFO" "$f: $f is a FIFO" $T "$RP" import-hf "$tmp/hf-$f" --out "$tmp/x.h5"
done
cp -r "$tmp/hf" "$tmp/hf-dir"; rm "$tmp/hf-dir/model.safetensors"; mkdir "$tmp/hf-dir/model.safetensors"
expect_error "import-hf with model.safetensors a directory" "model.safetensors: model.safetensors is a directory" \
  $T "$RP" import-hf "$tmp/hf-dir" --out "$tmp/x.h5"
expect_ok "control: /dev/null reads as an empty config" "[model]" $T "$RP" config /dev/null

# ---- every path written is compared with every path read, before any work --------------------------
for f in model.safetensors config.json vocab.txt; do
  cp -r "$tmp/hf" "$tmp/in-$f"; sum=$(md5sum <"$tmp/in-$f/$f")
  expect_error "import-hf DIR --out DIR/$f" "are the same file" $T "$RP" import-hf "$tmp/in-$f" --out "$tmp/in-$f/$f"
  check "... and DIR/$f is intact" test "$(md5sum <"$tmp/in-$f/$f")" = "$sum"
done
expect_error "import-hf --config-out DIR/config.json" "config.json' and --config-out" \
  $T "$RP" import-hf "$tmp/hf" --out "$tmp/imp.h5" --config-out "$tmp/hf/./config.json"
expect_error "import-hf --out X --config-out X" "are the same path; the second write would destroy the first" \
  $T "$RP" import-hf "$tmp/hf" --out "$tmp/same" --config-out "$tmp/adir/../same"
check "... and nothing was written" test ! -e "$tmp/same"
expect_ok "control: import-hf DIR --out DIR/model.h5 (a new file beside the inputs)" "wrote" \
  $T "$RP" import-hf "$tmp/hf" --out "$tmp/hf/model.h5"
rm -f "$tmp/hf/model.h5"
expect_error "predict --out CONFIG" "are the same file" \
  $T "$RP" predict "$tmp/sst/config.ini" --checkpoint "$tmp/sst/model.h5" --input $FX/sst_dev.tsv --out "$tmp/sst/config.ini"
expect_error "average --out into a directory" "--out is a directory" $T "$RP" average "$tmp/mlm.h5" --out "$tmp/adir"
expect_error "init --out in a missing directory, before any work" "does not exist (No such file or directory)" \
  $T "$RP" init $FX/tiny.ini --out "$tmp/no/such/x.h5"
expect_error "export-hf --out ''" "--out: expected a path, got an empty string" $T "$RP" export-hf "$tmp/mlm.h5" --out ""
mkdir -p "$tmp/emptydir"; ln -s "$tmp/emptydir" "$tmp/outlink"
expect_error "export-hf --out SYMLINK" "--out is a symbolic link" $T "$RP" export-hf "$tmp/mlm.h5" --out "$tmp/outlink"
check "... leaves no temporary folder" no_temp "$tmp"
expect_ok "control: export-hf into an empty folder" "wrote" $T "$RP" export-hf "$tmp/mlm.h5" --out "$tmp/emptydir"
# bench's --json, checked before the first step (which the messages would otherwise follow): a FIFO or a
# device there would be replaced by the rename of the atomic write (a FIFO here stands for /dev/null)
bench=("$RP" bench $FX/tiny.ini --batch-size 2 --seq-len 8 --steps 1 --warmup 0 --probes start)
expect_error "bench --json FIFO, before any step" "fifo: --json is a FIFO (named pipe), expected a regular file" \
  $T "${bench[@]}" --json "$tmp/fifo"
check "... and the FIFO is still one" test -p "$tmp/fifo"
expect_error "bench --json in a missing directory, before any step" "does not exist (No such file or directory)" \
  $T "${bench[@]}" --json "$tmp/no/such/bench.json"
cp $FX/tiny.ini "$tmp/bench.ini"; sum=$(md5sum <"$tmp/bench.ini")
expect_error "bench --json CONFIG" "are the same file" $T "$RP" bench "$tmp/bench.ini" --batch-size 2 --seq-len 8 \
  --steps 1 --json "$tmp/bench.ini"
check "... and the config is intact" test "$(md5sum <"$tmp/bench.ini")" = "$sum"
expect_ok "control: bench --json a new file" "realpos: " $T "${bench[@]}" --json "$tmp/bench.json"

# ---- every writer is whole or nothing, with the reason (a full and a read-only tmpfs) ---------------
mnt="$tmp/mnt"; mkdir -p "$mnt/full" "$mnt/ro"
if mount -t tmpfs -o size=64k tmpfs "$mnt/full" 2>/dev/null && mount -t tmpfs -o ro,size=16k tmpfs "$mnt/ro"; then
  trap 'umount "$mnt/full" "$mnt/ro" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
  full="$mnt/full"
  cp $FX/vocab.txt "$full/vocab.txt"; sum=$(md5sum <"$full/vocab.txt")
  head -c $(( $(stat -f -c '%a * %S' "$full") )) /dev/zero >"$full/filler" 2>/dev/null # no block left
  for i in $(seq 1 40); do cat $FX/sst_train.tsv; done | cut -f1 >"$tmp/corpus.txt"
  expect_error "vocab --out over a vocabulary on a full disk: the reason" "No space left on device" \
    $T "$RP" vocab --corpus "$tmp/corpus.txt" --size 300 --out "$full/vocab.txt"
  check "... the previous vocabulary is intact" test "$(md5sum <"$full/vocab.txt")" = "$sum"
  check "... no temp file" no_temp "$full"
  writers=(
    "export-hf|$RP export-hf $tmp/mlm.h5 --out $full/hfout"
    "import-hf|$RP import-hf $tmp/hf --out $full/imp.h5"
    "init|$RP init $FX/tiny.ini --out $full/init.h5"
    "average|$RP average $tmp/mlm.h5 --out $full/avg.h5"
    "predict|$RP predict /dev/null --checkpoint $tmp/sst/model.h5 --input $FX/sst_dev.tsv --out $full/p.tsv"
    "attention|$RP attention $tmp/mlm.h5 --input $FX/sst_dev.tsv --out $full/attn.h5"
  )
  for w in "${writers[@]}"; do
    name=${w%%|*}; cmd=${w#*|}
    expect_error "$name onto a full disk: the reason" "No space left on device" $T $cmd
    check "... no temporary file or folder left" no_temp "$full"
  done
  check "... and no partial output" test "$(ls "$full")" = "$(printf 'filler\nvocab.txt')"
  expect_error "import-hf --config-out onto a full disk" "No space left on device" \
    $T "$RP" import-hf "$tmp/hf" --out "$tmp/imp_ok.h5" --config-out "$full/imp.ini"
  check "... no temp file" no_temp "$full"
  expect_error "init into a read-only directory: the reason, before the work" "Read-only file system" \
    $T "$RP" init $FX/tiny.ini --out "$mnt/ro/x.h5"
  mkdir -p "$tmp/p"; synthetic_corpus "$tmp/p" 40 30 3
  printf '[model]\nhidden_size = 16\nnum_layers = 1\nnum_heads = 2\nintermediate_size = 32\nvocab_size = 45\n%s' \
    'max_position = 32
[train]
batch_size = 4
max_steps = 4
warmup_steps = 1
checkpoint_interval = 2
eval_interval = 2
eval_batches = 1
threads = 1
[data]
max_seq_len = 16
max_predictions_per_seq = 3
eval_fraction = 0.2' >"$tmp/p/p.ini"
  pset=(--set data.corpus="$tmp/p/corpus.txt" --set data.vocab="$tmp/p/vocab.txt" --set data.shard_dir="$tmp/p/shards")
  "$RP" prepare "$tmp/p/p.ini" "${pset[@]}" >/dev/null 2>&1 || fail "setup: prepare"
  expect_error "pretrain into a full disk: the file and the reason" "No space left on device" \
    $T "$RP" pretrain "$tmp/p/p.ini" "${pset[@]}" --set train.run_dir="$full/run"
  check "... no temp file in the run directory" no_temp "$full/run"
  check "... and no empty or partial file (config.ini, metrics) left as if written" \
    test -z "$(find "$full/run" -type f -empty ! -name .lock 2>/dev/null)" # the lock's owner line may not fit
else
  echo "SKIP full and read-only disks: cannot mount a tmpfs (not root?)"
fi

# ---- import-hf: linear in the header, and what it writes loads everywhere ----------------------------
"$PY" - "$tmp/hf" "$tmp/big" <<'PY'
import json, shutil, struct, sys
src, dst = sys.argv[1:]
shutil.copytree(src, dst)
n = 150000  # a 15 MB header of 150 k tensor entries (O(n^2) name checks took minutes)
header = {f"bert.encoder.extra.{i}.weight": {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
          for i in range(n)}
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
open(dst + "/model.safetensors", "wb").write(struct.pack("<Q", len(text)) + text + bytes(4 * n))
PY
start=$(date +%s.%N)
out=$(timeout 15 "$RP" import-hf "$tmp/big" --out "$tmp/big.h5" 2>&1); rc=$?
took=$(echo "$(date +%s.%N) - $start" | bc)
if [ $rc -eq 1 ] && has "$out" "missing tensor for realpos parameter"; then
  pass "a header of 150000 tensor entries is parsed and refused in ${took} s (limit 15 s; O(n^2) took minutes)"
else fail "a header of 150000 tensor entries is parsed and refused within 15 s" "status $rc after ${took} s: $(tail -c 300 <<<"$out")"; fi

edit_hf() { # NAME PYTHON: copy $tmp/hf to $tmp/e-NAME and run PYTHON with d = that folder, cfg = config.json
  cp -r "${3:-$tmp/hf}" "$tmp/e-$1"
  "$PY" -c "
import json, struct, numpy as np
d = '$tmp/e-$1'; cfg = json.load(open(d + '/config.json'))
$2"
}
edit_hf nan "
raw = open(d + '/model.safetensors', 'rb').read(); n = struct.unpack('<Q', raw[:8])[0]; h = json.loads(raw[8:8 + n])
b = h['bert.encoder.layer.0.attention.self.query.weight']['data_offsets'][0] + 8 + n + 4 * 7
open(d + '/model.safetensors', 'wb').write(raw[:b] + np.float32(np.nan).tobytes() + raw[b + 4:])"
expect_error "a NaN weight is refused at import, naming the tensor" \
  "tensor 'bert.encoder.layer.0.attention.self.query.weight': element 7 is nan" $T "$RP" import-hf "$tmp/e-nan" --out "$tmp/nan.h5"
check "... and nothing is written" test ! -e "$tmp/nan.h5"
edit_hf trailing "open(d + '/config.json', 'a').write('{\"hidden_size\": 64}')"
expect_error "config.json with trailing data" "config.json: HuggingFace config: unexpected data after the JSON value" \
  $T "$RP" import-hf "$tmp/e-trailing" --out "$tmp/x.h5"
edit_hf dupkey "t = open(d + '/config.json').read().replace('\"hidden_size\"', '\"hidden_size\": 64, \"hidden_size\"', 1); open(d + '/config.json', 'w').write(t)"
expect_error "config.json with a repeated key names it" "key 'hidden_size' appears twice" \
  $T "$RP" import-hf "$tmp/e-dupkey" --out "$tmp/x.h5"
labels=("semi;colon" "dup dup" "a space" "a	tab" "new
line" "" "$(head -c 5000 /dev/zero | tr '\0' x)")
why=("an INI comment character" "both named" "a space" "a tab" "a line break" "an empty label name" "a label name of 5000 bytes")
for i in "${!labels[@]}"; do
  LABEL="${labels[$i]}" edit_hf "label$i" "
import os
l = os.environ['LABEL']; names = l.split(' ') if l == 'dup dup' else [l, 'other']
cfg['id2label'] = {str(k): v for k, v in enumerate(names)}; cfg['label2id'] = {v: k for k, v in enumerate(names)}
json.dump(cfg, open(d + '/config.json', 'w'))" "$tmp/hfcls"
  expect_error "id2label: ${why[$i]} is refused at import, naming it" "${why[$i]}" \
    $T "$RP" import-hf "$tmp/e-label$i" --out "$tmp/label.h5"
done
edit_hf goodlabels "
cfg['id2label'] = {'0': 'négatif', '1': 'POSITIVE_1'}; cfg['label2id'] = {'négatif': 0, 'POSITIVE_1': 1}
json.dump(cfg, open(d + '/config.json', 'w'))" "$tmp/hfcls"
expect_ok "control: UTF-8 word labels import" "wrote" $T "$RP" import-hf "$tmp/e-goodlabels" --out "$tmp/good.h5"
expect_ok "... inspect --verify accepts the result" "present, right shapes, finite" $T "$RP" inspect --verify "$tmp/good.h5"
awk -F'\t' -v OFS='\t' 'NR > 1 { $2 = $2 == 1 ? "POSITIVE_1" : "négatif" } { print }' $FX/sst_dev.tsv >"$tmp/named.tsv"
"$RP" predict /dev/null --checkpoint "$tmp/good.h5" --input "$tmp/named.tsv" --out "$tmp/good.tsv" >/dev/null 2>&1
check "... and predict labels every row with the imported names" \
  bash -c "[ \$(grep -cE '^[0-9]+	(négatif|POSITIVE_1)	' '$tmp/good.tsv') -eq $(( $(wc -l <$FX/sst_dev.tsv) - 1 )) ] &&
           head -n 1 '$tmp/good.tsv' | grep -qx 'index	prediction	prob_négatif	prob_POSITIVE_1'"

# ---- vocabularies ------------------------------------------------------------------------------------
printf '\xef\xbb\xbf' | cat - $FX/vocab.txt >"$tmp/bom.txt"
expect_error "a vocabulary with a UTF-8 BOM names the BOM" "starts with a UTF-8 byte order mark" \
  $T "$RP" tokenize --vocab "$tmp/bom.txt" <<<"film"
{ tail -n +2 $FX/vocab.txt; head -1 $FX/vocab.txt; } >"$tmp/other_vocab.txt"
for v in "$tmp/other_vocab.txt" /etc/passwd; do
  expect_error "export-hf --vocab $(basename "$v") unlike the checkpoint's is refused" "--vocab differs from the vocabulary stored in" \
    $T "$RP" export-hf "$tmp/imported.h5" --out "$tmp/ex-$(basename "$v")" --vocab "$v"
done
expect_ok "control: export-hf --vocab equal to the checkpoint's" "wrote" \
  $T "$RP" export-hf "$tmp/imported.h5" --out "$tmp/ex-same" --vocab $FX/vocab.txt
# the one vocabulary-size check (tokenizer_for_model), as each command reaches it: a vocabulary one
# token short of model.vocab_size = 115 is named with both sizes and where 115 comes from
head -n 114 $FX/vocab.txt >"$tmp/short_vocab.txt"
expect_error "eval: a vocabulary of another size than the model's" \
  "short_vocab.txt: the vocabulary has 114 tokens but model.vocab_size = 115" \
  $T "$RP" eval $FX/tiny.ini --checkpoint "$tmp/mlm.h5" --set data.vocab="$tmp/short_vocab.txt"
expect_error "bench --lengths-from: likewise" "short_vocab.txt: the vocabulary has 114 tokens but model.vocab_size = 115" \
  $T "$RP" bench $FX/tiny.ini --lengths-from $FX/sst_train.tsv --set task.glue_task=sst2 --set task.max_seq_len=16 \
  --set data.vocab="$tmp/short_vocab.txt"
expect_error "fill-mask --vocab: likewise, against the checkpoint's model" \
  "short_vocab.txt: the vocabulary has 114 tokens but the checkpoint's model.vocab_size = 115" \
  $T "$RP" fill-mask "$tmp/mlm.h5" --vocab "$tmp/short_vocab.txt" --text "the [MASK] film"

# ---- fill-mask, average ------------------------------------------------------------------------------
out=$(printf 'the [MASK] film\n\0the film [MASK]\n' | $T "$RP" fill-mask "$tmp/mlm.h5" 2>&1); rc=$?
if [ $rc -eq 1 ] && has "$out" "a NUL byte at byte 16 (line 2)"; then pass "fill-mask: a NUL byte on stdin is refused, not a silent '1 of 1'"
else fail "fill-mask: a NUL byte on stdin is refused" "status $rc: $out"; fi
cp -r "$tmp/hf" "$tmp/hf-vocab2"; sed -i 's/^film$/movie2/' "$tmp/hf-vocab2/vocab.txt"
"$RP" import-hf "$tmp/hf-vocab2" --out "$tmp/mlm2.h5" >/dev/null 2>&1 || fail "setup: import with another vocabulary"
expect_error "average of checkpoints with different vocabularies names both and the line" \
  "mlm2.h5: its vocabulary differs from $tmp/imported.h5's from line $(grep -nx film $FX/vocab.txt | cut -d: -f1)" \
  $T "$RP" average "$tmp/imported.h5" "$tmp/mlm2.h5" --out "$tmp/avg.h5"
"$RP" finetune /dev/null --set task.glue_task=none --set task.text_a_column=0 --set task.label_column=1 --set task.header=yes \
  --set task.labels="1 0" --set task.train_file=$FX/sst_train.tsv "${common[@]}" --set train.run_dir="$tmp/sst10" >/dev/null 2>&1
"$RP" finetune /dev/null --set task.glue_task=none --set task.text_a_column=0 --set task.label_column=1 --set task.header=yes \
  --set task.labels="0 1" --set task.train_file=$FX/sst_train.tsv "${common[@]}" --set train.run_dir="$tmp/sst01" >/dev/null 2>&1
expect_error "average of classifiers with another label order" "key 'task.labels' is \"0 1\", but $tmp/sst10/model.h5 has \"1 0\"" \
  $T "$RP" average "$tmp/sst10/model.h5" "$tmp/sst01/model.h5" --out "$tmp/avg.h5"
check "... writes nothing" test ! -e "$tmp/avg.h5"

# ---- task files ----------------------------------------------------------------------------------------
awk -F'\t' 'NR == 1 { print; next } { print "\t" $2 }' $FX/sst_train.tsv >"$tmp/empty_text.tsv"
expect_error "SST-2 whose every sentence is empty" "none of its 96 examples has text" \
  $T "$RP" finetune /dev/null --set task.glue_task=sst2 --set task.train_file="$tmp/empty_text.tsv" "${common[@]}" \
  --set train.run_dir="$tmp/empty"
awk -F'\t' 'NR == 2 { print "\t" $2; next } { print }' $FX/sst_train.tsv >"$tmp/one_empty.tsv"
expect_ok "SST-2 with one empty sentence warns with the count" "1 of 96 examples have no text" \
  $T "$RP" finetune /dev/null --set task.glue_task=sst2 --set task.train_file="$tmp/one_empty.tsv" "${common[@]}" \
  --set train.run_dir="$tmp/oneempty"
"$PY" - $FX/squad_dev.json "$tmp" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
v2 = json.loads(json.dumps(d)); v2["version"] = "v2.0"
json.dump(v2, open(sys.argv[2] + "/v2.json", "w"))
imp = json.loads(json.dumps(d)); del imp["version"]
q = imp["data"][0]["paragraphs"][0]["qas"][1]; q["is_impossible"] = True; q["plausible_answers"] = q.pop("answers"); q["answers"] = []
json.dump(imp, open(sys.argv[2] + "/impossible.json", "w"))
dup = json.loads(json.dumps(d)); qas = dup["data"][0]["paragraphs"][0]["qas"]; qas.append(dict(qas[0], question="again?"))
json.dump(dup, open(sys.argv[2] + "/dup.json", "w"))
PY
squad=(--set task.type=squad --set task.max_seq_len=32 --set task.doc_stride=8 --set task.max_query_length=8)
expect_error "a SQuAD v2.0 file (version) is named as such" "\"version\": \"v2.0\": a SQuAD v2.0 file" \
  $T "$RP" finetune /dev/null "${squad[@]}" --set task.train_file="$tmp/v2.json" "${common[@]}" --set train.run_dir="$tmp/v2"
expect_error "a SQuAD v2.0 file (is_impossible) is named as such" "question q2-dev has \"is_impossible\": a SQuAD v2.0 file" \
  $T "$RP" finetune /dev/null "${squad[@]}" --set task.train_file="$tmp/impossible.json" "${common[@]}" --set train.run_dir="$tmp/v2"
expect_ok "a repeated SQuAD question id is skipped naming the id" "question id q1-dev appears more than once" \
  $T "$RP" finetune /dev/null "${squad[@]}" --set task.train_file="$tmp/dup.json" "${common[@]}" --set train.run_dir="$tmp/dup"
expect_error "a --set value with a newline says it is the newline" "expected a one-line value, got a newline at character" \
  $T "$RP" config configs/tiny.ini --set "train.run_dir=a
b"

# ---- conventions of a CLI tool -----------------------------------------------------------------------------
expect_ok "realpos --version names the commit, OpenBLAS and HDF5" "(git commit " $T "$RP" --version
out=$("$RP" --version)
if grep -q '^OpenBLAS: .*; core .*; threading ' <<<"$out" && grep -qE '^HDF5 [0-9]+\.[0-9]+\.[0-9]+$' <<<"$out"; then
  pass "... OpenBLAS core and threading, HDF5 version"; else fail "... OpenBLAS core and threading, HDF5 version" "$out"; fi
for c in config prepare pretrain eval finetune predict init inspect average dump attention import-hf export-hf fill-mask bench tokenize vocab synth; do
  out=$("$RP" $c --help 2>/dev/null); rc=$?
  if [ $rc -eq 0 ] && has "$out" "usage: realpos $c " && has "$out" "options:"; then
    pass "realpos $c --help: usage and options on stdout, exit 0"
  else fail "realpos $c --help: usage and options on stdout, exit 0" "status $rc: $out"; fi
done
out=$("$RP" 2>&1 >/dev/null); rc=$?
if [ $rc -eq 2 ] && [ "$(grep -c '^  realpos ' <<<"$out")" -eq 18 ]; then pass "realpos alone lists every command (stderr, exit 2)"
else fail "realpos alone lists every command (stderr, exit 2)" "status $rc: $out"; fi
expect_error "an unknown command lists the commands" "realpos fill-mask CKPT.h5" "$RP" nosuch
out=$("$RP" init 2>&1); usage_line=$("$RP" init --help | head -1)
if has "$out" "$usage_line"; then pass "a usage error prints the table's usage line"
else fail "a usage error prints the table's usage line" "$out"; fi

# A batch whose dropout masks would need more than the 2^32 element indices of one key
# (core/rng.h) is refused when the activations are laid out, before they are allocated: under a
# 2 GB address-space limit the refusal comes first; at exactly 2^32, or without that dropout, the
# same shape gets as far as the allocation (and fails there, for lack of memory).
big=(bench configs/tiny.ini --set model.absolute_position=no --set model.relative_position=shaw
     --set model.num_heads=16 --seq-len 2048 --steps 1 --warmup 0)
expect_error "attention dropout over 2^32 scores is refused before allocating" \
  "4362076160 attention scores, over the 2^32" bash -c 'ulimit -v 2000000; exec "$@"' _ "$RP" "${big[@]}" --batch-size 65
expect_error "2^32 attention scores with dropout reach the allocation" "out of memory" \
  bash -c 'ulimit -v 2000000; exec "$@"' _ "$RP" "${big[@]}" --batch-size 64
expect_error "hidden dropout over 2^32 values is refused before allocating" \
  "4297064448 hidden values, over the 2^32" bash -c 'ulimit -v 2000000; exec "$@"' _ "$RP" "${big[@]}" \
  --set model.attention_dropout=0 --set model.num_heads=1 --set model.hidden_size=1024 --batch-size 2049
expect_error "2^32 hidden values with dropout reach the allocation" "out of memory" \
  bash -c 'ulimit -v 2000000; exec "$@"' _ "$RP" "${big[@]}" --set model.attention_dropout=0 \
  --set model.num_heads=1 --set model.hidden_size=1024 --batch-size 2048
