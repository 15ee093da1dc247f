#!/usr/bin/env bash
# The tagging entity metric (train/tasks/tag_metrics.c) against the independent Python reference
# of seqeval's default scoring (tests/reference/seqeval_reference.py) on random BIO sequences
# (I- after O, type changes, lone I-): the same right / predicted / gold entity counts.
set -u
cd "$(dirname "$0")/../../.."
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
for seed in 1 2 3; do
  /usr/bin/python3 tests/reference/seqeval_reference.py --random "$seed" --count 400 "$dir/seq$seed.txt"
  want=$(/usr/bin/python3 tests/reference/seqeval_reference.py --score "$dir/seq$seed.txt")
  got=$(build/tests/train/tasks/test_tag_metrics "$dir/seq$seed.txt")
  if [ "$want" = "$got" ]; then echo "PASS seed $seed: entity counts (right predicted gold) $got equal the reference"
  else echo "FAIL seed $seed: entity counts $got, the reference $want"; fi
done
