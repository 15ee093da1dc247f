"""The predicted cost of a synthetic suite on this machine (scripts/sweep.py --list), before it runs.

A point trains at most task.max_steps steps of task.batch_size examples and scores its dev file
every task.eval_every steps and its test file once. Its cost is bounded by

    seconds <= F + (steps x batch x T_train + evaluations x T_dev / 3 + T_test / 3) / R

with T_* the mean tokens (words + [CLS] and [SEP]) of an example of each file times its count,
a forward-only evaluation token taken as a third of a training token (forward ~1/3 of forward +
backward), and R the training tokens per second this machine gives the suite's model: measured
by a calibration run of the task's first point (CALIBRATION_STEPS steps on a sample of its
training lengths, one process with the threads --jobs leaves each point), and F the rest of that
run's wall time (start-up, data, vocabulary, checkpoints). On a shared host the calibration gets
part of its cores only: its CPU time over wall x threads is the share it got, and R and F are
scaled to an unloaded machine by that share (a point's cost in CPU time; steal time, which the
guest cannot see, still inflates it). The bound holds for
runs trained to the end; an early stop (task.stop_accuracy) ends a run sooner, so once points have
finished, the realised share of the bound (their wall time over their bound) scales the rest.
"""
import json
import os
import resource
import subprocess
import tempfile
import time

import sweep_stages
import sweep_synth
from sweep_spec import relevant

CALIBRATION_STEPS = 60
SAMPLE_COUNT = 400


def mean_tokens(realpos, args, folder, name):
    """Mean tokens of an example (words + 2) of `realpos synth ARGS`, from a sample file."""
    path = os.path.join(folder, name)
    r = subprocess.run([realpos, "synth"] + args + ["--out", path], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"realpos synth {' '.join(args)}: {r.stderr.strip()}")
    with open(path) as f:
        examples = f.read().strip("\n").split("\n\n")
    return sum(len(e.split("\n")) + 2 for e in examples) / len(examples), len(examples)


