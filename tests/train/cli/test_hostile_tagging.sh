#!/usr/bin/env bash
# Hostile inputs, round 6 (issue 48): tagging files, training from scratch, environment overrides
# and refused starts, averaging and transferring classifiers. Each case ends in a message naming
# the file, line, key or value with a non-zero exit, or in a correct result; nothing is written into
# a run directory before the run is accepted. Commands run under `timeout` so a hang is a failure.
source "$(dirname "$0")/../../lib.sh"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
expect_ok() { # NAME PATTERN COMMAND...: exit 0 and PATTERN (fixed string) in the output
  local name=$1 pattern=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq 0 ] && grep -qF -- "$pattern" <<<"$out"; then pass "$name"
  else fail "$name" "status $rc: $(head -c 400 <<<"$out")"; fi
}
T="timeout 120"
export OMP_NUM_THREADS=1 REALPOS_PEAK_GFLOPS=10
unset REALPOS_BF16_EMULATE REALPOS_NO_BF16 REALPOS_PEAK_CACHE REALPOS_TEST_SIGNAL_AT_STEP
cd "$tmp"
tiny_tagging_ini tag.ini model.relative_k=8 train.threads=1 train.log_interval=50 task.batch_size=4 task.max_steps=0 \
  task.epochs=1 task.lr=2e-3
ft() { $T "$RP" finetune tag.ini "$@"; } # ft --set ...: a tiny tagging run from scratch

# ---- CoNLL lines: the last field is the label, however many feature columns come between ----------
"$PY" -c "
for i in range(6):
    print(' '.join(['w%d' % i] + ['f%d' % j for j in range(68)] + ['L%d' % (i % 2)])); print()" > wide.txt
ft --set task.train_file="$tmp/wide.txt" --set train.run_dir="$tmp/wide" > wide.out 2>&1
check "70 fields per line (68 feature columns): the label set is the last column's (L0 L1), not a middle one's" \
  grep -qx 'tag_labels = L0 L1' wide/config.ini
printf 'a X\nb Y\n\n\0c X\n\n' > nul.txt
expect_error "a NUL byte in a tagging file is refused at its line (the rest would go unread)" \
  "nul.txt:4: expected text, got a NUL byte" ft --set task.train_file="$tmp/nul.txt" --set train.run_dir="$tmp/nul"
long=$(printf 'L%.0s' $(seq 1 40))
printf 'a X\nb %s\n\n' "$long" > longlabel.txt
expect_error "a label longer than 31 bytes is refused at its file and line" \
  "longlabel.txt:2: label '$long' is longer than 31 bytes" ft --set task.train_file="$tmp/longlabel.txt" --set train.run_dir="$tmp/ll"
check "... and nothing is left in its run directory" test ! -e "$tmp/ll/config.ini"

# ---- labels the INI syntax cannot hold: stored as %XX, read back by predict ---------------------------
# Penn Treebank tags hold '#' and ':', Universal Dependencies features '=', and '%' is the escape.
for i in 1 2 3; do printf 'a NN\nb :\nc #\nd VB=x\ne ;\nf %%\ng %%41\nh Case=Nom|Num=Sing\n\n'; done > punct.txt
ft --set task.train_file="$tmp/punct.txt" --set task.dev_file="$tmp/punct.txt" --set train.run_dir="$tmp/punct" \
  > punct.out 2>&1
check "labels with ';' '#' '=' ':' '%' train; task.tag_labels holds them as %XX" \
  grep -qx 'tag_labels = %23 %25 %2541 %3A %3B Case%3DNom|Num%3DSing NN VB%3Dx' punct/config.ini
$T "$RP" predict tag.ini --checkpoint punct/model.h5 --input punct.txt --out punct.tsv > predict.out 2>&1
check "predict reads the run's own model.h5 and reproduces its dev predictions" cmp -s punct.tsv punct/dev_predictions.tsv
check "... writing the labels as the file has them" "$PY" -c "
labels = {l.split('\t')[1] for l in open('punct.tsv') if '\t' in l}
assert labels and labels <= {'NN', ':', '#', 'VB=x', ';', '%', '%41', 'Case=Nom|Num=Sing'}, labels"
$T "$RP" export-hf punct/model.h5 --out hf > /dev/null 2>&1
check "export-hf: id2label holds the labels themselves" \
  "$PY" -c "import json; l = json.load(open('hf/config.json'))['id2label']; assert sorted(l.values()) == sorted(['#', '%', '%41', ':', ';', 'Case=Nom|Num=Sing', 'NN', 'VB=x']), l"
