#!/usr/bin/env bash
# What the program says must be true (issue 35): every environment switch takes 1/0, yes/no,
# true/false, on/off in any case or is refused naming the variable and the accepted values; a run
# on the bf16 emulation says so in its launch summary (pretrain and finetune); the summary names
# only the settings of the chosen position scheme (no "k = 64" for t5, alibi, rope); `--resume` of
# the other job's checkpoint names that first, not a key its configuration lacks. Commands run
# under `timeout` so a hang is a failure, not a stall.
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
has() { grep -qF -- "$1" <<<"$2"; }    # has PATTERN TEXT
lacks() { ! grep -q -- "$1" <<<"$2"; } # lacks REGEX TEXT
export OMP_NUM_THREADS=1 REALPOS_PEAK_GFLOPS=10
unset REALPOS_BF16_EMULATE REALPOS_NO_BF16 REALPOS_PEAK_CACHE
accepted="expected 1/0, yes/no, true/false or on/off (any case)"
synthetic_corpus "$tmp" 60 60 11
tiny_pretrain_ini "$tmp/p.ini" model.vocab_size=65 train.max_steps=2 data.max_seq_len=24
$T "$RP" prepare "$tmp/p.ini" >/dev/null 2>&1 || { fail "prepare the tiny corpus"; exit 1; }
one=(--set train.max_steps=1 --set train.checkpoint_interval=1)

# ---- environment switches: one parser (core/common.h parse_switch) -------------------------------
has_bf16=$("$RP" --version | grep -c 'bf16: available')
for v in maybe 2 enabled " "; do
  expect_error "REALPOS_BF16_EMULATE='$v' is refused, naming the variable and the values" \
    "environment variable REALPOS_BF16_EMULATE: $accepted, got '$v'" \
    env REALPOS_BF16_EMULATE="$v" $T "$RP" pretrain "$tmp/p.ini" "${one[@]}" --set train.precision=bf16 \
    --set train.run_dir="$tmp/bad-emulate"
  expect_error "REALPOS_NO_BF16='$v' is refused likewise" "environment variable REALPOS_NO_BF16: $accepted, got '$v'" \
    env REALPOS_NO_BF16="$v" $T "$RP" --version
done
expect_error "REALPOS_PEAK_CACHE=maybe is refused likewise" "environment variable REALPOS_PEAK_CACHE: $accepted, got 'maybe'" \
  env -u REALPOS_PEAK_GFLOPS REALPOS_PEAK_CACHE=maybe $T "$RP" bench configs/tiny.ini --batch-size 2 --seq-len 8 --steps 1
expect_ok "REALPOS_PEAK_CACHE=OFF (any case) bypasses the cache" "tokens/s" \
  env -u REALPOS_PEAK_GFLOPS REALPOS_PEAK_CACHE=OFF $T "$RP" bench configs/tiny.ini --batch-size 2 --seq-len 8 --steps 1
check "... and writes none" test ! -e "$XDG_CACHE_HOME/realpos"
# scripts/fetch_corpus.sh reads FETCH_CORPUS_OFFLINE the same way (before anything is installed)
mkdir "$tmp/corpus"
expect_error "FETCH_CORPUS_OFFLINE=maybe is refused, naming the variable and the values" \
  "environment variable FETCH_CORPUS_OFFLINE: $accepted, got 'maybe'" \
  env FETCH_CORPUS_OFFLINE=maybe $T bash scripts/fetch_corpus.sh "$tmp/corpus"
expect_error "FETCH_CORPUS_OFFLINE=YES is on: a missing file is an error, not a download" \
  "kjv.txt: missing or changed (FETCH_CORPUS_OFFLINE is on)" env FETCH_CORPUS_OFFLINE=YES $T bash scripts/fetch_corpus.sh "$tmp/corpus"
# the summary of a bf16 run names what computes its products: the emulation for every "on" spelling,
# never for an "off" one (oneDNN where the CPU has bf16, else the refusal naming the CPU)
i=0
for v in 1 yes TRUE On 0 no False OFF; do
  i=$((i + 1))
  out=$(env REALPOS_BF16_EMULATE=$v $T "$RP" pretrain "$tmp/p.ini" "${one[@]}" --set train.precision=bf16 \
        --set train.run_dir="$tmp/e$i" 2>&1); rc=$?
  case $v in
    1|yes|TRUE|On) check "REALPOS_BF16_EMULATE=$v: pretrain's summary says the products are emulated (status $rc)" \
                     grep -qF "precision bf16, products by the portable emulation (REALPOS_BF16_EMULATE is on)" <<<"$out" ;;
    *) if [ "$has_bf16" = 1 ]; then
         check "REALPOS_BF16_EMULATE=$v is off: pretrain's summary says oneDNN (status $rc)" \
           eval '[ $rc -eq 0 ] && has "precision bf16, products by oneDNN" "$out" && lacks emulation "$out"'
       else
         check "REALPOS_BF16_EMULATE=$v is off: bf16 is refused on this CPU, not emulated (status $rc)" \
           eval '[ $rc -ne 0 ] && has "bf16 needs a CPU with avx512_bf16" "$out"'
       fi ;;
  esac
