#!/usr/bin/python3
"""Ablation sweeps: run `realpos` over a grid of config overrides, restartably, and report.

usage: /usr/bin/python3 scripts/sweep.py SWEEP.ini [--jobs J] [--cores N] [--list | --report]
       /usr/bin/python3 scripts/sweep.py SWEEP.ini --slurm [--wait] [--partition P ...]   (docs/cluster.md)

Run from the repository root (paths in the sweep file and in configs are relative to it).

A sweep file (see configs/sweeps/*.ini):

    [sweep]
    base = configs/ablation-small.ini        ; the config every point starts from
    out = runs/ablation-small                ; one run directory per point below this
    [set]                                    ; overrides applied to every point
    train.max_steps = 300
    [grid]                                   ; every combination of these values is a point
    model.relative_position = none shaw method4
    model.relative_k = 4 16 64
    model.seed = 1 2
    [exclude]                                ; a point matching every setting of a line is dropped;
    model.relative_position=none,shaw model.relative_k=4,64   ; a,b = either value
    [derive]                                 ; CONDITION => OVERRIDES, for the points that match
    model.relative_position=none => model.absolute_position=yes
    [run]
    eval_seq_lens = 256                      ; extra held-out evaluations at these lengths
    finetune = configs/finetune-sst2.ini     ; optional: fine-tune from each point's checkpoint
    finetune_metric = accuracy               ; its dev metric (task_eval record of metrics.jsonl)
    finetune_set = task.max_steps=100        ; optional overrides of the fine-tuning run
    average_last = 3                         ; optional: also average the last 3 checkpoints
    [synth]                                  ; optional: a synthetic tagging suite instead of
    tasks = reverse duplicate mqar           ; pretraining (scripts/sweep_synth.py): each point is
    train_lengths = 1-40                     ; `realpos finetune BASE` from scratch on its task's
    train_count = 20000                      ; realpos synth files, scored per test length
    test_lengths = 1-160
    test_count = 8
    seed = 1

Each point runs `realpos pretrain BASE --set ...` in OUT/NAME, NAME being its grid settings
(`relative_position=method4,relative_k=16,seed=1`), then the extra evaluations and fine-tuning.
With average_last = N, `realpos average --last N` writes OUT/NAME/average-last-N.h5 from the
point's N newest checkpoints (train.keep_last must be at least N) and the held-out evaluations
(at data.max_seq_len and every eval_seq_lens length) run on it too, so the report can set the
averaged checkpoint against the final one. A point whose OUT/NAME/sweep-point.json says done
(with every stage the sweep asks for) is skipped (the file is written to a temporary file, fsynced
and renamed; an empty or corrupt one is an error naming it: delete it and the point's stages are
redone from its run directory); a killed point resumes from OUT/NAME/latest. --jobs J runs J
points at once with max(1, cores // J) threads each. Points run seed by seed (every setting at the
grid's first seed, then at its second, ...), so that a sweep stopped part-way holds whole
replicates of every cell.

Before anything runs, every point's config is validated by `realpos config` (unknown keys, bad
values), and it is an error if two points are the same run (also when they differ only in a key
that does not apply, as `realpos config` marks it: relative_k unless relative_position is shaw or
method1-4, t5_num_buckets and t5_max_distance unless it is t5, rope_theta unless it is rope,
residual_attention_mean when residual_attention = no), or if the grid leaves no point. A key that
does not apply at a point is not passed to its runs (realpos refuses a --set that has no effect),
and finetune_set is checked by `realpos config FINETUNE --for finetune` (a key fine-tuning does not
read, such as train.max_steps for task.max_steps, is an error before anything runs).

Report (at the end, or alone with --report): OUT/results.csv (one row per point), OUT/results.md
(mean ± std over seeds), OUT/heldout_vs_k.png (or, for a grid without a numeric key, as the
position schemes of configs/sweeps/positions.ini, OUT/heldout_by_setting.png) and OUT/loss_curves.png."""
import argparse
import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import sweep_cost
import sweep_report
import sweep_slurm
import sweep_stages
import sweep_synth
from sweep_spec import SweepError, check_finetune_config, expand, load_point_state, parse_sweep, relevant

STATE_FILE = "sweep-point.json"


# ---- per-point state -------------------------------------------------------------------------

