"""The sweep file of scripts/sweep.py and its points: the reader of [sweep], [set], [grid], [exclude],
[derive], [run] and [synth] (the file format is in sweep.py's docstring), and the expansion of the grid
into validated points, each with its effective config as `realpos config` prints it.
Used by sweep.py (to run the points) and sweep_report.py (to report them)."""
import itertools
import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import sweep_synth

# cfg[NOT_APPLYING]: {key: condition} of the keys `realpos config` marks "does not apply: it needs ..."
NOT_APPLYING = "_does_not_apply"
KEY_RE = re.compile(r"^[a-z_]+\.[a-z_0-9]+$")


class SweepError(Exception):
    pass


# ---- sweep file ------------------------------------------------------------------------------

def read_sections(path):
    """{section: [(line_no, text)]} of an INI-like file; ';' and '#' start comments."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SweepError(f"{path}: cannot read ({e.strerror})")
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise SweepError(f"{path}:{line}: expected UTF-8 text, got the byte "
                         f"0x{data[e.start]:02X} (a Latin-1 or other 8-bit character?); save the file as UTF-8")
    sections, current = {}, None
    for no, raw in enumerate(lines, 1):
        text = re.split(r"(?:^|\s)[;#]", raw, maxsplit=1)[0].strip()
        if not text:
            continue
        m = re.fullmatch(r"\[([a-z]+)\]", text)
        if m:
            current = m.group(1)
            if current not in ("sweep", "set", "grid", "exclude", "derive", "run", "synth", "protocol", "slurm"):
                raise SweepError(f"{path}:{no}: unknown section [{current}]; expected [sweep], [set], "
                                 "[grid], [exclude], [derive], [run], [synth], [protocol] or [slurm]")
            if current in sections:
                raise SweepError(f"{path}:{no}: section [{current}] appears twice")
            sections[current] = []
        elif current is None:
            raise SweepError(f"{path}:{no}: expected a [section] first, got '{text}'")
        else:
            sections[current].append((no, text))
    return sections


def load_point_state(run_dir, name="sweep-point.json"):
    """A point's state (sweep.py's OUT/NAME/sweep-point.json: a JSON object with 'stages'), or None
    without one; SweepError naming the file when it cannot be read or is not such an object (empty or
    cut short by a crash or power loss, or edited)."""
    path = os.path.join(run_dir, name)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise SweepError(f"{path}: cannot read the point's state ({e.strerror})")
    try:
        state = json.loads(data.decode("utf-8"))
    except ValueError:  # also UnicodeDecodeError
        state = None
    if not isinstance(state, dict) or not isinstance(state.get("stages"), dict):
        what = "empty" if not data.strip() else "not a point state (a JSON object with 'stages')"
        raise SweepError(f"{path}: {what}: cut short (a crash or power loss?) or edited; delete it and rerun "
                         "the sweep: the point's runs in its directory are kept and the stages it records are "
                         "redone from them")
    return state


def raise_sweep_error(message):
    raise SweepError(message)


def key_value(path, no, text):
    if "=" not in text:
        raise SweepError(f"{path}:{no}: expected 'key = value', got '{text}'")
    key, value = (s.strip() for s in text.split("=", 1))
    return key, value


def unique_keys(path, section, items):
    """{key: value} of a section's 'key = value' lines; SweepError naming the line of a second one."""
    out, lines = {}, {}
    for no, text in items:
        key, value = key_value(path, no, text)
        if key in out:
            raise SweepError(f"{path}:{no}: [{section}] key '{key}' appears twice (first on line {lines[key]})")
        out[key], lines[key] = value, no
    return out


def check_key(path, no, key):
    if not KEY_RE.match(key):
        raise SweepError(f"{path}:{no}: expected a config key 'section.key', got '{key}'")


def parse_settings(path, no, text, grid, what):
    """'a.b=x,y c.d=z' -> {key: {values}}; keys must be grid keys and values grid values."""
    out = {}
    for item in text.split():
        if "=" not in item:
            raise SweepError(f"{path}:{no}: {what}: expected 'section.key=value', got '{item}'")
        key, values = item.split("=", 1)
        check_key(path, no, key)
        if key not in grid:
            raise SweepError(f"{path}:{no}: {what}: '{key}' is not a [grid] key (grid keys: "
                             f"{', '.join(grid)})")
        wanted = set(values.split(","))
        unknown = sorted(wanted - set(grid[key]))
        if unknown:
            raise SweepError(f"{path}:{no}: {what}: {key}={unknown[0]} is not one of the grid's values "
                             f"{' '.join(grid[key])}")
        out[key] = wanted
    return out


