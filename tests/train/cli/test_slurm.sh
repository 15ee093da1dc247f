#!/usr/bin/env bash
# Sweeps and data-parallel training under a real Slurm (Debian's slurm-wlm and munge): a one-node
# cluster started here in a scratch directory (tests/slurm_cluster.sh) and stopped at the end
# whatever happens. Checks: `sweep.py --slurm --wait` of 6 tiny points ends with every point's
# checkpoints, metrics and evaluations bit-identical to the local runner's; an array cancelled
# while one point runs (stopped at a chosen step) and one has failed, then resubmitted: finished
# points are not rerun, the failed one reruns, the cancelled one resumes, all end identical; a
# second submission while tasks are queued submits nothing; a task whose point is locked runs
# nothing; [slurm] errors; a two-stage [protocol] sweep; scripts/slurm/train.sbatch on 2 ranks (srun --mpi=pmix, stopped by a
# USR1 to the batch script as at a time limit, resubmitted) against `mpirun -np 2`, and with the
# mpirun launcher. SKIP without the Slurm and munge commands, or when not root (the daemons).
source "$(dirname "$0")/../../lib.sh"
source tests/slurm_cluster.sh
root=$PWD
check() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name"; fi; }
missing=$(slurm_cluster_missing)
if [ -n "$missing" ]; then
  echo "SKIP test_slurm (no $(echo $missing | tr ' ' ','): scripts/setup.sh installs slurm-wlm and munge)"; exit 0
fi
if [ "$(id -u)" -ne 0 ]; then echo "SKIP test_slurm (its one-node cluster's daemons run as root)"; exit 0; fi
cluster=$tmp/cluster
cleanup() { slurm_cluster_stop "$cluster"; [ -n "${KEEP:-}" ] || rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 143' INT TERM
chmod 755 "$tmp"  # munged's socket must be reachable
slurm_cluster_start "$cluster" || { fail "a one-node Slurm cluster starts"; exit 1; }
pass "a one-node Slurm cluster starts (munged, slurmctld, slurmd)"
sweep() { "$PY" "$root/scripts/sweep.py" --realpos "$root/realpos" "$@"; }
# squeue_empty JOB: wait (up to 60 s) until Slurm runs and queues nothing of JOB
squeue_empty() {
  local i
  for i in $(seq 1 240); do [ -z "$(squeue -h -j "$1" -o %i 2>/dev/null)" ] && return 0; sleep 0.25; done
  return 1
}

# ---- the sweep fixtures' tiny corpus (tests/train/cli/test_sweep.sh) ---------------------------------------
work=$tmp/sweep
mkdir -p "$work"
cp tests/fixtures/sweep/base.ini tests/fixtures/sweep/run.ini "$work/"
cd "$work"
synthetic_vocab vocab.txt 80
awk 'BEGIN { srand(7); for (d = 0; d < 60; d++) { ns = 4 + int(rand() * 9);
       for (s = 0; s < ns; s++) { n = 3 + int(rand() * 10); line = "";
         for (w = 0; w < n; w++) { z = int(rand() * rand() * 80); line = line (w ? " " : "") "w" z }
         print line "." }
       print "" } }' >corpus.txt
"$root/realpos" prepare base.ini >prepare.log 2>&1 || { fail "realpos prepare of the tiny corpus"; cat prepare.log; exit 1; }

