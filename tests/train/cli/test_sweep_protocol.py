"""scripts/sweep_report_protocol.py on fabricated point states (no realpos run): the learning-rate
selection rule, that it reads only validation fields, the per-cell statistics and the comparisons
of results.md against ablation_stats on results.csv, the figures; and the old synthetic report with
a test record.

usage: /usr/bin/python3 tests/train/cli/test_sweep_protocol.py SCRIPTS_DIR SCRATCH_DIR"""
import csv
import json
import os
import random
import statistics
import sys

sys.path.insert(0, sys.argv[1])
import ablation_stats as stats  # noqa: E402
import sweep_report  # noqa: E402
import sweep_report_protocol as proto  # noqa: E402
import sweep_report_synth as synth_report  # noqa: E402

scratch = sys.argv[2]


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {detail}"))


# ---- the rule on its own --------------------------------------------------------------------------
order = ["1e-3", "3e-3", "1e-2"]
choose = proto.choose
check("the best mean validation accuracy wins",
      choose({"1e-3": [(0.90, 100)], "3e-3": [(0.95, 900)], "1e-2": [(0.20, 1000)]}, order)[0] == "3e-3")
check("within 0.005 of the best: the lower median steps to learn wins",
      choose({"1e-3": [(0.946, 100), (0.946, 300)], "3e-3": [(0.95, 900), (0.95, 900)]}, order)[0] == "1e-3")
check("0.0051 below the best is not a tie",
      choose({"1e-3": [(0.9449, 100)], "3e-3": [(0.95, 900)]}, order)[0] == "3e-3")
check("tied on accuracy and steps: the higher mean, then the earlier rate in the grid",
      choose({"1e-3": [(0.948, 500)], "3e-3": [(0.95, 500)]}, order)[0] == "3e-3" and
      choose({"1e-2": [(0.95, 500)], "3e-3": [(0.95, 500)]}, order)[0] == "3e-3")
chosen, summary = choose({"1e-3": [(1.0, 200), (0.5, 1000), (0.8, 400)], "3e-3": []}, order)
check("a rate without finished runs is not a candidate; mean, median steps and n per rate",
      chosen == "1e-3" and summary == {"1e-3": (statistics.mean([1.0, 0.5, 0.8]), 400, 3)}, (chosen, summary))
check("nothing finished: no choice", choose({"1e-3": []}, order) == (None, {}))
never = {"in_range": {"token_accuracy": 0.30}, "learned_step": None, "steps_run": 4000, "max_steps": 4000}
late = {"in_range": {"token_accuracy": 0.30}, "learned_step": 3900, "steps_run": 4000, "max_steps": 4000}
tiny = {"path": "t.ini", "grid": {"synth.task": ["t"], "model.seed": ["1"], "task.lr": ["1e-3", "3e-3"]},
        "protocol": {"select": "task.lr", "threshold": 0.95}}
tiny_rows = [{"settings": {"synth.task": "t", "model.seed": "1", "task.lr": lr}, "result": r}
             for lr, r in (("1e-3", never), ("3e-3", late))]
check("tied on validation accuracy: a run that never learned counts at its budget (4000 > 3900)",
      proto.choose_learning_rates(spec=tiny, rows=tiny_rows)[("t",)][0] == "3e-3",
      proto.choose_learning_rates(spec=tiny, rows=tiny_rows))

# select_on / success beyond the training lengths (the control's [protocol]): the choice and the
# success read the other side of the same records
wide = {"in_range": {"token_accuracy": 1.0}, "beyond": {"token_accuracy": 0.6}, "learned_step": 500,
        "steps_run": 1000, "max_steps": 3000, "test": {"in_range": {"token_accuracy": 1.0}, "beyond": {"token_accuracy": 0.6}}}
exact = {"in_range": {"token_accuracy": 0.99}, "beyond": {"token_accuracy": 0.99}, "learned_step": 2500,
         "steps_run": 3000, "max_steps": 3000, "test": {"in_range": {"token_accuracy": 0.99}, "beyond": {"token_accuracy": 0.99}}}
sides_rows = [{"settings": {"synth.task": "t", "model.seed": "1", "task.lr": lr}, "result": r}
              for lr, r in (("1e-3", wide), ("3e-3", exact))]
