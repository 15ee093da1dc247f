# Sourced by the shell tests: runs from the repository root with $RP = the realpos binary,
# $PY = Debian's python3, a scratch directory $tmp removed on exit (kept with KEEP=1), and
# PASS/FAIL lines for tests/run.sh.
set -u
cd "$(dirname "${BASH_SOURCE[1]}")/.."
RP="${REALPOS:-$PWD/realpos}"
PY=/usr/bin/python3
tmp=$(mktemp -d /tmp/realpos-test.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT
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

# kill9_when FILE PID [TIMEOUT]: run PID in short slices (SIGCONT, 20 ms, SIGSTOP) until FILE
# exists, then SIGKILL it. The process is stopped whenever FILE is checked, and one slice gives
# it at most 20 ms of CPU however loaded the machine is, so the kill lands within a slice of
# FILE appearing instead of whenever a poll loop happens to run. Returns 1 (and kills PID) if
# PID exits first or FILE has not appeared after TIMEOUT seconds (default 180).
kill9_when() {
  local file=$1 pid=$2 deadline=$((SECONDS + ${3:-180}))
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
    kill -STOP "$pid" 2>/dev/null
    if [ -e "$file" ]; then kill -9 "$pid"; kill -CONT "$pid" 2>/dev/null; return 0; fi
    kill -CONT "$pid" 2>/dev/null
    sleep 0.02
  done
  kill -9 "$pid" 2>/dev/null
  return 1
}
