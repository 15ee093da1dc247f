#!/usr/bin/env bash
# make bench: full training steps (forward, backward, AdamW) of realpos and of a tuned PyTorch
# peer on the same shapes, 15% of positions labelled, interleaved: ROUNDS rounds, each running
# every row once with the two engines back to back (realpos first in odd rounds, PyTorch first in
# even ones), so a load spike or drift of a shared machine hits both sides alike. Every realpos run
# also probes the sgemm peak (before its first step only, as training probes at its first records:
# a 1024^3 product and its 12 MB of operands between every two steps slowed the steps measured
# after it, bert-mini bf16 by 1.051x [1.039..1.113], docs/bench-peer.md); the table uses the best
# probe of the whole bench. scripts/dev/bench_table.py prints medians over rounds with their spread.
# The PyTorch side is scripts/bench_peer.py, a BERT written for speed in PyTorch 1.13 (fused QKV,
# torch.matmul attention, F.gelu, the MLM head at the labelled positions only, foreach AdamW,
# autocast bf16 with fp32 layer norms; docs/bench-peer.md), not the parity reference; it runs with
# tcmalloc preloaded, OMP_WAIT_POLICY=PASSIVE and torch.set_num_threads(cores) (train.threads of
# the row when it sets one), at its default and at its AVX-512 CPU capability each round where the CPU
# has AVX-512 (the round's faster run counts, below); realpos with the same OpenMP settings.
# OPENBLAS_CORETYPE is never set here: both sides run the BLAS kernels OpenBLAS picks for this CPU
# (recorded in the JSON), unless --peer-coretype NAME runs the peer alone on OpenBLAS's core NAME
# (`unset`: the one OpenBLAS picks without OPENBLAS_CORETYPE), e.g. the peer on its fastest kernels
# against realpos on the environment's.
# The finetune-* rows are fine-tuning steps (`realpos bench --lengths-from`: the task head and loss
# on batches the TaskSampler draws from the real GLUE / SQuAD training files in ../shared/data,
# tokenized with data/vocab, padded to their longest sequence, grouped by length in the -grouped
# row, padded to task.max_seq_len in the -max row; -grouped-b64 takes 64 sentences a step, which
# halves the per-token share of the step's fixed cost, AdamW over every parameter); synthetic-* are
# the synthetic suite's small tagger (configs/synthetic.ini at one thread) on a `realpos synth` file
# made here, unpadded, the peer padding each of the same steps to its longest; they report real (non-padding) tokens/s next
# to computed (B x padded length) tokens/s, and are skipped, saying so, when the data or the
# vocabulary is absent. Each row's effective config is saved (runs/NAME.config.ini) so that
# bench_table.py can count its FLOPs, the relative terms' included. A row with an overhead row
# runs as `realpos bench ROW.config.ini --against THAT.config.ini`: the two configurations step
# for step alternately in one process, so the paired time ratio (bench_table's "paired overhead")
# sees the same load on both sides.
# Usage: scripts/dev/bench.sh [--rounds N] [--quick] [--only NAME[,NAME...]] [--peer-coretype NAME|unset]
# Results: build/bench/runs/NAME.ENGINE.rN.json, build/bench/results.json, build/bench/table.txt
set -euo pipefail
cd "$(dirname "$0")/../.."
threads=$(nproc)
rounds=3; quick=0; only=""; peer_env=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="$2"; shift ;;
    --quick) quick=1; rounds=1 ;;
    --only) only="$2"; shift ;;
    --peer-coretype) case "$2" in
        unset) peer_env=(env -u OPENBLAS_CORETYPE) ;;
        [A-Za-z]*) peer_env=(env "OPENBLAS_CORETYPE=$2") ;;
        *) echo "bench: --peer-coretype takes an OpenBLAS core name (e.g. SkylakeX) or unset, not '$2'" >&2; exit 2 ;;
      esac; shift ;;
    *) echo "usage: $0 [--rounds N] [--quick] [--only NAME[,NAME...]] [--peer-coretype NAME|unset]" >&2; exit 2 ;;
  esac
  shift
done
out=build/bench; rm -rf "$out/runs"; mkdir -p "$out/runs"
tcmalloc=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
[ -f "$tcmalloc" ] || { echo "bench: $tcmalloc missing (scripts/setup.sh installs libtcmalloc-minimal4)" >&2; exit 1; }

