#!/usr/bin/env python3
"""Checks of the figures (run by tests/train/cli/test_plots.sh): scripts/plot.py's curves.png draws
the loss on a log axis, the learning rate of every record in its own panel and the held-out
unigram baseline the eval records carry, with whole-number step ticks; sweep_report.py's
heldout_vs_k.png has no offset tick labels on a narrow loss range, loss_curves.png whole-number
step ticks on a short run; analyze_attention.py's attention maps a colour bar. Each figure is
drawn, its tick labels rendered and read back. usage: test_plots.py RUN_DIR (a realpos run)"""
import json
import os
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import analyze_attention  # noqa: E402
import plot  # noqa: E402
import sweep_report  # noqa: E402

failures = 0


def check(name, ok, detail=""):
    global failures
    print(("PASS " if ok else "FAIL ") + name + ("" if ok or not detail else f": {detail}"))
    failures += not ok


def tick_labels(fig, axis):
    fig.canvas.draw()
    return [t.get_text().replace("\u2212", "-") for t in axis.get_ticklabels() if t.get_text()]


def is_integer(text):
    return text.lstrip("-").isdigit()


# ---- plot.py on a realpos run: the eval records carry the unigram baseline -------------------------
run = sys.argv[1]
train, evals = sweep_report.read_metrics(run)
check("a realpos eval record carries unigram_accuracy", evals and all(0 <= r["unigram_accuracy"] <= 1 for r in evals))
fig = plot.draw([run], ["tiny"])
ax_loss, ax_acc, ax_lr = fig.axes[:3]
check("curves: the loss axis is logarithmic", ax_loss.get_yscale() == "log")
lr_line = ax_lr.get_lines()[0]
check("curves: the learning-rate panel draws every record's lr",
      list(lr_line.get_ydata()) == [r["lr"] for r in train] and list(lr_line.get_xdata()) == [r["step"] for r in train])
flat = [ln for ln in ax_acc.get_lines() if len(set(ln.get_ydata())) == 1 and ln.get_linestyle() == ":"]
check("curves: the held-out unigram baseline is a dotted line at its value",
      len(flat) == 1 and flat[0].get_ydata()[0] == evals[-1]["unigram_accuracy"] and "unigram" in flat[0].get_label())
labels = [t for ax in fig.axes[:3] for t in tick_labels(fig, ax.xaxis)]
check(f"curves: whole-number step ticks ({' '.join(labels)})", labels and all(map(is_integer, labels)))
plt.close(fig)

# ---- sweep_report.py ------------------------------------------------------------------------------
captured = []
sweep_report.plt.close = lambda fig: captured.append(fig)  # keep each figure to read its ticks
spec = {"grid": {"model.relative_k": ["8", "16", "32"], "data.seed": ["1", "2"]}, "eval_seq_lens": [],
        "finetune": False}
rows = [{"name": f"k{k}-s{s}", "status": "done", "model.relative_k": k, "data.seed": s,
         "eval_loss": 6.0512 + 0.00004 * int(k) / 8 + 0.00001 * int(s), "eval_accuracy": 0.1251 + 0.00001 * int(s)}
        for k in ("8", "16", "32") for s in ("1", "2")]
with tempfile.TemporaryDirectory() as tmp:
    sweep_report.plot_against_x(os.path.join(tmp, "heldout_vs_k.png"), spec, rows, "model.relative_k")
    fig = captured.pop()
    offsets = [ax.yaxis.get_offset_text().get_text() for ax in fig.axes if ax.get_title()]
    labels = tick_labels(fig, fig.axes[0].yaxis)
    check(f"heldout_vs_k: a loss range of 0.0002 has no offset label ({labels})",
          offsets and not any(offsets) and labels and all(t.startswith("6.05") for t in labels))
    points = []
    for row in rows:
        d = os.path.join(tmp, row["name"])
        os.makedirs(d)
        with open(os.path.join(d, "metrics.jsonl"), "w") as f:
            for s in range(1, 7):
                f.write(json.dumps({"kind": "train", "step": s, "loss": 7 - 0.1 * s}) + "\n")
            f.write(json.dumps({"kind": "eval", "step": 6, "eval_loss": 6.5}) + "\n")
        points.append({"name": row["name"], "dir": d})
    sweep_report.plot_loss_curves(os.path.join(tmp, "loss_curves.png"), spec, points, rows)
    fig = captured.pop()
    labels = [t for ax in fig.axes for t in tick_labels(fig, ax.xaxis)]
    check(f"loss_curves: whole-number step ticks on a 6-step run ({' '.join(labels)})",
          labels and all(map(is_integer, labels)))

# ---- analyze_attention.py -----------------------------------------------------------------------
rng = np.random.default_rng(1)
probs = rng.random((1, 2, 5, 5))
probs /= probs.sum(-1, keepdims=True)
model = {"probs": [probs, probs], "lengths": [5], "tokens": [["[CLS]", "a", "b", "c", "[SEP]"]]}


class KeepFigures:
    """matplotlib.pyplot, except that close() keeps the figure (plot_maps takes plt as a parameter)."""
    def __getattr__(self, name):
        return getattr(plt, name)

    def close(self, fig):
        captured.append(fig)


with tempfile.TemporaryDirectory() as tmp:
    analyze_attention.plot_maps(KeepFigures(), os.path.join(tmp, "attention_maps.png"), [model], ["m"], 0)
fig = captured.pop()
bars = [ax for ax in fig.axes if ax.get_ylabel() == "attention probability"]
check("attention maps: one colour bar for the shared 0..1 scale", len(bars) == 1 and len(fig.axes) == 2 * 2 + 1)
sys.exit(1 if failures else 0)
