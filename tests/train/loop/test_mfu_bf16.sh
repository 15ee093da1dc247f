#!/usr/bin/env bash
# The bf16 MFU (issue 37, train/loop/peak.h): a bf16 run divides by its own peak, probed on the step's
# bf16 products and cached in its own file, never by the fp32 sgemm peak and never raised to a
# window's rate (no "observed", no MFU pinned at 100.0%); an fp32 run neither reads nor writes the
# bf16 peak's cache, nor a bf16 run the sgemm one's. No check depends on the host's speed: the
# peaks that must not be raised are fixed far below any machine by the environment.
source "$(dirname "$0")/../../lib.sh"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
if ! "$RP" --version 2>&1 | grep -q "bf16: available"; then
  echo "SKIP test_mfu_bf16 oneDNN: skipped: no avx512_bf16 on this CPU (the runs below use the emulation)"
  export REALPOS_BF16_EMULATE=1
fi

synthetic_vocab "$tmp/vocab.txt" 80
awk 'BEGIN { srand(3); for (d = 0; d < 30; d++) { for (s = 0; s < 6; s++) { line = "";
       for (w = 0; w < 8; w++) line = line (w ? " " : "") "w" int(rand() * 80); print line "." }
       print "" } }' >"$tmp/corpus.txt"
tiny_pretrain_ini "$tmp/run.ini" model.hidden_size=64 model.num_layers=2 model.num_heads=4 model.intermediate_size=128 \
  model.max_position=64 train.batch_size=8 train.max_steps=6 train.warmup_steps=2 train.log_interval=2 \
  train.eval_interval=1000 train.checkpoint_interval=1000 train.eval_batches=1 train.threads=2 data.max_seq_len=48 \
  data.max_predictions_per_seq=8 data.eval_fraction=0.2
unset REALPOS_PEAK_GFLOPS REALPOS_PEAK_BF16_GFLOPS REALPOS_PEAK_CACHE
"$RP" prepare "$tmp/run.ini" >/dev/null 2>&1 || fail "prepare"
cache="$XDG_CACHE_HOME/realpos"

