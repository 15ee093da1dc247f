#!/usr/bin/env bash
# The shard set a run trains on is the one its config names (issue 29): a set prepared with other
# settings is refused, naming each setting and both values; a resume on re-prepared data says what
# changed; an index left beside shards a later prepare rewrote says to re-run prepare; absurd
# counts in an index name the index; --part parsed strictly, parts with other settings refused by
# name, parts running side by side write the index (the last to finish), and no shard temporary of
# a dead process is left behind.
source "$(dirname "$0")/../../lib.sh"
synthetic_corpus "$tmp" 80 60 5
cp "$tmp/corpus.txt" "$tmp/extra.txt"
tiny_pretrain_ini "$tmp/run.ini" train.max_steps=2 train.checkpoint_interval=1
cfg=$tmp/run.ini
"$RP" prepare "$cfg" >"$tmp/prepare.log" 2>&1 || fail "prepare" "$(tail -3 "$tmp/prepare.log")"

# Every shaping setting, one at a time and together, differs from the set's: refused by name.
for setting in data.eval_fraction=0.3:0.1 data.seed=7:12345 data.shard_tokens=999:33554432 \
    data.do_lower_case=no:yes data.corpus_format=jsonl:auto data.text_field=body:text; do
  kv=${setting%:*}; key=${kv%%=*}; now=${kv#*=}; was=${setting##*:}
  expect_error "pretrain with $key = $now on a set prepared with $was: refused, naming both" \
    "key '$key': the set has $was, this config $now" "$RP" pretrain "$cfg" --set "$kv"
done
expect_error "pretrain with a corpus the set was not prepared from: refused, naming both lists" \
  "key 'data.corpus': the set has $tmp/corpus.txt, this config $tmp/corpus.txt $tmp/extra.txt" \
  "$RP" pretrain "$cfg" --set "data.corpus=$tmp/corpus.txt $tmp/extra.txt"
out=$("$RP" prepare "$cfg" --verify --set data.eval_fraction=0.5 --set data.seed=1 2>&1)
if [[ $out == *"key 'data.eval_fraction': the set has 0.1, this config 0.5"* && $out == *"key 'data.seed': the set has 12345, this config 1"* ]]; then
  pass "two settings differ: both named in one message"
else fail "two settings" "$out"; fi

# A resume after the corpus was edited and re-prepared names the source and both versions.
"$RP" pretrain "$cfg" --set train.max_steps=1 >"$tmp/run1.log" 2>&1 || fail "pretrain 1 step" "$(tail -3 "$tmp/run1.log")"
sed -i '3s/.*/w1 w2 w3 w4 edited./' "$tmp/corpus.txt"
"$RP" prepare "$cfg" >/dev/null 2>&1
out=$("$RP" pretrain "$cfg" --resume "$tmp/run/latest" 2>&1); rc=$?
if [ $rc -eq 1 ] && [[ $out == *"the training data changed since the checkpoint was written"* ]] &&
   grep -q "checkpoint:   source $tmp/corpus.txt: " <<<"$out" && grep -q "now:          source $tmp/corpus.txt: " <<<"$out"; then
  pass "--resume after the corpus was edited and re-prepared: refused, the source's two versions named"
else fail "--resume on re-prepared data" "status $rc: $(tail -c 600 <<<"$out")"; fi

# An index beside shards a later prepare rewrote (interrupted before its own index).
cp -r "$tmp/shards" "$tmp/shards.before"
sed -i '5s/.*/w5 w6 w7 w8 edited again./' "$tmp/corpus.txt"
"$RP" prepare "$cfg" >/dev/null 2>&1
cp "$tmp/shards.before/index.json" "$tmp/shards/index.json"
expect_error "an old index beside a rewritten shard, corpus present: the file changed since the set was prepared" \
  "$tmp/corpus.txt: changed since the shard set in $tmp/shards was prepared from it" \
  "$RP" pretrain "$cfg" --set train.run_dir="$tmp/run-stale"
mv "$tmp/corpus.txt" "$tmp/corpus.away" # a training machine without the corpus: the shard itself says it
expect_error "... corpus absent: the rewritten shard is not the one the index lists: re-run prepare" \
  "not the shard $tmp/shards/index.json lists (made from a version of its source of" \
  "$RP" pretrain "$cfg" --set train.run_dir="$tmp/run-stale"
mv "$tmp/corpus.away" "$tmp/corpus.txt"
sed -i '7s/.*/w9 w9 w9 edited, not prepared./' "$tmp/corpus.txt"
expect_error "a corpus file edited since prepare (not re-prepared): pretrain names it" \
  "$tmp/corpus.txt: changed since the shard set in $tmp/shards was prepared from it" \
  "$RP" pretrain "$cfg" --set train.run_dir="$tmp/run-edited"
# prepare removes the index before it changes the set: a prepare stopped then leaves none
rm -rf "$tmp/shards"; cp -r "$tmp/shards.before" "$tmp/shards"
"$RP" prepare "$cfg" >"$tmp/p.log" 2>&1
if grep -q "removed $tmp/shards/index.json: the set changes" "$tmp/p.log"; then pass "prepare drops the index before it rewrites a shard"
else fail "index dropped" "$(cat "$tmp/p.log")"; fi

# Absurd counts in an index name the index (before anything is sized by them).
absurd() { # NAME PYTHON-EDIT PATTERN
  rm -rf "$tmp/absurd"; cp -r "$tmp/shards" "$tmp/absurd"
  "$PY" -c "import json,sys; i=json.load(open(sys.argv[1])); $2; json.dump(i, open(sys.argv[1],'w'))" "$tmp/absurd/index.json"
  expect_error "$1" "$3" "$RP" prepare "$cfg" --verify --set data.shard_dir="$tmp/absurd"
}
absurd "an index claiming 10^12 tokens in a shard names the index and the file size" \
  "s=i['sources'][0]['shards'][0]['train']; s['documents']=s['sentences']=s['tokens']=10**12" \
  "$tmp/absurd/index.json: lists $tmp/absurd/s"
absurd "a negative count names the index and the member" "i['sources'][0]['shards'][0]['eval']['tokens']=-5" \
  "$tmp/absurd/index.json: member 'tokens': expected an integer in [0, "
absurd "vocab_size 1e12 names the index" "i['vocab_size']=10**12" "$tmp/absurd/index.json: member 'vocab_size': expected an integer"
absurd "more documents than sentences names the index" \
  "s=i['sources'][0]['shards'][0]['train']; s['documents']=s['sentences']+1" "expected documents <= sentences <= tokens"

# --part is parsed strictly.
for bad in 4294967297/2 1/2x -1/2 2/2 0/0 ' 0/2' 0/+2; do
  expect_error "--part '$bad' refused" "--part: expected I/N" "$RP" prepare "$cfg" --part "$bad"
done

# Parts started with different settings: the second is refused, naming the setting.
tiny_pretrain_ini "$tmp/parts.ini" data.corpus="$tmp/corpus.txt $tmp/extra.txt" data.shard_dir="$tmp/parts"
"$RP" prepare "$tmp/parts.ini" --part 0/2 >/dev/null 2>&1
expect_error "--part 1/2 with another eval_fraction than 0/2: refused, naming the setting and both values" \
  "key 'data.eval_fraction': the prepare in progress has 0.1, this config 0.2" \
  "$RP" prepare "$tmp/parts.ini" --part 1/2 --set data.eval_fraction=0.2
"$RP" prepare "$tmp/parts.ini" --part 1/2 >"$tmp/p1.log" 2>&1
if [ -f "$tmp/parts/index.json" ]; then pass "... and with the same settings it completes the set"
else fail "parts complete" "$(cat "$tmp/p1.log")"; fi

# Two parts side by side: both finish, and the last writes the index.
mkdir "$tmp/sidecorpus"; for i in 1 2 3 4 5 6; do sed "s/^w/w$i /" "$tmp/corpus.txt" >"$tmp/sidecorpus/c$i.txt"; done
tiny_pretrain_ini "$tmp/side.ini" data.corpus="$tmp/sidecorpus" \
  data.shard_dir="$tmp/side" data.shard_tokens=200
ok=1
for round in 1 2 3; do
  rm -rf "$tmp/side"
  "$RP" prepare "$tmp/side.ini" --part 0/2 >"$tmp/s0.log" 2>&1 & a=$!
  "$RP" prepare "$tmp/side.ini" --part 1/2 >"$tmp/s1.log" 2>&1 & b=$!
  wait $a; ra=$?; wait $b; rb=$?
  [ $ra -eq 0 ] && [ $rb -eq 0 ] && [ -f "$tmp/side/index.json" ] && [ ! -e "$tmp/side/prepare-parts.txt" ] || ok=0
done
"$RP" prepare "$tmp/side.ini" --set data.shard_dir="$tmp/side-whole" >/dev/null 2>&1
cmp -s "$tmp/side/index.json" "$tmp/side-whole/index.json" || ok=0
if [ $ok = 1 ]; then pass "two parts side by side (3 rounds): both exit 0 and the index is written, byte-identical to one process's"
else fail "parts side by side" "$ra $rb $(ls "$tmp/side") $(tail -2 "$tmp/s0.log" "$tmp/s1.log")"; fi

# No shard temporary left: SIGTERM mid-prepare removes it; one of a dead process is removed.
big=$tmp/big.txt; for i in $(seq 300); do sed "s/^w/w$((i % 70)) /" "$tmp/corpus.txt"; done >"$big"
tiny_pretrain_ini "$tmp/big.ini" data.corpus="$big" data.shard_dir="$tmp/big" data.shard_tokens=20000 data.read_chunk_mb=1
# SIGTERM while shard 1's temporary is open (a test hook: the same point on any host, however fast)
(REALPOS_TEST_TERM_IN_SHARD=1 "$RP" prepare "$tmp/big.ini" --part 0/1 >/dev/null 2>&1); rc=$?
left=$(ls "$tmp/big" | grep -c '\.tmp\.')
if [ $rc -eq 143 ] && [ "$left" -eq 0 ]; then pass "SIGTERM while a shard is written: the temporary is removed (status 143)"
else fail "SIGTERM temporary" "status $rc, $left temporaries: $(ls "$tmp/big")"; fi
true & dead=$!; wait $dead # a process that is gone
host=$(hostname | tr -c 'A-Za-z0-9-\n' _)
touch "$tmp/big/s0123456789abcdef-0.h5.tmp.$dead.$host" "$tmp/big/s0123456789abcdef-1.h5.tmp.$$.$host" \
  "$tmp/big/s0123456789abcdef-2.h5.tmp.$dead.otherhost"
rm "$tmp/big/prepare-parts.txt" # the partition of the stopped prepare, abandoned
"$RP" prepare "$tmp/big.ini" --part 0/2 >"$tmp/b.log" 2>&1
if [ ! -e "$tmp/big/s0123456789abcdef-0.h5.tmp.$dead.$host" ] && [ -e "$tmp/big/s0123456789abcdef-1.h5.tmp.$$.$host" ] &&
   [ -e "$tmp/big/s0123456789abcdef-2.h5.tmp.$dead.otherhost" ] && grep -q "left by a prepare that was killed (process $dead is gone)" "$tmp/b.log"; then
  pass "a part removes the shard temporary of a dead process of its host, not a live one's or another host's"
else fail "stale temporaries" "$(ls "$tmp/big") $(tail -3 "$tmp/b.log")"; fi

# A config that lists no corpus (it only trains on a set prepared elsewhere) claims none: accepted.
tiny_pretrain_ini "$tmp/nocorpus.ini" data.corpus= data.shard_dir="$tmp/parts"
if "$RP" prepare "$tmp/nocorpus.ini" --verify >"$tmp/nc.log" 2>&1; then pass "a config without data.corpus opens the set it names"
else fail "no corpus" "$(tail -2 "$tmp/nc.log")"; fi

# The identity is of the contents: a corpus file touched (same text) and prepared again resumes.
"$RP" pretrain "$cfg" --set train.max_steps=1 --set train.run_dir="$tmp/run-touch" >"$tmp/t1.log" 2>&1
touch "$tmp/corpus.txt"; "$RP" prepare "$cfg" >/dev/null 2>&1
if "$RP" pretrain "$cfg" --set train.run_dir="$tmp/run-touch" --resume "$tmp/run-touch/latest" >"$tmp/t2.log" 2>&1 &&
   grep -q "resumed from .* at step 1" "$tmp/t2.log"; then pass "a corpus file touched and prepared again (same text): the resume goes on"
else fail "touched corpus resume" "$(tail -3 "$tmp/t1.log" "$tmp/t2.log")"; fi
# ... and a corpus edited (not prepared again) does not stop a resume: it continues on its set.
echo "w1 w2 appended for a later run." >>"$tmp/corpus.txt"
if "$RP" pretrain "$cfg" --set train.run_dir="$tmp/run-touch" --set train.max_steps=3 --resume "$tmp/run-touch/latest" >"$tmp/t3.log" 2>&1 &&
   grep -q "resumed from .* at step 2" "$tmp/t3.log"; then pass "a corpus edited for a later run (not prepared): the resume goes on, on the set it trained on"
else fail "resume after a corpus edit" "$(tail -3 "$tmp/t3.log")"; fi