# same_runs DIR_A DIR_B NAME...: every point's checkpoints (every dataset of model/, optimizer/,
# train/ but the metrics window's two clock words), metrics.jsonl without its timing fields, and
# held-out evaluations (sweep-point.json stages without wall_s) are identical in both sweeps.
same_runs() {
  "$PY" - "$@" <<'PY'
import glob, json, os, re, sys
import h5py, numpy as np
a_dir, b_dir, names = sys.argv[1], sys.argv[2], sys.argv[3:]
clock = re.compile(r"tokens_per_s|mfu|elapsed_s|eta_s|gflops|peak_")
def datasets(f):
    out = []
    f.visit(lambda n: out.append(n) if isinstance(f[n], h5py.Dataset) else None)
    return out
def metrics(path):
    return [{k: v for k, v in json.loads(l).items() if not clock.match(k)} for l in open(path)]
def stages(path):
    return {s: {k: v for k, v in r.items() if k != "wall_s"} for s, r in json.load(open(path))["stages"].items()
            if s != "pretrain"}
bad = []
for name in names:
    a, b = os.path.join(a_dir, name), os.path.join(b_dir, name)
    ckpts = sorted(os.path.basename(p) for p in glob.glob(os.path.join(a, "ckpt-*.h5")))
    if not ckpts or ckpts != sorted(os.path.basename(p) for p in glob.glob(os.path.join(b, "ckpt-*.h5"))):
        bad.append(f"{name}: checkpoints {ckpts}")
        continue
    for c in ckpts:
        x, y = h5py.File(os.path.join(a, c), "r"), h5py.File(os.path.join(b, c), "r")
        part = lambda n, v: v[1:7] if n == "train/metrics_window" else v
        names_x = [n for n in datasets(x) if n.startswith(("model/", "optimizer/", "train/"))]
        if not names_x or names_x != [n for n in datasets(y) if n.startswith(("model/", "optimizer/", "train/"))] \
                or any(not np.array_equal(part(n, x[n][()]), part(n, y[n][()])) for n in names_x):
            bad.append(f"{name}/{c}")
    if metrics(os.path.join(a, "metrics.jsonl")) != metrics(os.path.join(b, "metrics.jsonl")):
        bad.append(f"{name}/metrics.jsonl")
    if stages(os.path.join(a, "sweep-point.json")) != stages(os.path.join(b, "sweep-point.json")):
        bad.append(f"{name}/sweep-point.json")
print("identical" if not bad else "differ: " + " ".join(bad[:4]))
PY
}

# ---- --slurm --wait: 6 points, 2 at a time, against the local runner ----------------------------------
# run.ini's 6 points, 20 steps each; the local runner's sweeps (this one and the cancelled one
# below) run in the background meanwhile.
sed 's|^out = runs/run|out = runs/local|; s|^\[grid\]|[set]\ntrain.max_steps = 20\n[grid]|' run.ini >local.ini
sed 's|^out = runs/local|out = runs/slurm|' local.ini >slurm.ini
printf '[slurm]\ncpus_per_task = 1\nthrottle = 2\ntime = 10:00\n' >>slurm.ini
cat >resume.ini <<'INI'
[sweep]
base = base.ini
out = runs/cancel
[set]
train.max_steps = 30
model.relative_position = method4
[grid]
model.seed = 1 2 3 4
[slurm]
throttle = 1
time = 10:00
INI
sed 's|^out = runs/cancel|out = runs/cancel-local|' resume.ini >resume-local.ini
(sweep local.ini --jobs 1 --cores 1 >local.log 2>&1; echo $? >local.rc
 sweep resume-local.ini --jobs 1 --cores 1 >cancel-local.log 2>&1; echo $? >>local.rc) &
local_sweeps=$!
sweep slurm.ini --slurm --wait >slurm.log 2>&1
rc=$?
job=$(sed -n 's/^sweep: submitted job \([0-9]*\) (array 0-5, 2 at a time).*/\1/p' slurm.log)
check "sweep --slurm --wait: one array of the 6 points, 2 at a time, all done (status $rc)" \
  test $rc -eq 0 -a -n "$job" -a "$(grep -c 'wrote runs/slurm/results' slurm.log)" -eq 2
names=$(awk '$1 == "done" { print $3 }' <(sweep slurm.ini --list))
check "sweep --list: the 6 points done, each with its array task" \
  test "$(sweep slurm.ini --list | grep -c "^done  *${job}_[0-5] ")" -eq 6
wait $local_sweeps
check "the local runner's sweeps (references) succeed" test "$(cat local.rc)" = "0
0"
check "every point's checkpoints, metrics and evaluations are bit-identical to the local runner's" \
  test "$(same_runs runs/local runs/slurm $names)" = identical
check "each point ran with train.threads = cpus_per_task (1)" \
  test "$(grep -lx 'threads = 1' runs/slurm/*/config.ini | wc -l)" -eq 6
check "the report of the Slurm sweep equals the local one's (results.csv but for tokens/s and wall time)" "$PY" - <<'PY'
import csv, sys
rows = [[{k: v for k, v in r.items() if k not in ("tokens_per_s", "wall_s")} for r in csv.DictReader(open(p))]
        for p in ("runs/local/results.csv", "runs/slurm/results.csv")]
