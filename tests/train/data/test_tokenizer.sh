#!/usr/bin/env bash
# Command-line tests of `realpos tokenize` and `realpos vocab` (the library is tested in
# tests/train/data/test_tokenizer.c). Fixtures in tests/fixtures/tokenizer/. The checks against the real
# bert-base-uncased vocabulary need data/vocab/bert-base-uncased.txt (scripts/get_vocab.sh) and
# print SKIP without it; their expected ids are tokenization.py's.
set -u
cd "$(dirname "$0")/../../.."
realpos="${REALPOS:-./realpos}"
fixtures=tests/fixtures/tokenizer
vocab=$fixtures/vocab.txt
bert_vocab=data/vocab/bert-base-uncased.txt
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# expect NAME GOT WANT: PASS when GOT equals WANT
expect() {
  if [ "$2" == "$3" ]; then echo "PASS $1"; else
    echo "FAIL $1"; echo "  got:  $(printf '%s' "$2" | head -c 400 | cat -A | head -5)"
    echo "  want: $(printf '%s' "$3" | head -c 400 | cat -A | head -5)"; fi
}

# expect_error NAME PATTERN COMMAND...: PASS when COMMAND exits non-zero and its stderr has PATTERN
expect_error() {
  local name="$1" pattern="$2"; shift 2
  "$@" </dev/null >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ $rc -ne 0 ] && grep -qF -- "$pattern" "$tmp/err"; then echo "PASS $name (exit $rc)"; else
    echo "FAIL $name: exit $rc, stderr: $(head -c 300 "$tmp/err")"; fi
}

# ---- tokenize: one output line per input line ----
input=$'hello world\n\nunaffable\nDon\'t stop\n\xe4\xb8\xad\xe6\x96\x87\xe5\xad\x97\nhello'
expect "tokenize: ids per line, empty line kept, last line without newline" \
  "$(printf '%s' "$input" | "$realpos" tokenize --vocab $vocab | cat -A)" \
  "$(printf '1 2\n\n10 11 12\n6 7 8 22\n15 16 9\n1\n' | cat -A)"
expect "tokenize --tokens" \
  "$(printf '%s' "$input" | "$realpos" tokenize --vocab $vocab --tokens)" \
  "$(printf 'hello world\n\nun ##aff ##able\ndon %s t stop\n中 文 [UNK]\nhello' "'")"
expect "tokenize --cased keeps case and accents" \
  "$(printf 'H\xc3\xa9llo hello Hello\n' | "$realpos" tokenize --vocab $vocab --cased --tokens)" \
  "Héllo hello [UNK]"
expect "tokenize: lines of control chars, invalid UTF-8, NUL, CR become empty lines" \
  "$(printf '\x01\n\xff\xfe\n\x00\n\r\n' | "$realpos" tokenize --vocab $vocab | cat -A)" \
  "$(printf '\n\n\n\n' | cat -A)"

expect_error "tokenize: missing vocabulary file named" "no/such/vocab.txt" \
  "$realpos" tokenize --vocab no/such/vocab.txt
expect_error "tokenize: vocabulary without [MASK] rejected" "[MASK]" \
  "$realpos" tokenize --vocab $fixtures/vocab_no_mask.txt
expect_error "tokenize: --vocab required" "--vocab is required" "$realpos" tokenize
expect_error "tokenize: unknown argument rejected" "--bogus" "$realpos" tokenize --vocab $vocab --bogus

# ---- vocab: training ----
if "$realpos" vocab --corpus $fixtures/corpus_hug.txt --size 100 --out "$tmp/hug.txt" 2>"$tmp/err"; then
  expect "vocab: hug corpus -> specials, 7 characters x2, 7 merges" \
    "$(tr '\n' ' ' <"$tmp/hug.txt")" \
    "[PAD] [UNK] [CLS] [SEP] [MASK] b g h n p s u ##b ##g ##h ##n ##p ##s ##u ##ug ##un hug pun pug hugs bun "
else
  echo "FAIL vocab: training on the hug corpus failed: $(head -c 300 "$tmp/err")"
fi
for mode in "" --cased; do
  if "$realpos" vocab --corpus $fixtures/corpus.txt $fixtures/corpus_hug.txt --size 400 $mode \
      --out "$tmp/trained.txt" 2>"$tmp/err"; then
    expect "vocab ${mode:-uncased}: special tokens first" "$(head -5 "$tmp/trained.txt" | tr '\n' ' ')" \
      "[PAD] [UNK] [CLS] [SEP] [MASK] "
    unknown=$(cat $fixtures/corpus.txt $fixtures/corpus_hug.txt |
      "$realpos" tokenize --vocab "$tmp/trained.txt" $mode --tokens | grep -o '\[UNK\]' | wc -l)
    expect "vocab ${mode:-uncased}: every corpus word tokenizes without [UNK]" "$unknown" 0
  else
    echo "FAIL vocab ${mode:-uncased}: training failed: $(head -c 300 "$tmp/err")"
  fi
done
expect_error "vocab: --size too small for the alphabet" "--size 20 cannot hold" \
  "$realpos" vocab --corpus $fixtures/corpus.txt --size 20 --out "$tmp/v.txt"
expect_error "vocab: missing corpus file named" "no/such/corpus.txt" \
  "$realpos" vocab --corpus no/such/corpus.txt --size 100 --out "$tmp/v.txt"
expect_error "vocab: --out required" "--out is required" \
  "$realpos" vocab --corpus $fixtures/corpus.txt --size 100
expect_error "vocab: bad --size rejected" "--size" \
  "$realpos" vocab --corpus $fixtures/corpus.txt --size -3 --out "$tmp/v.txt"

# ---- the real bert-base-uncased vocabulary ----
if [ -f $bert_vocab ] && [ "$(md5sum <$bert_vocab | cut -d' ' -f1)" == 64800d5d8528ce344256daf115d4965e ]; then
  expect "bert-base-uncased: 'hello world' -> 7592 2088" \
    "$(echo 'hello world' | "$realpos" tokenize --vocab $bert_vocab)" "7592 2088"
  expect "bert-base-uncased: '[CLS]' in text -> [ cl ##s ]" \
    "$(echo '[CLS]' | "$realpos" tokenize --vocab $bert_vocab --tokens)" "[ cl ##s ]"
  expect "bert-base-uncased: 14 lines of varied text (ids of tokenization.py)" \
    "$("$realpos" tokenize --vocab $bert_vocab <$fixtures/bert_uncased_input.txt)" \
    "$(cat $fixtures/bert_uncased_ids.txt)"
else
  echo "SKIP bert-base-uncased checks: $bert_vocab not found (run scripts/get_vocab.sh)"
fi
