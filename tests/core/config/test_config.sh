#!/usr/bin/env bash
# realpos config: defaults, round trip, --set overrides, and one check per error class (non-zero
# exit and the exact "ORIGIN: key '...': expected ..." message). Uses ./realpos (make realpos).
source "$(dirname "$0")/../../lib.sh"
CONFIGS="$PWD/configs"
cd "$tmp"

# expect_ok NAME PATTERN ARGS...: exit 0 and a stdout line equal to PATTERN.
expect_ok() {
  local name=$1 line=$2; shift 2
  if ! "$RP" config "$@" >out 2>err; then fail "$name" "exit $?: $(head -c 300 err)"
  elif ! grep -qxF -- "$line" out; then fail "$name" "no line '$line' in the output"
  else pass "$name"; fi
}

# expect_error NAME MESSAGE ARGS...: non-zero exit and stderr exactly "realpos: error: MESSAGE"
# (a MESSAGE ending in '*' matches as a prefix), nothing on stdout.
expect_error() {
  local name=$1 message=$2; shift 2
  "$RP" config "$@" >out 2>err
  local rc=$? got
  got=$(cat err)
  if [ "$rc" -eq 0 ]; then fail "$name" "exit 0"
  elif [ -s out ]; then fail "$name" "printed a config"
  elif [ "$(wc -l <err)" -ne 1 ]; then fail "$name" "expected one line on stderr, got: $got"
  elif [[ "$message" == *'*' && "$got" != "realpos: error: ${message%'*'}"* ]] ||
       [[ "$message" != *'*' && "$got" != "realpos: error: $message" ]]; then
    fail "$name" "expected 'realpos: error: $message', got '$got'"
  else pass "$name"; fi
}

# ini FILE LINES...: write one line per argument.
ini() { local f=$1; shift; printf '%s\n' "$@" >"$f"; }

# ---- defaults, configs, round trip ----------------------------------------------------------------
: >empty.ini
"$RP" config empty.ini >defaults.out 2>err || fail "defaults" "$(cat err)"
all=1
for kv in "hidden_size = 768" "num_layers = 12" "num_heads = 12" "intermediate_size = 3072" \
          "vocab_size = 30522" "max_position = 512" "type_vocab_size = 2" "absolute_position = yes" \
          "norm = post" "hidden_dropout = 0.1" "attention_dropout = 0.1" "layer_norm_eps = 1e-12" \
          "init_range = 0.02" "seed = 42" "relative_position = none" "relative_k = 64" \
          "t5_num_buckets = 32" "t5_max_distance = 128" "rope_theta = 1e+04" \
          "residual_attention = no" "residual_attention_mean = no" "lr = 0.0001" "beta1 = 0.9" \
          "beta2 = 0.999" "eps = 1e-06" "weight_decay = 0.01" "bias_correction = yes" \
          "batch_size = 32" "grad_accum_steps = 1" "max_steps = 1000" "warmup_steps = 100" "warmup_proportion = 0" \
          "schedule = linear" "clip_grad_norm = 1" "log_interval = 10" "eval_interval = 200" \
          "checkpoint_interval = 500" "keep_last = 2" "eval_batches = 20" "run_dir = runs/default" \
          "threads = 0" "shard_optimizer = no" "corpus =" "corpus_format = auto" "text_field = text" "shard_tokens = 33554432" "read_chunk_mb = 32" "vocab =" "shard_dir = data/shards" "do_lower_case = yes" \
          "max_seq_len = 128" "short_seq_prob = 0.1" "masked_lm_prob = 0.15" \
          "max_predictions_per_seq = 20" "whole_word_mask = no" "eval_fraction = 0.02" "seed = 12345" \
          "type = classification" "glue_task = none" "init_checkpoint =" "train_file =" "dev_file =" \
          "text_a_column = 0" "text_b_column = -1" "label_column = 1" "num_columns = 0" "header = yes" \
          "labels = 0 1" "bad_examples = skip" "max_seq_len = 128" "batch_size = 32" "padding = none" "group_by_length = no" "epochs = 3" "max_steps = 0" "eval_every = 0" "test_file =" "stop_accuracy = 0" "stop_patience = 3" "lr = 5e-05" \
          "warmup_proportion = 0.1" "doc_stride = 128" "max_query_length = 64" "n_best_size = 20" \
          "max_answer_length = 30" "seed = 42" "tag_labels =" "train_max_length = 0"; do
  grep -qxF -- "$kv" defaults.out || { fail "default $kv" "missing"; all=0; }
