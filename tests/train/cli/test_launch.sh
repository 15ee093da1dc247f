#!/usr/bin/env bash
# What a launch says and refuses (issue 30): the warm-up of a shortened run (train.warmup_proportion,
# the README's `make pretrain PRETRAIN_ARGS="--set train.max_steps=20"`), keys a command does not
# read or that do not apply (refused from --set naming the key that does the job, warned from the
# file), the launch summary (--verbose for the whole configuration), warnings about a long warm-up,
# make pretrain run twice and with --overwrite (scripts/pretrain_default.sh), docs/finetune.md's
# unlabelled predict recipe, and the final dev line printed once.
source "$(dirname "$0")/../../lib.sh"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
has() { grep -qE -- "$2" "$1"; }
FX=tests/fixtures/finetune

# ---- the README's shortened main run: configs/pretrain.ini with --set train.max_steps=20 --------------
"$RP" config configs/pretrain.ini --set train.max_steps=20 >"$tmp/short.ini" 2>"$tmp/short.err"
check "configs/pretrain.ini --set train.max_steps=20 is accepted (warm-up 20% of the steps)" \
  bash -c "grep -qx 'warmup_proportion = 0.2' '$tmp/short.ini' && grep -qx 'max_steps = 20' '$tmp/short.ini'"
grep -q -- '--set train.warmup' .ci/run &&
  fail ".ci/run sets no warm-up of its own" "$(grep -n warmup .ci/run)" || pass ".ci/run sets no warm-up of its own"

# a tiny pretraining run: warmup_proportion 0.2 of 10 steps = 2 warm-up steps (lr/2, lr), then linear decay
synthetic_corpus "$tmp" 80 40 7
tiny_pretrain_ini "$tmp/p.ini" train.warmup_steps=0 train.warmup_proportion=0.2 train.max_steps=10 \
  train.eval_interval=10 train.checkpoint_interval=10 optim.lr=1e-3 train.run_dir="$tmp/p"
"$RP" prepare "$tmp/p.ini" >/dev/null 2>&1 || fail "prepare the tiny corpus"
"$RP" pretrain "$tmp/p.ini" >"$tmp/p.out" 2>"$tmp/p.err"
check "pretrain with warmup_proportion runs" test -s "$tmp/p/ckpt-0000010.h5"
check "the learning rate warms up over round(0.2 x 10) = 2 steps, then decays linearly" $PY - "$tmp/p/metrics.jsonl" <<'PY'
import json, sys
lr = {r["step"]: r["lr"] for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "train"}
want = {1: 5e-4, 2: 1e-3, 3: 1e-3, 4: 1e-3 * 7 / 8, 10: 1e-3 / 8}  # step s runs lr_schedule(s - 1)
sys.exit(0 if all(abs(lr[s] - v) < 1e-9 for s, v in want.items()) else 1)
PY
check "launch summary: model, positions, residual, data, steps, warm-up, run directory" bash -c "
  grep -qE '^pretraining: model 1 layers x 16 \(2 heads, feed-forward 32, post-LN\), positions absolute, residual attention no$' '$tmp/p.err' &&
  grep -qE '^  data shards of $tmp/shards, sequences of 32 tokens, 15% masked, batches unpadded \(data.padding = none\)$' '$tmp/p.err' &&
  grep -qE '^  10 steps of 1 x 4 sequences, lr 0.001, warm-up 2 steps, then linear decay to 0$' '$tmp/p.err' &&
  grep -qF '  run directory $tmp/p: config.ini (the whole configuration), metrics.jsonl, metrics.csv; --verbose prints them' '$tmp/p.err'"
check "no configuration dump without --verbose (it is RUN_DIR/config.ini)" \
  bash -c "! grep -qE '^# effective configuration|^\[model\]' '$tmp/p.err' && grep -qx 'warmup_proportion = 0.2' '$tmp/p/config.ini'"
"$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/pv" --verbose >/dev/null 2>"$tmp/pv.err"
check "--verbose prints the whole configuration" \
  bash -c "grep -qx '# effective configuration' '$tmp/pv.err' && grep -qx 'warmup_proportion = 0.2' '$tmp/pv.err'"

# ---- keys that a command does not read, or that do not apply --------------------------------------------
expect_error "pretrain refuses --set of a key fine-tuning reads, naming pretraining's" \
  "--set task.max_steps=3: key 'task.max_steps' would have no effect: pretraining does not read it (fine-tuning only; train.max_steps does the job); remove it or set train.max_steps" \
  "$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/x1" --set task.max_steps=3
