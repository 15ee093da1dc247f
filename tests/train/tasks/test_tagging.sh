#!/usr/bin/env bash
# task.type = tagging end to end on a tiny model trained from scratch (task.init_checkpoint = none):
# realpos synth files, the vocabulary built from the training file (RUN_DIR/vocab.txt), dev
# metrics with the length buckets, predict reproducing the dev predictions, BertForTokenClassification
# export checked against the independent PyTorch reference (tests/reference/hf_reference.py
# token-tags: strict module layout, labels and probabilities), import round trip, a BIO file with
# -DOCSTART- and entity metrics, and bad inputs.
source "$(dirname "$0")/../../lib.sh"
export OMP_NUM_THREADS=1
cd "$tmp"
"$RP" synth reverse --lengths 1-6 --count 600 --seed 1 --out train.txt 2>/dev/null
"$RP" synth reverse --lengths 1-10 --count 4 --per-length --seed 2 --out test.txt 2>/dev/null
tiny_tagging_ini tag.ini model.hidden_size=32 model.num_layers=2 model.intermediate_size=64 model.relative_k=8 \
  train.run_dir="$tmp/run" train.threads=1 train.log_interval=50 task.train_file="$tmp/train.txt" task.dev_file="$tmp/test.txt" \
  task.batch_size=16 task.max_steps=150 task.lr=2e-3
if "$RP" finetune tag.ini > out.txt 2> log.txt; then pass "fine-tuning a tagging model from scratch"
else fail "fine-tuning a tagging model from scratch" "$(tail -3 log.txt)"; fi
[ "$(head -5 run/vocab.txt | tr '\n' ' ')" = "[PAD] [UNK] [CLS] [SEP] [MASK] " ] && [ "$(wc -l < run/vocab.txt)" = 8 ] &&
  pass "the vocabulary built from the training file's words (5 special + 0 1 ?)" ||
  fail "vocabulary" "$(cat run/vocab.txt | tr '\n' ' ')"
grep -q '^tag_labels = 0 1$' run/config.ini && grep -q '^train_max_length = 12$' run/config.ini &&
  pass "the label set and the longest training example (12 words) recorded in the run's config" ||
  fail "recorded label set and lengths" "$(grep -E 'tag_labels|train_max_length' run/config.ini)"
$PY - "$tmp/run/metrics.jsonl" <<'PYEOF' && pass "dev record: accuracies, 5 lengths within 12 words, 5 beyond, in-range accuracy > 0.6" || fail "dev record"
import json, sys
rec = [json.loads(l) for l in open(sys.argv[1]) if '"task_eval"' in l][-1]
by = rec["by_length"]
assert sorted(map(int, by)) == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20], by.keys()
assert rec["in_range"]["sequences"] == 24 and rec["beyond"]["sequences"] == 16, rec
assert rec["in_range"]["token_accuracy"] > 0.6, rec["in_range"]
assert abs(rec["accuracy"] - sum(v["token_accuracy"] * v["words"] for v in by.values()) /
           sum(v["words"] for v in by.values())) < 1e-12
PYEOF
words=$(grep -c . test.txt); lines=$(grep -c . run/dev_predictions.tsv)
[ "$words" = "$lines" ] && pass "one prediction line per word ($words)" || fail "prediction lines" "$lines for $words words"
"$RP" predict tag.ini --checkpoint run/model.h5 --input test.txt --out pred.tsv > predict.txt 2>&1
cmp -s pred.tsv run/dev_predictions.tsv && pass "predict reproduces the dev predictions" || fail "predict" "$(tail -2 predict.txt)"
grep -q "within the training lengths (<= 12 words)" predict.txt && pass "predict reports the length buckets" ||
  fail "predict buckets" "$(tail -1 predict.txt)"
# ---- HuggingFace BertForTokenClassification -----------------------------------------------------
"$RP" export-hf run/model.h5 --out hf > /dev/null 2>&1
grep -q '"BertForTokenClassification"' hf/config.json && ! grep -q pooler hf/config.json &&
  pass "export-hf writes BertForTokenClassification" || fail "export architecture" "$(head -3 hf/config.json)"
