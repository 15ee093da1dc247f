#!/usr/bin/env bash
# scripts/sweep.py with [run] average_last: each point also averages its last N checkpoints and
# evaluates the average at data.max_seq_len and at every eval_seq_lens length; the report sets
# these next to the final checkpoint's held-out metrics; a sweep that did not ask for it before
# adds it to finished points without training them again; keep_last < N is an error up front.
source "$(dirname "$0")/../../lib.sh"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
root=$PWD
sweep() { "$PY" "$root/scripts/sweep.py" --realpos "$RP" "$@"; }

cp tests/fixtures/sweep/base.ini tests/fixtures/sweep/average.ini "$tmp/"
cd "$tmp"
{ printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n'; for i in $(seq 0 79); do echo "w$i"; done; } >vocab.txt
awk 'BEGIN { srand(5); for (d = 0; d < 40; d++) { for (s = 0; s < 6; s++) { line = "";
       for (w = 0; w < 8; w++) line = line (w ? " " : "") "w" int(rand() * rand() * 80); print line "." }
       print "" } }' >corpus.txt
"$RP" prepare base.ini >prepare.log 2>&1 || { fail "realpos prepare of the tiny corpus"; exit 1; }

# first without averaging, then the same sweep asking for it
grep -v '^average_last' average.ini >plain.ini
sweep plain.ini --jobs 1 --cores 1 >plain.log 2>&1
check "a sweep without average_last runs both points" test "$(grep -c ': done (' plain.log)" -eq 2
sweep average.ini --jobs 1 --cores 1 >average.log 2>&1
rc=$?
check "adding average_last: both points average and evaluate (status $rc)" \
  test $rc -eq 0 -a "$(grep -c ': done (' average.log)" -eq 2
check "... without pretraining them again" test "$(cat runs/average/*/pretrain.log | grep -c '^# exit status')" -eq 2
p=runs/average/seed=1
check "the averaged checkpoint holds the point's last two checkpoints (steps 30, 40)" "$PY" - "$p" <<'PY'
import h5py, sys
f = h5py.File(f"{sys.argv[1]}/average-last-2.h5", "r")
text = f.attrs["averaged_inputs"]
text = text.decode() if isinstance(text, bytes) else text
sys.exit(0 if [l.split("\t")[1] for l in text.splitlines()] == ["30", "40"] and "optimizer" not in f else 1)
PY
"$RP" eval base.ini --set model.relative_position=method4 --set model.relative_k=4 --set model.seed=1 \
  --checkpoint "$p/average-last-2.h5" --json avg-eval.json >avg-eval.out 2>/dev/null
"$RP" eval base.ini --set model.relative_position=method4 --set model.relative_k=4 --set model.seed=1 \
  --checkpoint "$p/ckpt-0000040.h5" --json final-eval.json >final-eval.out 2>/dev/null
check "results.csv: avg_eval_* = realpos eval of the average, eval_loss = realpos eval of the final checkpoint" \
  "$PY" - <<'PY'
import csv, json, math, re, sys
rows = {r["name"]: r for r in csv.DictReader(open("runs/average/results.csv"))}
r = rows["seed=1"]
def printed(path):
    m = re.search(r"mlm loss ([0-9.]+), accuracy ([0-9.]+)", open(path).read())
    return float(m.group(1)), float(m.group(2))
avg, final = printed("avg-eval.out"), printed("final-eval.out")
avg_json, final_json = json.load(open("avg-eval.json")), json.load(open("final-eval.json"))
ok = len(rows) == 2 and all(math.isfinite(float(x[c])) for x in rows.values()
                            for c in ("avg_eval_loss", "avg_eval_accuracy", "avg_eval_loss_len48", "eval_loss"))
# results.csv holds eval --json's numbers exactly; the printed line is them to 4 decimals
ok = ok and float(r["avg_eval_loss"]) == avg_json["loss"] and float(r["avg_eval_accuracy"]) == avg_json["accuracy"]
ok = ok and round(avg_json["loss"], 4) == avg[0] and round(final_json["loss"], 4) == final[0]
ok = ok and abs(float(r["eval_loss"]) - final_json["loss"]) < 1e-6 and float(r["avg_eval_loss"]) != float(r["eval_loss"])
sys.exit(0 if ok else 1)
PY
check "results.md sets the averaged columns next to the final checkpoint's" \
  grep -q 'held-out loss | held-out acc | held-out loss @48 | held-out acc @48 | held-out loss, avg last 2 | held-out acc, avg last 2 | held-out loss @48, avg last 2' \
  runs/average/results.md
sed 's/^average_last = 2/average_last = 3/; s|runs/average|runs/average3|' average.ini >three.ini
out=$(sweep three.ini 2>&1); rc=$?
check "average_last above train.keep_last is an error before anything runs" \
  bash -c '[ $0 -ne 0 ] && grep -q "average_last = 3 needs train.keep_last >= 3 checkpoints, point seed=1 keeps 2" <<<"$1" && [ ! -e runs/average3/seed=1 ]' "$rc" "$out"
