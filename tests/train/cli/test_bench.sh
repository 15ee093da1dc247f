#!/usr/bin/env bash
# realpos bench --json records the host (CPU model, OpenBLAS kernel family, OPENBLAS_CORETYPE as
# found) and every sgemm peak probe, the peak being their best; scripts/dev/bench_table.py takes
# medians over interleaved rounds, pairs the engines round by round, and never reports a fraction
# of peak above 100%. (make bench itself is too long for make test.)
source "$(dirname "$0")/../../lib.sh"
ROOT=$PWD

if OMP_NUM_THREADS=1 "$RP" bench configs/tiny.ini --batch-size 2 --seq-len 8 --steps 2 --warmup 1 \
    --json "$tmp/run.json" >"$tmp/out" 2>&1; then
  pass "bench runs"
else
  fail "bench runs" "$(head -c 300 "$tmp/out")"
fi
"$PY" - "$tmp/run.json" "${OPENBLAS_CORETYPE-}" "$(grep -m1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//')" <<'PY'
import json, sys
r, coretype, cpu = json.load(open(sys.argv[1])), sys.argv[2] or None, sys.argv[3]
def check(name, ok, why=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))
probes = r.get("sgemm_probes_gflops", [])
check("bench json: one probe before the steps and one after each timed step", len(probes) == 3, str(probes))
check("bench json: peak is the best probe", probes and r["sgemm_peak_gflops"] == max(probes))
check("bench json: cpu model", r.get("cpu_model") == cpu, f"{r.get('cpu_model')!r} vs {cpu!r}")
check("bench json: OpenBLAS core name", isinstance(r.get("openblas_corename"), str) and r["openblas_corename"] != "")
check("bench json: OPENBLAS_CORETYPE as found", r.get("openblas_coretype_env") == coretype,
      f"{r.get('openblas_coretype_env')!r} vs {coretype!r}")
check("bench json: step times and CPU time", len(r.get("step_seconds", [])) == 2 and r["cpu_seconds_per_step"] > 0)
PY

# Synthetic rounds: realpos 300/100/200 tok/s, torch 100/50/100 (paired ratios 3, 2, 2); one
# realpos run reads more GFLOP/s than any probe.
mkdir -p "$tmp/b/runs"
printf 'm\tyes\t\t32\t128\t\nm-rel\tno\tm\t32\t128\tx=y\n' >"$tmp/b/rows.tsv"
"$PY" - "$tmp/b/runs" <<'PY'
import json, sys
def run(path, **kw):
    json.dump(kw, open(f"{sys.argv[1]}/{path}", "w"))
for rnd, (rp, pt, rel, gf) in enumerate([(300, 100, 270, 5.0), (100, 50, 80, 9.0), (200, 100, 190, 4.0)], 1):
    base = dict(cpu_seconds_per_step=1.0, peak_rss_mb=10, cpu_model="cpu", openblas_corename="core",
                openblas_coretype_env=None, threads=2)
    run(f"m.realpos.r{rnd}.json", tokens_per_s=rp, gflops=gf, sgemm_peak_gflops=6.0,
        sgemm_probes_gflops=[6.0, 5.0], **base)
    run(f"m.torch.r{rnd}.json", tokens_per_s=pt, **dict(base, cpu_seconds_per_step=2.0))
    run(f"m-rel.realpos.r{rnd}.json", tokens_per_s=rel, gflops=gf, sgemm_peak_gflops=6.0,
        sgemm_probes_gflops=[6.0], **base)
PY
if "$PY" "$ROOT/scripts/dev/bench_table.py" "$tmp/b" >"$tmp/table" 2>&1; then pass "bench_table runs"
else fail "bench_table runs" "$(head -c 300 "$tmp/table")"; fi
"$PY" - "$tmp/b/results.json" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))
rows = {r["name"]: r for r in res["rows"]}
def check(name, ok, why=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))
m, rel = rows["m"], rows["m-rel"]
check("bench table: median tokens/s", m["realpos_tokens_per_s"]["median"] == 200 and m["torch_tokens_per_s"]["median"] == 100)
check("bench table: ratio paired by round", m["speed_ratio"]["median"] == 2 and m["speed_ratio"]["max"] == 3, str(m["speed_ratio"]))
check("bench table: CPU-time ratio", m["cpu_time_ratio"]["median"] == 2)
check("bench table: peak is the best probe of the bench", res["host"]["sgemm_peak_gflops"] == 6.0)
check("bench table: fraction of peak never above 100%", m["peak_fraction"]["max"] == 1.0 and m["peak_fraction"]["median"] <= 1.0,
      str(m["peak_fraction"]))
ov = rel["overhead"]
check("bench table: CPU-time overhead", rel["cpu_overhead"]["median"] == 0, str(rel["cpu_overhead"]))
check("bench table: overhead paired by round", abs(ov["median"] - 0.1) < 1e-9 and abs(ov["max"] - 0.2) < 1e-9, str(ov))
PY
if grep -q '%' "$tmp/table" && ! grep -Eq '(^|[^0-9.])(10[1-9]|1[1-9][0-9]|[2-9][0-9][0-9]|[0-9]{4,})(\.[0-9]*)?%' "$tmp/table"; then pass "bench table: printed fractions <= 100%"
else fail "bench table: printed fractions <= 100%" "$(cat "$tmp/table")"; fi