done
out=$($T "$RP" pretrain "$tmp/p.ini" "${one[@]}" --set train.run_dir="$tmp/fp32" 2>&1)
check "an fp32 run's summary names no bf16 products" lacks "products by" "$out"

# ---- the launch summary names each scheme's own settings --------------------------------------------
for spec in "shaw:positions absolute + shaw (k = 4)" "method4:positions absolute + method4 (k = 4)" \
            "t5:positions absolute + t5 (32 buckets, max distance 128)" "alibi:positions absolute + alibi," \
            "rope:positions absolute + rope (theta 10000)"; do
  mode=${spec%%:*} want=${spec#*:}
  k=(--set model.relative_k=4); case $mode in t5|alibi|rope) k=() ;; esac
  out=$($T "$RP" pretrain "$tmp/p.ini" "${one[@]}" --set model.relative_position=$mode "${k[@]}" \
        --set train.run_dir="$tmp/pos-$mode" 2>&1)
  check "pretrain summary with $mode: '$want'" grep -qF "$want" <<<"$out"
  case $mode in t5|alibi|rope) check "... and no k, which $mode does not use" lacks "(k = " "$out" ;; esac
done

# ---- fine-tuning: the same summary lines ----------------------------------------------------------
FX=tests/fixtures/finetune
$T "$RP" init $FX/tiny.ini --out "$tmp/abs.h5" >/dev/null 2>&1 || fail "init"
ft=(--set train.threads=1 --set task.batch_size=8 --set task.glue_task=sst2 --set task.train_file=$FX/sst_train.tsv
    --set task.max_seq_len=16 --set task.max_steps=1 --set task.init_checkpoint="$tmp/abs.h5")
out=$(env REALPOS_BF16_EMULATE=yes $T "$RP" finetune /dev/null "${ft[@]}" --set train.precision=bf16 \
      --set train.run_dir="$tmp/ft-emulated" 2>&1)
check "finetune's summary says the products are emulated (REALPOS_BF16_EMULATE=yes)" \
  grep -qF "precision bf16, products by the portable emulation" <<<"$out"
out=$($T "$RP" finetune /dev/null "${ft[@]}" --set model.relative_position=t5 --set train.run_dir="$tmp/ft-t5" 2>&1)
check "finetune's summary with t5: its buckets, no k" \
  eval 'has "t5 (32 buckets, max distance 128)" "$out" && lacks "(k = " "$out"'
check "a fine-tuning run to resume below" test -s "$tmp/ft-t5/latest"

# ---- --resume of the other job's run: named first ------------------------------------------------
$T "$RP" pretrain "$tmp/p.ini" --set train.run_dir="$tmp/run" >/dev/null 2>&1 || fail "a tiny pretraining run"
out=$($T "$RP" finetune --resume "$tmp/run" 2>&1); rc=$?
check "finetune --resume PRETRAINING_RUN: the first error says it is a pretraining run and what to use (status $rc)" \
  eval '[ $rc -ne 0 ] && [ $rc -lt 128 ] &&
        has "a checkpoint of a pretraining run; this is fine-tuning (to fine-tune its weights, set task.init_checkpoint" "$out"'
check "... not a missing task.train_file" lacks "task.train_file" "$out"
expect_error "... nor with a config that lacks task.train_file" "a checkpoint of a pretraining run; this is fine-tuning" \
  $T "$RP" finetune /dev/null --resume "$tmp/run/latest"
out=$($T "$RP" pretrain --resume "$tmp/ft-t5" 2>&1); rc=$?
check "pretrain --resume FINE_TUNING_RUN: named as a fine-tuning run first (status $rc)" \
  eval '[ $rc -ne 0 ] && [ $rc -lt 128 ] &&
        has "a checkpoint of a fine-tuning run; this is pretraining (to pretrain from its weights, use \`realpos pretrain --init\`)" "$out"'
exit 0
