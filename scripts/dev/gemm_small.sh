#!/usr/bin/env bash
# The direct small-product kernel against OpenBLAS, shape by shape, interleaved
# (scripts/dev/gemm_small.c). Needs `make` first (links build/librealpos.a). One thread.
# Usage: scripts/dev/gemm_small.sh [--avx2] [--rounds R] TA TB M N K ...
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build/profile; mkdir -p "$out"
cc -std=c11 -D_GNU_SOURCE -I. -O2 -g -Wall -Wextra -Werror -fopenmp \
  -I/usr/include/x86_64-linux-gnu/openblas-openmp/ -o "$out/gemm_small" scripts/dev/gemm_small.c \
  build/librealpos.a $(pkg-config --libs openblas) -lm
OMP_NUM_THREADS=1 exec "$out/gemm_small" "$@"
