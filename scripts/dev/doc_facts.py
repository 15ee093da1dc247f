#!/usr/bin/python3
"""Which facts of an old document are missing from a new set of documents: a diff of the facts,
not of the words, for moving prose between files (issue 52: the README into docs/).

usage: /usr/bin/python3 scripts/dev/doc_facts.py OLD.md NEW.md... [--ignore FILE]

A fact is a token a reader relies on: every `code span`, every number (with its unit or sign:
6.065, 12.5%, 1.70x, +5.6%, 2026-12-01), every link target, and every emphasised **phrase**.
Each is looked for in the new documents (whitespace normalised; a number as a whole token); the
missing ones are printed with the old line they came from, grouped by the old section. Lines of
--ignore FILE name facts deliberately dropped (one per line, '# why' allowed after two spaces).
Exit status 1 if any fact is missing.
"""
import argparse
import re
import sys

CODE = re.compile(r"`([^`]+)`")
NUMBER = re.compile(r"(?<![\w.])[-+−]?\d[\d,.]*(?:%|x|×| ?[MGK]B| ?GFLOP/s| ?ms| ?s\b| ?min(?:utes)?)?(?![\w])")
LINK = re.compile(r"\]\(([^)]+)\)")
BOLD = re.compile(r"\*\*([^*]+)\*\*")


def norm(text):
    return re.sub(r"\s+", " ", text)


def facts_of(text):
    """[(section, line, kind, fact)] of a Markdown text, code blocks included (their commands)."""
    out, section = [], ""
    for n, line in enumerate(text.split("\n"), 1):
        if line.startswith("#"):
            section = line.strip("# ")
        for m in CODE.finditer(line):
            out.append((section, n, "code", m.group(1)))
        stripped = CODE.sub("", line)
        for m in NUMBER.finditer(stripped):
            tok = m.group(0).rstrip(".,")
            if tok and tok not in ("1", "2", "0"):
                out.append((section, n, "number", tok))
        for m in LINK.finditer(line):
            out.append((section, n, "link", m.group(1)))
        for m in BOLD.finditer(line):
            out.append((section, n, "bold", m.group(1).rstrip(".:")))
    return out


def link_target(t):
    """A link as a file name and anchor, whatever folder the new document links from."""
    return t.split("/")[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new", nargs="+")
    ap.add_argument("--ignore")
    a = ap.parse_args()
    new = norm("\n".join(open(p, encoding="utf-8").read() for p in a.new))
    # Code spans of the old text may be wrapped across lines: compare them whitespace-normalised,
    # and also against the new text's code spans and fenced lines.
    ignored = set()
    if a.ignore:
        for line in open(a.ignore, encoding="utf-8"):
            line = line.split("  #")[0].strip()
            if line:
                ignored.add(line)
    missing, seen = [], set()
    old = open(a.old, encoding="utf-8").read()
    for section, n, kind, fact in facts_of(old):
        key = (kind, norm(fact))
        if key in seen or norm(fact) in ignored:
            continue
        seen.add(key)
        f = norm(fact)
        if kind == "number":
            found = re.search(r"(?<![\w.])" + re.escape(f) + r"(?![\w])", new) is not None
        elif kind == "link":
            found = link_target(f) in new
        else:
            found = f in new
        if not found:
            missing.append((section, n, kind, fact))
    last = None
    for section, n, kind, fact in missing:
        if section != last:
            print("## " + section)
            last = section
        print("  %s:%d %s: %s" % (a.old, n, kind, fact))
    total = len(seen)
    print("%d facts, %d missing" % (total, len(missing)))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
