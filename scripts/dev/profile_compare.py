#!/usr/bin/python3
"""Two or more profiles of scripts/dev/profile_step.sh side by side: each part of the step's share of
CPU samples in each run (its OUT_DIR/parts.txt) and, from the bench's CPU seconds a step (its
OUT_DIR/bench.txt), the part's CPU milliseconds a step; the parts in the first run's order, parts
missing from a run shown as 0. For a before/after table (docs/bench-peer.md).

Usage: scripts/dev/profile_compare.py LABEL=OUT_DIR LABEL=OUT_DIR [...]"""
import os
import re
import sys


def parts(path):
    shares = {}
    with open(path) as f:
        for line in f:
            match = re.match(r"^(\S.*?)\s+(\d+\.\d)%$", line.rstrip("\n"))
            if match:
                shares[match.group(1)] = float(match.group(2))
    if not shares:
        sys.exit(f"profile_compare: {path}: no 'part  NN.N%' lines (a profile_step.sh parts.txt?)")
    return shares


def cpu_seconds(path):
    with open(path) as f:
        match = re.search(r"CPU (\d+\.\d+) s", f.read())
    if not match:
        sys.exit(f"profile_compare: {path}: no 'CPU N s' (realpos bench's report)")
    return float(match.group(1))


def main():
    runs = []
    for arg in sys.argv[1:]:
        label, sep, out = arg.partition("=")
        if not sep or not label or not out:
            sys.exit(__doc__.split("\n\n")[-1])
        runs.append((label, parts(os.path.join(out, "parts.txt")), cpu_seconds(os.path.join(out, "bench.txt"))))
    if len(runs) < 2:
        sys.exit(__doc__.split("\n\n")[-1])
    order = list(runs[0][1]) + [p for _, shares, _ in runs[1:] for p in shares if p not in runs[0][1]]
    order = list(dict.fromkeys(order))
    print("| part of the step | " + " | ".join(f"{label} (CPU {cpu * 1e3:.0f} ms a step)" for label, _, cpu in runs) +
          " |")
    print("|---|" + "---|" * len(runs))
    for part in order:
        print(f"| {part} | " + " | ".join(f"{shares.get(part, 0.0):.1f}% ({shares.get(part, 0.0) * cpu * 10:.1f} ms)"
                                        for _, shares, cpu in runs) + " |")


if __name__ == "__main__":
    main()
