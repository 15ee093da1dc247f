"""scripts/sweep.py SWEEP.ini --slurm: the sweep's unfinished points as one Slurm job array.

Submission (`submit`) writes OUT/slurm/submission-K.json (the points of this array: index in the
sweep -> the point as `sweep_spec.expand` made it, and the sweep file's SHA-256) and
OUT/slurm/submission-K.sh, then runs `sbatch --array=I,J,...%T` on it. Array task I runs
`sweep.py SWEEP.ini --slurm-task OUT/slurm/submission-K.json` (`run_task`): it takes point I of the
file, a lock on the point's directory, and calls the local runner's `Runner.run_point` on it with
train.threads = the task's CPUs: the same commands, run directory and logs as a local run. It
writes OUT/NAME/slurm-task.json (job, state running/done/failed/stopped, error) as it goes.

State (`point_states`, shown by --list): done from the point's sweep-point.json; pending, running,
timed out, cancelled, failed from squeue (`-t all`: also the tasks that ended in the last
MinJobAge seconds) or, once Slurm forgot them, sacct where accounting runs; else from the task's
slurm-task.json. A resubmission submits the points that are neither done nor pending/running."""
import argparse
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import sweep_report
import sweep_stages
import sweep_synth
from sweep_spec import SweepError, relevant

TASK_FILE = "slurm-task.json"
SETTLED = ("done", "pending", "running", "not needed")  # states a submission leaves alone
# [slurm] key -> (command-line option, what a value must look like, its pattern)
KEYS = {
    "partition": ("--partition", "a partition name", r"[A-Za-z0-9_.,-]+"),
    "account": ("--account", "an account name", r"[A-Za-z0-9_.-]+"),
    "cpus_per_task": ("--cpus-per-task", "a whole number of CPUs >= 1", r"[1-9][0-9]*"),
    "mem": ("--mem", "a memory size per node such as 4G or 500M", r"[1-9][0-9]*[KMGT]?"),
    "time": ("--time", "a time limit: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS",
             r"[0-9]+(:[0-9]{1,2}){0,2}|[0-9]+-[0-9]{1,2}(:[0-9]{1,2}){0,2}"),
    "throttle": ("--throttle", "the number of the array's tasks run at once, >= 1", r"[1-9][0-9]*"),
    "sbatch_options": ("--sbatch-options", "more sbatch options, as on its command line", None),
}
DEFAULTS = {"cpus_per_task": "1"}
# sbatch options the submission sets itself (one key each above, or the array's own)
OWN_OPTIONS = {"--array": None, "-a": None, "--output": None, "-o": None, "--error": None, "-e": None,
               "--chdir": None, "-D": None, "--job-name": None, "-J": None, "--wrap": None, "--parsable": None,
               "--partition": "partition", "-p": "partition", "--account": "account", "-A": "account",
               "--cpus-per-task": "cpus_per_task", "-c": "cpus_per_task", "--mem": "mem",
               "--time": "time", "-t": "time", "--ntasks": None, "-n": None}
LIVE = {"PENDING": "pending", "CONFIGURING": "running", "RUNNING": "running", "COMPLETING": "running",
        "SUSPENDED": "running", "REQUEUED": "pending", "REQUEUE_HOLD": "pending", "RESIZING": "running",
        "SIGNALING": "running", "STAGE_OUT": "running"}
ENDED = {"TIMEOUT": "timed out", "CANCELLED": "cancelled", "FAILED": "failed", "NODE_FAIL": "failed",
         "OUT_OF_MEMORY": "failed", "BOOT_FAIL": "failed", "DEADLINE": "timed out", "PREEMPTED": "cancelled",
         "COMPLETED": None}


def add_arguments(ap):
    g = ap.add_argument_group("Slurm (docs/cluster.md)")
    g.add_argument("--slurm", action="store_true", help="submit the unfinished points as one job array")
    g.add_argument("--wait", action="store_true", help="with --slurm: wait for the array, then write the report")
    for key, (option, what, _) in KEYS.items():
        g.add_argument(option, dest=f"slurm_{key}", metavar=key.upper(), help=f"[slurm] {key}: {what}")
    g.add_argument("--slurm-task", help=argparse.SUPPRESS)  # what an array task runs


