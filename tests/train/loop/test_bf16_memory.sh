#!/usr/bin/env bash
# Peak memory of bf16 training against fp32 (issue 37: "peak RSS not above fp32's"), on bert-mini's
# 32 x 128 step (`realpos bench`, one step, the peak probes of a fresh cache included):
# - a bf16 step's peak RSS is not above an fp32 step's: GELU's output and slope in bf16 (64 MB less)
#   outweigh the weights' bf16 copy (22 MB), the bf16 scratch and oneDNN's memory;
# - the bf16 peak's probes borrow the activations (dead between steps, train/loop/step.c): the bench
#   reports the bytes of operands the probes allocated themselves (`bf16_probe_own_bytes`), 0 when
#   they borrow, and with buffers of their own (REALPOS_TEST_PROBE_OWN=1) bert-mini's largest
#   product's operands: A and B 4096 x 1024 in bf16, C in fp32, 32 MiB. (Before, this compared the
#   two runs' peak RSS, which the libraries' own memory moved by +-8 MB from run to run.)
# On a CPU without bf16 the emulation runs the same layout.
source "$(dirname "$0")/../../lib.sh"
if ! "$RP" --version | grep -q 'bf16: available'; then
  echo "SKIP test_bf16_memory oneDNN: skipped: no avx512_bf16 on this CPU (the runs below use the emulation)"
  export REALPOS_BF16_EMULATE=1
fi
json=$(mktemp)
trap 'rm -f "$json" "$json.own" "$json.fp32"' EXIT
bench() { # PRECISION JSON [env...]: the bench's peak RSS in MB
  local precision=$1 out=$2; shift 2
  env "$@" "$RP" bench configs/bert-mini.ini --batch-size 32 --seq-len 128 --steps 1 --warmup 0 \
    --set train.precision="$precision" --json "$out" 2>&1 | sed -n 's/.*peak RSS \([0-9]*\) MB.*/\1/p'
}
own_bytes() { "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["bf16_probe_own_bytes"])' "$1"; }
fp32=$(bench fp32 "$json.fp32" REALPOS_PEAK_CACHE=off)
bf16=$(bench bf16 "$json" REALPOS_PEAK_CACHE=off)
bench bf16 "$json.own" REALPOS_PEAK_CACHE=off REALPOS_TEST_PROBE_OWN=1 >/dev/null
if [ -z "$fp32" ] || [ -z "$bf16" ]; then
  fail "bench printed its peak RSS" "fp32 '$fp32', bf16 '$bf16'"
  exit 0
fi
if [ "$bf16" -le "$fp32" ]; then pass "bf16 peak RSS ($bf16 MB) not above fp32's ($fp32 MB), probes included"
else fail "bf16 peak RSS ($bf16 MB) not above fp32's ($fp32 MB), probes included"; fi
borrowed=$(own_bytes "$json" 2>&1) own=$(own_bytes "$json.own" 2>&1)
expected=$(( (4096 * 1024 * 2) * 2 + 4096 * 1024 * 4 ))
if [ "$borrowed" = 0 ] && [ "$own" = "$expected" ]; then
  pass "the bf16 probes borrow the activations: they allocated 0 bytes of operands (with their own buffers $own)"
else
  fail "the bf16 probes borrow the activations: they allocated '$borrowed' bytes of operands, expected 0 (with their own buffers '$own', expected $expected)"
fi