within_spec = dict(tiny, protocol={"select": "task.lr", "threshold": 0.95})
beyond_spec = dict(tiny, protocol={"select": "task.lr", "threshold": 0.95, "success": "beyond", "select_on": "beyond"})
check("select_on = beyond chooses on the validation accuracy beyond the training lengths (within: the other rate)",
      proto.choose_learning_rates(within_spec, sides_rows)[("t",)][0] == "1e-3" and
      proto.choose_learning_rates(beyond_spec, sides_rows)[("t",)][0] == "3e-3")
check("success = beyond counts the test accuracy beyond the training lengths",
      proto.success(wide, 0.95, "within") and not proto.success(wide, 0.95, "beyond") and
      proto.success(exact, 0.95, "beyond"))

# ---- fabricated protocol sweep --------------------------------------------------------------------
# lookup:8, 10 seeds, residual no/yes, none / shaw k=4,16, three learning rates. A run learns with a
# probability set by its arm and rate; its validation accuracy within the training lengths is 0.99
# when it learned, else 0.2-0.4; learned_step is drawn in 500-3000, a run that never learned ran its
# 4000 steps. The test record is drawn on its own (0.97 or 0.1 + noise), and beyond at random.
SEEDS = [str(s) for s in range(1, 11)]
GRID = {"synth.task": ["lookup:8"], "model.seed": SEEDS, "model.residual_attention": ["no", "yes"],
        "model.relative_position": ["none", "shaw"], "model.relative_k": ["4", "16"], "task.lr": order}
P_LEARN = {("no", "none"): {"1e-3": 0.2, "3e-3": 0.1, "1e-2": 0.0},
           ("yes", "none"): {"1e-3": 0.1, "3e-3": 0.2, "1e-2": 0.0},
           ("no", "shaw"): {"1e-3": 0.5, "3e-3": 0.9, "1e-2": 0.1},
           ("yes", "shaw"): {"1e-3": 0.9, "3e-3": 0.3, "1e-2": 0.0}}


def relevant(key, cfg):
    return key != "model.relative_k" or cfg["model.relative_position"] == "shaw"


def fabricate(out, with_test=True, with_protocol=True):
    rng = random.Random(2049)
    points, states = [], {}
    for res in GRID["model.residual_attention"]:
        for pos in GRID["model.relative_position"]:
            for k in (GRID["model.relative_k"] if pos == "shaw" else ["4"]):
                for lr in order:
                    for seed in SEEDS:
                        settings = {"synth.task": "lookup:8", "model.seed": seed, "model.residual_attention": res,
                                    "model.relative_position": pos, "model.relative_k": k, "task.lr": lr}
                        name = f"res={res},pos={pos}" + (f",k={k}" if pos == "shaw" else "") + f",lr={lr},seed={seed}"
                        point = {"name": name, "dir": os.path.join(out, name), "settings": settings,
                                 "cfg": {"model.relative_position": pos}}
                        p = P_LEARN[(res, pos)][lr] * (0.6 if k == "16" else 1.0)
                        learned = rng.random() < p
                        step = rng.randrange(500, 3001, 100) if learned else None
                        val = 0.99 if learned else rng.uniform(0.2, 0.4)
                        test_in = 0.97 if rng.random() < (0.9 if learned else 0.05) else 0.1 + rng.random() * 0.3
                        test = {"accuracy": test_in, "sequence_accuracy": 0.0, "train_max_length": 20,
                                "in_range": {"sequences": 80, "words": 800, "token_accuracy": test_in,
                                             "sequence_accuracy": 0.5},
                                "beyond": {"sequences": 80, "words": 800, "token_accuracy": rng.random(),
                                           "sequence_accuracy": 0.0},
                                "by_length": {str(n): {"token_accuracy": test_in} for n in (4, 20, 40)}}
                        tagging = {"accuracy": val, "sequence_accuracy": 0.0, "train_max_length": 20,
                                   "in_range": {"sequences": 80, "words": 800, "token_accuracy": val,
                                                "sequence_accuracy": 0.5},
                                   "beyond": {"sequences": 80, "words": 800, "token_accuracy": rng.random() / 2,
                                              "sequence_accuracy": 0.0},
                                   "by_length": {str(n): {"token_accuracy": val} for n in (4, 20, 40)},
                                   "curve": [[1000, val, 0.1]], "learned_step": step,
                                   "steps_run": step + 1000 if learned else 4000, "max_steps": 4000,
                                   "stop_threshold": 0.95, "stop_patience": 3, "wall_s": 10.0}
                        if with_test:
                            tagging["test"] = test
                        os.makedirs(point["dir"], exist_ok=True)
                        with open(os.path.join(point["dir"], "sweep-point.json"), "w") as f:
                            json.dump({"done": True, "stages": {"tagging": tagging}}, f)
                        points.append(point)
                        states[name] = tagging
    spec = {"path": "fabricated.ini", "out": out, "grid": GRID, "synth": {"tasks": ["lookup:8"]}}
    if with_protocol:
        spec["protocol"] = {"select": "task.lr", "threshold": 0.95}
    return spec, points, states


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