def load_state(run_dir):
    """The point's state, None without one; SweepError naming the file if it is empty or corrupt."""
    return load_point_state(run_dir, STATE_FILE)


def save_state(run_dir, state):
    """Written to a temporary file, flushed to the disk, renamed over the old state, and the rename
    flushed too: a crash or power loss leaves the old state or the new, never an empty file."""
    path = os.path.join(run_dir, STATE_FILE)
    with open(path + ".tmp", "w") as f:
        json.dump(state, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
    directory = os.open(run_dir, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def final_checkpoint(point):
    return os.path.join(point["dir"], "ckpt-%07d.h5" % int(point["cfg"]["train.max_steps"]))


def average_checkpoint(spec, point):
    return os.path.join(point["dir"], f"average-last-{spec['average_last']}.h5")


def stages_wanted(spec):
    """The stage names a finished point holds (besides pretrain)."""
    if spec.get("synth"):
        return ["tagging"]
    wanted = [f"eval_len_{n}" for n in spec["eval_seq_lens"]]
    if spec["finetune"]:
        wanted.append("finetune")
    if spec["average_last"]:
        wanted += ["average", "average_eval"] + [f"average_eval_len_{n}" for n in spec["eval_seq_lens"]]
    return wanted


def is_done(spec, state):
    return bool(state and state.get("done") and all(s in state["stages"] for s in stages_wanted(spec)))


def point_status(spec, point, points=None):
    state = load_state(point["dir"])
    if is_done(spec, state):
        return "done"
    if points and sweep_stages.needed(spec, points, point, load_state) is False:
        return "not needed"  # a two-stage protocol's replicate at a rate its cell did not choose
    if state or os.path.exists(os.path.join(point["dir"], "latest")):
        return "partial"
    return "new"


def read_eval_json(path):
    """`realpos eval --json PATH`'s numbers at full precision: {max_seq_len, predictions, loss,
    accuracy, perplexity}, or None if the file is missing or unreadable."""
    try:
        with open(path) as f:
            rec = json.load(f)
        return {k: rec[k] for k in ("max_seq_len", "predictions", "loss", "accuracy", "perplexity")}
    except (OSError, ValueError, KeyError):
        return None


def finetune_metric(run_dir, output, metric):
    """`metric` of the fine-tuning run's dev evaluation: the last task_eval record of its
    metrics.jsonl holding it, else the last eval_<metric>, else the last 'metric <number>' it
    printed."""
    found = {"task_eval": None, "eval": None}
    for rec in sweep_report.metric_records(run_dir):
        if rec.get("kind") == "task_eval" and isinstance(rec.get(metric), (int, float)):
            found["task_eval"] = float(rec[metric])
        elif isinstance(rec.get("eval_" + metric), (int, float)):
            found["eval"] = float(rec["eval_" + metric])
    if found["task_eval"] is not None:
        return found["task_eval"]
    if found["eval"] is not None:
        return found["eval"]
    printed = re.findall(rf"\b{re.escape(metric)}\b[\s:=]+([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)", output)
    return float(printed[-1]) if printed else None


# ---- running ---------------------------------------------------------------------------------

class Runner:
    """Runs points on a pool of `jobs` workers; SIGINT/SIGTERM stop the children cleanly (realpos
    saves a checkpoint on SIGTERM) so that a rerun resumes them."""

    def __init__(self, spec, realpos, jobs, threads):
        self.spec, self.realpos, self.jobs, self.threads = spec, realpos, jobs, threads
        self.lock = threading.Lock()
        self.children = set()
        self.stopping = False
        # Children die with the sweep (parent-death signal) so a killed sweep leaves no orphans.
        self.prefix = ["setpriv", "--pdeathsig", "TERM", "--"] if os.path.exists("/usr/bin/setpriv") else []

    def stop(self, signum, _frame):
        with self.lock:
            self.stopping = True
            for child in self.children:
                child.send_signal(signal.SIGTERM)
        print(f"sweep: signal {signum}: stopping; rerun the same command to resume", flush=True)

    def run_command(self, cmd, log_path):
        """Run cmd, appending its output to log_path; returns (status, output, seconds)."""
        env = dict(os.environ, OMP_NUM_THREADS=str(self.threads), OPENBLAS_NUM_THREADS=str(self.threads))
        with self.lock:
            if self.stopping:
                return None, "", 0.0
            start, started = time.time(), time.strftime("%Y-%m-%d %H:%M:%S")
            child = subprocess.Popen(self.prefix + cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, env=env)
            self.children.add(child)
        output = child.communicate()[0]
        with self.lock:
            self.children.discard(child)
        seconds = time.time() - start
        with open(log_path, "a") as f:
            f.write(f"# {started} {' '.join(cmd)}\n{output}"
                    f"# exit status {child.returncode} after {seconds:.1f} s\n")
        return child.returncode, output, seconds

    def point_sets(self, point):
        """The point's overrides as --set arguments, without the keys that do not apply to it."""
        sets = dict(point["overrides"], **{"train.threads": str(self.threads)})
        return [a for k, v in sets.items() if relevant(k, point["cfg"]) for a in ("--set", f"{k}={v}")]

    def run_point(self, index, total, point):
        """Returns None on success, or an error message."""
        if self.stopping:
            return None
        tag = f"[{index}/{total}] {point['name']}"
        if sweep_stages.is_stage_two(self.spec, point):
            try:
                wanted = sweep_stages.wait_until_chosen(self.spec, self.points, point, load_state,
                                                        lambda: self.stopping, self.failed)
            except RuntimeError as e:
                return f"{tag}: {e}"
            if not wanted:  # not needed (another rate was chosen), or stopping
                if wanted is False:
                    print(f"{tag}: not needed: its cell chose another {self.spec['protocol']['select']}", flush=True)
                return None
        run_dir = point["dir"]
        os.makedirs(run_dir, exist_ok=True)
        state = load_state(run_dir) or {"name": point["name"], "settings": point["settings"],
                                        "overrides": point["overrides"], "stages": {}, "done": False}
        if state["overrides"] != point["overrides"]:
            return (f"{tag}: its settings changed since it started ({run_dir}/{STATE_FILE}); delete "
                    f"{run_dir} to run it again")
        if is_done(self.spec, state):
            return None
        stages, base = state["stages"], self.spec["base"]
        if self.spec.get("synth"):
            error = sweep_synth.run_point(self, tag, point, state, lambda: save_state(run_dir, state))
            if error or self.stopping or "tagging" not in stages:
                return error
            state["done"] = True
            save_state(run_dir, state)
            print(f"{tag}: done ({stages['tagging']['wall_s']:.0f} s)", flush=True)
            return None
        final = final_checkpoint(point)
        if not os.path.exists(final):
            cmd = [self.realpos, "pretrain", base] + self.point_sets(point)
            latest = os.path.join(run_dir, "latest")
            resume = None
            if os.path.exists(latest):
                with open(latest) as f:  # "ckpt-NNNNNNN.h5\nrun RUN_ID\n"
                    resume = os.path.join(run_dir, f.readline().strip())
                resume = resume if os.path.exists(resume) else None
            if resume:
                cmd += ["--resume", resume]
            print(f"{tag}: pretrain{' resuming from ' + os.path.basename(resume) if resume else ''} "
                  f"(threads {self.threads})", flush=True)
            status, _, seconds = self.run_command(cmd, os.path.join(run_dir, "pretrain.log"))
            if status is None:
                return None
            stages.setdefault("pretrain", {"wall_s": 0.0, "attempts": 0})
            stages["pretrain"]["wall_s"] += seconds
            stages["pretrain"]["attempts"] += 1
            save_state(run_dir, state)
            if self.stopping:
                return None
            if status != 0 or not os.path.exists(final):
                return f"{tag}: pretrain failed with status {status}; see {run_dir}/pretrain.log"
        evals = [(f"eval_len_{n}", final, n) for n in self.spec["eval_seq_lens"]]
        if self.spec["average_last"]:
            averaged = average_checkpoint(self.spec, point)
            if "average" not in stages:
                cmd = [self.realpos, "average", "--last", str(self.spec["average_last"]), run_dir, "--out", averaged]
                status, _, seconds = self.run_command(cmd, os.path.join(run_dir, "average.log"))
                if status is None or self.stopping:
                    return None
                if status != 0:
                    return f"{tag}: average failed (status {status}); see {run_dir}/average.log"
                stages["average"] = {"checkpoint": averaged, "wall_s": seconds}
                save_state(run_dir, state)
            evals.append(("average_eval", averaged, None))
            evals += [(f"average_eval_len_{n}", averaged, n) for n in self.spec["eval_seq_lens"]]
        for stage, checkpoint, length in evals:
            if stage in stages:
                continue
            numbers = os.path.join(run_dir, f"{stage}.json")
            cmd = [self.realpos, "eval", base] + self.point_sets(point) + ["--checkpoint", checkpoint,
                                                                            "--json", numbers]
            cmd += ["--max-seq-len", str(length)] if length else []
            status, output, seconds = self.run_command(cmd, os.path.join(run_dir, "eval.log"))
            if status is None or self.stopping:
                return None
            result = read_eval_json(numbers) if status == 0 else None
            if result is None:
                return (f"{tag}: eval of {os.path.basename(checkpoint)} at length {length or 'max_seq_len'} failed "
                        f"(status {status}); see {run_dir}/eval.log")
            stages[stage] = dict(result, wall_s=seconds)
            save_state(run_dir, state)
        if self.spec["finetune"] and "finetune" not in stages:
            ft_dir = os.path.join(run_dir, "finetune")
            extra = [a for s in self.spec["finetune_set"] for a in ("--set", s)]
            cmd = [self.realpos, "finetune", self.spec["finetune"], "--set", f"task.init_checkpoint={final}",
                   "--set", f"train.run_dir={ft_dir}", "--set", f"train.threads={self.threads}"] + extra
            print(f"{tag}: finetune {self.spec['finetune']}", flush=True)
            status, output, seconds = self.run_command(cmd, os.path.join(run_dir, "finetune.log"))
            if status is None or self.stopping:
                return None
            value = finetune_metric(ft_dir, output, self.spec["finetune_metric"]) if status == 0 else None
            if value is None:
                return (f"{tag}: finetune failed (status {status}) or printed no "
                        f"'{self.spec['finetune_metric']}'; see {run_dir}/finetune.log")
            stages["finetune"] = {self.spec["finetune_metric"]: value, "wall_s": seconds}
            save_state(run_dir, state)
        state["done"] = True
        save_state(run_dir, state)
        wall = sum(s.get("wall_s", 0) for s in stages.values())
        print(f"{tag}: done ({wall:.0f} s)", flush=True)
        return None

    def run(self, points):
        self.points, self.failed = points, set()
        todo = replicate_order(self.spec, [(i, p) for i, p in enumerate(points, 1)
                                           if point_status(self.spec, p, points) not in ("done", "not needed")])
        print(f"sweep: {len(points)} points, {len(points) - len(todo)} already done; running {len(todo)} with "
              f"{self.jobs} at a time, threads {self.threads} each", flush=True)
        errors = []
        started, finished = time.monotonic(), 0
        with ThreadPoolExecutor(max_workers=self.jobs) as pool:
            pending = {pool.submit(self.run_point, i, len(points), p): p for i, p in todo}
            while pending:  # a timed wait keeps the main thread responsive to signals
                done, _ = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                for future in done:
                    point = pending.pop(future)
                    try:
                        error = future.result()
                    except (OSError, SweepError) as e:  # e.g. a full disk: report it, let the other points go on
                        error = f"{e}"
                    if error:
                        print(f"sweep: error: {error}", flush=True)
                        errors.append(error)
                        self.failed.add(point["name"])
                    elif not self.stopping:
                        finished += 1
                        print(progress_line(finished, len(todo), time.monotonic() - started), flush=True)
        return errors


def replicate_order(spec, indexed_points):
    """The points in the order they run: seed by seed (every setting at the first seed of the grid,
    then at the second, ...), else in grid order, so that a sweep stopped part-way holds whole
    replicates of every cell rather than every seed of the first cells. The selection seeds of a
    two-stage protocol run before the replicates. With [protocol] question_by = KEY, the first
    value of KEY runs through both stages before the next one starts, so that a sweep stopped
    part-way has answered one question at every seed rather than all of them at few."""
    seeds = [k for k in spec["grid"] if k.endswith(".seed")]
    rank = {k: {v: n for n, v in enumerate(spec["grid"][k])} for k in seeds}
    by = (spec.get("protocol") or {}).get("question_by")

    def key(ip):
        group = spec["grid"][by].index(ip[1]["settings"][by]) if by else 0
        stage_two = sweep_stages.is_stage_two(spec, ip[1])
        return (group, stage_two) + tuple(rank[k][ip[1]["settings"][k]] for k in seeds)
    return sorted(indexed_points, key=key)


def clock(seconds):
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def progress_line(finished, total, elapsed):
    """'sweep: 3 of 10 points of this run done in 0:12:00; the other 7 take about 0:28:00 more at
    this run's rate' (the rate of the points finished so far, in parallel as they ran)."""
    line = f"sweep: {finished} of {total} points of this run done in {clock(elapsed)}"
    if finished < total:
        rest = elapsed / finished * (total - finished)
        line += f"; the other {total - finished} take about {clock(rest)} more at this run's rate"
    return line


def main():
    try:
        return sweep_main()
    except SweepError as e:  # e.g. a point's state file found corrupt by --list, a run or --report
        sys.exit(f"sweep.py: error: {e}")


def sweep_main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep")
    ap.add_argument("--jobs", type=int, default=1, help="points run at once (default 1)")
    ap.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)),
                    help="cores to share between the jobs (default: all this process may use)")
    ap.add_argument("--list", action="store_true",
                    help="print the points, their status and the predicted cost on this machine (a short "
                         "calibration run per task), run nothing")
    ap.add_argument("--report", action="store_true", help="only write the report from finished points")
    ap.add_argument("--realpos", default="./realpos", help="the realpos binary (default ./realpos)")
    sweep_slurm.add_arguments(ap)
    args = ap.parse_args()
    try:
        if args.jobs < 1 or args.cores < 1:
            raise SweepError("--jobs and --cores must be at least 1")
        if not os.access(args.realpos, os.X_OK):
            raise SweepError(f"{args.realpos}: not an executable; build it with `make` or pass --realpos")
        spec = parse_sweep(args.sweep)
        if args.slurm_task:  # one point of a job array, as submitted (sweep_slurm.py)
            return sweep_slurm.run_task(spec, args, Runner, is_done, load_state)
        if args.wait and not args.slurm:
            raise SweepError("--wait goes with --slurm")
        slurm_options = sweep_slurm.options(spec, args)  # validated before anything runs
        check_finetune_config(spec, args.realpos)
        points = expand(spec, args.realpos)
        status_of = lambda p: point_status(spec, p, points)  # noqa: E731
        if args.slurm and not args.list and not args.report:
            return sweep_slurm.submit(spec, points, args, slurm_options, status_of)
        if args.list and sweep_slurm.list_points(spec, points, status_of):
            return 0
    except SweepError as e:
        sys.exit(f"sweep.py: error: {e}")
    if args.list:
        for p in points:
            print(f"{point_status(spec, p, points):8s} {p['name']}  " +
                  " ".join(f"{k}={v}" for k, v in p["overrides"].items() if k != "train.run_dir"))
        print(f"{len(points)} points")
        try:
            for line in sweep_cost.predict(spec, points, args.realpos, max(1, args.cores // args.jobs), args.jobs,
                                           lambda p: point_status(spec, p, points)):
                print(line)
        except (RuntimeError, OSError) as e:
            sys.exit(f"sweep.py: error: predicting the cost: {e}")
        return 0
    errors = []
    if not args.report:
        try:
            os.makedirs(spec["out"], exist_ok=True)
            lock = open(os.path.join(spec["out"], ".sweep.lock"), "w")
        except OSError as e:
            raise SweepError(f"{args.sweep}: [sweep] out = {spec['out']}: cannot create it or write in it "
                             f"({e.strerror})")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            sys.exit(f"sweep.py: error: another sweep is running in {spec['out']}")
        if spec.get("synth"):
            try:
                failures = sweep_synth.make_data(spec, args.realpos)
            except OSError as e:  # e.g. OUT/data a file, a full disk
                raise SweepError(f"{args.sweep}: [synth]: writing the data in {spec['out']}/data: {e}")
            if failures:
                sys.exit(f"sweep.py: error: {failures[0]}")
        runner = Runner(spec, args.realpos, args.jobs, max(1, args.cores // args.jobs))
        signal.signal(signal.SIGINT, runner.stop)
        signal.signal(signal.SIGTERM, runner.stop)
        start = time.time()
        errors = runner.run(points)
        print(f"sweep: {time.time() - start:.0f} s", flush=True)
        if runner.stopping:
            return 130
    try:
        written = sweep_report.write_report(spec, points, relevant)
    except SweepError as e:
        sys.exit(f"sweep.py: error: the report: {e}")
    for path in written:
        print(f"wrote {path}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
