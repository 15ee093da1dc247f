#!/usr/bin/env bash
# Shard seals verified lazily (train/data/shard_set.c): start-up reads no shard through, a shard
# corrupted after prepare, or replaced after the run opened it, fails the run, naming it, when the
# stream first reaches it (the last checkpoint intact), and training is bit-identical to the eager
# open (an index without train_token_counts still verifies every shard at start-up, as before).
source "$(dirname "$0")/../../lib.sh"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }

# Vocabulary: the five specials and 80 words; corpus: 120 documents, ~500 tokens per shard.
synthetic_vocab "$tmp/vocab.txt" 80
awk 'BEGIN { srand(11); for (d = 0; d < 120; d++) { ns = 2 + int(rand() * 5);
       for (s = 0; s < ns; s++) { n = 3 + int(rand() * 8); line = "";
         for (w = 0; w < n; w++) { z = int(rand() * rand() * 80); line = line (w ? " " : "") "w" z }
         print line "." }
       print "" } }' >"$tmp/corpus.txt"
tiny_pretrain_ini "$tmp/run.ini" model.hidden_size=32 model.intermediate_size=64 optim.lr=3e-3 \
  train.batch_size=2 train.max_steps=12 train.warmup_steps=2 train.eval_interval=6 train.checkpoint_interval=6 \
  train.keep_last=3 data.shard_tokens=500
cfg=$tmp/run.ini
"$RP" prepare "$cfg" >"$tmp/prepare.log" 2>&1
shards=$(ls "$tmp/shards"/s*-*.h5 2>/dev/null | wc -l)
check "prepare writes a set of several shards ($shards)" test "$shards" -ge 8

counts=$("$PY" - "$tmp/shards" <<'PY'
import glob, json, sys, h5py, numpy as np
total, bad = 0, []
for p in glob.glob(sys.argv[1] + "/s*-*.h5"):
    with h5py.File(p, "r") as f:
        c = f["train/token_counts"][()]
        total = total + c
        if c.sum() != f["train/tokens"].shape[0] or not np.array_equal(c, np.bincount(f["train/tokens"][()], minlength=len(c))):
            bad.append(p.split("/")[-1])
index = json.load(open(sys.argv[1] + "/index.json"))["train_token_counts"]
print("ok" if not bad and list(total) == index else "shards %s; index equal: %s" % (bad, list(total) == index))
PY
)
check "each shard's token counts are its own train tokens' and the index holds their sum ($counts)" test "$counts" = ok
cp -r "$tmp/shards" "$tmp/intact"
# Eager reference: the same set with an index that predates train_token_counts.
cp -r "$tmp/shards" "$tmp/eager"
"$PY" - "$tmp/eager/index.json" <<'PY'
import json, sys
i = json.load(open(sys.argv[1])); del i["train_token_counts"]; json.dump(i, open(sys.argv[1], "w"), indent=1)
PY
"$RP" pretrain "$cfg" >"$tmp/lazy.log" 2>&1
"$RP" pretrain "$cfg" --set train.run_dir="$tmp/run-eager" --set data.shard_dir="$tmp/eager" >"$tmp/eager.log" 2>&1
check "lazy open: no checksum verified at start-up" grep -q "each shard's checksum is verified at its first read" "$tmp/lazy.log"
check "an index without train_token_counts is opened eagerly" grep -q "every checksum verified now" "$tmp/eager.log"
losses() { cut -d, -f1-6,11-13 "$1/metrics.csv"; } # losses, accuracies, lr, norms: no timing
check "lazy and eager runs log identical losses ($(losses "$tmp/run" | wc -l) rows)" \
  cmp -s <(losses "$tmp/run") <(losses "$tmp/run-eager")
check "the unigram baseline from the index is the shards' own" cmp -s \
  <("$RP" eval "$cfg" --checkpoint "$tmp/run/ckpt-0000012.h5" 2>/dev/null) \
  <("$RP" eval "$cfg" --set data.shard_dir="$tmp/eager" --checkpoint "$tmp/run/ckpt-0000012.h5" 2>/dev/null)

