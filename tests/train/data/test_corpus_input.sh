#!/usr/bin/env bash
# realpos prepare reads its input as the standards say (issue 29), each check against the same
# documents read the plain way: JSON Lines records by RFC 8259 (\u0000 is data, a lone surrogate
# escape is U+FFFD, a repeated key and two records on one line are named), the format by the
# file's name or data.corpus_format and never by its first record, a BOM or the round size; lines
# of Unicode whitespace end documents; compressed input decoded completely or refused (gzip
# members and trailing data, zstd skippable frames, bzip2 and xz, a partial magic); `**` globs;
# the [UNK] warning naming the file that has them; the thread count. Uses ./realpos.
source "$(dirname "$0")/../../lib.sh"
FIX="$PWD/tests/fixtures/corpus"
source "$PWD/tests/train/data/corpus_lib.sh"
cd "$tmp"

# same NAME WANT WHAT: `realpos prepare NAME.ini` succeeds with the index totals WANT.
same() {
  local name=$1 want=$2 what=$3
  if "$RP" prepare "$name.ini" >out 2>err && [ "$(totals "$name.shards")" = "$want" ]; then pass "$what ($want)"
  else fail "$what" "$(totals "$name.shards" 2>&1) vs $want: $(grep -v '^\[' err | tail -3)"; fi
}
# jsonl TEXT_FILE: its documents (blank-line separated) as JSON Lines, on stdout (json.dumps
# escapes NUL as \u0000 and a lone surrogate as \udXXX, as every JSON writer does).
jsonl() {
  "$PY" - "$1" <<'PY'
import json, sys
doc = []
for line in open(sys.argv[1], encoding="utf-8", errors="surrogatepass").read().split("\n") + [""]:
    if line.strip(): doc.append(line)
    elif doc: print(json.dumps({"text": "\n".join(doc)})); doc = []
PY
}
cat "$FIX/docs_a.txt" "$FIX/docs_b.txt" >both.txt
config plain "$tmp/both.txt"; "$RP" prepare plain.ini >/dev/null 2>&1
want=$(totals plain.shards)

# A NUL inside a record is a character of it (the tokenizer drops it), not its end: the record
# with \u0000 gives what the text file with the raw NUL byte gives.
sed 's/ the / the\x00 /g' both.txt >nul.txt
jsonl nul.txt >nul.jsonl
config nul_text "$tmp/nul.txt"; "$RP" prepare nul_text.ini >/dev/null 2>&1
config nul "$tmp/nul.jsonl"
same nul "$(totals nul_text.shards)" "JSON Lines: \\u0000 inside a record is read as the character, the rest of the document kept"
# A lone surrogate escape (json.loads reads it) is U+FFFD: the same as the text with U+FFFD.
sed 's/ and / and \xef\xbf\xbd /g' both.txt >fffd.txt
"$PY" - >lone.jsonl <<'PY'
import json
doc = []
for line in open("fffd.txt", encoding="utf-8").read().split("\n") + [""]:
    if line.strip(): doc.append(line.replace("\ufffd", "\ud800"))
    elif doc: print(json.dumps({"text": "\n".join(doc)})); doc = []
PY
if grep -q '\\ud800' lone.jsonl && "$PY" -c 'import json; [json.loads(l) for l in open("lone.jsonl")]'; then
  config fffd_text "$tmp/fffd.txt"; "$RP" prepare fffd_text.ini >/dev/null 2>&1
  config lone "$tmp/lone.jsonl"
  same lone "$(totals fffd_text.shards)" "JSON Lines: a lone surrogate escape (json.loads reads it) is read as U+FFFD"
else fail "lone surrogate fixture" "$(head -c 200 lone.jsonl)"; fi

# A repeated key (also when spelled with an escape) and two records on one line are bad records,
# named with the key or the column; the other records are read.
jsonl both.txt >good.jsonl
{ echo '{"text": "The first value.", "text": "The second value."}'; echo '{"text": "One.", "t\u0065xt": "Two."}'
  printf '{"text": "A record"}{"text": "pasted on its line."}\n'; cat good.jsonl; } >dup.jsonl
config dup "$tmp/dup.jsonl"
if "$RP" prepare dup.ini >out 2>err && [ "$(totals dup.shards)" = "$want" ] && grep -q '^bad records: 3' out &&
   grep -qF "dup.jsonl:1: bad record: not valid JSON: key 'text' appears twice in the top-level object at column 30" err &&
   grep -qF "dup.jsonl:2: bad record: not valid JSON: key 'text' appears twice" err &&
   grep -qF "dup.jsonl:3: bad record: a second JSON value at column 21, after the first record (two records on one line" err; then
  pass "JSON Lines: repeated keys (one spelled \\u0065) and two records on one line are named bad records"
else fail "repeated keys / two records" "$(totals dup.shards 2>&1) vs $want: $(cat out err | tail -6)"; fi

