#!/usr/bin/env bash
# Fine-tuning longer than pretraining (Huang et al. fine-tune SQuAD at 576-704 tokens after
# pretraining at 512): a tiny relative-only model (method4, k = 4, pretrained length and
# model.max_position 32) fine-tunes and predicts SQuAD at task.max_seq_len 96 on windows that
# really hold more than 32 tokens, and predict reproduces its dev predictions; an absolute model
# grows its position table to 96 and does the same.
source "$(dirname "$0")/../../lib.sh"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
has() { grep -qE -- "$2" "$1"; }
FX=tests/fixtures/finetune

# The fixtures' SQuAD questions with each context preceded by the other article's context twice
# (about 60 words), so every answer sits past position 32.
"$PY" - "$FX" "$tmp" <<'PY'
import json, sys
fx, out = sys.argv[1:]
for split in ("train", "dev"):
    d = json.load(open(f"{fx}/squad_{split}.json"))
    contexts = [a["paragraphs"][0]["context"] for a in d["data"]]
    for i, a in enumerate(d["data"]):
        p = a["paragraphs"][0]
        filler = (contexts[1 - i] + " ") * 2
        p["context"] = filler + p["context"]
        for q in p["qas"]:
            for ans in q["answers"]:
                ans["answer_start"] += len(filler)
                assert p["context"][ans["answer_start"]:].startswith(ans["text"])
    json.dump(d, open(f"{out}/squad_{split}.json", "w"))
    with open(f"{out}/{split}_text.txt", "w") as f:
        for a in d["data"]:
            for q in a["paragraphs"][0]["qas"]:
                f.write(q["question"] + " " + a["paragraphs"][0]["context"] + "\n")
PY
longest=$("$RP" tokenize --vocab $FX/vocab.txt <"$tmp/dev_text.txt" | awk '{ if (NF > m) m = NF } END { print m }')
check "the long SQuAD examples hold more than 32 tokens ($longest + 3 specials)" test "${longest:-0}" -gt 48

"$RP" init $FX/tiny.ini --set model.absolute_position=no --set model.relative_position=method4 \
  --set model.relative_k=4 --out "$tmp/rel.h5" 2>/dev/null
"$RP" init $FX/tiny.ini --out "$tmp/abs.h5" 2>/dev/null
squad=(--set task.type=squad --set task.train_file=$tmp/squad_train.json --set task.dev_file=$tmp/squad_dev.json
       --set task.max_seq_len=96 --set task.doc_stride=32 --set task.max_query_length=10 --set task.max_answer_length=5
       --set task.batch_size=4 --set task.lr=1e-3 --set train.threads=1 --set train.log_interval=5)
for kind in rel abs; do
  "$RP" finetune /dev/null "${squad[@]}" --set task.init_checkpoint="$tmp/$kind.h5" --set task.epochs=20 \
    --set train.run_dir="$tmp/$kind" >"$tmp/$kind.out" 2>"$tmp/$kind.err"
  check "$kind: fine-tunes SQuAD at max_seq_len 96 (pretrained at 32, max_position 32)" \
    test $? -eq 0 -a -s "$tmp/$kind/model.h5"
  check "$kind: one window of 96 tokens per question" has "$tmp/$kind.err" "6 questions in 2 contexts -> 6 windows of 96 tokens"
  check "$kind: the training loss is finite and falls (first vs last log record)" "$PY" -c "
import json, sys
r = [json.loads(l) for l in open('$tmp/$kind/metrics.jsonl') if '\"train\"' in l]
sys.exit(not (len(r) >= 2 and r[-1]['loss'] < r[0]['loss']))"
  "$RP" predict /dev/null "${squad[@]}" --checkpoint "$tmp/$kind/model.h5" --input "$tmp/squad_dev.json" \
    --out "$tmp/$kind-pred.json" >"$tmp/$kind-pred.out" 2>&1
  check "$kind: predict at length 96 reproduces the fine-tuning run's predictions" \
    cmp -s "$tmp/$kind-pred.json" "$tmp/$kind/predictions.json"
done
check "rel: the log notes the longer sequences, and there is no position table" \
  bash -c "grep -q 'task.max_seq_len 96 is longer than the checkpoint.s pretraining sequences (32)' '$tmp/rel.err' &&
           test -s '$tmp/rel/parameters.txt' && ! grep -q position_embeddings '$tmp/rel/parameters.txt'"
check "abs: the position table grows from 32 to 96 rows" has "$tmp/abs/parameters.txt" \
  "^  grown +bert/embeddings/position_embeddings/weight +\[32, 32\] -> \[96, 32\]"
