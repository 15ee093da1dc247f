"""Synthetic tagging suites for scripts/sweep.py: the [synth] section of a sweep file.

    [synth]
    tasks = reverse duplicate mqar      ; realpos synth tasks: a grid key synth.task of their own
    train_lengths = 1-40                ; the training files' lengths (uniform)
    train_count = 20000                 ; training examples per task
    test_lengths = 1-160                ; the test files' lengths, test_count of each (--per-length)
    test_count = 8
    seed = 1                            ; training files use it, test files seed + 1000
    val_count = 8                       ; optional: a validation file per task, test_lengths with
                                        ; val_count of each, seed + 2000

A task is a `realpos synth` task name, or NAME:D for a task that takes a distance (lookup:8 is
`realpos synth lookup --distance 8`). The data is written once per task into
OUT/data/TASK-{train,val,test}.txt by `realpos synth` (a file is a function of its arguments, so a
rerun reuses it), and the arguments of each file are recorded in OUT/data/synth-record.json. A
rerun whose [synth] settings ask for other files writes them again while no point has started in
OUT, and is refused once one has (its results came from the old data); a file without a record (an
older sweep.py) is written again beside itself and compared. A point is `realpos finetune BASE` (a tagging config with task.init_checkpoint =
none) with task.train_file set to its task's training file and
  - without val_count: task.dev_file = the test file: its final dev evaluation is the test scoring;
  - with val_count: task.dev_file = the validation file (the evaluations during training, the
    early stop of task.stop_accuracy, the report's choice of the learning rate) and
    task.test_file = the test file, scored once after the last step (the task_test record), which
    nothing the run or the report chooses ever reads.
The point's state keeps as stage "tagging" the final dev scores (accuracy, in_range, beyond,
by_length), the dev curve [[step, in-range token accuracy, beyond token accuracy], ...], the test
scores (`test`, with val_count), learned_step (the first of task.stop_patience dev evaluations in a
row at task.stop_accuracy or above; None: never, censored at steps_run), steps_run and max_steps."""
import filecmp
import json
import os
import subprocess

TASK_KEY = "synth.task"
KEYS = ("tasks", "train_lengths", "train_count", "test_lengths", "test_count", "seed")
OPTIONAL_KEYS = ("val_count",)
TEST_SEED_OFFSET, VAL_SEED_OFFSET = 1000, 2000
LEARNED_AT = 0.95  # the learned_step threshold of runs without an early stop (task.stop_accuracy = 0)
SCORES = ("accuracy", "sequence_accuracy", "in_range", "beyond", "by_length", "train_max_length")


def parse(path, items, error):
    """The [synth] section's settings, or None without one; error(message) raises."""
    if not items:
        return None
    synth = {}
    for no, text in items:
        if "=" not in text:
            error(f"{path}:{no}: expected 'key = value', got '{text}'")
        key, value = (t.strip() for t in text.split("=", 1))
        if key not in KEYS + OPTIONAL_KEYS:
            error(f"{path}:{no}: [synth] has unknown key '{key}'; expected {', '.join(KEYS + OPTIONAL_KEYS)}")
        if key in synth:
            error(f"{path}:{no}: [synth] key '{key}' appears twice")
        synth[key] = value
    missing = [k for k in KEYS if k not in synth]
    if missing:
        error(f"{path}: [synth] needs '{missing[0]} = ...'")
    synth["tasks"] = synth["tasks"].split()
    if not synth["tasks"] or len(set(synth["tasks"])) != len(synth["tasks"]):
        error(f"{path}: [synth] tasks: expected one or more distinct realpos synth tasks, got '{' '.join(synth['tasks'])}'")
    for task in synth["tasks"]:
        name, colon, distance = task.partition(":")
        if not name or (colon and not (distance.isdigit() and int(distance) >= 1)):
            error(f"{path}: [synth] tasks: expected NAME or NAME:D (D a distance >= 1), got '{task}'")
    for key in ("train_count", "test_count", "seed") + tuple(k for k in OPTIONAL_KEYS if k in synth):
        if not synth[key].isdigit():
            error(f"{path}: [synth] {key}: expected a non-negative integer, got '{synth[key]}'")
    if synth.get("val_count") == "0":
        error(f"{path}: [synth] val_count: expected at least 1 validation example per length, got 0")
    return synth


def synth_args(task):
    """`realpos synth` arguments of a task: 'lookup:8' -> ['lookup', '--distance', '8']."""
    name, _, distance = task.partition(":")
    return [name] + (["--distance", distance] if distance else [])


