"""The report of a sweep (scripts/sweep.py): results.csv, results.md and figures.

usage: /usr/bin/python3 scripts/sweep_report.py SWEEP.ini [--realpos ./realpos]
(the same as `scripts/sweep.py SWEEP.ini --report`: writes the report of the points run so far)

One row per point from its run directory (metrics.jsonl and the sweep's sweep-point.json), then
groups of points that differ only in their seed keys (grid keys named *seed) summarised as
mean ± sample standard deviation over the n seeds. With [run] average_last = N, the held-out
metrics of the point's average of its last N checkpoints (avg_* columns) stand next to those of
its final checkpoint. results.csv keeps every number at full precision (as metrics.jsonl and
`realpos eval --json` hold it); results.md rounds for reading. The fine-tuning column is named by
its metric on the fine-tuning run's dev file (e.g. "fine-tuning dev accuracy")."""
import argparse
import csv
import json
import math
import os
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

NOT_APPLICABLE = "-"
# finetune_metric (a task_eval member of metrics.jsonl) -> how the report names it
FINETUNE_METRIC_NAMES = {"accuracy": "accuracy", "f1": "F1", "matthews": "Matthews correlation",
                         "pearson": "Pearson", "spearman": "Spearman", "exact_match": "exact match"}
# column, heading, digits
METRICS = [("final_train_loss", "train loss", 4), ("eval_loss", "held-out loss", 4),
           ("eval_accuracy", "held-out acc", 4)]


def metric_records(run_dir):
    """The records of RUN_DIR/metrics.jsonl in file order (none if the file is absent); a line
    cut short by a kill is skipped."""
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return
    with open(path) as f:
        for line in f:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


def read_metrics(run_dir):
    """(train records, eval records) by step; a resumed run appends, and the later record of a
    step replaces the earlier one."""
    train, evals = {}, {}
    for rec in metric_records(run_dir):
        if "step" in rec:
            (evals if rec.get("kind") == "eval" else train)[rec["step"]] = rec
    return [train[s] for s in sorted(train)], [evals[s] for s in sorted(evals)]


def point_row(spec, point, relevant):
    """The results.csv row of a point; metrics it has not produced yet are empty."""
    row = {"name": point["name"]}
    for key, value in point["settings"].items():
        row[key] = value if relevant(key, point["cfg"]) else NOT_APPLICABLE
    from sweep_spec import load_point_state  # SweepError, naming the file, if it is corrupt
    state = load_point_state(point["dir"]) or {}
    stages = state.get("stages", {})
    train, evals = read_metrics(point["dir"])
    max_steps = int(point["cfg"]["train.max_steps"])
    final_eval = [r for r in evals if r["step"] == max_steps]
    row["status"] = "done" if state.get("done") else ("partial" if train else "new")
    row["steps"] = train[-1]["step"] if train else 0
    row["final_train_loss"] = train[-1]["loss"] if train and train[-1]["step"] == max_steps else None
    row["eval_loss"] = final_eval[0]["eval_loss"] if final_eval else None
    row["eval_accuracy"] = final_eval[0]["eval_accuracy"] if final_eval else None
    row["eval_perplexity"] = final_eval[0]["eval_perplexity"] if final_eval else None
    for length in spec["eval_seq_lens"]:
        result = stages.get(f"eval_len_{length}", {})
        row[f"eval_loss_len{length}"] = result.get("loss")
        row[f"eval_accuracy_len{length}"] = result.get("accuracy")
    if spec["finetune"]:
        row[f"finetune_{spec['finetune_metric']}"] = stages.get("finetune", {}).get(spec["finetune_metric"])
    if spec.get("average_last"):
        for suffix, stage in [("", "average_eval")] + [(f"_len{n}", f"average_eval_len_{n}")
                                                       for n in spec["eval_seq_lens"]]:
            result = stages.get(stage, {})
            row[f"avg_eval_loss{suffix}"] = result.get("loss")
            row[f"avg_eval_accuracy{suffix}"] = result.get("accuracy")
    speeds = [r["tokens_per_s"] for r in train if r.get("tokens_per_s")]
    row["tokens_per_s"] = statistics.median(speeds) if speeds else None
    row["wall_s"] = sum(s.get("wall_s", 0) for s in stages.values()) if stages else None
    return row


