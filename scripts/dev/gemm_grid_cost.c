/* What core/gemm_partition.h's grid costs one thread: the fp32 products of one encoder layer and of
 * the MLM head (forward, d_in, dW of qkv, attention out, feed-forward in and out, transform,
 * decoder), each run block by block as gemm_f32 runs its blocks (one cblas_sgemm a block, here on
 * one thread) under three grids, rounds interleaved:
 *   grid   gemm_partition (this tree's rule);
 *   strips the 1-D rule before issue 50 item 5 (C's longer side in up to 16 strips);
 *   whole  one call a product (no split: the least packing).
 * Prints each round's process CPU seconds of grid and whole over strips' and their medians (CPU
 * time, not wall time: on a shared host a descheduled moment does not count).
 * Usage: gemm_grid_cost H I ROWS LABELLED VOCAB ROUNDS   (bert-mini 32 x 128: 256 1024 4096 614 30522 15) */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/gemm_partition.h"

typedef struct {
    int ta, tb, M, N, K;
} Product;

enum { GRID, STRIPS, WHOLE, RULES };
static const char *const rule_names[RULES] = {"grid", "strips", "whole"};

static GemmPartition strips(int M, int N, int K) {
    const int rows = M >= N, length = rows ? M : N;
    int p = 1;
    while (p < GEMM_STRIPS_MAX && 2.0 * M * N * (double)K / (2 * p) >= GEMM_PART_FLOPS &&
           length >= 2 * p * GEMM_PART_ALIGN)
        p *= 2;
    const int piece = ((length + p - 1) / p + GEMM_PART_ALIGN - 1) / GEMM_PART_ALIGN * GEMM_PART_ALIGN;
    const int parts = (length + piece - 1) / piece;
    return rows ? (GemmPartition){parts, 1, piece, N} : (GemmPartition){1, parts, M, piece};
}

static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void run(const Product *p, GemmPartition g, const float *A, const float *B, float *C) {
    const int lda = p->ta ? p->M : p->K, ldb = p->tb ? p->K : p->N;
    for (int part = 0; part < gemm_partition_parts(&g); part++) {
        int row, col, rows, cols;
        gemm_partition_block(&g, p->M, p->N, part, &row, &col, &rows, &cols);
        cblas_sgemm(CblasRowMajor, p->ta ? CblasTrans : CblasNoTrans, p->tb ? CblasTrans : CblasNoTrans, rows, cols,
                    p->K, 1.0f, p->ta ? A + row : A + (size_t)row * lda, lda, p->tb ? B + (size_t)col * ldb : B + col,
                    ldb, 0.0f, C + (size_t)row * p->N + col, p->N);
    }
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: gemm_grid_cost H I ROWS LABELLED VOCAB ROUNDS\n");
        return 2;
    }
    const int hidden = atoi(argv[1]), inner = atoi(argv[2]), rows = atoi(argv[3]), labelled = atoi(argv[4]);
    const int vocab = atoi(argv[5]), rounds = atoi(argv[6]);
    if (hidden <= 0 || inner <= 0 || rows <= 0 || labelled <= 0 || vocab <= 0 || rounds < 2 || rounds > 1000) {
        fprintf(stderr, "gemm_grid_cost: expected positive sizes and 2..1000 rounds\n");
        return 2;
    }
    const int maps[6][3] = {{3 * hidden, hidden, rows},  {hidden, hidden, rows},     {inner, hidden, rows},
                            {hidden, inner, rows},       {hidden, hidden, labelled}, {vocab, hidden, labelled}}; /* out, in, rows */
    Product products[18];
    size_t largest = 0;
    for (int m = 0; m < 6; m++) {
        const int o = maps[m][0], i = maps[m][1], n = maps[m][2];
        products[3 * m] = (Product){0, 1, n, o, i};     /* forward  Y [n,o] = X W^T */
        products[3 * m + 1] = (Product){0, 0, n, i, o}; /* d_in     dX [n,i] = dY W */
        products[3 * m + 2] = (Product){1, 0, o, i, n}; /* dW       dW [o,i] = dY^T X */
        const size_t sizes[3] = {(size_t)n * o, (size_t)n * i, (size_t)o * i};
        for (int s = 0; s < 3; s++)
            largest = sizes[s] > largest ? sizes[s] : largest;
    }
    float *A = malloc(largest * sizeof *A), *B = malloc(largest * sizeof *B), *C = malloc(largest * sizeof *C);
    double *ratio[RULES];
    for (int r = 0; r < RULES; r++)
        ratio[r] = calloc((size_t)rounds, sizeof *ratio[r]);
    if (!A || !B || !C) {
        fprintf(stderr, "gemm_grid_cost: out of memory\n");
        return 1;
    }
    for (size_t e = 0; e < largest; e++)
        A[e] = (float)(e % 7) * 0.1f, B[e] = (float)(e % 5) * 0.1f;
    for (int round = 0; round <= rounds; round++) { /* round 0 warms up */
        double seconds[RULES];
        for (int k = 0; k < RULES; k++) {
            const int rule = round % 2 ? RULES - 1 - k : k; /* the order alternating */
            const double t0 = cpu_seconds();
            for (int p = 0; p < 18; p++) {
                const Product *x = &products[p];
                run(x, rule == GRID ? gemm_partition(x->M, x->N, x->K) : rule == STRIPS ? strips(x->M, x->N, x->K)
                                                                                        : (GemmPartition){1, 1, x->M, x->N},
                    A, B, C);
            }
            seconds[rule] = cpu_seconds() - t0;
        }
        if (round > 0)
            for (int r = 0; r < RULES; r++)
                ratio[r][round - 1] = seconds[r] / seconds[STRIPS];
    }
    for (int r = 0; r < RULES; r++) {
        if (r == STRIPS)
            continue;
        printf("%-6s / strips:", rule_names[r]);
        for (int i = 0; i < rounds; i++)
            printf(" %.3f", ratio[r][i]);
        qsort(ratio[r], (size_t)rounds, sizeof *ratio[r], by_value);
        printf("  median %.3f\n", ratio[r][rounds / 2]);
    }
    return 0;
}
