#!/usr/bin/env bash
# MFU in a real pretraining run (train/loop/peak.h): the start-up line names the peak and its source,
# every train record of metrics.jsonl carries MFU's terms (mfu = gflops / peak_gflops <= 1, the
# peak's source), the run records its probes in the per-host cache ($XDG_CACHE_HOME, which
# tests/lib.sh points into the test's scratch directory), and a peak set far below the machine's
# (REALPOS_PEAK_GFLOPS) is raised to the observed rate, never exceeded. The slow-probe cases with exact numbers are in tests/train/loop/test_peak.c.
source "$(dirname "$0")/../../lib.sh"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }

synthetic_vocab "$tmp/vocab.txt" 80
awk 'BEGIN { srand(3); for (d = 0; d < 30; d++) { for (s = 0; s < 6; s++) { line = "";
       for (w = 0; w < 8; w++) line = line (w ? " " : "") "w" int(rand() * 80); print line "." }
       print "" } }' >"$tmp/corpus.txt"
tiny_pretrain_ini "$tmp/run.ini" model.hidden_size=64 model.num_layers=2 model.num_heads=4 model.intermediate_size=128 \
  model.max_position=64 train.batch_size=8 train.max_steps=30 train.warmup_steps=5 train.log_interval=10 \
  train.eval_interval=1000 train.checkpoint_interval=1000 train.eval_batches=1 train.threads=2 data.max_seq_len=48 \
  data.max_predictions_per_seq=8 data.eval_fraction=0.2
unset REALPOS_PEAK_GFLOPS REALPOS_PEAK_CACHE
"$RP" prepare "$tmp/run.ini" >/dev/null 2>&1 || fail "prepare"

# records FILE MODE: checks of every train record (MODE measured|raised), one PASS/FAIL line each
records() {
  "$PY" - "$1" "$2" <<'PY'
import json, sys
recs = [r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"]
mode = sys.argv[2]
def check(name, ok, why=""):
    print(("PASS " if ok else "FAIL ") + f"mfu ({mode}): " + name + ("" if ok else ": " + why))
check("three train records", len(recs) == 3, str(len(recs)))
check("each names its peak, its precision and source", all({"gflops", "peak_gflops", "peak_source"} <= r.keys() and
      r.get("peak_precision") == "fp32" for r in recs))
check("mfu = gflops / peak_gflops", all(abs(r["mfu"] - r["gflops"] / r["peak_gflops"]) <= 1e-9 * r["mfu"] for r in recs),
      str([(r["mfu"], r["gflops"], r["peak_gflops"]) for r in recs]))
check("0 < mfu <= 1", all(0 < r["mfu"] <= 1 for r in recs), str([r["mfu"] for r in recs]))
if mode == "measured":
    check("source is a measurement", all(r["peak_source"] in ("probe", "cache", "observed") for r in recs),
          str([r["peak_source"] for r in recs]))
else:
    check("a peak far below the machine's is raised to the observed rate",
          all(r["peak_source"] == "observed" and r["peak_gflops"] >= r["gflops"] > 0.001 for r in recs),
          str([(r["peak_source"], r["peak_gflops"]) for r in recs]))
PY
}

"$RP" pretrain "$tmp/run.ini" >"$tmp/log" 2>&1 || fail "pretrain runs" "$(tail -3 "$tmp/log")"
check "the start-up line names the peak, its source and the cache" \
  grep -qE "MFU peak per rank fp32 sgemm: [0-9.]+ GFLOP/s on 2 threads from the (probe|cache) .*$XDG_CACHE_HOME/realpos/peak-" "$tmp/log"
records "$tmp/run/metrics.jsonl" measured
cached=$(ls "$XDG_CACHE_HOME/realpos/"peak-*-t2.json 2>/dev/null)
check "the run records its best probe in the per-host cache" test -n "$cached"
check "... whose entry names the thread count and kernel family" \
  "$PY" -c "import json,sys; r=json.load(open('$cached')); sys.exit(not (r['threads'] == 2 and r['gflops'] > 0 and r['openblas_core']))"

REALPOS_PEAK_GFLOPS=0.001 "$RP" pretrain "$tmp/run.ini" --set train.run_dir="$tmp/run2" >"$tmp/log2" 2>&1 ||
  fail "pretrain with REALPOS_PEAK_GFLOPS runs" "$(tail -3 "$tmp/log2")"
check "REALPOS_PEAK_GFLOPS: named in the start-up line" grep -q "set by REALPOS_PEAK_GFLOPS" "$tmp/log2"
check "... and the raise is logged" grep -q "MFU peak raised from 0.0" "$tmp/log2"
records "$tmp/run2/metrics.jsonl" raised
exit 0
