#!/usr/bin/env bash
# realpos import-hf / export-hf / fill-mask against HuggingFace-format folders written by an
# independent PyTorch implementation of HF BERT (tests/reference/hf_reference.py; tiny configs):
#  - import: every naming variant (BertForMaskedLM with 'bert.', BertModel without, TF
#    gamma/beta, F16, BF16, sharded index, position_ids buffers, NSP head, stored tied decoder)
#    and every position type; MLM logits of `realpos dump` = the reference's (parity tolerances);
#  - export: realpos checkpoints (absolute, Shaw and Method 4 with k < max_position - 1) give
#    folders whose reference logits equal realpos's; exact round trips both ways;
#  - fill-mask: top-k tokens and probabilities = the reference's softmax;
#  - refusals and bad input (safetensors header, offsets, dtypes, config.json, vocabulary).
source "$(dirname "$0")/../../lib.sh"
REF=tests/reference/hf_reference.py
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

# ---- folders, batch and reference logits (one Python process) ---------------------------------
variants=(
  "mlm-absolute --arch mlm --position-ids"
  "pretraining-rkq --arch pretraining --position relative_key_query --decoder-stored --seed 2"
  "mlm-rk-gammabeta --arch mlm --position relative_key --gamma-beta --cased --seed 3"
  "mlm-rkq-f16 --arch mlm --position relative_key_query --dtype F16 --seed 4"
  "mlm-absolute-bf16 --arch mlm --dtype BF16 --seed 5"
  "mlm-rk-sharded --arch mlm --position relative_key --shards 3 --seed 6"
)
others=(
  "base-noprefix --arch base --position-ids --seed 7"
  "seqcls --arch seqcls --position relative_key_query --seed 8"
  "qa --arch qa --seed 9"
)
jobs="$tmp/setup.jobs"
: >"$jobs"
for v in "${variants[@]}" "${others[@]}"; do
  set -- $v; name=$1; shift
  echo "make-folder $tmp/$name $*" >>"$jobs"
done
for kind in absolute relative_key_query; do # the docs' walk-through, on the fine-tuning fixtures' vocabulary
  echo "make-folder $tmp/docs-$kind --arch mlm --position $kind --vocab-file tests/fixtures/finetune/vocab.txt --max-position 32 --seed 12" >>"$jobs"
done
echo "make-batch $tmp/mlm-absolute --out $tmp/batch.h5 --batch-size 3 --seq-len 12 --seed 11" >>"$jobs"
for v in "${variants[@]}"; do
  set -- $v; echo "logits $tmp/$1 --batch $tmp/batch.h5 --out $tmp/$1.ref.h5" >>"$jobs"
done
# realpos-made models: absolute, Shaw and Method 4 truncated at k = 3 < max_position - 1 = 31,
# perturbed so that biases and LayerNorms are not at their initial values
init=(--set model.vocab_size=60 --set model.hidden_dropout=0.1 --set model.attention_dropout=0.1)
declare -A modes=([absolute]="" [shaw-k3]="--set model.absolute_position=no --set model.relative_position=shaw"
                  [method4-k3]="--set model.absolute_position=no --set model.relative_position=method4")
for m in absolute shaw-k3 method4-k3; do
  "$RP" init tests/fixtures/parity.ini "${init[@]}" ${modes[$m]} --set data.vocab=$tmp/mlm-absolute/vocab.txt \
    --out "$tmp/rp-$m.h5" >/dev/null 2>&1 || fail "realpos model $m: init"
  echo "perturb $tmp/rp-$m.h5 --seed 3 --scale 0.2" >>"$jobs"
done
$PY $REF jobs "$jobs" >"$tmp/setup.log" 2>&1 || { fail "reference setup" "$(tail -3 "$tmp/setup.log")"; exit 1; }

