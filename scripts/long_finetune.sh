#!/usr/bin/env bash
# Long-sequence SQuAD fine-tuning at BERT-base shape (docs/finetune.md): fresh BERT-base
# checkpoints from `realpos init` (relative-only method4 k = 64, and absolute positions, whose
# table grows past 512), a few steps of `realpos finetune` per task.max_seq_len and batch size,
# each under /usr/bin/time -v. Prints one row per run: mode, L, B, seconds of the last step,
# sequence positions per second (B L / that step), non-padding tokens per second (the log's),
# peak RSS. Not part of `make test` (minutes per row on 2 cores).
#   usage: bash scripts/long_finetune.sh OUT_DIR [REALPOS]   (env LENGTHS, BATCHES, STEPS, MODES)
set -eu
out=${1:?usage: long_finetune.sh OUT_DIR [REALPOS]}
rp=${2:-./realpos}
lengths=${LENGTHS:-384 512 576 704}
batches=${BATCHES:-1 4}
steps=${STEPS:-2}
modes=${MODES:-method4 absolute}
squad=../shared/data/squad/train-half.json
vocab=data/vocab/bert-base-uncased.txt
[ -s "$squad" ] || { echo "long_finetune.sh: $squad missing" >&2; exit 1; }
[ -s "$vocab" ] || bash scripts/get_vocab.sh
mkdir -p "$out"
# the first two articles of the SQuAD file (a few hundred questions): enough windows for the steps
/usr/bin/python3 -c "import json, sys; d = json.load(open(sys.argv[1])); d['data'] = d['data'][:2]
json.dump(d, open(sys.argv[2], 'w'))" "$squad" "$out/squad-2.json"
base=(configs/bert-base.ini --set data.vocab=$vocab)
for mode in $modes; do  # method4: relative-only, k = 64; absolute: BERT's 512-row position table
  case $mode in
    method4) sets=(--set model.absolute_position=no --set model.relative_position=method4 --set model.relative_k=64) ;;
    absolute) sets=() ;;
    *) echo "long_finetune.sh: unknown mode $mode (method4, absolute)" >&2; exit 1 ;;
  esac
  [ -s "$out/$mode.h5" ] || "$rp" init "${base[@]}" "${sets[@]}" --out "$out/$mode.h5" 2>/dev/null
done
printf '%-9s %4s %2s %9s %11s %11s %9s\n' mode L B step_s positions/s tokens/s peak_MB
for mode in $modes; do
  for L in $lengths; do
    [ "$mode" = absolute ] && [ "$L" != 704 ] && continue  # the absolute model only where it grows
    for B in $batches; do
      run=$out/$mode-L$L-B$B
      rm -rf "$run"
      /usr/bin/time -v "$rp" finetune configs/finetune-squad.ini --set task.init_checkpoint="$out/$mode.h5" \
        --set task.train_file="$out/squad-2.json" --set task.dev_file= --set task.max_seq_len=$L \
        --set task.batch_size=$B --set task.max_steps=$steps --set train.log_interval=1 --set train.threads=2 \
        --set train.run_dir="$run" >"$run.log" 2>&1 || { echo "$mode L=$L B=$B failed: see $run.log" >&2; exit 1; }
      rm -f "$run/model.h5"
      /usr/bin/python3 - "$run" "$mode" "$L" "$B" <<'PY'
import json, re, sys
run, mode, L, B = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
recs = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if '"train"' in l]
last = recs[-1]["elapsed_s"] - (recs[-2]["elapsed_s"] if len(recs) > 1 else 0)
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", open(f"{run}.log").read()).group(1))
print(f"{mode:9s} {L:4d} {B:2d} {last:9.2f} {B * L / last:11.1f} {recs[-1]['tokens_per_s']:11.1f} {rss / 1024:9.0f}")
PY
    done
  done
done
