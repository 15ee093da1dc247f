#!/usr/bin/env bash
# The run object's safety rules (train/loop/run.h, run_dir.h), with real processes on a tiny model:
# one owner per run directory (a second writer fails at once naming the first), a fresh run never
# starts in a used directory (--overwrite moves it aside), pruning keeps to the run's own lineage,
# inputs inside a fresh run's directory are refused, resume refuses changed settings naming each
# key and does nothing when there is nothing to do, config.ini is not rewritten by a resume, SIGHUP
# saves like SIGTERM, the NaN stop names only a checkpoint that exists, and under mpirun every rank
# agrees on the configuration, the data (shard set, fine-tuning train file) and the starting step.
source "$(dirname "$0")/../../lib.sh"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
# verdict NAME CONDITION...: PASS if every CONDITION (a shell test as one string) holds.
verdict() { local name=$1 c; shift; for c in "$@"; do eval "$c" >/dev/null 2>&1 || { fail "$name" "not: $c"; return; }; done; pass "$name"; }
export OMP_NUM_THREADS=1
synthetic_corpus "$tmp" 60 60 11
tiny_pretrain_ini "$tmp/p.ini" model.vocab_size=65 train.max_steps=6 train.log_interval=2 train.eval_interval=3 \
  train.eval_batches=1 data.max_seq_len=24
"$RP" prepare "$tmp/p.ini" >/dev/null 2>&1 || { fail "prepare"; exit 1; }
"$RP" pretrain "$tmp/p.ini" >"$tmp/first.log" 2>&1
check "a fresh run in a new directory trains and keeps keep_last checkpoints" \
  bash -c "[ -s '$tmp/run/ckpt-0000006.h5' ] && [ -s '$tmp/run/ckpt-0000004.h5' ] && [ ! -e '$tmp/run/ckpt-0000002.h5' ]"
check "latest names the newest checkpoint and the run id" \
  bash -c "[ \"\$(head -n 1 '$tmp/run/latest')\" = ckpt-0000006.h5 ] && grep -qE '^run [0-9a-f]{32}$' '$tmp/run/latest'"