out = os.path.join(scratch, "protocol")
spec, points, states = fabricate(out)
written = sweep_report.write_report(spec, points, relevant)
check("the report writes results.csv, results.md, success_rate.png, survival.png and by_length-lookup:8.png",
      all(os.path.isfile(os.path.join(out, f)) and os.path.getsize(os.path.join(out, f)) > 0 for f in
          ("results.csv", "results.md", "success_rate.png", "survival.png", "by_length-lookup:8.png")), written)
# the by-length bars: median and interquartile range over seeds (numpy's linear interpolation),
# worked by hand: two runs that learned and two that did not span [0, 1], not 0.5 ± 0.58
q = synth_report.seed_quartiles
check("by-length bars: the seeds' quartiles, a run without that length left out, inside [0, 1]",
      q([0.0, 0.0, 1.0, 1.0, None]) == (0.0, 0.5, 1.0) and q([1.0, 0.2, 0.6, 0.8, 0.4]) == (0.4, 0.6, 0.8)
      and q([0.9]) == (0.9, 0.9, 0.9) and all(v != v for v in q([None, None])),
      str([q([0.0, 0.0, 1.0, 1.0, None]), q([1.0, 0.2, 0.6, 0.8, 0.4])]))
rows = read_csv(os.path.join(out, "results.csv"))
md = open(os.path.join(out, "results.md")).read()
check("results.csv: one row per point, with learned_step, test accuracies, success and chosen",
      len(rows) == len(points) and {"task.lr", "learned_step", "test_in_range_accuracy", "test_beyond_accuracy",
                                    "val_in_range_accuracy", "success", "chosen"} <= set(rows[0]), list(rows[0]))


def cell(r):
    return (r["synth.task"], r["model.residual_attention"], r["model.relative_position"], r["model.relative_k"])


# the rule again, written out independently on the fabricated validation values
expected = {}
for c in sorted({cell(r) for r in rows}):
    means = {}
    for lr in order:
        runs = [states[r["point"]] for r in rows if cell(r) == c and r["task.lr"] == lr]
        means[lr] = (statistics.mean(t["in_range"]["token_accuracy"] for t in runs),
                     statistics.median(t["learned_step"] or 4000 for t in runs))
    best = max(m for m, _ in means.values())
    expected[c] = sorted((lr for lr in order if means[lr][0] >= best - 0.005),
                         key=lambda lr: (means[lr][1], -means[lr][0], order.index(lr)))[0]
got = {cell(r): r["task.lr"] for r in rows if r["chosen"] == "yes"}
check("chosen = the rule worked out on the validation values, for every cell (6 cells)",
      got == expected and len(got) == 6, (got, expected))
check("every seed of the chosen rate is marked chosen, nothing else",
      all((r["chosen"] == "yes") == (expected[cell(r)] == r["task.lr"]) for r in rows))
check("the absolute baseline's k does not apply: its cell has k empty",
      any(c[2] == "none" and c[3] == "" for c in got), got)


class Poisoned(dict):
    """A test record that fails the selection the moment it is read."""
    def _refuse(self, *a, **k):
        raise AssertionError("the selection read the test record")
    __getitem__ = get = keys = items = values = __iter__ = __len__ = __bool__ = __contains__ = _refuse


