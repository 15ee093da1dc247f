#!/usr/bin/env bash
# realpos prepare end to end on the fixtures, one check per bad input (non-zero exit, one clear
# "realpos: error: ..." line naming the file or key, no shard written), and the offline skip
# logic of scripts/fetch_corpus.sh. Uses ./realpos (make realpos).
source "$(dirname "$0")/../../lib.sh"
FIX="$PWD/tests/fixtures/corpus"
FETCH="$PWD/scripts/fetch_corpus.sh"
cd "$tmp"

# config NAME CORPUS... : a config NAME.ini with its own shard_dir NAME.shards
config() {
  local name=$1; shift
  printf '[data]\ncorpus = %s\nvocab = %s\nshard_dir = %s.shards\neval_fraction = 0.3\n' \
    "$*" "${VOCAB:-$FIX/vocab.txt}" "$name" >"$name.ini"
}

# expect_error NAME MESSAGE: `realpos prepare NAME.ini` exits non-zero with the single stderr line
# "realpos: error: MESSAGE" (a trailing '*' matches as a prefix) and writes no shard.
expect_error() {
  local name=$1 message=$2 got
  "$RP" prepare "$name.ini" >out 2>err
  local rc=$?
  got=$(grep -v '^\[' err) # drop the timestamped progress line
  if [ "$rc" -eq 0 ]; then fail "$name" "exit 0"
  elif [ "$(echo "$got" | wc -l)" -ne 1 ]; then fail "$name" "expected one error line, got: $got"
  elif [[ "$message" == *'*' && "$got" != "realpos: error: ${message%'*'}"* ]] ||
       [[ "$message" != *'*' && "$got" != "realpos: error: $message" ]]; then
    fail "$name" "expected 'realpos: error: $message', got '$got'"
  elif [ -n "$(ls "$name.shards" 2>/dev/null)" ]; then fail "$name" "wrote $(ls "$name.shards")"
  else pass "$name: $message"; fi
}

# A good run, with an override.
config good "$FIX/docs_a.txt" "$FIX/docs_b.txt"
if "$RP" prepare good.ini --set data.seed=3 >out 2>err; then
  if [ -f good.shards/train.h5 ] && [ -f good.shards/eval.h5 ] && [ "$(ls -A good.shards | wc -l)" -eq 2 ] &&
     grep -q '^train .*: 4 documents' out && grep -q '^eval .*: 2 documents' out; then
    pass "prepare: train.h5 (4 documents) and eval.h5 (2), no temporary file"
  else fail "prepare" "$(ls -A good.shards) / $(cat out)"; fi
else fail "prepare" "exit $?: $(cat err)"; fi

config missing_file "$FIX/docs_a.txt" "$tmp/missing.txt"
expect_error missing_file "$tmp/missing.txt: cannot open corpus file ([data] corpus): No such file or directory"

printf '\n  \n\t\n' >blank.txt
config empty_corpus "$tmp/blank.txt"
expect_error empty_corpus "[data] corpus ($tmp/blank.txt): no sentences: every line is blank"

printf '\001\n\n\002\003\n' >control.txt
config empty_documents "$tmp/control.txt"
expect_error empty_documents "[data] corpus ($tmp/control.txt): all 2 documents are empty:*"

printf 'one document.\nof two sentences.\n' >single.txt
config one_document "$tmp/single.txt"
expect_error one_document "[data] eval_fraction = 0.3 holds out 1 of the corpus's 1 documents, leaving none for training:*"

grep -v MASK "$FIX/vocab.txt" >no_mask.txt
VOCAB="$tmp/no_mask.txt" config no_mask_token "$FIX/docs_a.txt"
expect_error no_mask_token "vocabulary $tmp/no_mask.txt has no [MASK] token*"

VOCAB="$tmp/absent_vocab.txt" config missing_vocab "$FIX/docs_a.txt"
expect_error missing_vocab "$tmp/absent_vocab.txt: cannot open vocabulary ([data] vocab): No such file or directory"

if "$RP" prepare >out 2>err; then fail "prepare without a config" "exit 0"
elif grep -q 'usage: realpos prepare' err; then pass "prepare without a config: usage, non-zero exit"
else fail "prepare without a config" "$(cat err)"; fi

# fetch_corpus.sh: files matching the manifest are skipped without touching the network; a
# changed file is detected (FETCH_CORPUS_OFFLINE makes that an error instead of a download).
mkdir corpus
printf 'file\tbytes\tsentences\tdocuments\tsha256\tsource\n' >corpus/MANIFEST.tsv
for f in kjv.txt web.txt sotu.txt moby_dick.txt; do
  printf 'A sentence of %s.\n' "$f" >"corpus/$f"
  printf '%s\t%s\t1\t1\t%s\ttest\n' "$f" "$(stat -c %s "corpus/$f")" "$(sha256sum "corpus/$f" | cut -d' ' -f1)" >>corpus/MANIFEST.tsv
done
if FETCH_CORPUS_OFFLINE=1 bash "$FETCH" corpus >out 2>err && [ "$(grep -c 'up to date, skipped' err)" -eq 4 ]; then
  pass "fetch_corpus.sh: the 4 files matching MANIFEST.tsv are skipped"
else fail "fetch_corpus.sh skip" "$(cat err)"; fi
echo changed >>corpus/sotu.txt
if ! FETCH_CORPUS_OFFLINE=1 bash "$FETCH" corpus >out 2>err && grep -q 'sotu.txt: missing or changed' err; then
  pass "fetch_corpus.sh: a file that no longer matches its checksum is rebuilt (refused offline)"
else fail "fetch_corpus.sh change" "$(cat err)"; fi