m4="model.absolute_position=no model.relative_position=method4"
np="model.absolute_position=no" # t5, alibi, rope rows: relative positions only, as the method4 rows
glue=../shared/data/glue squad=../shared/data/squad vocab=data/vocab/bert-base-uncased.txt
ft="data.vocab=$vocab"
synth=build/bench/synthetic-duplicate-train.txt # the suite's training file of its longest task
[ -f "$synth" ] || ./realpos synth duplicate --lengths 1-40 --count 16000 --seed 1 --out "$synth" >&2
# name | config | batch | seq | steps | overrides | PyTorch too | overhead measured against | label fraction
#      | fine-tuning data (--lengths-from; batch and seq are then task.batch_size and task.max_seq_len)
rows=(
  "mini|configs/bert-mini.ini|32|128|3||yes||0.15|"
  "mini-method4-k64-residual|configs/bert-mini.ini|32|128|3|$m4 model.relative_k=64 model.residual_attention=yes|yes|mini|0.15|"
  "mini-method4-k64|configs/bert-mini.ini|32|128|3|$m4 model.relative_k=64|no|mini|0.15|"
  "mini-residual|configs/bert-mini.ini|32|128|3|model.residual_attention=yes|no|mini|0.15|"
  "mini-t5|configs/bert-mini.ini|32|128|3|$np model.relative_position=t5|no|mini|0.15|"
  "mini-alibi|configs/bert-mini.ini|32|128|3|$np model.relative_position=alibi|no|mini|0.15|"
  "mini-alibi-residual|configs/bert-mini.ini|32|128|3|$np model.relative_position=alibi model.residual_attention=yes|no|mini-alibi|0.15|"
  "mini-rope|configs/bert-mini.ini|32|128|3|$np model.relative_position=rope|no|mini|0.15|"
  "mini-seq512|configs/bert-mini.ini|8|512|2||no||0.15|"
  "mini-seq512-method4-k511|configs/bert-mini.ini|8|512|2|$m4 model.relative_k=511|no|mini-seq512|0.15|"
  "mini-seq512-alibi|configs/bert-mini.ini|8|512|2|$np model.relative_position=alibi|no|mini-seq512|0.15|"
  "mini-seq512-t5|configs/bert-mini.ini|8|512|2|$np model.relative_position=t5|no|mini-seq512|0.15|"
  "mini-seq512-rope|configs/bert-mini.ini|8|512|2|$np model.relative_position=rope|no|mini-seq512|0.15|"
  "finetune-sst2-max|configs/bert-mini.ini|32|64|30|$ft task.glue_task=sst2 task.padding=max_length|no|||$glue/SST-2/train.tsv"
  "finetune-sst2|configs/bert-mini.ini|32|64|30|$ft task.glue_task=sst2|no|finetune-sst2-max||$glue/SST-2/train.tsv"
  "finetune-sst2-grouped|configs/bert-mini.ini|32|64|30|$ft task.glue_task=sst2 task.group_by_length=yes|no|finetune-sst2-max||$glue/SST-2/train.tsv"
  "finetune-sst2-grouped-b64|configs/bert-mini.ini|64|64|30|$ft task.glue_task=sst2 task.group_by_length=yes task.batch_size=64|no|||$glue/SST-2/train.tsv"
  "finetune-sst2-method4-k64|configs/bert-mini.ini|32|64|30|$ft task.glue_task=sst2 $m4 model.relative_k=64|no|finetune-sst2||$glue/SST-2/train.tsv"
  "finetune-mrpc-max|configs/bert-mini.ini|32|128|6|$ft task.glue_task=mrpc task.padding=max_length|no|||$glue/MRPC/train.tsv"
  "finetune-mrpc|configs/bert-mini.ini|32|128|6|$ft task.glue_task=mrpc|no|finetune-mrpc-max||$glue/MRPC/train.tsv"
  "finetune-mrpc-grouped|configs/bert-mini.ini|32|128|6|$ft task.glue_task=mrpc task.group_by_length=yes|no|finetune-mrpc-max||$glue/MRPC/train.tsv"
  "finetune-squad|configs/bert-mini.ini|16|256|3|$ft task.type=squad|no|||$squad/train-half.json"
  "synthetic-method4-k16|configs/synthetic.ini|8|482|200|train.threads=1|yes|||$synth"
  "synthetic-absolute|configs/synthetic.ini|8|482|200|train.threads=1 model.absolute_position=yes model.relative_position=none|yes|||$synth"
  "base|configs/bert-base.ini|8|128|2||yes||0.15|"
  "base-method4-k64|configs/bert-base.ini|8|128|2|$m4 model.relative_k=64|yes|base|0.15|"
  # bf16 mixed precision (train.precision = bf16, docs/bf16.md), each paired step for step with its
  # fp32 row (paired overhead -40% = 1.67x as fast), PyTorch under torch.autocast bf16 as the peer;
  # "% peak" of these rows is of the bf16 peak (a bf16 1024^3 product probe, as the sgemm one)
  "mini-bf16|configs/bert-mini.ini|32|128|3|train.precision=bf16|yes|mini|0.15|"
  "mini-method4-k64-residual-bf16|configs/bert-mini.ini|32|128|3|$m4 model.relative_k=64 model.residual_attention=yes train.precision=bf16|yes|mini-method4-k64-residual|0.15|"
  "mini-seq512-bf16|configs/bert-mini.ini|8|512|2|train.precision=bf16|yes|mini-seq512|0.15|"
  "base-bf16|configs/bert-base.ini|8|128|2|train.precision=bf16|yes|base|0.15|"
)
spec="$out/rows.tsv"; : >"$spec"
for row in "${rows[@]}"; do # every row's effective config first: a paired row needs its overhead row's
  IFS='|' read -r name config _ _ _ overrides _ _ _ _ <<<"$row"
  sets=(); for o in $overrides; do sets+=(--set "$o"); done
  ./realpos config "$config" "${sets[@]}" >"$out/runs/$name.config.ini"
