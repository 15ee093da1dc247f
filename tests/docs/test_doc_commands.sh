#!/usr/bin/env bash
# Every ```sh block of README.md and docs/*.md, run (<!-- doc-test: run -->) or its command lines
# checked (<!-- doc-test: check-only (why) -->) by tests/docs/doc_commands.py; an unmarked block
# fails (docs/README.md, "Commands in the docs"). First the checker itself, on small documents
# each holding one mistake it must catch (and one clean one it must pass).
source "$(dirname "$0")/../lib.sh"
check=tests/docs/doc_commands.py

# doc_case NAME EXPECT TEXT: the checker on a document holding TEXT prints a FAIL line containing
# EXPECT (or, for EXPECT = clean, only PASS lines and exit status 0).
doc_case() {
  local name=$1 expect=$2 text=$3 doc out rc
  doc="$tmp/case-$name.md"; mkdir -p "$tmp/scratch-$name"
  printf '%s\n' "$text" > "$doc"
  out=$($PY "$check" --realpos "$RP" --scratch "$tmp/scratch-$name" --timeout 120 "$doc" 2>&1); rc=$?
  if [ "$expect" = clean ]; then
    if [ $rc -eq 0 ] && ! grep -q '^FAIL' <<<"$out" && grep -q '^PASS' <<<"$out"; then pass "doc checker: $name"
    else fail "doc checker: $name" "expected only PASS lines, status $rc: $(head -c 600 <<<"$out")"; fi
  elif [ $rc -ne 0 ] && grep '^FAIL' <<<"$out" | grep -qF -- "$expect"; then pass "doc checker: $name"
  else fail "doc checker: $name" "expected a FAIL line with '$expect', status $rc: $(head -c 600 <<<"$out")"; fi
}
F='```'
doc_case clean clean "$(printf '%s\n' \
  '<!-- doc-test: check-only (a synopsis) -->' "${F}sh" \
  './realpos pretrain configs/tiny.ini --set model.relative_position=method4 \' \
  '    --set train.max_steps=5 [--resume RUN_DIR | --init CKPT]   # a comment --not-a-flag' \
  'mpirun -np 2 ./realpos eval CONFIG.ini --checkpoint CKPT [--max-seq-len N]' \
  '/usr/bin/python3 scripts/sweep.py configs/sweeps/ablation-small.ini --jobs 2' \
  'make test && make pretrain PRETRAIN_ARGS="--set train.max_steps=20"   # make targets' "$F" '' \
  '<!-- doc-test: run -->' "${F}sh" './realpos synth reverse --lengths 1-4 --count 3 --out r.txt' "$F" \
  '<!-- doc-test: run -->' "${F}sh" 'test -s r.txt   # the blocks of a file share a directory' "$F")"
doc_case unmarked "(unmarked)" "$(printf '%s\n' 'text' "${F}sh" './realpos --version' "$F")"
doc_case bash-fence "(fence)" "$(printf '%s\n' '<!-- doc-test: run -->' "${F}bash" './realpos --version' "$F")"
doc_case no-reason "unknown marker" "$(printf '%s\n' '<!-- doc-test: check-only -->' "${F}sh" './realpos --version' "$F")"
doc_case stray-marker "not right before" "$(printf '%s\n' '<!-- doc-test: run -->' 'text' "${F}sh" './realpos --version' "$F")"
doc_case renamed-flag "option --checkpoint-file is not in" "$(printf '%s\n' '<!-- doc-test: check-only (x) -->' "${F}sh" \
  './realpos eval configs/tiny.ini --checkpoint-file CKPT' "$F")"
doc_case flag-in-brackets "option --max-len is not in" "$(printf '%s\n' '<!-- doc-test: check-only (x) -->' "${F}sh" \
  './realpos eval CONFIG.ini --checkpoint CKPT [--json OUT | --max-len N]' "$F")"
doc_case unknown-command "realpos evaluate: no such command" "$(printf '%s\n' '<!-- doc-test: check-only (x) -->' "${F}sh" \
  'srun --mpi=pmix ./realpos evaluate configs/tiny.ini' "$F")"
doc_case unknown-key "--set train.max_step: no such key" "$(printf '%s\n' '<!-- doc-test: check-only (x) -->' "${F}sh" \
  './realpos pretrain CONFIG.ini --set train.max_step=5' "$F")"
doc_case refused-value "model.num_heads" "$(printf '%s\n' '<!-- doc-test: check-only (x) -->' "${F}sh" \
  './realpos pretrain configs/tiny.ini --set model.num_heads=5' "$F")"
doc_case key-without-effect "model.t5_num_buckets" "$(printf '%s\n' '<!-- doc-test: check-only (x) -->' "${F}sh" \
  './realpos pretrain configs/tiny.ini --set model.t5_num_buckets=16' "$F")"
doc_case sweep-flag "scripts/sweep.py: option --job is not in" "$(printf '%s\n' '<!-- doc-test: check-only (x) -->' "${F}sh" \
  '/usr/bin/python3 scripts/sweep.py configs/sweeps/ablation-small.ini --job 2' "$F")"
doc_case missing-file "no such file: configs/no-such.ini" "$(printf '%s\n' '<!-- doc-test: check-only (x) -->' "${F}sh" \
  './realpos config configs/no-such.ini' "$F")"
doc_case make-target "make pretrian: no such target" "$(printf '%s\n' '<!-- doc-test: check-only (x) -->' "${F}sh" \
  'make pretrian PRETRAIN_ARGS="--set train.max_steps=20"' "$F")"
doc_case failing-run "(run): exit status" "$(printf '%s\n' '<!-- doc-test: run -->' "${F}sh" \
  './realpos synth reverse --lengths 1-4 --count 3 --seeds 1 --out r.txt' "$F")"

# docs/README.md, the manual's index, links every page of docs/.
index_check() {
  local index=$1 dir=$2 missing=() f
  for f in "$dir"/*.md; do
    [ "$(basename "$f")" = README.md ] || grep -qF "]($(basename "$f"))" "$index" || missing+=("$(basename "$f")")
  done
  [ ${#missing[@]} -eq 0 ] || { echo "not in $index: ${missing[*]}"; return 1; }
}
why=$(index_check docs/README.md docs) && pass "docs/README.md links every page of docs/" ||
  fail "docs/README.md links every page of docs/" "$why"
mkdir -p "$tmp/index"; cp docs/README.md "$tmp/index/"; : > "$tmp/index/new-page.md"
index_check "$tmp/index/README.md" "$tmp/index" >/dev/null && fail "index check catches a page missing from the index" ||
  pass "index check catches a page missing from the index"

# The docs themselves (the blocks that run take seconds each on a tiny model; the cap is generous).
mkdir -p "$tmp/docs"
$PY "$check" --realpos "$RP" --scratch "$tmp/docs" --timeout 900 README.md docs/*.md