$T "$RP" import-hf hf --out back.h5 > /dev/null 2>&1
$T "$RP" predict tag.ini --checkpoint back.h5 --input punct.txt --out back.tsv > /dev/null 2>&1
check "import-hf of those labels, then predict: the same predictions" cmp -s back.tsv punct.tsv
printf 'a X\nb Y\n\n' > xy.txt
printf 'a :\nb X\n\n' > colon.txt
expect_ok "a label set given as %XX is decoded (task.tag_labels = %3A X: the labels ':' and 'X')" "fine-tuned checkpoint" \
  ft --set task.train_file="$tmp/colon.txt" --set "task.tag_labels=%3A X" --set train.run_dir="$tmp/given"

# ---- a built vocabulary is normalised as its tokenizer normalises -------------------------------------
printf 'Café X\nnaïve Y\nrésumé X\nÉcole Y\nüber X\ndon'"'"'t Y\n\n' > accents.txt
ft --set task.train_file="$tmp/accents.txt" --set train.run_dir="$tmp/lower" --set task.dev_file="$tmp/accents.txt" \
  > lower.out 2>&1
check "data.do_lower_case = yes (default): the built vocabulary is lower-cased and accent-stripped (cafe ecole naive resume uber), don't split as the tokenizer splits it" \
  bash -c "[ \"\$(tail -n +6 lower/vocab.txt | tr '\n' ' ')\" = \"' cafe don ecole naive resume t uber \" ]"
check "... so no word of its own training file is [UNK]" bash -c "! grep -q 'UNK' lower.out"
ft --set task.train_file="$tmp/accents.txt" --set train.run_dir="$tmp/cased" --set data.do_lower_case=no > cased.out 2>&1
check "data.do_lower_case = no (given with --set, from scratch): the words keep case and accents" \
  bash -c "grep -qx 'Café' cased/vocab.txt && grep -qx 'École' cased/vocab.txt && grep -q '^do_lower_case = no' cased/config.ini"

# ---- data.vocab and data.do_lower_case: read by a model trained from scratch ---------------------------
expect_ok "--set data.vocab=FILE is accepted for a model trained from scratch" "tokens from $tmp/lower/vocab.txt" \
  ft --set task.train_file="$tmp/accents.txt" --set train.run_dir="$tmp/v1" --set data.vocab="$tmp/lower/vocab.txt"
{ cat tag.ini; printf '[data]\nvocab = %s\ndo_lower_case = yes\n' "$tmp/lower/vocab.txt"; } > vocab.ini
$T "$RP" finetune vocab.ini --set task.train_file="$tmp/accents.txt" --set train.run_dir="$tmp/v2" > v2.out 2>&1
check "... and set in the file, neither key is warned about as unused" bash -c "grep -q 'from $tmp/lower/vocab.txt' v2.out && ! grep -q 'has no effect' v2.out"
expect_error "--set data.vocab is still refused when fine-tuning from a checkpoint (its vocabulary is the checkpoint's)" \
  "key 'data.vocab' would have no effect: fine-tuning reads it only when task.init_checkpoint = none" \
  ft --set task.train_file="$tmp/accents.txt" --set train.run_dir="$tmp/v3" --set task.init_checkpoint="$tmp/v1/model.h5" \
  --set data.vocab="$tmp/lower/vocab.txt"
expect_error "a data.vocab inside the run directory a fresh run owns is refused" "key 'data.vocab' $tmp/lower/vocab.txt lies inside train.run_dir" \
  ft --set task.train_file="$tmp/accents.txt" --set train.run_dir="$tmp/lower" --set data.vocab="$tmp/lower/vocab.txt" --overwrite

