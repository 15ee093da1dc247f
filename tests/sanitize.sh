#!/usr/bin/env bash
# make sanitize: run the C test programs and the command-line tests that pretrain, evaluate,
# fine-tune, predict, tokenize and read configs and checkpoints, with the build of
# build-san/ (AddressSanitizer + UndefinedBehaviorSanitizer). Every sanitizer report goes to a
# file under a scratch directory (whatever the test's own verdict: an expected error exit must not
# hide a report); the run fails if any test fails or any report was written.
#   bash tests/sanitize.sh [BUILD_DIR [TEST...]]   (default build-san, every test below)
set -u
cd "$(dirname "$0")/.."
san=${1:-build-san}
shift $(($# > 0))
[ -x "$san/realpos" ] || { echo "FAIL $san/realpos missing (run make sanitize)"; exit 1; }
reports=$(mktemp -d /tmp/realpos-sanitize.XXXXXX)
trap 'rm -rf "$reports"' EXIT
# Halt at the first error. Leaks: the test programs are checked at exit; realpos checks when a
# command returns (train/cli/main.c), not at the exit of an error, whose leaks are left to the OS.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:exitcode=86:log_path=$reports/asan:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$reports/ubsan"
lsan_options="print_suppressions=0"
export REALPOS="$PWD/$san/realpos" FUZZ_REPLAY_DIR="$san/fuzz"
export OMP_WAIT_POLICY=passive

passed=0; failed=0
log_dir=$san/test-logs; mkdir -p "$log_dir"
# The shell tests that run the binary through prepare, pretrain, eval, finetune, predict,
# tokenize, vocab, config, init/inspect/dump and checkpoint errors; and the fuzz harnesses'
# regression and seed inputs through their sanitizer builds.
shell_tests=(tests/core/config/test_config.sh tests/train/data/test_tokenizer.sh tests/train/data/test_corpus.sh tests/train/model/test_checkpoint.sh
             tests/train/tasks/test_finetune.sh tests/train/loop/test_pretrain.sh tests/train/cli/test_fuzz_replay.sh
             tests/train/model/test_checkpoint_args.sh tests/train/tasks/test_predict_scores.sh
             tests/train/loop/test_resume_stored.sh tests/train/loop/test_init_transfer.sh)
all_tests=($(find "$san/tests" -name 'test_*' -type f ! -name '*.d' | sort) "${shell_tests[@]}")
[ $# -gt 0 ] && all_tests=("$@")
for t in "${all_tests[@]}"; do
  name=$(basename "$t"); log="$log_dir/$name.log"
  start=$(date +%s)
  if [[ "$t" == *.sh ]]; then LSAN_OPTIONS="$lsan_options:leak_check_at_exit=0" bash "$t" >"$log" 2>&1
  else LSAN_OPTIONS="$lsan_options" "$t" >"$log" 2>&1; fi
  rc=$?
  p=$(grep -c '^PASS ' "$log"); f=$(grep -c '^FAIL ' "$log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    f=1; echo "FAIL $name exited with status $rc"; tail -n 5 "$log" | sed 's/^/    /'
  fi
  grep '^FAIL ' "$log" | sed "s/^/  [$name] /"
  passed=$((passed + p)); failed=$((failed + f))
  n_reports=$(grep -l -e 'ERROR: ' -e 'runtime error' "$reports"/* 2>/dev/null | wc -l)
  printf '%-28s %4d passed %3d failed  %4ds  sanitizer reports so far: %d\n' "$name" "$p" "$f" \
    "$(( $(date +%s) - start ))" "$n_reports"
done
# LeakSanitizer may also log a warning alone ("Running thread ... was not suspended"): not a report
n_reports=$(grep -l -e 'ERROR: ' -e 'runtime error' "$reports"/* 2>/dev/null | wc -l)
if [ "$n_reports" -gt 0 ]; then
  echo "FAIL sanitizer: $n_reports report(s):"
  for r in $(grep -l -e 'ERROR: ' -e 'runtime error' "$reports"/*); do echo "---- $r"; head -n 40 "$r"; done
  failed=$((failed + n_reports))
else
  echo "PASS sanitizer: 0 AddressSanitizer/UndefinedBehaviorSanitizer/LeakSanitizer reports"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