poisoned = [{"point": p, "settings": {k: (v if relevant(k, p["cfg"]) else "") for k, v in p["settings"].items()},
             "result": dict(states[p["name"]], test=Poisoned())} for p in points]
try:
    choice = proto.choose_learning_rates(spec, poisoned)
    check("the selection never reads a test record (poisoned records, same choice)",
          {c[:1] + c[1:]: v[0] for c, v in choice.items()} == {c: expected[c] for c in expected}, choice)
except AssertionError as e:
    check("the selection never reads a test record (poisoned records, same choice)", False, str(e))

# end to end: rewrite every state's test scores so that the test would prefer another rate
for name, tagging in states.items():
    lr = next(r for r in rows if r["point"] == name)["task.lr"]
    row = next(r for r in rows if r["point"] == name)
    flipped = 0.0 if row["chosen"] == "yes" else 1.0
    tagging["test"]["in_range"]["token_accuracy"] = flipped
    tagging["test"]["beyond"]["token_accuracy"] = flipped
    with open(os.path.join(out, name, "sweep-point.json"), "w") as f:
        json.dump({"done": True, "stages": {"tagging": tagging}}, f)
sweep_report.write_report(spec, points, relevant)
after = read_csv(os.path.join(out, "results.csv"))
md_after = open(os.path.join(out, "results.md")).read()
check("test files changed (chosen runs' test accuracy 0, the others' 1): every choice unchanged",
      [r["chosen"] for r in after] == [r["chosen"] for r in rows] and
      all(float(r["test_in_range_accuracy"]) == (0.0 if r["chosen"] == "yes" else 1.0) for r in after),
      [(r["point"], r["chosen"]) for r in after
       if r["chosen"] != next(x for x in rows if x["point"] == r["point"])["chosen"]])
check("... and the report follows the test files: every cell now 0/10 successes, within and beyond",
      md_after.count(" 0/10 [0.00, 0.28] ") == 12 and md_after != md, md_after)

# ---- results.md against ablation_stats on results.csv (the original fabricated states) ----------
spec, points, states = fabricate(out)
sweep_report.write_report(spec, points, relevant)
rows = read_csv(os.path.join(out, "results.csv"))
md = open(os.path.join(out, "results.md")).read()
lines = md.splitlines()
check("the header names the tests before the tables",
      all(t in md.split("## Per task")[0] for t in ("Wilson 95%", "Kaplan-Meier", "exponential-Greenwood",
                                                     "bootstrap", "McNemar", "log-rank", "Fisher exact",
                                                     "Selection rule", "≥ 0.95 at 3 consecutive")), md[:1500])
chosen_rows = [r for r in rows if r["chosen"] == "yes"]
c = ("lookup:8", "yes", "shaw", "4")
members = [r for r in chosen_rows if cell(r) == c]
k = sum(r["success"] == "yes" for r in members)
check("success: test accuracy within the training lengths at or above the threshold 0.95 (0.97 yes, < 0.4 no)",
      all((r["success"] == "yes") == (float(r["test_in_range_accuracy"]) >= 0.95) for r in rows) and
      any(r["success"] == "yes" for r in rows))
# the wall section: k = 4 -> 16 per residual value, counts from results.csv, Fisher p recomputed
walls = [l for l in md.split("## Along k")[1].split("\n## ")[0].splitlines() if l.startswith("| lookup:8 |")] \
    if "## Along k" in md else []
def counts(res, kk):  # noqa: E302
    m = [r for r in chosen_rows if cell(r) == ("lookup:8", res, "shaw", kk)]
    return sum(r["success"] == "yes" for r in m), len(m)
wall_ok = len(walls) == 2
for res in ("no", "yes"):
    (a, na), (b, nb) = counts(res, "4"), counts(res, "16")
    want = f"| 4 → 16 | {a}/{na} | {b}/{nb} | {proto.fmt_p(stats.fisher_exact(b, nb - b, a, na - a))} |"
    wall_ok &= any(want in l and "+residual_attention" in l if res == "yes" else want in l and "+residual" not in l
                   for l in walls)
check("the wall section: each truncated setting's neighbouring k, counts and Fisher p from results.csv", wall_ok,
      "\n".join(walls))
