#!/usr/bin/env bash
# realpos prepare end to end on the fixtures, one check per bad input (non-zero exit, one clear
# "realpos: error: ..." line naming the file or key, no index written); compressed and JSON Lines
# input, bad records, duplicates, --part runs, a killed prepare resumed, incremental corpora; and
# the offline skip logic of scripts/fetch_corpus.sh. Uses ./realpos (make realpos).
source "$(dirname "$0")/../../lib.sh"
FIX="$PWD/tests/fixtures/corpus"
LIB="$PWD/tests/train/data/corpus_lib.sh"
FETCH="$PWD/scripts/fetch_corpus.sh"
cd "$tmp"

source "$LIB"

# A good run, with an override.
config good "$FIX/docs_a.txt" "$FIX/docs_b.txt"
if "$RP" prepare good.ini --set data.seed=3 >out 2>err; then
  docs=$(awk '/^(train|eval) / { d += $3 } END { print d }' out)
  if [ -f good.shards/index.json ] && [ "$(ls -A good.shards | grep -v "^\.lock" | wc -l)" -eq 5 ] && [ "$docs" -eq 6 ]; then
    pass "prepare: index.json, a shard and a manifest per file (and its .lock files), 6 documents, no temporary file"
  else fail "prepare" "$(ls -A good.shards) / $(cat out)"; fi
else fail "prepare" "exit $?: $(cat err)"; fi

config missing_file "$FIX/docs_a.txt" "$tmp/missing.txt"
expect_error missing_file "$tmp/missing.txt: cannot open corpus file ([data] corpus): No such file or directory"

printf '\n  \n\t\n' >blank.txt
config empty_corpus "$tmp/blank.txt"
expect_error empty_corpus "[data] corpus ($tmp/blank.txt): no document produced a token with vocabulary*"

printf '\001\n\n\002\003\n' >control.txt
config empty_documents "$tmp/control.txt"
expect_error empty_documents "[data] corpus ($tmp/control.txt): no document produced a token with vocabulary*"

printf 'one document.\nof two sentences.\n' >single.txt
config one_document "$tmp/single.txt"
expect_error one_document "[data] eval_fraction = 0.3 held out*"

grep -v MASK "$FIX/vocab.txt" >no_mask.txt
VOCAB="$tmp/no_mask.txt" config no_mask_token "$FIX/docs_a.txt"
expect_error no_mask_token "vocabulary $tmp/no_mask.txt has no [MASK] token*"

VOCAB="$tmp/absent_vocab.txt" config missing_vocab "$FIX/docs_a.txt"
expect_error missing_vocab "$tmp/absent_vocab.txt: cannot open vocabulary ([data] vocab): No such file or directory"

if "$RP" prepare >out 2>err; then fail "prepare without a config" "exit 0"
elif grep -q 'usage: realpos prepare' err; then pass "prepare without a config: usage, non-zero exit"
else fail "prepare without a config" "$(cat err)"; fi

# Duplicates (a second spelling through a symlink) and CR-only line ends are refused by name.
ln -s "$FIX/docs_a.txt" link_a.txt
config duplicate "$FIX/docs_a.txt" "$tmp/link_a.txt"
expect_error duplicate "[data] corpus lists one file twice: $FIX/docs_a.txt (from '$FIX/docs_a.txt') and $tmp/link_a.txt (from '$tmp/link_a.txt') are the same file*"
printf 'First sentence.\rSecond sentence.\r\rAnother document.\r' >cr.txt
config cr_only "$tmp/cr.txt"
expect_error cr_only "$tmp/cr.txt: lines end in CR alone (classic Mac OS line endings)*"


# The same documents as gzip, zstd, JSON Lines, zstd JSON Lines (CRLF inside) and a directory
# make the same split and tokens as the plain files; compression is found by content (no suffix).
cat "$FIX/docs_a.txt" "$FIX/docs_b.txt" >both.txt
config plain "$tmp/both.txt"; "$RP" prepare plain.ini >/dev/null 2>&1
want=$(totals plain.shards)
gzip -c both.txt >both.gzdata; zstd -q -c both.txt >both.zstdata
/usr/bin/python3 - both.txt >both.jsonl <<'PY'
import json, sys
doc = []
for line in list(open(sys.argv[1], encoding="utf-8")) + [""]:
    if line.strip(): doc.append(line.rstrip("\n"))
    elif doc: print(json.dumps({"id": len(doc), "text": "\r\n".join(doc)})); doc = []
