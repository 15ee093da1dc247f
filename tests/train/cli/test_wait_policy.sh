#!/usr/bin/env bash
# realpos runs with OMP_WAIT_POLICY=PASSIVE when the user set neither OMP_WAIT_POLICY nor
# GOMP_SPINCOUNT (train/cli/main.c: libgomp's spinning idle threads made 2-thread steps of small
# batches several times slower on a shared host): it re-executes itself with the policy set, with
# the same arguments; a policy or spin count the user set is left as it is.
source "$(dirname "$0")/../../lib.sh"
policy_line() { "$@" "$RP" --version | grep '^OpenMP: '; }
got=$(policy_line env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT)
[[ $got == "OpenMP: OMP_WAIT_POLICY=PASSIVE, GOMP_SPINCOUNT=(unset)"* ]] &&
  pass "neither set: realpos runs with OMP_WAIT_POLICY=PASSIVE" || fail "neither set: realpos runs with OMP_WAIT_POLICY=PASSIVE" "$got"
got=$(policy_line env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active)
[[ $got == "OpenMP: OMP_WAIT_POLICY=active, GOMP_SPINCOUNT=(unset)"* ]] &&
  pass "the user's OMP_WAIT_POLICY is kept" || fail "the user's OMP_WAIT_POLICY is kept" "$got"
got=$(policy_line env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=1000)
[[ $got == "OpenMP: OMP_WAIT_POLICY=(unset), GOMP_SPINCOUNT=1000"* ]] &&
  pass "the user's GOMP_SPINCOUNT is kept (no policy added)" || fail "the user's GOMP_SPINCOUNT is kept (no policy added)" "$got"
# the re-executed process gets the same arguments (a --set with spaces, a path) and exit status
env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$RP" config configs/tiny.ini --set "train.run_dir=$tmp/a b" >"$tmp/c.ini" 2>&1 &&
  grep -qx "run_dir = $tmp/a b" "$tmp/c.ini" && pass "re-executed with the same arguments" ||
  fail "re-executed with the same arguments" "$(head -c 400 "$tmp/c.ini")"
env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$RP" nosuchcommand >/dev/null 2>&1
[ $? -eq 2 ] && pass "re-executed: the exit status is the command's" || fail "re-executed: the exit status is the command's"
