#!/usr/bin/env bash
# `make test-kernels`: the C test programs and the PyTorch parity tests under each OpenBLAS kernel
# set this project meets: OPENBLAS_CORETYPE unset (OpenBLAS picks the kernels for the CPU), Haswell
# (what the environment forces on CPUs OpenBLAS 0.3.21 does not know, e.g. Zen 5) and Prescott (the
# generic kernels), and the C programs again at one thread. No verdict may depend on the kernels or
# the thread count (issue 33): a check that passes under one and fails under another is a bug.
# Ends with the sum over the settings, "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
only='^test_[a-z0-9_]+$|^test_parity(_bf16)?\.sh$|^test_hostile\.sh$' # C programs, parity, predict = dev
passed=0; failed=0; skipped=0; verdicts=()
run_setting() { # NAME, then the environment assignments of the setting
  local name=$1 log; shift
  log=$(mktemp)
  echo "== $name"
  env "$@" RP_TEST_ONLY="$only" bash tests/run.sh 2>&1 | tee "$log" | grep -E '^(FAIL|  \[)' || true
  local line; line=$(tail -n 1 "$log"); rm -f "$log"
  echo "   $line"
  verdicts+=("$name: $line")
  read -r p _ f _ k _ <<<"${line//,/}"
  passed=$((passed + ${p:-0})); failed=$((failed + ${f:-1})); skipped=$((skipped + ${k:-0}))
}
run_setting "OPENBLAS_CORETYPE unset" -u OPENBLAS_CORETYPE
run_setting "OPENBLAS_CORETYPE=Haswell" OPENBLAS_CORETYPE=Haswell
run_setting "OPENBLAS_CORETYPE=Prescott" OPENBLAS_CORETYPE=Prescott
only='^test_[a-z0-9_]+$'
run_setting "C programs at 1 thread (OPENBLAS_CORETYPE as set)" OMP_NUM_THREADS=1
printf '%s\n' "${verdicts[@]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
