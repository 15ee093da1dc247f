/* What the small-product kernels (core/gemm_small.c's AVX2, core/gemm_small_avx512.c) share: the
 * loop over blocks of C and the instantiation of a kernel's blocks. A kernel brings its intrinsics
 * alone: its block of C and its copies of op(B) into the panel. */
#pragma once

#include <stddef.h>

/* C block [rows, cols] (rows <= mr, cols <= nr; halves = 1 when cols <= nr / 2): kc values of k of
 * each element's chain, started (first) from bias [0 .. cols] in every row, or without a bias (NULL)
 * from beta C, or continued from C. op(A) [r, k] at A [r rs + k cs] (rs, cs = ld_a, 1; transposed 1,
 * ld_a), op(B) [k, 0 .. cols] at b + k ld_b. */
typedef void (*GemmSmallBlock)(int kc, const float *A, size_t ld_a, const float *b, size_t ld_b, float *C, int ldc,
                               int cols, int first, float beta, const float *bias);

typedef struct {
    int mr, nr, kc; /* C in blocks of mr x nr; op(B) in strips of nr columns and kc values of k */
    const GemmSmallBlock (*blocks)[2][2]; /* [rows - 1][op(A) transposed][halves - 1] */
    /* Blocks of up to narrow_mr rows and one half (nr / 2 columns) [rows - 1][op(A) transposed], or
     * NULL: a strip of op(B) at most nr / 2 wide (a head's 16 columns) then keeps narrow_mr chains in
     * flight, not mr. */
    const GemmSmallBlock (*narrow_blocks)[2];
    int narrow_mr;
    int pass_unit; /* a pass's rows are a multiple of it: of mr, and of narrow_mr with narrow_blocks */
    /* Whether the blocks read op(B) = B where it lies for a strip of nc columns mc rows of C take
     * (else the panel). */
    int (*reads_b_in_place)(int nc, int mc);
    /* panel [kc][nr] = B [k0 .. k0+kc, n0 .. n0+nc], columns nc .. nr zero (64-byte aligned). */
    void (*pack_rows)(float *restrict panel, const float *B, int ldb, int k0, int kc, int n0, int nc);
    /* panel [kc][nr] = op(B) [k0 .. k0+kc, n0 .. n0+nc] for op(B) = B^T (B [N,K]), columns nc .. nr
     * zero (64-byte aligned). */
    void (*pack_transposed)(float *restrict panel, const float *B, int ldb, int k0, int kc, int n0, int nc);
} GemmSmallKernel;

/* The panel's size: kc nr of every kernel at most. */
enum { GEMM_SMALL_PANEL_FLOATS = 256 * 32 };

/* gemm_small (core/gemm_small.h) on the kernel, K > 0: C in passes of about 128 Ki floats of op(A)
 * (a multiple of mr and, with narrow_blocks, of narrow_mr); per pass, strips of nr columns of op(B),
 * kc values of k at a time, each read in place or copied into the panel; per strip, the pass's
 * blocks in row order, each through its table entry (blocks of narrow_mr rows through narrow_blocks
 * for a strip of at most nr / 2 columns). A k range past the first continues each
 * element's chain from the fp32 value stored in C: the same bits as one unbroken chain. bias [N]
 * (or NULL): each element's chain starts from bias [n] instead of beta C. */
void gemm_small_drive(const GemmSmallKernel *kernel, int ta, int tb, int M, int N, int K, const float *A, int lda,
                      const float *B, int ldb, float beta, const float *bias, float *C, int ldc);

/* Defines the table `table` of a kernel of mr (a literal: 6 or 8) rows, [rows - 1][op(A)
 * transposed][halves - 1], and its entries: one function per (rows, halves, op(A)), compiled with
 * the attributes attrs (empty, or a target), calling the file's always-inline
 * block(rows, halves, a_transposed, <GemmSmallBlock's arguments>) so that its loops unroll for each. */
#define GEMM_SMALL_BLOCKS(table, mr, attrs)                                                                  \
    GEMM_SMALL_FOR_ROWS_##mr(GEMM_SMALL_BLOCK_FNS_, attrs)                                                   \
    static const GemmSmallBlock table[mr][2][2] = {GEMM_SMALL_FOR_ROWS_##mr(GEMM_SMALL_BLOCK_ROW_, attrs)};

#define GEMM_SMALL_FOR_ROWS_6(X, attrs) X(attrs, 1) X(attrs, 2) X(attrs, 3) X(attrs, 4) X(attrs, 5) X(attrs, 6)
#define GEMM_SMALL_FOR_ROWS_8(X, attrs) GEMM_SMALL_FOR_ROWS_6(X, attrs) X(attrs, 7) X(attrs, 8)
#define GEMM_SMALL_BLOCK_FN_(attrs, rows, halves, at)                                                        \
    static attrs void block_##rows##_##halves##_##at(int kc, const float *A, size_t ld_a, const float *b,    \
                                                     size_t ld_b, float *C, int ldc, int cols, int first,    \
                                                     float beta, const float *bias) {                        \
        block(rows, halves, at, kc, A, ld_a, b, ld_b, C, ldc, cols, first, beta, bias);                      \
    }
#define GEMM_SMALL_BLOCK_FNS_(attrs, rows)                                                                   \
    GEMM_SMALL_BLOCK_FN_(attrs, rows, 1, 0) GEMM_SMALL_BLOCK_FN_(attrs, rows, 2, 0)                          \
    GEMM_SMALL_BLOCK_FN_(attrs, rows, 1, 1) GEMM_SMALL_BLOCK_FN_(attrs, rows, 2, 1)
#define GEMM_SMALL_BLOCK_ROW_(attrs, rows)                                                                   \
    {{block_##rows##_1_0, block_##rows##_2_0}, {block_##rows##_1_1, block_##rows##_2_1}},
