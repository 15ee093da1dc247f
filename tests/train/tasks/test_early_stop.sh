#!/usr/bin/env bash
# The ablation protocol's run-level pieces (issue 49) on a tiny tagging model trained from scratch:
# `realpos synth lookup --distance D` (word i labelled with word i - D), the early stop
# (task.stop_accuracy at task.stop_patience dev evaluations in a row: an early_stop record whose
# learned_step is the first of them, the run's last checkpoint at the stop, a resume with nothing
# to do), task.test_file scored once after the last step and never steering the run (another test
# file leaves the dev curve and the checkpoint bit-identical), and the keys' refusals.
# Verdicts do not depend on when the stop comes, only on its bookkeeping being consistent.
source "$(dirname "$0")/../../lib.sh"
export OMP_NUM_THREADS=1
root=$PWD
cd "$tmp"

# ---- lookup ----
"$RP" synth lookup --distance 3 --lengths 6-12 --count 400 --seed 1 --out train.txt 2>/dev/null &&
  "$RP" synth lookup --distance 3 --lengths 6-16 --count 3 --per-length --seed 2 --out val.txt 2>/dev/null &&
  "$RP" synth lookup --distance 3 --lengths 6-16 --count 3 --per-length --seed 3 --out test.txt 2>/dev/null &&
  "$RP" synth lookup --distance 3 --lengths 6-16 --count 3 --per-length --seed 4 --out test2.txt 2>/dev/null ||
  { fail "realpos synth lookup writes its files"; exit 1; }
# every example: words 0..D-1 labelled _, word i >= D labelled with word i - D
"$PY" - train.txt <<'PY' && pass "lookup: word i is labelled with word i - 3, the first 3 unscored" || fail "lookup labels"
import sys
examples = open(sys.argv[1]).read().strip("\n").split("\n\n")
ok = len(examples) == 400
for ex in examples:
    words, labels = zip(*(line.split() for line in ex.split("\n")))
    ok &= 6 <= len(words) <= 12 and all(len(w) == 1 and "a" <= w <= "p" for w in words)
    ok &= all(labels[i] == ("_" if i < 3 else words[i - 3]) for i in range(len(words)))
sys.exit(0 if ok else 1)
PY
expect_error "lookup without --distance is refused, naming the option" "option '--distance'" \
  "$RP" synth lookup --lengths 6-8 --count 1 --out x.txt
expect_error "--distance on a task that takes none is refused" "applies to lookup only" \
  "$RP" synth reverse --distance 2 --lengths 1-3 --count 1 --out x.txt
expect_error "lookup lengths shorter than D + 1 are refused" "expected A-B with 4 <= A" \
  "$RP" synth lookup --distance 3 --lengths 2-8 --count 1 --out x.txt
[ ! -e x.txt ] && pass "a refused synth writes nothing" || fail "a refused synth writes nothing"

tiny_tagging_ini tag.ini model.hidden_size=32 model.num_layers=2 model.intermediate_size=64 model.relative_position=shaw \
  model.relative_k=4 train.run_dir="$tmp/run" train.threads=1 train.log_interval=50 task.train_file="$tmp/train.txt" \
  task.dev_file="$tmp/val.txt" task.test_file="$tmp/test.txt" task.max_seq_len=20 task.batch_size=16 task.max_steps=600 \
  task.epochs=1000 task.eval_every=10 task.stop_accuracy=0.3 task.stop_patience=2 task.lr=3e-3

# ---- the early stop ----
if "$RP" finetune tag.ini > out.txt 2> log.txt; then pass "a tagging run with an early stop and a test file"
else fail "a tagging run with an early stop and a test file" "$(tail -3 log.txt)"; fi
# The bookkeeping, recomputed from the dev records: the stop step S is the first step at which
# the last 2 evaluations are >= 0.3 within the training lengths, learned_step the first of them, the
# newest checkpoint is at S, the test file was scored once, after S, and no dev record follows S.
"$PY" - run/metrics.jsonl run/latest test.txt <<'PY' > check.txt 2>&1
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
dev = [r for r in recs if r.get("kind") == "task_eval" and r.get("step") is not None]
stops = [r for r in recs if r.get("kind") == "early_stop"]
tests = [r for r in recs if r.get("kind") == "task_test"]
assert len(stops) == 1, f"{len(stops)} early_stop records"
stop = stops[0]
curve = []
for r in dev:
    if not curve or curve[-1][0] != r["step"]:
        curve.append((r["step"], r["in_range"]["token_accuracy"]))
