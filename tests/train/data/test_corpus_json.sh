#!/usr/bin/env bash
# The JSON reader (core/io/json.h) against Python's json.loads: 20000 records mutated from valid ones
# (fixed seed) get the same verdict (repeated keys, which realpos refuses, found by
# object_pairs_hook; NaN and Infinity, Python extensions outside RFC 8259, are never generated)
# and, when valid, the same text of member "t" (lone surrogates as U+FFFD). Uses
# build/tests/train/data/test_corpus_json --records.
source "$(dirname "$0")/../../lib.sh"
CHECKER="$PWD/build/tests/train/data/test_corpus_json"
[ -x "$CHECKER" ] || { fail "checker" "$CHECKER missing (make)"; exit 1; }
"$PY" - "$CHECKER" <<'PY'
import json, random, subprocess, sys
random.seed(29)
seeds = ['{"t": "abc"}', '{"t": "a\\u0000b", "x": [1, 2.5e3, -0, true, null]}', '{"t": "\\ud83d\\ude00\\ud800"}',
         '{"a": {"b": [{"c": "d"}]}, "t": "x\\ny"}', '[1, "2", {"3": 4}]', '"\\u00e9\\/\\"\\\\"',
         '{"t":"\\udc00\\ud800\\udbff"}', '{"t": "x", "u": {"t": 1}}', '  {  "t"  :  "\\t"  }  ', '-12.5E+7',
         '{"t":"\xe9 raw"}', '{"t": "a", "t": "b"}', '{"t": "x"}{"t": "y"}']
pieces = list('{}[]",:\\u0123456789abcdefABCDEFtrunlsxe.-+ \t\n\r') + ['\\u', '\\ud800', '\\udc00', '"t"', '\x00', '\x1f', '\xe9']
cases = []
for _ in range(20000):
    s = random.choice(seeds)
    for _ in range(random.randint(1, 4)):
        op, i = random.random(), random.randint(0, len(s))
        if op < 0.4: s = s[:i] + random.choice(pieces) + s[i:]
        elif op < 0.7: s = s[:i] + s[i + 1:]
        else: j = random.randint(0, len(s)); s = s[:i] + s[j:i + 3] + s[i:]
    cases.append(s)
out = subprocess.run([sys.argv[1], "--records"], input="\x01".join(cases).encode(), capture_output=True).stdout.decode().split("\n")
verdict = text = valid = 0
for case, line in zip(cases, out):
    repeated = []
    def pairs(items):
        keys = [k for k, _ in items]
        repeated.append(len(set(keys)) != len(keys))
        return dict(items)
    try:
        value = json.loads(case, object_pairs_hook=pairs); ok = not any(repeated)
    except (ValueError, RecursionError):
        ok, value = False, None
    got = line.split(" ")
    valid += ok
    if got[0] != str(int(ok)):
        verdict += 1
        if verdict <= 5: print(f"  verdict differs on {case!r}: json.loads {ok}, realpos {got[0]}")
    elif ok and isinstance(value, dict) and isinstance(value.get("t"), str):
        want = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value["t"]).encode()
        if len(got) < 2 or bytes.fromhex(got[1]) != want:
            text += 1
            if text <= 5: print(f"  text differs on {case!r}: {want!r} vs {got[1:]}")
n = len(cases)
print(("PASS" if len(out) == n + 1 and verdict == 0 else "FAIL") +
      f" json_check's verdict is json.loads's on {n - verdict} of {n} mutated records ({valid} valid)")
print(("PASS" if len(out) == n + 1 and text == 0 else "FAIL") +
      f" the text member decodes as json.loads's (lone surrogates U+FFFD) on every valid record ({text} differ)")
PY
