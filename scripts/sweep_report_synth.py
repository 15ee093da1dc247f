"""The report of a synthetic tagging suite (scripts/sweep_synth.py), written by sweep_report.py:

  OUT/results.csv         one row per point: its settings, token and sequence accuracy over the
                          whole test file, within the training lengths and beyond, wall time
  OUT/results.md          mean ± std over seeds per task and setting (n = seeds that finished), how
                          many of those runs learned the task (LEARNED_AT within the training
                          lengths: these tasks are learned in a jump or not at all, so a mean over
                          3 seeds can hide that two runs solved it and one never started), and
                          which differences lie outside the seeds' spread (scripts/sweep_separation.py)
  OUT/by_length-TASK.png  token accuracy against test length (words), one line per setting: the
                          median over seeds, error bars their interquartile range (inside [0, 1],
                          where a mean ± std of runs that learned and runs that did not is not), a
                          panel per residual-attention value, the dashed line the longest training
                          example
  OUT/k_curve-TASK.png    accuracy within and beyond the training lengths against relative_k for the
                          truncated schemes (the other schemes as horizontal lines), when k is swept

A run scored on a test file of its own besides its validation (dev) file (stage "tagging" has a
"test" record) is reported by its test record. A sweep file with a [protocol] section gets the
protocol's report instead (scripts/sweep_report_protocol.py: each setting at the learning rate it
chose on validation, success rates with intervals, survival curves, exact tests).
"""
import csv
import math
import os
from collections import defaultdict

import sweep_separation

TASK_KEY = "synth.task"
LEARNED_AT = 0.95  # token accuracy within the training lengths from which a run counts as learned


def seed_keys(spec):
    return [k for k in spec["grid"] if k.endswith(".seed")]


def setting_keys(spec):
    return [k for k in spec["grid"] if k != TASK_KEY and k not in seed_keys(spec)]


def load_rows(spec, points, relevant, scored="test"):
    """[{point, settings, result}]: result the point's stage "tagging" (None before it finished).
    scored = "test": a run with a test record (a suite with validation files) is reported by it,
    so every accuracy of this report is on the test file; "raw": the stage as saved."""
    import sweep  # the point state reader
    rows = []
    for p in points:
        state = sweep.load_state(p["dir"]) or {}
        result = state.get("stages", {}).get("tagging")
        if scored == "test" and result and result.get("test"):
            result = dict(result["test"], wall_s=result.get("wall_s"))
        settings = {k: (v if relevant(k, p["cfg"]) else "") for k, v in p["settings"].items()}
        rows.append({"point": p, "settings": settings, "result": result})
    return rows


def mean_std(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None, 0
    m = sum(values) / len(values)
    s = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return m, s, len(values)


def learned_count(values):
    """(runs at LEARNED_AT or above, runs scored) of one setting's within-lengths accuracies."""
    scored = [v for v in values if v is not None]
    return sum(v >= LEARNED_AT for v in scored), len(scored)


def short(key):
    return key.split(".", 1)[1]


def compact_label(settings, keys):
    """'method4 k=16 +absolute_position': a yes/no key by its name when yes (nothing when no),
    relative_k as k=, any other key by its value."""
    words = []
    for k in keys:
        v = settings.get(k)
        if not v or v == "no":
            continue
        words.append(f"+{short(k)}" if v == "yes" else f"k={v}" if k == "model.relative_k" else v)
    return " ".join(sorted(words, key=lambda w: w.startswith("+")))


def label_of(spec, settings):
    return compact_label(settings, [k for k in setting_keys(spec) if "residual" not in k])


COLUMNS = [("accuracy", lambda r: r["accuracy"]), ("sequence_accuracy", lambda r: r["sequence_accuracy"]),
           ("in_range_accuracy", lambda r: r["in_range"]["token_accuracy"]),
           ("in_range_sequence_accuracy", lambda r: r["in_range"]["sequence_accuracy"]),
           ("beyond_accuracy", lambda r: r["beyond"]["token_accuracy"]),
           ("beyond_sequence_accuracy", lambda r: r["beyond"]["sequence_accuracy"]),
           ("train_max_length", lambda r: r["train_max_length"]), ("wall_s", lambda r: r["wall_s"])]


def write_csv(path, spec, rows):
    keys = list(spec["grid"])
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["point"] + keys + [c for c, _ in COLUMNS])
        for r in rows:
            res = r["result"]
            w.writerow([r["point"]["name"]] + [r["settings"].get(k, "") for k in keys] +
                       [repr(get(res)) if res else "" for _, get in COLUMNS])


