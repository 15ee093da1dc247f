"""The report of a protocol sweep: a synthetic suite (scripts/sweep_synth.py) whose sweep file has

    [protocol]
    select = task.lr        ; the grid key each setting chooses on validation (the learning rate)
    threshold = 0.95        ; a run succeeded when its TEST token accuracy within the training
                            ; lengths is at or above this

written by sweep_report_synth.py (docs/ablations.md gives every statistic's formula):

  OUT/results.csv     one row per point: its settings (the learning rate among them), the final
                      validation accuracy within and beyond the training lengths, learned_step
                      (empty: never learned), steps_run, max_steps, the test accuracies, success,
                      and chosen (yes: the learning rate its setting chose)
  OUT/results.md      the tests named before the runs, the selection rule, then per task and
                      setting: the chosen learning rate (and each rate's mean validation accuracy),
                      success k/n of the chosen runs with a Wilson 95% interval, the Kaplan-Meier
                      median steps to learn and share learned by the budget, the test accuracy
                      within and beyond the training lengths as a median with a bootstrap 95%
                      interval; then the comparisons, each arm at its own chosen learning rate
  OUT/success_rate.png  success rate (Wilson 95% bars) against relative_k, a panel per task, the
                      schemes without k as horizontal bands (scripts/sweep_report_protocol_figures.py)
  OUT/survival.png    Kaplan-Meier share of runs learned by step, a panel per task, a line per arm
  OUT/by_length-TASK.png  the chosen runs' test accuracy by length (sweep_report_synth.py)

The selection rule (choose_learning_rates): for each task and setting (every grid key but the
seed keys and the select key), the learning rate with the best mean over seeds of the final
VALIDATION token accuracy within the training lengths; learning rates within 0.005 of that best
are tied, and the tie goes to the lower median steps to learn (learned_step, a run that never
learned counted at its budget max_steps), then to the higher mean, then to the earlier rate in the
grid. The selection reads the validation record and learned_step (itself from the validation
evaluations) only, never the test record; the report gives the test metrics of the chosen runs.

State fields read (OUT/NAME/sweep-point.json, stages.tagging): in_range.token_accuracy and
beyond.token_accuracy (validation), learned_step, steps_run, max_steps, stop_threshold,
stop_patience, wall_s, train_max_length, and test.{accuracy, in_range, beyond, by_length}. A state
without `test` (a suite run before validation files) is scored on its dev record, and the report
says that the choice then saw the scored file."""
import csv
import os
import statistics
from collections import defaultdict

import ablation_stats as stats
import sweep_report_synth as synth

TIE = 0.005           # validation accuracies this close to the best are tied
DEFAULT_THRESHOLD = synth.LEARNED_AT
RESIDUAL_KEY = "model.residual_attention"
POSITION_KEY = "model.relative_position"
K_KEY = "model.relative_k"
ABSOLUTE_KEY = "model.absolute_position"
BOOTSTRAP = {"resamples": 10000, "seed": 0}


SIDES = {"within": "in_range", "beyond": "beyond"}  # [protocol] success / select_on -> the record's field


def protocol(spec):
    p = dict(spec.get("protocol") or {})
    p.setdefault("select", None)
    p["threshold"] = float(p.get("threshold", DEFAULT_THRESHOLD))
    p.setdefault("success", "within")
    p.setdefault("select_on", p["success"])
    return p


def cell_keys(spec):
    """The grid keys that make a cell (task and setting): all but the seeds and the select key."""
    select = protocol(spec)["select"]
    return [synth.TASK_KEY] + [k for k in synth.setting_keys(spec) if k != select]


def cell_of(spec, row):
    return tuple(row["settings"].get(k, "") for k in cell_keys(spec))


def seed_of(spec, row):
    return tuple(row["settings"].get(k, "") for k in synth.seed_keys(spec))


# ---- what a run's state says --------------------------------------------------------------------

def validation_accuracy(tagging, side="within"):
    """The final validation token accuracy within the training lengths or beyond them (the dev
    record), as [protocol] select_on says."""
    return tagging[SIDES[side]]["token_accuracy"]


def steps_for_choice(tagging):
    """learned_step, or the budget max_steps for a run that never learned (the tie-break)."""
    return tagging["learned_step"] if tagging.get("learned_step") is not None else tagging["max_steps"]


