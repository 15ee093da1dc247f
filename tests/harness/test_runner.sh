#!/usr/bin/env bash
# tests/run.sh's verdicts on test scripts of known outcomes, in a copy of the runner over a
# folder of its own: a crash without a FAIL line and a Python traceback (an embedded check that
# crashed, the script exiting 0) each count as a failure; a test that only skips is skipped.
source "$(dirname "$0")/../lib.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tests" "$tmp/build/tests" "$tmp/data/vocab"
cp tests/run.sh "$tmp/tests/run.sh"
echo x >"$tmp/data/vocab/bert-base-uncased.txt" # present: the copy fetches nothing
printf 'echo "PASS one"\necho "PASS two"\n' >"$tmp/tests/test_a_ok.sh"
printf 'echo "PASS before"\n/usr/bin/python3 -c "import sys; print(\\"PASS in python\\"); {}[1]"\necho "PASS after"\n' \
  >"$tmp/tests/test_b_traceback.sh"
printf 'echo "PASS before"\nexit 3\n' >"$tmp/tests/test_c_crash.sh"
printf 'echo "SKIP no data"\n' >"$tmp/tests/test_d_skip.sh"
out=$(bash "$tmp/tests/run.sh" 2>&1); rc=$?
last=$(tail -n 1 <<<"$out")
if [ "$rc" -ne 0 ] && [ "$last" = "6 passed, 2 failed, 1 skipped" ]; then
  pass "run.sh: a traceback and a crash are failures, the PASS lines around them counted ($last, status $rc)"
else
  fail "run.sh: a traceback and a crash are failures, the PASS lines around them counted" "status $rc, '$last'"
fi
if grep -q "FAIL test_b_traceback.sh printed a Python traceback" <<<"$out" && grep -q "    KeyError: 1" <<<"$out"; then
  pass "run.sh: the traceback's test named, with its exception"
else
  fail "run.sh: the traceback's test named, with its exception" "$(head -c 600 <<<"$out")"
fi
rm "$tmp/tests/test_b_traceback.sh" "$tmp/tests/test_c_crash.sh"
out=$(bash "$tmp/tests/run.sh" 2>&1); rc=$?
if [ "$rc" -eq 0 ] && [ "$(tail -n 1 <<<"$out")" = "2 passed, 0 failed, 1 skipped" ]; then
  pass "run.sh: control: passing and skipping tests only, status 0"
else
  fail "run.sh: control: passing and skipping tests only, status 0" "status $rc, $(tail -n 1 <<<"$out")"
fi
