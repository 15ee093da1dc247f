#!/usr/bin/env bash
# scripts/sweep_report_protocol.py, the report of a [protocol] sweep, on fabricated point states:
# the learning rate each setting chooses on validation (and never on the test file: a poisoned test
# record, and test scores rewritten to favour another rate, leave every choice unchanged), each
# cell's success rate, survival and bootstrap interval and the paired and unpaired comparisons
# recomputed from results.csv: tests/train/cli/test_sweep_protocol.py.
source "$(dirname "$0")/../../lib.sh"
MPLCONFIGDIR="$tmp/mpl" $PY tests/train/cli/test_sweep_protocol.py "$PWD/scripts" "$tmp"
