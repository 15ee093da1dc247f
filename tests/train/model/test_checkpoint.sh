#!/usr/bin/env bash
# Checkpoint and batch-file validation: every bad file is a clear message naming the file and the
# dataset, and a non-zero exit, never a crash.
source "$(dirname "$0")/../../lib.sh"
cfg=configs/tiny.ini
"$RP" init "$cfg" --out "$tmp/ok.h5" 2>/dev/null
if [ -s "$tmp/ok.h5" ] && "$RP" inspect "$tmp/ok.h5" | grep -q "total parameters: "; then
  pass "init writes a checkpoint that inspect reads"; else fail "init writes a checkpoint that inspect reads"; fi
if [ -z "$(ls "$tmp" | grep tmp)" ]; then pass "no temporary file is left behind"; else fail "temporary file left"; fi
stored=$("$RP" inspect "$tmp/ok.h5" | sed -n '2,/^# parameters/p' | grep -v '^# parameters')
if [ "$stored" = "$("$RP" config "$cfg")" ]; then pass "the checkpoint stores the effective config";
else fail "stored config differs from realpos config"; fi

"$PY" tests/reference/reference.py make-batch --config "$cfg" --batch-size 2 --seq-len 8 --seed 1 --out "$tmp/batch.h5" >/dev/null
edit() { # out.h5 python-statements (f = the copied file)
  cp "$tmp/ok.h5" "$1"
  "$PY" -c "import h5py, numpy as np; f = h5py.File('$1', 'r+'); $2; f.close()"
  "$PY" scripts/h5seal.py "$1" # a trusted edit: refresh the checksum so the content checks run
}
name=model/bert/encoder/layer/0/attention/self/query/weight
edit "$tmp/shape.h5" "del f['$name']; f['$name'] = np.zeros((32, 31), np.float32)"
expect_error "wrong-shaped parameter" "dataset 'model/bert/encoder/layer/0/attention/self/query/weight': expected shape [32, 32], got [32, 31]" \
  "$RP" dump --checkpoint "$tmp/shape.h5" --batch "$tmp/batch.h5" --out "$tmp/o.h5"
edit "$tmp/dtype.h5" "del f['$name']; f['$name'] = np.zeros((32, 32), np.float64)"
expect_error "wrong dtype" "expected float32" "$RP" inspect "$tmp/dtype.h5"
edit "$tmp/missing.h5" "del f['model/cls/predictions/bias']"
expect_error "missing parameter" "missing dataset 'model/cls/predictions/bias'" "$RP" inspect "$tmp/missing.h5"
edit "$tmp/extra.h5" "f['model/bert/extra/weight'] = np.zeros(3, np.float32)"
expect_error "unexpected parameter" "/model/bert/extra/weight" "$RP" inspect "$tmp/extra.h5"
edit "$tmp/format.h5" "f.attrs['format'] = 'something-else'"
expect_error "not a realpos checkpoint" "attribute 'format'" "$RP" inspect "$tmp/format.h5"
edit "$tmp/version.h5" "f.attrs['version'] = 7"
expect_error "unknown checkpoint version" "attribute 'version': expected 1, got 7" "$RP" inspect "$tmp/version.h5"
edit "$tmp/config.h5" "f.attrs['config'] = '[model]\nhidden_size = 33\n'"
expect_error "stored config that does not validate" "config.h5" "$RP" inspect "$tmp/config.h5"
head -c 3000 "$tmp/ok.h5" >"$tmp/truncated.h5"
head -c 300 "$tmp/ok.h5" >"$tmp/truncated_header.h5"
expect_error "checkpoint truncated inside its checksum header" "truncated_header.h5: truncated" \
  "$RP" inspect "$tmp/truncated_header.h5"
expect_error "truncated checkpoint" "truncated.h5" "$RP" inspect "$tmp/truncated.h5"
expect_error "missing checkpoint" "no-such.h5: no such file" "$RP" inspect "$tmp/no-such.h5"
echo "not hdf5" >"$tmp/text.h5"
expect_error "non-HDF5 checkpoint" "text.h5: not a readable HDF5 file" "$RP" inspect "$tmp/text.h5"
expect_error "output into a missing directory names the reason" "No such file or directory" \
  "$RP" init "$cfg" --out "$tmp/no/such/dir/x.h5"

# ---- a save is as durable as core/io/atomic_file: sealed + fsynced, renamed, the directory fsynced ----
if command -v strace >/dev/null 2>&1; then
  mkdir -p "$tmp/durable"
  strace -f -qq -e trace=openat,rename,renameat,renameat2,fsync -o "$tmp/trace" \
    "$RP" init "$cfg" --out "$tmp/durable/x.h5" >/dev/null 2>&1
  if "$PY" - "$tmp/trace" "$tmp/durable" <<'PY'; then pass "a checkpoint save fsyncs the file, renames it, then fsyncs its directory"
import re, sys
lines, d = open(sys.argv[1]).read().splitlines(), re.escape(sys.argv[2])
def at(pattern, start):  # the first line from start on matching pattern, or None
    return None if start is None else next((i for i in range(start, len(lines)) if re.search(pattern, lines[i])), None)
seal = at(d + r'/x\.h5\.tmp\.\d+", O_RDWR\) = \d+$', 0)  # h5_seal reopens the written file
ren = at(r'rename\w*\(.*' + d + r'/x\.h5"\) = 0', at(r'fsync\(\d+\)\s+= 0', seal))
opened = at(r'openat\(AT_FDCWD, "' + d + r'", O_RDONLY\|O_DIRECTORY\) = \d+', ren)
ok = opened is not None and at(r'fsync\(%s\)\s+= 0' % lines[opened].rsplit('= ', 1)[1], opened) is not None
sys.exit(not ok)
PY
  else fail "checkpoint save durability" "$(grep -E 'durable|fsync' "$tmp/trace" | tail -6)"; fi
