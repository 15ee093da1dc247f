#!/usr/bin/python3
"""The scaling model of docs/mfu.md: the grid of blocks core/gemm_partition.h gives each product of a
pretraining step, and the speed-up that grid bounds at a thread count.

The rule is written again here (the constants read from core/gemm_partition.h);
tests/core/test_gemm_partition.c checks the C rule against the grids this script prints for
bert-mini's and bert-base's products. A product is 2 M N K FLOPs; its blocks are shared by OpenMP's
schedule(static) (t contiguous runs of blocks, the first parts % t one block longer), so it takes
as long as its busiest thread's FLOPs; the bound at t threads is the step's FLOPs over the sum of
those times (every block at one rate: no packing, memory or load imbalance outside the grid).
The products: the forward, d_in and dW of the four linear maps of every layer (qkv, attention
out, feed-forward in and out) and of the MLM head's transform and decoder at the labelled
positions (15% of B T, rounded); the per-(sequence, head) attention products are not split.
--rule old: the 1-D rule before (the longer side of C in up to 16 strips).
--rule threads: gemm_partition_threads, one block a thread (bf16 products on oneDNN where its
elements do not depend on the block: core/gemm_lane.h's gemm_lanes_extent_invariant).

Usage: scripts/dev/gemm_partition_model.py [--rule grid|old|threads]"""
import re
import sys
from pathlib import Path

HEADER = Path(__file__).resolve().parents[2] / "core" / "gemm_partition.h"
text = HEADER.read_text()
PARTS_MAX, STRIPS_MAX, ALIGN, SIDE = (int(re.search(name + r" = (\d+)", text).group(1)) for name in
                                      ("GEMM_PARTS_MAX", "GEMM_STRIPS_MAX", "GEMM_PART_ALIGN", "GEMM_PART_SIDE"))
FLOPS = float(re.search(r"#define GEMM_PART_FLOPS (\S+)", text).group(1))
THREAD_ALIGN, PACK_COST = (int(re.search(name + r" = (\d+)", text).group(1)) for name in
                           ("GEMM_THREAD_ALIGN", "GEMM_PACK_COST"))


