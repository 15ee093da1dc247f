#!/usr/bin/env bash
# Every command that reads a checkpoint takes it as --resume does (checkpoint_resolve,
# train/model/checkpoint.h): the file, RUN_DIR/latest, RUN_DIR or RUN_DIR/ (the run's newest),
# with the same result as naming the file; a run directory with no checkpoint yet, a missing path
# and a missing task.init_checkpoint are named (the key and the config line that set it).
source "$(dirname "$0")/../../lib.sh"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
export OMP_NUM_THREADS=1
synthetic_corpus "$tmp" 60 60 11
tiny_pretrain_ini "$tmp/p.ini" model.vocab_size=65 train.max_steps=4 data.max_seq_len=24
"$RP" prepare "$tmp/p.ini" >/dev/null 2>&1 && "$RP" pretrain "$tmp/p.ini" >/dev/null 2>&1 ||
  { fail "a tiny pretraining run"; exit 1; }
run=$tmp/run ckpt=$tmp/run/ckpt-0000004.h5
check "the run's latest is step 4" test "$(head -n 1 "$run/latest")" = ckpt-0000004.h5

# same_output NAME COMMAND...: the command's stdout, with {CKPT} in its words replaced by the file,
# RUN_DIR/latest, RUN_DIR and RUN_DIR/ in turn ({OUT} by an output path of each), is the same each
# time (and it exits 0)
same_output() {
  local name=$1 i=0 form ref=""; shift
  for form in "$ckpt" "$run/latest" "$run" "$run/"; do
    local -a argv=()
    local a
    for a in "$@"; do a=${a//\{CKPT\}/$form}; argv+=("${a//\{OUT\}/$tmp/out$i}"); done
    local got
    got=$("${argv[@]}" 2>"$tmp/err$i") || { fail "$name ($form)" "$(tail -n 2 "$tmp/err$i")"; return; }
    got=${got//$tmp\/out$i/OUTPUT}
    if [ $i -eq 0 ]; then ref=$got; elif [ "$got" != "$ref" ]; then fail "$name ($form)" "output differs"; return; fi
    i=$((i + 1))
  done
  pass "$name: the file, RUN_DIR/latest, RUN_DIR and RUN_DIR/ give the same output"
}
same_output "inspect" "$RP" inspect {CKPT}
same_output "inspect --verify" "$RP" inspect --verify {CKPT}
same_output "eval --checkpoint" "$RP" eval "$tmp/p.ini" --checkpoint {CKPT}
same_output "fill-mask" "$RP" fill-mask {CKPT} --text "w1 [MASK] w2"
printf 'w1 w2 w3 w4\nw5 w6\n' >"$tmp/sentences.txt"
# an HDF5 output's datasets, hashed
h5sum() { $PY -c "
import h5py, hashlib, sys
f, h = h5py.File(sys.argv[1], 'r'), hashlib.md5()
f.visit(lambda n: h.update(n.encode() + f[n][()].tobytes()) if isinstance(f[n], h5py.Dataset) and f[n].dtype.kind != 'O' else None)
print(h.hexdigest())" "$1"; }
# the weights only (/model: the training state holds the elapsed time)
h5model() { $PY -c "
import h5py, hashlib, sys
f, h = h5py.File(sys.argv[1], 'r')['model'], hashlib.md5()
f.visit(lambda n: h.update(n.encode() + f[n][()].tobytes()) if isinstance(f[n], h5py.Dataset) else None)
print(h.hexdigest())" "$1"; }
export -f h5sum; export PY
same_output "attention" bash -c '"$1" attention "$2" --input "$3" --out "$4.h5" 2>/dev/null && h5sum "$4.h5"' \
  _ "$RP" {CKPT} "$tmp/sentences.txt" {OUT}
same_output "export-hf" bash -c '"$1" export-hf "$2" --out "$3" 2>/dev/null && cat "$3/config.json" && md5sum <"$3/model.safetensors"' _ "$RP" {CKPT} {OUT}
$PY - "$tmp/batch.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    ids = np.array([[2, 10, 4, 11, 12, 3], [2, 13, 14, 4, 15, 3]], np.int32)
    f["input_ids"] = ids
    f["token_type_ids"] = np.zeros_like(ids)
    f["attention_mask"] = np.ones_like(ids)
    labels = np.full_like(ids, -100); labels[0, 2] = 20; labels[1, 3] = 21
    f["labels"] = labels
PY
$PY scripts/h5seal.py "$tmp/batch.h5" >/dev/null
same_output "dump --checkpoint" bash -c '"$1" dump --checkpoint "$2" --batch "$3" --out "$4.h5" && h5sum "$4.h5"' \
  _ "$RP" {CKPT} "$tmp/batch.h5" {OUT}
same_output "average" bash -c '"$1" average "$2" "$3" --out "$4.h5" 2>/dev/null && "$PY" -c "import h5py, numpy as np; print(np.asarray(h5py.File(\"$4.h5\")[\"model/cls/predictions/bias\"]).tobytes().hex())"' \
  _ "$RP" {CKPT} "$run/ckpt-0000002.h5" {OUT}
same_output "pretrain --init" bash -c '"$1" pretrain "$2" --init "$3" --set train.run_dir="$4" --set train.max_steps=2 2>&1 | grep -c "initialised weights from"' \
  _ "$RP" "$tmp/p.ini" {CKPT} {OUT}

# ---- with every option: RUN_DIR is resolved before the path rules apply (issue 35) ----------------
same_output "eval --checkpoint --json" bash -c '"$1" eval "$2" --checkpoint "$3" --json "$4.json" && cat "$4.json"' \
  _ "$RP" "$tmp/p.ini" {CKPT} {OUT}
same_output "eval --checkpoint --max-seq-len" "$RP" eval "$tmp/p.ini" --checkpoint {CKPT} --max-seq-len 16
same_output "eval --checkpoint --max-seq-len --json" \
  bash -c '"$1" eval "$2" --checkpoint "$3" --max-seq-len 16 --json "$4.json" && cat "$4.json"' _ "$RP" "$tmp/p.ini" {CKPT} {OUT}
same_output "dump --checkpoint --precision fp32 --train-steps 1" \
  bash -c '"$1" dump --checkpoint "$2" --batch "$3" --out "$4.h5" --precision fp32 --train-steps 1 && h5sum "$4.h5"' \
  _ "$RP" {CKPT} "$tmp/batch.h5" {OUT}
same_output "fill-mask --top-k --precision" "$RP" fill-mask {CKPT} --top-k 2 --precision fp32 --text "w1 [MASK] w2"
same_output "attention --max-len --out" bash -c '"$1" attention "$2" --input "$3" --max-len 8 --out "$4.h5" 2>/dev/null && h5sum "$4.h5"' \
  _ "$RP" {CKPT} "$tmp/sentences.txt" {OUT}
# average --last N takes RUN_DIR, RUN_DIR/ or RUN_DIR/latest (the run whose latest it is)
i=0 ref=""
for form in "$run" "$run/" "$run/latest"; do
  got=$("$RP" average --last 2 "$form" --out "$tmp/avg$i.h5" 2>"$tmp/avg$i.err" && h5sum "$tmp/avg$i.h5") ||
    { fail "average --last 2 $form" "$(tail -n 1 "$tmp/avg$i.err")"; got=failed; }
  [ $i -eq 0 ] && ref=$got
  i=$((i + 1))
done
check "average --last 2: RUN_DIR, RUN_DIR/ and RUN_DIR/latest average the same checkpoints" \
  bash -c "[ '$got' = '$ref' ] && [ '$ref' != failed ]"
# pretrain --resume: each form continues the run (a copy each) to the same weights
i=0 ref=""
for form in ckpt-0000004.h5 latest "" /; do
  cp -a "$run" "$tmp/resume$i"
  got=$("$RP" pretrain --resume "$tmp/resume$i/$form" --set train.max_steps=6 >/dev/null 2>"$tmp/resume$i.err" &&
        h5model "$tmp/resume$i/ckpt-0000006.h5") || { fail "pretrain --resume RUN/$form" "$(tail -n 1 "$tmp/resume$i.err")"; got=failed; }
  [ $i -eq 0 ] && ref=$got
  [ "$got" = "$ref" ] || fail "pretrain --resume RUN/$form" "weights differ from --resume RUN/ckpt-0000004.h5"
  i=$((i + 1))
done
[ "$ref" != failed ] && pass "pretrain --resume: the file, RUN_DIR/latest, RUN_DIR and RUN_DIR/ continue to the same weights"

# ---- a run directory's latest is read as every input: regular files only, never blocking ---------
# (each command under timeout 20: a hang is a failure)
T="timeout 20"
mkdir "$tmp/fifo"; cp "$ckpt" "$tmp/fifo/"; mkfifo "$tmp/fifo/latest"
fifo_msg="$tmp/fifo/latest: the run's latest checkpoint record is a FIFO (named pipe), expected a regular file"
expect_error "fill-mask RUN_DIR whose latest is a FIFO: named, no hang" "$fifo_msg" $T "$RP" fill-mask "$tmp/fifo" --text "[MASK]"
expect_error "fill-mask RUN_DIR/latest (a FIFO): named, no hang" "$fifo_msg" $T "$RP" fill-mask "$tmp/fifo/latest" --text "[MASK]"
expect_error "eval --checkpoint RUN_DIR (latest a FIFO)" "$fifo_msg" $T "$RP" eval "$tmp/p.ini" --checkpoint "$tmp/fifo"
expect_error "eval --checkpoint RUN_DIR --json (latest a FIFO)" "$fifo_msg" \
  $T "$RP" eval "$tmp/p.ini" --checkpoint "$tmp/fifo" --json "$tmp/fifo.json"
expect_error "pretrain --resume RUN_DIR (latest a FIFO)" "$fifo_msg" $T "$RP" pretrain --resume "$tmp/fifo"
expect_error "pretrain CONFIG --resume RUN_DIR (latest a FIFO)" "$fifo_msg" \
  $T "$RP" pretrain "$tmp/p.ini" --resume "$tmp/fifo" --set train.run_dir="$tmp/fifo"
expect_error "average --last 1 RUN_DIR (latest a FIFO)" "$fifo_msg" $T "$RP" average --last 1 "$tmp/fifo" --out "$tmp/fifo.h5"
mkdir "$tmp/lineage"; cp "$run"/ckpt-*.h5 "$run/latest" "$tmp/lineage/"; mkfifo "$tmp/lineage/lineage.tsv"
expect_error "average --last 1 RUN_DIR whose lineage.tsv is a FIFO: named, no hang" \
  "$tmp/lineage/lineage.tsv: the run's checkpoint lineage is a FIFO (named pipe), expected a regular file" \
  $T "$RP" average --last 1 "$tmp/lineage" --out "$tmp/lineage.h5"
mkdir "$tmp/loop"; cp "$ckpt" "$tmp/loop/"; ln -s latest "$tmp/loop/latest"
expect_error "a latest that is a symlink loop is named as a loop, not 'no checkpoint yet'" \
  "$tmp/loop/latest: cannot open the run's latest checkpoint record: a symbolic link loop" $T "$RP" inspect "$tmp/loop"
expect_error "... by pretrain --resume too" "a symbolic link loop" $T "$RP" pretrain --resume "$tmp/loop"
expect_error "... and named as an argument: RUN_DIR/latest" "--checkpoint $tmp/loop/latest: a symbolic link loop" \
  $T "$RP" eval "$tmp/p.ini" --checkpoint "$tmp/loop/latest"
mkdir -p "$tmp/devrun"; cp "$ckpt" "$tmp/devrun/"; ln -s /dev/zero "$tmp/devrun/latest"
expect_error "a latest that links to a device is refused, naming it" \
  "$tmp/devrun/latest: the run's latest checkpoint record is a character device, expected a regular file" \
  $T "$RP" inspect "$tmp/devrun"

# ---- fine-tuning: task.init_checkpoint and predict --checkpoint ------------------------------------
FX=tests/fixtures/finetune
"$RP" init $FX/tiny.ini --out "$tmp/abs.h5" 2>/dev/null || fail "init"
ft=(--set train.threads=1 --set task.batch_size=8 --set task.glue_task=sst2 --set task.train_file=$FX/sst_train.tsv
    --set task.dev_file=$FX/sst_dev.tsv --set task.max_seq_len=16 --set task.max_steps=4 --set train.checkpoint_interval=2)
mkdir -p "$tmp/absrun"; cp "$tmp/abs.h5" "$tmp/absrun/ckpt-0000000.h5"; echo ckpt-0000000.h5 >"$tmp/absrun/latest"
"$RP" finetune /dev/null "${ft[@]}" --set task.init_checkpoint="$tmp/absrun" --set train.run_dir="$tmp/ft" \
  >/dev/null 2>"$tmp/ft.err"; rc=$?
check "finetune with task.init_checkpoint = RUN_DIR loads its latest (status $rc)" \
  bash -c "[ $rc -eq 0 ] && grep -qF 'parameters from $tmp/absrun/ckpt-0000000.h5:' '$tmp/ft/parameters.txt'"
run=$tmp/ft ckpt=$tmp/ft/$(head -n 1 "$tmp/ft/latest")
# finetune --resume: each form continues the fine-tuning run (a copy each) to the same weights
i=0 ref=""
for form in "$(basename "$ckpt")" latest "" /; do
  cp -a "$run" "$tmp/ftr$i"
  got=$("$RP" finetune --resume "$tmp/ftr$i/$form" --set task.max_steps=6 >/dev/null 2>"$tmp/ftr$i.err" &&
        h5model "$tmp/ftr$i/$(head -n 1 "$tmp/ftr$i/latest")") || { fail "finetune --resume RUN/$form" "$(tail -n 1 "$tmp/ftr$i.err")"; got=failed; }
  [ $i -eq 0 ] && ref=$got
  [ "$got" = "$ref" ] || fail "finetune --resume RUN/$form" "weights differ from --resume RUN/$(basename "$ckpt")"
  i=$((i + 1))
done
[ "$ref" != failed ] && pass "finetune --resume: the file, RUN_DIR/latest, RUN_DIR and RUN_DIR/ continue to the same weights"
same_output "predict --checkpoint" bash -c '"$1" predict /dev/null "${@:5}" --checkpoint "$2" --input "$3" --out "$4.tsv" >/dev/null 2>&1 && cat "$4.tsv"' \
  _ "$RP" {CKPT} $FX/sst_dev.tsv {OUT} "${ft[@]}"

# ---- messages ------------------------------------------------------------------------------------
mkdir "$tmp/fresh"
expect_error "a run directory with no checkpoint yet is named, with what to do" \
  "$tmp/fresh: a directory with no checkpoint yet (no $tmp/fresh/latest" "$RP" inspect "$tmp/fresh"
expect_error "eval --checkpoint of a missing path names the option" \
  "--checkpoint $tmp/none.h5: no such file or directory" "$RP" eval "$tmp/p.ini" --checkpoint "$tmp/none.h5"
echo ckpt-0000009.h5 >"$tmp/fresh/latest"
expect_error "a latest naming a missing checkpoint says so" \
  "$tmp/fresh/latest does not name a checkpoint that exists" "$RP" fill-mask "$tmp/fresh/latest" --text "[MASK]"
printf '[task]\ninit_checkpoint = %s\n' "$tmp/gone.h5" >"$tmp/ft.ini"
expect_error "a missing task.init_checkpoint is named with its key and the config line that set it" \
  "$tmp/ft.ini:2: key 'task.init_checkpoint' = $tmp/gone.h5: no such file or directory" \
  "$RP" finetune "$tmp/ft.ini" "${ft[@]}" --set train.run_dir="$tmp/ft2"
expect_error "... and one given with --set by its --set" \
  "--set task.init_checkpoint=$tmp/gone2.h5: key 'task.init_checkpoint' = $tmp/gone2.h5: no such file" \
  "$RP" finetune /dev/null "${ft[@]}" --set task.init_checkpoint="$tmp/gone2.h5" --set train.run_dir="$tmp/ft2"
expect_error "pretrain --init of a missing path names --init" "--init $tmp/gone3.h5: no such file or directory" \
  "$RP" pretrain "$tmp/p.ini" --init "$tmp/gone3.h5" --set train.run_dir="$tmp/pi"
exit 0