def survival_time(tagging):
    """(step, learned): the learning step, or the last step run, censored."""
    if tagging.get("learned_step") is not None:
        return tagging["learned_step"], True
    return tagging.get("steps_run", tagging.get("max_steps")), False


def test_record(tagging):
    """The test file's scores; an old suite's dev record when the run has none."""
    return tagging.get("test") or tagging


def success(tagging, threshold, side="within"):
    """The test token accuracy within the training lengths (or beyond them) at threshold or above."""
    return test_record(tagging)[SIDES[side]]["token_accuracy"] >= threshold


# ---- the selection ----------------------------------------------------------------------------

def choose(by_rate, order):
    """by_rate: {rate: [(validation accuracy, steps for the choice) per finished run]}; order: the
    grid's rates. Returns (chosen rate or None, {rate: (mean, median steps, n)})."""
    summary = {r: (statistics.mean(a for a, _ in runs), statistics.median(s for _, s in runs), len(runs))
               for r, runs in by_rate.items() if runs}
    if not summary:
        return None, summary
    best = max(m for m, _, _ in summary.values())
    tied = [r for r in summary if summary[r][0] >= best - TIE]
    chosen = min(tied, key=lambda r: (summary[r][1], -summary[r][0], order.index(r) if r in order else len(order)))
    return chosen, summary


def selection_rows(spec, rows):
    """The rows the choice reads: every row, or with [protocol] select_seeds (two stages: the
    choice on those seeds, the other seeds run at the chosen rate only) those seeds' rows."""
    seeds = protocol(spec).get("select_seeds")
    if not seeds:
        return rows
    key = synth.seed_keys(spec)[0]
    return [r for r in rows if r["settings"].get(key) in seeds]


def cell_choice(spec, rows, cell):
    """(the chosen rate of one cell, or None while a selection run of it is unfinished)."""
    mine = [r for r in selection_rows(spec, rows) if cell_of(spec, r) == cell]
    if not mine or any(r["result"] is None for r in mine):
        return None
    return choose_learning_rates(spec, mine)[cell][0]


def choose_learning_rates(spec, rows):
    """{cell: (chosen rate, {rate: (mean validation accuracy, median steps, n)})}: the selection rule
    of the module's docstring, on the validation fields of the finished runs only."""
    select, side = protocol(spec)["select"], protocol(spec)["select_on"]
    order = list(spec["grid"].get(select, [""]))
    cells = defaultdict(lambda: defaultdict(list))
    for r in selection_rows(spec, rows):
        rate = r["settings"].get(select, "") if select else ""
        runs = cells[cell_of(spec, r)][rate]
        if r["result"]:
            runs.append((validation_accuracy(r["result"], side), steps_for_choice(r["result"])))
    return {cell: choose(by_rate, order) for cell, by_rate in cells.items()}


def chosen_rows(spec, rows, choice):
    """The runs the statistics are over: each cell's runs at its chosen rate, and with two stages
    ([protocol] select_seeds) only the replicate seeds': the selection seeds' runs chose the rate,
    so their test scores are not independent of the choice (a winner's curse) and are left out."""
    select = protocol(spec)["select"]
    selecting = {id(r) for r in selection_rows(spec, rows)} if protocol(spec).get("select_seeds") else set()
    return [r for r in rows if choice.get(cell_of(spec, r), (None,))[0] is not None and
            (r["settings"].get(select, "") if select else "") == choice[cell_of(spec, r)][0] and
            id(r) not in selecting]


# ---- per cell -----------------------------------------------------------------------------------

def cell_summary(spec, members):
    """The statistics of one cell's chosen runs (finished ones)."""
    p = protocol(spec)
    done = [r["result"] for r in members if r["result"]]
    out = {"n": len(done), "k": sum(success(t, p["threshold"], p["success"]) for t in done)}
    out["wilson"] = stats.wilson_interval(out["k"], out["n"])
    for side in SIDES:  # both success rates, for the table
        out[f"k_{side}"] = sum(success(t, p["threshold"], side) for t in done)
        out[f"wilson_{side}"] = stats.wilson_interval(out[f"k_{side}"], out["n"])
    times = [survival_time(t) for t in done]
    out["curve"] = stats.kaplan_meier([s for s, _ in times], [e for _, e in times]) if done else []
    out["median_steps"] = stats.median_steps(out["curve"])
    out["budget"] = max((t["max_steps"] for t in done if t.get("max_steps") is not None), default=None)
    for side in ("in_range", "beyond"):
        values = [test_record(t)[side]["token_accuracy"] for t in done]
        out[side] = stats.bootstrap_interval(values, "median", **BOOTSTRAP) if values else None
    return out


