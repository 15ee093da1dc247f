#!/usr/bin/env bash
# The GEMM-only ceiling of realpos bench's step (scripts/dev/gemm_ceiling.c): builds the tool over
# build/librealpos.a (run `make` first) and runs it with realpos bench's arguments, OpenMP waiting
# passively as in scripts/dev/bench.sh. OMP_NUM_THREADS is the caller's.
# Usage: scripts/dev/gemm_ceiling.sh [--replays R] [--clock wall|cpu] CONFIG.ini --batch-size B --seq-len L [--against OTHER.ini] ...
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build/profile; mkdir -p "$out"
pkgs="hdf5 inih libcjson libutf8proc openblas ompi-c zlib libzstd"
cc -std=c11 -D_GNU_SOURCE -I. -O2 -g -Wall -Wextra -Werror -fopenmp $(pkg-config --cflags $pkgs) \
  -o "$out/gemm_ceiling" scripts/dev/gemm_ceiling.c build/librealpos.a \
  -Wl,--wrap=cblas_sgemm,--wrap=gemm_small,--wrap=gemm_small_bias,--wrap=train_step $(pkg-config --libs $pkgs) -ldnnl -lm
OMP_WAIT_POLICY=PASSIVE exec "$out/gemm_ceiling" "$@"
