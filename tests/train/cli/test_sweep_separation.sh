#!/usr/bin/env bash
# scripts/sweep_separation.py, the "Separations" section of a synthetic suite's results.md: a
# difference of means is separated when it exceeds twice the larger seed standard deviation and
# 0.01, with at least 2 seeds a side; each setting is compared with absolute positions alone at its
# own residual value, and with itself without residual attention; the counts say how many were.
source "$(dirname "$0")/../../lib.sh"
$PY - "$PWD/scripts" <<'PYEOF'
import sys
sys.path.insert(0, sys.argv[1])
import sweep_separation as sep

def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {detail}"))

s = sep.separation
check("0.10 apart at spreads 0.04 and 0.03 (2.5 sd): separated", s((0.70, 0.04, 3), (0.60, 0.03, 3))[2])
check("0.10 apart at a spread of 0.06 (1.7 sd): not separated", not s((0.70, 0.06, 3), (0.60, 0.01, 3))[2])
check("exactly 2 sd apart: not separated (strictly more)", not s((0.75, 0.125, 3), (0.5, 0.0, 3))[2])
check("0.005 apart, both without spread: under the 0.01 floor", not s((1.000, 0.0, 3), (0.995, 0.0, 3))[2])
check("one seed on a side: never separated", not s((0.9, 0.0, 1), (0.5, 0.0, 3))[2])
check("the difference is a minus b", abs(s((0.5, 0.0, 2), (0.8, 0.0, 2))[0] + 0.3) < 1e-12)
text, flag = sep.cell((0.685, 0.037, 3), (0.508, 0.003, 3))
check("a cell: the signed difference, its size in the larger sd, bold when separated",
      text == "**+0.177 (4.8 sd)**" and flag, text)

keys = ["model.residual_attention", "model.absolute_position", "model.relative_position", "model.relative_k"]
def stat(within, beyond, sd=0.01, n=3):
    return {"in_range_accuracy": (within, sd, n), "beyond_accuracy": (beyond, sd, n)}
stats = {
    ("no", "yes", "none", ""): stat(0.99, 0.50),
    ("yes", "yes", "none", ""): stat(0.95, 0.50),
    ("no", "no", "alibi", ""): stat(1.00, 0.70),
    ("yes", "no", "alibi", ""): stat(1.00, 0.72, sd=0.02),
    ("no", "no", "shaw", "2"): stat(0.80, 0.55, sd=0.2),
    ("yes", "no", "shaw", "2"): stat(0.60, 0.52, n=1),
    ("no", "no", "shaw", "8"): stat(0.90, 0.60),
    ("yes", "no", "shaw", "8"): stat(0.50, 0.40, n=0),
}
label = lambda st: " ".join(v for k, v in st.items() if v and v not in ("no", "yes"))
text = "\n".join(sep.separation_markdown(stats, "reverse", keys, label))
lines = text.splitlines()
row = lambda prefix: next((l for l in lines if l.startswith(prefix)), None)
check("alibi without residual is compared with absolute without residual",
      row("| alibi | no |") == "| alibi | no | +0.010 (1.0 sd) | **+0.200 (20.0 sd)** |", row("| alibi | no |"))
check("alibi with residual is compared with absolute with residual",
      row("| alibi | yes |") == "| alibi | yes | **+0.050 (2.5 sd)** | **+0.220 (11.0 sd)** |", row("| alibi | yes |"))
check("a seed spread of 0.2 separates nothing", row("| shaw 2 | no |") == "| shaw 2 | no | -0.190 (0.9 sd) | +0.050 (0.3 sd) |",
      row("| shaw 2 | no |"))
check("one seed on a side separates nothing, however far apart",
      row("| shaw 2 | yes |") == "| shaw 2 | yes | -0.350 (35.0 sd) | +0.020 (2.0 sd) |", row("| shaw 2 | yes |"))
residual = lines[lines.index("**reverse: residual attention, yes minus no**"):]
check("the residual table pairs each setting with itself without residual attention",
      "| alibi | +0.000 (0.0 sd) | +0.020 (1.0 sd) |" in residual and
      "| none | **-0.040 (4.0 sd)** | +0.000 (0.0 sd) |" in residual, "\n".join(residual))
check("a setting with no finished seed is left out and counted as waiting",
      row("| shaw 8 | yes") is None and not any(l.startswith("| shaw 8") for l in residual) and
      text.count("Not compared yet (a side has no finished seed): 1.") == 2, text)
check("the counts: 3 of 5 beyond the baseline, 1 of 3 residual pairs within",
      "Separated (bold): within the training lengths: 2 of 5; beyond them: 3 of 5." in text and
      "Separated (bold): within the training lengths: 1 of 3; beyond them: 0 of 3." in text, text)
check("no position key, no residual key: no section",
      sep.separation_markdown({("1",): stat(0.5, 0.5)}, "reverse", ["model.relative_k"], label) == [])
PYEOF