PY
zstd -q -c both.jsonl >both.jsonl.zst
mkdir -p dir/sub; cp "$FIX/docs_a.txt" dir/a.txt; cp "$FIX/docs_b.txt" dir/sub/b.txt
config pair "$FIX/docs_a.txt" "$FIX/docs_b.txt"; "$RP" prepare pair.ini >/dev/null 2>&1
for input in both.gzdata both.zstdata both.jsonl both.jsonl.zst dir; do
  name=fmt_${input//./_}
  config "$name" "$tmp/$input"
  [ "$input" = dir ] && want=$(totals pair.shards) # two files: each one's end ends a document
  if "$RP" prepare "$name.ini" >out 2>err && [ "$(totals "$name.shards")" = "$want" ]; then
    pass "input $input: the same split and tokens as plain text ($want)"
  else fail "input $input" "$(totals "$name.shards" 2>&1) vs $want: $(cat err)"; fi
done

# Truncated compressed input is an error naming the file, not a short corpus.
for i in 1 2 3 4 5 6 7 8; do cat both.txt; done >both8.txt
gzip -c both8.txt | head -c 300 >trunc_gz.data; zstd -q -c both8.txt | head -c 300 >trunc_zst.data
config truncated_gzip "$tmp/trunc_gz.data"
expect_error truncated_gzip "$tmp/trunc_gz.data: truncated gzip data: the stream ends early"
config truncated_zstd "$tmp/trunc_zst.data"
expect_error truncated_zstd "$tmp/trunc_zst.data: truncated zstd data: the stream ends inside a frame"

# Bad JSON Lines records are named (file:line) and counted; the good ones are kept.
{ echo '{"text": "In the beginning God created the heaven and the earth."}'; echo '{"text": broken'
  echo '{"body": "no text member"}'; echo '{"text": 42}'; echo
  for i in 1 2 3 4 5 6 7 8; do echo "{\"text\": \"And the earth was without form, and void $i.\"}"; done; } >bad.jsonl
config bad_records "$tmp/bad.jsonl"
"$RP" prepare bad_records.ini --set data.eval_fraction=0.5 >out 2>err
if grep -qF "$tmp/bad.jsonl:2: bad record: not valid JSON: expected a value, got 'b' at column 10" err && grep -qF "$tmp/bad.jsonl:3: bad record: no member 'text' (data.text_field)" err &&
   grep -qF "$tmp/bad.jsonl:4: bad record: member 'text' is not a string" err && grep -q '^bad records: 3' out; then
  pass "bad records: lines 2, 3, 4 named with the reason, 3 counted"
else fail "bad records" "$(cat out err)"; fi

# A multi-shard, multi-file set made by two --part processes equals the one-process set.
awk 'BEGIN { for (d = 0; d < 300; d++) { for (s = 0; s < 3; s++) print "the lord said unto moses " d " " s " ."; print "" } }' >gen1.txt
awk 'BEGIN { for (d = 0; d < 300; d++) { print "and god saw the light " d " ."; print "" } }' >gen2.txt
config whole "$tmp/gen1.txt" "$tmp/gen2.txt" "$FIX/docs_a.txt"
printf 'shard_tokens = 300\n' >>whole.ini
"$RP" prepare whole.ini >/dev/null 2>&1
sed 's/whole.shards/parts.shards/' whole.ini >parts.ini
"$RP" prepare parts.ini --part 1/2 >out1 2>&1; "$RP" prepare parts.ini --part 0/2 >out0 2>&1
if cmp -s whole.shards/index.json parts.shards/index.json && grep -q 'index: not yet written' out1 &&
   [ "$(ls whole.shards/*.h5 | wc -l)" -gt 3 ]; then
  pass "--part 0/2 + 1/2: the same index (shards, counts, split) as one process ($(ls whole.shards/*.h5 | wc -l) shards)"
else fail "--part" "$(diff whole.shards/index.json parts.shards/index.json | head -5)"; fi
if [ ! -e parts.shards/prepare-parts.txt ]; then pass "... and the complete set keeps no record of its partition"
else fail "partition record left" "$(cat parts.shards/prepare-parts.txt)"; fi

# Parts of another N (or a whole prepare) into a set being prepared in parts are refused, naming
# the directory and both N's, and write nothing; the set is then finished with its own N.
# refused NAME TEXT ARGS...: `realpos prepare ARGS` fails (not by a signal) and its stderr holds TEXT.
refused() {
  local name=$1 text=$2 rc; shift 2
  "$RP" prepare "$@" >out 2>err; rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qF -- "$text" err; then pass "$name"
  else fail "$name" "status $rc: $(tail -c 400 err)"; fi
}
sed 's/whole.shards/mixed.shards/' whole.ini >mixed.ini
"$RP" prepare mixed.ini --part 0/2 >/dev/null 2>&1
ls mixed.shards >mixed.before
refused "--part 0/2 then --part 1/3 is refused, naming the directory and both N's" \
  "[data] shard_dir mixed.shards is being prepared by 2 parts (--part I/2) (recorded in mixed.shards/prepare-parts.txt), this prepare is 3 parts (--part I/3)" \
  mixed.ini --part 1/3
refused "... and so is a whole prepare" "is being prepared by 2 parts (--part I/2) (recorded in mixed.shards/prepare-parts.txt), this prepare is one whole prepare (N = 1)" \
  mixed.ini
if ls mixed.shards | cmp -s - mixed.before && [ ! -e mixed.shards/index.json ] &&
   "$RP" prepare mixed.ini --part 1/2 >/dev/null 2>&1 && cmp -s whole.shards/index.json mixed.shards/index.json; then
  pass "... having written nothing: --part 1/2 then completes the same set as one process"
else fail "mixed parts" "$(ls mixed.shards | diff mixed.before - | head -5)"; fi
# Concurrent parts can each finish before seeing the other's manifests: every source is done, no
# index, the record still there. Any prepare then only writes the index: nothing left to mix.
rm mixed.shards/index.json; echo 2 >mixed.shards/prepare-parts.txt
if "$RP" prepare mixed.ini >out 2>err && grep -q 'shards: 0 written' out && cmp -s whole.shards/index.json mixed.shards/index.json &&
   [ ! -e mixed.shards/prepare-parts.txt ]; then
  pass "parts of 2 all done but no index: a whole prepare writes the same index, preparing nothing"
else fail "whole prepare after finished parts" "$(cat out err | tail -3)"; fi
sed 's/whole.shards/killedwhole.shards/' whole.ini >killedwhole.ini
mkdir -p killedwhole.shards && echo 1 >killedwhole.shards/prepare-parts.txt # a whole prepare was killed
refused "--part 0/2 after an unfinished whole prepare is refused" \
  "this prepare is 2 parts (--part I/2): two partitions of the corpus would mix in one shard set; finish it with a whole \`realpos prepare\`" \
  killedwhole.ini --part 0/2

# A prepare killed after its first shards resumes from them and ends with the same set.
sed 's/whole.shards/killed.shards/' whole.ini >killed.ini
printf 'read_chunk_mb = 1\n' >>killed.ini
for i in $(seq 10); do cat gen1.txt; done | awk '{ print } /^$/ { n++; print "copy line " n " ." }' >gen1.txt.big && mv gen1.txt.big gen1.txt
sed -i "s/^shard_tokens = 300/shard_tokens = 4000/" killed.ini
# killed right after its shard 1 is in place (a test hook: the same point on any host, however fast)
(REALPOS_TEST_KILL_AFTER_SHARD=1 "$RP" prepare killed.ini >/dev/null) 2>/dev/null; killed_rc=$?
if [ $killed_rc -eq 137 ] && ls killed.shards/*-1.h5 >/dev/null 2>&1 && [ ! -e killed.shards/index.json ]; then
  pass "prepare killed (SIGKILL) right after shard 1: shards 0-1 on disk, no index"
else fail "prepare killed after shard 1" "status $killed_rc; $(ls killed.shards | tr "\n" " ")"; fi
sed 's/killed.shards/badhook.shards/' killed.ini >badhook.ini
if ! REALPOS_TEST_KILL_AFTER_SHARD=one "$RP" prepare badhook.ini >/dev/null 2>err &&
   grep -qF "REALPOS_TEST_KILL_AFTER_SHARD: expected a shard number >= 0, got 'one'" err; then
  pass "the test hook refuses a value that is not a shard number"
else fail "REALPOS_TEST_KILL_AFTER_SHARD=one" "$(tail -2 err)"; fi
sed 's/killed.shards/fresh.shards/' killed.ini >fresh.ini
"$RP" prepare fresh.ini >/dev/null 2>&1
"$RP" prepare killed.ini >out 2>err
if [ ! -e killed.shards/index.json.never ] && grep -qE 'shards: [0-9]+ written, [1-9][0-9]* kept' out && cmp -s fresh.shards/index.json killed.shards/index.json; then
  pass "a prepare killed by SIGKILL resumes: $(grep -oE '[0-9]+ written, [0-9]+ kept' out), the same index as an uninterrupted run"
else fail "killed prepare resumed" "$(cat out err | tail -6 | tr "\n" " ") / $(diff fresh.shards/index.json killed.shards/index.json | head -4 | tr "\n" " ")"; fi

# Adding a corpus file prepares only it.
config grow "$FIX/docs_a.txt"; "$RP" prepare grow.ini >/dev/null 2>&1
config grow "$FIX/docs_a.txt" "$FIX/docs_b.txt"; "$RP" prepare grow.ini >out 2>&1
if grep -q 'sources: 2 corpus files, 1 kept from before; shards: 1 written, 0 kept' out; then
  pass "incremental: a second corpus file is prepared alone, the first kept"
else fail "incremental" "$(cat out)"; fi

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