# A record whose text is empty or blank is counted with the lines that produced no token.
{ echo '{"text": ""}'; echo '{"text": " \u00a0\n\t"}'; cat good.jsonl; } >empty.jsonl
config empty "$tmp/empty.jsonl"
if "$RP" prepare empty.ini >out 2>err && [ "$(totals empty.shards)" = "$want" ] && grep -q '^dropped 2 lines that produced no token' out; then
  pass "JSON Lines: records of empty and blank text are counted as dropped, not lost without a word"
else fail "empty records" "$(totals empty.shards 2>&1) vs $want: $(cat out | tail -4)"; fi

# The format is the name's (or data.corpus_format's), whatever the first record: a BOM, a broken
# first record, a first record longer than the round.
{ printf '\xef\xbb\xbf'; cat good.jsonl; } >bom.jsonl
config bom "$tmp/bom.jsonl"
same bom "$want" "JSON Lines after a UTF-8 BOM: JSON Lines"
{ printf '\xef\xbb\xbf'; cat both.txt; } >bom.txt
config bom_text "$tmp/bom.txt"
same bom_text "$want" "text after a UTF-8 BOM: the same documents as without it"
{ echo '{"text": broken'; cat good.jsonl; } >broken.jsonl
config broken "$tmp/broken.jsonl"
if "$RP" prepare broken.ini >out 2>err && [ "$(totals broken.shards)" = "$want" ] && grep -qF 'broken.jsonl:1: bad record: not valid JSON' err; then
  pass "JSON Lines with a broken first record: that record named, the file still JSON Lines"
else fail "broken first record" "$(totals broken.shards 2>&1) vs $want: $(tail -3 err)"; fi
"$PY" -c 'import json; print(json.dumps({"text": "the earth " * 150000}))' >long.jsonl
cat good.jsonl >>long.jsonl
{ cat good.jsonl; head -1 long.jsonl; } >long_last.jsonl
config long_last "$tmp/long_last.jsonl"; "$RP" prepare long_last.ini >/dev/null 2>&1
config long "$tmp/long.jsonl"; echo 'read_chunk_mb = 1' >>long.ini
same long "$(totals long_last.shards)" "JSON Lines whose first record (1.5 MB) is longer than data.read_chunk_mb = 1: JSON Lines"
cp good.jsonl records.txt
config unnamed "$tmp/records.txt"
expect_error unnamed "$tmp/records.txt: its first line is a JSON object, but data.corpus_format = auto reads it as text*"
echo 'corpus_format = jsonl' >>unnamed.ini
same unnamed "$want" "... read as JSON Lines with data.corpus_format = jsonl"
cp both.txt text.jsonl
config misnamed "$tmp/text.jsonl"
if ! "$RP" prepare misnamed.ini >out 2>err && grep -qF "error: $tmp/text.jsonl: read as JSON Lines (by its name), but none of its 14 records is a JSON object with a string member 'text': is it text?" err &&
   [ ! -e misnamed.shards/index.json ]; then pass "a text file named .jsonl: refused, naming it (every record bad)"
else fail "text named .jsonl" "$(tail -2 err)"; fi

# Lines of Unicode whitespace (what Python's str.strip() empties) end documents as empty lines do.
for ws in '\xc2\xa0' '\xe3\x80\x80 \t' '\xe2\x80\xa8' '\xe2\x80\x83\xc2\x85'; do
  sed "s/^\$/$ws/" both.txt >ws.txt
  config ws "$tmp/ws.txt"
  same ws "$want" "a line of only '$ws' ends a document as an empty line does"
done

# Compressed input is decoded completely (gzip members one after another, zeros after them; zstd
# after a skippable frame) or refused, naming the file.
head -c 150 both.txt | gzip -c >members.gz; tail -c +151 both.txt | gzip -c >>members.gz; printf '\0\0\0' >>members.gz
config members "$tmp/members.gz"
same members "$want" "gzip: two members and trailing zeros (as gzip -d reads them)"
{ gzip -c both.txt; echo 'trailing text'; } >trailing.gz
config trailing_gzip "$tmp/trailing.gz"
expect_error trailing_gzip "$tmp/trailing.gz: trailing data after the gzip stream at byte $(gzip -c both.txt | wc -c) (byte 0x74; gzip -d rejects it too)*"
{ zstd -q -c both.txt; echo 'trailing text'; } >trailing.zst
config trailing_zstd "$tmp/trailing.zst"
expect_error trailing_zstd "$tmp/trailing.zst: corrupt zstd data (at or after byte $(zstd -q -c both.txt | wc -c)): Unknown frame descriptor"
pzstd -q -p 2 -c both.txt >both.pzst
if [ "$(head -c 4 both.pzst | od -An -tx1 | tr -d ' ')" = 502a4d18 ]; then
  config pzstd "$tmp/both.pzst"
  same pzstd "$want" "zstd beginning with a skippable frame (pzstd): zstd"
