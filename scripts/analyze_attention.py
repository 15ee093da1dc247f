#!/usr/bin/python3
"""Attention statistics of one or more `realpos attention` outputs, side by side.

usage: /usr/bin/python3 scripts/analyze_attention.py ATTN.h5 [ATTN.h5 ...] --out DIR
           [--labels a,b,...] [--example N] [--max-distance D]

Per model, layer and head, over every real query row i of every sentence (keys j < length):
  entropy         H(P_i) = -sum_j P_ij ln P_ij in nats; the maximum ln(length) is that of uniform
                  attention, and entropy_normalized = H / ln(length) is 1 there, 0 for one-hot rows
  top10_share     the mass on the ceil(10%) of keys with the largest P_ij (1 for one-hot rows,
                  ceil(0.1 n)/n for uniform ones): how sparse the attention is (as RealFormer reports)
  js_adjacent     Jensen-Shannon divergence JS(P^l_i, P^{l+1}_i) = (KL(p|m) + KL(q|m)) / 2 with
                  m = (p + q) / 2, in nats (0 for equal rows, ln 2 for disjoint ones), between the
                  same head of adjacent layers (RealFormer's layer-correlation analysis)
  distance_mass   the share of attention mass at relative distance d = i - j: sum of P_i,i-d over
                  rows, divided by the number of rows (sums to 1 over d; d > 0: keys to the left),
                  with uniform_mass, the same for uniform attention (short distances have more
                  pairs); the figure shows their ratio, 1 = no preference for that distance
  distance_embedding_norm   relative models: |a_r| of each row of the layer's table, by the
                  distance it encodes (i - j clipped to [-k, k]; |i - j| for method1)
  position_bias   t5, alibi: the bias head h adds to the scaled score at distance d = i - j (the
                  same in every layer: t5's shared bucket table, alibi's -m_h |d|)
Writes DIR/attention_stats.csv, js_adjacent.csv, distance_mass.csv, distance_embedding_norm.csv,
position_bias.csv and the figures attention_maps.png (sentence --example of each model),
entropy_sparsity.png, js_divergence.png, distance_mass.png, distance_embedding_norm.png,
position_bias.png."""
import argparse
import csv
import math
import os
import sys

import h5py
import numpy as np

TOP_FRACTION = 0.1


# ---- reading -----------------------------------------------------------------------------------

def load(path):
    """{probs: [layer] -> [B, heads, L, L], lengths [B], tokens [[str]], attrs, tables: [layer] -> array}"""
    if not os.path.exists(path):
        sys.exit(f"analyze_attention.py: error: {path}: no such file")
    with h5py.File(path, "r") as f:
        for name in ("lengths", "tokens", "layer_0/probs"):
            if name not in f:
                sys.exit(f"analyze_attention.py: error: {path}: no dataset /{name} (not a `realpos attention` "
                         "output?)")
        attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        layers = int(attrs["num_layers"])
        probs = [f[f"layer_{l}/probs"][()].astype(np.float64) for l in range(layers)]
        tables = [f[f"distance_embedding/layer_{l}"][()] for l in range(layers)
                  if f"distance_embedding/layer_{l}" in f]
        text = f["tokens"][()]
        text = text.decode() if isinstance(text, bytes) else text
        lengths = f["lengths"][()].astype(int)
        bias = f["position_bias"][()] if "position_bias" in f else None  # [heads, 2L-1], u = j - i + L - 1
    tokens = [line.split(" ") for line in text.rstrip("\n").split("\n")]
    return {"path": path, "probs": probs, "lengths": lengths, "tokens": tokens, "attrs": attrs, "tables": tables,
            "position_bias": bias}


def rows(p, lengths):
    """Each real query row of one head, [B, L, L] -> list of 1-D arrays over the real keys."""
    return [p[b, i, :n] for b, n in enumerate(lengths) for i in range(n)]


# ---- statistics -----------------------------------------------------------------------------------

def entropy(row):
    nz = row[row > 0]
    return float(-(nz * np.log(nz)).sum())


def top_share(row, fraction=TOP_FRACTION):
    count = max(1, math.ceil(fraction * len(row) - 1e-9))
    return float(np.sort(row)[::-1][:count].sum())


