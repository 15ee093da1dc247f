#!/usr/bin/env bash
# realpos bench --lengths-from FILE times fine-tuning steps on FILE's real examples: the token
# counts it reports equal what the examples hold, computed here independently (WordPiece lengths
# from `realpos tokenize`, + [CLS] and [SEP]s, truncated as fine-tuning truncates), batches padded
# per task.padding (to the longest sequence, or to task.max_seq_len) and grouped per
# task.group_by_length; a missing or malformed file fails naming it; --against refuses a config of
# other batch shapes (task.batch_size, task.max_seq_len) unless its batches come from a source of
# its own (--against-lengths-from); the synthetic mode is as it was.
source "$(dirname "$0")/../../lib.sh"

# A 100-token vocabulary for configs/tiny.ini: words w0..w89 and continuations ##a..##e, so that
# "w7ab" is 3 WordPieces.
synthetic_vocab "$tmp/vocab.txt" 90
printf '##%s\n' a b c d e >>"$tmp/vocab.txt"
L=16 B=4
# SST-2 layout (header; sentence, label): 12 sentences = 3 batches of 4, one epoch; the last one
# is longer than L - 2 tokens and is truncated.
{ printf 'sentence\tlabel\n'
  printf 'w1 w2\t0\nw3ab w4 w5\t1\nw6\t0\nw7 w8 w9 w10 w11cde\t1\nw12 w13 w14\t0\nw15abc\t1\n'
  printf 'w16 w17 w18 w19 w20 w21 w22\t0\nw23 w24\t1\nw25a w26b w27c w28d\t0\nw29\t1\nw30 w31 w32 w33\t0\n'
  printf 'w40 w41 w42 w43 w44 w45 w46 w47 w48 w49ab w50 w51 w52 w53 w54\t1\n'; } >"$tmp/single.tsv"
# MRPC layout (BOM + header; label, id, id, sentence 1, sentence 2): 8 pairs = 2 batches of 4, one
# over L - 3 text tokens (truncate_pair).
{ printf '\xEF\xBB\xBFQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n'
  printf '1\t1\t2\tw1 w2\tw3\n0\t3\t4\tw4ab w5\tw6 w7 w8\n1\t5\t6\tw9\tw10\n0\t7\t8\tw11 w12 w13\tw14c w15\n'
  printf '1\t9\t10\tw16 w17 w18 w19 w20 w21 w22 w23\tw24 w25 w26 w27 w28 w29 w30\n0\t11\t12\tw31\tw32 w33\n'
  printf '1\t13\t14\tw34 w35\tw36a\n0\t15\t16\tw37\tw38 w39 w40\n'; } >"$tmp/pair.tsv"
# Independent sequence lengths: single n = min(tokens + 2, L); pair n = min(a + b, L - 3) + 3.
tail -n +2 "$tmp/single.tsv" | cut -f1 | "$RP" tokenize --vocab "$tmp/vocab.txt" |
  awk -v L=$L '{ n = NF + 2; print (n > L ? L : n) }' >"$tmp/single.len"
paste <(tail -n +2 "$tmp/pair.tsv" | cut -f4 | "$RP" tokenize --vocab "$tmp/vocab.txt" | awk '{ print NF }') \
      <(tail -n +2 "$tmp/pair.tsv" | cut -f5 | "$RP" tokenize --vocab "$tmp/vocab.txt" | awk '{ print NF }') |
  awk -v L=$L '{ t = $1 + $2; if (t > L - 3) t = L - 3; print t + 3 }' >"$tmp/pair.len"

