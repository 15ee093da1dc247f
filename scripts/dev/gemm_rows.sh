#!/usr/bin/env bash
# Dense bf16 products at changing row counts, the designs of issue 38 side by side
# (scripts/dev/gemm_rows.c: pre-created exact primitives, (a) a runtime row dimension, (b) rows
# rounded up to 16 or 64). OMP_NUM_THREADS is the caller's.
# Usage: scripts/dev/gemm_rows.sh H I T1 T2 ... [--rounds R]
set -euo pipefail
cd "$(dirname "$0")/../.."
out=build/profile; mkdir -p "$out"
cc -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -fopenmp -o "$out/gemm_rows" scripts/dev/gemm_rows.c -ldnnl
OMP_WAIT_POLICY=PASSIVE exec "$out/gemm_rows" "$@"