def fmt_interval(triple):
    return "—" if triple is None else f"{triple[0]:.3f} [{triple[1]:.3f}, {triple[2]:.3f}]"


def fmt_p(p):
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def rate_cell(choice):
    chosen, summary = choice
    parts = []
    for rate, (mean, steps, n) in summary.items():
        text = f"{rate or '(one)'}: {mean:.3f} (n {n})"
        parts.append(f"**{text}**" if rate == chosen else text)
    return "; ".join(parts) or "—"


def survival_cell(s):
    if not s["curve"] and not s["n"]:
        return "—"
    median = s["median_steps"]
    learned = s["curve"][-1] if s["curve"] else None
    if learned is None:
        share = "0.00"
    elif learned["survival"] == 0:  # the band is undefined once every run at risk learned
        share = "1.00 (all learned)"
    else:
        share = f"{learned['share_learned']:.2f} [{learned['band'][0]:.2f}, {learned['band'][1]:.2f}]"
    return f"{median if median is not None else '> ' + str(s['budget'])}; learned by the budget {share}"


# ---- comparisons --------------------------------------------------------------------------------

def by_cell(spec, rows):
    out = defaultdict(list)
    for r in rows:
        out[cell_of(spec, r)].append(r)
    return out


def partner(cell, keys, **changes):
    settings = dict(zip(keys, cell))
    for key, value in changes.items():
        if key not in settings:
            return None
        settings[key] = value
    return tuple(settings[k] for k in keys)


def residual_lines(spec, chosen, choice):
    keys, threshold, side = cell_keys(spec), protocol(spec)["threshold"], protocol(spec)["success"]
    if RESIDUAL_KEY not in keys:
        return []
    cells = by_cell(spec, chosen)
    lines = ["| task | setting | lr yes / no | success yes | success no | only yes / only no (pairs) | McNemar p "
             "| median steps yes / no | log-rank χ², p |", "|" + "---|" * 9]
    for cell, members in cells.items():
        settings = dict(zip(keys, cell))
        other = partner(cell, keys, **{RESIDUAL_KEY: "no"})
        if settings[RESIDUAL_KEY] != "yes" or other not in cells:
            continue
        yes = {seed_of(spec, r): r["result"] for r in members if r["result"]}
        no = {seed_of(spec, r): r["result"] for r in cells[other] if r["result"]}
        seeds = [s for s in yes if s in no]
        b, c = stats.paired_discordance([success(yes[s], threshold, side) for s in seeds],
                                        [success(no[s], threshold, side) for s in seeds])
        ty, tn = [survival_time(t) for t in yes.values()], [survival_time(t) for t in no.values()]
        _, _, chi2, p_rank = stats.logrank_test([s for s, _ in ty], [e for _, e in ty],
                                                [s for s, _ in tn], [e for _, e in tn])
        sy, sn = cell_summary(spec, members), cell_summary(spec, cells[other])
        label = synth.compact_label(settings, [k for k in keys[1:] if k != RESIDUAL_KEY]) or "—"
        lines.append(f"| {cell[0]} | {label} | {choice[cell][0] or '—'} / {choice[other][0] or '—'} "
                     f"| {sy['k']}/{sy['n']} | {sn['k']}/{sn['n']} | {b} / {c} ({len(seeds)}) "
                     f"| {fmt_p(stats.mcnemar_exact(b, c))} "
                     f"| {sy['median_steps'] or '—'} / {sn['median_steps'] or '—'} "
                     f"| {chi2:.2f}, {fmt_p(p_rank)} |")
    if len(lines) == 2:
        return []
    return ["## Residual attention, yes against no", "",
            "Each arm at its own chosen learning rate; successes paired by seed (exact McNemar on the pairs "
            "where one arm succeeded and the other did not); steps to learn of all finished chosen runs "
            "(log-rank, never learned censored at the last step run; median: Kaplan-Meier, — when "
            "fewer than half learned).", ""] + lines + ["", f"{len(lines) - 2} comparisons, p-values not corrected.",
                                                        ""]