bench() { # NAME TSV GLUE_TASK STEPS SETS...: run the bench (JSON in $tmp/NAME.json, text in $tmp/NAME.out)
  local name=$1 tsv=$2 task=$3 steps=$4; shift 4
  local sets=(); for s in "$@"; do sets+=(--set "$s"); done
  if OMP_NUM_THREADS=1 "$RP" bench configs/tiny.ini --set data.vocab="$tmp/vocab.txt" --set task.glue_task="$task" \
       "${sets[@]}" --lengths-from "$tsv" --batch-size $B --seq-len $L --steps "$steps" --warmup 0 \
       --json "$tmp/$name.json" >"$tmp/$name.out" 2>&1; then pass "bench --lengths-from runs ($name)"
  else fail "bench --lengths-from runs ($name)" "$(head -c 400 "$tmp/$name.out")"; fi
}
bench grouped "$tmp/single.tsv" sst2 3 task.group_by_length=yes task.padding=longest
bench longest "$tmp/single.tsv" sst2 3 task.padding=longest
bench max "$tmp/single.tsv" sst2 3 task.padding=max_length
bench pair "$tmp/pair.tsv" mrpc 2 task.group_by_length=yes task.padding=longest

"$PY" - "$tmp" $B $L <<'PY'
import json, sys
tmp, B, L = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def check(name, ok, why=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))
def lengths(name):
    return [int(x) for x in open(f"{tmp}/{name}.len")]
def grouped_maxima(ns):
    """group_by_length over one chunk: sorted longest first, cut into batches of B (then shuffled)."""
    s = sorted(ns, reverse=True)
    return sorted(s[k] for k in range(0, len(s), B))
single, pair = lengths("single"), lengths("pair")
check("the test's data: one truncated sentence, one truncated pair", max(single) == L and max(pair) == L,
      f"{single} {pair}")
runs = {name: json.load(open(f"{tmp}/{name}.json")) for name in ("grouped", "longest", "max", "pair")}
for name, ns in (("grouped", single), ("longest", single), ("max", single), ("pair", pair)):
    r = runs[name]
    check(f"{name}: real tokens = the sum of the examples' lengths (one epoch)", r["real_tokens"] == sum(ns),
          f"{r['real_tokens']} vs {sum(ns)} of {ns}")
    check(f"{name}: computed tokens = B x the padded lengths", r["computed_tokens"] == B * sum(r["batch_lengths"]),
          f"{r['computed_tokens']} vs {r['batch_lengths']}")
    check(f"{name}: real / computed tokens/s = real / computed tokens",
          abs(r["real_tokens_per_s"] / r["computed_tokens_per_s"] - r["real_tokens"] / r["computed_tokens"]) < 1e-9
          and r["tokens_per_s"] == r["computed_tokens_per_s"])
    check(f"{name}: a fine-tuning step, no MLM labels", r["labelled"] == 0 and r["finetune"]["sequences"] == len(ns),
          str(r.get("finetune")))
for name, ns in (("grouped", single), ("pair", pair)):
    got = sorted(runs[name]["batch_lengths"])
    check(f"{name}: group_by_length batches padded to their longest", got == grouped_maxima(ns),
          f"{got} vs {grouped_maxima(ns)} of {ns}")
got = runs["longest"]["batch_lengths"]
check("longest: each batch padded to one of its sequences' lengths", len(got) == 3 and set(got) <= set(ns for ns in single)
      and max(got) == max(single), str(got))
check("max_length: every batch padded to task.max_seq_len", runs["max"]["batch_lengths"] == [L] * 3,
      str(runs["max"]["batch_lengths"]))
check("grouped pads less than ungrouped, which pads less than max_length",
      runs["grouped"]["computed_tokens"] <= runs["longest"]["computed_tokens"] < runs["max"]["computed_tokens"],
      str([runs[n]["computed_tokens"] for n in ("grouped", "longest", "max")]))
PY
if grep -q 'real tokens/s (.* computed: B x padded length)' "$tmp/grouped.out" &&
   grep -q "fine-tuning sst2 on $tmp/single.tsv: 12 sequences" "$tmp/grouped.out"; then
  pass "text output: the file, real and computed tokens/s"
else fail "text output: the file, real and computed tokens/s" "$(head -c 600 "$tmp/grouped.out")"; fi