def js_divergence(p, q):
    m = 0.5 * (p + q)

    def kl(a):
        nz = a > 0
        return float((a[nz] * np.log(a[nz] / m[nz])).sum())
    return 0.5 * (kl(p) + kl(q))


def head_stats(p, lengths):
    """(mean entropy, mean ln n, mean normalised entropy, mean top share) over real rows."""
    rs = rows(p, lengths)
    h = np.array([entropy(r) for r in rs])
    max_h = np.array([math.log(len(r)) for r in rs])
    return h.mean(), max_h.mean(), (h / max_h).mean(), np.mean([top_share(r) for r in rs])


def adjacent_js(p, q, lengths):
    return float(np.mean([js_divergence(a, b) for a, b in zip(rows(p, lengths), rows(q, lengths))]))


def distance_mass(p, lengths):
    """{d: (share of mass at i - j = d, the same for uniform attention)} over the real rows of
    one head [B, L, L]."""
    mass, uniform, count = {}, {}, int(sum(lengths))
    for b, n in enumerate(lengths):
        for d in range(1 - n, n):  # the diagonal j = i - d has n - |d| entries
            mass[d] = mass.get(d, 0.0) + float(np.trace(p[b, :n, :n], offset=-d))
            uniform[d] = uniform.get(d, 0.0) + (n - abs(d)) / n
    return {d: (mass[d] / count, uniform[d] / count) for d in sorted(mass)}


def table_distances(table, relative_position, k):
    """[(distance, |row|)] of a relative table: 2k+1 rows for i - j in [-k, k] (row r <-> r - k),
    or k+1 rows for |i - j| in [0, k] (method1)."""
    norms = np.linalg.norm(table.reshape(table.shape[0], -1), axis=1)
    offset = 0 if relative_position == "method1" else k
    return [(r - offset, float(norms[r])) for r in range(table.shape[0])]


def analyse(model):
    """Every statistic of one loaded model as lists of CSV rows."""
    stats, js, dist, norms, biases = [], [], [], [], []
    lengths, probs = model["lengths"], model["probs"]
    for l, p in enumerate(probs):
        for h in range(p.shape[1]):
            e, e_max, e_norm, top = head_stats(p[:, h], lengths)
            stats.append({"layer": l, "head": h, "entropy": e, "entropy_max": e_max, "entropy_normalized": e_norm,
                          "top10_share": top})
            for d, (m, u) in distance_mass(p[:, h], lengths).items():
                dist.append({"layer": l, "head": h, "distance": d, "mass": m, "uniform_mass": u})
            if l + 1 < len(probs):
                js.append({"layer_a": l, "layer_b": l + 1, "head": h,
                           "js": adjacent_js(p[:, h], probs[l + 1][:, h], lengths)})
    a = model["attrs"]
    for l, table in enumerate(model["tables"]):
        for d, n in table_distances(table, a["relative_position"], int(a["relative_k"])):
            norms.append({"layer": l, "distance": d, "norm": n})
    if model["position_bias"] is not None:
        bias = model["position_bias"]
        L = (bias.shape[1] + 1) // 2
        for h in range(bias.shape[0]):
            for d in range(1 - L, L):  # d = i - j, column u = j - i + L - 1
                biases.append({"head": h, "distance": d, "bias": float(bias[h, L - 1 - d])})
    return stats, js, dist, norms, biases


# ---- output ----------------------------------------------------------------------------------------

def write_csv(path, records):
    if not records:
        return False
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(records[0]))
        w.writeheader()
        for r in records:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    return True


