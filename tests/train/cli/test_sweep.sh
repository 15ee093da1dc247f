#!/usr/bin/env bash
# scripts/sweep.py on tiny points (tests/fixtures/sweep): grid expansion with exclusions and
# derived settings, the errors raised before anything runs, a real sweep with --jobs 2 (never more
# than two runs at once), its report, skipping finished points, and a killed point resumed from
# its checkpoint to the same weights as an uninterrupted run.
source "$(dirname "$0")/../../lib.sh"
root=$PWD
work=$tmp
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
sweep() { "$PY" "$root/scripts/sweep.py" --realpos "$root/realpos" "$@"; }

cp tests/fixtures/sweep/*.ini "$work/"
cd "$work"
{ printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n'; for i in $(seq 0 79); do echo "w$i"; done; } >vocab.txt
awk 'BEGIN { srand(7); for (d = 0; d < 60; d++) { ns = 4 + int(rand() * 9);
       for (s = 0; s < ns; s++) { n = 3 + int(rand() * 10); line = "";
         for (w = 0; w < n; w++) { z = int(rand() * rand() * 80); line = line (w ? " " : "") "w" z }
         print line "." }
       print "" } }' >corpus.txt
"$root/realpos" prepare base.ini >prepare.log 2>&1 || { fail "realpos prepare of the tiny corpus"; cat prepare.log; exit 1; }

# ---- expansion -------------------------------------------------------------------------------
sweep grid.ini --list >list.txt 2>&1
check "grid: 36 combinations minus exclusions = 20 points" grep -qx '20 points' list.txt
names() { awk '$1 == "new" { print $2 }' list.txt; }
check "grid: absolute points are named without relative_k (it does not apply)" \
  test "$(names | grep -c '^relative_position=none,residual_attention=[a-z]*,seed=[12]$')" -eq 4
check "grid: shaw keeps only k = 4" test "$(names | grep '^relative_position=shaw' | grep -c 'relative_k=4,')" -eq 4 -a \
  "$(names | grep -c '^relative_position=shaw')" -eq 4
check "grid: method4 at every k, residual and seed" test "$(names | grep -c '^relative_position=method4,')" -eq 12
check "grid: every point is distinct" test "$(names | sort -u | wc -l)" -eq 20
check "derive: absolute_position=yes exactly for relative_position=none" \
  test "$(grep -c 'model.absolute_position=yes' list.txt)" -eq 4 -a \
  "$(grep 'model.absolute_position=yes' list.txt | grep -vc 'model.relative_position=none')" -eq 0
check "set: [set] overrides reach every point" test "$(grep -c 'train.max_steps=40' list.txt)" -eq 20

# ---- errors before anything runs ---------------------------------------------------------------
expect_error() {  # name sweep-file pattern
  local out rc
  out=$(sweep "$2" 2>&1); rc=$?
  if [ $rc -ne 0 ] && grep -q -- "$3" <<<"$out" && [ ! -e runs/dup ] && [ ! -e runs/bad ] && [ ! -e runs/empty ]; then
    pass "$1"
  else
    fail "$1 (status $rc, nothing run expected): $out"
  fi
}
expect_error "error: a duplicate value in the grid" dup-value.ini "duplicate point: grid key 'model.seed' lists a value twice"
expect_error "error: points that differ only in a key that does not apply" dup-ignored.ini \
  "duplicate point: relative_position=none,relative_k=4 and relative_position=none,relative_k=8 are the same run"
expect_error "error: an override key that does not exist" bad-key.ini "key 'model.relative_kk': did you mean 'model.relative_k'? expected one of"
expect_error "error: an exclusion with a value not in the grid" bad-exclude.ini "model.relative_k=16 is not one of the grid's values"
expect_error "error: a grid that leaves zero points" empty.ini "zero points"
expect_error "error: a finetune_set key fine-tuning does not read, before anything runs" bad-finetune-set.ini \
  "finetune_set: realpos: error: --set train.max_steps=100: key 'train.max_steps' would have no effect: fine-tuning does not read it (pretraining only; task.max_steps does the job)"

# ---- a real sweep, two at a time ------------------------------------------------------------------
# A wrapper around realpos counts the pretraining runs alive at once.
echo 0 >running; echo 0 >max_running
cat >counting-realpos <<SH
#!/usr/bin/env bash
if [ "\$1" = pretrain ]; then
  (flock 9; n=\$((\$(cat $work/running) + 1)); echo \$n >$work/running
   [ \$n -gt \$(cat $work/max_running) ] && echo \$n >$work/max_running) 9>$work/count.lock
  "$root/realpos" "\$@"; rc=\$?
  (flock 9; echo \$((\$(cat $work/running) - 1)) >$work/running) 9>$work/count.lock
  exit \$rc
fi
exec "$root/realpos" "\$@"
SH
chmod +x counting-realpos
"$PY" "$root/scripts/sweep.py" run.ini --realpos ./counting-realpos --jobs 2 --cores 2 >run1.log 2>&1
rc=$?
check "sweep: 6 points run with --jobs 2 (status $rc)" test $rc -eq 0 -a "$(grep -c ': done (' run1.log)" -eq 6
check "sweep: never more than 2 runs at once, and 2 did overlap" test "$(cat max_running)" -eq 2
check "sweep: --jobs 2 on 2 cores gives each run 1 thread" \
  grep -qx 'threads = 1' "runs/run/relative_position=method4,relative_k=8,seed=2/config.ini"
check "report: results.csv has a header and 6 finished rows" \
  test "$(wc -l <runs/run/results.csv)" -eq 7 -a "$(grep -c ',done,40,' runs/run/results.csv)" -eq 6
check "report: results.csv holds held-out loss and the length-48 evaluation" "$PY" - <<'PY'
import csv, math, sys
rows = list(csv.DictReader(open("runs/run/results.csv")))
ok = all(math.isfinite(float(r[c])) and float(r[c]) > 0 for r in rows
         for c in ("final_train_loss", "eval_loss", "eval_loss_len48", "tokens_per_s", "wall_s"))
sys.exit(0 if ok and len(rows) == 6 else 1)
PY
check "report: results.md groups the 2 seeds of each setting (n = 2, mean ± std)" \
  test "$(grep -c '^| method4 | [48] | 2 | [0-9.]* ± ' runs/run/results.md)" -eq 2 -a \
  "$(grep -c '^| none | - | 2 | ' runs/run/results.md)" -eq 1
check "report: results.md means are the means of results.csv" "$PY" - <<'PY'
import csv, statistics, sys
rows = [r for r in csv.DictReader(open("runs/run/results.csv")) if r["model.relative_position"] == "method4"
        and r["model.relative_k"] == "8"]
mean = statistics.mean(float(r["eval_loss"]) for r in rows)
line = next(l for l in open("runs/run/results.md") if l.startswith("| method4 | 8 |"))
sys.exit(0 if line.split("|")[5].strip().startswith(f"{mean:.4f} ± ") else 1)
PY
check "report: figures are written" test -s runs/run/heldout_vs_k.png -a -s runs/run/loss_curves.png

sweep run.ini --jobs 2 --cores 2 >run2.log 2>&1
check "rerun: finished points are skipped" grep -q '6 already done; running 0' run2.log
check "rerun: no point was trained again" test "$(cat runs/run/*/pretrain.log | grep -c '^# exit status')" -eq 6
rm runs/run/results.md
sweep run.ini --report >report.log 2>&1
check "--report rewrites the report without running" test -s runs/run/results.md -a "$(grep -c ': pretrain' report.log)" -eq 0
check "results.csv keeps realpos eval's full precision (the --json numbers, not the 4 printed digits)" "$PY" - <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open("runs/run/results.csv")))
ok = len(rows) == 6
for r in rows:
    rec = json.load(open(f"runs/run/{r['name']}/eval_len_48.json"))
    ok = ok and float(r["eval_loss_len48"]) == rec["loss"] and len(r["eval_loss_len48"].split(".")[1]) > 4
