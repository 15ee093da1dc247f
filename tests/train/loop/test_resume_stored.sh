#!/usr/bin/env bash
# `realpos pretrain --resume RUN_DIR` and `realpos finetune --resume RUN_DIR` without a config file:
# the run continues with the configuration stored in its checkpoint (bit-identical to an
# uninterrupted run), --set of a key a resume may change is taken and logged, one it may not is
# refused naming the key; and the metrics across a resume: elapsed_s continues from the checkpoint
# and the first record after the resume covers the whole logging window it names (its loss,
# accuracy, lr and gradient norm equal the uninterrupted run's record), and the records a killed
# run wrote after its checkpoint are dropped, so metrics.jsonl holds the uninterrupted run's events.
source "$(dirname "$0")/../../lib.sh"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
export OMP_NUM_THREADS=1
synthetic_corpus "$tmp" 80 60 7
# 36 steps, a record every 4 and a checkpoint every 6: a resume from step 6 or 18 opens a window
# that began two steps before the checkpoint
tiny_pretrain_ini "$tmp/p.ini" model.hidden_size=32 model.num_layers=2 model.num_heads=2 model.intermediate_size=64 \
  model.vocab_size=85 model.max_position=48 train.batch_size=8 train.max_steps=36 train.warmup_steps=4 \
  train.log_interval=4 train.eval_interval=12 train.checkpoint_interval=6 train.keep_last=10 \
  train.run_dir="$tmp/runA" data.max_seq_len=48 data.max_predictions_per_seq=8
"$RP" prepare "$tmp/p.ini" >/dev/null 2>&1 || { fail "prepare"; exit 1; }
"$RP" pretrain "$tmp/p.ini" >"$tmp/a.log" 2>&1
check "uninterrupted run finishes" test -s "$tmp/runA/ckpt-0000036.h5"

same_weights() { $PY - "$1" "$2" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) and n.startswith(("model/", "optimizer/")) else None)
sys.exit(not (names and all(np.array_equal(a[n][()], b[n][()]) for n in names)))
PY
}
# same_records REF GOT: the records of two metrics.jsonl files are the same events (kind, step) with
# the same loss, accuracy, lr and gradient norm (train) or held-out results (eval, task_eval);
# elapsed_s increasing in GOT
same_records() { $PY - "$@" <<'PY'
import json, sys
def records(path):
    return [json.loads(l) for l in open(path)]
want, got = records(sys.argv[1]), records(sys.argv[2])
timing = {"tokens_per_s", "mfu", "elapsed_s", "eta_s", "gflops", "peak_gflops", "peak_source"}
strip = lambda r: {k: v for k, v in r.items() if k not in timing}
bad = [(w, g) for w, g in zip(want, got) if strip(w) != strip(g)]
elapsed = [r["elapsed_s"] for r in got if r["kind"] == "train"]
if len(want) != len(got) or bad:
    sys.exit("records differ: %d vs %d records; first difference %s" % (len(want), len(got), bad[:1]))
if any(b <= a for a, b in zip(elapsed, elapsed[1:])):
    sys.exit("elapsed_s not increasing: %s" % elapsed)
print("%d records equal, elapsed_s %.3f .. %.3f s" % (len(got), elapsed[0], elapsed[-1]))
PY
}