else fail "pzstd fixture" "no skippable frame: $(head -c 4 both.pzst | od -An -tx1)"; fi
bzip2 -c both.txt >both.bz2; xz -c both.txt >both.xz
config bzip2 "$tmp/both.bz2"
expect_error bzip2 "$tmp/both.bz2: bzip2 compressed data (by its first bytes): realpos reads plain text, gzip and zstd*"
config xz "$tmp/both.xz"
expect_error xz "$tmp/both.xz: xz compressed data (by its first bytes): realpos reads plain text, gzip and zstd*"
gzip -c both.txt >both.gz; zstd -q -c both.txt >both.zst
for n in 1 2 3; do
  head -c $n both.gz >cut$n.gz; head -c $n both.zst >cut$n.zst
  config cut_gzip_$n "$tmp/cut$n.gz"
  [ $n = 1 ] && expect_error cut_gzip_$n "$tmp/cut1.gz: 1 byte that begins a gzip header: a truncated compressed file" ||
    expect_error cut_gzip_$n "$tmp/cut$n.gz: truncated gzip data: the stream ends early"
  config cut_zstd_$n "$tmp/cut$n.zst"
  [ $n = 1 ] && words="1 byte that begins" || words="$n bytes that begin"
  expect_error cut_zstd_$n "$tmp/cut$n.zst: $words a zstd header: a truncated compressed file"
done

# `**` matches any depth (bash globstar, pathlib): the files in sorted order, as a directory entry.
mkdir -p tree/x/y tree/.hidden; cp "$FIX/docs_a.txt" tree/a.txt; cp "$FIX/docs_b.txt" tree/x/y/b.txt
cp "$FIX/docs_b.txt" tree/.hidden/c.txt; echo 'not text' >tree/x/notes.md
config pair "$FIX/docs_a.txt" "$FIX/docs_b.txt"; "$RP" prepare pair.ini >/dev/null 2>&1
config globstar "$tmp/tree/**/*.txt"
if "$RP" prepare globstar.ini >out 2>err && [ "$(totals globstar.shards)" = "$(totals pair.shards)" ] &&
   grep -q 'sources: 2 corpus files' out; then
  pass "corpus entry tree/**/*.txt: the .txt files at every depth (hidden directories skipped)"
else fail "globstar" "$(totals globstar.shards 2>&1) vs $(totals pair.shards): $(cat out err | tail -3)"; fi

# The [UNK] warning names the file that has them, with its own counts.
for i in 1 2 3 4; do echo "zebra quokka xylophone $i."; echo; done >unknown.txt
config unk "$FIX/docs_a.txt" "$tmp/unknown.txt"
if "$RP" prepare unk.ini >out 2>err && grep -qF "warning: $tmp/unknown.txt: 80.0% of its 20 tokens are [UNK]" err &&
   ! grep -F "docs_a.txt" err | grep -v 'of its 85 tokens' | grep -q UNK; then
  pass "[UNK] warning: names unknown.txt with its own counts (docs_a.txt, if at all, with its own)"
else fail "[UNK] warning" "$(grep UNK err)"; fi

# prepare uses and prints the thread count of train.threads.
if "$RP" prepare plain.ini --set train.threads=1 >out 2>err && grep -q 'prepare: 1 corpus entry, vocab .*, 1 thread$' err; then
  pass "prepare with train.threads = 1 runs (and says) 1 thread"
else fail "threads" "$(grep 'prepare:' err)"; fi

# A shard is also bounded by its sentences and documents (8 bytes each in memory, against 4 a
# token): 3000 two-token documents with shard_tokens = 400 make shards of 51 documents (101
# sentences + documents), not of 200.
for i in $(seq 3000); do echo "God $i"; echo; done >tiny_docs.txt
config tiny_docs "$tmp/tiny_docs.txt"; echo 'shard_tokens = 400' >>tiny_docs.ini
if "$RP" prepare tiny_docs.ini >out 2>err && [ "$(ls tiny_docs.shards/*.h5 | wc -l)" -eq 59 ] && [ "$(totals tiny_docs.shards | awk '{ print $1 + $3 }')" -eq 3000 ]; then
  pass "3000 two-token documents, shard_tokens = 400: 59 shards of at most 51 documents, every document kept"
else fail "shard row bound" "$(ls tiny_docs.shards/*.h5 2>/dev/null | wc -l) shards: $(tail -2 err)"; fi

# Too low an open-file limit is named with the command that raises it; data.shard_tokens is
# advised only when a source has several shards (each source has at least one).
refused_with_limit() { # NAME CONFIG TEXT [NOT_TEXT]
  bash -c 'ulimit -n 16; exec "$@"' _ "$RP" prepare "$2" --verify >out 2>err
  if [ $? -eq 1 ] && grep -qF -- "$3" err && { [ -z "${4:-}" ] || ! grep -qF -- "$4" err; }; then pass "$1"
  else fail "$1" "$(tail -2 err)"; fi
}
refused_with_limit "open-file limit below a 2-source set: names the limit and ulimit -n, not data.shard_tokens" pair.ini \
  "its 2 shard files stay open while the set is read, with about 16 more, but the open-file limit is 16 (hard limit; ulimit -n, ulimit -Hn): raise it, e.g. \`ulimit -n 66\`" shard_tokens
refused_with_limit "... a 1-source set of 59 shards: and a larger data.shard_tokens" tiny_docs.ini \
  "or make fewer, larger shards (a larger data.shard_tokens; the 1 corpus files need at least 1)"