sys.exit(0 if ok else 1)
PY
check "the absolute points' runs get no --set of relative_k (it does not apply; realpos would refuse it)" \
  bash -c "! grep -h '^# .* pretrain ' runs/run/relative_position=none*/pretrain.log | grep -q relative_k"
"$PY" "$root/scripts/sweep_report.py" --help >report_help.txt 2>&1
check "sweep_report.py --help prints its usage" grep -q '^usage: sweep_report.py .*sweep' report_help.txt
rm runs/run/results.md
(cd "$work" && "$PY" "$root/scripts/sweep_report.py" run.ini --realpos "$root/realpos" >report2.log 2>&1)
check "sweep_report.py SWEEP.ini writes the report" test -s runs/run/results.md

# ---- fine-tuning from each point's checkpoint ------------------------------------------------------
for split in train:40:3 dev:20:4; do  # label 1 sentences use words w0-w39, label 0 words w40-w79
  awk -v n="${split#*:}" 'BEGIN { split(n, a, ":"); srand(a[2]); print "sentence\tlabel"
    for (i = 0; i < a[1]; i++) { y = i % 2; line = ""
      for (w = 0; w < 6; w++) line = line (w ? " " : "") "w" (y ? int(rand() * 40) : 40 + int(rand() * 40))
      print line "\t" y } }' >"${split%%:*}.tsv"