# Checks on HDF5 outputs, queued and run in one Python process at the end (startup is slow):
#   logits LABEL ENGINE.h5 REFERENCE.h5   loss and logits within the parity tolerances
#   same LABEL A.h5 B.h5                  /model datasets bit-identical
checks="$tmp/checks"
: >"$checks"
queue() { printf '%s\t%s\t%s\t%s\n' "$@" >>"$checks"; }
run_checks() {
  $PY - "$checks" <<'EOF2'
import sys, h5py
sys.path.insert(0, "tests/reference")
import compare
def walk(g, prefix=""):
    for k, v in g.items():
        if isinstance(v, h5py.Dataset): yield prefix + k
        else: yield from walk(v, prefix + k + "/")
for line in open(sys.argv[1]):
    kind, label, a, b = line.rstrip("\n").split("\t")
    try:
        if kind == "logits":
            compare.main([a, b, "--what", "logits", "--summary", label])
            continue
        ma, mb = h5py.File(a, "r")["model"], h5py.File(b, "r")["model"]
        na, nb = sorted(walk(ma)), sorted(walk(mb))
        bad = [n for n in na if n not in nb or ma[n].shape != mb[n].shape or ma[n][()].tobytes() != mb[n][()].tobytes()]
        bad += [n for n in nb if n not in na]
        print(f"{'FAIL' if bad or not na else 'PASS'} {label}: {len(na)} datasets, differing: {bad[:4]}")
    except Exception as err:
        print(f"FAIL {label}: {err}")
EOF2
}

# ---- import: MLM logits agree with the reference ----------------------------------------------
for v in "${variants[@]}"; do
  set -- $v; name=$1
  if "$RP" import-hf "$tmp/$name" --out "$tmp/$name.h5" >"$tmp/$name.table" 2>"$tmp/$name.err" &&
     "$RP" dump --checkpoint "$tmp/$name.h5" --batch "$tmp/batch.h5" --out "$tmp/$name.dump.h5" 2>>"$tmp/$name.err"
  then queue logits "import $name: MLM logits = HF reference" "$tmp/$name.dump.h5" "$tmp/$name.ref.h5"
  else fail "import $name" "$(tail -2 "$tmp/$name.err")"; fi
done
for v in "${others[@]}"; do
  set -- $v; name=$1
  "$RP" import-hf "$tmp/$name" --out "$tmp/$name.h5" >"$tmp/$name.table" 2>"$tmp/$name.err" ||
    fail "import $name" "$(tail -2 "$tmp/$name.err")"
done
t=$tmp/pretraining-rkq.table
grep -qE "^  loaded +bert/encoder/layer/1/attention/self/distance_embedding/weight +\[31, 8\]$" $t &&
  grep -qE "^  loaded +bert/pooler/dense/weight +\[32, 32\]$" $t &&
  grep -qE "^  dropped +cls.seq_relationship.weight +\[2, 32\]$" $t &&
  grep -qE "^  dropped +bert.embeddings.position_embeddings.weight +\[16, 32\]$" $t &&
  grep -qE "^  dropped +cls.predictions.decoder.weight +\[60, 32\]$" $t &&
  grep -qE "^  45 loaded, 0 grown, 0 initialised, 5 dropped$" $t &&
  pass "import table: relative table [2P-1, d] loaded, pooler kept, NSP, stored tied decoder and unused absolute table dropped" ||
  fail "import table" "$(tail -8 $t)"
grep -qE "^  dropped +bert.embeddings.position_ids +\[1, 16\]$" $tmp/mlm-absolute.table &&
  pass "import table: position_ids buffer dropped" || fail "position_ids dropped"
"$RP" inspect "$tmp/pretraining-rkq.h5" >"$tmp/inspect.out" 2>&1
grep -q "^relative_position = method4$" "$tmp/inspect.out" && grep -q "^relative_k = 15$" "$tmp/inspect.out" &&
  grep -q "^absolute_position = no$" "$tmp/inspect.out" &&
  pass "relative_key_query imports as method4 with k = max_position - 1 = 15" || fail "imported config"