# ---- a refused start writes nothing; the corrected command then runs ----------------------------------
for env in REALPOS_PEAK_GFLOPS=abc REALPOS_PEAK_GFLOPS=0x2a "REALPOS_PEAK_GFLOPS= 42" REALPOS_PEAK_BF16_GFLOPS=inf \
    REALPOS_PEAK_BF16_GFLOPS=-1 REALPOS_PEAK_CACHE=maybe REALPOS_TEST_SIGNAL_AT_STEP=TERM:x; do
  expect_error "$env refuses the run, naming the variable" "${env%%=*}" \
    env "$env" "$RP" finetune tag.ini --set task.train_file="$tmp/xy.txt" --set train.run_dir="$tmp/env"
  check "... before its run directory exists" test ! -e "$tmp/env"
done
expect_ok "... and the corrected command runs" "fine-tuned checkpoint" \
  ft --set task.train_file="$tmp/xy.txt" --set train.run_dir="$tmp/env"
mkdir -p early && echo '{"kind":"train","step":1}' > early/metrics.jsonl
out=$(ft --set task.train_file="$tmp/xy.txt" --set train.run_dir="$tmp/early" 2>&1)
check "a directory holding a run without a checkpoint: no advice to --resume a latest that does not exist" \
  bash -c "grep -qF 'but no $tmp/early/latest to resume it from' <<<\"\$1\" && ! grep -q -- '--resume' <<<\"\$1\"" _ "$out"
printf 'a X\nb Z\n\n' > onlyz.txt
expect_error "a training file whose every example is refused: named, not an internal error" \
  "onlyz.txt (key 'task.train_file'): no example left to train on" \
  ft --set task.train_file="$tmp/onlyz.txt" --set "task.tag_labels=X Y" --set train.run_dir="$tmp/none"
check "... and nothing but its lock is in the run directory" bash -c "[ -z \"\$(ls '$tmp/none')\" ]"

# ---- classifier rows mean labels: average and transfer check them -------------------------------------
ft --set task.train_file="$tmp/xy.txt" --set train.run_dir="$tmp/xy" > /dev/null 2>&1
ft --set task.train_file="$tmp/xy.txt" --set train.run_dir="$tmp/yx" --set "task.tag_labels=Y X" > /dev/null 2>&1
expect_error "average of tagging models whose labels differ in order: refused, naming both files and label lists" \
  "yx/model.h5: key 'task.tag_labels' is \"Y X\", but $tmp/xy/model.h5 has \"X Y\"" \
  $T "$RP" average "$tmp/xy/model.h5" "$tmp/yx/model.h5" --out "$tmp/avg.h5"
check "... and writes nothing" test ! -e "$tmp/avg.h5"
ft --set task.train_file="$tmp/xy.txt" --set train.run_dir="$tmp/xy2" --set task.seed=7 > /dev/null 2>&1
expect_ok "control: two models of the same labels average" "wrote" $T "$RP" average "$tmp/xy/model.h5" "$tmp/xy2/model.h5" --out "$tmp/avg3.h5"
expect_error "fine-tuning a tagging checkpoint for the same labels in another order is refused, naming both" \
  "its classifier was trained for tagging with labels X Y, this run is tagging with labels Y X" \
  ft --set task.train_file="$tmp/xy.txt" --set train.run_dir="$tmp/t1" --set task.init_checkpoint="$tmp/xy/model.h5" \
  --set "task.tag_labels=Y X"
check "... before its run directory exists" test ! -e "$tmp/t1"
expect_ok "without task.tag_labels, a tagging checkpoint's labels are taken in its order" \
  "task.tag_labels: the labels of $tmp/yx/model.h5's classifier, in its order: Y X" \
  ft --set task.train_file="$tmp/xy.txt" --set train.run_dir="$tmp/t2" --set task.init_checkpoint="$tmp/yx/model.h5"
check "... and recorded so" grep -qx 'tag_labels = Y X' "$tmp/t2/config.ini"
expect_error "predict with --set task.tag_labels reordering the checkpoint's labels is refused too" \
  "xy/model.h5 (--checkpoint): its classifier was trained for tagging with labels X Y, this run is tagging with labels Y X" \
  $T "$RP" predict tag.ini --checkpoint "$tmp/xy/model.h5" --input xy.txt --out "$tmp/xy.tsv" --set "task.tag_labels=Y X"
check "... and writes nothing" test ! -e "$tmp/xy.tsv"
