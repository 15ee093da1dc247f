#!/usr/bin/python3
"""Summarise an interleaved `make bench` run (scripts/dev/bench.sh): OUT/rows.tsv lists the rows, and
OUT/runs/NAME.ENGINE.rROUND.json holds one run of one engine (realpos bench --json, bench_peer.py
--json); NAME.torch-VARIANT.rROUND.json a peer run one of several ways in that round (bench.sh: PyTorch
at its default CPU capability and at AVX-512's), the round's peer being the fastest of them. Prints,
per row, medians over the rounds with their spread [min-max]:
  - tokens/s of realpos and of PyTorch, and their ratio taken round by round (paired: both ran
    back to back), plus the same ratio from CPU seconds per step (less sensitive to steal time);
  - GFLOP/s and its fraction of the sgemm peak, the best probe of the whole bench at the row's
    thread count (a one-thread row's fraction is of one core's peak); a row that ran
    faster than every probe (the probes met busier moments of a shared host) prints its real
    fraction, above 100%, flagged with "!";
  - the fine-tuning rows' (realpos bench --lengths-from) real tokens/s: non-padding tokens, next to
    the computed tokens/s (B x padded length) of the "realpos tok/s (B x L)" column;
  - time overhead against the row named in rows.tsv: seconds per real token of the row over those
    of that one, minus 1 (that one's real tokens/s over the row's), paired by round, the same
    measure as "paired overhead" (a row 3.3x as fast reads -70%, a row twice as slow +100%); and
    the same from CPU seconds per real token; for rows of the same batches (every synthetic row, or
    fine-tuning rows on the same data and padding) that is the time per step;
  - FLOP overhead against that row, next to the time overhead: FLOPs per real token of the row over
    those of the other, minus 1, each counted as model_flops_per_step (train/model/model_forward.c)
    plus the relative terms' GEMMs as the kernels run them (flops_per_step below), summed over the
    timed batches' padded lengths;
  - "local % peak": the fraction of peak at each step's own moment: the peak probe's speed the host
    gave then (bench probes right after every step, outside the timings; sgemm for fp32 rows, the
    bf16 products' probe for bf16 rows) times the step's seconds is the work the host could have
    done meanwhile, and the row's FLOPs are taken over that.
    Load slows a probe and the step next to it alike, so this holds where the best-probe fraction
    swings by tens of percent; as an overhead between rows run minutes apart it does not (a
    probe and a step meet a busy host differently: +18.8% where the paired figure was +3.1%),
    so overheads come from the pairs;
  - "paired overhead": the rows with an overhead row ran `realpos bench --against` that row's
    config, the two stepping alternately in one process; per run the median over step pairs of
    (seconds per real token of the row / of the other) - 1, then its median over the rounds;
  - peak RSS (of the process: a row timed `--against` another holds both sides' memory, marked
    "(pair)"; peak memory comparisons need each configuration alone, `realpos bench` without it).
Writes OUT/results.json with the same numbers and the host (CPU model, OpenBLAS kernels,
OPENBLAS_CORETYPE). Usage: bench_table.py OUT"""
import collections
import glob
import json
import os
import re
import statistics
import sys


def load_model_config(path):
    """The [model] section of a `realpos config` dump, as a dict of strings."""
    model, section = {}, None
    for line in open(path):
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "model" and "=" in line and not line.startswith(";"):
            key, value = (x.strip() for x in line.split("=", 1))
            model[key] = value
    return model


def relative_gemm_work(L, m, T):
    """Multiply-adds / d of one relative term's QA (or KA) GEMMs per (b,h): layers/pos_shaw.c
    reach_work with its block choice (blocks of T rows, or one block when they save < 10%)."""
    def reach(T):
        work = 0
        for i0 in range(0, L, T):
            nb = min(T, L - i0)
            lo, hi = max(0, i0 - (L - 1) + m), min(2 * m, i0 + nb - 1 + m)
            work += nb * (hi - lo + 1)
        return work
    full = L * (2 * m + 1)
    return reach(T) if 10 * reach(T) <= 9 * full else full


def method3_region_work(L, k, T):
    """Multiply-adds / d of method3's clipped-region GEMMs per (b,h): (Q (.) a_row) . K^T over the
    keys j >= i+k (rows i < L-k) and j <= i-k (rows i >= k), in blocks of T query rows, each
    spanning the key columns of its last (right: first) row (layers/pos_method3.c region_block)."""
    work = 0
    if k < L:
        for i0 in range(0, L - k, T):
            work += min(T, L - k - i0) * (L - i0 - k)
        for i0 in range(k, L, T):
            nb = min(T, L - i0)
            work += nb * (i0 + nb - k)
    return work