def scheme_lines(spec, chosen):
    keys = cell_keys(spec)
    if POSITION_KEY not in keys:
        return []
    cells = by_cell(spec, chosen)
    summaries = {cell: cell_summary(spec, members) for cell, members in cells.items()}
    baselines = [dict(zip(keys, cell)) for cell in cells if dict(zip(keys, cell))[POSITION_KEY] == "none"]

    def baseline_of(s):
        """The absolute-positions cell with the same task and every other key (residual attention,
        model size, ...) equal, the scheme's own keys aside; keys that do not apply to it are empty."""
        for b in baselines:
            if all(b[k] in ("", s[k]) for k in keys if k not in (POSITION_KEY, K_KEY, ABSOLUTE_KEY)):
                return tuple(b[k] for k in keys)
        return None

    lines = ["| task | setting | residual | success | absolute positions | Fisher p |", "|" + "---|" * 6]
    for cell in cells:
        s = dict(zip(keys, cell))
        base = baseline_of(s)
        if base is None or base == cell or s[POSITION_KEY] == "none":
            continue
        a, b = summaries[cell], summaries[base]
        if not a["n"] or not b["n"]:
            continue
        p = stats.fisher_exact(a["k"], a["n"] - a["k"], b["k"], b["n"] - b["k"])
        label = synth.compact_label(s, [k for k in keys[1:] if k != RESIDUAL_KEY]) or "—"
        lines.append(f"| {cell[0]} | {label} | {s.get(RESIDUAL_KEY, '—')} | {a['k']}/{a['n']} | {b['k']}/{b['n']} "
                     f"| {fmt_p(p)} |")
    if len(lines) == 2:
        return []
    return ["## Each scheme against absolute positions", "",
            "Success counts of the chosen runs against absolute positions alone (relative_position = none) at "
            "the same residual value, each at its own chosen learning rate; two-sided Fisher exact test "
            "(unpaired).", ""] + lines + ["", f"{len(lines) - 2} comparisons, p-values not corrected.", ""]


def wall_lines(spec, chosen):
    """Where success steps up along k: for each task and truncated setting, every pair of neighbouring
    k values with their success counts and the two-sided Fisher exact test, and the wall: the first
    k whose Wilson interval lies wholly above the interval of the k below it."""
    keys = cell_keys(spec)
    if K_KEY not in keys:
        return []
    cells = by_cell(spec, chosen)
    lines_of = defaultdict(list)  # (task, setting without k) -> [(k, summary)]
    for cell, members in cells.items():
        settings = dict(zip(keys, cell))
        if not settings.get(K_KEY):
            continue
        rest = tuple((k, v) for k, v in settings.items() if k != K_KEY)
        lines_of[rest].append((int(settings[K_KEY]), cell_summary(spec, members)))
    side = protocol(spec)["success"]
    lines = ["| task | setting | k → k' | success k | success k' | Fisher p | wall |", "|" + "---|" * 7]
    for rest, ks in lines_of.items():
        ks = sorted((k, s) for k, s in ks if s["n"])
        settings = dict(rest)
        label = synth.compact_label(settings, [k for k in keys[1:] if k != K_KEY]) or "—"
        for (k0, a), (k1, b) in zip(ks, ks[1:]):
            p = stats.fisher_exact(b["k"], b["n"] - b["k"], a["k"], a["n"] - a["k"])
            wall = "**wall**" if b["wilson"][0] > a["wilson"][1] else ""
            lines.append(f"| {settings[synth.TASK_KEY]} | {label} | {k0} → {k1} | {a['k']}/{a['n']} | {b['k']}/{b['n']} "
                         f"| {fmt_p(p)} | {wall} |")
    if len(lines) == 2:
        return []
    return [f"## Along k: where success {side} the training lengths steps up", "",
            "Neighbouring values of relative_k, each at its own chosen learning rate; two-sided Fisher exact test "
            "on the success counts (unpaired); **wall**: the Wilson 95% interval of k' lies wholly above that of k.",
            ""] + lines + ["", f"{len(lines) - 2} comparisons, p-values not corrected.", ""]


# ---- files --------------------------------------------------------------------------------------

