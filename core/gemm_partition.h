/* How core/gemm shares one product C [M,N] = op(A) [M,K] op(B) [K,N] among threads: a grid of
 * blocks fixed by the shape alone, each block one single-threaded library call (OpenBLAS's sgemm,
 * core/gemm_small, or oneDNN on the thread's lane), so every element of C comes from the same call
 * at any thread count and its bits do not depend on the thread count (issues 33 and 50).
 *
 * The rule: start from one block, C itself, and halve the block's longer side (rows on a tie; the
 * other side when the longer cannot be halved) while
 *   - the blocks stay at most GEMM_PARTS_MAX (128),
 *   - each block keeps at least GEMM_PART_FLOPS (2 rows cols K >= 4 MFLOP),
 *   - each side stays a whole number of GEMM_PART_ALIGN (64) rows or columns (the last block of a
 *     row or column of the grid may be shorter),
 *   - the block's sides r x c keep a harmonic mean 2 r c / (r + c) of at least GEMM_PART_SIDE.
 * A block packs its op(A) rows and op(B) columns once each, (r + c) K floats for 2 r c K FLOPs, so
 * the last condition bounds the packing a split adds to what every thread count pays, 1 and 2
 * threads included; halving the longer side keeps the blocks near square, which packs least for
 * their number. docs/mfu.md has the parts per product and the speed-up they bound. */
#pragma once

enum { GEMM_PARTS_MAX = 128, GEMM_PART_ALIGN = 64, GEMM_PART_SIDE = 128 };
#define GEMM_PART_FLOPS 4e6

/* row_parts x col_parts blocks of rows x cols elements of C (the last row of blocks has the
 * remaining M - (row_parts - 1) rows rows, the last column likewise); an empty C has no blocks. */
typedef struct {
    int row_parts, col_parts;
    int rows, cols;
} GemmPartition;

GemmPartition gemm_partition(int M, int N, int K);

static inline int gemm_partition_parts(const GemmPartition *p) { return p->row_parts * p->col_parts; }

/* Block `part` (0 .. parts - 1, row-major over the grid: consecutive parts share op(A)'s rows):
 * C's rows [*row, *row + *rows) and columns [*col, *col + *cols). */
void gemm_partition_block(const GemmPartition *p, int M, int N, int part, int *row, int *col, int *rows,
                          int *cols);
