#!/usr/bin/env bash
# Process CPU time of one encoder layer (forward, backward: min and median over REPS calls) at the
# bench's shapes, for LABEL=LIBRARY versions side by side, ROUNDS interleaved rounds (each line one
# run; compare medians over rounds). Needs `make` first (build/librealpos.a). The libraries must
# match this tree's layers/encoder.h.
# Usage: scripts/dev/profile_layer.sh [--rounds N] [--reps N] [--threads N] [LABEL=LIBRARY ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=3; reps=6; threads=1; libs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift ;;
    --reps) reps=$2; shift ;;
    --threads) threads=$2; shift ;;
    *=*) libs+=("$1") ;;
    *) echo "usage: $0 [--rounds N] [--reps N] [--threads N] [LABEL=LIBRARY ...]" >&2; exit 2 ;;
  esac
  shift
done
[ ${#libs[@]} -gt 0 ] || libs=("this=build/librealpos.a")
out=build/profile; mkdir -p "$out"
for lib in "${libs[@]}"; do
  cc -std=c11 -D_GNU_SOURCE -I. -O2 -g -Wall -Wextra -Werror -fopenmp $(pkg-config --cflags openblas) \
    -o "$out/profile_layer.${lib%%=*}" scripts/dev/profile_layer.c "${lib#*=}" $(pkg-config --libs openblas ompi-c) -ldnnl -lm
done
# label | B L H heads ffn mode k residual (bert-mini shapes)
cases=("mini absolute|32 128 256 4 1024 none 0 0" "mini method4 k=64 + residual|32 128 256 4 1024 method4 64 1"
       "seq512 absolute|8 512 256 4 1024 none 0 0" "seq512 method4 k=511|8 512 256 4 1024 method4 511 0")
echo "case | library | round | forward min median (ms) | backward min median (ms)"
for r in $(seq 1 "$rounds"); do
  for c in "${cases[@]}"; do
    IFS='|' read -r label args <<<"$c"
    for lib in "${libs[@]}"; do
      echo "$label | ${lib%%=*} | $r | $(OMP_WAIT_POLICY=PASSIVE "$out/profile_layer.${lib%%=*}" $args "$threads" "$reps" | tr '\n' ' ')"
    done
  done
done