first = next(i for i in range(1, len(curve)) if curve[i - 1][1] >= 0.3 and curve[i][1] >= 0.3)
assert curve[first][0] == stop["step"] < 600, (curve[:first + 1], stop)
assert curve[first - 1][0] == stop["learned_step"], (curve[first - 1], stop)
assert stop["threshold"] == 0.3 or abs(stop["threshold"] - 0.3) < 1e-6 and stop["patience"] == 2
assert all(r["step"] <= stop["step"] for r in dev), "a dev evaluation after the stop"
assert len(tests) == 1 and tests[0]["data"].endswith(sys.argv[3]) and tests[0]["step"] == stop["step"], tests
assert open(sys.argv[2]).readline().strip() == "ckpt-%07d.h5" % stop["step"], open(sys.argv[2]).read()
print("stop", stop["step"], "learned", stop["learned_step"])
PY
if [ $? -eq 0 ]; then pass "the stop: learned_step the first of 2 evaluations >= 0.3, the last checkpoint and the test scoring at the stop ($(cat check.txt))"
else fail "the early stop's bookkeeping" "$(tail -3 check.txt)"; fi
"$PY" -c "
import sys; sys.path.insert(0, '$root/scripts'); import sweep_synth, json
r = sweep_synth.tagging_result('$tmp/run', {'task.stop_accuracy': '0.3', 'task.stop_patience': '2', 'task.max_steps': '600'})
stop = [json.loads(l) for l in open('$tmp/run/metrics.jsonl') if 'early_stop' in l][0]
assert r['learned_step'] == stop['learned_step'] == sweep_synth.learned_step(r['curve'], 0.3, 2), r['learned_step']
assert r['steps_run'] == stop['step'] and r['max_steps'] == 600 and 'test' in r and r['test']['in_range']
" 2> py.txt && pass "the sweep reads the same learned_step from the curve as the run recorded, and the test scores" ||
  fail "the sweep's reading of the run" "$(tail -3 py.txt)"
cp run/latest latest.before
if "$RP" finetune --resume run > resume.txt 2>&1 && grep -q "on reaching its goal (task.stop_accuracy): nothing to do" resume.txt &&
   cmp -s latest.before run/latest; then pass "resuming a run that stopped early has nothing to do"
else fail "resuming a run that stopped early" "$(tail -3 resume.txt)"; fi

# ---- the test file never steers the run ----
"$RP" finetune tag.ini --set train.run_dir="$tmp/run2" --set task.test_file="$tmp/test2.txt" > out2.txt 2> log2.txt ||
  fail "the run with another test file" "$(tail -3 log2.txt)"
"$PY" - run run2 <<'PY' > same.txt 2>&1
import json, sys, h5py, numpy as np
def dev(d):
    return [(r["kind"], r["step"], r.get("in_range"), r.get("beyond"), r.get("learned_step"))
            for r in map(json.loads, open(f"{d}/metrics.jsonl")) if r.get("kind") in ("task_eval", "early_stop")]
a, b = sys.argv[1], sys.argv[2]
assert dev(a) == dev(b), "dev curves differ"
ck = open(f"{a}/latest").readline().strip()
with h5py.File(f"{a}/{ck}", "r") as x, h5py.File(f"{b}/{ck}", "r") as y:
    names = []
    x.visit(lambda n: names.append(n) if isinstance(x[n], h5py.Dataset) and n.startswith("model/") else None)
    assert names and all(np.array_equal(x[n][()], y[n][()]) for n in names), "weights differ"
print(len(names), "weight datasets")
PY
if [ $? -eq 0 ]; then pass "another test file: the same dev curve, stop and weights, bit for bit ($(cat same.txt))"
else fail "the test file must not steer the run" "$(tail -3 same.txt)"; fi

# ---- refusals ----
expect_error "task.stop_accuracy without dev evaluations during training is refused, naming both keys" \
  "task.eval_every = 0" "$RP" finetune tag.ini --set task.eval_every=0 --set train.run_dir="$tmp/r3"
expect_error "task.stop_accuracy without a dev file is refused" "expected a task.dev_file to stop on" \
  "$RP" finetune tag.ini --set task.dev_file= --set train.run_dir="$tmp/r4"
expect_error "a missing test file is refused, naming the key" "key 'task.test_file'" \
  "$RP" finetune tag.ini --set task.test_file="$tmp/nonexistent.txt" --set train.run_dir="$tmp/r5"
[ ! -e "$tmp/r5" ] && pass "a refused test file: nothing written" || fail "a refused test file: nothing written" "$(ls "$tmp/r5")"
expect_error "task.stop_accuracy out of [0, 1] is refused" "stop_accuracy" \
  "$RP" config tag.ini --set task.stop_accuracy=1.5
