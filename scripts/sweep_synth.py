"""Synthetic tagging suites for scripts/sweep.py: the [synth] section of a sweep file.

    [synth]
    tasks = reverse duplicate mqar      ; realpos synth tasks: a grid key synth.task of their own
    train_lengths = 1-40                ; the training files' lengths (uniform)
    train_count = 20000                 ; training examples per task
    test_lengths = 1-160                ; the test files' lengths, test_count of each (--per-length)
    test_count = 8
    seed = 1                            ; training files use it, test files seed + 1000

The data is written once per task into OUT/data/TASK-{train,test}.txt by `realpos synth` (a file
is a function of its arguments, so a rerun reuses it), and the arguments of each file are recorded
in OUT/data/synth-record.json. A rerun whose [synth] settings ask for other files writes them again
while no point has started in OUT, and is refused once one has (its results came from the old
data); a file without a record (an older sweep.py) is written again beside itself and compared. A point is `realpos finetune BASE` (a
tagging config with task.init_checkpoint = none) with task.train_file and task.dev_file set to its
task's files: its final dev evaluation is the test scoring, per length in words, within and beyond
the training lengths (the task_eval record of RUN_DIR/metrics.jsonl), kept in the point's state as
stage "tagging"."""
import filecmp
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
        if key in synth:
            error(f"{path}:{no}: [synth] key '{key}' appears twice")
        synth[key] = value
    missing = [k for k in KEYS if k not in synth]
    if missing:
        error(f"{path}: [synth] needs '{missing[0]} = ...'")
    synth["tasks"] = synth["tasks"].split()
    if not synth["tasks"] or len(set(synth["tasks"])) != len(synth["tasks"]):
        error(f"{path}: [synth] tasks: expected one or more distinct realpos synth tasks, got '{' '.join(synth['tasks'])}'")
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
            if data_is_current(spec, path, [task] + cmd, realpos):
                continue
            r = subprocess.run([realpos, "synth", task] + cmd + ["--out", path], capture_output=True, text=True)
            if r.returncode != 0:
                errors.append(f"{spec['path']}: [synth]: realpos synth {task}: {r.stderr.strip()}")
            else:
                record_data(spec, path, [task] + cmd)
    return errors


# ---- what wrote the data: OUT/data/RECORD, {file name: `realpos synth` arguments} ----------------

RECORD = "synth-record.json"


def read_record(spec):
    from sweep_spec import SweepError  # sweep_spec imports this module
    path = os.path.join(spec["out"], "data", RECORD)
    try:
        with open(path) as f:
            record = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise SweepError(f"{path}: unreadable ({e}); delete it: the data files are then checked against the "
                         "[synth] settings by writing them again")
    if not isinstance(record, dict):
        raise SweepError(f"{path}: expected a JSON object; delete it: the data files are then checked against the "
                         "[synth] settings by writing them again")
    return record


def record_data(spec, path, args):
    """Record that `realpos synth ARGS` wrote path (temporary file, fsync, rename)."""
    record = read_record(spec)
    record[os.path.basename(path)] = args
    target = os.path.join(spec["out"], "data", RECORD)
    with open(target + ".tmp", "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(target + ".tmp", target)


def data_is_current(spec, path, args, realpos):
    """True if path holds what `realpos synth ARGS` writes (its record says so; without a record,
    from an older sweep.py, the file is written again beside it and compared). A file of other
    settings is deleted (and False returned) while no point has started in OUT; once one has, it ran
    on that data: SweepError with the choices."""
    from sweep_spec import SweepError  # sweep_spec imports this module
    if not os.path.exists(path):
        return False
    recorded = read_record(spec).get(os.path.basename(path))
    if recorded is None:
        check = path + ".check"
        r = subprocess.run([realpos, "synth"] + args + ["--out", check], capture_output=True, text=True)
        same = r.returncode == 0 and filecmp.cmp(check, path, shallow=False)
        if os.path.exists(check):
            os.remove(check)
        if same:
            record_data(spec, path, args)
            return True
    elif recorded == args:
        return True
    started = sorted(d for d in os.listdir(spec["out"]) if d != "data" and os.path.isdir(os.path.join(spec["out"], d)))
    if not started:
        os.remove(path)
        return False
    wrote = f"`realpos synth {' '.join(recorded)}`" if recorded else "other settings (or another realpos)"
    raise SweepError(f"{path} was written by {wrote}, but {spec['path']}'s [synth] section now asks for `realpos "
                     f"synth {' '.join(args)}`, and {len(started)} point(s) in {spec['out']} ran on the old data "
                     f"(e.g. {started[0]}). Restore the [synth] settings, choose another [sweep] out, or delete "
                     f"{spec['out']} to start afresh")


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
