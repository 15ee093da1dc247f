#!/usr/bin/env bash
# Dynamic padding end to end on the fixtures (tests/fixtures/finetune, tiny.ini: dropout 0): real
# fine-tuning runs with task.padding = longest (each batch padded to its longest sequence) and
# max_length (every batch to task.max_seq_len) log the same loss and gradient norm at every step and
# end with the same weights up to float summation order, and write the same dev predictions byte for
# byte: SST-2 layout (absolute positions), MRPC pairs (method4 + residual attention), STS-B
# regression, SQuAD (relative-only method4, several windows per context). task.group_by_length:
# SIGTERM + --resume is bit-identical to the uninterrupted run, and under `mpirun -np 2` it equals
# one process within the data-parallel tolerance. Bad combinations are refused.
#
# Tolerance: the two paddings add the same nonzero terms (a padded position is a masked key and its
# span logit is -inf, so it contributes exact zeros), in another order (softmax rows and GEMMs over
# more terms): ~1e-7 relative per step (tests/train/tasks/test_padding.c). AdamW carries such a
# difference along, dividing by sqrt(v) of tiny gradients too; over these 40-150 steps at lr 1e-3
# the weights stay within 1e-5 of each other (measured: 1.2e-7), while one step at another
# learning rate or one training example more moves them by ~1e-3. Except where the exact gradient
# is zero: the span head's bias (adding a constant to every start logit leaves the softmax as it is)
# and the last LayerNorm's bias under it (it shifts every logit alike); their gradients are
# rounding noise, which AdamW turns into steps of up to lr. SQuAD's comparison leaves those two out.
source "$(dirname "$0")/../../lib.sh"
FX=tests/fixtures/finetune
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }

"$RP" init $FX/tiny.ini --out "$tmp/abs.h5" 2>/dev/null || fail "init abs checkpoint"
"$RP" init $FX/tiny.ini --set model.absolute_position=no --set model.relative_position=method4 \
  --set model.relative_k=4 --out "$tmp/rel.h5" 2>/dev/null || fail "init rel checkpoint"
common=(--set train.threads=1 --set task.batch_size=8 --set task.lr=1e-3 --set train.log_interval=1)
sst=(--set task.glue_task=sst2 --set task.train_file=$FX/sst_train.tsv --set task.dev_file=$FX/sst_dev.tsv
     --set task.init_checkpoint="$tmp/abs.h5" --set task.max_seq_len=32 --set task.epochs=4)
mrpc=(--set task.glue_task=mrpc --set task.train_file=$FX/pairs.tsv --set task.dev_file=$FX/pairs.tsv
      --set task.init_checkpoint="$tmp/abs.h5" --set task.max_seq_len=32 --set task.epochs=30
      --set model.relative_position=method4 --set model.relative_k=4 --set model.residual_attention=yes)
stsb=(--set task.glue_task=stsb --set task.train_file=$FX/scores.tsv --set task.dev_file=$FX/scores.tsv
      --set task.init_checkpoint="$tmp/abs.h5" --set task.max_seq_len=32 --set task.epochs=30)
# the fixtures' sentences all have 7 words: sstvar cuts each to 1-7 (batches of mixed lengths, where
# the unpadded layout differs from the padded ones)
for f in sst_train sst_dev; do
  awk -F'\t' 'NR == 1 { print; next } { n = split($1, w, " "); k = 1 + (NR * 5) % n; s = w[1]
       for (i = 2; i <= k; i++) s = s " " w[i]; print s "\t" $2 }' $FX/$f.tsv >"$tmp/${f}_var.tsv"
done
sstvar=(--set task.glue_task=sst2 --set task.train_file=$tmp/sst_train_var.tsv --set task.dev_file=$tmp/sst_dev_var.tsv
        --set task.init_checkpoint="$tmp/rel.h5" --set task.max_seq_len=32 --set task.epochs=4
        --set model.relative_position=method4 --set model.relative_k=4 --set model.residual_attention=yes)
squad=(--set task.type=squad --set task.train_file=$FX/squad_train.json --set task.dev_file=$FX/squad_dev.json
       --set task.init_checkpoint="$tmp/rel.h5" --set task.max_seq_len=24 --set task.doc_stride=8
       --set task.max_query_length=10 --set task.max_answer_length=5 --set task.epochs=20 --set task.batch_size=2)