"$RP" inspect "$tmp/seqcls.h5" >"$tmp/inspect.out" 2>&1
grep -q "^labels = class_0 class_1 class_2$" "$tmp/inspect.out" && grep -q "^type = classification$" "$tmp/inspect.out" &&
  pass "BertForSequenceClassification: classifier [3, H], labels from id2label" || fail "seqcls config"
"$RP" import-hf "$tmp/mlm-absolute" --out "$tmp/cfg.h5" --config-out "$tmp/cfg.ini" >/dev/null 2>&1
"$RP" config "$tmp/cfg.ini" >/dev/null 2>&1 && grep -q "^max_position = 16$" "$tmp/cfg.ini" &&
  pass "--config-out writes a valid INI of the imported model" || fail "--config-out"

# ---- export: round trips, and the reference runs realpos-made models --------------------------
jobs="$tmp/export.jobs"
: >"$jobs"
for v in "${variants[@]}" "${others[@]}"; do
  set -- $v; name=$1
  if "$RP" export-hf "$tmp/$name.h5" --out "$tmp/$name.out" 2>"$tmp/$name.exp.err" &&
     "$RP" import-hf "$tmp/$name.out" --out "$tmp/$name.again.h5" >/dev/null 2>>"$tmp/$name.exp.err"; then
    queue same "realpos -> HF -> realpos $name: /model bit-identical" "$tmp/$name.h5" "$tmp/$name.again.h5"
    echo "same-tensors $tmp/$name $tmp/$name.out" >>"$jobs"
  else fail "export $name" "$(tail -2 "$tmp/$name.exp.err")"; fi
done
grep -q '"BertForQuestionAnswering"' "$tmp/qa.out/config.json" && grep -q '"BertModel"' "$tmp/base-noprefix.out/config.json" &&
  grep -qE '"problem_type":[[:space:]]*"single_label_classification"' "$tmp/seqcls.out/config.json" &&
  grep -qE '"1":[[:space:]]*"class_1"' "$tmp/seqcls.out/config.json" &&
  grep -qE '"do_lower_case":[[:space:]]*true' "$tmp/qa.out/tokenizer_config.json" &&
  pass "export: architectures, problem_type, tokenizer_config" || fail "export config.json"
"$RP" inspect "$tmp/mlm-rk-gammabeta.h5" 2>&1 | grep -q "^do_lower_case = no$" &&
  grep -qE '"do_lower_case":[[:space:]]*false' "$tmp/mlm-rk-gammabeta.out/tokenizer_config.json" &&
  pass "casing: do_lower_case false imports as data.do_lower_case = no and exports back" || fail "cased folder"

# realpos-made models (perturbed at setup): dump, export, the reference on the exported folder
for m in absolute shaw-k3 method4-k3; do
  "$RP" dump --checkpoint "$tmp/rp-$m.h5" --batch "$tmp/batch.h5" --out "$tmp/rp-$m.dump.h5" 2>/dev/null &&
    "$RP" export-hf "$tmp/rp-$m.h5" --out "$tmp/rp-$m.out" 2>/dev/null &&
    "$RP" import-hf "$tmp/rp-$m.out" --out "$tmp/rp-$m.again.h5" >/dev/null 2>&1 ||
    fail "realpos model $m: dump/export/import"
  echo "logits $tmp/rp-$m.out --batch $tmp/batch.h5 --out $tmp/rp-$m.ref.h5" >>"$jobs"
  queue same "realpos $m -> HF -> realpos: /model bit-identical" "$tmp/rp-$m.h5" "$tmp/rp-$m.again.h5"
  queue logits "export $m: HF reference on the exported folder = realpos" "$tmp/rp-$m.dump.h5" "$tmp/rp-$m.ref.h5"
done
grep -qE '"realpos_relative_k":[[:space:]]*3,' "$tmp/rp-method4-k3.out/config.json" &&
  $PY -c "
import json, struct, sys
raw = open('$tmp/rp-method4-k3.out/model.safetensors', 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]; h = json.loads(raw[8:8 + n])
sys.exit(h['bert.encoder.layer.0.attention.self.distance_embedding.weight']['shape'] != [63, 16])" &&
  pass "method4 k = 3 exports HF's full [2P-1, d] = [63, 16] table, k recorded as realpos_relative_k" ||
  fail "exported table shape"