def piece(length, parts):
    return min(length, (-(-length // parts) + ALIGN - 1) // ALIGN * ALIGN)


def sizes(length, parts):
    """The sides of `length` cut in `parts` (a power of two) pieces of whole ALIGNs."""
    p = piece(length, parts)
    return [min(p, length - i * p) for i in range(-(-length // p))]


def grid(M, N, K):
    """core/gemm_partition.c: 1. strips across C's longer side, up to STRIPS_MAX; 2. then the
    blocks' longer side halved (rows on a tie), else the other, sides' harmonic mean >= SIDE."""
    row_parts = col_parts = 1

    def split_further(rows, side):
        nonlocal row_parts, col_parts
        r_next, c_next = row_parts * (2 if rows else 1), col_parts * (1 if rows else 2)
        if r_next * c_next > PARTS_MAX or M < r_next * ALIGN or N < c_next * ALIGN:
            return False
        r, c = piece(M, r_next), piece(N, c_next)
        if 2.0 * M * N * K / (r_next * c_next) < FLOPS or 2.0 * r * c < side * (r + c):
            return False
        row_parts, col_parts = r_next, c_next
        return True

    strip_rows = M >= N
    while (row_parts if strip_rows else col_parts) < STRIPS_MAX and split_further(strip_rows, 0):
        pass
    while True:
        rows_longer = M * col_parts >= N * row_parts
        if not split_further(rows_longer, SIDE) and not split_further(not rows_longer, SIDE):
            break
    return sizes(M, row_parts), sizes(N, col_parts)


def thread_piece(length, parts):
    side = (-(-length // parts) + THREAD_ALIGN - 1) // THREAD_ALIGN * THREAD_ALIGN
    while side < length and length - (length - 1) // side * side < THREAD_ALIGN:
        side += THREAD_ALIGN
    return min(side, length)


def thread_grid(M, N, K, threads):
    """core/gemm_partition.c's gemm_partition_threads: of the r x c <= threads grids, the least
    costly block (2 r' c' + PACK_COST (r' + c') per unit of K), each >= FLOPS when split."""
    rows, cols, least = M, N, 2.0 * M * N + PACK_COST * (M + N)
    for r in range(1, threads + 1):
        rs, cs = thread_piece(M, r), thread_piece(N, threads // r)
        cost = 2.0 * rs * cs + PACK_COST * (rs + cs)
        if cost < least and 2.0 * rs * cs * K >= FLOPS:
            rows, cols, least = rs, cs, cost
    return ([min(rows, M - i * rows) for i in range(-(-M // rows))],
            [min(cols, N - i * cols) for i in range(-(-N // cols))])


def old_grid(M, N, K):
    rows = M >= N
    length, p = (M if rows else N), 1
    while p < 16 and 2.0 * M * N * K / (2 * p) >= 4e6 and length >= 2 * p * 64:
        p *= 2
    p_len = (-(-length // p) + 63) // 64 * 64
    cut = [min(p_len, length - i * p_len) for i in range(-(-length // p_len))]
    return (cut, [N]) if rows else ([M], cut)


def products(B, T, H, I, V, layers):
    rows, labelled = B * T, round(0.15 * B * T)
    out = []
    for name, o, i in (("qkv", 3 * H, H), ("attention-out", H, H), ("ff-in", I, H), ("ff-out", H, I)):
        out += [(name + " forward", rows, o, i), (name + " d_in", rows, i, o), (name + " dW", o, i, rows)] * layers
    for name, o, i in (("transform", H, H), ("decoder", V, H)):
        out += [(name + " forward", labelled, o, i), (name + " d_in", labelled, i, o), (name + " dW", o, i, labelled)]
    return out


def bound(prods, rule, threads):
    total = time = 0.0
    for _, M, N, K in prods:
        rows, cols = thread_grid(M, N, K, threads) if rule is thread_grid else rule(M, N, K)
        parts = [2.0 * r * c * K for r in rows for c in cols]
        q, extra = divmod(len(parts), threads)
        first = busiest = 0
        for t in range(min(threads, len(parts))):
            count = q + (t < extra)
            busiest = max(busiest, sum(parts[first:first + count]))
            first += count
        total += 2.0 * M * N * K
        time += busiest
    return total / time


def main():
    rule = grid
    if sys.argv[1:] == ["--rule", "old"]:
        rule = old_grid
    elif sys.argv[1:] == ["--rule", "threads"]:
        rule = thread_grid
    elif sys.argv[1:] not in ([], ["--rule", "grid"]):
        sys.exit(__doc__.split("\n\n")[-1])
    shapes = {"bert-mini 32 x 128": products(32, 128, 256, 1024, 30522, 4),
              "bert-base 8 x 128": products(8, 128, 768, 3072, 30522, 12)}
    counts = (2, 8, 16, 32, 64, 128)
    if rule is thread_grid:
        print(f"rule: threads (at most one block a thread, align {THREAD_ALIGN}, >= {FLOPS:g} FLOPs a block; "
              f"the grids printed at 2 threads)")
    else:
        print(f"rule: {'grid' if rule is grid else 'old'} (cap {PARTS_MAX if rule is grid else 16}, "
              f"align {ALIGN}, >= {FLOPS:g} FLOPs a block"
              f"{f', then 2-D: sides harmonic mean >= {SIDE}' if rule is grid else ''})")
    for shape, prods in shapes.items():
        print(shape)
        seen = set()
        for name, M, N, K in prods:
            if name in seen:
                continue
            seen.add(name)
            rows, cols = thread_grid(M, N, K, 2) if rule is thread_grid else rule(M, N, K)
            print(f"  {name:22s} {M:5d} x {N:5d} x {K:5d}: {len(rows):3d} x {len(cols):3d} = {len(rows) * len(cols):3d} "
                  f"blocks of {rows[0]} x {cols[0]}")
        print("  bound at " + " / ".join(map(str, counts)) + " threads: " +
              " / ".join(f"{bound(prods, rule, t):.1f}" for t in counts))


if __name__ == "__main__":
    main()