def calibrate(realpos, base, point, train_sample, folder, threads):
    """Training tokens per second of the point's model on the sample (CALIBRATION_STEPS steps)."""
    run_dir = tempfile.mkdtemp(prefix="run.", dir=folder)
    os.rmdir(run_dir)  # realpos creates it: a fresh run per calibration
    sets = dict(point["overrides"], **{
        "task.train_file": train_sample, "task.dev_file": "", "task.test_file": "", "task.stop_accuracy": "0",
        "task.max_steps": str(CALIBRATION_STEPS), "task.epochs": "1000", "train.run_dir": run_dir,
        "train.log_interval": str(CALIBRATION_STEPS // 2), "train.threads": str(threads),
        "train.checkpoint_interval": str(10 * CALIBRATION_STEPS)})
    cmd = [realpos, "finetune", base] + [a for k, v in sets.items() if relevant(k, point["cfg"])
                                         for a in ("--set", f"{k}={v}")]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode != 0:
        raise RuntimeError(f"calibration run failed: {r.stderr.strip().splitlines()[-1] if r.stderr else r.returncode}")
    records = []
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("kind") == "train" and rec.get("tokens_per_s"):
                records.append(rec)
    if not records:
        raise RuntimeError("calibration run logged no tokens_per_s")
    # the second window's rate (past the first steps' warm-up); the rest of the wall time (start-up,
    # data, vocabulary, checkpoints) is a point's fixed cost; both scaled to an unloaded host
    share = cpu_share(cpu, wall, threads)
    return (records[-1]["tokens_per_s"] / share, max(0.0, wall - records[-1]["elapsed_s"]) * share,
            share)


def cpu_share(cpu_s, wall_s, threads):
    """The share of its threads' time a process got: CPU seconds / (wall seconds x threads), in
    (0, 1]. A process that used more than its threads (OpenBLAS helpers) or a clock too coarse to
    tell counts as unloaded (1)."""
    if wall_s <= 0 or cpu_s <= 0:
        return 1.0
    return min(1.0, cpu_s / (wall_s * threads))


def hms(seconds):
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def point_bound(point, tokens, rate, fixed):
    """Seconds a point takes at most (trained to its last step) at `rate` training tokens/s, with
    `fixed` seconds of start-up and checkpoints."""
    cfg = point["cfg"]
    steps, batch = int(cfg["task.max_steps"]), int(cfg["task.batch_size"])
    every = int(cfg.get("task.eval_every") or 0)
    evaluations = (steps // every if every else 0) + 1
    train = steps * batch * tokens["train"]
    scored = evaluations * tokens["dev"] + tokens.get("test", 0)
    return fixed + (train + scored / 3) / rate


def predict(spec, points, realpos, threads, jobs, status):
    """Lines describing the predicted cost; status(point) -> 'done' | 'partial' | 'new'."""
    if not spec.get("synth"):
        return ["cost: predicted for [synth] suites only (a pretraining point costs train.max_steps steps of "
                "its batch: `realpos bench` measures its rate)"]
    s, lines = spec["synth"], []
    bounds = {}
    with tempfile.TemporaryDirectory(prefix="realpos-cost.") as folder:
        for task in s["tasks"]:
            first = next(p for p in points if p["settings"][sweep_synth.TASK_KEY] == task)
            train_args = sweep_synth.synth_args(task) + ["--lengths", s["train_lengths"], "--count",
                                                         str(SAMPLE_COUNT), "--seed", "1"]
            per_train, _ = mean_tokens(realpos, train_args, folder, "train.txt")
            per_scored, n = mean_tokens(realpos, sweep_synth.synth_args(task) + [
                "--lengths", s["test_lengths"], "--count", "1", "--per-length"], folder, "scored.txt")
            test = per_scored * n * int(s["test_count"])
            dev = per_scored * n * int(s.get("val_count") or s["test_count"])
            start = time.monotonic()
            rate, fixed, share = calibrate(realpos, spec["base"], first, os.path.join(folder, "train.txt"), folder,
                                           threads)
            tokens = {"train": per_train, "dev": dev, "test": test if s.get("val_count") else 0}
            mine = {p["name"] for p in points if p["settings"][sweep_synth.TASK_KEY] == task}
            for p in points:
                if p["name"] in mine:
                    bounds[p["name"]] = point_bound(p, tokens, rate, fixed)
            lines.append(f"cost: {task}: {rate:,.0f} training tokens/s at {threads} thread(s) and {fixed:.1f} s "
                         f"of start-up (calibrated in {time.monotonic() - start:.0f} s), at most {max(b for n, b in bounds.items() if n in mine):.0f} "
                         "s a point")
            if share < 0.9:
                lines.append(f"cost: {task}: the calibration got {share:.0%} of its threads' time (a loaded host): "
                             f"the rates here are its CPU time's, for this machine unloaded; at this load "
                             f"the wall times are about {1 / share:.1f} times these")
    # a two-stage protocol runs a replicate at its cell's chosen rate only: one of the rates' points
    select = (spec.get("protocol") or {}).get("select")
    for p in points:
        if sweep_stages.is_stage_two(spec, p):
            bounds[p["name"]] /= len(spec["grid"][select])
    total = sum(bounds.values())
    todo = [p for p in points if status(p) not in ("done", "not needed")]
    todo_bound = sum(bounds[p["name"]] for p in todo)
    lines.append(f"cost: {len(points)} points at most {hms(total)} of {threads}-thread processes "
                 f"({hms(total / jobs)} of wall at --jobs {jobs}) if every run trains to its last step")
    done = [p for p in points if status(p) == "done"]
    walls = []
    for p in done:
        try:
            with open(os.path.join(p["dir"], "sweep-point.json")) as f:
                walls.append((json.load(f)["stages"]["tagging"]["wall_s"], bounds[p["name"]]))
        except (OSError, ValueError, KeyError, TypeError):
            pass
    if walls:
        share = sum(w for w, _ in walls) / sum(b for _, b in walls)
        lines.append(f"cost: {len(walls)} points done took {share:.0%} of their bound (early stops, and this "
                     f"machine's load as they ran): the {len(todo)} left take about "
                     f"{hms(todo_bound * share / jobs)} of wall at --jobs {jobs}")
    elif todo:
        lines.append(f"cost: {len(todo)} points to run, at most {hms(todo_bound / jobs)} of wall at "
                     f"--jobs {jobs}; early stops make it less")
    return lines
