/* How core/gemm shares one product C [M,N] = op(A) [M,K] op(B) [K,N] among threads: a grid of
 * blocks fixed by the shape alone, each block one single-threaded library call (OpenBLAS's sgemm,
 * core/gemm_small, or oneDNN on the thread's lane), so every element of C comes from the same call
 * at any thread count and its bits do not depend on the thread count (issues 33 and 50).
 *
 * The rule, in two stages, every split keeping each block at least GEMM_PART_FLOPS
 * (2 rows cols K >= 4 MFLOP) and each side a whole number of GEMM_PART_ALIGN (64) rows or columns
 * (the last block of a grid row or column may be shorter):
 *   1. C's longer side (rows on a tie) in up to GEMM_STRIPS_MAX (16) strips, as before issue 50
 *      item 5: the products that stop here keep their blocks and their bits;
 *   2. then the blocks' longer side halved (rows on a tie; the other side when the longer cannot
 *      be), up to GEMM_PARTS_MAX (128) blocks, while the blocks' sides r x c keep a harmonic mean
 *      2 r c / (r + c) of at least GEMM_PART_SIDE.
 * A block packs its op(A) rows and op(B) columns once each, (r + c) K floats for 2 r c K FLOPs, and
 * is one call more: stage 2 adds blocks only where each stays as large as most of stage 1's, so the
 * packing and the calls that every thread count pays (2 threads included) grow little; halving
 * the longer side keeps the blocks near square, which packs least for their number. docs/mfu.md
 * has the blocks of each product and the speed-up they bound. */
#pragma once

enum { GEMM_PARTS_MAX = 128, GEMM_STRIPS_MAX = 16, GEMM_PART_ALIGN = 64, GEMM_PART_SIDE = 192 };
#define GEMM_PART_FLOPS 4e6

/* row_parts x col_parts blocks of rows x cols elements of C (the last row of blocks has the
 * remaining M - (row_parts - 1) rows rows, the last column likewise); an empty C has no blocks. */
typedef struct {
    int row_parts, col_parts;
    int rows, cols;
} GemmPartition;

GemmPartition gemm_partition(int M, int N, int K);

static inline int gemm_partition_parts(const GemmPartition *p) { return p->row_parts * p->col_parts; }

/* A grid by the thread count, for a product whose elements' bits do not depend on the part of C a
 * call computes (oneDNN's, core/gemm_lane.h's gemm_lanes_extent_invariant): at most `threads`
 * blocks, one a thread, of sides a whole number of GEMM_THREAD_ALIGN (the last shorter, but not
 * below GEMM_THREAD_ALIGN unless it is the whole side), each at
 * least GEMM_PART_FLOPS unless there is one. Of the r x c grids with r c <= threads it takes the one
 * whose block costs least, 2 r' c' K FLOPs plus packing GEMM_PACK_COST (r' + c') K for a block of
 * r' x c': every thread has at most one block, so the step waits for one block's time. Fewer and
 * larger blocks than gemm_partition's at a few threads: each packs less of op(A) and op(B) again
 * (bert-mini's weight gradients, [256, 1024] with K = 4096: 16 strips ran at 481 GFLOP/s on 2
 * threads, 2 blocks at 691). */
enum { GEMM_THREAD_ALIGN = 16, GEMM_PACK_COST = 32 };
GemmPartition gemm_partition_threads(int M, int N, int K, int threads);

/* Block `part` (0 .. parts - 1, row-major over the grid: consecutive parts share op(A)'s rows):
 * C's rows [*row, *row + *rows) and columns [*col, *col + *cols). */
void gemm_partition_block(const GemmPartition *p, int M, int N, int part, int *row, int *col, int *rows,
                          int *cols);
