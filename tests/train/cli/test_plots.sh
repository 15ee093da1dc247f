#!/usr/bin/env bash
# The figures: scripts/plot.py on a tiny realpos run (curves.png written, the documented command),
# then tests/train/cli/test_plots.py on the figures of plot.py, sweep_report.py and
# analyze_attention.py.
source "$(dirname "$0")/../../lib.sh"
export OMP_NUM_THREADS=1
synthetic_corpus "$tmp" 60 60 11
tiny_pretrain_ini "$tmp/p.ini" model.vocab_size=65 train.max_steps=6 train.log_interval=2 train.eval_interval=3 \
  data.max_seq_len=24
"$RP" prepare "$tmp/p.ini" >/dev/null 2>&1 && "$RP" pretrain "$tmp/p.ini" >/dev/null 2>&1 || { fail "a tiny run"; exit 1; }
out=$($PY scripts/plot.py "$tmp/run" 2>&1)
if [ "$out" = "wrote $tmp/run/curves.png" ] && [ -s "$tmp/run/curves.png" ]; then pass "plot.py RUN_DIR writes RUN_DIR/curves.png"
else fail "plot.py RUN_DIR writes RUN_DIR/curves.png" "$out"; fi
MPLCONFIGDIR="$tmp/mpl" $PY tests/train/cli/test_plots.py "$tmp/run"
exit 0