def data_paths(spec, task):
    """(train, test, validation or None) files of a task."""
    folder = os.path.join(spec["out"], "data")
    val = os.path.join(folder, f"{task}-val.txt") if spec["synth"].get("val_count") else None
    return os.path.join(folder, f"{task}-train.txt"), os.path.join(folder, f"{task}-test.txt"), val


def overrides(spec, settings):
    """The realpos overrides of a point's synth.task: its training, dev and test files."""
    train, test, val = data_paths(spec, settings[TASK_KEY])
    if val:
        return {"task.train_file": train, "task.dev_file": val, "task.test_file": test}
    return {"task.train_file": train, "task.dev_file": test}


def data_commands(spec, task):
    """[(path, realpos synth arguments)] of a task's files."""
    s = spec["synth"]
    train, test, val = data_paths(spec, task)
    files = [(train, ["--lengths", s["train_lengths"], "--count", s["train_count"], "--seed", s["seed"]]),
             (test, ["--lengths", s["test_lengths"], "--count", s["test_count"], "--per-length",
                     "--seed", str(int(s["seed"]) + TEST_SEED_OFFSET)])]
    if val:
        files.append((val, ["--lengths", s["test_lengths"], "--count", s["val_count"], "--per-length",
                            "--seed", str(int(s["seed"]) + VAL_SEED_OFFSET)]))
    return [(path, synth_args(task) + args) for path, args in files]


def make_data(spec, realpos):
    """Write the missing data files; returns the commands' failures (messages)."""
    errors = []
    os.makedirs(os.path.join(spec["out"], "data"), exist_ok=True)
    for task in spec["synth"]["tasks"]:
        for path, args in data_commands(spec, task):
            if data_is_current(spec, path, args, realpos):
                continue
            r = subprocess.run([realpos, "synth"] + args + ["--out", path], capture_output=True, text=True)
            if r.returncode != 0:
                errors.append(f"{spec['path']}: [synth]: realpos synth {task}: {r.stderr.strip()}")
            else:
                record_data(spec, path, args)
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


def learned_step(curve, threshold, patience):
    """The step of the first of `patience` dev evaluations in a row whose in-range token accuracy
    is `threshold` or above (the early stop's rule, train/loop/finetune.c), else None."""
    streak, first = 0, None
    for step, within, _ in curve:
        if within >= threshold:
            streak += 1
            first = step if streak == 1 else first
            if streak >= patience:
                return first
        else:
            streak = 0
    return None


def tagging_result(run_dir, cfg=None):
    """The run's final dev scores (its last task_eval record), dev curve, test scores (task_test
    record, if any), learned_step, steps_run and max_steps; None if the run scored nothing."""
    final, curve, test, stopped = None, [], None, None
    try:
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            for line in f:
                if not any(f'"{kind}"' in line for kind in ("task_eval", "task_test", "early_stop")):
                    continue
                rec = json.loads(line)
                if rec["kind"] == "task_eval":
                    final = rec
                    if rec.get("in_range") and rec.get("step") is not None and \
                            (not curve or curve[-1][0] != rec["step"]):  # the final evaluation repeats a step
                        curve.append([rec["step"], rec["in_range"]["token_accuracy"],
                                      rec["beyond"]["token_accuracy"]])
                elif rec["kind"] == "task_test":
                    test = {k: rec[k] for k in SCORES}
                elif rec["kind"] == "early_stop":
                    stopped = rec
        if final is None:
            return None
        result = {k: final[k] for k in SCORES}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    cfg = cfg or {}
    threshold = float(cfg.get("task.stop_accuracy") or 0)
    patience = int(cfg.get("task.stop_patience") or 1)
    result.update(curve=curve, steps_run=final.get("step"), stop_threshold=threshold or LEARNED_AT,
                  stop_patience=patience,
                  max_steps=int(cfg["task.max_steps"]) if cfg.get("task.max_steps") else None)
    if test:
        result["test"] = test
    result["learned_step"] = stopped["learned_step"] if stopped else \
        learned_step(curve, threshold or LEARNED_AT, patience)
    return result


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
    result = tagging_result(run_dir, point["cfg"]) if status == 0 else None
    if result is None:
        return f"{tag}: finetune failed (status {status}) or scored nothing; see {run_dir}/finetune.log"
    stages["tagging"] = dict(result, wall_s=seconds)
    save()
    return None
