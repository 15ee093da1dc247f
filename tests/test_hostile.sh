#!/usr/bin/env bash
# Hostile inputs (issue 9): every one ends with a message naming the file/key/dataset and a
# non-zero exit, never a crash, a hang, a silent success or a lost checkpoint. Each class has a
# positive control next to it. Commands run under `timeout` so a hang is a failure, not a stall.
source "$(dirname "$0")/lib.sh"
FX=tests/fixtures/finetune
cfg=configs/tiny.ini
T="timeout 120"
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
# expect_ok NAME PATTERN COMMAND...: exit 0 and PATTERN in the output (a positive control)
expect_ok() {
  local name=$1 pattern=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -eq 0 ] && grep -qF -- "$pattern" <<<"$out"; then pass "$name"
  else fail "$name" "status $rc: $(head -c 400 <<<"$out")"; fi
}
h5edit() { # FILE python-statements (f = the open file); then re-seal it (a trusted edit)
  "$PY" -c "import h5py, numpy as np; f = h5py.File('$1', 'r+'); $2; f.close()" && "$PY" scripts/h5seal.py "$1"
}
at() { # FILE OFFSET BYTES: overwrite in place
  printf '%s' "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

"$RP" init $cfg --out "$tmp/ok.h5" 2>/dev/null
expect_ok "control: inspect --verify accepts a fresh checkpoint" "present, right shapes, finite" \
  $T "$RP" inspect --verify "$tmp/ok.h5"

# ---- checkpoint integrity: checked before libhdf5 reads a byte ------------------------------------
# Bytes of the stored config text (an attribute in HDF5's global heap: corrupting it crashed or hung
# libhdf5), of a weight (the silent case), of the superblock, of the checksum header itself.
config_at=$(grep -boa '\[model\]' "$tmp/ok.h5" | head -1 | cut -d: -f1)
weight_at=$("$PY" -c "
import h5py; f = h5py.File('$tmp/ok.h5', 'r'); print(512 + f['model/bert/encoder/layer/0/attention/self/query/weight'].id.get_offset())")
size=$(stat -c %s "$tmp/ok.h5")
for spec in "heap:$config_at:X9" "heap-len:$((config_at - 12)):\\377\\377" "weight:$((weight_at + 40)):ab" \
            "superblock:520:zz" "tail:$((size - 3)):q" "header-crc:25:00000000"; do
  IFS=: read -r what off bytes <<<"$spec"
  cp "$tmp/ok.h5" "$tmp/c_$what.h5"; at "$tmp/c_$what.h5" "$off" "$(printf "$bytes")"
  expect_error "corrupt checkpoint ($what bytes) is refused before HDF5 reads it" "c_$what.h5: corrupt" \
    $T "$RP" inspect "$tmp/c_$what.h5"
done
expect_error "corrupt weight bytes: inspect --verify fails" "c_weight.h5: corrupt" $T "$RP" inspect --verify "$tmp/c_weight.h5"
cp "$tmp/ok.h5" "$tmp/long.h5"; printf 'extra' >>"$tmp/long.h5"
expect_error "bytes appended to a checkpoint" "long.h5: extended" $T "$RP" inspect "$tmp/long.h5"
head -c $((size - 100)) "$tmp/ok.h5" >"$tmp/short.h5"
expect_error "truncated checkpoint" "short.h5: truncated" $T "$RP" inspect "$tmp/short.h5"
"$PY" - "$tmp/ok.h5" "$tmp/legacy.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as src, h5py.File(sys.argv[2], "w") as dst:  # no user block
    dst.attrs.update(src.attrs)
    for k in src:
        src.copy(src[k], dst, k)
PY
expect_error "a checkpoint without checksum (older realpos, plain h5py) is refused, naming the fix" \
  "scripts/h5seal.py" $T "$RP" inspect "$tmp/legacy.h5"
"$PY" scripts/h5seal.py "$tmp/legacy.h5"
expect_ok "control: h5seal.py makes a trusted legacy file readable" "total parameters:" $T "$RP" inspect "$tmp/legacy.h5"

# ---- non-finite or absurd stored values ----------------------------------------------------------
q=model/bert/encoder/layer/0/attention/self/query/weight
cp "$tmp/ok.h5" "$tmp/nan.h5"; h5edit "$tmp/nan.h5" "d = f['$q']; a = d[()]; a[3, 5] = np.nan; d[...] = a"
expect_error "a NaN parameter is an error, naming the dataset" "dataset '$q': element 101 is nan" \
  $T "$RP" inspect "$tmp/nan.h5"
cp "$tmp/ok.h5" "$tmp/opt.h5" # add zero optimizer moments with step -1
h5edit "$tmp/opt.h5" "
names = []; f['model'].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
for k in ('exp_avg', 'exp_avg_sq'):
    for n in names: f['optimizer/' + k + '/' + n] = np.zeros(f['model/' + n].shape, np.float32)
f['optimizer'].attrs['step'] = np.int64(-1)"
expect_error "optimizer step -1 is an error" "attribute '/optimizer/step': expected an integer in [0, 2147483647], got -1" \
  $T "$RP" inspect --verify "$tmp/opt.h5"
h5edit "$tmp/opt.h5" "f['optimizer'].attrs['step'] = np.int64(4); d = f['optimizer/exp_avg_sq/${q#model/}']; a = d[()]; a[0, 0] = np.inf; d[...] = a"
expect_error "an infinite optimizer moment is an error" "dataset 'optimizer/exp_avg_sq/${q#model/}': element 0 is inf" \
  $T "$RP" inspect --verify "$tmp/opt.h5"

# ---- saving: disk full, missing or read-only directory, stale temp files -----------------------------
expect_error "init --out into a missing directory names the reason" "No such file or directory" \
  $T "$RP" init $cfg --out "$tmp/missing/dir/x.h5"
mkdir -p "$tmp/stale"
touch "$tmp/stale/ckpt-0000010.h5.tmp.2147483646" "$tmp/stale/latest.tmp.2147483646"
expect_ok "temp files of a killed save are removed at the next save" "removed $tmp/stale/ckpt-0000010.h5.tmp" \
  $T "$RP" init $cfg --out "$tmp/stale/x.h5"
check "... all of them, and the new file is complete" test ! -e "$tmp/stale/latest.tmp.2147483646" -a -s "$tmp/stale/x.h5"
mnt="$tmp/mnt"; mkdir -p "$mnt/full" "$mnt/ro"
if mount -t tmpfs -o size=96k tmpfs "$mnt/full" 2>/dev/null && mount -t tmpfs -o ro,size=16k tmpfs "$mnt/ro"; then
  trap 'umount "$mnt/full" "$mnt/ro" 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
  expect_error "disk full during a save: message with the reason" "No space left on device" \
    $T "$RP" init $cfg --out "$mnt/full/x.h5"
  check "disk full: the incomplete temp file is removed" test -z "$(ls -A "$mnt/full")"
  expect_error "init --out into a read-only directory names the reason" "Read-only file system" \
    $T "$RP" init $cfg --out "$mnt/ro/x.h5"
else
  echo "SKIP disk-full and read-only saves: cannot mount a tmpfs (not root?)"
fi
ln -s /dev/full "$tmp/full.tsv" 2>/dev/null
