#!/usr/bin/env bash
# Results bit-identical at any thread count (issue 50): the same 2 fine-tuning steps of a small
# tagger (configs/synthetic.ini with 1 layer of width 256, feed-forward 1024, 32 sequences of
# 62-122 tokens a step, so that the products are split into several parts, and large enough that
# oneDNN, left to share a bf16 product among 64 threads, changed 12 of 69 datasets' bits) at 1, 2, 3, 8, 64 and 128 threads (64
# and 128 oversubscribe a small host: slowly, but the arithmetic is what a 128-core server runs)
# give checkpoints whose every dataset (weights, Adam moments) has the same bits, in fp32 and, where
# the CPU has bf16 instructions, in bf16 (oneDNN). Compared with h5py, dataset by dataset. bf16 also
# at 3 threads with REALPOS_GEMM_FIXED_GRID=1 ("3fixed"): the products in the blocks fixed by the
# shape give the bits of the blocks by thread count (core/gemm.c), which every other run uses where
# oneDNN's elements do not depend on the block (gemm_lanes_extent_invariant).
source "$(dirname "$0")/../../lib.sh"
"$RP" synth duplicate --lengths 30-40 --count 128 --seed 1 --out "$tmp/train.txt" >/dev/null 2>&1 ||
  fail "setup: realpos synth"
"$RP" synth duplicate --lengths 2-3 --count 2 --seed 2 --out "$tmp/dev.txt" >/dev/null 2>&1 || fail "setup: realpos synth dev"
counts="1 2 3 8 64 128"
precisions=fp32
if "$RP" bench configs/synthetic.ini --batch-size 8 --seq-len 16 --steps 1 --warmup 0 --probes start \
    --set train.precision=bf16 >/dev/null 2>&1; then precisions="fp32 bf16"
else echo "SKIP test_thread_counts bf16 (this CPU has no bf16 instructions)"; fi
for precision in $precisions; do
  runs=$counts
  [ "$precision" = bf16 ] && runs="$counts 3fixed"
  for run in $runs; do
    t=${run%fixed} fixed=0
    [ "$t" != "$run" ] && fixed=1
    REALPOS_GEMM_FIXED_GRID=$fixed OMP_NUM_THREADS=$t "$RP" finetune configs/synthetic.ini --set model.hidden_size=256 --set model.num_layers=1 \
      --set model.intermediate_size=1024 --set task.batch_size=32 --set task.max_steps=2 --set train.threads=$t \
      --set train.precision=$precision --set task.train_file="$tmp/train.txt" --set task.dev_file="$tmp/dev.txt" \
      --set task.max_seq_len=128 --set train.run_dir="$tmp/$precision-$run" >"$tmp/$precision-$run.log" 2>&1 ||
      fail "setup: finetune $precision at $run threads" "$(tail -n 3 "$tmp/$precision-$run.log")"
  done
  if out=$("$PY" - "$tmp" "$precision" $runs <<'PY'
import sys, h5py, numpy as np
tmp, precision, counts = sys.argv[1], sys.argv[2], sys.argv[3:]
def datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, d: out.__setitem__(name, d[()]) if isinstance(d, h5py.Dataset)
                     and (name.startswith("model/") or name.startswith("optim")) else None)
    return out
base = datasets(f"{tmp}/{precision}-{counts[0]}/ckpt-0000002.h5")
bad = []
for t in counts[1:]:
    other = datasets(f"{tmp}/{precision}-{t}/ckpt-0000002.h5")
    differ = [n for n in base if n not in other or base[n].tobytes() != other[n].tobytes()]
    if differ or len(other) != len(base):
        bad.append(f"{t} threads: {len(differ)} of {len(base)} datasets differ from 1 thread (e.g. {differ[:2]})")
print("; ".join(bad) if bad else f"{len(base)} datasets")
sys.exit(1 if bad else 0)
PY
  ); then pass "$precision checkpoints bit-identical at $runs threads ($out)"
  else fail "$precision checkpoints bit-identical at $runs threads" "$out"; fi
done
