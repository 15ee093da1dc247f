/* core/gemm_partition.h: the grid of blocks a product is shared in. For shapes from empty through
 * the alignment's and the FLOP floor's edges to the MLM decoder's: every element of C lies in
 * exactly one block; at most GEMM_PARTS_MAX blocks; every block but the last of its grid row or
 * column a whole number of GEMM_PART_ALIGN rows and columns; more than one block only when each
 * full block carries GEMM_PART_FLOPS, and more than stage 1's strips (up to GEMM_STRIPS_MAX across
 * C's longer side) only when the blocks' sides' harmonic mean is GEMM_PART_SIDE or more; the
 * same grid at 1, 2, 3 and 128 threads and inside a parallel region; and the grids docs/mfu.md lists
 * for bert-mini's and bert-base's products. gemm_partition_threads (one block a thread): every
 * element in one block, at most `threads` blocks, every side a whole number of GEMM_THREAD_ALIGN but
 * the last, and that one GEMM_THREAD_ALIGN or more unless it is the whole side (a single row would
 * take oneDNN's matrix-vector path), each block >= GEMM_PART_FLOPS when there are several, one block
 * at one thread, and at 2 threads bert-mini's weight gradients in 2 blocks. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/gemm_partition.h"
#include "tests/check.h"

typedef struct {
    int M, N, K;
} Product;

/* "" when every element of s's C lies in exactly one of g's blocks, else what failed */
static const char *cover_fault(const Product *s, const GemmPartition *g) {
    unsigned char *seen = calloc((size_t)s->M * s->N + 1, 1);
    const char *fault = "";
    for (int part = 0; part < gemm_partition_parts(g) && !*fault; part++) {
        int row, col, rows, cols;
        gemm_partition_block(g, s->M, s->N, part, &row, &col, &rows, &cols);
        if (rows <= 0 || cols <= 0 || row < 0 || col < 0 || row + rows > s->M || col + cols > s->N) {
            fault = "a block empty or outside C";
            break;
        }
        for (int m = row; m < row + rows; m++)
            for (int n = col; n < col + cols; n++)
                seen[(size_t)m * s->N + n]++;
    }
    for (size_t e = 0; e < (size_t)s->M * s->N && !*fault; e++)
        if (seen[e] != 1)
            fault = "an element in no block or in two";
    free(seen);
    return fault;
}

/* The count and alignment bounds, the floors, and (when `cover`) every element in one block; "" or
 * what failed. */
static const char *grid_fault(const Product *s, const GemmPartition *g, int cover) {
    const int parts = gemm_partition_parts(g);
    if (parts > GEMM_PARTS_MAX)
        return "more than GEMM_PARTS_MAX blocks";
    if ((s->M <= 0 || s->N <= 0) != (parts == 0))
        return "blocks for an empty C, or none for a C with elements";
    if (parts == 0)
        return "";
    if (g->rows % GEMM_PART_ALIGN && g->row_parts > 1)
        return "a block's rows not a whole number of GEMM_PART_ALIGN";
    if (g->cols % GEMM_PART_ALIGN && g->col_parts > 1)
        return "a block's columns not a whole number of GEMM_PART_ALIGN";
    const double r = g->rows, c = g->cols;
    if (parts > 1 && 2.0 * r * c * s->K < GEMM_PART_FLOPS)
        return "a full block under GEMM_PART_FLOPS";
    /* stage 1's strips: across C's longer side (rows on a tie), up to GEMM_STRIPS_MAX */
    const int strips = parts <= GEMM_STRIPS_MAX && (s->M >= s->N ? g->col_parts == 1 : g->row_parts == 1);
    if (parts > 1 && !strips && 2.0 * r * c < (double)GEMM_PART_SIDE * (r + c))
        return "blocks past stage 1's strips with sides' harmonic mean under GEMM_PART_SIDE";
    return cover ? cover_fault(s, g) : "";
}

static int same_grid(GemmPartition a, GemmPartition b) {
    return a.row_parts == b.row_parts && a.col_parts == b.col_parts && a.rows == b.rows && a.cols == b.cols;
}