# ---- kill -9 at step 9 (raised by the run itself), after the checkpoint of step 6 and the record of step 8: resume from
# RUN_DIR without the config, dropping that record ----------------------------------------------------------------------
REALPOS_TEST_SIGNAL_AT_STEP=KILL:9 "$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/runB" >"$tmp/b1.log" 2>&1
cp "$tmp/runB/metrics.jsonl" "$tmp/b1.jsonl"
latest=$(head -n 1 "$tmp/runB/latest"); at=${latest#ckpt-}; at=$((10#${at%.h5}))
echo "    killed; RUN_DIR/latest names $latest"
check "the kill landed before the end, after the checkpoint of step 6 ($latest)" \
  test ! -e "$tmp/runB/ckpt-0000036.h5" -a "$latest" = ckpt-0000006.h5
(cd "$tmp" && "$RP" pretrain --resume runB >"$tmp/b2.log" 2>&1); rc=$?
check "pretrain --resume RUN_DIR without a config exits 0 (status $rc)" test $rc -eq 0
check "... says it runs with the checkpoint's stored configuration" \
  grep -qF "resuming runB/$latest with the configuration stored in it (train.run_dir = runB)" "$tmp/b2.log"
check "... logs no changed key (the stored run_dir, spelled otherwise, is the same directory)" \
  bash -c "! grep -q 'resuming with key' '$tmp/b2.log'"
check "... and ends bit-identical to the uninterrupted run" same_weights "$tmp/runA/ckpt-0000036.h5" "$tmp/runB/ckpt-0000036.h5"
out=$(same_records "$tmp/runA/metrics.jsonl" "$tmp/runB/metrics.jsonl")
check "metrics.jsonl across kill -9 and resume: the uninterrupted run's records, elapsed_s increasing ($out)" test -n "$out"
dropped=$($PY -c "import json; print(sum(json.loads(l)['step'] > $at for l in open('$tmp/b1.jsonl')))")
check "... the $dropped records the killed run wrote after step $at were dropped, and said so" \
  bash -c "[ $dropped -eq 1 ] && grep -qF 'dropped $dropped and ' '$tmp/b2.log'"
check "... metrics.csv: the same steps as the uninterrupted run's" \
  bash -c "[ \"\$(cut -d, -f1-2 '$tmp/runA/metrics.csv')\" = \"\$(cut -d, -f1-2 '$tmp/runB/metrics.csv')\" ]"
first_after=$($PY -c "
import json
t = [x for x in map(json.loads, open('$tmp/runB/metrics.jsonl')) if x['kind'] == 'train' and x['step'] > $at]
print(t[0]['step'], t[0]['elapsed_s'])")
before=$($PY -c "
import json
r = [json.loads(l) for l in open('$tmp/b1.jsonl') if json.loads(l)['kind'] == 'train' and json.loads(l)['step'] <= $at]
print(r[-1]['elapsed_s'])")
echo "    first record after the resume: step ${first_after% *}, elapsed_s ${first_after#* } (before the kill: $before)"
check "the checkpoint stores the metrics window (elapsed, partial sums)" "$PY" -c "
import h5py, sys
w = h5py.File('$tmp/runB/$latest', 'r')['train/metrics_window'][()]
sys.exit(not (w.shape == (8,) and w[0] > 0 and w[1] == $at - $at % 4))"

# a resume from an older checkpoint of a finished run: the later records are dropped and written again
cp -r "$tmp/runA" "$tmp/runD"
"$RP" pretrain --resume "$tmp/runD/ckpt-0000018.h5" >"$tmp/d.log" 2>&1; rc=$?
later=$(grep -c '"step":\(19\|[2-3][0-9]\),' "$tmp/runA/metrics.jsonl")
check "--resume of step 18 in a finished run drops its $later later records, saying so (status $rc)" \
  grep -qF "dropped $later and $(grep -c '^[a-z]*,\(19\|[2-3][0-9]\),' "$tmp/runA/metrics.csv") records after step 18" "$tmp/d.log"
out=$(same_records "$tmp/runA/metrics.jsonl" "$tmp/runD/metrics.jsonl")
check "... and writes them again: the uninterrupted run's records ($out)" test -n "$out"
check "... metrics.csv too" bash -c "[ \"\$(cut -d, -f1-5 '$tmp/runA/metrics.csv')\" = \"\$(cut -d, -f1-5 '$tmp/runD/metrics.csv')\" ]"

# ---- --set on a stored configuration ---------------------------------------------------------------
"$RP" pretrain --resume "$tmp/runB/latest" --set train.max_steps=40 >"$tmp/b3.log" 2>&1; rc=$?
check "--resume RUN_DIR/latest --set train.max_steps=40 trains on (status $rc)" test $rc -eq 0 -a -s "$tmp/runB/ckpt-0000040.h5"
check "... logging the changed key" grep -qF "resuming with key 'train.max_steps' = 40 (the checkpoint's run had 36)" "$tmp/b3.log"
expect_error "--resume RUN_DIR --set of a key a resume may not change is refused, naming it" \
  "key 'model.hidden_dropout': the checkpoint has 0.1, this run 0.3" \
  "$RP" pretrain --resume "$tmp/runB" --set train.max_steps=44 --set model.hidden_dropout=0.3
expect_error "--resume of a directory with no checkpoint yet says so" "a directory with no checkpoint yet" \
  "$RP" pretrain --resume "$tmp/shards"
expect_error "pretrain without a config and without --resume prints the usage" "usage: realpos pretrain" "$RP" pretrain

# ---- the same with a config file: unchanged ---------------------------------------------------------
"$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/runC" --set train.max_steps=12 >/dev/null 2>&1
"$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/runC" --resume "$tmp/runC" >"$tmp/c.log" 2>&1; rc=$?
check "pretrain CONFIG.ini --resume RUN_DIR still works (status $rc)" \
  bash -c "[ $rc -eq 0 ] && grep -qF \"resuming with key 'train.max_steps' = 36 (the checkpoint's run had 12)\" '$tmp/c.log'"
check "... to the new train.max_steps" test -s "$tmp/runC/ckpt-0000036.h5"

# ---- fine-tuning --------------------------------------------------------------------------------
FX=tests/fixtures/finetune
"$RP" init $FX/tiny.ini --out "$tmp/abs.h5" 2>/dev/null || fail "init"
ft=(--set train.threads=1 --set task.batch_size=8 --set task.lr=1e-3 --set task.glue_task=sst2
    --set task.train_file=$FX/sst_train.tsv --set task.dev_file=$FX/sst_dev.tsv --set task.init_checkpoint="$tmp/abs.h5"
    --set task.max_seq_len=16 --set task.epochs=6 --set train.checkpoint_interval=20 --set train.log_interval=15)
"$RP" finetune /dev/null "${ft[@]}" --set train.run_dir="$tmp/ftA" >/dev/null 2>&1
REALPOS_TEST_SIGNAL_AT_STEP=KILL:31 "$RP" finetune /dev/null "${ft[@]}" --set train.run_dir="$tmp/ftB" >/dev/null 2>&1
cp "$tmp/ftB/metrics.jsonl" "$tmp/ft1.jsonl"
latest=$(head -n 1 "$tmp/ftB/latest"); at=${latest#ckpt-}; at=$((10#${at%.h5}))
check "fine-tuning: the kill landed before the end, after the checkpoint of step 20 ($latest)" \
  test ! -e "$tmp/ftB/model.h5" -a "$latest" = ckpt-0000020.h5
"$RP" finetune --resume "$tmp/ftB" --set train.log_interval=15 >"$tmp/ftB.log" 2>&1; rc=$?
check "finetune --resume RUN_DIR without a config trains to the end (status $rc)" test $rc -eq 0 -a -s "$tmp/ftB/model.h5"
check "... with the stored configuration, no key changed" \
  bash -c "grep -qF 'resuming $tmp/ftB/$latest with the configuration stored in it' '$tmp/ftB.log' && ! grep -q 'resuming with key' '$tmp/ftB.log'"
check "... and model.h5 is bit-identical to the uninterrupted run" same_weights "$tmp/ftA/model.h5" "$tmp/ftB/model.h5"
out=$(same_records "$tmp/ftA/metrics.jsonl" "$tmp/ftB/metrics.jsonl")
check "finetune metrics across the resume: the uninterrupted run's records ($out)" test -n "$out"
exit 0
