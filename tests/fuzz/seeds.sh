#!/usr/bin/env bash
# Seed inputs of the fuzz harnesses, built from the test fixtures into DIR/TARGET (checkpoints
# are made with ./realpos init from tests/fixtures/finetune/tiny.ini, shrunk). Used by
# tests/fuzz/run.sh and, as inputs that must load, by tests/train/cli/test_fuzz_replay.sh.
#   bash tests/fuzz/seeds.sh DIR
set -u
cd "$(dirname "$0")/../.."
dir=$1
rm -rf "$dir"; mkdir -p "$dir"/{config,tokenizer,glue,squad,checkpoint}
cp configs/*.ini tests/fixtures/sweep/*.ini tests/fixtures/parity.ini "$dir/config/"
cp tests/fixtures/finetune/tiny.ini "$dir/config/finetune-tiny.ini"
cp tests/fixtures/tokenizer/*.txt tests/fixtures/corpus/docs_a.txt "$dir/tokenizer/"
cp tests/fixtures/finetune/*.tsv "$dir/glue/"
cp tests/fixtures/finetune/*.json "$dir/squad/"
rp=${REALPOS:-./realpos}
[ -x "$rp" ] || { echo "seeds.sh: $rp missing (make realpos)" >&2; exit 1; }
small="--set model.hidden_size=8 --set model.intermediate_size=8 --set model.num_layers=1 --set model.max_position=8 --set data.max_seq_len=8"
i=0
for mode in "" "--set model.relative_position=method4 --set model.relative_k=2 --set model.residual_attention=yes" \
            "--set model.relative_position=method1 --set model.absolute_position=no --set model.norm=pre"; do
  # shellcheck disable=SC2086
  "$rp" init tests/fixtures/finetune/tiny.ini $small $mode --out "$dir/checkpoint/init$i.h5" >/dev/null 2>&1 ||
    { echo "seeds.sh: realpos init failed for '$mode'" >&2; exit 1; }
  i=$((i + 1))
done
