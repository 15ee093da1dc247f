#!/usr/bin/python3
"""Does truncation at k stop a model from addressing what it cannot reach? Duplicate (docs/synthetic.md)
asks blank j of `x_1 .. x_n ?_1 .. ?_2n` for x_j: the first copy sits n positions after its source, so
a relative scheme clipped at k cannot tell the source from its neighbours by position alone once n > k.

Reads the suite's duplicate runs (DIR/task=duplicate,*/dev_predictions.tsv against DIR/data/
duplicate-test.txt, the file every run scored) and prints, for each k of the sweep, the first copy's
token accuracy over the training lengths split at n = k: Shaw and Method 4 clipped at k (both residual
values pooled, mean ± sd over runs), next to the k = 64 runs and absolute positions on the same two
ranges of n. A wall at k shows as a larger drop across n = k for the clipped runs than for the others.
usage: scripts/dev/duplicate_reach.py DIR [--max-n 40]"""
import argparse
import os
import statistics
from collections import defaultdict


def examples(path):
    """-> list of examples, each a list of (word, label) from a CoNLL-style file (blank line between)."""
    out, current = [], []
    if not os.path.isfile(path):
        raise SystemExit(f"duplicate_reach: {path}: no such file (expected the suite's run directory)")
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                if current:
                    out.append(current)
                current = []
                continue
            if len(fields) < 2:
                raise SystemExit(f"duplicate_reach: {path}:{number}: expected a word and a label")
            current.append((fields[0], fields[1]))
    if current:
        out.append(current)
    return out


def first_copy_counts(gold, predicted, where):
    """-> {n: [right, total]} over the first copy's blanks (the first n of the 2n `?`)."""
    if len(gold) != len(predicted):
        raise SystemExit(f"duplicate_reach: {where}: {len(predicted)} examples, the test file has {len(gold)}")
    counts = defaultdict(lambda: [0, 0])
    for number, (g, p) in enumerate(zip(gold, predicted), 1):
        if [w for w, _ in g] != [w for w, _ in p]:
            raise SystemExit(f"duplicate_reach: {where}: example {number} differs from the test file's words")
        blanks = [i for i, (word, _) in enumerate(g) if word == "?"]
        n = len(blanks) // 2
        for i in blanks[:n]:
            counts[n][0] += p[i][1] == g[i][1]
            counts[n][1] += 1
    return counts


def setting(run_name):
    """`task=duplicate,seed=1,...` -> e.g. "shaw k=8", "absolute", "abs+method4 k=16"."""
    kv = dict(item.split("=", 1) for item in run_name.split(","))
    scheme = kv["relative_position"]
    if scheme == "none":
        return "absolute"
    prefix = "abs+" if kv.get("absolute_position") == "yes" else ""
    return prefix + scheme + (f" k={kv['relative_k']}" if "relative_k" in kv else "")


def accuracy(counts, lo, hi):
    right = sum(counts[n][0] for n in range(lo, hi + 1) if n in counts)
    total = sum(counts[n][1] for n in range(lo, hi + 1) if n in counts)
    return right / total


def cell(values):
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--max-n", type=int, default=40, help="longest input of the training lengths")
    args = parser.parse_args()
    gold = examples(os.path.join(args.dir, "data", "duplicate-test.txt"))
    runs = defaultdict(list)
    for name in sorted(os.listdir(args.dir)):
        path = os.path.join(args.dir, name, "dev_predictions.tsv")
        if name.startswith("task=duplicate,") and os.path.exists(path):
            runs[setting(name)].append(first_copy_counts(gold, examples(path), path))
    if not runs:
        raise SystemExit(f"duplicate_reach: no duplicate runs with dev_predictions.tsv under {args.dir}")
    print(f"| k | runs | first copy, n ≤ k: clipped at k / k = 64 / absolute "
          f"| k < n ≤ {args.max_n}: clipped at k / k = 64 / absolute |")
    print("|---|---|---|---|")
    for k in (2, 4, 8, 16, 32):
        clipped = runs[f"shaw k={k}"] + runs[f"method4 k={k}"]
        wide = runs["shaw k=64"] + runs["method4 k=64"]
        if not clipped or not wide or not runs["absolute"]:
            continue
        near = [cell([accuracy(c, 1, k) for c in group]) for group in (clipped, wide, runs["absolute"])]
        far = [cell([accuracy(c, k + 1, args.max_n) for c in group]) for group in (clipped, wide, runs["absolute"])]
        print(f"| {k} | {len(clipped)} | {' / '.join(near)} | {' / '.join(far)} |")


if __name__ == "__main__":
    main()
