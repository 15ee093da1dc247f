#!/usr/bin/env python3
"""Loss and accuracy curves of one or more realpos runs, from RUN_DIR/metrics.jsonl.

usage: /usr/bin/python3 scripts/plot.py RUN_DIR [RUN_DIR ...] [--out curves.png] [--labels a,b,...]
Training loss/accuracy (solid) and held-out MLM loss/accuracy (markers) against the step, one
colour per run, so the runs of an ablation can be compared at a glance."""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

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

    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(12, 4.5))
    for i, (run, label) in enumerate(zip(args.runs, labels)):
        train, evals = read_metrics(run)
        colour = f"C{i % 10}"
        if train:
            steps = [r["step"] for r in train]
            ax_loss.plot(steps, [r["loss"] for r in train], color=colour, label=f"{label} train")
            ax_acc.plot(steps, [r["accuracy"] for r in train], color=colour, label=f"{label} train")
        if evals:
            steps = [r["step"] for r in evals]
            ax_loss.plot(steps, [r["eval_loss"] for r in evals], "o--", color=colour, label=f"{label} held-out")
            ax_acc.plot(steps, [r["eval_accuracy"] for r in evals], "o--", color=colour, label=f"{label} held-out")
    ax_loss.set(xlabel="step", ylabel="MLM loss", title="MLM loss")
    ax_acc.set(xlabel="step", ylabel="MLM accuracy", title="MLM accuracy")
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