done
sweep with-finetune.ini --jobs 1 --cores 1 >finetune.log 2>&1
rc=$?
check "finetune: both points pretrain then fine-tune (status $rc)" test $rc -eq 0 -a "$(grep -c ': finetune ' finetune.log)" -eq 2
check "finetune: it starts from the point's final checkpoint" \
  grep -qx 'init_checkpoint = runs/finetune/residual_attention=yes/ckpt-0000040.h5' \
  runs/finetune/residual_attention=yes/finetune/config.ini
check "finetune: results.csv holds the dev accuracy of its task_eval record" "$PY" - <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open("runs/finetune/results.csv")))
ok = len(rows) == 2
for r in rows:
    recs = [json.loads(l) for l in open(f"runs/finetune/{r['name']}/finetune/metrics.jsonl")]
    dev = [x["accuracy"] for x in recs if x.get("kind") == "task_eval"]
    ok = ok and len(dev) == 1 and float(r["finetune_accuracy"]) == dev[0]
sys.exit(0 if ok else 1)
PY
check "finetune: results.md names the fine-tuning metric (dev accuracy)" \
  grep -q '| fine-tuning dev accuracy |' runs/finetune/results.md

# ---- a killed point resumes ----------------------------------------------------------------------
# Every `realpos pretrain` the sweep starts SIGKILLs itself right after its checkpoint of step 20
# (REALPOS_TEST_SIGNAL_AT_STEP, train/loop/run.c: the same step on any host); the sweep reports the
# points failed, and a rerun resumes them.
point=runs/resume/seed=1
REALPOS_TEST_SIGNAL_AT_STEP=KILL:20 "$PY" "$root/scripts/sweep.py" --realpos "$root/realpos" resume.ini --jobs 1 \
  >resume1.log 2>&1; rc=$?
check "kill: the sweep reports the killed points (status $rc)" \
  bash -c "[ $rc -ne 0 ] && [ \$(grep -c 'pretrain failed with status -9' resume1.log) -eq 2 ]"
check "kill: the point was killed part-way (latest names step 20, no checkpoint of step 100)" \
  bash -c "[ \"\$(head -n 1 '$point/latest')\" = ckpt-0000020.h5 ] && ! test -e '$point/ckpt-0000100.h5'"
sweep resume.ini --jobs 1 >resume2.log 2>&1
check "kill: the rerun resumes the killed point from its checkpoint" \
  grep -q "resumed from $point/ckpt-0000020.h5 at step 20" "$point/pretrain.log"
check "kill: both points finish" test "$(grep -c ': done (' resume2.log)" -eq 2
"$root/realpos" pretrain base.ini --set train.max_steps=100 --set model.relative_position=method4 --set model.seed=1 \
  --set train.run_dir=uninterrupted --set train.threads=1 >uninterrupted.log 2>&1
check "kill: the resumed run ends with the weights of an uninterrupted one" "$PY" - <<'PY'
import h5py, numpy as np, sys
a = h5py.File("runs/resume/seed=1/ckpt-0000100.h5", "r")
b = h5py.File("uninterrupted/ckpt-0000100.h5", "r")
names = []
a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) and n.startswith("model/") else None)
sys.exit(0 if names and all(np.array_equal(a[n][()], b[n][()]) for n in names) else 1)
PY
