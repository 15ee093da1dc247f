#!/usr/bin/env bash
# scripts/bench_peer.py, make bench's PyTorch side: an MLM step runs and reports what it timed; the
# tagger repeats the steps of a realpos bench JSON (the same padded lengths, the same real tokens,
# which it counts); bad arguments and files fail with a message naming them, never a traceback.
source "$(dirname "$0")/../../lib.sh"
peer=scripts/bench_peer.py
if OMP_NUM_THREADS=1 "$PY" $peer --config configs/tiny.ini --batch-size 2 --seq-len 8 --steps 2 --threads 1 \
     --json "$tmp/mlm.json" >/dev/null 2>"$tmp/mlm.err" &&
   "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1]))
sys.exit(not (r["engine"] == "pytorch-tuned-peer" and r["real_tokens"] == 2 * 2 * 8 and r["tokens_per_s"] > 0
              and len(r["step_seconds"]) == 2 and r["adamw_foreach"] and r["precision"] == "fp32"))' "$tmp/mlm.json"
then pass "bench_peer: an MLM run reports its steps and tokens"
else fail "bench_peer: an MLM run reports its steps and tokens" "$(tail -n 3 "$tmp/mlm.err")"; fi

printf 'a _\nb _\nc 1\nd 0\n\na _\nc 0\n\nb _\nd 1\nd 1\n\nc _\na 0\n\n' >"$tmp/tags.txt" # 4 examples of 4, 2, 3, 2 words
OMP_NUM_THREADS=1 "$RP" bench configs/synthetic.ini --set task.batch_size=2 --lengths-from "$tmp/tags.txt" \
  --seq-len 32 --steps 3 --warmup 0 --probes start --json "$tmp/rp.json" >/dev/null 2>&1 || fail "setup: realpos bench"
if OMP_NUM_THREADS=1 "$PY" $peer --config configs/synthetic.ini --set train.threads=1 --batch-size 2 --seq-len 32 \
     --steps 3 --threads 1 --tagging "$tmp/tags.txt" --shapes-from "$tmp/rp.json" --json "$tmp/peer.json" \
     >/dev/null 2>"$tmp/peer.err" &&
   "$PY" -c 'import json, sys; a, b = (json.load(open(p)) for p in sys.argv[1:3])
sys.exit(not (a["batch_lengths"] == b["batch_lengths"] and a["real_tokens"] == b["real_tokens"] > 0
              and b["computed_tokens_per_s"] >= b["tokens_per_s"]))' "$tmp/rp.json" "$tmp/peer.json"
then pass "bench_peer --tagging: realpos's steps, padded, the same real tokens"
else fail "bench_peer --tagging: realpos's steps, padded, the same real tokens" "$(tail -n 3 "$tmp/peer.err")"; fi

expect_error "bench_peer: --tagging without --shapes-from is refused" "--tagging FILE and --shapes-from JSON go together" \
  "$PY" $peer --config configs/synthetic.ini --batch-size 2 --seq-len 8 --steps 1 --tagging "$tmp/tags.txt"
echo '{}' >"$tmp/empty.json"
expect_error "bench_peer: a JSON without the steps' shapes is refused, naming it" "--shapes-from $tmp/empty.json: expected a realpos bench JSON" \
  "$PY" $peer --config configs/synthetic.ini --batch-size 2 --seq-len 8 --steps 1 --tagging "$tmp/tags.txt" \
  --shapes-from "$tmp/empty.json"
expect_error "bench_peer: more steps than the JSON holds are refused" "3 steps, --steps 5 asked" \
  "$PY" $peer --config configs/synthetic.ini --batch-size 2 --seq-len 32 --steps 5 --tagging "$tmp/tags.txt" \
  --shapes-from "$tmp/rp.json"
expect_error "bench_peer: a missing tagging file is refused, naming it" "--tagging $tmp/none.txt: No such file" \
  "$PY" $peer --config configs/synthetic.ini --batch-size 2 --seq-len 32 --steps 1 --tagging "$tmp/none.txt" \
  --shapes-from "$tmp/rp.json"