static void test_rule(TestTally *t) {
    const int sides[] = {0, 1, 63, 64, 65, 127, 128, 129, 191, 200, 255, 256, 300, 614, 700, 768, 1000, 4096, 30522};
    const int depths[] = {1, 16, 64, 256, 1024, 4096};
    const int count = (int)(sizeof sides / sizeof sides[0]), depth_count = (int)(sizeof depths / sizeof depths[0]);
    int shapes = 0, faults = 0, threads_differ = 0, split = 0, two_d = 0, at_cap = 0;
    for (int i = 0; i < count; i++)
        for (int j = 0; j < count; j++)
            for (int d = 0; d < depth_count; d++) {
                const Product s = {sides[i], sides[j], depths[d]};
                if ((double)s.M * s.N > 64e6)
                    continue;
                shapes++;
                omp_set_num_threads(1);
                const GemmPartition g = gemm_partition(s.M, s.N, s.K);
                /* the elements' cover depends on M, N and the grid: once a grid of this M x N */
                const int cover = d == 0 || !same_grid(g, gemm_partition(s.M, s.N, depths[d - 1]));
                const char *fault = grid_fault(&s, &g, cover);
                if (*fault && faults++ < 5)
                    printf("  %d x %d x %d: %d x %d blocks of %d x %d: %s\n", s.M, s.N, s.K, g.row_parts, g.col_parts,
                           g.rows, g.cols, fault);
                const int threads[] = {2, 3, 128};
                for (int k = 0; k < 3; k++) {
                    omp_set_num_threads(threads[k]);
                    threads_differ += !same_grid(g, gemm_partition(s.M, s.N, s.K));
                }
                GemmPartition inside = {0};
#pragma omp parallel num_threads(2)
#pragma omp single
                inside = gemm_partition(s.M, s.N, s.K);
                threads_differ += !same_grid(g, inside);
                split += gemm_partition_parts(&g) > 1;
                two_d += g.row_parts > 1 && g.col_parts > 1;
                at_cap += gemm_partition_parts(&g) == GEMM_PARTS_MAX;
            }
    omp_set_num_threads(1);
    CHECK(t, faults == 0, "gemm_partition: %d shapes (%d split, %d in both sides, %d at the cap): every element in "
          "exactly one block, at most %d blocks, whole %d-row and -column blocks, each full block >= %g FLOPs, past "
          "%d strips sides' harmonic mean >= %d (%d faulty)", shapes, split, two_d, at_cap, GEMM_PARTS_MAX,
          GEMM_PART_ALIGN, GEMM_PART_FLOPS, GEMM_STRIPS_MAX, GEMM_PART_SIDE, faults);
    CHECK(t, split > 0 && two_d > 0 && at_cap > 0, "gemm_partition: the shapes include split ones (%d), grids in "
          "both sides (%d) and grids at the cap (%d)", split, two_d, at_cap);
    CHECK(t, threads_differ == 0, "gemm_partition: the same grid at 1, 2, 3 and 128 threads and inside a parallel "
          "region (%d differ)", threads_differ);
}

/* The grids of docs/mfu.md's scaling model (scripts/dev/gemm_partition_model.py, which writes the rule
 * again in Python): row_parts x col_parts of each product (forward, d_in, dW). */
typedef struct {
    const char *what;
    Product s;
    int row_parts, col_parts;
} Listed;

static void test_listed(TestTally *t) {
    const Listed listed[] = {
        /* bert-mini 32 x 128: 4096 rows, H 256, I 1024, 614 labelled positions of 30522 words */
        {"mini qkv forward", {4096, 768, 256}, 16, 4},
        {"mini qkv d_in", {4096, 256, 768}, 16, 1},
        {"mini qkv dW", {768, 256, 4096}, 6, 1},
        {"mini attention-out forward and d_in", {4096, 256, 256}, 16, 1},
        {"mini attention-out dW", {256, 256, 4096}, 4, 1},
        {"mini feed-forward in forward, out d_in", {4096, 1024, 256}, 16, 4},
        {"mini feed-forward in d_in, out forward", {4096, 256, 1024}, 16, 1},
        {"mini feed-forward in dW", {1024, 256, 4096}, 16, 1},
        {"mini feed-forward out dW", {256, 1024, 4096}, 1, 16},
        {"mini MLM transform forward and d_in", {614, 256, 256}, 5, 1},
        {"mini MLM transform dW", {256, 256, 614}, 4, 1},
        {"mini decoder forward", {614, 30522, 256}, 2, 60},
        {"mini decoder d_in", {614, 256, 30522}, 5, 1},
        {"mini decoder dW", {30522, 256, 614}, 120, 1},
        /* bert-base 8 x 128: 1024 rows, H 768, I 3072, 154 labelled positions */
        {"base qkv forward", {1024, 2304, 768}, 4, 12},
        {"base qkv d_in", {1024, 768, 2304}, 16, 1},
        {"base qkv dW", {2304, 768, 1024}, 12, 4},
        {"base attention-out forward and d_in", {1024, 768, 768}, 16, 1},
        {"base attention-out dW", {768, 768, 1024}, 6, 2},
        {"base feed-forward in forward, out d_in", {1024, 3072, 768}, 4, 16},
        {"base feed-forward in d_in, out forward", {1024, 768, 3072}, 16, 1},
        {"base feed-forward in dW", {3072, 768, 1024}, 16, 4},
        {"base feed-forward out dW", {768, 3072, 1024}, 4, 16},
        {"base MLM transform forward and d_in", {154, 768, 768}, 1, 6},
        {"base MLM transform dW", {768, 768, 154}, 6, 2},
        {"base decoder forward", {154, 30522, 768}, 1, 120},
        {"base decoder d_in", {154, 768, 30522}, 1, 6},
        {"base decoder dW", {30522, 768, 154}, 60, 2},
    };
    int wrong = 0;
    for (size_t i = 0; i < sizeof listed / sizeof listed[0]; i++) {
        const Listed *l = &listed[i];
        const GemmPartition g = gemm_partition(l->s.M, l->s.N, l->s.K);
        if (g.row_parts != l->row_parts || g.col_parts != l->col_parts) {
            wrong++;
            printf("  %s %d x %d x %d: %d x %d blocks, docs/mfu.md lists %d x %d\n", l->what, l->s.M, l->s.N, l->s.K,
                   g.row_parts, g.col_parts, l->row_parts, l->col_parts);
        }
    }
    CHECK(t, wrong == 0, "gemm_partition: the grids docs/mfu.md lists for %zu products of bert-mini and bert-base "
          "(%d differ)", sizeof listed / sizeof listed[0], wrong);
}