def groups(spec, rows):
    """{(task, setting tuple): [rows over seeds]} in grid order."""
    out = defaultdict(list)
    keys = [TASK_KEY] + setting_keys(spec)
    for r in rows:
        out[tuple(r["settings"].get(k, "") for k in keys)].append(r)
    return out


def write_markdown(path, spec, rows):
    keys = [TASK_KEY] + setting_keys(spec)
    shown = [("accuracy", "token accuracy"), ("in_range_accuracy", "within training lengths"),
             ("beyond_accuracy", "beyond"), ("beyond_sequence_accuracy", "beyond, whole sequences")]
    getters = dict(COLUMNS)
    lines = ["| " + " | ".join(short(k) for k in keys) + " | " + " | ".join(h for _, h in shown) +
             f" | learned (≥ {LEARNED_AT} within) | n |", "|" + "---|" * (len(keys) + len(shown) + 2)]
    for group, members in groups(spec, rows).items():
        cells, n = [], 0
        for column, _ in shown:
            m, s, n = mean_std([getters[column](r["result"]) if r["result"] else None for r in members])
            cells.append("—" if m is None else f"{m:.3f} ± {s:.3f}")
        learned, scored = learned_count([getters["in_range_accuracy"](r["result"]) if r["result"] else None
                                         for r in members])
        lines.append("| " + " | ".join(group) + " | " + " | ".join(cells) + f" | {learned} of {scored} | {n} |")
    with open(path, "w") as f:
        f.write("Mean ± standard deviation over seeds (n: seeds finished); token accuracy on the output "
                "positions of the test files, within the training lengths and beyond; learned: the runs "
                f"at {LEARNED_AT} or more within the training lengths.\n\n" + "\n".join(lines) + "\n")
        separations = separation_lines(spec, rows)
        if separations:
            f.write("\n" + "\n".join(separations))


def separation_lines(spec, rows):
    """The "Separations" section (scripts/sweep_separation.py) for every task with results."""
    getters = dict(COLUMNS)
    keys = setting_keys(spec)
    lines = []
    for task in spec["grid"][TASK_KEY]:
        stats = {}
        for group, members in groups(spec, rows).items():
            if group[0] != task:
                continue
            stats[group[1:]] = {m: mean_std([getters[m](r["result"]) if r["result"] else None for r in members])
                                for m, _ in sweep_separation.MEASURES}
        lines += sweep_separation.separation_markdown(stats, task, keys, lambda s: label_of(spec, s))
    return sweep_separation.HEADER + lines if lines else []


