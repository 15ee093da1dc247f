#!/usr/bin/env bash
# End-to-end pretraining on a synthetic corpus: kill -9 and resume gives bit-identical weights,
# SIGTERM saves and exits cleanly, a NaN stops the run without saving, bad inputs fail clearly.
source "$(dirname "$0")/../../lib.sh"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }

# Vocabulary: the five specials and 80 words; corpus: 60 documents of 4-12 sentences.
synthetic_vocab "$tmp/vocab.txt" 80
awk 'BEGIN { srand(7); for (d = 0; d < 60; d++) { ns = 4 + int(rand() * 9);
       for (s = 0; s < ns; s++) { n = 3 + int(rand() * 10); line = "";
         for (w = 0; w < n; w++) { z = int(rand() * rand() * 80); line = line (w ? " " : "") "w" z }
         print line "." }
       print "" } }' >"$tmp/corpus.txt"
tiny_pretrain_ini "$tmp/run.ini" model.hidden_size=48 model.num_layers=2 model.num_heads=4 model.intermediate_size=96 \
  model.max_position=64 optim.lr=3e-3 train.batch_size=8 train.max_steps=240 train.warmup_steps=10 \
  train.log_interval=20 train.eval_interval=120 train.checkpoint_interval=40 train.threads=2 train.run_dir="$tmp/runA" \
  data.max_seq_len=48 data.max_predictions_per_seq=8
cfg=$tmp/run.ini

"$RP" prepare "$cfg" >"$tmp/prepare.log" 2>&1
check "prepare writes a shard set" test -s "$tmp/shards/index.json"

"$RP" pretrain "$cfg" >"$tmp/a.log" 2>&1
check "uninterrupted run finishes" test -s "$tmp/runA/ckpt-0000240.h5"
check "metrics.jsonl and metrics.csv are written" test -s "$tmp/runA/metrics.jsonl" -a -s "$tmp/runA/metrics.csv"
check "keep_last = 2 keeps two checkpoints" test "$(ls "$tmp/runA"/ckpt-*.h5 | wc -l)" -eq 2
check "held-out evaluation is logged" grep -q '"kind":"eval"' "$tmp/runA/metrics.jsonl"

# Killed run: SIGKILL right after the first checkpoint (step 40; the run raises it itself, the same
# step on any host), then resume from the newest one.
REALPOS_TEST_SIGNAL_AT_STEP=KILL:40 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/runB" >"$tmp/b1.log" 2>&1
last=$(ls "$tmp/runB"/ckpt-*.h5 2>/dev/null | sort | tail -n 1)
check "SIGKILL after step 40 leaves its checkpoint as the newest ($(basename "${last:-none}"))" \
  test "$last" = "$tmp/runB/ckpt-0000040.h5"
check "SIGKILL landed part-way (no final checkpoint yet)" test ! -e "$tmp/runB/ckpt-0000240.h5"
killed_at=$(grep -c '"kind":"train"' "$tmp/runB/metrics.jsonl" 2>/dev/null || echo 0)
echo "    killed after $killed_at log records; resuming from $(basename "$last")"
"$RP" pretrain "$cfg" --set train.run_dir="$tmp/runB" --resume "$last" >"$tmp/b2.log" 2>&1
check "resumed run finishes" test -s "$tmp/runB/ckpt-0000240.h5"
same=$($PY - "$tmp/runA/ckpt-0000240.h5" "$tmp/runB/ckpt-0000240.h5" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) else None)
diff = [n for n in names if n.startswith(("model/", "optimizer/")) and not np.array_equal(a[n][()], b[n][()])]
print("identical" if names and not diff else "differs: " + " ".join(diff[:5]))
PY
)
check "kill -9 + resume is bit-identical to an uninterrupted run ($same)" test "$same" = identical

# SIGTERM: saves a checkpoint at the current step and exits 0.
REALPOS_TEST_SIGNAL_AT_STEP=TERM:20 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/runC" --set train.max_steps=100000 \
  --set train.checkpoint_interval=100000 >"$tmp/c.log" 2>&1; rc=$?
check "SIGTERM exits cleanly (status $rc)" test $rc -eq 0
check "SIGTERM after step 20 writes the checkpoint of step 21, the step update 21 stopped at" \
  test "$(ls "$tmp/runC"/ckpt-*.h5 2>/dev/null)" = "$tmp/runC/ckpt-0000021.h5"

# NaN: weights near FLT_MAX (finite, so they load) overflow the forward pass; the run stops naming
# the step, saves nothing. (An absurd learning rate is a config error now.)
"$RP" init "$cfg" --out "$tmp/huge.h5" 2>/dev/null
"$PY" -c "import h5py, numpy as np; f = h5py.File('$tmp/huge.h5', 'r+')
d = f['model/bert/encoder/layer/0/attention/self/query/weight']; d[...] = np.full(d.shape, 3e38, np.float32); f.close()"
"$PY" scripts/h5seal.py "$tmp/huge.h5"
"$RP" pretrain "$cfg" --init "$tmp/huge.h5" --set train.run_dir="$tmp/runD" \
  --set train.checkpoint_interval=100000 >"$tmp/d.log" 2>&1; rc=$?
check "NaN/Inf stops the run with a non-zero exit" test $rc -ne 0
check "NaN/Inf message names the step" grep -Eq "step [0-9]+: the (loss|gradient norm) is -?(nan|inf)" "$tmp/d.log"
check "NaN/Inf run saves no checkpoint" test -z "$(ls "$tmp/runD"/ckpt-*.h5 2>/dev/null)"

# Bad inputs: each a clear message and a non-zero exit.
expect_error "missing corpus file" "missing.txt" "$RP" prepare "$cfg" --set data.corpus="$tmp/missing.txt"
: >"$tmp/empty.txt"
expect_error "empty corpus" "empty.txt" "$RP" prepare "$cfg" --set data.corpus="$tmp/empty.txt" \
  --set data.shard_dir="$tmp/shards-empty"
grep -v '^\[MASK\]$' "$tmp/vocab.txt" >"$tmp/vocab-nomask.txt"
expect_error "vocabulary without [MASK]" "MASK" "$RP" prepare "$cfg" --set data.vocab="$tmp/vocab-nomask.txt" \
  --set data.shard_dir="$tmp/shards-nomask"
printf '[train]\nbatch_size = 4\nbogus_key = 1\n' >"$tmp/bad.ini"
expect_error "config with an unknown key" "bad.ini:3: key 'train.bogus_key'" "$RP" pretrain "$tmp/bad.ini"
expect_error "resume from a missing checkpoint" "no-such.h5" "$RP" pretrain "$cfg" --resume "$tmp/no-such.h5"
head -c 2000 "$tmp/runA/ckpt-0000240.h5" >"$tmp/truncated.h5"
expect_error "resume from a truncated checkpoint" "truncated.h5" "$RP" pretrain "$cfg" --resume "$tmp/truncated.h5"
expect_error "resume with a different model" "key 'model.num_layers': the checkpoint has 2, this run 3" \
  "$RP" pretrain "$cfg" --set model.num_layers=3 --resume "$tmp/runA/ckpt-0000240.h5"
expect_error "training without shards" "realpos prepare" "$RP" pretrain "$cfg" --set data.shard_dir="$tmp/none" \
  --set train.run_dir="$tmp/run-noshards"
exit 0