if $PY "$OLDPWD/tests/reference/hf_reference.py" token-tags hf --input test.txt --out ref.tsv 2> ref.err; then
  verdict=$(paste pred.tsv ref.tsv | awk -F'\t' 'NF > 1 { if ($2 != $5) bad++; d = $3 - $6; if (d < 0) d = -d; if (d > m) m = d }
    END { print (bad + 0 == 0 && m <= 1e-4) ? "ok" : "bad " bad + 0 " " m }')
  [ "$verdict" = ok ] && pass "the PyTorch reference of the exported folder (strict HF module layout) predicts the same labels and probabilities (within 1e-4)" ||
    fail "reference predictions" "$verdict"
else fail "reference token-tags" "$(tail -2 ref.err)"; fi
"$RP" import-hf hf --out back.h5 > /dev/null 2>&1 && "$RP" export-hf back.h5 --out hf2 > /dev/null 2>&1
cmp -s hf/model.safetensors hf2/model.safetensors && pass "import-hf then export-hf: the same tensors" || fail "round trip"
"$RP" predict tag.ini --checkpoint back.h5 --input test.txt --out back.tsv --set task.batch_size=16 > back.txt 2>&1
cmp -s back.tsv pred.tsv && pass "the imported checkpoint predicts as the original (in the same batches)" || fail "imported predictions"
# An imported checkpoint never measured its training lengths (task.train_max_length = 0): predict
# says so instead of reporting every sequence as beyond "<= 0 words"; --set gives the edge.
grep -qF "the training lengths are unknown (task.train_max_length = 0: not measured for this checkpoint)" back.txt &&
  ! grep -q "<= 0 words" back.txt && pass "predict with an imported checkpoint says its training lengths are unknown" ||
  fail "imported checkpoint's length buckets" "$(grep -i accuracy back.txt | tail -1)"
"$RP" predict tag.ini --checkpoint back.h5 --input test.txt --out back12.tsv --set task.batch_size=16 \
  --set task.train_max_length=12 > back12.txt 2>&1
grep -q "within the training lengths (<= 12 words)" back12.txt && cmp -s <(grep -i accuracy back12.txt) <(grep -i accuracy predict.txt) &&
  pass "... and with --set task.train_max_length=12 reports the original's length buckets" ||
  fail "imported checkpoint with task.train_max_length" "$(grep -i accuracy back12.txt | tail -1) vs $(grep -i accuracy predict.txt | tail -1)"
# ---- unpadded batches (task.padding = none) ----------------------------------------------------------
# The same training (dropout on, to compare the head's masks too) with batches padded to their
# longest and unpadded: losses and gradient norms per step within 1e-5 (summation order in the
# encoder only), dev outputs the same labels, probabilities within their last printed decimal.
for padding in longest none; do
  "$RP" finetune tag.ini --set train.run_dir="$tmp/pad-$padding" --set task.padding=$padding \
    --set model.hidden_dropout=0.1 --set model.attention_dropout=0.1 --set task.max_steps=60 \
    --set train.log_interval=1 > "pad-$padding.out" 2> "pad-$padding.log" ||
    fail "tagging with task.padding = $padding" "$(tail -3 "pad-$padding.log")"
done
$PY - pad-longest pad-none <<'PYEOF' && pass "tagging: unpadded = padded to the longest (60 steps with dropout: losses, gradient norms within 1e-5; dev labels equal, probabilities within their printed 1e-6)" || fail "tagging unpadded"
import json, sys
def steps(d):
    return [json.loads(l) for l in open(d + "/metrics.jsonl") if '"kind":"train"' in l]
a, b = steps(sys.argv[1]), steps(sys.argv[2])
assert len(a) == len(b) == 60, (len(a), len(b))
worst = max(max(abs(x["loss"] - y["loss"]) / abs(x["loss"]), abs(x["grad_norm"] - y["grad_norm"]) / x["grad_norm"])
            for x, y in zip(a, b))
assert worst <= 1e-5, worst
# training accuracy over the same labelled words (a near-tie may flip one word's argmax)
assert all(y["accuracy"] <= 1 for y in b) and max(abs(x["accuracy"] - y["accuracy"]) for x, y in zip(a, b)) <= 0.05
pa, pb = [[l.split("\t") for l in open(d + "/dev_predictions.tsv").read().splitlines()] for d in sys.argv[1:]]
assert len(pa) == len(pb) > 100 and all(x[:2] == y[:2] for x, y in zip(pa, pb))
# probabilities are printed to 6 decimals: within one unit of the last
assert all(abs(float(x[2]) - float(y[2])) <= 1.01e-6 for x, y in zip(pa, pb) if len(x) == 3)
print("worst step difference %.2g" % worst)
PYEOF
# ---- a BIO file: -DOCSTART-, entity metrics ---------------------------------------------------------
{ echo "-DOCSTART- -X- O"; echo
  for i in $(seq 1 40); do
    printf 'john B-PER\nsmith I-PER\nvisited O\nparis B-LOC\n\n'
    printf 'the O\nmayor O\nof O\nrome B-LOC\nspoke O\n\n'
  done; } > ner.txt
"$RP" finetune tag.ini --set train.run_dir="$tmp/ner" --set task.train_file="$tmp/ner.txt" \
  --set task.dev_file="$tmp/ner.txt" --set task.max_steps=40 > ner.out 2> ner.log
grep -q "ner.txt: 80 examples" ner.log && pass "-DOCSTART- lines skipped (80 examples)" || fail "DOCSTART" "$(grep examples ner.log | head -2)"
grep -q "entity precision" ner.out && grep -q '^tag_labels = B-LOC B-PER I-PER O$' ner/config.ini &&
  pass "a BIO label set gets entity precision / recall / F1" || fail "BIO metrics" "$(cat ner.out)"
# ---- bad inputs ------------------------------------------------------------------------------------
printf 'a 1\nb\n\n' > unlabelled.txt
expect_error "a training word without a label is refused, naming file and line" "unlabelled.txt:2: a word without a label" \
  "$RP" finetune tag.ini --set train.run_dir="$tmp/bad1" --set task.train_file="$tmp/unlabelled.txt"
printf '1 _\n? 7\n\n1 _\n? 1\n\n' > unknown.txt
"$RP" finetune tag.ini --set train.run_dir="$tmp/bad2" --set task.dev_file="$tmp/unknown.txt" --set task.max_steps=2 > bad2.out 2> bad2.log
grep -q "line 2: label '7' is not in the label set" bad2.log && grep -q "over 1 sequences" bad2.out &&
  pass "a dev label outside the label set: its example reported and skipped" || fail "unknown label" "$(tail -3 bad2.log)"
expect_error "model.vocab_size that is not the built vocabulary's size is refused" "has 8 tokens" \
  "$RP" finetune tag.ini --set train.run_dir="$tmp/bad3" --set model.vocab_size=50
expect_error "init_checkpoint = none for a GLUE task needs data.vocab" "key 'data.vocab'" \
  "$RP" finetune tag.ini --set train.run_dir="$tmp/bad4" --set task.type=classification
# ---- realpos synth on the command line -------------------------------------------------------------
"$RP" synth mqar --lengths 2-5 --count 3 --per-length --seed 4 --out m1.txt 2>/dev/null
"$RP" synth mqar --lengths 2-5 --count 3 --per-length --seed 4 --out m2.txt 2>/dev/null
cmp -s m1.txt m2.txt && [ "$(grep -c '^$' m1.txt)" = 12 ] && pass "synth: the same arguments write the same file; --per-length: 3 examples of each of 4 lengths" ||
  fail "synth determinism / per-length" "$(grep -c '^$' m1.txt) examples"
expect_error "synth: an unknown task is named with the known ones" "unknown task 'parity'" "$RP" synth parity --lengths 1-2 --count 1 --out x.txt
expect_error "synth: lengths A-B with B < A refused" "option '--lengths'" "$RP" synth reverse --lengths 5-2 --count 1 --out x.txt
expect_error "synth: binary_addition needs length >= 3" "3 <= A" "$RP" synth binary_addition --lengths 1-4 --count 1 --out x.txt