def save_figure(plt, fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def seed_quartiles(values):
    """(25th, 50th, 75th percentile) of the seeds' values (None: a run without that length left out),
    NaN for none. Accuracies of runs that learn by a jump are bimodal: a mean ± sd bar of 0.5 ± 0.53
    leaves [0, 1] and hides that; the median and the interquartile range stay in it."""
    import numpy as np
    present = [v for v in values if v is not None]
    if not present:
        return (float("nan"),) * 3
    return tuple(float(q) for q in np.percentile(present, [25, 50, 75]))


def plot_by_length(out_dir, spec, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    written = []
    residual = [k for k in setting_keys(spec) if "residual" in k]
    panels = spec["grid"][residual[0]] if residual else [None]
    for task in spec["grid"][TASK_KEY]:
        fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 5), squeeze=False, sharey=True)
        edge = None
        for ax, panel in zip(axes[0], panels):
            for group, members in groups(spec, rows).items():
                done = [r for r in members if r["result"]]
                if group[0] != task or not done or (panel and done[0]["settings"][residual[0]] != panel):
                    continue
                edge = done[0]["result"]["train_max_length"]
                lengths = sorted({int(n) for r in done for n in r["result"]["by_length"]})
                medians, below, above = [], [], []
                for n in lengths:
                    q25, q50, q75 = seed_quartiles(
                        [r["result"]["by_length"].get(str(n), {}).get("token_accuracy") for r in done])
                    medians.append(q50)
                    below.append(q50 - q25)
                    above.append(q75 - q50)
                ax.errorbar(lengths, medians, yerr=[below, above], label=label_of(spec, done[0]["settings"]),
                            capsize=2, linewidth=1)
            if edge:
                ax.axvline(edge, color="gray", linestyle="--", linewidth=1)
            ax.set_title(f"{task}" + (f", {short(residual[0])} = {panel}" if panel else ""))
            ax.set_xlabel("test length (words: input and output positions)")
            ax.set_ylabel("token accuracy (output positions)")
            ax.grid(alpha=0.3)
        axes[0][-1].legend(fontsize=6, ncol=2)
        written.append(save_figure(plt, fig, os.path.join(out_dir, f"by_length-{task}.png")))
    return written


def plot_k_curve(out_dir, spec, rows):
    if "model.relative_k" not in spec["grid"]:
        return []
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    getters = dict(COLUMNS)
    written = []
    for task in spec["grid"][TASK_KEY]:
        fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
        for ax, column, title in ((axes[0], "in_range_accuracy", "within the training lengths"),
                                  (axes[1], "beyond_accuracy", "beyond the training lengths")):
            curves = defaultdict(list)
            for group, members in groups(spec, rows).items():
                done = [r for r in members if r["result"]]
                if group[0] != task or not done:
                    continue
                settings = done[0]["settings"]
                m, s, _ = mean_std([getters[column](r["result"]) for r in done])
                name = compact_label(settings, [k for k in setting_keys(spec) if k != "model.relative_k"])
                curves[name].append((int(settings["model.relative_k"]) if settings.get("model.relative_k") else None,
                                     m, s))
            # one colour per setting in both panels; the schemes without k as a level line with
            # its ±std band
            for i, (name, pts) in enumerate(sorted(curves.items())):
                color = plt.get_cmap("tab20")(i % 20)
                ks = sorted(p for p in pts if p[0] is not None)
                if ks:
                    ax.errorbar([p[0] for p in ks], [p[1] for p in ks], yerr=[p[2] for p in ks], label=name,
                                capsize=2, marker="o", linewidth=1, color=color)
                else:
                    _, m, s = pts[0]
                    ax.axhline(m, linestyle="--", linewidth=1, label=name, color=color)
                    if s:
                        ax.axhspan(m - s, m + s, color=color, alpha=0.12, linewidth=0)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("relative_k")
            ax.set_title(f"{task}: {title}")
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("token accuracy (mean ± std over seeds)")
        axes[1].legend(fontsize=6)
        written.append(save_figure(plt, fig, os.path.join(out_dir, f"k_curve-{task}.png")))
    return written


def write_report(spec, points, relevant):
    if spec.get("protocol"):  # learning rate chosen on validation, intervals and tests
        import sweep_report_protocol
        return sweep_report_protocol.write_report(spec, points, relevant)
    rows = load_rows(spec, points, relevant)
    out = lambda name: os.path.join(spec["out"], name)  # noqa: E731
    write_csv(out("results.csv"), spec, rows)
    write_markdown(out("results.md"), spec, rows)
    written = [out("results.csv"), out("results.md")]
    if any(r["result"] for r in rows):
        written += plot_by_length(spec["out"], spec, rows) + plot_k_curve(spec["out"], spec, rows)
    return written
