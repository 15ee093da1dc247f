#!/usr/bin/env bash
# scripts/ablation_stats.py, the protocol's statistics, against independent computations (scipy
# 1.10 for the intervals, the exact binomial, McNemar, sign and Fisher tests and the bootstrap;
# exact enumeration for the bootstrap; tables worked by hand for Kaplan-Meier and the log-rank
# test): tests/train/cli/test_ablation_stats.py.
source "$(dirname "$0")/../../lib.sh"
MPLCONFIGDIR="$tmp/mpl" $PY tests/train/cli/test_ablation_stats.py "$PWD/scripts"