def metric_columns(spec):
    cols = list(METRICS)
    for length in spec["eval_seq_lens"]:
        cols += [(f"eval_loss_len{length}", f"held-out loss @{length}", 4),
                 (f"eval_accuracy_len{length}", f"held-out acc @{length}", 4)]
    if spec["finetune"]:
        cols.append((f"finetune_{spec['finetune_metric']}", finetune_heading(spec), 4))
    n = spec.get("average_last")
    if n:
        cols += [("avg_eval_loss", f"held-out loss, avg last {n}", 4),
                 ("avg_eval_accuracy", f"held-out acc, avg last {n}", 4)]
        for length in spec["eval_seq_lens"]:
            cols += [(f"avg_eval_loss_len{length}", f"held-out loss @{length}, avg last {n}", 4),
                     (f"avg_eval_accuracy_len{length}", f"held-out acc @{length}, avg last {n}", 4)]
    return cols + [("tokens_per_s", "tokens/s", 0), ("wall_s", "wall s", 0)]


def finetune_heading(spec):
    """"fine-tuning dev accuracy": the metric of the fine-tuning run's final dev evaluation."""
    metric = spec["finetune_metric"]
    return f"fine-tuning dev {FINETUNE_METRIC_NAMES.get(metric, metric)}"


def seed_keys(spec):
    return [k for k in spec["grid"] if k.split(".")[-1].endswith("seed")]


def group_rows(spec, rows):
    """{(value of each non-seed grid key): [rows]}, in grid order."""
    keys = [k for k in spec["grid"] if k not in seed_keys(spec)]
    groups = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in keys), []).append(row)
    return keys, groups


def mean_std(values):
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return None, None, 0
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else None, len(values)


def format_mean_std(values, digits):
    mean, std, n = mean_std(values)
    if mean is None:
        return ""
    text = f"{mean:.{digits}f}"
    return text + (f" ± {std:.{digits}f}" if std is not None else "")


def write_csv(path, spec, rows):
    fields = ["name"] + list(spec["grid"]) + ["status", "steps"] + \
        [c for c, _, _ in metric_columns(spec)[:3]] + ["eval_perplexity"] + \
        [c for c, _, _ in metric_columns(spec)[3:]]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for row in rows:
            w.writerow({k: ("" if row.get(k) is None else row[k]) for k in fields})


