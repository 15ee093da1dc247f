#!/usr/bin/env bash
# scripts/sweep.py with a [synth] section on tiny points: the task is a grid key of its own, the
# data files are written once by realpos synth, each point is a from-scratch tagging run whose
# per-length scores reach results.csv / results.md and the figures (accuracy by test length with
# error bars over seeds, the k curve); a finished sweep is skipped on a rerun; bad [synth] keys fail
# before anything runs.
source "$(dirname "$0")/../../lib.sh"
root=$PWD
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
sweep() { "$PY" "$root/scripts/sweep.py" --realpos "$root/realpos" "$@"; }
cd "$tmp"
tiny_tagging_ini base.ini task.train_file=unused task.max_seq_len=40 task.max_steps=10
cat > suite.ini <<INI
[sweep]
base = base.ini
out = out
[synth]
tasks = reverse mqar
train_lengths = 1-4
train_count = 80
test_lengths = 1-8
test_count = 2
seed = 3
[grid]
model.seed = 1 2
model.relative_k = 2 8
INI
sweep suite.ini --list > list.txt 2>&1
check "8 points: 2 tasks x 2 seeds x 2 k" grep -qx '8 points' list.txt
check "points are named by their task" grep -q 'task=mqar,seed=1,relative_k=2' list.txt
check "--list predicts the cost on this machine: a calibrated rate per task and the sweep's bound" \
  grep -qE "^cost: 8 points at most [0-9]+:[0-9]{2}:[0-9]{2} of [0-9]+-thread processes" list.txt
check "... a rate per task, from its own calibration run" test "$(grep -cE '^cost: (reverse|mqar): [0-9,]+ training tokens/s' list.txt)" = 2
check "... and --list wrote no point's run directory" test ! -e out/task=mqar,seed=1,relative_k=2
# a loaded host: the calibration's share of its threads' time scales its rate to an unloaded one
share() { PYTHONPATH="$root/scripts" "$PY" -c "import sweep_cost; print(sweep_cost.cpu_share($1))"; }
check "a calibration that got half its one thread's time ran at half the unloaded rate" test "$(share 1.0,2.0,1)" = 0.5
check "... a quarter of two threads' time" test "$(share 1.0,2.0,2)" = 0.25
check "... more CPU than its threads (helpers) or no measurable time counts as unloaded" \
  test "$(share 3.0,1.0,2) $(share 0.0,1.0,1) $(share 1.0,0.0,1)" = "1.0 1.0 1.0"
sweep suite.ini --jobs 2 > sweep.log 2>&1
check "the sweep runs every point" grep -q "sweep: 8 points, 0 already done; running 8" sweep.log
check "each finished point reports the run's progress and the time the rest takes at its rate" \
  grep -qE "^sweep: 1 of 8 points of this run done in 0:[0-9]{2}:[0-9]{2}; the other 7 take about [0-9]+:[0-9]{2}:[0-9]{2} more" sweep.log
check "... and the last one the whole run's time" grep -qE "^sweep: 8 of 8 points of this run done in [0-9:]+$" sweep.log
check "realpos synth wrote the data once per task" test -s out/data/reverse-train.txt -a -s out/data/mqar-test.txt
rows=$(tail -n +2 out/results.csv | awk -F, '$NF != ""' | wc -l)
check "results.csv: 8 scored rows" test "$rows" = 8
$PY - out/results.csv <<'PYEOF' && pass "results.csv: accuracies in [0, 1], training lengths 8 (reverse) and 12 (mqar) words" || fail "results.csv values"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert all(0 <= float(r["in_range_accuracy"]) <= 1 and 0 <= float(r["beyond_accuracy"]) <= 1 for r in rows)
assert {r["synth.task"]: int(r["train_max_length"]) for r in rows} == {"reverse": 8, "mqar": 12}
PYEOF
check "results.md: mean ± std with n = 2 seeds" grep -q '| reverse | 2 | .* | 2 |$' out/results.md
$PY - "$root/scripts" out/results.csv out/results.md <<'PYEOF' && pass "results.md: the learned column counts the runs at >= 0.95 within the training lengths" || fail "the learned column"
import csv, sys
sys.path.insert(0, sys.argv[1])
from sweep_report_synth import learned_count
assert learned_count([0.95, 0.9499, None, 1.0]) == (2, 3), learned_count([0.95, 0.9499, None, 1.0])
assert learned_count([None]) == (0, 0)
rows = list(csv.DictReader(open(sys.argv[2])))
table = [l.split("|")[1:-1] for l in open(sys.argv[3]) if l.startswith("| reverse ") or l.startswith("| mqar ")]
assert len(table) == 4, table
for cells in table:
    task, k = cells[0].strip(), cells[1].strip()
    runs = [float(r["in_range_accuracy"]) for r in rows if r["synth.task"] == task and r["model.relative_k"] == k]
    want = f"{sum(v >= 0.95 for v in runs)} of {len(runs)}"
    assert cells[-2].strip() == want, (cells, want)
PYEOF
check "figures: accuracy by test length and the k curve per task" \
  test -s out/by_length-reverse.png -a -s out/by_length-mqar.png -a -s out/k_curve-reverse.png
sweep suite.ini > rerun.log 2>&1
check "a rerun finds every point done" grep -q "8 already done; running 0" rerun.log
sed 's/^seed = 3/sed = 3/' suite.ini > bad.ini
expect_error "an unknown [synth] key fails before anything runs" "[synth] has unknown key 'sed'" sweep bad.ini --list