def matches(condition, settings):
    return all(settings[k] in values for k, values in condition.items())


def parse_sweep(path):
    s = read_sections(path)
    spec = {"path": path, "set": {}, "grid": {}, "exclude": [], "derive": [],
            "slurm": s.get("slurm", [])}  # [(line, text)], read by sweep_slurm.options
    sweep = unique_keys(path, "sweep", s.get("sweep", []))
    unknown = sorted(set(sweep) - {"base", "out"})
    if unknown:
        raise SweepError(f"{path}: [sweep] has unknown key '{unknown[0]}'; expected base and out")
    for required in ("base", "out"):
        if not sweep.get(required):
            raise SweepError(f"{path}: [sweep] needs '{required} = ...'")
    spec["base"], spec["out"] = sweep["base"], sweep["out"]
    if os.path.exists(spec["out"]) and not os.path.isdir(spec["out"]):
        raise SweepError(f"{path}: [sweep] out = {spec['out']}: expected a directory (one run directory per point "
                         "below it), but it is a file")
    if not os.path.isfile(spec["base"]):
        raise SweepError(f"{path}: [sweep] base = {spec['base']}: no such file")
    for no, text in s.get("set", []):
        key, value = key_value(path, no, text)
        check_key(path, no, key)
        if key in spec["set"]:
            raise SweepError(f"{path}:{no}: [set] key '{key}' appears twice")
        spec["set"][key] = value
    for no, text in s.get("grid", []):
        key, value = key_value(path, no, text)
        check_key(path, no, key)
        values = value.split()
        if not values:
            raise SweepError(f"{path}:{no}: grid key '{key}' has no values")
        if key in spec["grid"]:
            raise SweepError(f"{path}:{no}: grid key '{key}' appears twice")
        if key in spec["set"]:
            raise SweepError(f"{path}:{no}: '{key}' is both in [set] and in [grid]")
        if len(set(values)) != len(values):
            raise SweepError(f"{path}:{no}: duplicate point: grid key '{key}' lists a value twice ({value})")
        spec["grid"][key] = values
    spec["synth"] = sweep_synth.parse(path, s.get("synth"), lambda message: raise_sweep_error(message))
    if spec["synth"]:  # the task is the outermost grid key: synth.task = TASKS
        spec["grid"] = dict({sweep_synth.TASK_KEY: spec["synth"]["tasks"]}, **spec["grid"])
    if not spec["grid"]:
        raise SweepError(f"{path}: [grid] is empty: the sweep would run zero points")
    for no, text in s.get("exclude", []):
        spec["exclude"].append((no, parse_settings(path, no, text, spec["grid"], "exclude")))
    for no, text in s.get("derive", []):
        if "=>" not in text:
            raise SweepError(f"{path}:{no}: derive: expected 'CONDITION => section.key=value ...'")
        cond, sets = (t.strip() for t in text.split("=>", 1))
        overrides = {}
        for item in sets.split():
            key, _, value = item.partition("=")
            check_key(path, no, key)
            if not value:
                raise SweepError(f"{path}:{no}: derive: expected 'section.key=value', got '{item}'")
            if key in spec["grid"] or key in spec["set"]:
                raise SweepError(f"{path}:{no}: derive: '{key}' is already set by [grid] or [set]")
            overrides[key] = value
        spec["derive"].append((no, parse_settings(path, no, cond, spec["grid"], "derive"), overrides))
    run = unique_keys(path, "run", s.get("run", []))
    unknown = sorted(set(run) - {"eval_seq_lens", "finetune", "finetune_metric", "finetune_set", "average_last"})
    if unknown:
        raise SweepError(f"{path}: [run] has unknown key '{unknown[0]}'; expected eval_seq_lens, finetune, "
                         "finetune_metric, finetune_set, average_last")
    text = run.get("average_last", "0")
    if not text.isdigit():
        raise SweepError(f"{path}: [run] average_last: expected a number of checkpoints >= 1, got '{text}'")
    spec["average_last"] = int(text)
    try:
        spec["eval_seq_lens"] = [int(v) for v in run.get("eval_seq_lens", "").split()]
    except ValueError:
        raise SweepError(f"{path}: [run] eval_seq_lens: expected integers, got '{run['eval_seq_lens']}'")
    spec["finetune"] = run.get("finetune") or None
    spec["finetune_metric"] = run.get("finetune_metric", "accuracy")
    spec["finetune_set"] = run.get("finetune_set", "").split()
    if spec["finetune"] and not os.path.isfile(spec["finetune"]):
        raise SweepError(f"{path}: [run] finetune = {spec['finetune']}: no such file")
    spec["protocol"] = parse_protocol(path, s.get("protocol"), spec)
    return spec


