#!/usr/bin/env bash
# Two builds' time for one point of the synthetic suite (configs/sweeps/positions-synthetic.ini:
# `realpos finetune` of its base config on TASK's training file, its test file as the dev file,
# both written as scripts/sweep.py writes them, from the sweep file's [synth] section), paired: in
# each round both builds run at once, one thread each, one per core (the way the suite runs them
# with --jobs 2), and swap cores the next round, so that both see the same host, and neither
# core's own speed favours one. Prints each round's CPU seconds (user + sys)
# and A/B, then the median [min..max] of A/B. Extra arguments go to both runs (e.g. --set
# model.relative_position=none --set model.absolute_position=yes, or --set task.max_steps=2000).
# Needs 2 CPUs and taskset; the data is written once by B's `realpos synth` into OUT/data.
# Usage: scripts/dev/point_pair.sh [--rounds R] [--task TASK] [--out DIR] A=REALPOS B=REALPOS [-- ARGS...]
set -euo pipefail
rounds=4 task=duplicate out=build/point_pair
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --task) task=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *=*) break ;;
    *) echo "point_pair.sh: unknown argument '$1' (usage: see the header)" >&2; exit 2 ;;
  esac
done
[[ $# -ge 2 && "$1" == *=* && "$2" == *=* ]] || { echo "point_pair.sh: expected A=REALPOS B=REALPOS" >&2; exit 2; }
label_a=${1%%=*} bin_a=${1#*=} label_b=${2%%=*} bin_b=${2#*=}
shift 2
[[ $# -eq 0 || "$1" == "--" ]] || { echo "point_pair.sh: extra arguments go after --, got '$1'" >&2; exit 2; }
[[ $# -eq 0 ]] || shift
for bin in "$bin_a" "$bin_b"; do
  [[ -x "$bin" ]] || { echo "point_pair.sh: $bin is not an executable (build it first)" >&2; exit 2; }
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "point_pair.sh: --rounds: expected a positive integer, got '$rounds'" >&2; exit 2; }
(( $(nproc) >= 2 )) || { echo "point_pair.sh: needs 2 CPUs (one a run), this machine has $(nproc)" >&2; exit 2; }
command -v taskset >/dev/null || { echo "point_pair.sh: needs taskset (util-linux)" >&2; exit 2; }

bin_a=$(realpath "$bin_a") bin_b=$(realpath "$bin_b") out=$(realpath -m "$out")
cd "$(dirname "$0")/../.."
# the suite's base config, then each data file: its path and its `realpos synth` arguments (tab-separated)
mapfile -t suite < <(/usr/bin/python3 - configs/sweeps/positions-synthetic.ini "$task" "$out" <<'PY'
import sys
sys.path.insert(0, "scripts")
import sweep_spec, sweep_synth
spec = sweep_spec.parse_sweep(sys.argv[1])
spec["out"] = sys.argv[3]
print(spec["base"])
for path, args in sweep_synth.data_commands(spec, sys.argv[2]):
    print("\t".join([path] + args))
PY
)
(( ${#suite[@]} == 3 )) || { echo "point_pair.sh: configs/sweeps/positions-synthetic.ini: no suite files for task $task" >&2; exit 2; }
base=${suite[0]}
mkdir -p "$out/data"
for line in "${suite[@]:1}"; do
  IFS=$'\t' read -r -a file <<<"$line"
  [[ -s "${file[0]}" ]] || "$bin_b" synth "${file[@]:1}" --out "${file[0]}"
done
IFS=$'\t' read -r train _ <<<"${suite[1]}"
IFS=$'\t' read -r test _ <<<"${suite[2]}"

# one run: CPU seconds into $dir/seconds; the run's log in $dir/log
run() { # core label binary dir args...
  local core=$1 label=$2 bin=$3 dir=$4; shift 4
  rm -rf "$dir"; mkdir -p "$dir"
  if ! /usr/bin/time -f "%U %S" -o "$dir/time" taskset -c "$core" env OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE \
      "$bin" finetune "$base" --set task.train_file="$train" --set task.dev_file="$test" \
      --set train.threads=1 --set train.run_dir="$dir/run" "$@" >"$dir/log" 2>&1 ||
     ! grep -q "fine-tuned checkpoint" "$dir/log"; then
    echo "point_pair.sh: $label ($bin) failed; its log: $dir/log" >&2; tail -3 "$dir/log" >&2; return 1
  fi
  awk '{printf "%.2f\n", $1 + $2}' "$dir/time" >"$dir/seconds"
}

ratios=()
for r in $(seq 1 "$rounds"); do
  core_a=$(( (r + 1) % 2 )) core_b=$(( r % 2 ))
  run "$core_a" "$label_a" "$bin_a" "$out/a" "$@" & pid_a=$!
  run "$core_b" "$label_b" "$bin_b" "$out/b" "$@" & pid_b=$!
  wait "$pid_a" && wait "$pid_b" || exit 1
  sa=$(cat "$out/a/seconds") sb=$(cat "$out/b/seconds")
  awk -v b="$sb" 'BEGIN { exit !(b > 0) }' ||
    { echo "point_pair.sh: $label_b took no measurable CPU time ($sb s); its log: $out/b/log" >&2; exit 1; }
  ratio=$(awk -v a="$sa" -v b="$sb" 'BEGIN { printf "%.3f", a / b }')
  ratios+=("$ratio")
  echo "round $r: $label_a $sa s (cpu $core_a), $label_b $sb s (cpu $core_b), $label_a/$label_b $ratio"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk -v l="$label_a/$label_b" -v t="$task" \
  '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
     printf "%s, %s, %d rounds: median %.3f [%.3f..%.3f]\n", t, l, NR, m, v[1], v[NR] }'