# Corrupt shard 3 after prepare (one byte flipped in the middle of its data): with this corpus and
# seed, the training stream first reaches it in step 8 (shards 1 and 5 are read in step 1).
victim=$(ls "$tmp/shards"/s*-3.h5)
"$PY" -c "import os, sys; p = sys.argv[1]; n = os.path.getsize(p); f = open(p, 'r+b'); f.seek(n // 2)
b = f.read(1); f.seek(n // 2); f.write(bytes([b[0] ^ 0x40])); f.close()" "$victim"
"$RP" pretrain "$cfg" --set train.run_dir="$tmp/run-corrupt" --set train.max_steps=200 \
  --set train.checkpoint_interval=2 >"$tmp/corrupt.log" 2>&1; rc=$?
check "a corrupt shard fails the run (status $rc)" test $rc -ne 0 -a $rc -lt 128
check "the message names the shard and what is wrong" \
  grep -qF "$(basename "$victim"): corrupt: CRC-32" "$tmp/corrupt.log"
check "the message says when it was found" grep -q "^realpos: error: .*(a shard of .*, verified at its first read)" "$tmp/corrupt.log"
steps=$(grep -c '"kind":"train"' "$tmp/run-corrupt/metrics.jsonl" 2>/dev/null)
check "start-up did not read it: the run trained until the stream reached it ($steps steps)" test "${steps:-0}" -ge 2
last=$(ls "$tmp/run-corrupt"/ckpt-*.h5 2>/dev/null | sort | tail -n 1)
check "the run's last checkpoint ($(basename "${last:-none}")) is intact" \
  bash -c '"$0" inspect --verify "$1" >/dev/null' "$RP" "${last:-$tmp/none}"

# A shard replaced under a running run by another valid shard of the set (as a prepare writing
# into it would): the descriptor opened at start-up still reads the original, intact bytes, but
# the name now holds another file (device and inode differ), and the first read of it refuses.
# Start-up opens every shard; shard 3 is first read in step 8. The run stops itself after step 1
# (REALPOS_TEST_SIGNAL_AT_STEP=STOP:1, the same point on any host); the swap happens while it is
# stopped, and it is continued.
cp -r "$tmp/intact" "$tmp/swap"
swapped=$tmp/swap/$(basename "$victim")
REALPOS_TEST_SIGNAL_AT_STEP=STOP:1 "$RP" pretrain "$cfg" --set train.run_dir="$tmp/run-swap" \
  --set data.shard_dir="$tmp/swap" --set train.max_steps=200 --set train.checkpoint_interval=2 >"$tmp/swap.log" 2>&1 &
pid=$!
swap_rc=1
if wait_stopped $pid && ls -l "/proc/$pid/fd" 2>/dev/null | grep -qF -- "-> $swapped"; then
  cp "$tmp/swap"/s*-0.h5 "$swapped.new" && mv "$swapped.new" "$swapped"; swap_rc=$?
fi
kill -CONT $pid 2>/dev/null
wait $pid; rc=$?
check "a shard replaced after start-up fails the run (swapped: $([ $swap_rc -eq 0 ] && echo yes || echo no), status $rc)" \
  test $swap_rc -eq 0 -a $rc -ne 0 -a $rc -lt 128
check "the message names the replaced shard and the set" \
  grep -qF "realpos: error: $swapped: replaced since the run opened $tmp/swap/index.json" "$tmp/swap.log"
steps=$(grep -c '"kind":"train"' "$tmp/run-swap/metrics.jsonl" 2>/dev/null)
check "it is found at the shard's first read: the run trained until then ($steps steps)" test "${steps:-0}" -ge 2
last=$(ls "$tmp/run-swap"/ckpt-*.h5 2>/dev/null | sort | tail -n 1)
check "the swapped run's last checkpoint ($(basename "${last:-none}")) is intact" \
  bash -c '"$0" inspect --verify "$1" >/dev/null' "$RP" "${last:-$tmp/none}"

# prepare --verify: every shard now.
out=$("$RP" prepare "$cfg" --verify --set data.shard_dir="$tmp/intact" 2>&1); rc=$?
check "prepare --verify passes an intact set" test $rc -eq 0 -a -n "$(grep "$shards shards verified" <<<"$out")"
expect_error "prepare --verify names the corrupt shard" "$(basename "$victim"): corrupt: CRC-32" \
  "$RP" prepare "$cfg" --verify

# Start-up still refuses what one header read shows: a truncated shard, a missing one.
cp -r "$tmp/intact" "$tmp/trunc"; f=$(ls "$tmp/trunc"/s*-*.h5 | head -n 1)
truncate -s -1 "$f"
expect_error "a truncated shard fails at start-up" "$(basename "$f"): truncated" \
  "$RP" pretrain "$cfg" --set data.shard_dir="$tmp/trunc" --set train.run_dir="$tmp/run-trunc"
rm "$f"
expect_error "a missing shard fails at start-up" "$(basename "$f")" \
  "$RP" pretrain "$cfg" --set data.shard_dir="$tmp/trunc" --set train.run_dir="$tmp/run-trunc"
exit 0