def plot_maps(plt, path, models, labels, example):
    from matplotlib.colors import PowerNorm
    layers, heads = len(models[0]["probs"]), models[0]["probs"][0].shape[1]
    fig, axes = plt.subplots(len(models) * layers, heads, figsize=(2.9 * heads, 2.7 * len(models) * layers),
                             squeeze=False)
    for m, (model, label) in enumerate(zip(models, labels)):
        b = min(example, len(model["lengths"]) - 1)
        n = model["lengths"][b]
        tokens = model["tokens"][b][:n]
        for l in range(layers):
            for h in range(heads):
                ax = axes[m * layers + l][h]
                image = ax.imshow(model["probs"][l][b, h, :n, :n], cmap="viridis", interpolation="nearest",
                                  norm=PowerNorm(gamma=0.5, vmin=0, vmax=1))
                ax.set_title(f"{label}: layer {l} head {h}", fontsize=7)
                ticks = range(n) if n <= 24 else []
                ax.set_xticks(ticks, [tokens[t] for t in ticks], rotation=90, fontsize=5)
                ax.set_yticks(ticks, [tokens[t] for t in ticks], fontsize=5)
    fig.suptitle(f"attention probabilities of sentence {example} (rows: queries, columns: keys; "
                 "colour: square root)", fontsize=9)
    fig.tight_layout(rect=(0, 0, 0.92, 0.97))
    # every map shares the one scale (probabilities 0..1, square-root colour): one bar for all
    bar = fig.colorbar(image, cax=fig.add_axes((0.935, 0.15, 0.015, 0.7)), label="attention probability")
    bar.set_ticks([0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 1])
    fig.savefig(path, dpi=80)
    plt.close(fig)


def per_layer(records, key, model_index):
    layers = sorted({r["layer"] for r in records[model_index]})
    heads = [[r[key] for r in records[model_index] if r["layer"] == l] for l in layers]
    return layers, heads


