#!/usr/bin/env bash
# `realpos predict` writes scores, not only the arg-max: GLUE classification a prob_LABEL column per
# label (the softmax of the logits: rows sum to 1, the prediction is the most probable label),
# regression the value; SQuAD, beside predictions.json, nbest_predictions.json as run_squad.py
# writes it (per question the n best distinct texts, best first, with start/end logits and the
# softmax of start + end as probability; the first is the predicted answer). Checked in Python,
# independently of the C code's arithmetic.
source "$(dirname "$0")/../../lib.sh"
FX=tests/fixtures/finetune
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
"$RP" init $FX/tiny.ini --out "$tmp/abs.h5" 2>/dev/null || fail "init"
common=(--set train.threads=1 --set task.batch_size=8 --set task.lr=1e-3 --set train.log_interval=1000
        --set task.init_checkpoint="$tmp/abs.h5")
sst=(--set task.glue_task=sst2 --set task.train_file=$FX/sst_train.tsv --set task.dev_file=$FX/sst_dev.tsv
     --set task.max_seq_len=16)
"$RP" finetune /dev/null "${sst[@]}" "${common[@]}" --set task.epochs=10 --set train.run_dir="$tmp/sst" >/dev/null 2>&1 ||
  fail "fine-tune SST-2"
"$RP" predict /dev/null "${sst[@]}" "${common[@]}" --checkpoint "$tmp/sst" --input $FX/sst_dev.tsv \
  --out "$tmp/sst.tsv" >"$tmp/sst.out" 2>&1
head -n 3 "$tmp/sst.tsv" | sed 's/^/    /'
check "classification: prob_LABEL columns that sum to 1, the prediction the most probable label" $PY - "$tmp/sst.tsv" <<'PY'
import csv, math, sys
rows = list(csv.reader(open(sys.argv[1]), delimiter="\t"))
head, body = rows[0], rows[1:]
labels = [h[len("prob_"):] for h in head[2:]]
ok = head[:2] == ["index", "prediction"] and labels == ["0", "1"] and body
for r in body:
    p = [float(x) for x in r[2:]]
    ok = ok and len(p) == len(labels) and abs(sum(p) - 1) < 1e-6 and all(0 <= x <= 1 for x in p)
    ok = ok and r[1] == labels[max(range(len(p)), key=lambda c: p[c])]
sys.exit(not ok)
PY
check "... and a model at dev accuracy 1 is confident (every winning probability > 0.5)" $PY -c "
import csv, sys
rows = list(csv.reader(open('$tmp/sst.tsv'), delimiter='\t'))[1:]
sys.exit(not all(max(map(float, r[2:])) > 0.5 for r in rows))"
stsb=(--set task.glue_task=stsb --set task.train_file=$FX/scores.tsv --set task.dev_file=$FX/scores.tsv --set task.max_seq_len=32)
"$RP" finetune /dev/null "${stsb[@]}" "${common[@]}" --set task.epochs=1 --set train.run_dir="$tmp/stsb" >/dev/null 2>&1
"$RP" predict /dev/null "${stsb[@]}" "${common[@]}" --checkpoint "$tmp/stsb/model.h5" --input $FX/scores.tsv \
  --out "$tmp/stsb.tsv" >/dev/null 2>&1
check "regression: the value (index, prediction)" bash -c "head -n 1 '$tmp/stsb.tsv' | grep -qx \$'index\tprediction' &&
  [ \$(awk -F'\t' 'NR > 1 && NF == 2 && \$2 + 0 == \$2' '$tmp/stsb.tsv' | wc -l) -eq 12 ]"

squad=(--set task.type=squad --set task.train_file=$FX/squad_train.json --set task.dev_file=$FX/squad_dev.json
       --set task.max_seq_len=32 --set task.doc_stride=8 --set task.max_query_length=10 --set task.max_answer_length=5
       --set task.n_best_size=5)
"$RP" init $FX/tiny.ini --set model.absolute_position=no --set model.relative_position=method4 --set model.relative_k=4 \
  --out "$tmp/rel.h5" 2>/dev/null
"$RP" finetune /dev/null "${squad[@]}" "${common[@]}" --set task.init_checkpoint="$tmp/rel.h5" --set task.epochs=30 \
  --set train.run_dir="$tmp/squad" >/dev/null 2>&1 || fail "fine-tune SQuAD"
mkdir -p "$tmp/pred"
"$RP" predict /dev/null "${squad[@]}" "${common[@]}" --checkpoint "$tmp/squad/model.h5" --input $FX/squad_dev.json \
  --out "$tmp/pred/predictions.json" >"$tmp/squad.out" 2>"$tmp/squad.err"
check "SQuAD: predict names the n-best file it writes" grep -qF "written to $tmp/pred/nbest_predictions.json" "$tmp/squad.err"
check "SQuAD: nbest_predictions.json as run_squad.py writes it" $PY - "$tmp/pred" <<'PY'
import json, math, sys
pred = json.load(open(sys.argv[1] + "/predictions.json"))
nbest = json.load(open(sys.argv[1] + "/nbest_predictions.json"))
ok = sorted(pred) == sorted(nbest) and len(pred) == 6
for q, entries in nbest.items():
    scores = [e["start_logit"] + e["end_logit"] for e in entries]
    top = max(scores)
    z = sum(math.exp(s - top) for s in scores)
    ok = ok and 1 <= len(entries) <= 5 and entries[0]["text"] == pred[q]
    ok = ok and all(set(e) == {"text", "probability", "start_logit", "end_logit"} for e in entries)
    ok = ok and len({e["text"] for e in entries}) == len(entries) and scores == sorted(scores, reverse=True)
    ok = ok and all(abs(e["probability"] - math.exp(s - top) / z) < 1e-9 for e, s in zip(entries, scores))
first = next(iter(nbest))
print("    %s: %s" % (first, json.dumps(nbest[first][:2])))
sys.exit(not ok)
PY
check "SQuAD: fine-tuning writes the n best of its dev set too" test -s "$tmp/squad/nbest_predictions.json"
check "... the same as predict's" cmp -s "$tmp/squad/nbest_predictions.json" "$tmp/pred/nbest_predictions.json"
exit 0
