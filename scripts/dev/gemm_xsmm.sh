#!/usr/bin/env bash
# gemm_small against libxsmm's JIT kernels, shape by shape, interleaved, with a bit-for-bit check
# of C (scripts/dev/gemm_xsmm.c). A measurement tool only: realpos does not link libxsmm. Needs
# `make` first (links build/librealpos.a) and libxsmm-dev (apt-get install libxsmm-dev). One thread.
# Usage: scripts/dev/gemm_xsmm.sh [--rounds R] TA TB M N K ...
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -f /usr/include/libxsmm.h ] || { echo "gemm_xsmm: libxsmm-dev is not installed (apt-get install libxsmm-dev)" >&2; exit 1; }
out=build/profile; mkdir -p "$out"
cc -std=c11 -D_GNU_SOURCE -I. -O2 -g -Wall -Wextra -Werror -fopenmp -o "$out/gemm_xsmm" scripts/dev/gemm_xsmm.c \
  build/librealpos.a -ldnnl -L/usr/lib -lxsmm $(pkg-config --libs openblas) -lpthread -lrt -ldl -lm
OMP_NUM_THREADS=1 exec "$out/gemm_xsmm" "$@"