done
[ $all -eq 1 ] && pass "defaults: all 90 keys print their documented default"
keys=$(grep -c '^[a-z_0-9]* =' defaults.out)
[ "$keys" -eq 90 ] && pass "every key printed once ($keys)" || fail "every key printed once" "$keys keys"
[ "$(grep '^\[' defaults.out | tr '\n' ' ')" = "[model] [optim] [train] [data] [task] " ] \
  && pass "sections in schema order" || fail "sections in schema order"

"$RP" config "$CONFIGS/bert-base.ini" >base.out 2>err && cmp -s base.out defaults.out \
  && pass "configs/bert-base.ini is exactly the defaults" || fail "configs/bert-base.ini is exactly the defaults"

roundtrip() { # NAME ARGS...: config output re-fed gives identical output
  local name=$1; shift
  if "$RP" config "$@" >rt1.ini 2>err && "$RP" config rt1.ini >rt2.ini 2>>err && cmp -s rt1.ini rt2.ini
  then pass "round trip: $name"; else fail "round trip: $name" "$(head -c 300 err)"; fi
}
for c in bert-base bert-mini tiny; do roundtrip "$c" "$CONFIGS/$c.ini"; done
roundtrip "awkward floats and a long path list" "$CONFIGS/tiny.ini" --set optim.lr=3e-4 \
  --set optim.eps=1.17549435e-38 --set model.layer_norm_eps=0.3 --set optim.beta2=0.99999994 \
  --set model.init_range=0.123456789 --set "data.corpus=$(printf 'corpus/part-%02d-of-sixteen.txt ' $(seq 16))" \
  --set "train.run_dir=runs/with space" --set model.seed=9223372036854775807 \
  --set model.relative_position=method3 --set model.residual_attention=true \
  --set model.residual_attention_mean=yes
grep -qxF "run_dir = runs/with space" rt2.ini && grep -qxF "lr = 0.0003" rt2.ini \
  && grep -qxF "beta2 = 0.99999994" rt2.ini && grep -qxF "residual_attention = yes" rt2.ini \
  && [ "$(grep -c '^    corpus/part-' rt2.ini)" -ge 1 ] \
  && pass "round trip keeps the values; long lists continue on indented lines" \
  || fail "round trip keeps the values; long lists continue on indented lines"
[ "$(awk '{ if (length($0) > m) m = length($0) } END { print m }' rt2.ini)" -le 197 ] \
  && pass "printed lines fit the INI line buffer" || fail "printed lines fit the INI line buffer"
# a word list (task.tag_labels: MQAR's 64 values and more) longer than an INI line continues on
# indented lines, and a run's stored config reads back (it was written on one 258-character line)
labels=$(for i in $(seq 0 69); do printf 'val%02d ' "$i"; done) # 420 characters
roundtrip "a label set of 70 words" "$CONFIGS/tiny.ini" --set task.type=tagging --set "task.tag_labels=$labels"
[ "$(grep -o '\bval[0-9][0-9]\b' rt2.ini | wc -l)" -eq 70 ] && [ "$(grep -c '^    val[0-9]' rt2.ini)" -ge 1 ] &&
  [ "$(awk '{ if (length($0) > m) m = length($0) } END { print m }' rt2.ini)" -le 197 ] \
  && pass "... all 70 labels, on indented lines within the INI line buffer" \
  || fail "... all 70 labels, on indented lines within the INI line buffer" "$(grep -n val rt2.ini | head -3)"

