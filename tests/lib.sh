# Sourced by the shell tests: runs from the repository root with $RP = the realpos binary,
# $PY = Debian's python3, a scratch directory $tmp removed on exit (kept with KEEP=1), and
# PASS/FAIL lines for tests/run.sh.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RP="${REALPOS:-$PWD/realpos}"
PY=/usr/bin/python3
tmp=$(mktemp -d /tmp/realpos-test.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT
# The MFU peak cache (train/loop/peak.h) of runs under test is the test's own, not the user's.
export XDG_CACHE_HOME="$tmp/cache"
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1${2:+: $2}"; }
[ -x "$RP" ] || { fail "realpos binary" "$RP missing (run make realpos)"; exit 1; }

# expect_error NAME PATTERN COMMAND...: the command exits non-zero (not by a signal) and its
# output contains PATTERN (fixed string).
expect_error() {
  local name=$1 pattern=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qF -- "$pattern" <<<"$out"; then pass "$name"
  else fail "$name" "status $rc: $(head -c 400 <<<"$out")"; fi
}

# No test's verdict may depend on the host's speed: a test that needs a signal at a given point
# does not send it from outside, racing the process (a fast host passes the point and beyond
# before the signal lands), but has the process raise it there itself:
#   REALPOS_TEST_SIGNAL_AT_STEP=SIG:N   training (train/loop/run.c): SIG (TERM, INT, HUP, USR1,
#                                       KILL, STOP) after update N, its evaluation and checkpoint;
#   REALPOS_TEST_TERM_IN_SHARD=K, REALPOS_TEST_KILL_AFTER_SHARD=K, REALPOS_TEST_STOP_IN_SHARD=K
#                                       prepare (train/data/shard_write.c), at shard K.
# wait_stopped PID: wait until PID has stopped itself (SIGSTOP from one of those hooks). Returns 1
# (and SIGKILLs PID) if PID exits first or has not stopped within SIGNAL_TIMEOUT seconds (default 180).
wait_stopped() {
  local pid=$1 deadline=$((SECONDS + ${SIGNAL_TIMEOUT:-180})) state
  while [ $SECONDS -lt $deadline ]; do
    state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null) || return 1
    [ "${state%% *}" = T ] && return 0
    [ "${state%% *}" = Z ] && return 1
    sleep 0.02
  done
  kill -9 "$pid" 2>/dev/null
  return 1
}

# write_ini OUT SECTION.KEY=VALUE ...: write OUT with each key in its section, sections and keys in
# the order first named; a key named again replaces its value (so a template's entries come first
# and a test's overrides after them). OUT is then read back by `realpos config`: a key realpos does
# not know, or a value it refuses, prints a FAIL line with realpos's message and exits the test.
write_ini() {
  local out=$1 entry key section err
  shift
  local -a keys=() sections=()
  local -A value=()
  for entry in "$@"; do
    key=${entry%%=*}
    [[ $entry == *=* && $key =~ ^[a-z_]+\.[a-z0-9_]+$ ]] ||
      { fail "write_ini $out" "'$entry': expected section.key=value"; exit 1; }
    [[ -v value[$key] ]] || keys+=("$key")
    value[$key]=${entry#*=}
    [[ " ${sections[*]} " == *" ${key%%.*} "* ]] || sections+=("${key%%.*}")
  done
  for section in "${sections[@]}"; do
    echo "[$section]"
    for key in "${keys[@]}"; do
      if [ "${key%%.*}" = "$section" ]; then echo "${key#*.} = ${value[$key]}"; fi
    done
  done >"$out"
  err=$("$RP" config "$out" 2>&1 >/dev/null) || { fail "write_ini $out" "$err"; exit 1; }
}

# tiny_pretrain_ini OUT [SECTION.KEY=VALUE ...]: write_ini with the shell tests' tiny pretraining
# config: a 1-layer model of width 16 (2 heads, feed-forward 32, 85 tokens, 32 positions), 4 steps
# of 4 sequences of 32 tokens (a checkpoint and an eval every 2, the last 2 checkpoints kept, 1
# thread) on $tmp/corpus.txt and $tmp/vocab.txt, shards in $tmp/shards, the run in $tmp/run.
tiny_pretrain_ini() {
  local out=$1
  shift
  write_ini "$out" model.hidden_size=16 model.num_layers=1 model.num_heads=2 model.intermediate_size=32 \
    model.vocab_size=85 model.max_position=32 \
    train.batch_size=4 train.max_steps=4 train.warmup_steps=1 train.log_interval=1 train.eval_interval=2 \
    train.checkpoint_interval=2 train.keep_last=2 train.eval_batches=2 train.threads=1 train.run_dir="$tmp/run" \
    data.corpus="$tmp/corpus.txt" data.vocab="$tmp/vocab.txt" data.shard_dir="$tmp/shards" data.max_seq_len=32 \
    data.max_predictions_per_seq=4 data.eval_fraction=0.1 "$@"
}

# tiny_tagging_ini OUT [SECTION.KEY=VALUE ...]: write_ini with the shell tests' tiny tagging config:
# a from-scratch 1-layer model of width 16 (2 heads, feed-forward 32, Method 4, no absolute
# positions, no dropout), 2 steps of 8 examples of at most 24 tokens at lr 1e-3, logging every 10;
# the files ($tmp/unused.txt, the run $tmp/unused) are for the test to name.
tiny_tagging_ini() {
  local out=$1
  shift
  write_ini "$out" model.hidden_size=16 model.num_layers=1 model.num_heads=2 model.intermediate_size=32 \
    model.hidden_dropout=0 model.attention_dropout=0 model.absolute_position=no model.relative_position=method4 \
    train.run_dir="$tmp/unused" train.log_interval=10 \
    task.type=tagging task.init_checkpoint=none task.train_file="$tmp/unused.txt" task.max_seq_len=24 \
    task.batch_size=8 task.max_steps=2 task.lr=1e-3 "$@"
}

# synthetic_vocab FILE WORDS: the five special tokens, then w0 .. w{WORDS-1}, one a line.
synthetic_vocab() {
  local i
  { printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]'; for ((i = 0; i < $2; i++)); do echo "w$i"; done; } >"$1"
}

# synthetic_corpus DIR WORDS DOCUMENTS SEED: DIR/vocab.txt (synthetic_vocab) and DIR/corpus.txt
# (DOCUMENTS documents of 3-8 sentences of 3-10 words, frequent words first, a blank line after
# each document).
synthetic_corpus() {
  local dir=$1 words=$2 docs=$3 seed=$4
  synthetic_vocab "$dir/vocab.txt" "$words"
  awk -v W="$words" -v D="$docs" -v S="$seed" 'BEGIN { srand(S); for (d = 0; d < D; d++) {
         ns = 3 + int(rand() * 6);
         for (s = 0; s < ns; s++) { n = 3 + int(rand() * 8); line = "";
           for (w = 0; w < n; w++) line = line (w ? " " : "") "w" int(rand() * rand() * W)
           print line "." }
         print "" } }' >"$dir/corpus.txt"
}