sys.exit(0 if len(rows[0]) == 6 and rows[0] == rows[1] else 1)
PY
sweep slurm.ini --slurm >again.log 2>&1
check "resubmitting a finished sweep submits nothing" grep -q '6 done, 0 pending or running on Slurm; submitting 0' again.log

# ---- [slurm] errors, before anything is submitted -----------------------------------------------------------
line=$(($(wc -l <run.ini) + 2))
printf '[slurm]\ncpus_per_tsak = 2\n' | cat run.ini - >bad-key.ini
expect_error "[slurm]: an unknown key is named with the file and line" \
  "bad-key.ini:$line: [slurm] has unknown key 'cpus_per_tsak'; expected one of partition" sweep bad-key.ini --slurm
printf '[slurm]\ntime = an hour\n' | cat run.ini - >bad-time.ini
expect_error "[slurm]: a bad time limit" "bad-time.ini:$line: [slurm] time: expected a time limit" sweep bad-time.ini --slurm
expect_error "--cpus-per-task: a bad value" "--cpus-per-task (the [slurm] key cpus_per_task): expected a whole number" \
  sweep run.ini --slurm --cpus-per-task 0
expect_error "sbatch_options: an option the sweep sets itself" \
  "'--array=1' is set by the sweep itself" sweep run.ini --slurm --sbatch-options=--array=1
check "nothing was submitted or written for the refused sweeps" test ! -e runs/run -a -z "$(squeue -h -o %i)"

# ---- cancel while a point runs, resubmit ------------------------------------------------------------------------
# A wrapper around realpos: the first pretraining of seed=1 fails; the first of seed=3 stops itself
# (SIGSTOP) after its checkpoint of step 10, as a chosen point to cancel the array at.
touch fail-seed=1 stop-seed=3
cat >wrapped-realpos <<SH
#!/usr/bin/env bash
for seed in 1 3; do
  if [ "\$1" = pretrain ] && [[ "\$*" == *"/seed=\$seed "* ]] && rm "$work/\$([ \$seed = 1 ] && echo fail || echo stop)-seed=\$seed" 2>/dev/null; then
    [ \$seed = 1 ] && { echo "wrapped-realpos: a failure on purpose"; exit 3; }
    echo \$\$ >"$work/stopped.pid"
    export REALPOS_TEST_SIGNAL_AT_STEP=STOP:10
  fi
done
exec "$root/realpos" "\$@"
SH
chmod +x wrapped-realpos
wsweep() { "$PY" "$root/scripts/sweep.py" --realpos ./wrapped-realpos "$@"; }
# The array is held until the second submission is made, then released.
wsweep resume.ini --slurm --sbatch-options=--hold >cancel1.log 2>&1
job=$(sed -n 's/^sweep: submitted job \([0-9]*\) .*/\1/p' cancel1.log)
wsweep resume.ini --slurm >cancel-dup.log 2>&1
check "a second submission while the array is queued submits nothing" \
  grep -q '0 done, 4 pending or running on Slurm; submitting 0' cancel-dup.log
scontrol release "$job"
for i in $(seq 1 400); do [ -s stopped.pid ] && break; sleep 0.25; done
if [ -s stopped.pid ] && wait_stopped "$(cat stopped.pid)"; then
  wsweep resume.ini --list >list-running.txt 2>&1
  check "--list while seed=3 runs: seed=1 failed (with its log), seed=2 done, seed=3 running, seed=4 pending" \
    bash -c "grep -q '^failed  *${job}_0  *seed=1 ' list-running.txt && grep -q 'pretrain failed with status 3; see runs/cancel/seed=1/pretrain.log' list-running.txt &&
             grep -q '^done  *${job}_1  *seed=2 ' list-running.txt && grep -q '^running  *${job}_2  *seed=3 ' list-running.txt &&
             grep -q '^pending  *${job}_3  *seed=4 ' list-running.txt"
  scancel "$job"
  squeue_empty "$job" || fail "scancel ends the array"
  wsweep resume.ini --list >list-cancelled.txt 2>&1
  check "--list after scancel: seed=3 and seed=4 cancelled" \
    bash -c "grep -q '^cancelled  *${job}_2  *seed=3 ' list-cancelled.txt && grep -q '^cancelled  *${job}_3  *seed=4 ' list-cancelled.txt"
  check "the cancelled point has a checkpoint of step 10 or later, not the last one" \
    bash -c "[ \"\$(head -n 1 runs/cancel/seed=3/latest)\" \\> ckpt-0000009.h5 ] && [ ! -e runs/cancel/seed=3/ckpt-0000030.h5 ]"