# ---- accepted syntax -----------------------------------------------------------------------------
ini syntax.ini "# hash comment" "; semicolon comment" "[model]" "  hidden_size=64   ; inline" \
  "num_heads: 4" "" "[data]" "corpus = a.txt b.txt" "    c.txt" "; comment between" "  d.txt" \
  "[model]" "absolute_position = false"
expect_ok "comments, ':' separator, re-opened section, false" "hidden_size = 64" syntax.ini
grep -qxF "corpus = a.txt b.txt c.txt d.txt" out && grep -qxF "num_heads = 4" out \
  && grep -qxF "absolute_position = no" out \
  && pass "path list continued on indented lines" || fail "path list continued on indented lines"

# ---- overrides -----------------------------------------------------------------------------------
expect_ok "--set overrides the file" "num_layers = 3" "$CONFIGS/tiny.ini" --set model.num_layers=3
expect_ok "--set later wins" "num_layers = 5" "$CONFIGS/tiny.ini" --set model.num_layers=3 --set model.num_layers=5
expect_ok "--set replaces a path list" "corpus = x.txt y.txt" syntax.ini --set "data.corpus= x.txt   y.txt "
expect_ok "--set trims around key and value" "num_layers = 3" "$CONFIGS/tiny.ini" --set " model.num_layers = 3 "
expect_ok "--set=value form" "batch_size = 7" "$CONFIGS/tiny.ini" --set=train.batch_size=7
expect_ok "--set can fix a cross-key error" "num_heads = 8" "$CONFIGS/tiny.ini" \
  --set model.hidden_size=48 --set model.num_heads=8
ini seq.ini "[model]" "absolute_position = no" "max_position = 16" "[data]" "max_seq_len = 512"
expect_ok "max_seq_len > max_position is fine without absolute positions" "max_seq_len = 512" seq.ini

# ---- errors --------------------------------------------------------------------------------------
expect_error "missing config file" "nope.ini: cannot open config file: No such file or directory" nope.ini
expect_error "usage" "usage: realpos config CONFIG.ini [--set section.key=value ...] [--for pretrain|finetune]"
ini e.ini "[modle]" "hidden_size = 64"
expect_error "unknown section" "e.ini:2: key 'modle.hidden_size': did you mean 'model.hidden_size'? expected a section among [model], [optim], [train], [data], [task], got [modle]" e.ini
ini e.ini "hidden_size = 64"
expect_error "key before any section" "e.ini:1: key 'hidden_size': expected it under a [section] header*" e.ini
ini e.ini "[model]" "; c" "hiden_size = 64"
expect_error "unknown key" "e.ini:3: key 'model.hiden_size': did you mean 'model.hidden_size'? expected one of hidden_size, num_layers, num_heads, intermediate_size, vocab_size, max_position, type_vocab_size, absolute_position, norm, hidden_dropout, attention_dropout, layer_norm_eps, init_range, seed, relative_position, relative_k, t5_num_buckets, t5_max_distance, rope_theta, residual_attention, residual_attention_mean, got 'hiden_size'" e.ini
ini e.ini "[model]" "hidden_size = 64" "num_layers = 2" "hidden_size = 64"
expect_error "duplicate key" "e.ini:4: key 'model.hidden_size': expected one assignment, got a second one (the first is on line 2)" e.ini
ini e.ini "[train]" "batch_size 4"
expect_error "line without '='" "e.ini:2: expected 'key = value', '[section]' or a comment, got 'batch_size 4'" e.ini
ini e.ini "[train" "batch_size = 4"
expect_error "unclosed section header" "e.ini:1: expected 'key = value', '[section]' or a comment, got '[train'" e.ini
printf '[model]\nhidden_size = 8\nfoo' >e.ini # no final newline: the message stops at the end of the file
expect_error "bad last line without newline" "e.ini:3: expected 'key = value', '[section]' or a comment, got 'foo'" e.ini
ini e.ini "[train]" "batch_size 4" "max_steps = x"
expect_error "first error wins (syntax before value)" "e.ini:2: expected 'key = value', '[section]' or a comment, got 'batch_size 4'" e.ini
ini e.ini "[train]" "max_steps = x" "batch_size 4"
expect_error "first error wins (value before syntax)" "e.ini:2: key 'train.max_steps': expected an integer >= 1, got 'x'" e.ini
ini e.ini "[data]" "vocab = $(printf 'v%.0s' $(seq 300))"
expect_error "line too long" "e.ini:2: expected lines of at most 198 characters, got 308" e.ini
ini e.ini "[train]" "batch_size = 4" "   8"
expect_error "continuation of a one-line key" "e.ini:3: key 'train.batch_size': expected a one-line value (only path and word lists continue on indented lines), got the indented line '8'" e.ini
ini e.ini "[data]" "corpus = a.txt" "  vocab = v.txt"
expect_error "indented assignment after a path list" "e.ini:3: key 'data.corpus': expected more paths on this indented line, got 'vocab = v.txt'*" e.ini
printf '[model]\nhidden_size = 6\0004\n' >e.ini
expect_error "NUL byte" "e.ini:2: expected text, got a NUL byte" e.ini