# ---- fill-mask ---------------------------------------------------------------------------------
"$RP" fill-mask "$tmp/mlm-absolute.h5" --top-k 3 --text "w1 [MASK] w3 [MASK]" >"$tmp/fill.out" 2>"$tmp/fill.err"
echo "top-k $tmp/mlm-absolute --ids 2,6,4,8,4,3 --k 3 --out $tmp/fill.expected" >>"$jobs" # [CLS] w1 [MASK] w3 [MASK] [SEP]
$PY $REF jobs "$jobs" >"$tmp/export.log" 2>&1
grep -q "^FAIL" "$tmp/export.log" && fail "HF -> realpos -> HF tensors" "$(grep -m3 FAIL "$tmp/export.log")" ||
  pass "HF -> realpos -> HF: every kept tensor bit-identical ($(grep -c '^OK' "$tmp/export.log") folders)"
# realpos prints "    RANK  TOKEN  PROB" (4 decimals) per mask; the reference 6 decimals
if paste <(grep '^    ' "$tmp/fill.out") "$tmp/fill.expected" |
   awk 'NF == 6 && $1 == $4 && $2 == $5 && ($3 - $6 < 6e-5 && $6 - $3 < 6e-5) {n++} END {exit n != 6}'; then
  pass "fill-mask: top-3 tokens and probabilities at both masks = the reference's softmax"
else fail "fill-mask" "$(paste <(grep '^    ' "$tmp/fill.out") "$tmp/fill.expected" | head -6)"; fi
expect_error "fill-mask: a line without [MASK]" "line 1: no [MASK]" "$RP" fill-mask "$tmp/mlm-absolute.h5" --text "w1 w2"
expect_error "fill-mask: a checkpoint without MLM head" "no MLM head" "$RP" fill-mask "$tmp/qa.h5" --text "[MASK]"

# ---- docs/huggingface.md walk-through: import, fill-mask, fine-tune SQuAD (+ Method 4), export --
FX=tests/fixtures/finetune
squad=(--set task.type=squad --set task.train_file=$FX/squad_train.json --set task.dev_file=$FX/squad_dev.json
       --set task.max_seq_len=32 --set task.doc_stride=8 --set task.max_query_length=10 --set task.max_answer_length=5
       --set task.epochs=2 --set task.batch_size=8 --set train.threads=1 --set train.log_interval=1000)
walk() { # LABEL COMMAND...: runs, output in $tmp/walk.log
  local label=$1; shift
  "$@" >>"$tmp/walk.log" 2>&1 && pass "docs walk-through: $label" || fail "docs walk-through: $label" "$(tail -3 "$tmp/walk.log")"
}
walk import-hf "$RP" import-hf "$tmp/docs-absolute" --out "$tmp/docs.h5" --config-out "$tmp/docs.ini"
walk fill-mask "$RP" fill-mask "$tmp/docs.h5" --text "the [MASK] sat on the mat"
walk "finetune SQuAD + method4" "$RP" finetune /dev/null "${squad[@]}" --set task.init_checkpoint="$tmp/docs.h5" \
  --set model.relative_position=method4 --set model.relative_k=8 --set train.run_dir="$tmp/squad-m4"
expect_error "docs walk-through: the drop-in model (absolute + method4) is not exportable" \
  "only when position_embedding_type = absolute" "$RP" export-hf "$tmp/squad-m4/model.h5" --out "$tmp/squad-m4-hf"
walk "finetune SQuAD (absolute)" "$RP" finetune /dev/null "${squad[@]}" --set task.init_checkpoint="$tmp/docs.h5" \
  --set train.run_dir="$tmp/squad"