else
  echo "SKIP test_checkpoint: strace not found (the directory fsync check)"
fi

# ---- a save that fails mid-run (the disk fills) names the file and the reason and leaves nothing --
mnt="$tmp/mnt"; mkdir -p "$mnt" "$tmp/p"
if mount -t tmpfs -o size=1m tmpfs "$mnt" 2>/dev/null; then
  trap 'umount "$mnt" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
  synthetic_corpus "$tmp/p" 40 30 3
  printf '[model]\nhidden_size = 16\nnum_layers = 1\nnum_heads = 2\nintermediate_size = 32\nvocab_size = 45\nmax_position = 32\n[train]\nbatch_size = 4\nmax_steps = 100000\nwarmup_steps = 1\nlog_interval = 2\ncheckpoint_interval = 100000\neval_interval = 100000\neval_batches = 1\nthreads = 1\nrun_dir = %s\n[data]\ncorpus = %s\nvocab = %s\nshard_dir = %s\nmax_seq_len = 16\nmax_predictions_per_seq = 3\neval_fraction = 0.2\n' \
    "$mnt/run" "$tmp/p/corpus.txt" "$tmp/p/vocab.txt" "$tmp/p/shards" >"$tmp/p/p.ini"
  "$RP" prepare "$tmp/p/p.ini" >/dev/null 2>&1 || fail "setup: prepare"
  for room in 0 16384; do # no block left (the temp file cannot be created) / a few (it fills mid-write)
    rm -rf "$mnt/run" "$mnt/filler"
    OMP_NUM_THREADS=1 REALPOS_TEST_SIGNAL_AT_STEP=STOP:2 "$RP" pretrain "$tmp/p/p.ini" >"$tmp/full.log" 2>&1 & pid=$!
    wait_stopped $pid
    head -c $(( $(stat -f -c '%a * %S' "$mnt") - room )) /dev/zero >"$mnt/filler" 2>/dev/null
    kill -TERM $pid; kill -CONT $pid; wait $pid; rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qE "error: $mnt/run/ckpt-[0-9]+\.h5\.tmp\.$pid: .*No space left on device; removed" "$tmp/full.log" &&
       ! ls -A "$mnt/run" | grep -q '\.tmp\.' && [ -z "$(ls "$mnt/run" | grep -E '^ckpt-|^latest$')" ]; then
      pass "a checkpoint save on a full disk ($room bytes free) fails naming the file and the reason, leaving no temp file or checkpoint"
    else fail "checkpoint save on a full disk ($room bytes free)" "status $rc: $(tail -n 2 "$tmp/full.log") / $(ls -A "$mnt/run" | tr '\n' ' ')"; fi
  done
  umount "$mnt"
else
  echo "SKIP test_checkpoint: cannot mount a tmpfs (not root?): the full-disk save"
fi

# Batch files
bedit() { cp "$tmp/batch.h5" "$1"; "$PY" -c "import h5py, numpy as np; f = h5py.File('$1', 'r+'); $2; f.close()"
  "$PY" scripts/h5seal.py "$1"; }
bedit "$tmp/ids.h5" "d = f['input_ids']; a = d[()]; a[1, 3] = 100; d[...] = a"
expect_error "out-of-range token id" "dataset 'input_ids': expected ids in [0, 100), got 100" \
  "$RP" dump --checkpoint "$tmp/ok.h5" --batch "$tmp/ids.h5" --out "$tmp/o.h5"
bedit "$tmp/neg.h5" "d = f['labels']; a = d[()]; a[0, 0] = -5; d[...] = a"
expect_error "bad label" "dataset 'labels': expected -100 or an id" \
  "$RP" dump --checkpoint "$tmp/ok.h5" --batch "$tmp/neg.h5" --out "$tmp/o.h5"
bedit "$tmp/types.h5" "d = f['token_type_ids']; a = d[()]; a[0, 0] = 2; d[...] = a"
expect_error "bad token type" "dataset 'token_type_ids'" \
  "$RP" dump --checkpoint "$tmp/ok.h5" --batch "$tmp/types.h5" --out "$tmp/o.h5"
bedit "$tmp/mask.h5" "del f['attention_mask']; f['attention_mask'] = np.ones((2, 7), np.int32)"
expect_error "mismatched batch shapes" "dataset 'attention_mask': expected shape [2, 8], got [2, 7]" \
  "$RP" dump --checkpoint "$tmp/ok.h5" --batch "$tmp/mask.h5" --out "$tmp/o.h5"
bedit "$tmp/nolabels.h5" "del f['labels']"
expect_error "missing batch dataset" "missing dataset 'labels'" \
  "$RP" dump --checkpoint "$tmp/ok.h5" --batch "$tmp/nolabels.h5" --out "$tmp/o.h5"
bedit "$tmp/long.h5" "[f.__delitem__(k) for k in list(f)]; [f.create_dataset(k, data=np.zeros((1, 80), np.int32)) for k in ('input_ids','token_type_ids','attention_mask')]; f['labels'] = np.full((1, 80), -100, np.int32)"
expect_error "sequence longer than max_position" "exceeds the checkpoint's model.max_position = 64" \
  "$RP" dump --checkpoint "$tmp/ok.h5" --batch "$tmp/long.h5" --out "$tmp/o.h5"
expect_error "dump without arguments" "usage: realpos dump" "$RP" dump
expect_error "unknown command" "unknown command 'frobnicate'" "$RP" frobnicate
exit 0