def write_markdown(path, spec, rows):
    keys, groups = group_rows(spec, rows)
    cols = metric_columns(spec)
    seeds = seed_keys(spec)
    done = sum(r["status"] == "done" for r in rows)
    lines = [f"Sweep `{spec['path']}` on `{spec['base']}`: {len(rows)} points ({done} finished), "
             f"mean ± sample std over {', '.join(f'`{s}`' for s in seeds) or 'one run per group'}; "
             f"`{NOT_APPLICABLE}`: the key does not apply." +
             (f" Fine-tuning: `{spec['finetune']}` from each point's final checkpoint, "
              f"{finetune_heading(spec)} on its task.dev_file." if spec["finetune"] else ""), ""]
    head = [k.split(".", 1)[1] for k in keys] + ["n"] + [h for _, h, _ in cols]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join("---" for _ in head) + "|")
    for group, members in groups.items():
        finished = [r for r in members if r["status"] == "done"]
        cells = list(group) + [str(len(finished))]
        cells += [format_mean_std([r.get(c) for r in finished], d) for c, _, d in cols]
        lines.append("| " + " | ".join(cells) + " |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def line_styles(keys, groups):
    """With several keys, line style by the key with the fewest values (e.g. residual no/yes) and
    colour by the others (e.g. six position schemes: ten colours tell them apart, four styles do
    not); with one, colour by its value."""
    if len(keys) < 2:
        colours = {g: f"C{i % 10}" for i, g in enumerate(groups)}
        return lambda g: {"color": colours[g], "linestyle": "-"}
    counts = [len({g[i] for g in groups}) for i in range(len(keys))]
    by_style = counts.index(min(counts))
    rest = lambda g: g[:by_style] + g[by_style + 1:]  # noqa: E731
    colours, styles = {}, {}
    for group in groups:
        colours.setdefault(rest(group), f"C{len(colours) % 10}")
        styles.setdefault(group[by_style], ["-", "--", ":", "-."][len(styles) % 4])
    return lambda g: {"color": colours[rest(g)], "linestyle": styles[g[by_style]]}


def label(keys, group):
    return ", ".join(f"{k.split('.', 1)[1]}={v}" for k, v in zip(keys, group) if v != NOT_APPLICABLE)


def plot_against_x(path, spec, rows, x_key):
    from matplotlib.ticker import ScalarFormatter
    keys, groups = group_rows(spec, [r for r in rows if r["status"] == "done"])
    if not groups:
        return False
    line_keys = [k for k in keys if k != x_key]
    lines = {}
    for group, members in groups.items():
        settings = dict(zip(keys, group))
        lines.setdefault(tuple(settings[k] for k in line_keys), []).append((settings[x_key], members))
    style = line_styles(line_keys, lines)
    xs = sorted({int(v) for v in spec["grid"][x_key] if v.lstrip("-").isdigit()})
    panels = [(c, h) for c, h, _ in metric_columns(spec) if c.startswith(("eval_", "finetune_"))]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 5.4), squeeze=False)
    for ax, (column, heading) in zip(axes[0], panels):
        for line, at in lines.items():
            kw = style(line)
            stats = [(x, *mean_std([r.get(column) for r in members])) for x, members in at]
            stats = [s for s in stats if s[1] is not None]
            if not stats:
                continue
            if all(x == NOT_APPLICABLE for x, *_ in stats):  # e.g. absolute positions: k does not apply
                mean, std = stats[0][1], stats[0][2] or 0
                ax.axhline(mean, label=label(line_keys, line) + " (any k)", **kw)
                ax.axhspan(mean - std, mean + std, color=kw["color"], alpha=0.12)
                continue
            stats.sort(key=lambda s: int(s[0]))
            ax.errorbar([int(s[0]) for s in stats], [s[1] for s in stats], yerr=[s[2] or 0 for s in stats],
                        marker="o", capsize=3, label=label(line_keys, line), **kw)
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs, [str(x) for x in xs])
        ax.set(xlabel=x_key.split(".", 1)[1], title=heading)
        ax.yaxis.set_major_formatter(ScalarFormatter(useOffset=False))  # 6.05, not 0.05 + 6
        ax.grid(alpha=0.3)
    handles, names = axes[0][0].get_legend_handles_labels()
    if names:  # a grid of k (and seeds) alone has one unnamed line
        fig.legend(handles, names, loc="lower center", ncol=min(3, len(names)), fontsize=8)
    fig.suptitle("mean ± std over seeds", fontsize=9)
    rows = (len(names) + 2) // 3
    fig.tight_layout(rect=(0, 0.06 * rows, 1, 1))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def plot_by_setting(path, spec, rows):
    """Grids without a numeric key (e.g. position schemes x residual): one bar per group and panel
    (held-out metrics at each length), mean ± std over seeds, seeds as dots."""
    keys, groups = group_rows(spec, [r for r in rows if r["status"] == "done"])
    if not groups or not keys:  # a grid of seeds only: nothing to set side by side
        return False
    panels = [(c, h) for c, h, _ in metric_columns(spec) if c.startswith(("eval_loss", "finetune_"))]
    fig, axes = plt.subplots(1, len(panels), figsize=(max(4.6, 0.45 * len(groups) + 2) * len(panels), 4.8),
                             squeeze=False)
    last = list(spec["grid"][keys[-1]])  # colour: the last key's value; hatched: another key off its first value
    firsts = [spec["grid"][k][0] for k in keys[:-1]]
    colour = lambda g: f"C{last.index(g[-1]) % 10}" if g[-1] in last else "grey"  # noqa: E731
    hatched = lambda g: any(v != f and v != NOT_APPLICABLE for v, f in zip(g[:-1], firsts))  # noqa: E731
    names = [label(keys, g) for g in groups]
    for ax, (column, heading) in zip(axes[0], panels):
        for x, (group, members) in enumerate(groups.items()):
            values = [r.get(column) for r in members if r.get(column) is not None]
            mean, std, _ = mean_std(values)
            if mean is None:
                continue
            ax.bar(x, mean, 0.7, yerr=std or 0, capsize=3, color=colour(group),
                   hatch="//" if hatched(group) else None, edgecolor="black", linewidth=0.5)
            ax.plot([x] * len(values), values, "k.", markersize=4)
        finite = [r.get(column) for r in rows if r.get(column) is not None]
        if finite:
            low, high = min(finite), max(finite)
            ax.set_ylim(low - 0.3 * (high - low + 1e-9), high + 0.3 * (high - low + 1e-9))
        ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=7)
        ax.set(title=heading)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle("mean ± std over seeds (dots: seeds; colour: " + keys[-1].split(".", 1)[1] + "; hatched: "
                 + ", ".join(f"{k.split('.', 1)[1]} != {f}" for k, f in zip(keys[:-1], firsts)) + ")", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def plot_loss_curves(path, spec, points, rows):
    from matplotlib.ticker import MaxNLocator, ScalarFormatter
    keys, groups = group_rows(spec, rows)
    by_name = {p["name"]: p for p in points}
    style = line_styles(keys, groups)
    fig, (ax_all, ax_end) = plt.subplots(1, 2, figsize=(12, 4.6))
    second_half = []  # values drawn in ax_end's window, for its y range
    for group, members in groups.items():
        curves = [read_metrics(by_name[r["name"]]["dir"]) for r in members]
        curves = [c for c in curves if c[0]]
        if not curves:
            continue
        steps = sorted(set.intersection(*(set(r["step"] for r in c[0]) for c in curves)))
        losses = [statistics.mean(next(r["loss"] for r in c[0] if r["step"] == s) for c in curves) for s in steps]
        kw = style(group)
        for ax in (ax_all, ax_end):
            ax.plot(steps, losses, label=f"{label(keys, group)} (n={len(curves)})", **kw)
        eval_steps = sorted(set.intersection(*(set(r["step"] for r in c[1]) for c in curves)))
        eval_losses = [statistics.mean(next(r["eval_loss"] for r in c[1] if r["step"] == s) for c in curves)
                       for s in eval_steps]
        ax_end.plot(eval_steps, eval_losses, "o", color=kw["color"], markersize=5)
        if steps:
            start = steps[len(steps) // 2]
            ax_end.set_xlim(start, steps[-1] * 1.02)
            second_half += [v for s, v in zip(steps + eval_steps, losses + eval_losses) if s >= start]
    ax_all.set(xlabel="step", ylabel="MLM loss", title="training loss (mean over seeds)")
    ax_end.set(xlabel="step", ylabel="MLM loss", title="second half; dots: held-out loss")
    if second_half:
        low, high = min(second_half), max(second_half)
        ax_end.set_ylim(low - 0.05 * (high - low), high + 0.05 * (high - low))
    for ax in (ax_all, ax_end):
        ax.grid(alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
        ax.yaxis.set_major_formatter(ScalarFormatter(useOffset=False))
    ax_all.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_report(spec, points, relevant):
    """Write the report files into spec['out']; returns their paths."""
    os.makedirs(spec["out"], exist_ok=True)
    if spec.get("synth"):  # a synthetic tagging suite: accuracy by test length
        import sweep_report_synth
        return sweep_report_synth.write_report(spec, points, relevant)
    rows = [point_row(spec, p, relevant) for p in points]
    out = lambda name: os.path.join(spec["out"], name)  # noqa: E731
    write_csv(out("results.csv"), spec, rows)
    write_markdown(out("results.md"), spec, rows)
    written = [out("results.csv"), out("results.md")]
    numeric = [k for k in spec["grid"] if k not in seed_keys(spec)
               and all(v.lstrip("-").isdigit() for v in spec["grid"][k])]
    x_key = "model.relative_k" if "model.relative_k" in spec["grid"] else (numeric[0] if numeric else None)
    if x_key and plot_against_x(out("heldout_vs_k.png"), spec, rows, x_key):
        written.append(out("heldout_vs_k.png"))
    elif not x_key and plot_by_setting(out("heldout_by_setting.png"), spec, rows):
        written.append(out("heldout_by_setting.png"))
    if any(r["steps"] for r in rows):
        plot_loss_curves(out("loss_curves.png"), spec, points, rows)
        written.append(out("loss_curves.png"))
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep", help="the sweep file (e.g. configs/sweeps/ablation-small.ini)")
    ap.add_argument("--realpos", default="./realpos", help="the realpos binary (default ./realpos)")
    args = ap.parse_args()
    import sweep_spec  # the sweep file's reader
    try:
        spec = sweep_spec.parse_sweep(args.sweep)
        points = sweep_spec.expand(spec, args.realpos)
        written = write_report(spec, points, sweep_spec.relevant)
    except sweep_spec.SweepError as e:
        sys.exit(f"sweep_report.py: error: {e}")
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