def flops_per_step(model, B, L, M):
    """(model_flops_per_step, that + the relative terms' GEMM FLOPs (shaw: q.a_r; method4: q.a_r
    and k.a_r; method3: the clipped regions' GEMMs instead of q_i.k_j's, its band |i-j| < k
    being no GEMM), forward (one GEMM per term) and backward (two), per (b,h) and layer;
    tests/train/cli/test_gemm_ceiling.sh checks them against the GEMMs a step runs)."""
    H, I, V = int(model["hidden_size"]), int(model["intermediate_size"]), int(model["vocab_size"])
    layers, heads, N = int(model["num_layers"]), int(model["num_heads"]), B * L
    per_layer = 2.0 * N * (4.0 * H * H + 2.0 * H * I) + 2.0 * 2.0 * N * L * H
    total = model_flops = 3.0 * (layers * per_layer + 2.0 * M * (H * H + H * V))
    terms = {"shaw": 1, "method4": 2}.get(model.get("relative_position", "none"), 0)
    if terms:
        k, d = int(model["relative_k"]), H // heads
        m, T = min(k, L - 1), min(64, max(32, L // 4))
        total += layers * B * heads * terms * 3 * 2.0 * relative_gemm_work(L, m, T) * d
    if model.get("relative_position") == "method3":  # its regions replace the GEMMs of q_i.k_j
        k, d, T = int(model["relative_k"]), H // heads, min(64, max(32, L // 4))
        total += layers * B * heads * 3 * 2.0 * (method3_region_work(L, k, T) - L * L) * d
    return model_flops, total


def run_flops(model, run, B, L):
    """(model FLOPs, all FLOPs) per real token of a realpos run: flops_per_step of each timed
    batch's padded length (batch_lengths), over the real tokens those batches held."""
    steps = run.get("steps", 1)
    lengths = run.get("batch_lengths", [L] * steps)
    real = run.get("real_tokens", B * L * steps)
    per_batch = [flops_per_step(model, B, length, run["labelled"]) for length in lengths]
    return sum(f[0] for f in per_batch) / real, sum(f[1] for f in per_batch) / real


def real_rate(run):
    """Real (non-padding) tokens/s of a run; JSON from before bench counted them: all tokens."""
    return run.get("real_tokens_per_s", run["tokens_per_s"])


def cpu_per_real_token(run):
    """CPU seconds per real token; per step for JSON from before bench counted them (a synthetic
    row, whose steps all hold B x L tokens)."""
    if "real_tokens" not in run:
        return run["cpu_seconds_per_step"]
    return run["cpu_seconds_per_step"] * run["steps"] / run["real_tokens"]


def real_tokens(run):
    """Real tokens of a run's timed steps (every token of a synthetic row)."""
    return run.get("real_tokens", run["batch_size"] * run["seq_len"] * run["steps"])


def local_peak_work(run):
    """GFLOP the peak probe's speed at each timed step's moment would have done in the step's
    seconds, summed over the steps: bench probes after every step, so step k sits between probes
    k and k+1 (probe 0 comes before the warm-up; the first step takes the probe after it only).
    The probes of the run's own precision: sgemm for fp32, the bf16 products' for bf16 (an fp32
    probe under a bf16 step read 190%). None for JSON without per-step probes."""
    key = "bf16_probes_gflops" if run.get("precision") == "bf16" else "sgemm_probes_gflops"
    t, p = run.get("step_seconds"), run.get(key)
    if not t or not p or len(p) < len(t) + 1:
        return None
    return sum(s * (p[k + 1] if k == 0 else 0.5 * (p[k] + p[k + 1])) for k, s in enumerate(t))


def load_runs(out):
    """(name, engine) -> {round: result}. A peer run several ways in a round (NAME.torch-VARIANT.rN.json:
    bench.sh runs PyTorch at its default CPU capability and at AVX-512's) is that round's fastest run
    (real tokens/s), its variant in peer_variant: the peer at its best setting, round by round."""
    runs = {}
    for path in glob.glob(os.path.join(out, "runs", "*.json")):
        m = re.fullmatch(r"(.+)\.(realpos|torch)(?:-([A-Za-z0-9]+))?\.r(\d+)\.json", os.path.basename(path))
        if not m or (m.group(2) == "realpos" and m.group(3)):
            continue
        with open(path) as f:
            run = json.load(f)
        if m.group(3):
            run["peer_variant"] = m.group(3)
        rounds = runs.setdefault((m.group(1), m.group(2)), {})
        rnd = int(m.group(4))
        if rnd not in rounds or real_rate(run) > real_rate(rounds[rnd]):
            rounds[rnd] = run
    return runs


def counts(values):
    """'A x2, B x1' of the values that are not None, most frequent first, ties in name order (None when
    there are none)."""
    tally = collections.Counter(v for v in values if v is not None)
    return ", ".join(f"{v} x{n}" for v, n in sorted(tally.items(), key=lambda vn: (-vn[1], vn[0]))) or None


def spread(values):
    """{median, min, max, n} of a list (None when empty)."""
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def paired(a, b, f):
    """f(a[r], b[r]) over the rounds both engines ran."""
    return [f(a[r], b[r]) for r in sorted(a) if r in b]


def fmt(s, pattern, scale=1.0):
    if s is None:
        return "-"
    return (pattern % (s["median"] * scale)) + " [" + (pattern % (s["min"] * scale)).strip() + ".." + \
        (pattern % (s["max"] * scale)).strip() + "]"


def summarise(out):
    rows = [(line.rstrip("\n").split("\t") + [""] * 7)[:7]
            for line in open(os.path.join(out, "rows.tsv")) if line.strip()]
    runs = load_runs(out)
    flops, models = {}, {}
    for name, _torch, _against, batch, seq, _overrides, _lengths_from in rows:
        path = os.path.join(out, "runs", name + ".config.ini")
        some = next(iter(runs.get((name, "realpos"), {}).values()), None)
        if os.path.exists(path) and some:
            models[name] = load_model_config(path)
            flops[name] = run_flops(models[name], some, int(batch), int(seq))
    # the sgemm peak per thread count: a one-thread row (the tagger's) is a fraction of what one
    # core's probes reached, not of the two-thread rows' probes
    probes_by_threads = {}
    for (_, engine), rs in runs.items():
        if engine != "realpos":
            continue
        for r in rs.values():
            probes_by_threads.setdefault(r.get("threads"), []).extend(
                r.get("sgemm_probes_gflops", [r["sgemm_peak_gflops"]]))
    peaks = {t: max(ps) for t, ps in probes_by_threads.items() if ps}
    probes = [p for ps in probes_by_threads.values() for p in ps]
    peak = max(probes) if probes else 0.0
    bf16_probes = [p for (_, engine), rs in runs.items() if engine == "realpos" for r in rs.values()
                   for p in (r.get("bf16_probes_gflops") or []) if p]
    bf16_peak = max(bf16_probes) if bf16_probes else 0.0
    results = []
    for name, _torch, against, batch, seq, overrides, lengths_from in rows:
        rp, pt = runs.get((name, "realpos"), {}), runs.get((name, "torch"), {})
        ref = runs.get((against, "realpos"), {}) if against else {}
        local = {r: work for r, run in rp.items() if (work := local_peak_work(run))}
        local_frac = [run_flops(models[name], rp[r], int(batch), int(seq))[1] * real_tokens(rp[r]) * 1e-9 / w
                      for r, w in local.items()] if name in models else []
        gflops = spread([r["gflops"] for r in rp.values()])
        bf16 = any(r.get("precision") == "bf16" for r in rp.values())
        threads = next((r.get("threads") for r in rp.values()), None)
        row_peak = bf16_peak if bf16 else peaks.get(threads, 0.0)  # a bf16 row: % of the bf16 product peak
        frac = None
        if gflops and row_peak > 0:
            frac = {k: v / row_peak if k != "n" else v for k, v in gflops.items()}
        results.append({
            "name": name, "batch_size": int(batch), "seq_len": int(seq), "overrides": overrides,
            "precision": "bf16" if bf16 else "fp32",
            "realpos_tokens_per_s": spread([r["tokens_per_s"] for r in rp.values()]),
            "torch_tokens_per_s": spread([r["tokens_per_s"] for r in pt.values()]),
            "speed_ratio": spread(paired(rp, pt, lambda a, b: a["tokens_per_s"] / b["tokens_per_s"])),
            "cpu_time_ratio": spread(paired(rp, pt, lambda a, b: b.get("cpu_seconds_per_step", 0) /
                                            a["cpu_seconds_per_step"])),
            "gflops": gflops, "peak_fraction": frac,
            "overhead_vs": against or None,
            "overhead": spread(paired(rp, ref, lambda a, b: real_rate(b) / real_rate(a) - 1)),
            "cpu_overhead": spread(paired(rp, ref, lambda a, b: cpu_per_real_token(a) / cpu_per_real_token(b) - 1)),
            "flop_overhead": flops[name][1] / flops[against][1] - 1
            if against and name in flops and against in flops else None,
            "peak_fraction_all_flops": None if not frac or name not in flops else
            {k: v * flops[name][1] / flops[name][0] if k != "n" else v for k, v in frac.items()},
            "local_peak_fraction": spread(local_frac),
            "paired_overhead": spread([r["paired"]["ratio_median"] - 1 for r in rp.values() if r.get("paired")]),
            "lengths_from": lengths_from or None,
            "real_tokens_per_s": spread([real_rate(r) for r in rp.values()]) if lengths_from else None,
            "realpos_rss_mb": spread([r["peak_rss_mb"] for r in rp.values()]),
            "realpos_rss_paired": any(r.get("paired") for r in rp.values()),
            "torch_rss_mb": spread([r["peak_rss_mb"] for r in pt.values()]),
            "torch_variants": counts([r.get("peer_variant") for r in pt.values()]),
        })
    some = next((r for (_, e), rs in runs.items() if e == "realpos" for r in rs.values()), {})
    some_torch = next((r for (_, e), rs in runs.items() if e == "torch" for r in rs.values()), {})
    host = {"cpu_model": some.get("cpu_model"),
            "threads": sorted({r.get("threads") for (_, e), rs in runs.items() if e == "realpos"
                               for r in rs.values()}, key=lambda t: (t is None, t)),
            "sgemm_peaks_by_threads": {str(t): p for t, p in sorted(peaks.items(), key=lambda kv: (kv[0] is None, kv[0]))},
            "realpos_openblas_corename": some.get("openblas_corename"),
            "torch_openblas_corename": some_torch.get("openblas_corename"),
            "torch_cpu_capability": counts([r.get("torch_cpu_capability") for (_, e), rs in runs.items()
                                            if e == "torch" for r in rs.values()]),
            "openblas_coretype_env": some.get("openblas_coretype_env"),
            "sgemm_peak_gflops": peak, "sgemm_probes": spread(probes),
            "bf16_peak_gflops": bf16_peak, "bf16_probes": spread(bf16_probes), "bf16": some.get("bf16"),
            "rounds": max((len(rs) for rs in runs.values()), default=0)}
    return host, results


def cpu_vector_isa():
    """The widest x86 vector extension /proc/cpuinfo lists (None if not x86 / unreadable)."""
    try:
        flags = next((line.split(":", 1)[1].split() for line in open("/proc/cpuinfo")
                      if line.startswith("flags")), [])
    except OSError:
        return None
    return next((isa for isa in ("avx512f", "avx2", "avx") if isa in flags), None)


def cpu_bf16_flags():
    """The bf16 instruction flags /proc/cpuinfo lists (avx512_bf16, amx_bf16), or "none"."""
    try:
        flags = next((line.split(":", 1)[1].split() for line in open("/proc/cpuinfo")
                      if line.startswith("flags")), [])
    except OSError:
        return "unknown"
    return " ".join(f for f in ("avx512_bf16", "amx_bf16") if f in flags) or "none"


def fmt_fraction(s):
    """A fraction of peak as a percentage, flagged "!" when any round exceeds 100%."""
    return "-" if s is None else fmt(s, "%.0f%%", 100.0) + ("!" if s["max"] > 1.0 else "")


def main(out):
    host, results = summarise(out)
    host["cpu_vector_isa"] = cpu_vector_isa()
    host["cpu_bf16_flags"] = cpu_bf16_flags()
    counts = " and ".join(str(t) for t in host["threads"])
    print(f"{host['cpu_model']}, {counts} thread{'' if counts == '1' else 's'}; OpenBLAS kernels: realpos "
          f"{host['realpos_openblas_corename']}, PyTorch {host['torch_openblas_corename']} "
          f"(torch CPU capability of the peer runs counted: {host['torch_cpu_capability']}); OPENBLAS_CORETYPE="
          f"{host['openblas_coretype_env'] or '(unset)'}; {host['rounds']} interleaved rounds, "
          f"medians [min..max]")
    print(f"CPU flags: {host['cpu_vector_isa']}, bf16: {host['cpu_bf16_flags']}"
          + (f"; bf16 peak {host['bf16_peak_gflops']:.1f} GFLOP/s (best of {host['bf16_probes']['n']} "
             f"probes of the rows' own bf16 products; probes {fmt(host['bf16_probes'], '%.1f')}; the % peak of the -bf16 rows)"
             if host["bf16_probes"] else ""))
    print(f"sgemm peak {host['sgemm_peak_gflops']:.1f} GFLOP/s (best of {host['sgemm_probes']['n'] if host['sgemm_probes'] else 0} "
          f"probes; probes {fmt(host['sgemm_probes'], '%.1f')})"
          + (f"; per thread count, the % peak of the fp32 rows run at it: "
             + ", ".join(f"{t} thread{'' if t == '1' else 's'} {p:.1f}" for t, p in host["sgemm_peaks_by_threads"].items())
             if len(host["sgemm_peaks_by_threads"]) > 1 else ""))
    if host["realpos_openblas_corename"] == "Prescott" and host["cpu_vector_isa"]:
        print(f"note: this CPU has {host['cpu_vector_isa']}, but OpenBLAS runs its Prescott (SSE3) kernels: "
              "its runtime detection does not know this CPU model (OpenBLAS < 0.3.25 falls back to Prescott, "
              "OpenMathLib/OpenBLAS#4267), so every GEMM of both engines runs several times below the "
              "CPU's capability. A user may select the right kernels with OPENBLAS_CORETYPE (e.g. SkylakeX "
              "or Haswell); the bench never sets it.")
    head = ["config", "realpos tok/s (B x L)", "real tok/s", "PyTorch tok/s", "ratio", "CPU-time ratio", "GFLOP/s",
            "% peak", "% peak (all FLOPs)", "local % peak", "time overhead", "FLOP overhead", "CPU-time overhead",
            "paired overhead",
            "RSS MB realpos/PyTorch"]
    table = [head]
    for r in results:
        rss_t = r["torch_rss_mb"]
        table.append([
            r["name"], fmt(r["realpos_tokens_per_s"], "%.0f"), fmt(r["real_tokens_per_s"], "%.0f"),
            fmt(r["torch_tokens_per_s"], "%.0f"),
            fmt(r["speed_ratio"], "%.2f"), fmt(r["cpu_time_ratio"], "%.2f"), fmt(r["gflops"], "%.1f"),
            fmt_fraction(r["peak_fraction"]), fmt_fraction(r["peak_fraction_all_flops"]),
            fmt_fraction(r["local_peak_fraction"]),
            (fmt(r["overhead"], "%+.1f%%", 100.0) + f" vs {r['overhead_vs']}") if r["overhead"] else "-",
            f"{100 * r['flop_overhead']:+.1f}%" if r["flop_overhead"] is not None else "-",
            fmt(r["cpu_overhead"], "%+.1f%%", 100.0), fmt(r["paired_overhead"], "%+.1f%%", 100.0),
            (f"{r['realpos_rss_mb']['median']:.0f}/{rss_t['median']:.0f}" if rss_t else
             (f"{r['realpos_rss_mb']['median']:.0f}" if r["realpos_rss_mb"] else "-")) +
            (" (pair)" if r["realpos_rss_paired"] else "")])
    widths = [max(len(row[c]) for row in table) for c in range(len(head))]
    for row in table:
        print("  ".join(cell.ljust(w) if c == 0 else cell.rjust(w) for c, (cell, w) in enumerate(zip(row, widths))))
    variants = [f"{r['name']} {r['torch_variants']}" for r in results if r["torch_variants"]]
    if variants:
        print("PyTorch's runs, each round's faster of its ways (bench.sh runs it at its default CPU capability "
              "and at AVX-512's): " + "; ".join(variants))
    if any(r["peak_fraction"] and r["peak_fraction"]["max"] > 1.0 for r in results):
        print("!: above 100% of the sgemm peak: a round ran faster than the best probe of the bench (probes that met "
              "a busy moment of the host read low), so that peak is an underestimate here")
    path = os.path.join(out, "results.json")
    with open(path + ".tmp", "w") as f:  # whole or not at all
        json.dump({"host": host, "rows": results}, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
    print(f"results in {os.path.join(out, 'results.json')}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
