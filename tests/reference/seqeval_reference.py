"""Entity-level precision / recall / F1 of BIO (IOB2) tag sequences, as seqeval computes them by
default (seqeval.metrics.precision_score etc., mode=None: the conlleval chunking), written from
seqeval's documented behaviour, not its code, as the oracle of realpos's tagging metric
(train/tasks/tag_metrics.c).

An entity is a maximal run of words of one type: it begins at B-X, or at I-X when the word before
is O, is the start of the sequence, or has another type (conlleval's lenient rule: an I- after O
starts an entity); it continues over I-X of the same type; every other tag ends it. Predicted and
gold entities match when type, first and last word agree. Scores are micro-averaged over all
entities of all sequences; a zero denominator gives 0.

  python3 seqeval_reference.py --random SEED --count N OUT   # random sequences in the C test's format
  python3 seqeval_reference.py --score FILE                  # "right predicted gold" of such a file
File format: first line the label set; then per sequence "gold tags | predicted tags".
"""
import random
import sys


def spans(tags):
    """Set of (type, first, last) entities of one sequence of tags."""
    found = set()
    current = None  # [type, first]
    for i, tag in enumerate(list(tags) + ["O"]):
        kind, _, name = tag.partition("-")
        continues = kind == "I" and current is not None and current[0] == name
        if current is not None and not continues:
            found.add((current[0], current[1], i - 1))
            current = None
        if kind == "B" or (kind == "I" and not continues):
            current = [name, i]
    return found


def score(pairs):
    right = predicted = gold = 0
    for g, p in pairs:
        gs, ps = spans(g), spans(p)
        right += len(gs & ps)
        predicted += len(ps)
        gold += len(gs)
    return right, predicted, gold


def prf(right, predicted, gold):
    p = right / predicted if predicted else 0.0
    r = right / gold if gold else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def read(path):
    with open(path) as f:
        lines = f.read().splitlines()
    pairs = []
    for line in lines[1:]:
        g, p = line.split("|")
        pairs.append((g.split(), p.split()))
    return pairs


def main():
    if sys.argv[1] == "--random":
        rng = random.Random(int(sys.argv[2]))
        count, out = int(sys.argv[4]), sys.argv[5]
        labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
        with open(out, "w") as f:
            f.write(" ".join(labels) + "\n")
            for _ in range(count):
                n = rng.randint(1, 12)
                g = [rng.choice(labels) for _ in range(n)]
                p = [t if rng.random() < 0.6 else rng.choice(labels) for t in g]
                f.write(" ".join(g) + " | " + " ".join(p) + "\n")
    else:
        print(*score(read(sys.argv[2])))


if __name__ == "__main__":
    main()