def plot_entropy(plt, path, all_stats, labels):
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, title in ((axes[0], "entropy_normalized", "entropy / ln(length) (1 = uniform)"),
                           (axes[1], "top10_share", "mass on the top 10% of keys")):
        for m, label in enumerate(labels):
            layers, heads = per_layer(all_stats, key, m)
            ax.plot(layers, [np.mean(h) for h in heads], "o-", color=f"C{m}", label=f"{label} (mean of heads)")
            for l, h in zip(layers, heads):
                ax.plot([l] * len(h), h, "x", color=f"C{m}", alpha=0.6)
        ax.set(xlabel="layer", title=title)
        ax.set_xticks(layers)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_js(plt, path, all_js, labels):
    fig, ax = plt.subplots(figsize=(6, 4))
    width = 0.8 / len(labels)
    for m, label in enumerate(labels):
        pairs = sorted({(r["layer_a"], r["layer_b"]) for r in all_js[m]})
        for x, pair in enumerate(pairs):
            values = [r["js"] for r in all_js[m] if (r["layer_a"], r["layer_b"]) == pair]
            pos = x + (m - (len(labels) - 1) / 2) * width
            ax.bar(pos, np.mean(values), width, color=f"C{m}", label=label if x == 0 else None)
            ax.plot([pos] * len(values), values, "kx", alpha=0.6)
        ax.set_xticks(range(len(pairs)), [f"{a}-{b}" for a, b in pairs])
    ax.axhline(math.log(2), color="grey", linestyle=":", label="ln 2 (disjoint)")
    ax.set(xlabel="adjacent layers", ylabel="JS divergence (nats)",
           title="JS divergence between adjacent layers (x: heads)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_distance(plt, path, all_dist, labels, max_distance):
    layers = sorted({r["layer"] for r in all_dist[0]})
    fig, axes = plt.subplots(1, len(layers), figsize=(5 * len(layers), 4), squeeze=False)
    for ax, l in zip(axes[0], layers):
        for m, label in enumerate(labels):
            recs = [r for r in all_dist[m] if r["layer"] == l and abs(r["distance"]) <= max_distance]
            ds = sorted({r["distance"] for r in recs})
            lift = [np.mean([r["mass"] / r["uniform_mass"] for r in recs if r["distance"] == d]) for d in ds]
            ax.plot(ds, lift, ".-", color=f"C{m}", label=f"{label} (mean of heads)")
        ax.axhline(1.0, color="grey", linestyle=":")
        ax.set(xlabel="relative distance i - j (query - key)", ylabel="attention mass / uniform attention's",
               title=f"layer {l}")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_norms(plt, path, all_norms, labels):
    fig, ax = plt.subplots(figsize=(6.5, 4))
    styles = ["-", "--", ":", "-."]
    for m, label in enumerate(labels):
        for l in sorted({r["layer"] for r in all_norms[m]}):
            recs = [r for r in all_norms[m] if r["layer"] == l]
            ax.plot([r["distance"] for r in recs], [r["norm"] for r in recs], styles[l % 4], color=f"C{m}",
                    label=f"{label} layer {l}")
    ax.set(xlabel="relative distance (clipped at ±k)", ylabel="|distance embedding row|",
           title="norm of each distance-embedding row")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_bias(plt, path, all_bias, labels, max_distance):
    fig, ax = plt.subplots(figsize=(6.5, 4))
    styles = ["-", "--", ":", "-."]
    for m, label in enumerate(labels):
        for h in sorted({r["head"] for r in all_bias[m]}):
            recs = [r for r in all_bias[m] if r["head"] == h and abs(r["distance"]) <= max_distance]
            ax.plot([r["distance"] for r in recs], [r["bias"] for r in recs], styles[h % 4], color=f"C{m}",
                    label=f"{label} head {h}")
    ax.set(xlabel="relative distance i - j (query - key)", ylabel="bias added to the scaled score",
           title="position bias per head (t5: shared table; alibi: -m_h |i-j|)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="+", metavar="ATTN.h5")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--labels", help="comma-separated names of the inputs (default: file names)")
    ap.add_argument("--example", type=int, help="sentence shown in attention_maps.png (default: the first of "
                    "at most 24 tokens)")
    ap.add_argument("--max-distance", type=int, default=32, help="|i - j| range of distance_mass.png")
    args = ap.parse_args()
    labels = args.labels.split(",") if args.labels else \
        [os.path.splitext(os.path.basename(p))[0] for p in args.inputs]
    if len(labels) != len(args.inputs):
        sys.exit("analyze_attention.py: error: --labels needs one label per input")
    models = [load(p) for p in args.inputs]
    shapes = {(len(m["probs"]), m["probs"][0].shape[1]) for m in models}
    if len(shapes) != 1:
        sys.exit("analyze_attention.py: error: the inputs differ in layers or heads: "
                 + ", ".join(f"{p}: {len(m['probs'])} layers x {m['probs'][0].shape[1]} heads"
                             for p, m in zip(args.inputs, models)))
    if args.example is None:
        args.example = next((b for b, n in enumerate(models[0]["lengths"]) if n <= 24), 0)
    os.makedirs(args.out, exist_ok=True)
    results = [analyse(m) for m in models]
    tagged = [[[dict(model=label, **r) for r in part] for part in res] for label, res in zip(labels, results)]
    names = ("attention_stats.csv", "js_adjacent.csv", "distance_mass.csv", "distance_embedding_norm.csv",
             "position_bias.csv")
    for i, name in enumerate(names):
        if write_csv(os.path.join(args.out, name), [r for t in tagged for r in t[i]]):
            print(f"wrote {os.path.join(args.out, name)}")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out = lambda name: os.path.join(args.out, name)  # noqa: E731
    plot_maps(plt, out("attention_maps.png"), models, labels, args.example)
    plot_entropy(plt, out("entropy_sparsity.png"), [r[0] for r in results], labels)
    figures = ["attention_maps.png", "entropy_sparsity.png"]
    if any(r[1] for r in results):
        plot_js(plt, out("js_divergence.png"), [r[1] for r in results], labels)
        figures.append("js_divergence.png")
    plot_distance(plt, out("distance_mass.png"), [r[2] for r in results], labels, args.max_distance)
    figures.append("distance_mass.png")
    with_tables = [(r[3], label) for r, label in zip(results, labels) if r[3]]
    if with_tables:
        plot_norms(plt, out("distance_embedding_norm.png"), [t for t, _ in with_tables], [lb for _, lb in with_tables])
        figures.append("distance_embedding_norm.png")
    with_bias = [(r[4], label) for r, label in zip(results, labels) if r[4]]
    if with_bias:
        plot_bias(plt, out("position_bias.png"), [b for b, _ in with_bias], [lb for _, lb in with_bias],
                  args.max_distance)
        figures.append("position_bias.png")
    for name in figures:
        print(f"wrote {out(name)}")


if __name__ == "__main__":
    main()
