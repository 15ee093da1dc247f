"""Synthetic tagging suites for scripts/sweep.py: the [synth] section of a sweep file.

    [synth]
    tasks = reverse duplicate mqar      ; realpos synth tasks: a grid key synth.task of their own
    train_lengths = 1-40                ; the training files' lengths (uniform)
    train_count = 20000                 ; training examples per task
    test_lengths = 1-160                ; the test files' lengths, test_count of each (--per-length)
    test_count = 8
    seed = 1                            ; training files use it, test files seed + 1000

The data is written once per task into OUT/data/TASK-{train,test}.txt by `realpos synth` (a file
is a function of its arguments, so a rerun reuses it). A point is `realpos finetune BASE` (a
tagging config with task.init_checkpoint = none) with task.train_file and task.dev_file set to its
task's files: its final dev evaluation is the test scoring, per length in words, within and beyond
the training lengths (the task_eval record of RUN_DIR/metrics.jsonl), kept in the point's state as
stage "tagging"."""
import json
import os
import subprocess

TASK_KEY = "synth.task"
KEYS = ("tasks", "train_lengths", "train_count", "test_lengths", "test_count", "seed")


def parse(path, items, error):
    """The [synth] section's settings, or None without one; error(message) raises."""
    if not items:
        return None
    synth = {}
    for no, text in items:
        if "=" not in text:
            error(f"{path}:{no}: expected 'key = value', got '{text}'")
        key, value = (t.strip() for t in text.split("=", 1))
        if key not in KEYS:
            error(f"{path}:{no}: [synth] has unknown key '{key}'; expected {', '.join(KEYS)}")
        synth[key] = value
    missing = [k for k in KEYS if k not in synth]
    if missing:
        error(f"{path}: [synth] needs '{missing[0]} = ...'")
    synth["tasks"] = synth["tasks"].split()
    for key in ("train_count", "test_count", "seed"):
        if not synth[key].isdigit():
            error(f"{path}: [synth] {key}: expected a non-negative integer, got '{synth[key]}'")
    return synth


def data_paths(spec, task):
    folder = os.path.join(spec["out"], "data")
    return os.path.join(folder, f"{task}-train.txt"), os.path.join(folder, f"{task}-test.txt")


def overrides(spec, settings):
    """The realpos overrides of a point's synth.task: its training and test files."""
    train, test = data_paths(spec, settings[TASK_KEY])
    return {"task.train_file": train, "task.dev_file": test}


def make_data(spec, realpos):
    """Write the missing data files; returns the commands' failures (messages)."""
    s, errors = spec["synth"], []
    os.makedirs(os.path.join(spec["out"], "data"), exist_ok=True)
    for task in s["tasks"]:
        train, test = data_paths(spec, task)
        for path, cmd in (
                (train, ["--lengths", s["train_lengths"], "--count", s["train_count"], "--seed", s["seed"]]),
                (test, ["--lengths", s["test_lengths"], "--count", s["test_count"], "--per-length",
                        "--seed", str(int(s["seed"]) + 1000)])):
            if os.path.exists(path):
                continue
            r = subprocess.run([realpos, "synth", task] + cmd + ["--out", path], capture_output=True, text=True)
            if r.returncode != 0:
                errors.append(f"realpos synth {task}: {r.stderr.strip()}")
    return errors


def tagging_result(run_dir):
    """The last task_eval record of the run (accuracy, in_range, beyond, by_length), or None."""
    found = None
    try:
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            for line in f:
                if '"task_eval"' in line:
                    rec = json.loads(line)
                    found = {k: rec[k] for k in ("accuracy", "sequence_accuracy", "in_range", "beyond",
                                                 "by_length", "train_max_length")}
    except (OSError, ValueError, KeyError):
        return None
    return found


def run_point(runner, tag, point, state, save):
    """`realpos finetune` of one point (resumed from RUN_DIR when it was interrupted); returns None
    or an error message. save() writes the point's state."""
    run_dir, stages = point["dir"], state["stages"]
    if "tagging" in stages:
        return None
    cmd = [runner.realpos, "finetune", runner.spec["base"]] + runner.point_sets(point)
    if os.path.exists(os.path.join(run_dir, "latest")):
        cmd += ["--resume", run_dir]
    print(f"{tag}: finetune from scratch (threads {runner.threads})", flush=True)
    status, _, seconds = runner.run_command(cmd, os.path.join(run_dir, "finetune.log"))
    if status is None or runner.stopping:
        return None
    result = tagging_result(run_dir) if status == 0 else None
    if result is None:
        return f"{tag}: finetune failed (status {status}) or scored nothing; see {run_dir}/finetune.log"
    stages["tagging"] = dict(result, wall_s=seconds)
    save()
    return None
