#!/usr/bin/python3
"""Does a model solve MQAR with an induction circuit? Reads `realpos attention` maps of MQAR
examples (one per line of LINES, as `realpos synth mqar` writes their words: n pairs `kK vV`, then
the n keys again) and prints, per model and head:

  layer 0  left   mean attention of each value v_t (not the last pair's) to its own key, one
                  position to its left: a previous-token head puts ~1 here
           right  the same to the next pair's key, one position to its right: the mirror image,
                  which an encoder that cannot tell left from right weights like `left`
  last     match  mean attention of each query to the value that followed its key in the pairs:
                  the lookup that reads the answer (~1 in a solved model)

Each word must be one token ([CLS] w_1 .. w_N [SEP]), as in a vocabulary built from the task's
files (docs/synthetic.md); a sentence whose length says otherwise is an error.
usage: scripts/dev/mqar_circuit.py LINES.txt ATTN.h5 [ATTN.h5 ...] [--labels a,b,...]"""
import argparse
import sys

import h5py
import numpy as np


def circuit(words_per_line, probs_first, probs_last, lengths):
    """-> (left [heads], right [heads], match [heads]) averaged over the examples' positions."""
    left, right, match = [], [], []
    for b, words in enumerate(words_per_line):
        if lengths[b] != len(words) + 2:
            raise SystemExit(f"mqar_circuit: sentence {b + 1} has {len(words)} words but {lengths[b]} tokens: "
                             "a word is not one token")
        n = len(words) // 3
        token = lambda w: w + 1  # noqa: E731 ([CLS] first)
        key_at = {words[2 * p]: 2 * p for p in range(n)}
        for p in range(n - 1):  # the last pair's value has [SEP]-side neighbours of another kind
            v = token(2 * p + 1)
            left.append(probs_first[b, :, v, v - 1])
            right.append(probs_first[b, :, v, v + 1])
        for q in range(2 * n, 3 * n):
            if words[q] not in key_at:
                raise SystemExit(f"mqar_circuit: sentence {b + 1}: query {words[q]} is not among its keys")
            match.append(probs_last[b, :, token(q), token(key_at[words[q]] + 1)])
    return np.mean(left, axis=0), np.mean(right, axis=0), np.mean(match, axis=0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lines")
    ap.add_argument("maps", nargs="+")
    ap.add_argument("--labels")
    args = ap.parse_args()
    try:
        words = [line.split() for line in open(args.lines) if line.strip()]
    except OSError as e:
        raise SystemExit(f"mqar_circuit: cannot read {args.lines}: {e.strerror}")
    if any(len(w) % 3 for w in words):
        raise SystemExit(f"mqar_circuit: {args.lines}: every line must hold n pairs and n queries (3n words)")
    labels = args.labels.split(",") if args.labels else args.maps
    if len(labels) != len(args.maps):
        raise SystemExit("mqar_circuit: --labels must name every map")
    print("model | head | layer 0 left | layer 0 right | last layer match")
    for label, path in zip(labels, args.maps):
        try:
            f = h5py.File(path, "r")
        except OSError as e:
            raise SystemExit(f"mqar_circuit: cannot open {path} as HDF5 (realpos attention's output): {e}")
        with f:
            layers = sorted(int(k.split("_")[1]) for k in f if k.startswith("layer_"))
            if not layers or "lengths" not in f:
                raise SystemExit(f"mqar_circuit: {path} has no layer_N/probs or lengths: "
                                 "not realpos attention's output")
            if len(f["lengths"]) != len(words):
                raise SystemExit(f"mqar_circuit: {path} holds {len(f['lengths'])} sentences, {args.lines} {len(words)}")
            left, right, match = circuit(words, f[f"layer_{layers[0]}/probs"][:], f[f"layer_{layers[-1]}/probs"][:],
                                         f["lengths"][:])
        for h in range(len(left)):
            print(f"{label} | {h} | {left[h]:.2f} | {right[h]:.2f} | {match[h]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
