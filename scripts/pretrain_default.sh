#!/usr/bin/env bash
# `make pretrain`: the default pretraining run, end to end. Fetches the default corpus and the
# bert-base-uncased vocabulary (skipped when present), tokenizes the corpus into shards, pretrains
# configs/pretrain.ini (resuming if an earlier run was interrupted), evaluates the final
# checkpoint against the unigram baseline, and plots the curves into the run directory.
# Extra arguments are passed to `realpos pretrain`, e.g. --set train.max_steps=100.
set -euo pipefail
cd "$(dirname "$0")/.."
config=configs/pretrain.ini
# train_key KEY: the effective [train] KEY (other sections have keys of the same name).
effective=$(./realpos config "$config" "$@")
train_key() {
  awk -F' = ' -v key="$1" '/^\[/ { section = $0 } section == "[train]" && $1 == key { print $2 }' <<<"$effective"
}
run_dir=$(train_key run_dir)
max_steps=$(train_key max_steps)
[[ "$max_steps" =~ ^[0-9]+$ && -n "$run_dir" ]] ||
  { echo "pretrain: could not read [train] max_steps/run_dir from 'realpos config $config'" >&2; exit 1; }

bash scripts/fetch_corpus.sh data/corpus
[ -s data/vocab/bert-base-uncased.txt ] || bash scripts/get_vocab.sh data/vocab/bert-base-uncased.txt
./realpos prepare "$config"

final=$(printf '%s/ckpt-%07d.h5' "$run_dir" "$max_steps")
if [ -s "$final" ]; then
  echo "pretrain: $final exists; delete $run_dir to train again"
elif [ -s "$run_dir/latest" ] && [ -s "$run_dir/$(head -n 1 "$run_dir/latest")" ]; then
  ./realpos pretrain "$config" "$@" --resume "$run_dir/latest"
else
  ./realpos pretrain "$config" "$@"
fi
./realpos eval "$config" "$@" --checkpoint "$final"
/usr/bin/python3 scripts/plot.py "$run_dir" --out "$run_dir/curves.png"
echo "pretrain: checkpoint $final, curves $run_dir/curves.png, metrics $run_dir/metrics.csv"