# expect_value_error NAME SECTION KEY VALUE EXPECTED: the same message from a file and from --set.
expect_value_error() {
  local name=$1 section=$2 key=$3 value=$4 expected=$5
  ini v.ini "[$section]" "" "$key = $value"
  expect_error "$name (file)" "v.ini:3: key '$section.$key': expected $expected, got '$value'" v.ini
  expect_error "$name (--set)" "--set $section.$key=$value: key '$section.$key': expected $expected, got '$value'" \
    empty.ini --set "$section.$key=$value"
}
expect_value_error "int with trailing junk" model hidden_size 12x "an integer in [1, 65536]"
expect_value_error "int given a float" model num_layers 1.5 "an integer in [1, 64]"
expect_value_error "empty int" train batch_size "" "an integer in [1, 1048576]"
expect_value_error "int overflow" train max_steps 99999999999999999999 "an integer >= 1"
expect_value_error "int above int range" train max_steps 2147483648 "an integer >= 1"
expect_value_error "int64 overflow" data seed 9223372036854775808 "an integer >= 0"
expect_value_error "hex int" model vocab_size 0x10 "an integer in [1, 16777216]"
expect_value_error "int below range" model hidden_size 0 "an integer in [1, 65536]"
expect_value_error "int above range" model num_layers 65 "an integer in [1, 64]"
expect_value_error "negative threads" train threads -1 "an integer in [0, 4096]"
expect_value_error "negative seed" model seed -1 "an integer >= 0"
expect_value_error "float with trailing junk" optim lr 1e-4x "a number in [0, 1]"
expect_value_error "empty float" optim beta1 "" "a number in [0, 1)"
expect_value_error "float overflow" optim lr 1e39 "a number in [0, 1]"
expect_value_error "float underflow" optim eps 1e-50 "a number in (0, 1]"
expect_value_error "float underflow where 0 is allowed" optim weight_decay 1e-50 "a number in [0, 1]"
expect_value_error "a hexadecimal float" optim lr 0x1p-10 "a number in [0, 1]"
expect_value_error "nan" optim lr nan "a number in [0, 1]"
expect_value_error "nan" optim weight_decay nan "a number in [0, 1]"
expect_value_error "inf" train clip_grad_norm inf "a number >= 0"
expect_value_error "dropout of 1" model hidden_dropout 1 "a number in [0, 1)"
expect_value_error "zero eps" model layer_norm_eps 0 "a number in (0, 1]"
expect_value_error "beta of 1" optim beta2 1.0 "a number in [0, 1)"
expect_value_error "negative lr" optim lr -1e-4 "a number in [0, 1]"
expect_value_error "probability above 1" data masked_lm_prob 1.5 "a number in [0, 1]"
expect_value_error "zero eval fraction" data eval_fraction 0 "a number in (0, 1)"
expect_value_error "bool not a switch value" model absolute_position maybe "one of 1/0, yes/no, true/false or on/off (any case)"
for v in yes YES True on On 1; do expect_ok "bool $v is yes" "bias_correction = yes" empty.ini --set optim.bias_correction=$v; done
for v in no No FALSE off OFF 0; do expect_ok "bool $v is no" "bias_correction = no" empty.ini --set optim.bias_correction=$v; done
expect_value_error "bool: 2 is no switch value" optim bias_correction 2 "one of 1/0, yes/no, true/false or on/off (any case)"
expect_value_error "enum value" model relative_position shav "one of none, shaw, method1, method2, method3, method4, t5, alibi, rope"
expect_value_error "enum schedule" train schedule Linear "one of linear, cosine, constant"
expect_value_error "empty required path" train run_dir "" "a path of at most 160 characters without ';', not empty"
expect_value_error "path with ';'" data vocab "a;b" "a path of at most 160 characters without ';'"
expect_value_error "path list with '='" data corpus "a=b" "up to 16 space-separated paths of at most 160 characters without ';', '=' or ':'"
long=$(printf 'p%.0s' $(seq 161))
expect_error "path too long" "--set data.vocab=$long: key 'data.vocab': expected a path of at most 160 characters*" empty.ini --set "data.vocab=$long"
expect_error "too many paths" "--set data.corpus=$(seq -s ' ' 17): key 'data.corpus': expected up to 16 space-separated paths*" \
  empty.ini --set "data.corpus=$(seq -s ' ' 17)"