# ---- the [slurm] section ----------------------------------------------------------------------

def options(spec, args):
    """{key: value} of the [slurm] section overridden by the command line, validated; a bad value
    is an error naming the file and line (or the option) and the key."""
    values, where = dict(DEFAULTS), {}
    for no, text in spec.get("slurm", []):
        key, eq, value = (t.strip() for t in text.partition("="))
        if not eq or not key:
            raise SweepError(f"{spec['path']}:{no}: [slurm]: expected 'key = value', got '{text}'")
        if key not in KEYS:
            raise SweepError(f"{spec['path']}:{no}: [slurm] has unknown key '{key}'; expected one of "
                             f"{', '.join(KEYS)}")
        if key in where:
            raise SweepError(f"{spec['path']}:{no}: [slurm] key '{key}' appears twice")
        values[key], where[key] = value, f"{spec['path']}:{no}: [slurm] {key}"
    for key, (option, _, _) in KEYS.items():
        value = getattr(args, f"slurm_{key}", None)
        if value is not None:
            values[key], where[key] = value, f"{option} (the [slurm] key {key})"
    for key, value in values.items():
        _, what, pattern = KEYS[key]
        if pattern and not re.fullmatch(pattern, value):
            raise SweepError(f"{where.get(key, key)}: expected {what}, got '{value}'")
    try:
        extra = shlex.split(values.get("sbatch_options", ""))
    except ValueError as e:
        raise SweepError(f"{where['sbatch_options']}: {e}")
    for word in extra:  # --time=1:00, -t1:00 or -t 1:00
        name = word.split("=", 1)[0] if word.startswith("--") else word[:2]
        if word.startswith("-") and name in OWN_OPTIONS:
            own = OWN_OPTIONS[name]
            raise SweepError(f"{where['sbatch_options']}: '{word}' is set by the sweep itself" +
                             (f": use the [slurm] key {own}" if own else ""))
    values["sbatch_options"] = extra
    return values


# ---- files under OUT/slurm --------------------------------------------------------------------

def slurm_dir(spec):
    return os.path.join(spec["out"], "slurm")