CSV_COLUMNS = ["chosen", "val_in_range_accuracy", "val_beyond_accuracy", "learned_step", "steps_run", "max_steps",
               "test_accuracy", "test_in_range_accuracy", "test_beyond_accuracy", "test_in_range_sequence_accuracy",
               "test_beyond_sequence_accuracy", "success", "train_max_length", "wall_s"]


def csv_values(tagging, chosen, threshold, side="within"):
    if not tagging:
        return ["yes" if chosen else "no"] + [""] * (len(CSV_COLUMNS) - 1)
    test = test_record(tagging)
    blank = lambda v: "" if v is None else repr(v)  # noqa: E731
    return ["yes" if chosen else "no", blank(tagging["in_range"]["token_accuracy"]),
            blank(tagging["beyond"]["token_accuracy"]), blank(tagging.get("learned_step")),
            blank(tagging.get("steps_run")), blank(tagging.get("max_steps")), blank(test.get("accuracy")),
            blank(test["in_range"]["token_accuracy"]), blank(test["beyond"]["token_accuracy"]),
            blank(test["in_range"].get("sequence_accuracy")), blank(test["beyond"].get("sequence_accuracy")),
            "yes" if success(tagging, threshold, side) else "no", blank(test.get("train_max_length")),
            blank(tagging.get("wall_s"))]


def write_csv(path, spec, rows, chosen):
    keys, threshold = list(spec["grid"]), protocol(spec)["threshold"]
    picked = {id(r) for r in chosen}
    with open(path + ".tmp", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["point"] + keys + CSV_COLUMNS)
        for r in rows:
            w.writerow([r["point"]["name"]] + [r["settings"].get(k, "") for k in keys] +
                       csv_values(r["result"], id(r) in picked, threshold, protocol(spec)["success"]))
    os.replace(path + ".tmp", path)


def header_lines(spec, rows):
    p = protocol(spec)
    done = [r["result"] for r in rows if r["result"]]
    stop = sorted({(t.get("stop_threshold"), t.get("stop_patience")) for t in done
                   if t.get("stop_threshold") is not None})
    stop_text = "; ".join(f"validation token accuracy within the training lengths ≥ {t} at {n} consecutive "
                          "evaluations" for t, n in stop) or "not recorded"
    lines = [f"# Protocol sweep `{spec.get('path', '')}`", "",
             f"{len(rows)} points, {len(done)} finished. Learning rate chosen per task and setting on the "
             "validation file; every accuracy below is on the test file, of the chosen runs only.", "",
             "**Tests, named before the runs** (scripts/ablation_stats.py, docs/ablations.md):", "",
             f"- success: test token accuracy {p['success']} the training lengths ≥ {p['threshold']}; its rate "
             "k/n with a Wilson 95% interval (the table gives both rates, within and beyond; the comparisons "
             f"and the figure use the one {p['success']});",
             f"- steps to learn: the first step of {stop_text} (learned_step); a run that never learned is "
             "censored at its last step; Kaplan-Meier share learned by step with an exponential-Greenwood "
             "95% band;",
             f"- accuracy within and beyond the training lengths: median over seeds with a percentile "
             f"bootstrap 95% interval ({BOOTSTRAP['resamples']} resamples, seed {BOOTSTRAP['seed']});",
             "- residual attention yes against no, per setting: exact two-sided McNemar test on successes "
             "paired by seed, and the log-rank test on steps to learn;",
             "- each scheme against absolute positions: two-sided Fisher exact test on success counts.", "",
             "p-values are not corrected for the number of comparisons.", "",
             f"**Selection rule.** For each task and setting: the value of `{p['select'] or '(none)'}` with the "
             f"best mean over seeds of the final validation token accuracy {p['select_on']} the training lengths; values "
             f"within {TIE} of the best are tied, and the tie goes to the lower median steps to learn (never "
             "learned: the budget), then the higher mean, then the earlier value in the grid. The selection "
             "reads no test score.", ""]
    if p.get("select_seeds"):
        lines += [f"**Two stages.** The choice reads the seeds {' '.join(p['select_seeds'])} at every rate; the "
                  "other seeds ran at their cell's chosen rate only (the other rates' points are not needed and "
                  "not run). Every statistic below is over those other seeds alone: the selection seeds' runs "
                  "made the choice, so their test scores would carry its winner's curse.", ""]
    if any("test" not in t for t in done):
        lines += [f"**Note:** {sum('test' not in t for t in done)} finished runs have no test record: their "
                  "dev file, on which the rate was also chosen, stands in for the test file.", ""]
    return lines


