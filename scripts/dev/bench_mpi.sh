#!/usr/bin/env bash
# Data-parallel throughput on one machine, side by side in one run: 1 rank x T threads against
# T ranks x 1 thread (T = cores, default 2), interleaved over ROUNDS rounds (default 3), on the
# bert-mini shape (vocabulary 30522) with a synthetic corpus, sequences of 128, micro-batches of
# BATCH (default 16) rows, T micro-batches per step (so each of the T ranks computes one). Reports
# the median tokens/s of each, their ratio, rank 0's communication time per step, and the peak
# RSS of a rank with and without ZeRO-1. Usage: scripts/dev/bench_mpi.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
RP=$PWD/realpos
out=${1:-build/bench-mpi}
T=${THREADS:-$(nproc)}
ROUNDS=${ROUNDS:-3}
BATCH=${BATCH:-16}
STEPS=${STEPS:-8}
command -v mpirun >/dev/null || { echo "bench_mpi: mpirun not found (Debian: openmpi-bin)"; exit 1; }
mkdir -p "$out"
MPI=(mpirun --oversubscribe --allow-run-as-root --bind-to none)

# Synthetic data: the bert-mini vocabulary size, Zipf-like word frequencies, 3000 documents.
if [ ! -s "$out/shards/index.json" ]; then
  { printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n'; for i in $(seq 0 30516); do echo "w$i"; done; } >"$out/vocab.txt"
  awk 'BEGIN { srand(5); for (d = 0; d < 3000; d++) { ns = 5 + int(rand() * 15);
         for (s = 0; s < ns; s++) { n = 5 + int(rand() * 20); line = "";
           for (w = 0; w < n; w++) { z = int(30517 * rand() ^ 4); line = line (w ? " " : "") "w" z }
           print line "." }
         print "" } }' >"$out/corpus.txt"
fi
cat >"$out/bench.ini" <<INI
[model]
hidden_size = 256
num_layers = 4
num_heads = 4
intermediate_size = 1024
vocab_size = 30522
max_position = 512
[train]
batch_size = $BATCH
grad_accum_steps = $T
max_steps = $STEPS
warmup_steps = 2
log_interval = $((STEPS / 2))
eval_interval = 100000
checkpoint_interval = 100000
eval_batches = 1
[data]
corpus = $out/corpus.txt
vocab = $out/vocab.txt
shard_dir = $out/shards
max_seq_len = 128
INI
[ -s "$out/shards/index.json" ] || "$RP" prepare "$out/bench.ini" >/dev/null 2>&1

# tokens/s of the last log window (steps STEPS/2+1..STEPS: no start-up in it)
last_tps() { $PY -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "tokens_per_s" in l][-1]["tokens_per_s"])' "$1"; }
PY=/usr/bin/python3
: >"$out/runs.txt"
for round in $(seq 1 "$ROUNDS"); do
  dir=$out/r$round-1x$T
  rm -rf "$dir"
  OMP_NUM_THREADS=$T "$RP" pretrain "$out/bench.ini" --set train.run_dir="$dir" --set train.threads=$T \
    >"$dir.log" 2>&1
  echo "1x$T $(last_tps "$dir/metrics.jsonl") - -" >>"$out/runs.txt"
  dir=$out/r$round-${T}x1
  rm -rf "$dir"
  "${MPI[@]}" -np "$T" -x OMP_NUM_THREADS=1 /usr/bin/time -f "rss_kb %M" "$RP" pretrain "$out/bench.ini" \
    --set train.run_dir="$dir" --set train.threads=1 >"$dir.log" 2>&1
  comm=$(sed -n 's/.*communication \([0-9.]*\) ms per step on rank 0 (\([0-9.]*\)% of step time).*/\1 \2/p' "$dir.log")
  echo "${T}x1 $(last_tps "$dir/metrics.jsonl") $comm" >>"$out/runs.txt"
  tail -n 2 "$out/runs.txt"
done
# Peak RSS per rank, unsharded and ZeRO-1 (one run each, T ranks).
for shard in no yes; do
  dir=$out/rss-$shard; rm -rf "$dir"
  "${MPI[@]}" -np "$T" -x OMP_NUM_THREADS=1 /usr/bin/time -f "rss_kb %M" "$RP" pretrain "$out/bench.ini" \
    --set train.run_dir="$dir" --set train.threads=1 --set train.max_steps=3 --set train.shard_optimizer=$shard \
    >"$dir.log" 2>&1
  echo "rss shard_optimizer=$shard: $(grep -o 'rss_kb [0-9]*' "$dir.log" | awk '{printf "%.0f MB ", $2/1024}')" \
    | tee -a "$out/runs.txt"
done
$PY - "$out/runs.txt" "$T" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith("rss")]
T = sys.argv[2]
one = [float(r[1]) for r in rows if r[0] == "1x" + T]
many = [float(r[1]) for r in rows if r[0] == T + "x1"]
comm = [float(r[2]) for r in rows if r[0] == T + "x1" and r[2] != "-"]
share = [float(r[3]) for r in rows if r[0] == T + "x1" and r[3] != "-"]
print("1 rank x %s threads: median %.0f tok/s  (%s)" % (T, st.median(one), " ".join("%.0f" % v for v in one)))
print("%s ranks x 1 thread: median %.0f tok/s  (%s)" % (T, st.median(many), " ".join("%.0f" % v for v in many)))
print("ratio ranks/threads: %.2f; rank 0 communication: median %.0f ms per step, %.1f%% of step time"
      % (st.median(many) / st.median(one), st.median(comm), st.median(share)))
PY