# Failures name the file.
set_vocab=(--set data.vocab="$tmp/vocab.txt")
expect_error "missing file named" "$tmp/nothing.tsv: cannot open --lengths-from: No such file or directory" \
  "$RP" bench configs/tiny.ini "${set_vocab[@]}" --set task.glue_task=sst2 --lengths-from "$tmp/nothing.tsv" --steps 1
{ head -n 4 "$tmp/single.tsv"; printf 'w1 w2\t0\textra\n'; } >"$tmp/bad.tsv"
expect_error "malformed row named (file and line)" "$tmp/bad.tsv: line 5: expected 2 tab-separated columns, got 3" \
  "$RP" bench configs/tiny.ini "${set_vocab[@]}" --set task.glue_task=sst2 --lengths-from "$tmp/bad.tsv" --seq-len $L --steps 1
printf 'sentence\tlabel\nw1\t7\n' >"$tmp/label.tsv"
expect_error "a label outside the task's set named" "$tmp/label.tsv: line 2: label '7'" \
  "$RP" bench configs/tiny.ini "${set_vocab[@]}" --set task.glue_task=sst2 --lengths-from "$tmp/label.tsv" \
  --seq-len $L --steps 1
expect_error "SQuAD: not JSON named" "$tmp/single.tsv: SQuAD JSON" \
  "$RP" bench configs/tiny.ini "${set_vocab[@]}" --set task.type=squad --set task.max_query_length=8 \
  --lengths-from "$tmp/single.tsv" --seq-len 32 --steps 1
expect_error "no task named" "set task.glue_task" \
  "$RP" bench configs/tiny.ini "${set_vocab[@]}" --lengths-from "$tmp/single.tsv" --steps 1
expect_error "no vocabulary named" "key 'data.vocab'" \
  "$RP" bench configs/tiny.ini --set task.glue_task=sst2 --lengths-from "$tmp/single.tsv" --steps 1
expect_error "--label-frac is the synthetic batch's" "--label-frac sets the MLM labels" \
  "$RP" bench configs/tiny.ini "${set_vocab[@]}" --set task.glue_task=sst2 --lengths-from "$tmp/single.tsv" \
  --label-frac 0.2 --steps 1

# --against with --lengths-from: each side batches as its own config's task.batch_size and
# task.max_seq_len (unless --batch-size / --seq-len set both); the two sides of a pair must time
# the same shapes, so a pair whose configs differ in either is refused, naming both shapes.
"$RP" config configs/tiny.ini --set task.batch_size=$B --set task.max_seq_len=$L >"$tmp/side.ini"
"$RP" config "$tmp/side.ini" --set task.batch_size=8 >"$tmp/side_b8.ini"
"$RP" config "$tmp/side.ini" --set task.max_seq_len=24 >"$tmp/side_l24.ini"
pair() { "$RP" bench "$tmp/side.ini" "${set_vocab[@]}" --set task.glue_task=sst2 --lengths-from "$tmp/single.tsv" \
  --steps 1 --warmup 0 "$@"; }
if pair --against "$tmp/side.ini" >"$tmp/pair_same.out" 2>&1; then pass "bench --against --lengths-from: the same shapes run"
else fail "bench --against --lengths-from: the same shapes run" "$(head -c 400 "$tmp/pair_same.out")"; fi
expect_error "bench --against --lengths-from: another task.batch_size is refused, naming both shapes" \
  "--against $tmp/side_b8.ini: batches of 8 x $L there, $B x $L in $tmp/side.ini" pair --against "$tmp/side_b8.ini"
expect_error "bench --against --lengths-from: another task.max_seq_len is refused, naming both shapes" \
  "--against $tmp/side_l24.ini: batches of $B x 24 there, $B x $L in $tmp/side.ini" pair --against "$tmp/side_l24.ini"
if pair --against "$tmp/side_b8.ini" --batch-size $B >"$tmp/pair_set.out" 2>&1; then
  pass "bench --against --lengths-from: --batch-size sets both sides' shape"