low, high = stats.wilson_interval(k, len(members))
line = next(l for l in lines if l.startswith("| lookup:8 | yes | shaw | 4 |"))
check("a cell's success k/n and Wilson interval (from results.csv's chosen rows)",
      f" {k}/{len(members)} [{low:.2f}, {high:.2f}] " in line, (line, k, low, high))
curve = stats.kaplan_meier([int(r["learned_step"] or r["steps_run"]) for r in members],
                           [r["learned_step"] != "" for r in members])
median = stats.median_steps(curve)
check("a cell's Kaplan-Meier median steps to learn", f"| {median}; learned by the budget" in line, (line, median))
boot = stats.bootstrap_interval([float(r["test_in_range_accuracy"]) for r in members], "median", seed=0)
check("a cell's test median within the training lengths with its bootstrap interval",
      f"{boot[0]:.3f} [{boot[1]:.3f}, {boot[2]:.3f}]" in line, (line, boot))
check("a cell names its chosen rate in bold, every rate's mean validation accuracy and n",
      line.count("(n 10)") == 3 and f"**{expected[c]}: " in line, line)
yes = {r["model.seed"]: r["success"] == "yes" for r in members}
no = {r["model.seed"]: r["success"] == "yes" for r in chosen_rows if cell(r) == ("lookup:8", "no", "shaw", "4")}
b, cc = stats.paired_discordance([yes[s] for s in SEEDS], [no[s] for s in SEEDS])
residual = next(l for l in lines if l.startswith("| lookup:8 | shaw k=4 |"))
check("residual attention: discordant pairs by seed and the exact McNemar p",
      f"| {b} / {cc} (10) | {proto.fmt_p(stats.mcnemar_exact(b, cc))} |" in residual, (residual, b, cc))
arms = [[r for r in chosen_rows if cell(r) == ("lookup:8", v, "shaw", "4")] for v in ("yes", "no")]
rank = stats.logrank_test(*[x for arm in arms for x in ([int(r["learned_step"] or r["steps_run"]) for r in arm],
                                                        [r["learned_step"] != "" for r in arm])])
check("residual attention: the log-rank χ² and p on steps to learn",
      residual.endswith(f"| {rank[2]:.2f}, {proto.fmt_p(rank[3])} |"), (residual, rank))
for residual_value, k_value in (("no", "16"), ("yes", "4")):
    base = [r for r in chosen_rows if cell(r) == ("lookup:8", residual_value, "none", "")]
    arm = [r for r in chosen_rows if cell(r) == ("lookup:8", residual_value, "shaw", k_value)]
    ka, kb = sum(r["success"] == "yes" for r in arm), sum(r["success"] == "yes" for r in base)
    scheme = next(l for l in lines if l.startswith(f"| lookup:8 | shaw k={k_value} | {residual_value} |"))
    check(f"shaw k={k_value} against absolute positions, both residual {residual_value}: Fisher exact on successes",
          scheme == f"| lookup:8 | shaw k={k_value} | {residual_value} | {ka}/10 | {kb}/10 | "
          f"{proto.fmt_p(stats.fisher_exact(ka, 10 - ka, kb, 10 - kb))} |", (scheme, ka, kb))

other_size = [{"settings": {"synth.task": "t", "model.seed": "1", "model.num_layers": layers,
                             "model.relative_position": pos, "task.lr": "1e-3"}, "result": dict(late, test=test_of)}
              for layers in ("2", "4") for pos in ("none", "shaw") for test_of in [
                  {"in_range": {"token_accuracy": 1.0 if (pos, layers) in (("shaw", "4"), ("none", "2")) else 0.0},
                   "beyond": {"token_accuracy": 0.0}}]]
sized = {"path": "t.ini", "grid": {"synth.task": ["t"], "model.seed": ["1"], "model.num_layers": ["2", "4"],
                                   "model.relative_position": ["none", "shaw"], "task.lr": ["1e-3"]},
         "protocol": {"select": "task.lr", "threshold": 0.95}}
table = proto.scheme_lines(sized, other_size)
check("a scheme is compared with absolute positions at its own other settings (4 layers with 4 layers)",
      "| t | 4 shaw | — | 1/1 | 0/1 | 1 |" in table and "| t | 2 shaw | — | 0/1 | 1/1 | 1 |" in table, table)