expect_error "--set without '='" "--set model.hidden_size: expected section.key=value, got no '='" empty.ini --set model.hidden_size
expect_error "--set without section" "--set hidden_size=64: key 'hidden_size': expected section.key (e.g. model.hidden_size), got no section" empty.ini --set hidden_size=64
expect_error "--set unknown key" "--set optim.learning_rate=1: key 'optim.learning_rate': expected one of lr, beta1, beta2, eps, weight_decay, bias_correction, got 'learning_rate'" empty.ini --set optim.learning_rate=1
expect_error "--set unknown section" "--set opt.lr=1: key 'opt.lr': did you mean 'optim.lr' or 'task.lr'? expected a section among*" empty.ini --set opt.lr=1
expect_error "did you mean: one edit" "--set train.max_step=20: key 'train.max_step': did you mean 'train.max_steps'? expected one of batch_size,*" empty.ini --set train.max_step=20
expect_error "did you mean: the key in its section" "--set train.lr=1: key 'train.lr': did you mean 'optim.lr' or 'task.lr'? expected one of*" empty.ini --set train.lr=1
expect_error "no suggestion when nothing is near" "--set train.zzzzzz=1: key 'train.zzzzzz': expected one of batch_size,*" empty.ini --set train.zzzzzz=1
expect_error "--set without a value" "config: option '--set' expects a value" empty.ini --set
expect_error "unknown option" "config: unknown option '--sett'" empty.ini --sett model.hidden_size=3

# cross-key errors name the impossible key with its own origin
ini x.ini "[model]" "hidden_size = 100" "num_heads = 12"
expect_error "hidden_size not divisible by num_heads" "x.ini:3: key 'model.num_heads': expected a divisor of model.hidden_size = 100 (x.ini:2), got 12" x.ini
expect_error "cross-key error with a default origin" "(default): key 'model.num_heads': expected a divisor of model.hidden_size = 100 (--set model.hidden_size=100), got 12" \
  empty.ini --set model.hidden_size=100
