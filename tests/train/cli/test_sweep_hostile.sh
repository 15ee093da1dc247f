#!/usr/bin/env bash
# Hostile inputs to scripts/sweep.py and its report (issue 48): `out` naming a file, a sweep file
# that is not UTF-8, repeated keys, an empty or corrupt sweep-point.json (what a power loss leaves),
# and a [synth] section changed under an existing `out`. Each ends in a message naming the file and
# a non-zero exit, never a Python traceback; changed [synth] settings never reuse the old data or
# results.
source "$(dirname "$0")/../../lib.sh"
root=$PWD
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
sweep() { "$PY" "$root/scripts/sweep.py" --realpos "$root/realpos" "$@"; }
# refused NAME PATTERN COMMAND...: exit status 1..127, PATTERN (fixed string) in the output, no traceback
refused() {
  local name=$1 pattern=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qF -- "$pattern" <<<"$out" && ! grep -q Traceback <<<"$out"; then pass "$name"
  else fail "$name" "status $rc: $(tail -c 400 <<<"$out")"; fi
}
export OMP_NUM_THREADS=1 REALPOS_PEAK_GFLOPS=10
cd "$tmp"
tiny_tagging_ini base.ini task.train_file=unused
cat > suite.ini <<INI
[sweep]
base = base.ini
out = out
[synth]
tasks = reverse
train_lengths = 1-3
train_count = 20
test_lengths = 1-4
test_count = 1
seed = 3
[grid]
model.seed = 1 2
INI

# ---- the sweep file -----------------------------------------------------------------------------------
touch afile; sed 's/^out = out$/out = afile/' suite.ini > file.ini
refused "out naming a regular file: named, for a run" "file.ini: [sweep] out = afile: expected a directory" sweep file.ini
refused "... and for --list" "file.ini: [sweep] out = afile: expected a directory" sweep file.ini --list
mkdir -p dataf/out && touch dataf/out/data && sed 's/^base = base.ini$/base = ..\/base.ini/' suite.ini > dataf/suite.ini
(cd dataf && refused "OUT/data a file: named" "suite.ini: [synth]: writing the data in out/data: [Errno 17] File exists: 'out/data'" \
  sweep suite.ini)
{ printf '; r\xe9sum\xe9 of the suite\n'; cat suite.ini; } > latin1.ini
refused "a Latin-1 comment: named with its line" "latin1.ini:1: expected UTF-8 text, got the byte 0xE9" sweep latin1.ini --list
refused "... also by sweep_report.py" "latin1.ini:1: expected UTF-8 text" "$PY" "$root/scripts/sweep_report.py" latin1.ini --realpos "$root/realpos"
sed 's/^out = out$/out = out\nout = other/' suite.ini > twice.ini
refused "a [sweep] key given twice: both lines named" "twice.ini:4: [sweep] key 'out' appears twice (first on line 3)" sweep twice.ini --list
sed 's/^seed = 3$/seed = 3\nseed = 4/' suite.ini > twice2.ini
refused "a [synth] key given twice" "twice2.ini:11: [synth] key 'seed' appears twice" sweep twice2.ini --list
sed 's/^tasks = reverse$/tasks = reverse reverse/' suite.ini > twice3.ini
refused "a [synth] task listed twice" "[synth] tasks: expected one or more distinct realpos synth tasks" sweep twice3.ini --list
sed 's/^train_count = 20$/train_count = 0/' suite.ini > zero.ini
refused "realpos synth refusing a [synth] value: the sweep file named with realpos's message" \
  "zero.ini: [synth]: realpos synth reverse: realpos: error: option '--count'" sweep zero.ini
check "... and no point ran" test ! -d "out/task=reverse,seed=1"
rm -rf out

# ---- point state files --------------------------------------------------------------------------------
sweep suite.ini > run1.log 2>&1
check "control: the sweep runs its 2 points" grep -q "sweep: 2 points, 0 already done; running 2" run1.log
state="out/task=reverse,seed=1/sweep-point.json"
cp "$state" state.json
: > "$state"
for mode in --list "" --report; do
  refused "an empty sweep-point.json (a power loss): named by sweep.py ${mode:-(run)}" "$state: empty: cut short" sweep suite.ini $mode
done
refused "... and by sweep_report.py" "$state: empty" "$PY" "$root/scripts/sweep_report.py" suite.ini --realpos "$root/realpos"
printf '{"name": "x", "stages": {"tagg' > "$state"
refused "a sweep-point.json cut short mid-write: named" "$state: not a point state" sweep suite.ini --list
printf '[1, 2]' > "$state"
refused "a sweep-point.json holding another JSON value: named" "$state: not a point state" sweep suite.ini --report
rm "$state"
sweep suite.ini > run2.log 2>&1
check "deleting it, as the message says, reruns the point from its run directory" \
  bash -c "grep -q 'sweep: 2 points, 1 already done; running 1' run2.log && grep -q '\"done\": true' '$state'"
mkdir -p fsync
"$PY" - "$root/scripts" "$tmp/fsync" <<'PY' && pass "the state is written to a temporary file, flushed (fsync), renamed, and the rename flushed" || fail "fsync of the state"
import json, os, sys
sys.path.insert(0, sys.argv[1])
import sweep
synced, real = [], os.fsync
os.fsync = lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd))[1]
sweep.save_state(sys.argv[2], {"stages": {}, "done": False})
d = os.path.realpath(sys.argv[2])
assert synced == [os.path.join(d, "sweep-point.json.tmp"), d], synced
assert json.load(open(os.path.join(d, "sweep-point.json"))) == {"stages": {}, "done": False}
PY

# ---- [synth] changed under an existing out -------------------------------------------------------------
check "the data's settings are recorded beside it" \
  "$PY" -c "import json; r = json.load(open('out/data/synth-record.json')); assert r['reverse-train.txt'] == ['reverse', '--lengths', '1-3', '--count', '20', '--seed', '3'], r"
cp out/data/reverse-train.txt train-before.txt
sed 's/^train_count = 20$/train_count = 30/' suite.ini > changed.ini
refused "train_count changed after points ran: refused, naming the old and new commands and the points" \
  "out/data/reverse-train.txt was written by \`realpos synth reverse --lengths 1-3 --count 20 --seed 3\`, but changed.ini's [synth] section now asks for \`realpos synth reverse --lengths 1-3 --count 30 --seed 3\`, and 2 point(s) in out ran on the old data" \
  sweep changed.ini
check "... the data is untouched" cmp -s train-before.txt out/data/reverse-train.txt
sed 's/^train_lengths = 1-3$/train_lengths = 1-2/' suite.ini > changed2.ini
refused "train_lengths changed: refused too" "now asks for \`realpos synth reverse --lengths 1-2 --count 20 --seed 3\`" sweep changed2.ini
rm -rf out/task=*
sweep changed.ini > run3.log 2>&1
check "with no point started in out, changed settings write the data again and run" \
  bash -c "grep -q 'sweep: 2 points, 0 already done; running 2' run3.log && [ \$(grep -c '^\$' out/data/reverse-train.txt) = 30 ]"
rm out/data/synth-record.json
sweep changed.ini > run4.log 2>&1
check "data without a record (an older sweep.py) that is what the settings write: accepted and recorded" \
  bash -c "grep -q 'sweep: 2 points, 2 already done' run4.log && grep -q 'reverse-train.txt' out/data/synth-record.json"
rm out/data/synth-record.json
refused "data without a record that the settings do not write: refused" \
  "out/data/reverse-train.txt was written by other settings (or another realpos)" sweep suite.ini
