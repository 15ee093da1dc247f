#!/usr/bin/env bash
# Run directories as users spell them (issue 29): RUN_DIR/.lock is never followed or opened if it
# is not a regular file; --overwrite takes a run_dir with a trailing slash, and refuses, naming
# the problem, a run_dir it cannot or must not move aside (the working directory or one above it).
source "$(dirname "$0")/../../lib.sh"
synthetic_corpus "$tmp" 80 40 3
tiny_pretrain_ini "$tmp/run.ini" train.max_steps=1
"$RP" prepare "$tmp/run.ini" >/dev/null 2>&1 || fail "prepare"
train() { "$RP" pretrain "$tmp/run.ini" "$@"; }

mkdir -p "$tmp/linked"; echo "precious" >"$tmp/target.txt"; ln -s "$tmp/target.txt" "$tmp/linked/.lock"
expect_error "RUN_DIR/.lock a symbolic link: refused, never followed" "the lock file $tmp/linked/.lock is a symbolic link" \
  train --set train.run_dir="$tmp/linked"
if [ "$(cat "$tmp/target.txt")" = precious ]; then pass "... and the link's target is untouched"
else fail "link target" "now: $(cat "$tmp/target.txt")"; fi
mkdir -p "$tmp/fifo"; mkfifo "$tmp/fifo/.lock"
expect_error "RUN_DIR/.lock a FIFO: refused at once, not waited on" "the lock file $tmp/fifo/.lock is not a regular file (a FIFO)" \
  timeout 60 "$RP" pretrain "$tmp/run.ini" --set train.run_dir="$tmp/fifo"

train --set train.run_dir="$tmp/ow" >/dev/null 2>&1 || fail "first run in ow"
cd "$tmp"
if "$RP" pretrain run.ini --set train.run_dir=ow/ --overwrite >ow.log 2>&1 && ls -d ow.replaced-* >/dev/null 2>&1 &&
   [ -s ow/latest ]; then pass "train.run_dir = ow/ (a trailing slash) with --overwrite moves the old run to ow.replaced-*"
else fail "trailing slash --overwrite" "$(tail -2 ow.log)"; fi

mkdir -p "$tmp/here"; cd "$tmp/here"
"$RP" pretrain "$tmp/run.ini" --set train.run_dir=. >"$tmp/here.log" 2>&1 || fail "a run in ." "$(tail -2 "$tmp/here.log")"
expect_error "train.run_dir = . with --overwrite: refused, naming the working directory" \
  "--overwrite: train.run_dir . ($tmp/here) is the working directory of this command" \
  "$RP" pretrain "$tmp/run.ini" --set train.run_dir=. --overwrite
mkdir -p sub; cd sub
expect_error "train.run_dir = .. (above the working directory) with --overwrite: refused" \
  "--overwrite: train.run_dir .. ($tmp/here) holds the working directory of this command" \
  "$RP" pretrain "$tmp/run.ini" --set train.run_dir=.. --overwrite
if [ -s "$tmp/here/latest" ] && ! ls -d "$tmp"/here.replaced-* >/dev/null 2>&1; then pass "... and the run there is left in place"
else fail "run left in place" "$(ls "$tmp")"; fi
cd "$tmp"; cp run.ini ow/inside.ini
expect_error "--overwrite of a run_dir that holds the config being read: refused, naming it" \
  "the config ow/inside.ini lies inside train.run_dir ow" "$RP" pretrain ow/inside.ini --set train.run_dir=ow --overwrite
if [ -s ow/latest ] && [ -e ow/inside.ini ]; then pass "... and the directory is left in place"; else fail "ow moved" "$(ls)"; fi
