# Shared by the tests against the float64 PyTorch reference (test_parity.sh: padded batches,
# test_parity_unpadded.sh: unpadded, test_parity_bf16.sh: bf16 products), sourced from the
# repository's root: the common setting, the case table and the init / perturb / batch / dump /
# compare pipeline. The caller then sets B, L, SCALE and STEPS, calls add_case for each case and
# parity_compare_cases once; Python runs in two batched processes (`reference.py jobs`) to pay the
# torch import once.

PY=/usr/bin/python3
REF=tests/reference/reference.py
CONFIG=tests/fixtures/parity.ini  # the small model; each case changes it with --set
REALPOS=${REALPOS:-./realpos}
# Tiny problems: idle OpenMP threads must sleep, not spin, or a busy 2-core machine crawls.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

parity_need_realpos() { # NAME: a FAIL line and exit 1 unless the engine is built
  if [ ! -x "$REALPOS" ]; then
    echo "FAIL $1: $REALPOS is not built"
    exit 1
  fi
}

labels=() sets=() kinds=()
add_case() { # KIND LABEL OVERRIDE... ; KIND is dump or trajectory
  kinds+=("$1"); labels+=("$2"); shift 2
  local s=""
  for o in "$@"; do s+=" --set $o"; done
  sets+=("$s")
}

# parity_compare_cases NAME SEED "BATCH OPTIONS" "REALPOS DUMP OPTIONS" "REFERENCE DUMP OPTIONS":
# for case i, `realpos init` then reference.py perturb (seed SEED+i) and make-batch (SEED+100+i,
# with the batch options) into $work/i; `realpos dump` and `reference.py dump` with their options
# (plus --train-steps STEPS for a trajectory); compare, one PASS/FAIL line per case.
parity_compare_cases() {
  local name=$1 seed=$2 batch_opts=$3 dump_opts=$4 ref_opts=$5
  local n=${#labels[@]} i d what steps
  local setup_jobs="$work/setup.jobs" check_jobs="$work/check.jobs"
  : >"$setup_jobs"; : >"$check_jobs"
  local -A failed=()
  for ((i = 0; i < n; i++)); do
    d="$work/$i"; mkdir -p "$d"
    # shellcheck disable=SC2086
    if ! "$REALPOS" init "$CONFIG" ${sets[$i]} --out "$d/init.h5" >"$d/init.log" 2>&1; then
      echo "FAIL ${labels[$i]}: realpos init failed: $(tail -n 1 "$d/init.log")"
      failed[$i]=1; continue
    fi
    echo "perturb --checkpoint $d/init.h5 --out $d/ckpt.h5 --seed $((seed + i)) --scale $SCALE"
    echo "make-batch --config $d/ckpt.h5 --batch-size $B --seq-len $L --seed $((seed + 100 + i))" \
      "$batch_opts --out $d/batch.h5"
  done >>"$setup_jobs"
  $PY $REF jobs "$setup_jobs" || echo "FAIL $name: reference.py perturb/make-batch failed"

  for ((i = 0; i < n; i++)); do
    [ -n "${failed[$i]:-}" ] && continue
    d="$work/$i" what=dump steps=()
    [ "${kinds[$i]}" = trajectory ] && what=trajectory steps=(--train-steps $STEPS)
    # shellcheck disable=SC2086
    if ! "$REALPOS" dump --checkpoint "$d/ckpt.h5" --batch "$d/batch.h5" --out "$d/c.h5" \
        $dump_opts "${steps[@]}" >"$d/dump.log" 2>&1; then
      echo "FAIL ${labels[$i]}: realpos dump${dump_opts:+ $dump_opts} failed: $(tail -n 1 "$d/dump.log")"
      failed[$i]=1; continue
    fi
    echo "dump --checkpoint $d/ckpt.h5 --batch $d/batch.h5 --out $d/ref.h5 $ref_opts ${steps[*]}" \
      >>"$check_jobs"
    echo "compare $d/c.h5 $d/ref.h5 --what $what --summary ${labels[$i]}" >>"$check_jobs"
  done
  $PY $REF jobs "$check_jobs" 2>"$work/check.err" | tee "$work/check.out"
  grep -v '^reference.py: job failed: compare ' "$work/check.err" | sed 's/^/  /' >&2
  for ((i = 0; i < n; i++)); do  # a case whose reference dump or compare crashed
    [ -n "${failed[$i]:-}" ] || grep -q "^[A-Z]* ${labels[$i]}: " "$work/check.out" ||
      echo "FAIL ${labels[$i]}: no comparison result (reference error above)"
  done
}