edge = sum(rate in ("1e-3", "1e-2") for rate in expected.values())
check(f"the cells whose choice is at an end of the grid are counted ({edge} of 6)",
      f"{edge} of 6 cells chose a rate at an end of the grid (1e-3 or 1e-2)" in md and edge > 0, md)
picked = {("a",): ("1e-3", {}), ("b",): ("3e-3", {}), ("c",): ("1e-2", {})}
check("edge cells: those at the first or the last rate of the grid",
      proto.edge_cells(spec, picked)[0] == [("a",), ("c",)], proto.edge_cells(spec, picked))
check("each comparison table counts its comparisons (3 residual pairs, 4 schemes against absolute)",
      "3 comparisons, p-values not corrected." in md and "4 comparisons, p-values not corrected." in md, md[-1500:])

# a state without the protocol's fields: an error naming the file and the field, nothing written
spec, points, states = fabricate(os.path.join(scratch, "damaged"))
victim = points[7]
with open(os.path.join(victim["dir"], "sweep-point.json"), "w") as f:
    json.dump({"done": True, "stages": {"tagging": {k: v for k, v in states[victim["name"]].items()
                                                    if k != "learned_step"}}}, f)
import sweep_spec  # noqa: E402
try:
    sweep_report.write_report(spec, points, relevant)
    check("a state without learned_step is refused, naming the file and the field", False, "no error")
except sweep_spec.SweepError as e:
    check("a state without learned_step is refused, naming the file and the field",
          f"{victim['dir']}/sweep-point.json: stage 'tagging' has no 'learned_step'" in str(e) and
          not os.path.exists(os.path.join(scratch, "damaged", "results.md")), str(e))

# ---- without test records, and without [protocol] ------------------------------------------------
spec, points, states = fabricate(os.path.join(scratch, "no-test"), with_test=False)
sweep_report.write_report(spec, points, relevant)
md = open(os.path.join(scratch, "no-test", "results.md")).read()
check("runs without a test record: scored on the dev file, and the report says the choice saw it",
      "have no test record" in md and "stands in for the test file" in md, md[:2000])
spec, points, states = fabricate(os.path.join(scratch, "old"), with_protocol=False)
sweep_report.write_report(spec, points, relevant)
old = read_csv(os.path.join(scratch, "old", "results.csv"))
check("no [protocol]: the old synthetic report (no chosen column), scored on the test record when there is one",
      "chosen" not in old[0] and
      all(float(r["in_range_accuracy"]) == states[r["point"]]["test"]["in_range"]["token_accuracy"] for r in old) and
      "Selection rule" not in open(os.path.join(scratch, "old", "results.md")).read(), old[0])

# ---- two stages ([protocol] select_seeds): who runs, in which order --------------------------------
import sweep  # noqa: E402
import sweep_stages  # noqa: E402
two = {"path": "two.ini", "grid": {"synth.task": ["t"], "model.seed": ["1", "2", "3", "4"], "task.lr": ["1e-3", "3e-3"]},
       "protocol": {"select": "task.lr", "threshold": 0.95, "select_seeds": ["3", "4"]}}
two_points = [{"name": f"seed={s},lr={lr}", "dir": f"seed={s},lr={lr}",
               "settings": {"synth.task": "t", "model.seed": s, "task.lr": lr}}
              for s in two["grid"]["model.seed"] for lr in two["grid"]["task.lr"]]
states = {}
def two_state(d):  # noqa: E302
    return states.get(d)
def finished(d, acc):  # noqa: E302
    states[d] = {"done": True, "stages": {"tagging": {"in_range": {"token_accuracy": acc}, "beyond": {"token_accuracy": acc},
                                                      "learned_step": 100, "steps_run": 200, "max_steps": 200}}}
replicate = next(p for p in two_points if p["name"] == "seed=1,lr=3e-3")
check("two stages: the selection seeds run first, even when the grid lists them last",
      [p["settings"]["model.seed"] for _, p in sweep.replicate_order(two, list(enumerate(two_points)))][:4] == ["3", "3", "4", "4"])
finished("seed=3,lr=1e-3", 0.5)
finished("seed=3,lr=3e-3", 0.9)
finished("seed=4,lr=1e-3", 0.6)
check("a replicate waits while a selection run of its cell is unfinished",
      sweep_stages.needed(two, two_points, replicate, two_state) is None)