walk "export-hf the SQuAD model (--out with a trailing slash)" "$RP" export-hf "$tmp/squad/model.h5" --out "$tmp/squad-hf/"
walk "import-hf relative_key_query" "$RP" import-hf "$tmp/docs-relative_key_query" --out "$tmp/docs-rkq.h5"
walk "finetune SQuAD (relative_key_query = method4, k = 31)" "$RP" finetune /dev/null "${squad[@]}" \
  --set task.init_checkpoint="$tmp/docs-rkq.h5" --set train.run_dir="$tmp/squad-rkq"
walk "export-hf the relative_key_query SQuAD model" "$RP" export-hf "$tmp/squad-rkq/model.h5" --out "$tmp/squad-rkq-hf"
for m in squad squad-rkq; do
  "$RP" import-hf "$tmp/$m-hf" --out "$tmp/$m-again.h5" >/dev/null 2>&1 || fail "import-hf $m-hf"
  queue same "docs walk-through: $m -> BertForQuestionAnswering -> realpos: /model bit-identical" \
    "$tmp/$m/model.h5" "$tmp/$m-again.h5"
done
grep -qE '"position_embedding_type":[[:space:]]*"relative_key_query"' "$tmp/squad-rkq-hf/config.json" &&
  grep -q '"BertForQuestionAnswering"' "$tmp/squad-rkq-hf/config.json" &&
  pass "docs walk-through: exported as BertForQuestionAnswering, relative_key_query" || fail "squad-rkq-hf config.json"

# ---- export refusals: nothing written ----------------------------------------------------------
refuse() { # LABEL PATTERN --set ...
  local label=$1 pattern=$2; shift 2
  "$RP" init tests/fixtures/parity.ini "${init[@]}" "$@" --set data.vocab=$tmp/mlm-absolute/vocab.txt \
    --out "$tmp/refuse.h5" >/dev/null 2>&1 || { fail "$label: init"; return; }
  rm -rf "$tmp/refused"
  expect_error "export refused: $label" "$pattern" "$RP" export-hf "$tmp/refuse.h5" --out "$tmp/refused"
  [ ! -e "$tmp/refused" ] && ! ls "$tmp"/refused.tmp.* >/dev/null 2>&1 || fail "$label: output left behind"
}
refuse "method2" "HF BERT has only relative_key" --set model.absolute_position=no --set model.relative_position=method2
refuse "t5" "relative_position = t5: HF BERT has no bucketed relative attention bias" \
  --set model.absolute_position=no --set model.relative_position=t5
refuse "alibi" "relative_position = alibi: HF BERT has no linear attention bias" \
  --set model.absolute_position=no --set model.relative_position=alibi
refuse "rope" "relative_position = rope: HF BERT has no rotary position embedding" \
  --set model.absolute_position=no --set model.relative_position=rope
refuse "residual attention" "residual (RealFormer)" --set model.residual_attention=yes
refuse "Pre-LN" "Post-LN" --set model.norm=pre
refuse "absolute + method4 (drop-in)" "only when position_embedding_type = absolute" --set model.relative_position=method4
refuse "relative_k > max_position - 1" "max_position - 1 = 31" --set model.absolute_position=no \
  --set model.relative_position=shaw --set model.relative_k=40
refuse "trained longer than max_position" "trained on sequences of 64 tokens" --set model.absolute_position=no \
  --set model.relative_position=shaw --set data.max_seq_len=64
# every reason at once, numbered, and nothing written (Pre-LN + residual + method2 + absolute)
refuse "all reasons named" "(1) model.norm = pre: HF BERT is Post-LN (LayerNorm after each residual); (2) model.residual_attention = yes: HF BERT has no residual (RealFormer) attention; (3) model.relative_position = method2: HF BERT has only relative_key (shaw) and relative_key_query (method4); (4) absolute and relative positions together" \
  --set model.norm=pre --set model.residual_attention=yes --set model.relative_position=method2