done

run_realpos() { # name round config batch seq steps label_frac lengths_from against sets...
  local name=$1 round=$2 config=$3 batch=$4 seq=$5 steps=$6 label_frac=$7 lengths_from=$8 against=$9; shift 9
  local batches=(--label-frac "$label_frac"); [ -z "$lengths_from" ] || batches=(--lengths-from "$lengths_from")
  if [ -n "$against" ]; then # the effective configs, complete: no --set (it would apply to both sides)
    config=$out/runs/$name.config.ini; set -- --against "$out/runs/$against.config.ini"
  fi
  OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$threads ./realpos bench "$config" "$@" --batch-size "$batch" \
    --seq-len "$seq" --steps "$steps" --warmup 1 --probes start "${batches[@]}" \
    --json "$out/runs/$name.realpos.r$round.json" >&2
}
# PyTorch 1.13 may run its AVX2 kernels on an AVX-512 CPU (it does on the Zen 5 of docs/bench-peer.md)
# unless ATEN_CPU_CAPABILITY=avx512 asks for its AVX-512 ones, and which is faster depends on the row
# (there: bf16 at bert-mini faster with AVX-512, the tagger slower): on a CPU with what its AVX-512
# kernels need, the peer runs both ways
# every round, in alternating order, as NAME.torch-default.rN.json and NAME.torch-avx512.rN.json, and
# bench_table.py takes each round's faster run as that round's peer.
peer_caps=(default avx512)
for flag in avx512f avx512bw avx512vl avx512dq; do grep -qw "$flag" /proc/cpuinfo || peer_caps=(default); done
run_torch() { # name round config batch seq steps lengths_from sets...
  local name=$1 round=$2 config=$3 batch=$4 seq=$5 steps=$6 lengths_from=$7 autocast=() batches=() n=$threads
  shift 7
  [[ " $* " != *" train.precision=bf16 "* ]] || autocast=(--autocast-bf16) # the peer of a bf16 row
  [[ " $* " != *" train.threads=1 "* ]] || n=1
  # a tagging row: the steps realpos took in round 1 (realpos runs first in odd rounds), padded
  [ -z "$lengths_from" ] || batches=(--tagging "$lengths_from" --shapes-from "$out/runs/$name.realpos.r1.json")
  local caps=("${peer_caps[@]}") cap capability
  (( round % 2 )) || caps=($(printf '%s\n' "${peer_caps[@]}" | tac))
  for cap in "${caps[@]}"; do
    capability=(); [ "$cap" = default ] || capability=("ATEN_CPU_CAPABILITY=$cap")
    LD_PRELOAD=$tcmalloc OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=$n "${peer_env[@]}" env "${capability[@]}" \
      /usr/bin/python3 scripts/bench_peer.py \
      --config "$config" "$@" "${autocast[@]}" --batch-size "$batch" --seq-len "$seq" --steps "$steps" --warmup 1 \
      --threads "$n" --label-frac 0.15 "${batches[@]}" --json "$out/runs/$name.torch-$cap.r$round.json" >/dev/null
  done
}

for round in $(seq 1 "$rounds"); do
  for row in "${rows[@]}"; do
    IFS='|' read -r name config batch seq steps overrides torch against label_frac lengths_from <<<"$row"
    [ -z "$only" ] || [[ ",$only," == *",$name,"* ]] || continue
    missing=""
    if [ -n "$lengths_from" ]; then
      [ -f "$lengths_from" ] || missing="$lengths_from (../shared/data holds GLUE and SQuAD)"
      [ "$lengths_from" = "$synth" ] || [ -f "$vocab" ] || missing="${missing:+$missing and }$vocab (scripts/get_vocab.sh)"
    fi
    if [ -n "$missing" ]; then
      [ "$round" != 1 ] || echo "== skipping $name: no $missing" >&2
      continue
    fi
    [ "$quick" = 0 ] || steps=1
    sets=(); for o in $overrides; do sets+=(--set "$o"); done
    if [ "$round" = 1 ]; then
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$torch" "$against" "$batch" "$seq" "$overrides" "$lengths_from" >>"$spec"
    fi
    echo "== round $round/$rounds $name: $config batch $batch seq $seq $overrides${lengths_from:+ on $lengths_from}" >&2
    if [ "$torch" = yes ] && [ $((round % 2)) -eq 0 ]; then
      run_torch "$name" "$round" "$config" "$batch" "$seq" "$steps" "$lengths_from" "${sets[@]}"
      run_realpos "$name" "$round" "$config" "$batch" "$seq" "$steps" "$label_frac" "$lengths_from" "$against" "${sets[@]}"
    else
      run_realpos "$name" "$round" "$config" "$batch" "$seq" "$steps" "$label_frac" "$lengths_from" "$against" "${sets[@]}"
      [ "$torch" != yes ] || run_torch "$name" "$round" "$config" "$batch" "$seq" "$steps" "$lengths_from" "${sets[@]}"
    fi
  done
done
/usr/bin/python3 scripts/dev/bench_table.py "$out" | tee "$out/table.txt"
