#!/usr/bin/env bash
# Data-parallel training under `mpirun -np 2` (1 thread per rank, oversubscription allowed; each
# realpos run is a tiny model for a dozen steps):
# optim/dist + ZeRO-1 unit checks at 2 and 3 ranks; N=2 vs N=1 within a stated tolerance (pretraining
# and fine-tuning); bit-identical reruns at N=2; ZeRO-1 equals unsharded bit for bit and their
# checkpoints resume each other; kill -9 + resume under mpirun ends bit-identical; resuming at
# another N keeps the data stream; a signal to one rank stops every rank with one save; a bad input
# on one rank stops the job with that rank's message. SKIP when mpirun is absent.
source "$(dirname "$0")/../../lib.sh"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
if ! command -v mpirun >/dev/null 2>&1; then echo "SKIP test_mpi: mpirun not found (Debian: openmpi-bin)"; exit 0; fi
export OMP_NUM_THREADS=1
MPI=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS)
mpi() { local n=$1; shift; "${MPI[@]}" -np "$n" "$@"; }
# Background jobs (mpirun and its ranks) never outlive the test, whatever way it ends.
background=()
cleanup() {
  local p
  for p in "${background[@]}"; do kill -9 $(pgrep -P "$p") "$p" 2>/dev/null; done
  [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
# wait_exit PID: its exit status, or 124 after killing it (and its ranks) if it runs 10 more minutes.
wait_exit() {
  local i
  for i in $(seq 1 1200); do kill -0 "$1" 2>/dev/null || break; sleep 0.5; done
  if kill -0 "$1" 2>/dev/null; then kill -9 $(pgrep -P "$1") "$1" 2>/dev/null; wait "$1" 2>/dev/null; return 124; fi
  wait "$1"
}

# ---- optim/dist and optim/dp_adamw at 2 and 3 ranks (test_dist prints rank 0's checks) -------------
for n in 2 3; do mpi $n build/tests/optim/test_dist | grep -E '^(PASS|FAIL)' | sed "s/^\(PASS\|FAIL\) /\1 np $n: /"; done

# ---- a tiny pretraining setup (the corpus of tests/train/loop/test_pretrain.sh, smaller) ----------------------
synthetic_corpus "$tmp" 60 40 11
tiny_pretrain_ini "$tmp/run.ini" model.hidden_size=32 model.num_layers=2 model.intermediate_size=64 model.vocab_size=65 \
  optim.lr=3e-3 train.grad_accum_steps=4 train.max_steps=12 train.warmup_steps=2 train.log_interval=3 \
  train.eval_interval=6 train.checkpoint_interval=4 train.keep_last=10 train.eval_batches=3 train.run_dir="$tmp/run1" \
  data.max_predictions_per_seq=5 data.eval_fraction=0.15
cfg=$tmp/run.ini
"$RP" prepare "$cfg" >"$tmp/prepare.log" 2>&1 || { fail "prepare" "$(tail -3 "$tmp/prepare.log")"; exit 1; }

# compare A.h5 B.h5 MODE: "bits" -> identical / differs: NAMES (model, optimizer, data state, the
# metrics window but its times);
# "tol" -> "RATIO MAXDIFF": the largest |a - b| / (1e-6 + 1e-4 |a|) over every model element (the
# stated N-vs-1 tolerance holds when RATIO <= 1) and the largest |a - b|.
compare() {
  $PY - "$@" <<'PY'
import sys, h5py, numpy as np
a, b, mode = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r"), sys.argv[3]
names = []
a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) else None)
if mode == "bits":
    # train/metrics_window: words 0 and 7 are wall-clock seconds; the window's sums must agree
    part = lambda n, x: x[1:7] if n == "train/metrics_window" else x
    diff = [n for n in names if n.startswith(("model/", "optimizer/", "train/"))
            and not np.array_equal(part(n, a[n][()]), part(n, b[n][()]))]
    print("identical" if names and not diff else "differs: " + " ".join(diff[:4]))
else:
    pairs = [(a[n][()].astype(np.float64), b[n][()].astype(np.float64)) for n in names if n.startswith("model/")]
    ratio = max(float(np.max(np.abs(x - y) / (1e-6 + 1e-4 * np.abs(x)))) for x, y in pairs)
    print("%.3g %.3g" % (ratio, max(float(np.max(np.abs(x - y))) for x, y in pairs)))
PY
}
# within_tolerance "RATIO MAXDIFF"
within_tolerance() { $PY -c "import sys; sys.exit(not float(sys.argv[1]) <= 1)" $1; }
# Rank 0's metrics only: every train/eval record of a run, one per line, without timing fields.
records() { $PY -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(r["kind"], r["step"], r.get("loss"), r.get("grad_norm"), r.get("eval_loss"))' "$1"; }
final=ckpt-0000012.h5

# ---- N=1 (no mpirun) vs N=2, reruns, ZeRO-1 ----------------------------------------------------------
"$RP" pretrain "$cfg" >"$tmp/one.log" 2>&1
check "N=1 pretraining finishes" test -s "$tmp/run1/$final"
mpi 2 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/run2" >"$tmp/two.log" 2>&1
check "N=2 pretraining finishes under mpirun -np 2" test -s "$tmp/run2/$final"
check "N=2: rank 0 alone logs (one 'pretraining: steps' line)" test "$(grep -c 'pretraining: steps' "$tmp/two.log")" -eq 1
check "N=2 logs its communication time" grep -q 'data parallel: 2 ranks, communication' "$tmp/two.log"
rel=$(compare "$tmp/run1/$final" "$tmp/run2/$final" tol)
check "N=2 equals N=1 after 12 steps: every weight within 1e-6 + 1e-4 |w| (worst ratio, max |diff|: $rel)" \
  within_tolerance "$rel"
check "N=2 and N=1 log the same steps and evaluations" \
  test "$(records "$tmp/run1/metrics.jsonl" | cut -d' ' -f1-2)" = "$(records "$tmp/run2/metrics.jsonl" | cut -d' ' -f1-2)"
# t5's one table under data parallelism: its gradient summed over the layers, then over the ranks
t5=(--set model.absolute_position=no --set model.relative_position=t5 --set model.t5_num_buckets=8
    --set model.residual_attention=yes)
"$RP" pretrain "$cfg" "${t5[@]}" --set train.run_dir="$tmp/t5one" >"$tmp/t5one.log" 2>&1
mpi 2 "$RP" pretrain "$cfg" "${t5[@]}" --set train.run_dir="$tmp/t5two" --set train.shard_optimizer=yes \
  >"$tmp/t5two.log" 2>&1
rel=$(compare "$tmp/t5one/$final" "$tmp/t5two/$final" tol)
check "t5 + residual: N=2 with ZeRO-1 equals N=1 after 12 steps, the shared table too (worst ratio, max |diff|: $rel)" \
  within_tolerance "$rel"
mpi 2 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/run2b" >"$tmp/two-b.log" 2>&1
check "N=2 rerun is bit-identical ($(compare "$tmp/run2/$final" "$tmp/run2b/$final" bits))" \
  test "$(compare "$tmp/run2/$final" "$tmp/run2b/$final" bits)" = identical
check "N=2 rerun logs identical losses, norms and evaluations" \
  test "$(records "$tmp/run2/metrics.jsonl")" = "$(records "$tmp/run2b/metrics.jsonl")"
mpi 2 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/zero" --set train.shard_optimizer=yes >"$tmp/zero.log" 2>&1
check "ZeRO-1 (shard_optimizer = yes) equals unsharded bit for bit, full moments in the checkpoint ($(compare \
  "$tmp/run2/$final" "$tmp/zero/$final" bits))" test "$(compare "$tmp/run2/$final" "$tmp/zero/$final" bits)" = identical

# ---- checkpoint interchange and resume at another N -----------------------------------------------
mpi 2 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/z2u" --resume "$tmp/zero/ckpt-0000004.h5" >"$tmp/z2u.log" 2>&1
check "unsharded resume from a ZeRO-1 checkpoint is bit-identical" \
  test "$(compare "$tmp/run2/$final" "$tmp/z2u/$final" bits)" = identical
mpi 2 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/u2z" --set train.shard_optimizer=yes \
  --resume "$tmp/run2/ckpt-0000004.h5" >"$tmp/u2z.log" 2>&1
check "ZeRO-1 resume from an unsharded checkpoint is bit-identical" \
  test "$(compare "$tmp/run2/$final" "$tmp/u2z/$final" bits)" = identical
"$RP" pretrain "$cfg" --set train.run_dir="$tmp/two2one" --resume "$tmp/run2/ckpt-0000008.h5" >"$tmp/t2o.log" 2>&1
rel=$(compare "$tmp/run1/$final" "$tmp/two2one/$final" tol)
check "N=2 checkpoint resumed at N=1 continues the same data stream (within tolerance of N=1: $rel)" \
  within_tolerance "$rel"
mpi 3 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/three" --set train.shard_optimizer=yes \
  --resume "$tmp/run1/ckpt-0000004.h5" >"$tmp/three.log" 2>&1
rel=$(compare "$tmp/run1/$final" "$tmp/three/$final" tol)
check "N=1 checkpoint resumed at N=3 with ZeRO-1 (4 micro-batches on 3 ranks) within tolerance of N=1 ($rel)" \
  within_tolerance "$rel"

# ---- fine-tuning: N=2 vs N=1, rerun, ZeRO-1 (SST-2 layout on the fixtures, dropout on) -------------
FX=tests/fixtures/finetune
"$RP" init $FX/tiny.ini --out "$tmp/ft-init.h5" >/dev/null 2>&1
ft=(/dev/null --set task.glue_task=sst2 --set task.train_file=$FX/sst_train.tsv --set task.dev_file=$FX/sst_dev.tsv
    --set task.init_checkpoint="$tmp/ft-init.h5" --set train.threads=1 --set task.batch_size=4
    --set train.grad_accum_steps=2 --set task.max_steps=10 --set task.max_seq_len=16 --set task.lr=1e-3
    --set model.hidden_dropout=0.1 --set train.log_interval=5)
"$RP" finetune "${ft[@]}" --set train.run_dir="$tmp/ft1" >"$tmp/ft1.log" 2>&1
mpi 2 "$RP" finetune "${ft[@]}" --set train.run_dir="$tmp/ft2" >"$tmp/ft2.log" 2>&1
check "N=2 fine-tuning writes model.h5 and dev predictions" test -s "$tmp/ft2/model.h5" -a -s "$tmp/ft2/dev_predictions.tsv"
rel=$(compare "$tmp/ft1/model.h5" "$tmp/ft2/model.h5" tol)
check "N=2 fine-tuning equals N=1 within tolerance (worst ratio, max |diff|: $rel)" within_tolerance "$rel"
check "N=2 fine-tuning: rank 0 alone prints the launch summary and writes the parameter table" \
  test "$(grep -c '^  parameters: [0-9]* loaded' "$tmp/ft2.log")" -eq 1 -a \
  "$(grep -c 'initialised *classifier/weight' "$tmp/ft2/parameters.txt")" -eq 1
mpi 2 "$RP" finetune "${ft[@]}" --set train.run_dir="$tmp/ft2b" >"$tmp/ft2b.log" 2>&1
check "N=2 fine-tuning rerun is bit-identical" test "$(compare "$tmp/ft2/model.h5" "$tmp/ft2b/model.h5" bits)" = identical
mpi 2 "$RP" finetune "${ft[@]}" --set train.run_dir="$tmp/ft2z" --set train.shard_optimizer=yes >"$tmp/ft2z.log" 2>&1
check "N=2 fine-tuning with ZeRO-1 equals unsharded bit for bit" \
  test "$(compare "$tmp/ft2/model.h5" "$tmp/ft2z/model.h5" bits)" = identical

# ---- kill -9 under mpirun -np 2, resume under mpirun -np 2 ----------------------------------------
long=(--set train.max_steps=24 --set train.checkpoint_interval=3)
mpi 2 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/longA" "${long[@]}" >"$tmp/longA.log" 2>&1
# Rank 0 (the first app context) SIGKILLs itself right after writing the checkpoint of step 3
# (REALPOS_TEST_SIGNAL_AT_STEP, the same step on any host); mpirun then ends rank 1.
"${MPI[@]}" -np 1 env REALPOS_TEST_SIGNAL_AT_STEP=KILL:3 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/longB" "${long[@]}" : \
  -np 1 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/longB" "${long[@]}" >"$tmp/longB1.log" 2>&1 &
pid=$!; background+=($pid)
wait_exit $pid; rc=$?
last=$(ls "$tmp/longB"/ckpt-*.h5 2>/dev/null | sort | tail -n 1)
echo "    killed at $(basename "${last:-none}") (mpirun status $rc); resuming"
check "kill -9 of rank 0 after step 3 stops the job (status $rc), leaving the checkpoint of step 3 as the newest" \
  test $rc -ne 0 -a $rc -ne 124 -a "$last" = "$tmp/longB/ckpt-0000003.h5"
mpi 2 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/longB" "${long[@]}" --resume "$last" >"$tmp/longB2.log" 2>&1
check "kill -9 + resume under mpirun -np 2 is bit-identical to an uninterrupted run ($(compare \
  "$tmp/longA/ckpt-0000024.h5" "$tmp/longB/ckpt-0000024.h5" bits))" \
  test "$(compare "$tmp/longA/ckpt-0000024.h5" "$tmp/longB/ckpt-0000024.h5" bits)" = identical

# ---- a signal to one rank: every rank stops after the same step, one checkpoint, exit 0 ------------
endless=(--set train.max_steps=100000 --set train.checkpoint_interval=100000 --set train.log_interval=1)
# rank 1 (the second app context) SIGTERMs itself after step 2; update 3 sees it on every rank
"${MPI[@]}" -np 1 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/sig" "${endless[@]}" : \
  -np 1 env REALPOS_TEST_SIGNAL_AT_STEP=TERM:2 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/sig" "${endless[@]}" \
  >"$tmp/sig.log" 2>&1 &
pid=$!; background+=($pid)
wait_exit $pid; rc=$?
check "SIGTERM to rank 1 alone: the job exits 0 (status $rc)" test $rc -eq 0
check "... after rank 0 saves one checkpoint, of step 3" test "$(ls "$tmp/sig"/ckpt-*.h5 2>/dev/null)" = "$tmp/sig/ckpt-0000003.h5"
check "... saying a stop signal reached another rank" grep -qF "a stop signal on another rank: saving a checkpoint at step 3" "$tmp/sig.log"
"${MPI[@]}" -np 2 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/usr1" "${endless[@]}" >"$tmp/usr1.log" 2>&1 &
pid=$!; background+=($pid)
for _ in $(seq 1 6000); do grep -q '"step":2,' "$tmp/usr1/metrics.jsonl" 2>/dev/null && break; sleep 0.05; done
kill -USR1 $pid; wait_exit $pid; rc=$?
check "SIGUSR1 to mpirun (forwarded to every rank): exit 0 with a checkpoint (status $rc)" \
  test $rc -eq 0 -a -n "$(ls "$tmp/usr1"/ckpt-*.h5 2>/dev/null)"

# ---- one rank fails: the job stops with its message ------------------------------------------------
# Same configuration text on both ranks (relative paths), but rank 1 runs in a directory whose
# training shard is corrupt.
mkdir -p "$tmp/good/shards" "$tmp/bad/shards"
cp "$tmp/shards/"* "$tmp/good/shards/"; cp "$tmp/shards/"* "$tmp/bad/shards/"
shard=$(cd "$tmp/shards" && ls s*-0.h5 | head -n 1)
head -c 3000 "$tmp/shards/$shard" >"$tmp/bad/shards/$shard"
sed -e "s|^shard_dir = .*|shard_dir = shards|" -e "s|^run_dir = .*|run_dir = run|" "$cfg" >"$tmp/rel.ini"
start=$(date +%s)
timeout 300 "${MPI[@]}" -np 1 -wdir "$tmp/good" "$RP" pretrain "$tmp/rel.ini" --set train.max_steps=100000 \
  : -np 1 -wdir "$tmp/bad" "$RP" pretrain "$tmp/rel.ini" --set train.max_steps=100000 >"$tmp/fail.log" 2>&1
rc=$?; took=$(( $(date +%s) - start ))
check "a corrupt shard on rank 1 stops the job (status $rc, ${took}s)" test $rc -ne 0 -a $rc -ne 124
check "... with rank 1's message naming the file" grep -q "shards/$shard" "$tmp/fail.log"
check "... and saying which rank failed" grep -q "rank 1 of 2 failed" "$tmp/fail.log"
timeout 300 "${MPI[@]}" -np 1 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/d1" \
  : -np 1 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/d2" >"$tmp/differ.log" 2>&1
check "ranks with different configurations refuse to start" grep -q "differs from rank 0's" "$tmp/differ.log"
expect_error "single-process commands refuse mpirun -np 2" "runs in one process" mpi 2 "$RP" eval "$cfg" \
  --checkpoint "$tmp/run1/$final"
exit 0
