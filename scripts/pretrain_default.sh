#!/usr/bin/env bash
# `make pretrain`: the default pretraining run, end to end. Fetches the default corpus and the
# bert-base-uncased vocabulary (skipped when present), tokenizes the corpus into shards, pretrains
# configs/pretrain.ini (resuming if an earlier run was interrupted), evaluates the final
# checkpoint against the unigram baseline, and plots the curves into the run directory.
# Arguments (make pretrain PRETRAIN_ARGS="..."):
#   --set section.key=value   a config override, for every step (e.g. --set train.max_steps=20)
#   --overwrite               train again from scratch: realpos moves the old run aside
#                             (RUN_DIR.replaced-DATE-TIME)
#   anything else             to `realpos pretrain` only (e.g. --init CKPT)
# PRETRAIN_CONFIG=FILE runs another config the same way (the default corpus and vocabulary are
# then not fetched: the config names its own).
set -euo pipefail
cd "$(dirname "$0")/.."
config=${PRETRAIN_CONFIG:-configs/pretrain.ini}
given="$*" # for the messages: the command that works repeats the user's own arguments
sets=() pretrain_only=() overwrite=()
while [ $# -gt 0 ]; do
  case $1 in
    --set) [ $# -ge 2 ] || { echo "pretrain: --set expects section.key=value" >&2; exit 1; }
           sets+=(--set "$2"); shift 2 ;;
    --set=*) sets+=("$1"); shift ;;
    --overwrite) overwrite=(--overwrite); shift ;;
    *) pretrain_only+=("$1"); shift ;;
  esac
done
# train_key KEY: the effective [train] KEY (other sections have keys of the same name).
effective=$(./realpos config "$config" "${sets[@]}")
train_key() {
  awk -F' = ' -v key="$1" '/^\[/ { section = $0 } section == "[train]" && $1 == key { print $2 }' <<<"$effective"
}
run_dir=$(train_key run_dir)
max_steps=$(train_key max_steps)
[[ "$max_steps" =~ ^[0-9]+$ && -n "$run_dir" ]] ||
  { echo "pretrain: could not read [train] max_steps/run_dir from 'realpos config $config'" >&2; exit 1; }

if [ -z "${PRETRAIN_CONFIG:-}" ]; then
  bash scripts/fetch_corpus.sh data/corpus
  [ -s data/vocab/bert-base-uncased.txt ] || bash scripts/get_vocab.sh data/vocab/bert-base-uncased.txt
fi
./realpos prepare "$config" "${sets[@]}"

final=$(printf '%s/ckpt-%07d.h5' "$run_dir" "$max_steps")
if [ ${#overwrite[@]} -gt 0 ]; then
  ./realpos pretrain "$config" "${sets[@]}" "${pretrain_only[@]}" --overwrite
elif [ -s "$final" ]; then
  again=${given:+$given }--overwrite
  [[ "$again" == *" "* ]] && again="\"$again\""
  echo "pretrain: $final exists: this run is complete (evaluating and plotting it again). To train it again" \
    "from scratch: make pretrain PRETRAIN_ARGS=$again (moves $run_dir aside to" \
    "$run_dir.replaced-DATE-TIME); to keep it, train into another directory:" \
    "make pretrain PRETRAIN_ARGS=\"${given:+$given }--set train.run_dir=$run_dir-2\""
elif [ -s "$run_dir/latest" ] && [ -s "$run_dir/$(head -n 1 "$run_dir/latest")" ]; then
  ./realpos pretrain "$config" "${sets[@]}" "${pretrain_only[@]}" --resume "$run_dir/latest"
else
  ./realpos pretrain "$config" "${sets[@]}" "${pretrain_only[@]}"
fi
./realpos eval "$config" "${sets[@]}" --checkpoint "$final"
/usr/bin/python3 scripts/plot.py "$run_dir" --out "$run_dir/curves.png"
echo "pretrain: checkpoint $final, curves $run_dir/curves.png, metrics $run_dir/metrics.csv"