# records FILE SOURCES: every train record divides by the bf16 peak from one of SOURCES (a
# comma-separated list), mfu = gflops / peak_gflops as measured (not clamped, not raised)
records() {
  "$PY" - "$1" "$2" <<'PY'
import json, sys
recs = [r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"]
sources = sys.argv[2].split(",")
def check(name, ok, why=""):
    print(("PASS " if ok else "FAIL ") + f"mfu bf16 ({sources[0]}): " + name + ("" if ok else ": " + why))
check("three train records", len(recs) == 3, str(len(recs)))
check("each divides by the bf16 peak", all(r.get("peak_precision") == "bf16" for r in recs),
      str([r.get("peak_precision") for r in recs]))
check("the peak's source is " + " or ".join(sources), all(r["peak_source"] in sources for r in recs),
      str([r["peak_source"] for r in recs]))
check("mfu = gflops / peak_gflops", all(r["mfu"] > 0 and abs(r["mfu"] - r["gflops"] / r["peak_gflops"]) <= 1e-9 * r["mfu"]
      for r in recs), str([(r["mfu"], r["gflops"], r["peak_gflops"]) for r in recs]))
PY
}

# 1. The fp32 peak fixed far below any machine: a bf16 run does not use it (the old code divided
#    the bf16 window by it, raised it to the window and printed MFU 100.0%, source "observed").
REALPOS_PEAK_GFLOPS=0.001 "$RP" pretrain "$tmp/run.ini" --set train.precision=bf16 >"$tmp/log" 2>&1 ||
  fail "bf16 pretrain runs" "$(tail -3 "$tmp/log")"
check "bf16: no window raises the peak (no \"observed\")" bash -c "! grep -q observed '$tmp/log'"
check "bf16: no MFU 100.0%" bash -c "! grep -q 'MFU 100.0%' '$tmp/log'"
check "bf16: the start-up line names the bf16 peak, its source and its own cache" \
  grep -qE "MFU peak per rank bf16 products: [0-9.]+ GFLOP/s on 2 threads from the (probe|cache) .*$cache/peak-bf16-" "$tmp/log"
records "$tmp/run/metrics.jsonl" probe,cache
bf16_file=$(ls "$cache"/peak-bf16-*-t2.json 2>/dev/null)
check "bf16: the bf16 probes are cached in their own file, and only there" \
  test -n "$bf16_file" -a "$(ls "$cache" | wc -l)" -eq 1
check "... which says bf16, its engine and the shapes (384 tokens, 64 wide, 128 inside)" \
  "$PY" -c "import json,sys; r=json.load(open('$bf16_file')); sys.exit(not (r['precision'] == 'bf16' and r['threads'] == 2 and r['gflops'] > 0 and r['probed_on'].endswith('-T384xH64xI128')))"
cp "$bf16_file" "$tmp/bf16-cache-before"

# 2. An fp32 run with only the bf16 cache present probes and caches its own peak, leaves the bf16
#    file alone; a second bf16 run reads the bf16 file again.
"$RP" pretrain "$tmp/run.ini" --set train.run_dir="$tmp/run32" >"$tmp/log32" 2>&1 ||
  fail "fp32 pretrain runs" "$(tail -3 "$tmp/log32")"
fp32_file=$(ls "$cache"/peak-*-t2.json | grep -v /peak-bf16-)
check "fp32 beside a bf16 cache: names its own cache file, not the bf16 one" \
  bash -c "grep -q 'MFU peak per rank fp32 sgemm: .*$fp32_file' '$tmp/log32' && ! grep 'MFU peak per rank' '$tmp/log32' | grep -q peak-bf16-"
check "... writes its own entry (fp32, its OpenBLAS core)" \
  "$PY" -c "import json,sys; r=json.load(open('$fp32_file')); sys.exit(not (r['precision'] == 'fp32' and r['openblas_core']))"
check "... and leaves the bf16 file as it was" cmp -s "$bf16_file" "$tmp/bf16-cache-before"
"$PY" -c "import json; r=json.load(open('$fp32_file')); r['gflops']=r['gflops']*1.0001; json.dump(r, open('$fp32_file','w'))"
cp "$fp32_file" "$tmp/fp32-cache-before"
"$RP" pretrain "$tmp/run.ini" --set train.precision=bf16 --set train.run_dir="$tmp/run16b" >"$tmp/log16b" 2>&1 ||
  fail "second bf16 pretrain runs" "$(tail -3 "$tmp/log16b")"
check "a bf16 run reads the bf16 cache, not the fp32 one" \
  bash -c "grep 'MFU peak per rank' '$tmp/log16b' | grep -q 'cache [0-9.]* (probed .*) in $bf16_file' && ! grep 'MFU peak per rank' '$tmp/log16b' | grep -qF '$fp32_file'"
check "... and leaves the fp32 file as it was" cmp -s "$fp32_file" "$tmp/fp32-cache-before"
cp "$bf16_file" "$tmp/bf16-cache-after-16b"

"$RP" pretrain "$tmp/run.ini" --set train.precision=bf16 --set train.batch_size=4 --set train.max_steps=2 \
  --set train.run_dir="$tmp/run16d" >"$tmp/log16d" 2>&1 || fail "bf16 pretrain of batch 4 runs" "$(tail -3 "$tmp/log16d")"
check "another shape (batch 4: 192 tokens) is another bf16 entry, the first left as it was" \
  bash -c "grep -q 'MFU peak per rank bf16 products: .*peak-bf16-.*-T192xH64xI128-t2.json' '$tmp/log16d' && test \$(ls '$cache'/peak-bf16-* | wc -l) -eq 2 && cmp -s '$bf16_file' '$tmp/bf16-cache-after-16b'"

# 3. The bf16 peak fixed far below any machine is never raised: MFU far above 100%, as measured.
REALPOS_PEAK_BF16_GFLOPS=0.001 REALPOS_PEAK_GFLOPS=0.001 "$RP" pretrain "$tmp/run.ini" --set train.precision=bf16 \
  --set train.run_dir="$tmp/run16c" >"$tmp/log16c" 2>&1 || fail "bf16 pretrain with REALPOS_PEAK_BF16_GFLOPS runs"
check "REALPOS_PEAK_BF16_GFLOPS: named in the start-up line" grep -q "bf16 products: 0.0 GFLOP/s on 2 threads, set by REALPOS_PEAK_BF16_GFLOPS" "$tmp/log16c"
check "... never raised: no \"observed\", no MFU 100.0%" bash -c "! grep -q 'observed\|MFU 100.0%' '$tmp/log16c'"
records "$tmp/run16c/metrics.jsonl" REALPOS_PEAK_BF16_GFLOPS
"$PY" -c "import json,sys; rs=[r for r in map(json.loads, open('$tmp/run16c/metrics.jsonl')) if r['kind']=='train']; sys.exit(not all(r['mfu'] > 1 for r in rs))" &&
  pass "... the MFU above 100% is printed as measured" || fail "... the MFU above 100% is printed as measured"
exit 0