mkdir -p "$tmp/full" && touch "$tmp/full/x"
expect_error "export into a non-empty directory" "already exists" "$RP" export-hf "$tmp/mlm-absolute.h5" --out "$tmp/full"
# A killed export's OUT.tmp.PID (PID gone: above the kernel's pid_max) is swept by the next export
# to OUT; a live process's folder and another OUT's are left alone.
dead=$(( $(cat /proc/sys/kernel/pid_max) + 1 ))
mkdir -p "$tmp/swept.tmp.$dead" "$tmp/swept.tmp.$$" "$tmp/swept2.tmp.$dead"
touch "$tmp/swept.tmp.$dead/model.safetensors" "$tmp/swept.tmp.$$/config.json" "$tmp/swept2.tmp.$dead/x"
if "$RP" export-hf "$tmp/mlm-absolute.h5" --out "$tmp/swept" >"$tmp/swept.log" 2>&1 && [ ! -e "$tmp/swept.tmp.$dead" ] &&
   [ -e "$tmp/swept.tmp.$$/config.json" ] && [ -e "$tmp/swept2.tmp.$dead/x" ] && [ -f "$tmp/swept/config.json" ] &&
   grep -q "removed $tmp/swept.tmp.$dead, left by an export that was killed" "$tmp/swept.log"; then
  pass "export-hf sweeps a killed export's temporary folder, not a live one's or another folder's"
else
  fail "export-hf sweeps a killed export's temporary folder, not a live one's or another folder's" \
    "$(ls -d "$tmp"/swept* 2>&1 | tr '\n' ' '); $(tail -c 300 "$tmp/swept.log")"
fi

