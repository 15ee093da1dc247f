#!/usr/bin/env python3
"""Loss and accuracy curves of one or more realpos runs, from RUN_DIR/metrics.jsonl.

usage: /usr/bin/python3 scripts/plot.py RUN_DIR [RUN_DIR ...] [--out curves.png] [--labels a,b,...]
Training loss/accuracy (solid) and held-out MLM loss/accuracy (markers) against the step, one
colour per run, so the runs of an ablation can be compared at a glance: the loss on a log axis (the
first windows' loss near ln(vocabulary) does not squeeze the rest), the held-out unigram baseline
(always predicting the most frequent token, dotted) on the accuracy panel, and the learning rate
of each run's schedule in a third panel."""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

import sweep_report  # noqa: E402  (reads metrics.jsonl for plot and sweep alike)


def read_metrics(run_dir):
    if not os.path.exists(os.path.join(run_dir, "metrics.jsonl")):
        sys.exit(f"plot.py: error: {run_dir}/metrics.jsonl: no such file (is {run_dir} a realpos run directory?)")
    return sweep_report.read_metrics(run_dir)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--out", default=None, help="PNG path (default: RUN_DIR/curves.png of the first run)")
    ap.add_argument("--labels", default=None, help="comma-separated legend labels")
    args = ap.parse_args()
    labels = args.labels.split(",") if args.labels else [os.path.basename(os.path.normpath(r)) for r in args.runs]
    if len(labels) != len(args.runs):
        sys.exit("plot.py: error: --labels needs one label per run")
    out = args.out or os.path.join(args.runs[0], "curves.png")
    fig = draw(args.runs, labels)
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def draw(runs, labels):
    """The figure of the runs (one colour each): loss, accuracy, learning rate."""
    fig, (ax_loss, ax_acc, ax_lr) = plt.subplots(1, 3, figsize=(16, 4.5))
    baselines = {}  # held-out unigram accuracy -> the runs that have it
    for i, (run, label) in enumerate(zip(runs, labels)):
        train, evals = read_metrics(run)
        colour = f"C{i % 10}"
        if train:
            steps = [r["step"] for r in train]
            ax_loss.plot(steps, [r["loss"] for r in train], color=colour, label=f"{label} train")
            ax_acc.plot(steps, [r["accuracy"] for r in train], color=colour, label=f"{label} train")
            ax_lr.plot(steps, [r["lr"] for r in train], color=colour, label=label)
        if evals:
            steps = [r["step"] for r in evals]
            ax_loss.plot(steps, [r["eval_loss"] for r in evals], "o--", color=colour, label=f"{label} held-out")
            ax_acc.plot(steps, [r["eval_accuracy"] for r in evals], "o--", color=colour, label=f"{label} held-out")
            baseline = [r["unigram_accuracy"] for r in evals if "unigram_accuracy" in r]
            if baseline:  # the same held-out batches at every evaluation: one value per run
                baselines.setdefault(baseline[-1], []).append((label, colour))
    for value, owners in baselines.items():  # runs on the same held-out data share one line
        shared = len(baselines) == 1
        ax_acc.axhline(value, color="0.4" if shared else owners[0][1], linestyle=":",
                       label=f"{'' if shared else owners[0][0] + ' '}held-out unigram baseline ({100 * value:.1f}%)")
    ax_loss.set_yscale("log")
    ax_loss.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax_loss.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter("%.1f"))
    ax_loss.set(xlabel="step", ylabel="MLM loss (log scale)", title="MLM loss")
    ax_acc.set(xlabel="step", ylabel="MLM accuracy", title="MLM accuracy")
    ax_lr.set(xlabel="step", ylabel="learning rate", title="learning rate (schedule)")
    ax_lr.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    for ax in (ax_loss, ax_acc, ax_lr):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    fig.tight_layout()
    return fig


if __name__ == "__main__":
    main()
