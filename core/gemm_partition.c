/* The grid a product is shared in (core/gemm_partition.h). */
#include "core/gemm_partition.h"

/* A side of `length` in `parts` (a power of two) pieces: each a whole number of GEMM_PART_ALIGN,
 * the last shorter when they do not divide it; one piece is the whole side. */
static int piece(int length, int parts) {
    const int even = (length + parts - 1) / parts;
    const int aligned = (even + GEMM_PART_ALIGN - 1) / GEMM_PART_ALIGN * GEMM_PART_ALIGN;
    return aligned < length ? aligned : length;
}

/* Doubles *row_parts (rows) or *col_parts when the grid then still meets the rule's bounds, the
 * blocks' sides' harmonic mean at least `side`. */
static int split_further(int M, int N, int K, int rows, int side, int *row_parts, int *col_parts) {
    const int row_next = *row_parts * (rows ? 2 : 1), col_next = *col_parts * (rows ? 1 : 2);
    if (row_next * col_next > GEMM_PARTS_MAX || M < row_next * GEMM_PART_ALIGN || N < col_next * GEMM_PART_ALIGN)
        return 0;
    const double r = piece(M, row_next), c = piece(N, col_next);
    if (2.0 * M * (double)N * K / (row_next * col_next) < GEMM_PART_FLOPS || 2.0 * r * c < side * (r + c))
        return 0;
    *row_parts = row_next, *col_parts = col_next;
    return 1;
}

GemmPartition gemm_partition(int M, int N, int K) {
    if (M <= 0 || N <= 0)
        return (GemmPartition){0, 0, M > 0 ? M : 0, N > 0 ? N : 0};
    int row_parts = 1, col_parts = 1;
    const int strip_rows = M >= N; /* 1: strips across C's longer side */
    while ((strip_rows ? row_parts : col_parts) < GEMM_STRIPS_MAX &&
           split_further(M, N, K, strip_rows, 0, &row_parts, &col_parts))
        ;
    for (;;) { /* 2: the blocks' longer side first: rows when M / row_parts >= N / col_parts */
        const int rows_longer = (double)M * col_parts >= (double)N * row_parts;
        if (!split_further(M, N, K, rows_longer, GEMM_PART_SIDE, &row_parts, &col_parts) &&
            !split_further(M, N, K, !rows_longer, GEMM_PART_SIDE, &row_parts, &col_parts))
            break;
    }
    const int rows = piece(M, row_parts), cols = piece(N, col_parts);
    return (GemmPartition){(M + rows - 1) / rows, (N + cols - 1) / cols, rows, cols};
}

/* `length` in at most `parts` pieces of a whole number of GEMM_THREAD_ALIGN, the last one shorter but
 * not below GEMM_THREAD_ALIGN (a single row or column would take another path in the library) */
static int thread_piece(int length, int parts) {
    const int even = (length + parts - 1) / parts;
    int side = (even + GEMM_THREAD_ALIGN - 1) / GEMM_THREAD_ALIGN * GEMM_THREAD_ALIGN;
    while (side < length && length - (length - 1) / side * side < GEMM_THREAD_ALIGN)
        side += GEMM_THREAD_ALIGN;
    return side < length ? side : length;
}

GemmPartition gemm_partition_threads(int M, int N, int K, int threads) {
    if (M <= 0 || N <= 0)
        return (GemmPartition){0, 0, M > 0 ? M : 0, N > 0 ? N : 0};
    int rows = M, cols = N;
    double least = 2.0 * M * N + (double)GEMM_PACK_COST * (M + N);
    for (int r = 1; r <= threads; r++) {
        const int r_side = thread_piece(M, r), c_side = thread_piece(N, threads / r);
        const double cost = 2.0 * r_side * c_side + (double)GEMM_PACK_COST * (r_side + c_side);
        if (cost < least && 2.0 * r_side * c_side * K >= GEMM_PART_FLOPS)
            least = cost, rows = r_side, cols = c_side;
    }
    return (GemmPartition){(M + rows - 1) / rows, (N + cols - 1) / cols, rows, cols};
}

void gemm_partition_block(const GemmPartition *p, int M, int N, int part, int *row, int *col, int *rows,
                          int *cols) {
    *row = part / p->col_parts * p->rows;
    *col = part % p->col_parts * p->cols;
    *rows = M - *row < p->rows ? M - *row : p->rows;
    *cols = N - *col < p->cols ? N - *col : p->cols;
}