# ---- bad input ---------------------------------------------------------------------------------
$PY - "$tmp" <<'EOF' || fail "writing the bad inputs"
import json, os, shutil, struct, sys
tmp = sys.argv[1]
src = tmp + "/mlm-absolute"
raw = open(src + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
names = [k for k in header if k != "__metadata__"]
def folder(name, st=None, config=None, vocab=None, files=None):
    d = f"{tmp}/bad-{name}"
    shutil.copytree(src, d)
    if st is not None:
        open(d + "/model.safetensors", "wb").write(st)
    if config is not None:
        json.dump(config, open(d + "/config.json", "w"))
    if vocab is not None:
        open(d + "/vocab.txt", "w").write(vocab)
    for path, text in (files or {}).items():
        open(d + "/" + path, "w").write(text)
def pack(h, body=data):
    text = json.dumps(h).encode()
    return struct.pack("<Q", len(text)) + text + body
def edit(fn):
    h = json.loads(json.dumps(header)); fn(h); return h
config = json.load(open(src + "/config.json"))
first, second = names[0], names[1]
folder("truncated", raw[:-100])
folder("shortfile", raw[:5])
folder("headerlen", struct.pack("<Q", len(raw)) + raw[8:])
folder("notjson", struct.pack("<Q", 5) + b"{abc}" + data)
def overlap(h):
    b, e = h[second]["data_offsets"]; h[second]["data_offsets"] = [b - 4, e - 4]
folder("overlap", pack(edit(overlap)))
def past(h):
    b, e = h[first]["data_offsets"]; h[first]["data_offsets"] = [len(data) + 8, len(data) + 8 + e - b]
folder("past", pack(edit(past)))
def huge(h):
    h[first]["shape"] = [2 ** 40, 2 ** 40]
folder("overflow", pack(edit(huge)))
def negative(h):
    h[first]["shape"] = [-1, 32]
folder("negative", pack(edit(negative)))
def wrongsize(h):
    h[first]["shape"] = [h[first]["shape"][0], h[first]["shape"][1] + 1]
folder("numel", pack(edit(wrongsize)))
def int32(h):
    h[first]["dtype"] = "I32"
folder("dtype", pack(edit(int32)))
def unknown_dtype(h):
    h[first]["dtype"] = "Q7"
folder("unknowndtype", pack(edit(unknown_dtype)))
folder("hole", pack(header, data + b"\0" * 8))
def extra(h):
    h["bert.embeddings.mystery.weight"] = {"dtype": "F32", "shape": [2], "data_offsets": [len(data), len(data) + 8]}
folder("unknowntensor", pack(edit(extra), data + b"\0" * 8))
def missing(h):
    h["cls.predictions.foo"] = h.pop("cls.predictions.bias")
folder("missingtensor", pack(edit(missing)))
def shape(h):
    b, e = h["cls.predictions.bias"]["data_offsets"]
    h["cls.predictions.bias"]["shape"] = [2, (e - b) // 8]
folder("shape", pack(edit(shape)))
word = header["bert.embeddings.word_embeddings.weight"]
def untied(h):  # decoder.weight = the token-type table's bytes... a different matrix of the right size
    h["cls.predictions.decoder.weight"] = dict(word, data_offsets=[len(data), len(data) + word["data_offsets"][1] - word["data_offsets"][0]])
wb, we = word["data_offsets"]
folder("untied", pack(edit(untied), data + bytes(reversed(data[wb:we]))))
folder("nohidden", config={k: v for k, v in config.items() if k != "hidden_size"})
folder("relu", config=dict(config, hidden_act="relu"))
folder("untiedconfig", config=dict(config, tie_word_embeddings=False))
folder("postype", config=dict(config, position_embedding_type="rotary"))
folder("heads", config=dict(config, num_attention_heads=5))
folder("vocab", vocab="".join(f"t{i}\n" for i in range(59)).replace("t0\n", "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n", 1))
folder("stripaccents", files={"tokenizer_config.json": json.dumps({"do_lower_case": True, "strip_accents": False})})
folder("index", files={"model.safetensors.index.json": json.dumps({"weight_map": {first: "model-2.safetensors"}})})
folder("traversal", files={"model.safetensors.index.json": json.dumps({"weight_map": {first: "../x.safetensors"}})})
shutil.copytree(tmp + "/mlm-rk-sharded", tmp + "/bad-shardmap")  # one tensor mapped to the wrong shard
index = json.load(open(tmp + "/bad-shardmap/model.safetensors.index.json"))
name = sorted(index["weight_map"])[0]
index["weight_map"][name] = "model-00002-of-00003.safetensors" if index["weight_map"][name].startswith("model-00001") \
    else "model-00001-of-00003.safetensors"
json.dump(index, open(tmp + "/bad-shardmap/model.safetensors.index.json", "w"))
os.makedirs(tmp + "/bad-nofile"); shutil.copy(src + "/config.json", tmp + "/bad-nofile/")
EOF
bad() { expect_error "bad input: $1" "$2" "$RP" import-hf "$tmp/bad-$1" --out "$tmp/bad.h5"; }
bad truncated "run past the data buffer"
bad shortfile "shorter than the 8-byte header length"
bad headerlen "does not fit the file"
bad notjson "safetensors header: not valid JSON (error at line 1"
bad overlap "overlap the previous tensor"
bad past "run past the data buffer"
bad overflow "overflows"
bad negative "expected non-negative integers"
bad numel "need"
bad dtype "unsupported dtype I32 (expected F32, F16 or BF16)"
bad unknowndtype "unknown dtype 'Q7'"
bad hole "tensors cover"
bad unknowntensor "'bert.embeddings.mystery.weight'"
bad missingtensor "missing tensor for realpos parameter 'cls/predictions/bias'"
bad shape "tensor 'cls.predictions.bias': expected shape [60]"
bad untied "an untied decoder cannot be represented"
bad nohidden "missing key 'hidden_size'"
bad relu "key 'hidden_act'"
bad untiedconfig "key 'tie_word_embeddings' is false"
bad postype "key 'position_embedding_type'"
bad heads "key 'num_attention_heads': expected a divisor of hidden_size = 32"
bad vocab "vocab.txt: the vocabulary has 63 tokens but config.json says vocab_size = 60"
bad index "model-2.safetensors"
bad stripaccents "key 'strip_accents': realpos strips accents exactly when it lower-cases"
bad traversal "expected a .safetensors file name in the same folder"
bad nofile "no model.safetensors"
bad shardmap "is not in the weight_map of"
[ ! -e "$tmp/bad.h5" ] && pass "no checkpoint written by any bad import" || fail "a bad import wrote $tmp/bad.h5"

run_checks
