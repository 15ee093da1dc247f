"""Which differences between the settings of a synthetic suite lie outside the seeds' spread
(the section "Separations" of results.md, written by sweep_report_synth.py).

Two comparisons per task, each on the accuracy within the training lengths and beyond them:

  against the baseline   every setting minus absolute positions alone (relative_position = none)
                         at the same residual-attention value;
  residual attention     every setting with residual attention minus itself without.

A difference Δ = mean_a − mean_b is called separated when, with at least 2 seeds on each side,

  |Δ| > 2 · max(s_a, s_b)  and  |Δ| ≥ 0.01,

s the standard deviation over seeds of each side: the two settings differ by more than twice the
seed-to-seed spread of either (the floor keeps two deterministic outcomes, both ± 0.000, from being
called apart by a thousandth). With 3 seeds a standard deviation is itself rough (its 95% interval
spans about 0.5 to 6 times the estimate), so the flag screens the table for the reading; it is not a
significance test.
"""

MARGIN_SD = 2.0
MIN_DELTA = 0.01
MEASURES = [("in_range_accuracy", "within the training lengths"), ("beyond_accuracy", "beyond them")]
POSITION_KEY = "model.relative_position"


def separation(a, b):
    """a, b: (mean, std, n) over seeds. Returns (Δ = a − b, the larger std, separated?)."""
    (mean_a, sd_a, n_a), (mean_b, sd_b, n_b) = a, b
    delta = mean_a - mean_b
    spread = max(sd_a, sd_b)
    separated = n_a >= 2 and n_b >= 2 and abs(delta) >= MIN_DELTA and abs(delta) > MARGIN_SD * spread
    return delta, spread, separated


def cell(a, b):
    """'+0.177 (4.8 sd)', bold when separated; '—' when either side has no finished seed."""
    if not a or not b or a[2] == 0 or b[2] == 0:
        return "—", None
    delta, spread, separated = separation(a, b)
    ratio = f"{abs(delta) / spread:.1f} sd" if spread > 0 else "sd 0"
    text = f"{delta:+.3f} ({ratio})"
    return (f"**{text}**" if separated else text), separated


def _table(title, header, rows):
    """rows: [(label cells, [(a, b) per measure])] -> markdown lines and a count per measure."""
    lines = [title, "", "| " + " | ".join(header + [h for _, h in MEASURES]) + " |",
             "|" + "---|" * (len(header) + len(MEASURES))]
    counts = [[0, 0] for _ in MEASURES]
    waiting = 0
    for labels, pairs in rows:
        cells = [cell(a, b) for a, b in pairs]
        if all(separated is None for _, separated in cells):
            waiting += 1  # a side has no finished seed yet
            continue
        for i, (_, separated) in enumerate(cells):
            if separated is not None:
                counts[i][1] += 1
                counts[i][0] += separated
        lines.append("| " + " | ".join(labels + [text for text, _ in cells]) + " |")
    summary = "; ".join(f"{h}: {k} of {n}" for (_, h), (k, n) in zip(MEASURES, counts))
    pending = f" Not compared yet (a side has no finished seed): {waiting}." if waiting else ""
    return lines + ["", f"Separated (bold): {summary}.{pending}", ""], counts


def separation_markdown(stats, task, setting_keys, label):
    """stats: {settings tuple (in setting_keys order): {measure: (mean, std, n)}} of one task;
    label(settings dict) names a setting. Returns the markdown lines of both comparisons."""
    residual = next((k for k in setting_keys if "residual" in k), None)
    settings_of = {group: dict(zip(setting_keys, group)) for group in stats}

    def same_but(settings, **changes):
        wanted = dict(settings, **changes)
        return next((g for g, s in settings_of.items() if s == wanted), None)

    lines = []
    if POSITION_KEY in setting_keys:
        baselines = {s.get(residual): g for g, s in settings_of.items() if s[POSITION_KEY] == "none"}
        rows = []
        for group, settings in settings_of.items():
            base = baselines.get(settings.get(residual))
            if base is None or group == base:
                continue
            rows.append(([label(settings)] + ([settings[residual]] if residual else []),
                         [(stats[group].get(m), stats[base].get(m)) for m, _ in MEASURES]))
        if rows:
            header = ["setting"] + (["residual"] if residual else [])
            lines += _table(f"**{task}: each setting minus absolute positions alone** "
                            "(relative_position = none, same residual value)", header, rows)[0]
    if residual:
        rows = []
        for group, settings in settings_of.items():
            if settings[residual] != "yes":
                continue
            without = same_but(settings, **{residual: "no"})
            if without is not None:
                rows.append(([label(settings)], [(stats[group].get(m), stats[without].get(m)) for m, _ in MEASURES]))
        if rows:
            lines += _table(f"**{task}: residual attention, yes minus no**", ["setting"], rows)[0]
    return lines


HEADER = ["## Separations", "",
          "Differences of means over seeds; in brackets |Δ| in units of the larger of the two standard "
          "deviations. Bold: separated, |Δ| > 2 · max(s_a, s_b) and |Δ| ≥ 0.01 with at least 2 seeds "
          "each (scripts/sweep_separation.py; with 3 seeds a screen, not a significance test).", ""]