# a key that does not apply is skipped by the cross-key checks (docs/cli.md; issue 35): warned about in a file,
# refused with --set, never refused by a rule of the scheme it does not belong to
ini x.ini "[model]" "residual_attention_mean = yes"
expect_ok "residual_attention_mean without residual_attention: does not apply, not an error" "residual_attention_mean = yes" x.ini --for pretrain
grep -qF "warning: x.ini:2: key 'model.residual_attention_mean' has no effect: it needs model.residual_attention = yes" err \
  && pass "... warned about in the file" || fail "residual_attention_mean warning" "$(cat err)"
expect_error "... and refused with --set" "--set model.residual_attention_mean=yes: key 'model.residual_attention_mean' would have no effect: it needs model.residual_attention = yes; model.residual_attention is no (default); remove it" \
  empty.ini --for pretrain --set model.residual_attention_mean=yes
ini x.ini "[model]" "relative_position = shaw" "t5_num_buckets = 33"
expect_ok "shaw with an odd t5_num_buckets (a base config shared with t5): warned, not refused" "t5_num_buckets = 33" x.ini --for pretrain
grep -qF "warning: x.ini:3: key 'model.t5_num_buckets' has no effect: it needs model.relative_position = t5" err \
  && pass "... the warning names the key" || fail "t5_num_buckets warning" "$(cat err)"
expect_error "... while with t5 an odd count is refused" "x.ini:3: key 'model.t5_num_buckets': expected an even number (half the buckets per direction), got 33" \
  x.ini --set model.relative_position=t5
ini x.ini "[model]" "relative_position = rope" "t5_num_buckets = 16" "t5_max_distance = 3"
expect_ok "rope with t5 keys that fail t5's cross-key check: warned, not refused" "t5_max_distance = 3" x.ini --for pretrain
ini x.ini "[model]" "relative_position = t5" "t5_num_buckets = 16" "t5_max_distance = 3"
expect_error "... the same keys with t5 are refused" "x.ini:4: key 'model.t5_max_distance': expected more than model.t5_num_buckets / 4 = 4 (x.ini:3), the distances with a bucket each, got 3" x.ini
# applicability compares values as the code does (numbers as numbers): -0 is 0
ini x.ini "[train]" "warmup_proportion = -0" "warmup_steps = 2"
expect_ok "warmup_proportion = -0: warmup_steps applies" "warmup_steps = 2" x.ini --for pretrain
grep -q "has no effect" err && fail "warmup_proportion = -0 warns that warmup_steps has no effect" "$(cat err)" \
  || pass "... and no warning says it has no effect"
"$RP" config x.ini --for pretrain --set train.warmup_steps=3 >out 2>err && pass "... nor is --set train.warmup_steps refused" \
  || fail "--set warmup_steps beside warmup_proportion = -0" "$(cat err)"
ini x.ini "[data]" "max_seq_len = 1024"
expect_error "max_seq_len > max_position" "x.ini:2: key 'data.max_seq_len': expected at most model.max_position = 512 (default) while model.absolute_position = yes (default), got 1024" x.ini
ini x.ini "[data]" "max_seq_len = 16" "max_predictions_per_seq = 17"
expect_error "max_predictions_per_seq > max_seq_len" "x.ini:3: key 'data.max_predictions_per_seq': expected at most data.max_seq_len = 16 (x.ini:2), got 17" x.ini
expect_error "warmup_steps > max_steps" "(default): key 'train.warmup_steps': expected at most train.max_steps = 50 (--set train.max_steps=50), got 100; for a warm-up that follows the run's length, set train.warmup_proportion (e.g. 0.1) instead" \
  empty.ini --set train.max_steps=50
expect_ok "warmup_proportion: warmup_steps is not checked against max_steps" "max_steps = 50" empty.ini \
  --set train.max_steps=50 --set train.warmup_proportion=0.1