expect_error "pretrain refuses relative_k without relative positions" \
  "--set model.relative_k=16: key 'model.relative_k' would have no effect: it needs model.relative_position = shaw | method1 | method2 | method3 | method4; model.relative_position is none (default); remove it" \
  "$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/x2" --set model.relative_k=16
expect_error "pretrain refuses warmup_steps beside warmup_proportion" \
  "--set train.warmup_steps=3: key 'train.warmup_steps' would have no effect: it needs train.warmup_proportion = 0; train.warmup_proportion is 0.2 ($tmp/p.ini:" \
  "$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/x3" --set train.warmup_steps=3
check "... and a refused launch leaves no run directory" bash -c "! test -e '$tmp/x1' && ! test -e '$tmp/x2' && ! test -e '$tmp/x3'"
"$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/x4" --set model.relative_position=method4 --set model.relative_k=4 \
  --set train.max_steps=2 >/dev/null 2>"$tmp/x4.err"
check "relative_k with method4 is taken (positions in the summary)" has "$tmp/x4.err" "positions absolute \+ method4 \(k = 4\)"

"$RP" init $FX/tiny.ini --out "$tmp/abs.h5" 2>/dev/null || fail "init the fine-tuning checkpoint"
ft=(--set task.glue_task=sst2 --set task.train_file=$FX/sst_train.tsv --set task.dev_file=$FX/sst_dev.tsv
    --set task.init_checkpoint="$tmp/abs.h5" --set task.max_seq_len=16 --set task.batch_size=8 --set train.threads=1)
expect_error "finetune refuses train.max_steps, naming task.max_steps (sweep.py's old example)" \
  "--set train.max_steps=100: key 'train.max_steps' would have no effect: fine-tuning does not read it (pretraining only; task.max_steps does the job); remove it or set task.max_steps" \
  "$RP" finetune /dev/null "${ft[@]}" --set train.run_dir="$tmp/f1" --set train.max_steps=100
expect_error "finetune --set train.max_steps=5: refused for itself, not for train.warmup_steps" \
  "--set train.max_steps=5: key 'train.max_steps' would have no effect" \
  "$RP" finetune /dev/null "${ft[@]}" --set train.run_dir="$tmp/f2" --set train.max_steps=5
expect_error "finetune refuses relative_k on an absolute-only model" \
  "--set model.relative_k=16: key 'model.relative_k' would have no effect: it needs model.relative_position = shaw | method1 | method2 | method3 | method4" \
  "$RP" finetune /dev/null "${ft[@]}" --set train.run_dir="$tmp/f3" --set model.relative_k=16
check "... and a refused fine-tuning leaves no run directory" bash -c "! test -e '$tmp/f1' && ! test -e '$tmp/f2' && ! test -e '$tmp/f3'"
printf '[train]\nmax_steps = 5\nlog_interval = 1000\n[data]\nmax_seq_len = 64\n' >"$tmp/ft.ini"
"$RP" finetune "$tmp/ft.ini" "${ft[@]}" --set task.max_steps=3 --set train.run_dir="$tmp/f4" >"$tmp/f4.out" 2>"$tmp/f4.err"
check "a fine-tuning file's [train] max_steps (default warm-up 100) runs: warmup_steps is not checked for fine-tuning" \
  test -s "$tmp/f4/model.h5"
check "... and each key of the file fine-tuning ignores is warned about, naming what does the job" bash -c "
  grep -qF \"warning: $tmp/ft.ini:2: key 'train.max_steps' has no effect: fine-tuning does not read it (pretraining only; task.max_steps does the job)\" '$tmp/f4.err' &&
  grep -qF \"warning: $tmp/ft.ini:5: key 'data.max_seq_len' has no effect: fine-tuning does not read it (pretraining only; task.max_seq_len does the job)\" '$tmp/f4.err' &&
  ! grep -q 'log_interval' '$tmp/f4.err'"

# ---- warm-up warnings ----------------------------------------------------------------------------------
"$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/w1" --set train.warmup_proportion=0.75 >/dev/null 2>"$tmp/w1.err"
check "a warm-up of 75% of the run is warned about" has "$tmp/w1.err" \
  "warning: the warm-up \(train.warmup_proportion = 0.75, --set train.warmup_proportion=0.75\) covers 80% of the run"
"$RP" finetune /dev/null "${ft[@]}" --set task.max_steps=4 --set task.warmup_proportion=1 --set train.run_dir="$tmp/w2" \
  >/dev/null 2>"$tmp/w2.err"
check "a fine-tuning warm-up over the whole run is warned about" has "$tmp/w2.err" \
  "warning: the warm-up \(task.warmup_proportion = 1, --set task.warmup_proportion=1\) covers the whole run"
