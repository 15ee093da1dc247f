#!/usr/bin/env bash
# Per-phase CPU profile of the attention op (single thread, one op = forward + backward of all
# heads), the way docs/attention.md reports it: the core's GEMMs (Q.K^T, P.V; dP, dV, dQ, dK),
# the relative terms' GEMMs (QA, KA; dQA.A, dKA.A, dA) and everything else per pass (gather /
# scatter, softmax, carried scores, dropout), for absolute attention and the relative + residual
# path side by side, ROUNDS interleaved rounds (medians). Needs `make` first (build/librealpos.a).
# To compare versions, give LABEL=LIBRARY pairs (e.g. before=/tmp/old/build/librealpos.a
# after=build/librealpos.a; the library must match this tree's layers/attention.h): every round
# then runs every case with every library.
# Usage: scripts/dev/profile_attention.sh [--rounds N] [--reps N] [LABEL=LIBRARY ...]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=3; reps=6; libs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift ;;
    --reps) reps=$2; shift ;;
    *=*) libs+=("$1") ;;
    *) echo "usage: $0 [--rounds N] [--reps N] [LABEL=LIBRARY ...]" >&2; exit 2 ;;
  esac
  shift
done
[ ${#libs[@]} -gt 0 ] || libs=("this=build/librealpos.a")
out=build/profile; rm -rf "$out"; mkdir -p "$out"
for lib in "${libs[@]}"; do
  cc -std=c11 -D_GNU_SOURCE -I. -O2 -g -Wall -Wextra -Werror -fopenmp -no-pie $(pkg-config --cflags openblas) \
    -o "$out/profile_attention.${lib%%=*}" scripts/dev/profile_attention.c "${lib#*=}" $(pkg-config --libs openblas ompi-c) -ldnnl -ldl -lm
done
# label | B L H heads mode k residual
cases=(
  "mini absolute|32 128 256 4 none 0 0"
  "mini absolute + residual|32 128 256 4 none 0 1"
  "mini method4 k=64|32 128 256 4 method4 64 0"
  "mini method4 k=64 + residual|32 128 256 4 method4 64 1"
  "seq512 absolute|8 512 256 4 none 0 0"
  "seq512 method4 k=511|8 512 256 4 method4 511 0"
  "mini t5|32 128 256 4 t5 0 0"
  "mini alibi|32 128 256 4 alibi 0 0"
  "mini alibi + residual|32 128 256 4 alibi 0 1"
  "mini rope|32 128 256 4 rope 0 0"
  "seq512 t5|8 512 256 4 t5 0 0"
  "seq512 alibi|8 512 256 4 alibi 0 0"
  "seq512 rope|8 512 256 4 rope 0 0"
)
for r in $(seq 1 "$rounds"); do
  for i in "${!cases[@]}"; do
    IFS='|' read -r label args <<<"${cases[$i]}"
    n=$reps; [[ "$label" != seq512* ]] || n=$(( reps > 3 ? 3 : reps ))
    for lib in "${libs[@]}"; do
      OMP_NUM_THREADS=1 "$out/profile_attention.${lib%%=*}" $args "$n" "$out/case$i.${lib%%=*}.r$r.txt"
    done
  done
done
labels=(); for lib in "${libs[@]}"; do labels+=("${lib%%=*}"); done
/usr/bin/python3 - "$out" "$rounds" "${labels[*]}" "${cases[@]}" <<'PY'
import statistics, subprocess, sys
out, rounds, labels = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
cases = [c.split("|")[0] for c in sys.argv[4:]]
PHASE = {"forward_bh": "core GEMMs fwd", "backward_bh": "core GEMMs bwd",
         **{f: "relative GEMMs fwd" for f in ("query_table_term", "key_table_term", "three_way_term",
                                              "gather_scores", "method3_scores")},  # (older names)
         **{f: "relative GEMMs bwd" for f in ("query_table_grads", "key_table_grads", "three_way_grads",
                                              "scatter_grads", "method3_backward")}}
names = {}
def phases(path, binary):
    calls, passes, gemm = 1, {}, {}
    for line in open(path):
        f = line.split()
        if f[0] == "calls": calls = int(f[1])
        elif f[0] == "pass": passes[f[1]] = float(f[2])
        elif f[0] == "site":
            addr = int(f[1], 16) - 1
            if (binary, addr) not in names:
                names[binary, addr] = subprocess.run(["addr2line", "-f", "-i", "-e", binary, hex(addr)],
                                             capture_output=True, text=True).stdout.split("\n")[0]
            phase = PHASE.get(names[binary, addr], "GEMMs in " + names[binary, addr])
            gemm[phase] = gemm.get(phase, 0.0) + float(f[2])
    fwd = sum(v for k, v in gemm.items() if k.endswith("fwd"))
    bwd = sum(v for k, v in gemm.items() if k.endswith("bwd"))
    res = dict(gemm)
    res["other fwd"] = passes["forward"] - fwd
    res["other bwd"] = passes["backward"] - bwd
    res["total"] = passes["forward"] + passes["backward"]
    return {k: 1000 * v / calls for k, v in res.items()}
rows = ["core GEMMs fwd", "relative GEMMs fwd", "other fwd", "core GEMMs bwd", "relative GEMMs bwd",
        "other bwd", "total"]
columns = []
for i, case in enumerate(cases):
    for lab in labels:
        runs = [phases(f"{out}/case{i}.{lab}.r{r}.txt", f"{out}/profile_attention.{lab}")
                for r in range(1, rounds + 1)]
        columns.append((case + (f" ({lab})" if len(labels) > 1 else ""),
                        {k: statistics.median(run.get(k, 0.0) for run in runs) for k in rows}))
print(f"ms of thread CPU per op (forward + backward), median of {rounds} interleaved rounds; "
      "'other' = gather/scatter, softmax, carried scores, dropout")
for c0 in range(0, len(columns), 4):
    chunk = columns[c0:c0 + 4]
    print("| phase | " + " | ".join(name for name, _ in chunk) + " |")
    print("|---" * (len(chunk) + 1) + "|")
    for k in rows:
        print(f"| {k} | " + " | ".join(f"{col[k]:.1f}" for _, col in chunk) + " |")
    print()
PY