try:
    sweep_stages.wait_until_chosen(two, two_points, replicate, two_state, lambda: False, {"seed=4,lr=3e-3"}, poll=0)
    check("a failed selection run stops the replicates' wait, naming it", False)
except RuntimeError as e:
    check("a failed selection run stops the replicates' wait, naming it", "seed=4,lr=3e-3" in str(e), str(e))
finished("seed=4,lr=3e-3", 0.8)
check("then: the chosen rate's replicate runs, the other rate's is not needed; selection points always run",
      sweep_stages.needed(two, two_points, replicate, two_state) is True and
      sweep_stages.needed(two, two_points, next(p for p in two_points if p["name"] == "seed=1,lr=1e-3"), two_state) is False and
      sweep_stages.needed(two, two_points, next(p for p in two_points if p["name"] == "seed=3,lr=1e-3"), two_state) is True)
finished("seed=1,lr=3e-3", 0.0)  # replicates' scores would move the choice to 1e-3 if it read them
finished("seed=2,lr=3e-3", 0.0)
check("a replicate's score does not move its cell's choice (the choice reads the selection seeds only)",
      proto.cell_choice(two, [sweep_stages.row_of(p, two_state) for p in two_points], ("t",)) == "3e-3")

two_rows = [sweep_stages.row_of(p, two_state) for p in two_points]
two_choice = proto.choose_learning_rates(two, two_rows)
picked = sorted(r["settings"]["model.seed"] for r in proto.chosen_rows(two, two_rows, two_choice))
check("two stages: the statistics are over the replicate seeds at the chosen rate only (not the selection seeds)",
      picked == ["1", "2"], picked)

# [protocol] question_by: one value of a key at a time through both stages, seed by seed within it
by = dict(two, grid={"synth.task": ["t", "u"], "model.seed": ["1", "2", "3", "4"], "task.lr": ["1e-3", "3e-3"]},
          protocol=dict(two["protocol"], question_by="synth.task"))
by_points = [{"name": f"{t},{s},{lr}", "settings": {"synth.task": t, "model.seed": s, "task.lr": lr}}
             for t in ["u", "t"] for s in by["grid"]["model.seed"] for lr in by["grid"]["task.lr"]]
run_order = [(p["settings"]["synth.task"], p["settings"]["model.seed"])
             for _, p in sweep.replicate_order(by, list(enumerate(by_points)))]
check("question_by = synth.task: task t's selection seeds (3, 4), then its replicates seed by seed, then u's so",
      run_order == [("t", s) for s in "33441122"] + [("u", s) for s in "33441122"], run_order)
plain = [(p["settings"]["synth.task"], p["settings"]["model.seed"])
         for _, p in sweep.replicate_order(dict(by, protocol=two["protocol"]), list(enumerate(by_points)))]
check("... without it, the selection seeds of every task first, then stage two seed by seed over every task",
      plain == [("u", "3")] * 2 + [("t", "3")] * 2 + [("u", "4")] * 2 + [("t", "4")] * 2
      + [("u", "1")] * 2 + [("t", "1")] * 2 + [("u", "2")] * 2 + [("t", "2")] * 2, plain)
one_stage = [(p["settings"]["synth.task"], p["settings"]["model.seed"]) for _, p in sweep.replicate_order(
    dict(by, protocol=dict(two["protocol"], select_seeds=None, question_by="synth.task")), list(enumerate(by_points)))]
check("... and in a one-stage sweep, task t at every seed before u",
      one_stage == [("t", s) for s in "11223344"] + [("u", s) for s in "11223344"], one_stage)

import sweep_spec  # noqa: E402


def protocol_error(lines):
    """The SweepError a sweep file with this [protocol] gives, or None."""
    path = os.path.join(scratch, "by.ini")
    with open(path, "w") as f:
        f.write(f"[sweep]\nbase = {scratch}/base.ini\nout = out\n[synth]\ntasks = reverse mqar\ntrain_lengths = 1-4\n"
                "train_count = 8\ntest_lengths = 1-8\ntest_count = 1\nval_count = 1\nseed = 1\n[grid]\n"
                "model.seed = 1 2 3\ntask.lr = 1e-3 3e-3\n[protocol]\n" + lines)
    try:
        open(os.path.join(scratch, "base.ini"), "a").close()
        sweep_spec.parse_sweep(path)
        return None
    except sweep_spec.SweepError as e:
        return str(e)