/* "" or what gemm_partition_threads's grid g of s at `threads` breaks (the cover: grid_fault's) */
static const char *thread_grid_fault(const Product *s, const GemmPartition *g, int threads) {
    const int parts = gemm_partition_parts(g);
    if (parts > threads)
        return "more blocks than threads";
    if (threads == 1 && parts > 1)
        return "more than one block at one thread";
    const int last_rows = s->M - (g->row_parts - 1) * g->rows, last_cols = s->N - (g->col_parts - 1) * g->cols;
    if ((g->row_parts > 1 && (g->rows % GEMM_THREAD_ALIGN || last_rows < GEMM_THREAD_ALIGN)) ||
        (g->col_parts > 1 && (g->cols % GEMM_THREAD_ALIGN || last_cols < GEMM_THREAD_ALIGN)))
        return "a side not a whole number of GEMM_THREAD_ALIGN, or a last one under it";
    if (parts > 1 && 2.0 * g->rows * (double)g->cols * s->K < GEMM_PART_FLOPS)
        return "a block under GEMM_PART_FLOPS";
    return cover_fault(s, g); /* without grid_fault's bounds on gemm_partition's own rule */
}

static void test_threads_rule(TestTally *t) {
    const int sides[] = {1, 2, 15, 16, 17, 31, 33, 63, 65, 129, 256, 300, 634, 1000, 4096, 30522};
    const int depths[] = {1, 64, 256, 4096}, threads[] = {1, 2, 3, 4, 7, 8, 64, 128};
    int shapes = 0, faults = 0, split = 0;
    for (size_t i = 0; i < sizeof sides / sizeof *sides; i++)
        for (size_t j = 0; j < sizeof sides / sizeof *sides; j++)
            for (size_t d = 0; d < sizeof depths / sizeof *depths; d++)
                for (size_t k = 0; k < sizeof threads / sizeof *threads; k++) {
                    const Product s = {sides[i], sides[j], depths[d]};
                    if ((double)s.M * s.N > 16e6)
                        continue;
                    shapes++;
                    const GemmPartition g = gemm_partition_threads(s.M, s.N, s.K, threads[k]);
                    const char *fault = thread_grid_fault(&s, &g, threads[k]);
                    split += gemm_partition_parts(&g) > 1;
                    if (*fault && faults++ < 5)
                        printf("  %d x %d x %d at %d threads: %d x %d blocks of %d x %d: %s\n", s.M, s.N, s.K,
                               threads[k], g.row_parts, g.col_parts, g.rows, g.cols, fault);
                }
    CHECK(t, faults == 0 && split > 0, "gemm_partition_threads: %d shapes and thread counts (%d split): every "
          "element in one block, at most one block a thread, sides whole %d-multiples with no last one under "
          "%d, blocks >= %g FLOPs (%d faulty)", shapes, split, GEMM_THREAD_ALIGN, GEMM_THREAD_ALIGN,
          GEMM_PART_FLOPS, faults);
    const GemmPartition dw = gemm_partition_threads(256, 1024, 4096, 2);
    const GemmPartition decoder = gemm_partition_threads(634, 256, 30522, 2);
    CHECK(t, gemm_partition_parts(&dw) == 2 && gemm_partition_parts(&decoder) == 2,
          "gemm_partition_threads at 2 threads: bert-mini's feed-forward dW [256, 1024] (K 4096) and decoder d_in "
          "[634, 256] (K 30522) in 2 blocks each (%d x %d, %d x %d)", dw.row_parts, dw.col_parts, decoder.row_parts,
          decoder.col_parts);
}

int main(void) {
    TestTally t = {0};
    test_rule(&t);
    test_listed(&t);
    test_threads_rule(&t);
    return tally_exit(&t);
}
