"""The figures of a protocol sweep's report (scripts/sweep_report_protocol.py):

  success_rate.png  success rate of the chosen runs with Wilson 95% bars against relative_k, a
                    panel per task, the schemes without k as a horizontal line and band
  survival.png      Kaplan-Meier share of runs learned by step, a line per arm, a panel per task"""
from collections import defaultdict

import sweep_report_synth as synth
from sweep_report_protocol import K_KEY, RESIDUAL_KEY, by_cell, cell_keys, cell_summary, protocol


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def tasks_of(spec, chosen):
    """The tasks with chosen runs (a sweep stopped part-way has none for the later ones)."""
    return [t for t in spec["grid"][synth.TASK_KEY]
            if any(row["result"] and row["settings"][synth.TASK_KEY] == t for row in chosen)]


def plot_success(path, spec, chosen, choice):
    """Success rate of the chosen runs with Wilson 95% bars: against relative_k for the truncated
    schemes, the others as a horizontal line with their interval as a band; a panel per task."""
    plt = _pyplot()
    keys, tasks = cell_keys(spec), tasks_of(spec, chosen)
    members_of = by_cell(spec, chosen)
    fig, axes = plt.subplots(1, len(tasks), figsize=(6.5 * len(tasks), 5), squeeze=False, sharey=True)
    for ax, task in zip(axes[0], tasks):
        lines = defaultdict(list)
        for cell in choice:
            if cell[0] != task:
                continue
            s = dict(zip(keys, cell))
            summary = cell_summary(spec, members_of.get(cell, []))
            if summary["n"]:
                name = synth.compact_label(s, [k for k in keys[1:] if k != K_KEY]) or "—"
                summary["rate"] = choice[cell][0]
                lines[name].append((s.get(K_KEY) or None, summary))
        swept_ks = set()
        curves = [name for name, points in sorted(lines.items()) if any(k is not None for k, _ in points)]
        for i, (name, points) in enumerate(sorted(lines.items())):
            style = {"color": f"C{i % 10}", "linestyle": ":" if "residual" in name else "-"}
            swept = sorted((int(k), s) for k, s in points if k is not None)
            if swept:
                swept_ks.update(k for k, _ in swept)
                # curves side by side at each k (a few % apart on the log axis), so equal rates stay visible
                dodge = 2 ** (0.06 * (curves.index(name) - (len(curves) - 1) / 2))
                rates = [s["k"] / s["n"] for _, s in swept]
                errors = [[r - s["wilson"][0] for r, (_, s) in zip(rates, swept)],
                          [s["wilson"][1] - r for r, (_, s) in zip(rates, swept)]]
                ax.errorbar([k * dodge for k, _ in swept], rates, yerr=errors, marker="o", capsize=3, label=name,
                            linewidth=1, **style)
                for (k, s), r in zip(swept, rates):  # the learning rate the point chose
                    ax.annotate(s["rate"], (k * dodge, r), textcoords="offset points", xytext=(4, 4), fontsize=6,
                                color=style["color"])
            for k, s in points:
                if k is None and K_KEY in keys:  # a reference beside the k curves: a line and its band
                    ax.axhline(s["k"] / s["n"], linewidth=1, label=f"{name}: {s['k']}/{s['n']} (lr {s['rate']})",
                               **dict(style, linestyle="--"))
                    ax.axhspan(*s["wilson"], color=style["color"], alpha=0.1, linewidth=0)
                elif k is None:  # no k anywhere (e.g. residual attention no / yes): a point per arm
                    rate = s["k"] / s["n"]
                    ax.errorbar([i], [rate], yerr=[[rate - s["wilson"][0]], [s["wilson"][1] - rate]], marker="o",
                                capsize=4, color=style["color"], label=f"{name}: {s['k']}/{s['n']} (lr {s['rate']})")
        if K_KEY not in keys:
            names = sorted(lines)
            ax.set_xticks(range(len(names)), names, fontsize=7)
            ax.set_xlim(-0.5, max(len(names), 1) - 0.5)
        else:
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted(swept_ks), [str(k) for k in sorted(swept_ks)])
            if swept_ks:
                ax.set_xlim(min(swept_ks) / 1.3, max(swept_ks) * 1.3)
            ax.set_xlabel("relative_k (labels: the chosen learning rate)")
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(f"{task}: success (test {protocol(spec)['success']} ≥ {protocol(spec)['threshold']})")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    axes[0][0].set_ylabel("success rate of the chosen runs, Wilson 95%")
    return synth.save_figure(plt, fig, path)


def plot_survival(path, spec, chosen, choice):
    """Kaplan-Meier share of runs learned by step, a line per arm (task and setting at its chosen
    learning rate), a panel per task; a + marks a run censored before the budget."""
    plt = _pyplot()
    keys, tasks = cell_keys(spec), tasks_of(spec, chosen)
    members_of = by_cell(spec, chosen)
    fig, axes = plt.subplots(1, len(tasks), figsize=(6.5 * len(tasks), 5), squeeze=False, sharey=True)
    for ax, task in zip(axes[0], tasks):
        arms = [(cell, cell_summary(spec, members_of.get(cell, []))) for cell in choice if cell[0] == task]
        for i, (cell, s) in enumerate(a for a in arms if a[1]["n"]):
            color = f"C{i % 10}" if i < 10 else plt.get_cmap("tab20b")(i % 20)
            budget = s["budget"] or max((p["step"] for p in s["curve"]), default=1)
            xs = [0] + [p["step"] for p in s["curve"]] + [budget]
            ys = [0.0] + [p["share_learned"] for p in s["curve"]]
            ys.append(ys[-1])
            label = synth.compact_label(dict(zip(keys, cell)), keys[1:]) or "—"
            ax.step(xs, ys, where="post", color=color, linewidth=1,
                    linestyle=":" if dict(zip(keys, cell)).get(RESIDUAL_KEY) == "yes" else "-",
                    label=f"{label} (lr {choice[cell][0] or '—'}, n {s['n']})")
        ax.set_title(f"{task}: share of runs learned by step (Kaplan-Meier)")
        ax.set_xlabel("training step")
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    axes[0][0].set_ylabel("share learned (validation criterion)")
    return synth.save_figure(plt, fig, path)