run_id=$(sed -n 's/^run //p' "$tmp/run/latest")
check "the run id is in the checkpoint" "$PY" -c "import h5py, sys; sys.exit(h5py.File('$tmp/run/ckpt-0000006.h5', 'r').attrs['run_id'] != '$run_id')"
sums() { md5sum "$tmp/run"/* 2>/dev/null | sort; }
before=$(sums)

# ---- a fresh run in a used directory -------------------------------------------------------------
expect_error "a fresh run in a directory that holds a run is refused, naming the choices" \
  "already holds a run" "$RP" pretrain "$tmp/p.ini" --set train.max_steps=3
"$RP" pretrain "$tmp/p.ini" --set train.max_steps=3 >"$tmp/o" 2>&1
verdict "... the message names --resume RUN_DIR/latest, another train.run_dir and --overwrite" \
  "grep -qF -- '--resume $tmp/run/latest' $tmp/o" "grep -qF 'another train.run_dir' $tmp/o" "grep -qF -- --overwrite $tmp/o"
check "... and the old run is untouched" test "$before" = "$(sums)"

# ---- one owner: a second writer fails at once, naming the first -----------------------------------
REALPOS_TEST_SIGNAL_AT_STEP=STOP:2 "$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/locked" \
  --set train.max_steps=100000 --set train.checkpoint_interval=100000 >"$tmp/holder.log" 2>&1 &
holder=$!
wait_stopped $holder
timeout 60 "$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/locked" --resume "$tmp/run/latest" >"$tmp/o" 2>&1; rc=$?
verdict "a second process on a locked run directory fails at once (status $rc), naming the holder's PID and command" \
  "[ $rc -ne 0 ] && [ $rc -lt 124 ]" "grep -qF 'is in use by process $holder (' $tmp/o" "grep -qF 'realpos pretrain' $tmp/o"
kill -9 $holder 2>/dev/null; kill -CONT $holder 2>/dev/null; wait $holder 2>/dev/null
"$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/locked" --overwrite --set train.max_steps=2 >"$tmp/after.log" 2>&1
check "the kernel released the lock of the killed process: the directory can be taken (--overwrite)" \
  test -s "$tmp/locked/ckpt-0000002.h5"

# ---- one writer of a shard set -------------------------------------------------------------------
# The first prepare stops itself while writing its first shard (REALPOS_TEST_STOP_IN_SHARD=0), its
# lock held: caught at the same point on any host, not raced against a fast prepare.
mkdir -p "$tmp/big"; synthetic_corpus "$tmp/big" 60 4000 5
big=(--set data.corpus="$tmp/big/corpus.txt" --set data.shard_dir="$tmp/shards2")
REALPOS_TEST_STOP_IN_SHARD=0 "$RP" prepare "$tmp/p.ini" "${big[@]}" >"$tmp/prep1.log" 2>&1 &
holder=$!
wait_stopped $holder
check "prepare stops itself holding the shard directory's lock" \
  bash -c "test -e $tmp/shards2/.lock && ! flock -n $tmp/shards2/.lock true"
timeout 60 "$RP" prepare "$tmp/p.ini" "${big[@]}" >"$tmp/o" 2>&1; rc=$?
verdict "a second prepare into a shard directory being written fails at once (status $rc), naming the first" \
  "[ $rc -ne 0 ] && [ $rc -lt 124 ]" "grep -qF 'is in use by process $holder (' $tmp/o"
timeout 60 "$RP" prepare "$tmp/p.ini" "${big[@]}" --part 0/2 >"$tmp/o" 2>&1; rc=$?
verdict "... and so does a part of a prepare (status $rc)" "[ $rc -ne 0 ] && [ $rc -lt 124 ]" "grep -qF 'is in use' $tmp/o"
kill -CONT $holder; wait $holder; rc=$?
verdict "... while the first finishes its shard set (status $rc)" "[ $rc -eq 0 ]" "test -s $tmp/shards2/index.json"

# ---- --overwrite moves the old run aside ----------------------------------------------------------
cp -r "$tmp/run" "$tmp/run-copy"
"$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/run-copy" --set train.max_steps=2 --overwrite >"$tmp/ow.log" 2>&1
moved=$(ls -d "$tmp"/run-copy.replaced-* 2>/dev/null | head -n 1)
check "--overwrite moves the old run aside (logged) and starts afresh" \
  bash -c "[ -n '$moved' ] && [ -s '$moved/ckpt-0000006.h5' ] && [ -s '$tmp/run-copy/ckpt-0000002.h5' ] && [ ! -e '$tmp/run-copy/ckpt-0000006.h5' ] && grep -qF 'moved the previous run' '$tmp/ow.log'"
expect_error "--resume and --overwrite together are refused" "give one" \
  "$RP" pretrain "$tmp/p.ini" --resume "$tmp/run/latest" --overwrite

# ---- inputs inside a fresh run's directory --------------------------------------------------------
mkdir -p "$tmp/withcfg"; cp "$tmp/p.ini" "$tmp/withcfg/config.ini"
expect_error "a fresh run whose config lies inside its run directory is refused" "lies inside train.run_dir" \
  "$RP" pretrain "$tmp/withcfg/config.ini" --set train.run_dir="$tmp/withcfg"
check "... and the config is intact" cmp -s "$tmp/p.ini" "$tmp/withcfg/config.ini"

# ---- resume --------------------------------------------------------------------------------------
expect_error "resume with another data.max_seq_len is refused, naming the key and both values" \
  "key 'data.max_seq_len': the checkpoint has 24, this run 16" \
  "$RP" pretrain "$tmp/p.ini" --resume "$tmp/run/latest" --set data.max_seq_len=16 --set train.max_steps=8
expect_error "... every changed key is named" "key 'data.max_predictions_per_seq': the checkpoint has 4, this run 3" \
  "$RP" pretrain "$tmp/p.ini" --resume "$tmp/run/latest" --set data.max_seq_len=16 --set data.max_predictions_per_seq=3
check "... and nothing was written" test "$before" = "$(sums)"
"$RP" pretrain "$tmp/p.ini" --resume "$tmp/run/latest" --set train.max_steps=3 >"$tmp/o" 2>&1; rc=$?
verdict "resume at step 6 with max_steps = 3 says there is nothing to do (status $rc) and writes nothing" \
  "[ $rc -eq 0 ]" "grep -qF 'nothing to do' $tmp/o" '[ "$before" = "$(sums)" ]'
cp "$tmp/run/config.ini" "$tmp/config-before.ini"
"$RP" pretrain "$tmp/run/config.ini" --resume "$tmp/run" --set train.max_steps=8 >"$tmp/resume.log" 2>&1; rc=$?
check "resume from RUN_DIR with a safe change (train.max_steps) runs on and logs the change (status $rc)" \
  bash -c "[ $rc -eq 0 ] && [ -s '$tmp/run/ckpt-0000008.h5' ] && grep -qF \"resuming with key 'train.max_steps' = 8\" '$tmp/resume.log'"
check "... config.ini, the command's input, is not rewritten" cmp -s "$tmp/config-before.ini" "$tmp/run/config.ini"
check "... the run keeps its lineage" grep -qx "run $run_id" "$tmp/run/latest"

# ---- pruning keeps to the lineage ----------------------------------------------------------------
"$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/other" --set train.max_steps=2 >/dev/null 2>&1
cp "$tmp/other/ckpt-0000002.h5" "$tmp/run/ckpt-0000001.h5" # a file another run wrote
"$RP" pretrain "$tmp/p.ini" --resume "$tmp/run/latest" --set train.max_steps=12 >/dev/null 2>&1
check "pruning removes only the run's own checkpoints (a foreign ckpt-0000001.h5 stays; 10 and 12 kept)" \
  bash -c "[ -s '$tmp/run/ckpt-0000001.h5' ] && [ -s '$tmp/run/ckpt-0000012.h5' ] && [ -s '$tmp/run/ckpt-0000010.h5' ] && [ ! -e '$tmp/run/ckpt-0000008.h5' ]"

"$RP" average --last 2 "$tmp/run" --out "$tmp/avg.h5" >"$tmp/o" 2>&1; rc=$?
verdict "average --last N RUN_DIR takes the lineage lineage.tsv records for latest (10 and 12; the foreign ckpt-0000001.h5 is left out; status $rc)" \
  "[ $rc -eq 0 ]" "grep -qF 'average --last 2: steps 10..12 of the 2 checkpoints the lineage of $tmp/run/latest records' $tmp/o" \
  "\"$PY\" -c \"import h5py, sys; a = h5py.File('$tmp/avg.h5', 'r').attrs['averaged_inputs']; sys.exit(a != '$tmp/run/ckpt-0000010.h5\\t10\\n$tmp/run/ckpt-0000012.h5\\t12\\n')\""
expect_error "... --last beyond the lineage is refused, naming its size" "the run's lineage ($tmp/run/lineage.tsv) has 2 checkpoints" \
  "$RP" average --last 3 "$tmp/run" --out "$tmp/avg3.h5"
cp -r "$tmp/run" "$tmp/nolineage"; rm "$tmp/nolineage/lineage.tsv"
expect_error "... a run directory without lineage.tsv is refused" "average --last $tmp/nolineage: $tmp/nolineage/lineage.tsv is missing" \
  "$RP" average --last 2 "$tmp/nolineage" --out "$tmp/avg4.h5"
cp -r "$tmp/run" "$tmp/holed"; rm "$tmp/holed/ckpt-0000010.h5"
expect_error "... and so is a lineage naming a checkpoint that does not exist" \
  "$tmp/holed/lineage.tsv names ckpt-0000010.h5 of run $run_id (the run's latest), but $tmp/holed/ckpt-0000010.h5 does not exist" \
  "$RP" average --last 1 "$tmp/holed" --out "$tmp/avg5.h5"
check "... having written nothing" bash -c "[ ! -e '$tmp/avg3.h5' ] && [ ! -e '$tmp/avg4.h5' ] && [ ! -e '$tmp/avg5.h5' ]"
"$RP" pretrain "$tmp/p.ini" --resume "$tmp/run/ckpt-0000010.h5" --set train.max_steps=11 --set train.keep_last=1 \
  >"$tmp/o" 2>&1; rc=$?
verdict "resuming an earlier checkpoint never prunes what it writes: latest names ckpt-11, which exists (status $rc)" \
  "[ $rc -eq 0 ]" "[ \"\$(head -n 1 $tmp/run/latest)\" = ckpt-0000011.h5 ]" "test -s $tmp/run/ckpt-0000011.h5" \
  "test -s $tmp/run/ckpt-0000012.h5" "grep -qF 'abandoned later steps' $tmp/o"
expect_error "resume into a directory that holds another run is refused, naming both run ids" "holds another run" \
  "$RP" pretrain "$tmp/p.ini" --resume "$tmp/run/latest" --set train.run_dir="$tmp/other" --set train.max_steps=14

# ---- SIGHUP --------------------------------------------------------------------------------------
REALPOS_TEST_SIGNAL_AT_STEP=HUP:4 "$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/hup" --set train.max_steps=100000 \
  --set train.checkpoint_interval=100000 >"$tmp/hup.log" 2>&1; rc=$?
check "SIGHUP (a dropped ssh session) saves a checkpoint and exits cleanly (status $rc)" \
  bash -c "[ $rc -eq 0 ] && grep -qF 'signal 1: saving a checkpoint at step 5 and stopping' '$tmp/hup.log' &&
           [ \"\$(ls '$tmp/hup'/ckpt-*.h5)\" = '$tmp/hup/ckpt-0000005.h5' ]"

# ---- REALPOS_TEST_SIGNAL_AT_STEP=SIG:N, the tests' signal at a fixed step, is read strictly ---------
for bad in TERM 15:4 TERM:0 TERM:-1 TERM:4x SIGTERM:4 term:4 "TERM: 4" BOGUS:3 :3; do
  expect_error "REALPOS_TEST_SIGNAL_AT_STEP='$bad' is refused naming the variable and the form" \
    "environment variable REALPOS_TEST_SIGNAL_AT_STEP: expected SIGNAL:STEP, SIGNAL one of TERM, INT, HUP, USR1, KILL, STOP and STEP a whole number >= 1 (e.g. TERM:30), got '$bad'" \
    env REALPOS_TEST_SIGNAL_AT_STEP="$bad" "$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/badsig" --overwrite
done
REALPOS_TEST_SIGNAL_AT_STEP=INT:2 "$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/intsig" \
  --set train.checkpoint_interval=100000 >"$tmp/int.log" 2>&1; rc=$?
check "REALPOS_TEST_SIGNAL_AT_STEP=INT:2: update 3 sees it, saves step 3 and exits 0 (status $rc)" \
  bash -c "[ $rc -eq 0 ] && grep -qF 'signal 2: saving a checkpoint at step 3 and stopping' '$tmp/int.log' &&
           [ \"\$(head -n 1 '$tmp/intsig/latest')\" = ckpt-0000003.h5 ]"
REALPOS_TEST_SIGNAL_AT_STEP=TERM:6 "$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/lastsig" >"$tmp/last.log" 2>&1; rc=$?
check "REALPOS_TEST_SIGNAL_AT_STEP at the last step (6 of 6): the run ends as usual (status $rc)" \
  bash -c "[ $rc -eq 0 ] && ! grep -q 'saving a checkpoint at step' '$tmp/last.log' && test -s '$tmp/lastsig/ckpt-0000006.h5'"

# ---- --init loads weights: only the keys that change the parameter table matter -----------------
"$RP" init "$tmp/p.ini" --set model.relative_k=7 --set model.hidden_dropout=0.3 --out "$tmp/init.h5" >/dev/null 2>&1
"$RP" pretrain "$tmp/p.ini" --init "$tmp/init.h5" --set train.run_dir="$tmp/initrun" --set train.max_steps=2 \
  >"$tmp/o" 2>&1; rc=$?
verdict "--init from a checkpoint whose relative_k and dropout differ (no parameter changes) trains, noting both (status $rc)" \
  "[ $rc -eq 0 ]" "grep -qF \"note: key 'model.relative_k'\" $tmp/o" "grep -qF \"note: key 'model.hidden_dropout'\" $tmp/o"
expect_error "--init from a checkpoint of another width is refused, naming the tensor" "word_embeddings" \
  "$RP" pretrain "$tmp/p.ini" --init "$tmp/init.h5" --set train.run_dir="$tmp/initrun2" --set model.hidden_size=32

# ---- the NaN stop names only a checkpoint that exists --------------------------------------------
mkdir -p "$tmp/nan"; printf 'ckpt-0000099.h5\nrun %s\n' "$run_id" >"$tmp/nan/latest" # of this lineage
cp "$tmp/run/ckpt-0000012.h5" "$tmp/huge.h5"
"$PY" -c "
import h5py, numpy as np
f = h5py.File('$tmp/huge.h5', 'r+')
d = f['model/bert/embeddings/word_embeddings/weight']; d[...] = np.full(d.shape, 3e38, np.float32)
f.close()" && "$PY" scripts/h5seal.py "$tmp/huge.h5"
"$RP" pretrain "$tmp/p.ini" --resume "$tmp/huge.h5" --set train.run_dir="$tmp/nan" --set train.max_steps=14 >"$tmp/o" 2>&1; rc=$?
verdict "a NaN stop whose latest names a missing file does not claim an intact checkpoint (status $rc)" \
  "[ $rc -ne 0 ]" "grep -qF 'stopping without saving' $tmp/o" "! grep -qF intact $tmp/o"

# ---- every rank agrees on the configuration and the starting step --------------------------------
if command -v mpirun >/dev/null 2>&1; then
  MPI=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS)
  for order in resume-first fresh-first; do
    if [ $order = resume-first ]; then a=(--resume "$tmp/run/latest"); b=(); else a=(); b=(--resume "$tmp/run/latest"); fi
    set_dir=(--set train.run_dir="$tmp/mpi-$order" --set train.max_steps=16)
    timeout 120 "${MPI[@]}" -np 1 "$RP" pretrain "$tmp/p.ini" "${set_dir[@]}" "${a[@]}" : \
      -np 1 "$RP" pretrain "$tmp/p.ini" "${set_dir[@]}" "${b[@]}" >"$tmp/o" 2>&1; rc=$?
    verdict "mpirun, one rank resuming and one fresh ($order): every rank stops (status $rc), naming rank 1 and the step" \
      "[ $rc -ne 0 ] && [ $rc -ne 124 ]" "grep -qF \"rank 1's run (effective configuration, data and starting step) differs from rank 0's\" $tmp/o" \
      "grep -qF start_step $tmp/o"
  done
  timeout 120 "${MPI[@]}" -np 1 "$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/mpi" : \
    -np 1 "$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/mpi" --set optim.lr=0.5 >"$tmp/o" 2>&1; rc=$?
  verdict "mpirun, ranks with different --set: every rank stops (status $rc), naming the key with both values" \
    "[ $rc -ne 0 ] && [ $rc -ne 124 ]" "grep -qF \"rank 0 has 'lr = \" $tmp/o" "grep -qF \"rank 1 has 'lr = 0.5'\" $tmp/o"
  # the same effective configuration (relative data paths), each rank in its own directory (-wdir)
  # with other data: rank 1's vocabulary lists the same words in another order (another prepare_id)
  mkdir -p "$tmp/rankA" "$tmp/rankB"; cp "$tmp/corpus.txt" "$tmp/vocab.txt" "$tmp/rankA/"; cp "$tmp/corpus.txt" "$tmp/rankB/"
  { head -n 5 "$tmp/vocab.txt"; tail -n +6 "$tmp/vocab.txt" | tac; } >"$tmp/rankB/vocab.txt"
  sed -e 's|^corpus = .*|corpus = corpus.txt|' -e 's|^vocab = .*|vocab = vocab.txt|' -e 's|^shard_dir = .*|shard_dir = shards|' \
    -e "s|^run_dir = .*|run_dir = $tmp/mpi-data|" "$tmp/p.ini" >"$tmp/rel.ini"
  for r in rankA rankB; do (cd "$tmp/$r" && "$RP" prepare "$tmp/rel.ini" >/dev/null 2>&1) || fail "setup: prepare in $r"; done
  id_a=$("$PY" -c "import json; print(json.load(open('$tmp/rankA/shards/index.json'))['prepare_id'])")
  id_b=$("$PY" -c "import json; print(json.load(open('$tmp/rankB/shards/index.json'))['prepare_id'])")
  timeout 120 "${MPI[@]}" -np 1 -wdir "$tmp/rankA" "$RP" pretrain "$tmp/rel.ini" : \
    -np 1 -wdir "$tmp/rankB" "$RP" pretrain "$tmp/rel.ini" >"$tmp/o" 2>&1; rc=$?
  verdict "mpirun, ranks with the same configuration but other shard sets: every rank stops before the first step (status $rc), naming rank 1 and both prepare_ids" \
    "[ $rc -ne 0 ] && [ $rc -ne 124 ]" "[ $id_a != $id_b ]" \
    "grep -qF \"rank 0 has 'data = shard set prepare_id $id_a, \" $tmp/o" "grep -qF \"rank 1 has 'data = shard set prepare_id $id_b, \" $tmp/o" \
    "! grep -qE '^step +[0-9]' $tmp/o" "test ! -e $tmp/mpi-data/metrics.jsonl"
  timeout 120 "${MPI[@]}" -np 1 -wdir "$tmp/rankA" "$RP" pretrain "$tmp/rel.ini" --set train.max_steps=2 : \
    -np 1 -wdir "$tmp/rankA" "$RP" pretrain "$tmp/rel.ini" --set train.max_steps=2 >"$tmp/o" 2>&1; rc=$?
  verdict "... control: the same data on both ranks trains (status $rc)" "[ $rc -eq 0 ]" "test -s $tmp/mpi-data/ckpt-0000002.h5"
  # fine-tuning: task.train_file of the same size, one label flipped on rank 1
  FX=$PWD/tests/fixtures/finetune
  "$RP" init "$FX/tiny.ini" --set data.vocab="$FX/vocab.txt" --out "$tmp/ft-init.h5" >/dev/null 2>&1 || fail "setup: init"
  cp "$FX/sst_train.tsv" "$tmp/rankA/train.tsv"; awk -F '\t' -v OFS='\t' 'NR == 2 { $NF = 1 - $NF } 1' "$FX/sst_train.tsv" >"$tmp/rankB/train.tsv"
  ft=(/dev/null --set task.glue_task=sst2 --set task.train_file=train.tsv --set train.threads=1 --set task.batch_size=8
      --set task.max_steps=1 --set task.max_seq_len=16 --set task.init_checkpoint="$tmp/ft-init.h5" --set train.run_dir="$tmp/mpi-ft")
  crc() { "$PY" -c "import zlib, sys; print('%08x' % zlib.crc32(open(sys.argv[1], 'rb').read()))" "$1"; }
  timeout 120 "${MPI[@]}" -np 1 -wdir "$tmp/rankA" "$RP" finetune "${ft[@]}" : -np 1 -wdir "$tmp/rankB" "$RP" finetune "${ft[@]}" \
    >"$tmp/o" 2>&1; rc=$?
  size=$(stat -c %s "$tmp/rankA/train.tsv")
  verdict "mpirun fine-tuning, task.train_file of the same size and other content: every rank stops before the first step (status $rc), naming rank 1 and both CRC-32s" \
    "[ $rc -ne 0 ] && [ $rc -ne 124 ]" "[ $size -eq $(stat -c %s "$tmp/rankB/train.tsv") ]" \
    "grep -qF \"rank 0 has 'data = task.train_file train.tsv: $size bytes, CRC-32 $(crc "$tmp/rankA/train.tsv")'\" $tmp/o" \
    "grep -qF \"rank 1 has 'data = task.train_file train.tsv: $size bytes, CRC-32 $(crc "$tmp/rankB/train.tsv")'\" $tmp/o" \
    "! grep -qE '^step +[0-9]' $tmp/o" "test ! -e $tmp/mpi-ft/metrics.jsonl"
else
  echo "SKIP test_run: mpirun not found (the rank agreement checks)"
fi
