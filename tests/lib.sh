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