def write_json(path, data):
    with open(path + ".tmp", "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(path + ".tmp", path)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def submissions(spec):
    """The recorded submissions, oldest first: [{file, job, points: {index: point}}]."""
    found = []
    d = slurm_dir(spec)
    for name in os.listdir(d) if os.path.isdir(d) else []:
        m = re.fullmatch(r"submission-([0-9]+)\.json", name)
        rec = read_json(os.path.join(d, name)) if m else None
        if rec and rec.get("job"):
            found.append((int(m.group(1)), dict(rec, file=os.path.join(d, name))))
    return [rec for _, rec in sorted(found, key=lambda x: x[0])]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ---- what Slurm says ----------------------------------------------------------------------------

def slurm_states(jobs):
    """{(job, index): STATE} for the array tasks of these job ids that Slurm still knows: squeue
    (pending, running and recently ended), then sacct (if accounting runs) for the rest. Raises
    SweepError when squeue fails (the controller is unreachable): nothing can be decided then."""
    if not jobs:
        return {}
    states = {}
    r = subprocess.run(["squeue", "-h", "-r", "-t", "all", "-o", "%F %K %T"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SweepError(f"squeue failed: {r.stderr.strip() or r.returncode}")
    for line in r.stdout.split("\n"):
        parts = line.split()
        if len(parts) == 3 and parts[0] in jobs and parts[1].isdigit():
            states[(parts[0], int(parts[1]))] = parts[2]
    if shutil.which("sacct"):
        r = subprocess.run(["sacct", "-n", "-P", "-X", "-j", ",".join(sorted(jobs)), "-o", "JobID,State"],
                           capture_output=True, text=True)
        for line in r.stdout.split("\n") if r.returncode == 0 else []:
            m = re.fullmatch(r"([0-9]+)_([0-9]+)\|([A-Z_]+).*", line.strip())
            if m:
                states.setdefault((m.group(1), int(m.group(2))), m.group(3))
    return states


def point_states(spec, points, load_state_done):
    """[(state, job_task, detail)] per point: state one of done, pending, running, timed out,
    cancelled, failed, stopped, partial, new; job_task 'JOB_INDEX' or ''; detail the error and log
    paths of a failure. load_state_done(point) -> 'done', 'not needed', 'partial' or 'new' (the
    local view; 'not needed': a two-stage protocol's point whose cell chose another rate)."""
    latest = {}  # point name -> (job, index) of its latest submission
    subs = submissions(spec)
    for rec in subs:
        for index, point in rec["points"].items():
            latest[point["name"]] = (str(rec["job"]), int(index))
    slurm = slurm_states({job for job, _ in latest.values()})
    out = []
    for p in points:
        local = load_state_done(p)
        job = latest.get(p["name"])
        task = read_json(os.path.join(p["dir"], TASK_FILE)) or {}
        job_task = f"{job[0]}_{job[1]}" if job else task.get("job", "")
        said = slurm.get(job) if job else None
        detail = ""
        if task.get("error"):
            detail = f"{task['error']} (task output: {task.get('output', '?')})"
        if local in ("done", "not needed"):
            state = local
        elif said in LIVE:
            state = LIVE[said]
        elif said and ENDED.get(said):
            state = ENDED[said]
            if state != "failed" or not detail:
                detail = detail or f"Slurm: {said}; task output {task_output(spec, job)}"
        elif task.get("job") == job_task and task.get("state") in ("failed", "stopped", "running"):
            # Slurm forgot the task: its own record (a task killed outright stays 'running')
            state = {"running": "stopped"}.get(task["state"], task["state"])
            if not detail:
                detail = f"task output {task.get('output', task_output(spec, job))}"
        else:
            state = local
        out.append((state, job_task, detail))
    return out


def task_output(spec, job):
    return os.path.join(slurm_dir(spec), f"{job[0]}_{job[1]}.out") if job else "?"


def list_points(spec, points, load_state_done):
    """--list for a sweep submitted to Slurm: True if it printed (the sweep has submissions)."""
    if not submissions(spec):
        return False
    counts = {}
    for p, (state, job_task, detail) in zip(points, point_states(spec, points, load_state_done)):
        counts[state] = counts.get(state, 0) + 1
        print(f"{state:10s} {job_task or '-':14s} {p['name']}  " +
              " ".join(f"{k}={v}" for k, v in p["overrides"].items() if k != "train.run_dir"))
        if detail:
            print(f"           {detail}")
    print(f"{len(points)} points: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return True


# ---- submitting -----------------------------------------------------------------------------------

def array_spec(indices):
    """[0, 1, 2, 5, 7, 8] -> '0-2,5,7-8'."""
    parts, start = [], None
    for i, x in enumerate(indices):
        if start is None:
            start = x
        if i + 1 == len(indices) or indices[i + 1] != x + 1:
            parts.append(f"{start}-{x}" if x != start else f"{x}")
            start = None
    return ",".join(parts)


def lock(path, mode, message):
    f = open(path, "a")
    try:
        fcntl.flock(f, mode | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise SweepError(message)
    return f


def submit(spec, points, args, opts, load_state_done):
    """--slurm: submit the points neither done nor pending/running (nor a two-stage protocol's
    points whose cell has not chosen yet); with --wait, wait until no task of the sweep is pending
    or running, submit the stage-two points the finished stage decided, and so on, then write the
    report. Returns the exit status."""
    for command in ("sbatch", "squeue"):
        if not shutil.which(command):
            raise SweepError(f"--slurm: '{command}' not found: run on a machine with the Slurm client commands")
    os.makedirs(slurm_dir(spec), exist_ok=True)
    if spec.get("synth"):
        failures = sweep_synth.make_data(spec, args.realpos)
        if failures:
            raise SweepError(failures[0])
    deferred_before = None
    while True:
        deferred = submit_once(spec, points, opts, load_state_done, args.realpos, deferred_before)
        if not args.wait:
            return 0
        last = not deferred or deferred == deferred_before
        status = wait(spec, points, load_state_done, report=last)
        if last:
            return status
        deferred_before = deferred


def load_point_state(run_dir):
    return read_json(os.path.join(run_dir, "sweep-point.json"))


def undecided(spec, points, point):
    """A two-stage protocol's stage-two point whose cell has not chosen its rate yet: submitted by a
    later --slurm, once the cell's selection runs are done (sweep_stages.py)."""
    return sweep_stages.needed(spec, points, point, load_point_state) is None


def submit_once(spec, points, opts, load_state_done, realpos, only=None):
    """Submit the open points (of `only` if given) as one array; returns the deferred ones."""
    held = [lock(os.path.join(slurm_dir(spec), ".submit.lock"), fcntl.LOCK_EX,
                 f"another sweep.py --slurm is submitting in {spec['out']}"),
            lock(os.path.join(spec["out"], ".sweep.lock"), fcntl.LOCK_SH,
                 f"a local sweep.py is running in {spec['out']}; wait for it or stop it first")]
    try:
        states = point_states(spec, points, load_state_done)
        open_points = [i for i, (state, _, _) in enumerate(states) if state not in SETTLED]
        deferred = [i for i in open_points if undecided(spec, points, points[i])]
        todo = [i for i in open_points if i not in deferred and (only is None or i in only)]
        active = sum(state in ("pending", "running") for state, _, _ in states)
        done = sum(state == "done" for state, _, _ in states)
        print(f"sweep: {len(points)} points, {done} done, {active} pending or running on Slurm; "
              f"submitting {len(todo)}" + (f"; {len(deferred)} stage-two points wait for their cell's choice "
                                           "(submit again once the selection runs are done)" if deferred else ""),
              flush=True)
        if todo:
            job = submit_array(spec, points, todo, opts, realpos)
            print(f"sweep: submitted job {job} (array {array_spec(todo)}"
                  f"{', ' + opts['throttle'] + ' at a time' if opts.get('throttle') else ''}); "
                  f"`sweep.py {spec['path']} --list` shows the points' state", flush=True)
        return deferred
    finally:
        for f in held:
            f.close()


def submit_array(spec, points, todo, opts, realpos):
    d = slurm_dir(spec)
    k = 1 + max([int(m.group(1)) for m in (re.fullmatch(r"submission-([0-9]+)\.json", n) for n in os.listdir(d))
                 if m] or [0])
    record_path = os.path.join(d, f"submission-{k}.json")
    record = {"sweep": os.path.abspath(spec["path"]), "sweep_sha256": sha256(spec["path"]), "job": None,
              "submitted": time.strftime("%Y-%m-%d %H:%M:%S"), "total": len(points),
              "all_points": [{k: p[k] for k in ("name", "settings", "dir")} for p in points],
              "points": {str(i): points[i] for i in todo}}
    write_json(record_path, record)
    script = os.path.join(d, f"submission-{k}.sh")
    sweep_py = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sweep.py")
    with open(script, "w") as f:
        f.write("#!/bin/bash\n# written by sweep.py --slurm: array task I runs point I of the file below\n"
                f"exec {shlex.quote(sys.executable)} {shlex.quote(sweep_py)} {shlex.quote(spec['path'])} "
                f"--realpos {shlex.quote(os.path.abspath(realpos))} "
                f"--slurm-task {shlex.quote(os.path.abspath(record_path))}\n")
    array = array_spec(todo) + (f"%{opts['throttle']}" if opts.get("throttle") else "")
    cmd = ["sbatch", "--parsable", f"--array={array}", f"--job-name=sweep:{os.path.basename(spec['out'])}",
           f"--output={os.path.abspath(d)}/%A_%a.out", f"--chdir={os.getcwd()}", "--ntasks=1"]
    cmd += [f"{KEYS[key][0]}={opts[key]}" for key in ("partition", "account", "cpus_per_task", "mem", "time")
            if opts.get(key)]
    cmd += opts["sbatch_options"] + [script]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not r.stdout.strip().split(";")[0].isdigit():
        os.remove(record_path)
        raise SweepError(f"{' '.join(shlex.quote(c) for c in cmd)} failed (status {r.returncode}): "
                         f"{r.stderr.strip() or r.stdout.strip()}")
    record["job"] = r.stdout.strip().split(";")[0]
    record["sbatch"] = cmd
    write_json(record_path, record)
    return record["job"]


def wait(spec, points, load_state_done, report=True):
    """Wait until no task of the sweep is pending or running, then (if report) write the report
    and name the points not done; returns 0 if every point is done (or not needed), else 1."""
    last = None
    while True:
        states = point_states(spec, points, load_state_done)
        counts = {}
        for state, _, _ in states:
            counts[state] = counts.get(state, 0) + 1
        line = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        if line != last:
            print(f"sweep: {time.strftime('%H:%M:%S')} {line}", flush=True)
            last = line
        if not counts.get("pending") and not counts.get("running"):
            break
        time.sleep(2)
    failed = [(p, s) for p, s in zip(points, states) if s[0] not in ("done", "not needed")]
    if not report:
        return 1 if failed else 0
    for path in sweep_report.write_report(spec, points, relevant):
        print(f"wrote {path}")
    for p, (state, job_task, detail) in failed:
        print(f"sweep: {p['name']}: {state} (job {job_task or '-'}){': ' + detail if detail else ''}", flush=True)
    return 1 if failed else 0


# ---- one array task ---------------------------------------------------------------------------------

def run_task(spec, args, runner_class, is_done, load_state):
    """--slurm-task FILE: run point $SLURM_ARRAY_TASK_ID of FILE as the local runner would."""
    record = read_json(args.slurm_task)
    index = os.environ.get("SLURM_ARRAY_TASK_ID", "")
    if record is None or index not in record.get("points", {}):
        raise SweepError(f"--slurm-task {args.slurm_task}: no point {index or '(SLURM_ARRAY_TASK_ID unset)'} "
                         "in this file")
    if sha256(spec["path"]) != record["sweep_sha256"]:
        raise SweepError(f"{spec['path']} changed since it was submitted ({args.slurm_task}): resubmit it")
    point = record["points"][index]
    job_task = f"{os.environ.get('SLURM_ARRAY_JOB_ID', '?')}_{index}"
    output = os.path.join(os.path.abspath(slurm_dir(spec)), f"{job_task}.out")
    os.makedirs(point["dir"], exist_ok=True)
    # A local sweep holds OUT/.sweep.lock exclusively; two tasks of one point never run at once.
    held = [lock(os.path.join(spec["out"], ".sweep.lock"), fcntl.LOCK_SH,
                 f"a local sweep.py is running in {spec['out']}: this task leaves point {point['name']} to it")]
    try:
        held.append(lock(os.path.join(point["dir"], ".sweep-point.lock"), fcntl.LOCK_EX, ""))
    except SweepError:
        print(f"sweep: {point['name']} is being run by another task ({point['dir']}/{TASK_FILE}); nothing to do",
              flush=True)
        return 0
    if is_done(spec, load_state(point["dir"])):
        print(f"sweep: {point['name']} is done already; nothing to do", flush=True)
        return 0
    threads = int(os.environ.get("SLURM_CPUS_PER_TASK") or len(os.sched_getaffinity(0)))
    task_path = os.path.join(point["dir"], TASK_FILE)
    task = {"job": job_task, "host": os.uname().nodename, "output": output, "threads": threads,
            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "state": "running"}
    write_json(task_path, task)
    runner = runner_class(spec, args.realpos, 1, threads)
    runner.points, runner.failed = record["all_points"], set()  # what Runner.run sets (two-stage protocols)
    signal.signal(signal.SIGINT, runner.stop)
    signal.signal(signal.SIGTERM, runner.stop)
    try:
        error = runner.run_point(int(index) + 1, record["total"], point)
    except OSError as e:
        error = f"{point['name']}: {e}"
    task["ended"] = time.strftime("%Y-%m-%d %H:%M:%S")
    if runner.stopping:
        task["state"] = "stopped"
    elif error:
        task.update(state="failed", error=error)
        print(f"sweep: error: {error}", flush=True)
    else:
        task["state"] = "done" if is_done(spec, load_state(point["dir"])) else "not needed"
    write_json(task_path, task)
    return 0 if task["state"] in ("done", "not needed") else (143 if runner.stopping else 1)