else
  fail "seed=3's pretraining stops itself at step 10" "$(cat cancel1.log)"
fi
wsweep resume.ini --slurm --wait >cancel2.log 2>&1
rc=$?
check "resubmission: only the failed and cancelled points are submitted, and all end done (status $rc)" \
  bash -c "grep -q '1 done, 0 pending or running on Slurm; submitting 3' cancel2.log && grep -q 'array 0,2-3' cancel2.log && [ $rc -eq 0 ]"
check "resubmission: the finished point was not run again" \
  test "$(grep -c '^# exit status' runs/cancel/seed=2/pretrain.log)" -eq 1
check "resubmission: the cancelled point resumed from its checkpoint" \
  grep -q 'resumed from runs/cancel/seed=3/ckpt-00000[12][0-9].h5' runs/cancel/seed=3/pretrain.log
check "after cancel and resubmission every point is bit-identical to the local runner's" \
  test "$(same_runs runs/cancel-local runs/cancel seed=1 seed=2 seed=3 seed=4)" = identical

# The per-point lock: a task whose point another task holds runs nothing.
rm -rf runs/cancel/seed=4 && mkdir -p runs/cancel/seed=4
sub=$(ls runs/cancel/slurm/submission-*.json | tail -n 1)
(flock 9; SLURM_ARRAY_TASK_ID=3 SLURM_ARRAY_JOB_ID=0 wsweep resume.ini --slurm-task "$sub" >locked.log 2>&1;
 echo $? >locked.rc) 9>runs/cancel/seed=4/.sweep-point.lock
check "a task whose point is locked by another task runs nothing (status 0)" \
  bash -c "[ \"\$(cat locked.rc)\" = 0 ] && grep -q 'seed=4 is being run by another task' locked.log && [ ! -e runs/cancel/seed=4/pretrain.log ]"

# ---- a two-stage [protocol] sweep: stage two is submitted once its cell has chosen ------------------------
mkdir -p "$tmp/protocol" && cd "$tmp/protocol"
tiny_tagging_ini base.ini train.run_dir="$tmp/protocol/unused" task.train_file=unused task.max_seq_len=40 task.max_steps=10
cat >two.ini <<'INI'
[sweep]
base = base.ini
out = out
[synth]
tasks = reverse
train_lengths = 1-4
train_count = 80
test_lengths = 1-8
test_count = 2
val_count = 2
seed = 3
[protocol]
select = task.lr
threshold = 0.95
select_seeds = 1
[grid]
model.seed = 1 2
task.lr = 1e-3 3e-3
[slurm]
time = 10:00
INI
sweep two.ini --slurm --wait >two.log 2>&1
rc=$?
sweep two.ini --list >two-list.txt 2>&1
check "two stages: the selection runs first, the other seed at its cell's chosen rate once chosen (status $rc)" \
  bash -c "grep -q 'submitting 2; 2 stage-two points wait for their cell' two.log && grep -q 'submitting 1\$' two.log &&
           [ $rc -eq 0 ] && [ \$(grep -c '^done ' two-list.txt) -eq 3 ] && [ \$(grep -c '^not needed ' two-list.txt) -eq 1 ]"
cd "$tmp/sweep"

# ---- scripts/slurm/train.sbatch on 2 ranks against mpirun -np 2 -----------------------------------------------
scancel --user=root 2>/dev/null  # whatever a failed check above left
for i in $(seq 1 240); do [ -z "$(squeue -h -o %i)" ] && break; sleep 0.25; done
cd "$tmp"
synthetic_corpus "$tmp" 60 40 11
tiny_pretrain_ini "$tmp/dp.ini" model.hidden_size=32 model.num_layers=2 model.intermediate_size=64 model.vocab_size=65 \
  train.grad_accum_steps=4 train.max_steps=8 train.checkpoint_interval=2 train.keep_last=10 train.run_dir="$tmp/dp-mpirun"