def parse_protocol(path, items, spec):
    """[protocol] of a synthetic suite: select = the grid key each setting chooses on the
    validation file (task.lr); threshold = the test token accuracy at which a run counts as a
    success; success = within | beyond: the lengths that accuracy is taken over (within the
    training lengths, the default, or beyond them); select_on = within | beyond: the validation
    accuracy the choice maximises (default: the success's); select_seeds = the seeds the choice
    reads (two stages); question_by = a grid key whose values run one at a time through both
    stages, in the grid's order (default: seed by seed over every cell). None without the section."""
    if items is None:
        return None
    values = {}
    for no, text in items:
        key, value = key_value(path, no, text)
        if key not in ("select", "threshold", "success", "select_on", "select_seeds", "question_by"):
            raise SweepError(f"{path}:{no}: [protocol] has unknown key '{key}'; expected select, threshold, "
                             "success, select_on, select_seeds and question_by")
        if key in ("success", "select_on") and value not in ("within", "beyond"):
            raise SweepError(f"{path}:{no}: [protocol] {key}: expected within or beyond (the training lengths), "
                             f"got '{value}'")
        values[key] = (no, value)
    if not spec.get("synth") or not spec["synth"].get("val_count"):
        raise SweepError(f"{path}: [protocol] needs a [synth] section with val_count: the choice is made on a "
                         "validation file, never on the test file")
    no, select = values.get("select", (0, "task.lr"))
    if select not in spec["grid"]:
        raise SweepError(f"{path}:{no}: [protocol] select = {select}: expected a [grid] key (grid keys: "
                         f"{', '.join(spec['grid'])})")
    no, text = values.get("threshold", (0, "0.95"))
    try:
        threshold = float(text)
    except ValueError:
        threshold = -1.0
    if not 0 < threshold <= 1:
        raise SweepError(f"{path}:{no}: [protocol] threshold: expected a token accuracy in (0, 1], got '{text}'")
    success = values.get("success", (0, "within"))[1]
    protocol = {"select": select, "threshold": threshold, "success": success,
                "select_on": values.get("select_on", (0, success))[1], "select_seeds": None}
    if "select_seeds" in values:  # two stages: choose on these seeds, replicate at the choice only
        no, text = values["select_seeds"]
        seed_keys = [k for k in spec["grid"] if k.endswith(".seed")]
        if len(seed_keys) != 1:
            raise SweepError(f"{path}:{no}: [protocol] select_seeds needs exactly one seed key in [grid], got "
                             f"{len(seed_keys)}")
        chosen_on = text.split()
        unknown = [v for v in chosen_on if v not in spec["grid"][seed_keys[0]]]
        if not chosen_on or unknown or len(set(chosen_on)) != len(chosen_on):
            raise SweepError(f"{path}:{no}: [protocol] select_seeds: expected distinct values of {seed_keys[0]} "
                             f"({' '.join(spec['grid'][seed_keys[0]])}), got '{text}'")
        protocol["select_seeds"] = chosen_on
    if "question_by" in values:  # one value of this key at a time, both stages (a question answered first)
        no, key = values["question_by"]
        if key not in spec["grid"] or key.endswith(".seed") or key == select:
            raise SweepError(f"{path}:{no}: [protocol] question_by = {key}: expected a [grid] key other than the "
                             f"seed and {select} (grid keys: {', '.join(spec['grid'])})")
        protocol["question_by"] = key
    return protocol


