"""Independent SQuAD v1.1 scoring for tests/train/tasks/test_finetune.sh: the official evaluate-v1.1.py
definitions (normalisation, exact match, token F1 with multiset overlap, max over gold answers,
mean x 100) re-stated with the Python standard library. Usage: DATA.json PREDICTIONS.json"""
import collections
import json
import re
import string
import sys


def normalize(text):
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def f1(prediction, gold):
    p, g = normalize(prediction).split(), normalize(gold).split()
    common = sum((collections.Counter(p) & collections.Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def main():
    data = json.load(open(sys.argv[1], encoding="utf-8"))["data"]
    predictions = json.load(open(sys.argv[2], encoding="utf-8"))
    total = em = f1_sum = 0
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                golds = [a["text"] for a in qa["answers"]]
                pred = predictions.get(qa["id"], "")
                em += max(float(normalize(pred) == normalize(g)) for g in golds)
                f1_sum += max(f1(pred, g) for g in golds)
    print("exact match %.2f, F1 %.2f over %d questions" % (100 * em / total, 100 * f1_sum / total, total))


main()