# compare RUN_A RUN_B [TENSOR...]: "steps S loss L grad_norm G weights W scale X" (max abs differences
# over the per-step train records and every model tensor but the TENSORs, and the largest |weight|);
# exit 1 on a mismatch of record count or tensor names.
compare() { $PY - "$@" <<'PY'
import json, sys, h5py, numpy as np
def records(run):
    return [json.loads(l) for l in open(run + "/metrics.jsonl") if '"kind":"train"' in l]
a, b = records(sys.argv[1]), records(sys.argv[2])
if not a or len(a) != len(b) or [r["step"] for r in a] != [r["step"] for r in b]:
    sys.exit(1)
loss = max(abs(x["loss"] - y["loss"]) for x, y in zip(a, b))
grad = max(abs(x["grad_norm"] - y["grad_norm"]) for x, y in zip(a, b))
ma, mb = h5py.File(sys.argv[1] + "/model.h5", "r")["model"], h5py.File(sys.argv[2] + "/model.h5", "r")["model"]
names = []
ma.visit(lambda n: names.append(n) if isinstance(ma[n], h5py.Dataset) else None)
if not names or any(n not in mb for n in names) or any(n not in names for n in sys.argv[3:]):
    sys.exit(1)
names = [n for n in names if n not in sys.argv[3:]]
weights = max(float(np.max(np.abs(ma[n][()].astype(np.float64) - mb[n][()]))) for n in names)
scale = max(float(np.max(np.abs(ma[n][()]))) for n in names)
print("steps %d loss %.2g grad_norm %.2g weights %.2g scale %.2g" % (len(a), loss, grad, weights, scale))
PY
}
# within RESULT TOL: every difference of a compare line at most TOL
within() { $PY -c "
import sys; f = '$1'.split(); d = dict(zip(f[::2], f[1::2]))
sys.exit(not (f and all(float(d[k]) <= $2 for k in ('loss', 'grad_norm', 'weights'))))"; }

# same_predictions A B: a SQuAD predictions.json byte for byte; a classification TSV's index and
# label columns byte for byte and its prob_LABEL columns within 1e-6 (the logits of two paddings
# differ in their last bits, printed with %.9g)
same_predictions() {
  case $2 in
    *.json) cmp -s "$1" "$2" ;;
    *) $PY - "$1" "$2" <<'PY'
import sys
a, b = [[l.split("\t") for l in open(f).read().splitlines()] for f in sys.argv[1:]]
same = len(a) == len(b) > 1 and a[0] == b[0] and all(x[:2] == y[:2] for x, y in zip(a, b))
sys.exit(not (same and all(abs(float(p) - float(q)) <= 1e-6 for x, y in zip(a[1:], b[1:]) for p, q in zip(x[2:], y[2:]))))
PY
  esac
}
for task in sst sstvar mrpc stsb squad; do
  declare -n args=$task
  for padding in longest max_length none; do
    "$RP" finetune /dev/null "${common[@]}" "${args[@]}" --set task.padding=$padding \
      --set train.run_dir="$tmp/$task-$padding" >"$tmp/$task-$padding.out" 2>"$tmp/$task-$padding.err" ||
      fail "$task, padding = $padding: finetune exits 0" "$(tail -n 3 "$tmp/$task-$padding.err")"
  done
  zero_gradient=(); [ $task = squad ] && zero_gradient=(qa_outputs/bias bert/encoder/layer/1/output/LayerNorm/bias)
  result=$(compare "$tmp/$task-longest" "$tmp/$task-max_length" "${zero_gradient[@]}")
  check "$task: padding = longest and max_length train alike (max |diff|: $result)" within "$result" 1e-5
  result=$(compare "$tmp/$task-longest" "$tmp/$task-none" "${zero_gradient[@]}")
  check "$task: padding = none (unpadded) and longest train alike (max |diff|: $result)" within "$result" 1e-5
  predictions=dev_predictions.tsv; [ $task = squad ] && predictions=predictions.json
  if [ $task = stsb ]; then # regression values are printed to the float's last digit (%.9g)
    check "$task: the same dev predictions within 1e-6 ($predictions)" $PY -c "
import sys
a, b = [[float(l.split()[1]) for l in open(f).read().splitlines()[1:]] for f in sys.argv[1:]]
sys.exit(not (len(a) == len(b) == 12 and max(abs(x - y) for x, y in zip(a, b)) <= 1e-6))" \
      "$tmp/$task-longest/$predictions" "$tmp/$task-max_length/$predictions"
  else
    for padding in max_length none; do
      check "$task: $padding: the same dev predictions byte for byte, probabilities within 1e-6 ($predictions)" \
        same_predictions "$tmp/$task-longest/$predictions" "$tmp/$task-$padding/$predictions"
    done
  fi
  # predict from one checkpoint, padded either way
  "$RP" predict /dev/null "${common[@]}" "${args[@]}" --set task.padding=max_length \
    --checkpoint "$tmp/$task-longest/model.h5" --input "$(grep -o 'dev_file=[^ ]*' <<<"${args[*]}" | cut -d= -f2)" \
    --out "$tmp/$task-full.pred" >/dev/null 2>&1
  check "$task: predict padded to max_seq_len = finetune's predictions padded to the longest (probabilities within 1e-6)" \
    same_predictions "$tmp/$task-full.pred" "$tmp/$task-longest/$predictions"
  "$RP" predict /dev/null "${common[@]}" "${args[@]}" --set task.padding=none \
    --checkpoint "$tmp/$task-longest/model.h5" --input "$(grep -o 'dev_file=[^ ]*' <<<"${args[*]}" | cut -d= -f2)" \
    --out "$tmp/$task-none.pred" >/dev/null 2>&1
  check "$task: predict unpadded = finetune's predictions padded to the longest (probabilities within 1e-6)" \
    same_predictions "$tmp/$task-none.pred" "$tmp/$task-longest/$predictions"
