#!/usr/bin/env bash
# The thread-seconds core/gemm_partition.h's grid costs against the 1-D strips before it and against
# no split, on one thread (scripts/dev/gemm_grid_cost.c). Needs build/librealpos.a (make).
# Usage: scripts/dev/gemm_grid_cost.sh [H I ROWS LABELLED VOCAB ROUNDS]   (default bert-mini 32 x 128)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build/profile; mkdir -p "$out"
cc -std=c11 -D_GNU_SOURCE -I. -O2 -g -Wall -Wextra -Werror -I/usr/include/x86_64-linux-gnu/openblas-openmp/ \
  -o "$out/gemm_grid_cost" scripts/dev/gemm_grid_cost.c build/librealpos.a \
  -L/usr/lib/x86_64-linux-gnu/openblas-openmp/ -lopenblas -fopenmp -lm
[ $# -gt 0 ] || set -- 256 1024 4096 614 30522 15
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 exec "$out/gemm_grid_cost" "$@"