else fail "bench --against --lengths-from: --batch-size sets both sides' shape" "$(head -c 400 "$tmp/pair_set.out")"; fi
# --against-lengths-from gives the paired side batches of its own (fine-tuning against pretraining
# under one load): shapes may then differ; its one step of 8 is the whole 8-sentence file.
head -n 9 "$tmp/single.tsv" >"$tmp/single8.tsv"
if pair --against "$tmp/side_b8.ini" --against-lengths-from "$tmp/single8.tsv" --json "$tmp/pair_own.json" \
     >"$tmp/pair_own.out" 2>&1 &&
   "$PY" -c 'import json, sys; p = json.load(open(sys.argv[1]))["paired"]
sys.exit(not (p["real_tokens"] == sum(int(x) for x in open(sys.argv[2]).readlines()[:8]) and
              p["lengths_from"] == sys.argv[3]))' "$tmp/pair_own.json" "$tmp/single.len" "$tmp/single8.tsv" &&
   grep -q '^paired side: [0-9.]* real tokens/s; per step: forward' "$tmp/pair_own.out"; then
  pass "bench --against-lengths-from: the paired side's own file and shapes"
else fail "bench --against-lengths-from: the paired side's own file and shapes" "$(head -c 600 "$tmp/pair_own.out")"; fi
expect_error "bench: two batch sources for the paired side are refused" "give one" \
  pair --against-lengths-from "$tmp/single8.tsv" --against-from-shards "$tmp"

# The synthetic mode: B x L random tokens per step, all real, MLM labels.
if OMP_NUM_THREADS=1 "$RP" bench configs/tiny.ini --batch-size 3 --seq-len 8 --steps 2 --warmup 1 \
     --json "$tmp/synthetic.json" >"$tmp/synthetic.out" 2>&1 &&
   "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1]))
sys.exit(not (r["finetune"] is None and r["real_tokens"] == r["computed_tokens"] == 2 * 3 * 8 and
              r["batch_lengths"] == [8, 8] and r["labelled"] > 0 and r["tokens_per_s"] == r["real_tokens_per_s"]))' \
     "$tmp/synthetic.json" && grep -q '^realpos: 1 threads, [0-9.]* tokens/s, ' "$tmp/synthetic.out"; then
  pass "synthetic mode: B x L tokens per step, MLM labels, its text line"
else fail "synthetic mode: B x L tokens per step, MLM labels, its text line" "$(head -c 400 "$tmp/synthetic.out")"; fi

# A tagging file (task.type = tagging, configs/synthetic.ini): the model `realpos finetune` would
# train from scratch on it (its words as the vocabulary), unpadded batches; each step's real tokens
# (step_real_tokens, what scripts/bench_peer.py repeats) are its sequences' words + [CLS] and [SEP],
# summing to real_tokens; a checkpoint to start from and no vocabulary is refused, naming the file.
printf 'a _\nb _\nc 1\nd 0\n\na _\nc 0\n\nb _\nd 1\nd 1\n\nc _\na 0\n\n' >"$tmp/tags.txt" # 4 examples of 4, 2, 3, 2 words
if OMP_NUM_THREADS=1 "$RP" bench configs/synthetic.ini --set task.group_by_length=no --lengths-from "$tmp/tags.txt" \
     --batch-size 4 --seq-len 32 --steps 2 --warmup 0 --json "$tmp/tags.json" >"$tmp/tags.out" 2>&1 &&
   "$PY" -c 'import json, sys; r = json.load(open(sys.argv[1]))
sys.exit(not (r["step_real_tokens"] == [19, 19] and r["real_tokens"] == 38 == r["computed_tokens"]
              and r["batch_lengths"] == [6, 6]))' "$tmp/tags.json"; then
  pass "bench --lengths-from a tagging file: the fresh tagger, each step's real tokens"
else fail "bench --lengths-from a tagging file" "$(tail -n 3 "$tmp/tags.out"; head -c 300 "$tmp/tags.json")"; fi
expect_error "bench --lengths-from a tagging file with a checkpoint and no vocabulary is refused" \
  "--lengths-from $tmp/tags.txt (a tagging file): task.init_checkpoint is set and key 'data.vocab' is empty" \
  "$RP" bench configs/synthetic.ini --set task.init_checkpoint=x.h5 --lengths-from "$tmp/tags.txt" --steps 1