check "no warning for the default 20% warm-up" bash -c "! grep -q 'the warm-up' '$tmp/p.err'"

# ---- fine-tuning output: the data line, dev lines during training, the final line once ---------------------
"$RP" finetune /dev/null "${ft[@]}" --set task.epochs=2 --set task.eval_every=10 --set train.log_interval=1000 \
  --set train.run_dir="$tmp/e" >"$tmp/e.out" 2>"$tmp/e.err"
check "the data line says how sequences are padded" has "$tmp/e.err" \
  "sst_train.tsv: 96 rows -> 96 sequences of at most 16 tokens \(task.max_seq_len; the longest has [0-9]+\), batches unpadded \(task.padding = none\)"
check "dev evaluations during training are logged with their step" \
  bash -c "[ \$(grep -c '^dev at step [12]0: $FX/sst_dev.tsv: accuracy' '$tmp/e.err') -eq 2 ]"
check "the final dev metrics line is printed once (standard output)" \
  bash -c "[ \$(grep -c 'sst_dev.tsv: accuracy' '$tmp/e.out') -eq 1 ] && [ \$(wc -l <'$tmp/e.out') -eq 1 ]"

# ---- docs/finetune.md: predict an unlabelled single-sentence file (GLUE's test.tsv layout) ------------------
awk -F'\t' 'NR == 1 { print "index\tsentence"; next } { print NR - 2 "\t" $1 }' $FX/sst_dev.tsv >"$tmp/test.tsv"
"$RP" predict configs/finetune-sst2.ini --checkpoint "$tmp/e/model.h5" --input "$tmp/test.tsv" --out "$tmp/test_predictions.tsv" \
  --set task.glue_task=none --set task.text_a_column=1 --set task.label_column=-1 >"$tmp/t.out" 2>"$tmp/t.err"
check "predict with glue_task = none, label_column = -1 on a single-sentence file (status $?)" \
  test -s "$tmp/test_predictions.tsv"
check "... its predictions are the dev predictions of the same sentences" \
  bash -c "cmp -s '$tmp/test_predictions.tsv' '$tmp/e/dev_predictions.tsv' || { cut -f2 '$tmp/test_predictions.tsv' | diff -q - <(cut -f2 '$tmp/e/dev_predictions.tsv') >/dev/null; }"
check "... and no metrics for an unlabelled file" bash -c "! grep -q accuracy '$tmp/t.out'"

# ---- make pretrain twice, and PRETRAIN_ARGS=--overwrite (scripts/pretrain_default.sh, as make runs it) --------
tiny_pretrain_ini "$tmp/m.ini" train.max_steps=2 train.run_dir="$tmp/m"
make -n pretrain PRETRAIN_ARGS=--overwrite 2>/dev/null | grep -qx 'bash scripts/pretrain_default.sh --overwrite' &&
  pass "make pretrain hands PRETRAIN_ARGS to scripts/pretrain_default.sh" || fail "make pretrain hands PRETRAIN_ARGS to the script"
PRETRAIN_CONFIG="$tmp/m.ini" bash scripts/pretrain_default.sh >"$tmp/m1.log" 2>&1
check "make pretrain: a first run trains, evaluates and plots" test -s "$tmp/m/ckpt-0000002.h5" -a -s "$tmp/m/curves.png"
PRETRAIN_CONFIG="$tmp/m.ini" bash scripts/pretrain_default.sh >"$tmp/m2.log" 2>&1
check "make pretrain again: the message names the command that trains again" \
  grep -qF "To train it again from scratch: make pretrain PRETRAIN_ARGS=--overwrite (moves $tmp/m aside" "$tmp/m2.log"
PRETRAIN_CONFIG="$tmp/m.ini" bash scripts/pretrain_default.sh --overwrite >"$tmp/m3.log" 2>&1
check "make pretrain PRETRAIN_ARGS=--overwrite trains again, the old run moved aside (status $?)" \
  bash -c "ls -d '$tmp'/m.replaced-* >/dev/null 2>&1 && test -s '$tmp/m/ckpt-0000002.h5' && grep -q 'moved the previous run' '$tmp/m3.log'"

# a run's config.ini lists every key: used as the config of another run, its keys at their defaults
# (all of [task] here) warn about nothing
"$RP" pretrain "$tmp/m/config.ini" --set train.run_dir="$tmp/c1" >/dev/null 2>"$tmp/c1.err"
check "a run's config.ini as the config: no warnings for keys at their defaults (status $?)" \
  bash -c "test -s '$tmp/c1/ckpt-0000002.h5' && ! grep -q 'has no effect' '$tmp/c1.err'"