def edge_cells(spec, choice):
    """(the cells that chose the first or last of three or more rates, the grid's rates)."""
    select = protocol(spec)["select"]
    order = list(spec["grid"].get(select, [])) if select else []
    return [cell for cell, (rate, _) in choice.items() if len(order) >= 3 and rate in (order[0], order[-1])], order


def write_markdown(path, spec, rows, choice, chosen):
    keys = cell_keys(spec)
    lines = header_lines(spec, rows)
    lines += ["## Per task and setting", "",
              "| " + " | ".join(synth.short(k) for k in keys) + " | learning rate: mean validation accuracy (n), "
              "chosen in bold | success within k/n [Wilson 95%] | success beyond | median steps to learn (KM) | "
              "test within, median [bootstrap 95%] | test beyond |", "|" + "---|" * (len(keys) + 6)]
    members_of = by_cell(spec, chosen)
    for cell, c in choice.items():
        s = cell_summary(spec, members_of.get(cell, []))
        wilson = " | ".join(f"{s['k_' + side]}/{s['n']} [{s['wilson_' + side][0]:.2f}, {s['wilson_' + side][1]:.2f}]"
                            if s["n"] else "—" for side in SIDES)
        lines.append("| " + " | ".join(v or "—" for v in cell) + f" | {rate_cell(c)} | {wilson} | "
                     f"{survival_cell(s)} | {fmt_interval(s['in_range'])} | {fmt_interval(s['beyond'])} |")
    edge, order = edge_cells(spec, choice)
    if edge:
        lines += ["", f"{len(edge)} of {len(choice)} cells chose a rate at an end of the grid "
                  f"({order[0]} or {order[-1]}): their best rate may lie outside it."]
    lines += [""] + wall_lines(spec, chosen) + residual_lines(spec, chosen, choice) + scheme_lines(spec, chosen)
    with open(path + ".tmp", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".tmp", path)


REQUIRED = (("in_range", "token_accuracy"), ("beyond", "token_accuracy"), ("learned_step",), ("steps_run",),
            ("max_steps",))


def check_states(rows):
    """Every finished run has the fields the protocol reads; else a SweepError naming the file and
    the field (a state of a sweep run before the protocol, or a damaged one)."""
    import sweep_spec
    for r in rows:
        tagging = r["result"]
        if not tagging:
            continue
        records = [("", tagging, REQUIRED)]
        if tagging.get("test") is not None:
            records.append(("test.", tagging["test"], REQUIRED[:2]))
        for prefix, record, fields in records:
            for path in fields:
                value = record
                for part in path:
                    if not isinstance(value, dict) or part not in value:
                        raise sweep_spec.SweepError(
                            f"{os.path.join(r['point']['dir'], 'sweep-point.json')}: stage 'tagging' has no "
                            f"'{prefix}{'.'.join(path)}'; a [protocol] report needs the runs of a protocol sweep "
                            "(validation curve, learned_step, steps_run, max_steps, test record)")
                    value = value[part]


def write_report(spec, points, relevant):
    """Write the protocol report into spec['out']; returns the paths. Raises sweep_spec.SweepError
    on a finished state without the fields it reads."""
    rows = synth.load_rows(spec, points, relevant, scored="raw")
    check_states(rows)
    choice = choose_learning_rates(spec, rows)
    chosen = chosen_rows(spec, rows, choice)
    out = lambda name: os.path.join(spec["out"], name)  # noqa: E731
    write_csv(out("results.csv"), spec, rows, chosen)
    write_markdown(out("results.md"), spec, rows, choice, chosen)
    written = [out("results.csv"), out("results.md")]
    if any(r["result"] for r in chosen):
        import sweep_report_protocol_figures as figures
        written += [figures.plot_success(out("success_rate.png"), spec, chosen, choice),
                    figures.plot_survival(out("survival.png"), spec, chosen, choice)]
        tested = [dict(r, result=dict(test_record(r["result"]), wall_s=r["result"].get("wall_s")) if r["result"]
                       else None) for r in chosen]
        written += synth.plot_by_length(spec["out"], spec, tested)
    return written