"$RP" prepare dp.ini >dp-prepare.log 2>&1 || { fail "prepare (train.sbatch)" "$(tail -3 dp-prepare.log)"; exit 1; }
OMP_NUM_THREADS=1 mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2 "$RP" pretrain dp.ini >dp-mpirun.log 2>&1 ||
  fail "mpirun -np 2 realpos pretrain" "$(tail -3 dp-mpirun.log)"
same_ckpt() {
  "$PY" - "$@" <<'PY'
import sys, h5py, numpy as np
x, y = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
names = []
x.visit(lambda n: names.append(n) if isinstance(x[n], h5py.Dataset) and n.startswith(("model/", "optimizer/", "train/")) else None)
part = lambda n, v: v[1:7] if n == "train/metrics_window" else v
ok = names and all(n in y and np.array_equal(part(n, x[n][()]), part(n, y[n][()])) for n in names)
print("identical" if ok else "differ")
PY
}
# First submission: both ranks stop themselves after step 3; a USR1 to the batch script (what
# --signal=B:USR1@120 sends before the time limit) is passed on to them, then they continue.
job=$(REALPOS="$RP" REALPOS_TEST_SIGNAL_AT_STEP=STOP:3 sbatch --parsable --time=10 -n 2 --output="$tmp/sb-%j.out" \
  "$root/scripts/slurm/train.sbatch" pretrain dp.ini --set train.run_dir="$tmp/dp-sbatch")
ranks=()
for i in $(seq 1 400); do
  mapfile -t ranks < <(pgrep -f "^$RP pretrain dp.ini --set train.run_dir=$tmp/dp-sbatch")
  [ ${#ranks[@]} -eq 2 ] && break
  sleep 0.25
done
stopped=0
for p in "${ranks[@]}"; do wait_stopped "$p" && stopped=$((stopped + 1)); done
if [ "$stopped" -eq 2 ]; then
  scancel --batch --signal=USR1 "$job"
  usr1_pending() { grep -q "^ShdPnd:.*[2367abef]..$" "/proc/$1/status" || grep -q "^SigPnd:.*[2367abef]..$" "/proc/$1/status"; }
  for i in $(seq 1 200); do usr1_pending "${ranks[0]}" && usr1_pending "${ranks[1]}" && break; sleep 0.1; done
  kill -CONT "${ranks[@]}"
else
  fail "both ranks of the sbatch run stop themselves at step 3" "$(cat "$tmp"/sb-*.out)"
fi
squeue_empty "$job" || fail "the first train.sbatch job ends"
check "train.sbatch: srun --mpi=pmix on 2 ranks; USR1 to the script stops the run with a checkpoint before the end" \
  bash -c "grep -q 'srun --mpi=pmix .*(ranks: 2,' $tmp/sb-$job.out && grep -q 'train.sbatch: stopped at ckpt-000000[3-7].h5' $tmp/sb-$job.out"
job2=$(REALPOS="$RP" sbatch --parsable --wait --time=10 -n 2 --output="$tmp/sb-%j.out" \
  "$root/scripts/slurm/train.sbatch" pretrain dp.ini --set train.run_dir="$tmp/dp-sbatch")
check "train.sbatch: submitting the same command again resumes the run (status $?)" \
  grep -q "resumed from $tmp/dp-sbatch/ckpt-000000[3-7].h5" "$tmp/sb-$job2.out"
check "train.sbatch (stopped and resubmitted) ends bit-identical to mpirun -np 2" \
  test "$(same_ckpt "$tmp/dp-mpirun/ckpt-0000008.h5" "$tmp/dp-sbatch/ckpt-0000008.h5")" = identical
job3=$(REALPOS="$RP" REALPOS_LAUNCHER=mpirun sbatch --parsable --wait --time=10 -n 2 --output="$tmp/sb-%j.out" \
  "$root/scripts/slurm/train.sbatch" pretrain dp.ini --set train.run_dir="$tmp/dp-sbatch-mpirun")
check "train.sbatch with REALPOS_LAUNCHER=mpirun ends bit-identical to mpirun -np 2" \
  test "$(same_ckpt "$tmp/dp-mpirun/ckpt-0000008.h5" "$tmp/dp-sbatch-mpirun/ckpt-0000008.h5")" = identical