def check_finetune_config(spec, realpos):
    """`realpos config FINETUNE --for finetune` with finetune_set: a key fine-tuning does not read
    (e.g. train.max_steps for task.max_steps) is refused before any point runs."""
    if not spec["finetune"]:
        return
    cmd = [realpos, "config", spec["finetune"], "--for", "finetune"] + \
        [a for s in spec["finetune_set"] for a in ("--set", s)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SweepError(f"{spec['path']}: [run] finetune_set: {r.stderr.strip()}")


# ---- points --------------------------------------------------------------------------------

def short_names(keys):
    """'model.relative_k' -> 'relative_k' unless two keys share the part after the dot."""
    tails = [k.split(".", 1)[1] for k in keys]
    return {k: (t if tails.count(t) == 1 else k) for k, t in zip(keys, tails)}


def effective_config(realpos, base, overrides):
    """{section.key: value} printed by `realpos config`, and under NOT_APPLYING the keys it marks as
    not applying with their conditions; SweepError with its message if invalid."""
    cmd = [realpos, "config", base] + [a for k, v in overrides.items() for a in ("--set", f"{k}={v}")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SweepError(r.stderr.strip() or f"{' '.join(cmd)} failed with status {r.returncode}")
    cfg, section, condition = {NOT_APPLYING: {}}, None, None
    for line in r.stdout.splitlines():
        m = re.fullmatch(r"\[(\w+)\]", line.strip())
        if m:
            section = m.group(1)
        elif line.lstrip().startswith(";"):
            m = re.search(r"does not apply: it needs (.*)$", line)
            condition = m.group(1) if m else None
        elif section and "=" in line:
            key, value = (t.strip() for t in line.split("=", 1))
            cfg[f"{section}.{key}"] = value
            if condition:
                cfg[NOT_APPLYING][f"{section}.{key}"] = condition
            condition = None
    return cfg


def relevant(key, cfg):
    return key not in cfg.get(NOT_APPLYING, {})


def expand(spec, realpos):
    """The sweep's points, validated: [{name, settings, overrides, dir, cfg}]. Two `realpos config`
    runs a point (about 0.1 s each, mostly the binary's start-up): the first point's alone (a key
    wrong everywhere is refused at once), then one run per core; errors are reported in grid order."""
    grid, used_exclusions = spec["grid"], set()
    names = short_names(list(grid))
    wanted = []
    for combo in itertools.product(*grid.values()):
        settings = dict(zip(grid, combo))
        excluded = [no for no, cond in spec["exclude"] if matches(cond, settings)]
        used_exclusions.update(excluded)
        if excluded:
            continue
        overrides = dict(spec["set"])
        overrides.update(settings)
        for _, cond, sets in spec["derive"]:
            if matches(cond, settings):
                for key, value in sets.items():
                    if overrides.get(key, value) != value:
                        raise SweepError(f"{spec['path']}: derive: two lines set {key} differently for "
                                         f"{settings}")
                    overrides[key] = value
        if sweep_synth.TASK_KEY in overrides:  # not a realpos key: the task's data files
            overrides.pop(sweep_synth.TASK_KEY)
            overrides.update(sweep_synth.overrides(spec, settings))
        wanted.append((settings, overrides, ",".join(f"{names[k]}={v}" for k, v in settings.items())))

    def configure(item):
        settings, overrides, full_name = item
        try:
            cfg = effective_config(realpos, spec["base"], overrides)
            name = ",".join(f"{names[k]}={v}" for k, v in settings.items() if relevant(k, cfg))
            overrides = dict(overrides, **{"train.run_dir": os.path.join(spec["out"], name)})
            return name, overrides, effective_config(realpos, spec["base"], overrides), None
        except SweepError as e:
            return None, None, None, SweepError(f"{spec['path']}: point {full_name}: {e}")
    configured = [configure(item) for item in wanted[:1]]
    if configured and configured[0][3]:  # a key wrong at every point: refused at once
        raise configured[0][3]
    with ThreadPoolExecutor(max_workers=len(os.sched_getaffinity(0))) as pool:
        configured += list(pool.map(configure, wanted[1:]))
    points, seen = [], {}
    for (settings, _, full_name), (name, overrides, cfg, error) in zip(wanted, configured):
        if error:
            raise error
        # the run's identity: every effective key except where it runs and with how many threads
        identity = tuple(sorted((k, v) for k, v in cfg.items()
                                if k not in ("train.run_dir", "train.threads", NOT_APPLYING) and relevant(k, cfg)))
        if identity in seen:
            other = seen[identity]
            raise SweepError(f"duplicate point: {other['full_name']} and {full_name} are the same run "
                             f"({'; '.join(ignored_note(settings, cfg)) or 'identical settings'}); "
                             "exclude one of them in [exclude]")
        point = {"name": name, "full_name": full_name, "settings": settings, "overrides": overrides,
                 "dir": overrides["train.run_dir"], "cfg": cfg}
        seen[identity] = point
        points.append(point)
    unused = [no for no, _ in spec["exclude"] if no not in used_exclusions]
    if unused:
        raise SweepError(f"{spec['path']}:{unused[0]}: this exclusion matches no point of the grid")
    if not points:
        raise SweepError(f"{spec['path']}: the grid and exclusions leave zero points to run")
    n = spec["average_last"]
    for p in points:
        if n > int(p["cfg"]["train.keep_last"]):
            raise SweepError(f"{spec['path']}: [run] average_last = {n} needs train.keep_last >= {n} checkpoints, "
                             f"point {p['full_name']} keeps {p['cfg']['train.keep_last']}")
    return points


def ignored_note(settings, cfg):
    return [f"{k} does not apply (it needs {cfg[NOT_APPLYING][k]})" for k in settings if not relevant(k, cfg)]