ini x.ini "[task]" "glue_task = stsb" "type = classification"
expect_error "task.type contradicting the GLUE task" "x.ini:3: key 'task.type': expected regression (or no setting) for task.glue_task = stsb (x.ini:2), got classification" x.ini
ini x.ini "[task]" "type = squad" "max_seq_len = 64" "max_query_length = 61"
expect_error "SQuAD window without room for context" "x.ini:4: key 'task.max_query_length': expected at most task.max_seq_len - 4 = 60 (x.ini:3) so that a window holds context, got 61" x.ini
ini x.ini "[task]" "labels = yes"
expect_error "classification with one label" "x.ini:2: key 'task.labels': expected at least two space-separated label values, got 'yes'" x.ini
ini x.ini "[task]" "text_a_column = 2" "text_b_column = 2"
expect_error "text columns must differ" "x.ini:3: key 'task.text_b_column': expected a column other than task.text_a_column = 2 (x.ini:2), got 2" x.ini

# ---- which keys apply (train/config/schema.c's KeyUse rows) ----------------------------------------
# the comment above a key: the job that reads it, and "does not apply" while its condition is false
above() { grep -B1 -x -- "$2" "$1" | head -n 1; }
"$RP" config empty.ini >uses.out 2>err || fail "config of empty.ini" "$(cat err)"
[ "$(above uses.out 'relative_k = 64')" = "; does not apply: it needs model.relative_position = shaw | method1 | method2 | method3 | method4" ] \
  && pass "config marks relative_k without relative positions" || fail "config marks relative_k" "$(above uses.out 'relative_k = 64')"
"$RP" config empty.ini --set model.relative_position=method4 >uses.out 2>err
[[ "$(above uses.out 'relative_k = 64')" != *"does not apply"* ]] \
  && pass "config: relative_k applies with method4" || fail "config: relative_k applies with method4"
[ "$(above uses.out 'max_steps = 1000')" = "; pretraining only (fine-tuning reads task.max_steps)" ] \
  && pass "config names the key fine-tuning reads for train.max_steps" || fail "train.max_steps comment" "$(above uses.out 'max_steps = 1000')"
# the modes without a truncation: relative_k does not apply, their own keys do (and only theirs)
"$RP" config empty.ini --set model.relative_position=t5 >uses.out 2>err
[[ "$(above uses.out 'relative_k = 64')" == *"does not apply"* && "$(above uses.out 't5_num_buckets = 32')" != *"does not apply"* \
   && "$(above uses.out 'rope_theta = 1e+04')" == *"does not apply: it needs model.relative_position = rope" ]] \
  && pass "config: t5 uses its bucket keys, not relative_k or rope_theta" || fail "config: t5's keys" "$(grep -B1 'relative_k\|t5_\|rope' uses.out)"
"$RP" config empty.ini --set train.warmup_proportion=0.1 >uses.out 2>err
[[ "$(above uses.out 'warmup_steps = 100')" == *"does not apply: it needs train.warmup_proportion = 0" ]] \
  && pass "config: warmup_steps does not apply beside warmup_proportion" || fail "warmup_steps comment" "$(above uses.out 'warmup_steps = 100')"
roundtrip "with does-not-apply comments" empty.ini --set train.warmup_proportion=0.1 --set model.residual_attention=yes
expect_error "config --for finetune refuses a --set fine-tuning does not read" \
  "--set train.max_steps=100: key 'train.max_steps' would have no effect: fine-tuning does not read it (pretraining only; task.max_steps does the job); remove it or set task.max_steps" \
  empty.ini --for finetune --set train.max_steps=100
expect_ok "config --for pretrain takes train.max_steps" "max_steps = 100" empty.ini --for pretrain --set train.max_steps=100
expect_error "config --for: only pretrain or finetune" "option '--for': expected pretrain or finetune, got 'eval'" \
  empty.ini --for eval