check("question_by = synth.task is accepted with select_seeds and without",
      protocol_error("select_seeds = 1\nquestion_by = synth.task\n") is None
      and protocol_error("question_by = synth.task\n") is None)
for lines, expected in [("select_seeds = 1\nquestion_by = model.seed\n", "by.ini:17: [protocol] question_by = "
                         "model.seed: expected a [grid] key other than the seed and task.lr"),
                        ("question_by = task.lr\n", "by.ini:16: [protocol] question_by = task.lr: expected"),
                        ("select_seeds = 1\nquestion_by = synth.tsak\n", "question_by = synth.tsak: expected")]:
    got = protocol_error(lines)
    check(f"refused, naming the file and line: {lines.strip()!r}", got is not None and expected in got, got)

# ---- the expansion: `realpos config` one per core, errors in grid order ----------------------------
fake = os.path.join(scratch, "fake-realpos")
calls = os.path.join(scratch, "fake-calls")
with open(fake, "w") as f:  # a realpos config that refuses seeds 3 and 5 (3 slowly) and the key model.bogus
    f.write("#!/bin/sh\necho x >> " + calls + "\nseed=; for a in \"$@\"; do case $a in model.seed=*) "
            "seed=${a#model.seed=};; model.bogus=*) echo \"unknown key model.bogus\" >&2; exit 1;; esac; done\n"
            "[ \"$seed\" = 3 ] && { sleep 0.3; echo \"bad seed 3\" >&2; exit 1; }\n"
            "[ \"$seed\" = 5 ] && { echo \"bad seed 5\" >&2; exit 1; }\n"
            "printf '[model]\\nseed = %s\\n[train]\\nkeep_last = 2\\n' \"$seed\"\n")
os.chmod(fake, 0o755)


def expansion(grid_lines):
    """(the SweepError of expanding a sweep of this [grid] on the fake realpos or None, its calls)."""
    path = os.path.join(scratch, "expand.ini")
    with open(path, "w") as f:
        f.write(f"[sweep]\nbase = {scratch}/base.ini\nout = {scratch}/expand-out\n[grid]\n{grid_lines}")
    open(calls, "w").close()
    try:
        sweep_spec.expand(sweep_spec.parse_sweep(path), fake)
        error = None
    except sweep_spec.SweepError as e:
        error = str(e)
    return error, len(open(calls).read().split())


error, n = expansion("model.seed = 1 2 4 6 7 8\n")
check("expansion: six good points, two realpos config runs each", error is None and n == 12, (error, n))
error, _ = expansion("model.seed = 1 2 3 4 5 6\n")
check("expansion: of two refused points the first in grid order is reported (seed 3, slower than seed 5)",
      error is not None and "point seed=3" in error and "bad seed 3" in error, error)
error, n = expansion("model.seed = 1 2 4 6\nmodel.bogus = 1\n")
check("expansion: a key wrong at every point is refused after the first point's run alone",
      error is not None and "unknown key model.bogus" in error and n == 1, (error, n))

# ---- the predicted cost (scripts/sweep_cost.py): the bound of one point, worked by hand ----------
import sweep_cost  # noqa: E402
cost_point = {"cfg": {"task.max_steps": "3000", "task.batch_size": "8", "task.eval_every": "250"}}
# 3000 x 8 x 30 = 720000 training tokens; 3000 / 250 + 1 = 13 evaluations x 9000 + a test of 6000
# = 123000 scored tokens, a third of a training token each: 41000; (720000 + 41000) / 10000 = 76.1 s
bound = sweep_cost.point_bound(cost_point, {"train": 30, "dev": 9000, "test": 6000}, 10000.0, 2.0)
check("the cost bound of a point: start-up + (steps x batch x tokens + evaluations / 3) / rate (78.1 s by hand)",
      abs(bound - 78.1) < 1e-9, bound)
check("a cost is printed as h:mm:ss", sweep_cost.hms(3725.4) == "1:02:05", sweep_cost.hms(3725.4))
