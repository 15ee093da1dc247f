# Sourced by the shell tests: runs from the repository root with $RP = the realpos binary,
# $PY = Debian's python3, a scratch directory $tmp removed on exit (kept with KEEP=1), and
# PASS/FAIL lines for tests/run.sh.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RP="${REALPOS:-$PWD/realpos}"
PY=/usr/bin/python3
tmp=$(mktemp -d /tmp/realpos-test.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT
# The MFU peak cache (core/peak.h) of runs under test is the test's own, not the user's.
export XDG_CACHE_HOME="$tmp/cache"
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1${2:+: $2}"; }
[ -x "$RP" ] || { fail "realpos binary" "$RP missing (run make realpos)"; exit 1; }

# expect_error NAME PATTERN COMMAND...: the command exits non-zero (not by a signal) and its
# output contains PATTERN (fixed string).
expect_error() {
  local name=$1 pattern=$2; shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -qF -- "$pattern" <<<"$out"; then pass "$name"
  else fail "$name" "status $rc: $(head -c 400 <<<"$out")"; fi
}

# signal_when SIGNAL PID COMMAND...: run PID in short slices (SIGCONT, 20 ms, SIGSTOP) until
# COMMAND succeeds, then send it SIGNAL. The process is stopped whenever COMMAND is checked, and one
# slice gives it at most 20 ms of CPU however loaded the machine is, so the signal lands within a
# slice of the condition becoming true instead of whenever a poll loop happens to run. Returns 1
# (and SIGKILLs PID) if PID exits first or the condition is not met within SIGNAL_TIMEOUT seconds
# (default 180).
signal_when() {
  local signal=$1 pid=$2 deadline=$((SECONDS + ${SIGNAL_TIMEOUT:-180}))
  shift 2
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
    kill -STOP "$pid" 2>/dev/null
    if "$@"; then kill -"$signal" "$pid"; kill -CONT "$pid" 2>/dev/null; return 0; fi
    kill -CONT "$pid" 2>/dev/null
    sleep 0.02
  done
  kill -9 "$pid" 2>/dev/null
  return 1
}
# kill9_when FILE PID: SIGKILL PID as soon as FILE exists (see signal_when).
kill9_when() { signal_when KILL "$2" test -e "$1"; }

# synthetic_corpus DIR WORDS DOCUMENTS SEED: DIR/vocab.txt (the five special tokens, then w0 ..
# w{WORDS-1}) and DIR/corpus.txt (DOCUMENTS documents of 3-8 sentences of 3-10 words, frequent
# words first, a blank line after each document).
synthetic_corpus() {
  local dir=$1 words=$2 docs=$3 seed=$4
  { printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n'; for i in $(seq 0 $((words - 1))); do echo "w$i"; done; } \
    >"$dir/vocab.txt"
  awk -v W="$words" -v D="$docs" -v S="$seed" 'BEGIN { srand(S); for (d = 0; d < D; d++) {
         ns = 3 + int(rand() * 6);
         for (s = 0; s < ns; s++) { n = 3 + int(rand() * 8); line = "";
           for (w = 0; w < n; w++) line = line (w ? " " : "") "w" int(rand() * rand() * W)
           print line "." }
         print "" } }' >"$dir/corpus.txt"
}