done
check "the fixtures' batches are shorter than max_seq_len (so the comparison means something)" $PY -c "
import sys
lens = [len(l.split('\t')[0].split()) + 2 for l in open('$FX/sst_train.tsv').read().splitlines()[1:]]
sys.exit(not max(lens) < 32 // 2)"

# ---- group_by_length: resume, data parallel -----------------------------------------------------------
same_model() { $PY - "$1" "$2" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r")["model"], h5py.File(sys.argv[2], "r")["model"]
names = []
a.visit(lambda n: names.append(n) if isinstance(a[n], h5py.Dataset) else None)
sys.exit(not (names and all(n in b and np.array_equal(a[n][()], b[n][()]) for n in names)))
PY
}
grouped=("${sst[@]}" "${common[@]}" --set task.group_by_length=yes --set task.epochs=12 --set task.batch_size=4
         --set train.log_interval=10 --set train.checkpoint_interval=100000)
"$RP" finetune /dev/null "${grouped[@]}" --set train.run_dir="$tmp/gA" >/dev/null 2>"$tmp/gA.err"
check "group_by_length run finishes" test -s "$tmp/gA/model.h5"
"$RP" finetune /dev/null "${sst[@]}" "${common[@]}" --set task.epochs=12 --set task.batch_size=4 \
  --set train.log_interval=10 --set train.run_dir="$tmp/gU" >/dev/null 2>&1
check "group_by_length draws other batches than the default order (other weights)" \
  bash -c "! cmp -s '$tmp/gA/model.h5' '$tmp/gU/model.h5'"
# SIGTERM after step 100 (raised by the run itself: the same step on any host); update 101 sees it
REALPOS_TEST_SIGNAL_AT_STEP=TERM:100 "$RP" finetune /dev/null "${grouped[@]}" --set train.run_dir="$tmp/gB" \
  >/dev/null 2>"$tmp/gB1.err"; rc=$?
check "group_by_length: SIGTERM mid-run saves the checkpoint of step 101 (status $rc)" \
  bash -c "[ $rc -eq 0 ] && [ \"\$(head -n 1 '$tmp/gB/latest')\" = ckpt-0000101.h5 ] && ! test -e '$tmp/gB/model.h5'"
"$RP" finetune /dev/null "${grouped[@]}" --set train.run_dir="$tmp/gB" --resume "$tmp/gB/latest" \
  >/dev/null 2>"$tmp/gB2.err"
check "group_by_length: SIGTERM + --resume (at step $(grep -o 'at step [0-9]*' "$tmp/gB2.err" | head -1 | cut -d' ' -f3)) \
is bit-identical to the uninterrupted run" same_model "$tmp/gA/model.h5" "$tmp/gB/model.h5"
check "group_by_length: same dev predictions after the resume" \
  cmp -s "$tmp/gA/dev_predictions.tsv" "$tmp/gB/dev_predictions.tsv"

if command -v mpirun >/dev/null 2>&1; then
  dp=("${sst[@]}" "${common[@]}" --set task.group_by_length=yes --set task.batch_size=4
      --set train.grad_accum_steps=2 --set task.max_steps=30 --set train.log_interval=5)
  OMP_NUM_THREADS=1 mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS -np 2 \
    "$RP" finetune /dev/null "${dp[@]}" --set train.run_dir="$tmp/dp2" >"$tmp/dp2.log" 2>&1
  "$RP" finetune /dev/null "${dp[@]}" --set train.run_dir="$tmp/dp1" >"$tmp/dp1.log" 2>&1
  result=$(compare "$tmp/dp1" "$tmp/dp2")
  check "group_by_length under mpirun -np 2 (2 micro-batches a step, one per rank) = one process ($result)" \
    within "$result" 1e-4
else
  echo "SKIP group_by_length under mpirun: mpirun not found (Debian: openmpi-bin)"
fi

expect_error "group_by_length = yes with padding = max_length is refused, naming the key" \
  "key 'task.group_by_length': expected no with task.padding = max_length" \
  "$RP" config /dev/null --set task.group_by_length=yes --set task.padding=max_length
expect_error "task.padding takes longest or max_length" "task.padding" \
  "$RP" config /dev/null --set task.padding=shortest
