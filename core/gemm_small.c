/* The direct fp32 kernel for small products (core/gemm_small.h).
 *
 * C is computed in blocks of up to MR x NR = 6 x 16 elements held in 12 AVX2 registers. op(B) is
 * read a strip of NR columns at a time: in place when it is B and the strip is whole, else copied
 * up to KC values of k at a time into a panel on the stack (panel [k][NR], columns past N zero); op(A) is
 * read where it lies, one broadcast per row and k (A [M,K]: along a row; A^T: along a column).
 * A k range past the first continues each element's chain from the value stored in C, which is
 * the fp32 value the chain held: the same bits as one unbroken chain. */
#include "core/gemm_small.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "core/gemm_small_avx512.h"
#include "core/gemm_small_pack.h"

enum { MR = 6, NR = 16, KC = 256 };
/* The products of small models (a width-256 feed-forward over ~1000 rows: 2 x 256 x 256 x 976 FLOPs)
 * and no larger. scripts/dev/gemm_small.sh on a Zen 5 (docs/bench.md, "The small-model step"): the
 * AVX-512 kernel ran 1.9-2.2x OpenBLAS's Haswell kernels at these sizes and still 1.3x at bert-mini's
 * 4096-row products, the AVX2 kernel 0.95-1.05x; the large products stay on OpenBLAS, whose cache
 * blocking and AVX-512 kernels (SkylakeX) are made for them. */
static const double GEMM_SMALL_FLOPS_MAX = 128.0 * 1024 * 1024;

int gemm_small_fits(int M, int N, int K, float alpha) {
    return alpha == 1.0f && M >= 0 && N >= 0 && K >= 0 && 2.0 * M * N * (double)K <= GEMM_SMALL_FLOPS_MAX;
}

/* Lanes 0 .. count-1 of 8 set. */
static inline __m256i lane_mask(int count) {
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), index);
}

/* panel [kc][NR] = op(B) [k0 .. k0+kc, n0 .. n0+nc], columns nc .. NR zero. */
static void pack_panel(float *restrict panel, int tb, const float *B, int ldb, int k0, int kc, int n0, int nc) {
    if (!tb) { /* rows of B: masked loads (a short memcpy per row costs more than the product) */
        const __m256i mask0 = lane_mask(nc), mask1 = lane_mask(nc - 8);
        for (int k = 0; k < kc; k++) {
            const float *row = B + (size_t)(k0 + k) * ldb + n0;
            _mm256_store_ps(panel + (size_t)k * NR, _mm256_maskload_ps(row, mask0));
            _mm256_store_ps(panel + (size_t)k * NR + 8, _mm256_maskload_ps(row + 8, mask1));
        }
        return;
    }
    gemm_small_pack_transposed(panel, NR, B, ldb, k0, kc, n0, nc);
}

/* C block [rows, cols] (rows <= MR, cols <= NR, halves = 1 when cols <= 8): chains over kc values
 * of k, started from beta C (first) or continued from C. a(r, k) = A [r rs + k cs]. */
static inline __attribute__((always_inline)) void block(const int rows, const int halves, const int a_transposed,
                                                        int kc, const float *A, size_t ld_a, const float *panel,
                                                        size_t ld_p, float *C, int ldc, int cols, int first,
                                                        float beta) {
    const size_t rs = a_transposed ? 1 : ld_a, cs = a_transposed ? ld_a : 1;
    __m256 acc[MR][2];
    const int full = cols == NR;
    const __m256i mask0 = lane_mask(cols), mask1 = lane_mask(cols - 8);
    const __m256 scale = _mm256_set1_ps(beta);
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++) {
        float *c = C + (size_t)r * ldc;
        if (first && beta == 0.0f) {
            acc[r][0] = acc[r][1] = _mm256_setzero_ps();
            continue;
        }
        acc[r][0] = full ? _mm256_loadu_ps(c) : _mm256_maskload_ps(c, mask0);
        if (halves > 1)
            acc[r][1] = full ? _mm256_loadu_ps(c + 8) : _mm256_maskload_ps(c + 8, mask1);
        if (first) {
            acc[r][0] = _mm256_mul_ps(acc[r][0], scale);
            if (halves > 1)
                acc[r][1] = _mm256_mul_ps(acc[r][1], scale);
        }
    }
    for (int k = 0; k < kc; k++) {
        const __m256 b0 = _mm256_loadu_ps(panel + (size_t)k * ld_p);
        const __m256 b1 = halves > 1 ? _mm256_loadu_ps(panel + (size_t)k * ld_p + 8) : b0;
        const float *a = A + (size_t)k * cs;
#pragma GCC unroll 6
        for (int r = 0; r < rows; r++) {
            const __m256 x = _mm256_broadcast_ss(a + (size_t)r * rs);
            acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
            if (halves > 1)
                acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++) {
        float *c = C + (size_t)r * ldc;
        if (full) {
            _mm256_storeu_ps(c, acc[r][0]);
            _mm256_storeu_ps(c + 8, acc[r][1]);
        } else {
            _mm256_maskstore_ps(c, mask0, acc[r][0]);
            if (halves > 1)
                _mm256_maskstore_ps(c + 8, mask1, acc[r][1]);
        }
    }
}

typedef void (*BlockFn)(int kc, const float *A, size_t ld_a, const float *panel, size_t ld_p, float *C, int ldc,
                        int cols, int first, float beta);

/* One instance per (rows, halves, op(A)), the loops unrolled for each. */
#define BLOCK_FN(rows, halves, at)                                                                              \
    static void block_##rows##_##halves##_##at(int kc, const float *A, size_t ld_a, const float *panel,         \
                                               size_t ld_p, float *C, int ldc, int cols, int first, float beta) { \
        block(rows, halves, at, kc, A, ld_a, panel, ld_p, C, ldc, cols, first, beta);                           \
    }
#define BLOCK_FNS(rows) BLOCK_FN(rows, 1, 0) BLOCK_FN(rows, 2, 0) BLOCK_FN(rows, 1, 1) BLOCK_FN(rows, 2, 1)
BLOCK_FNS(1) BLOCK_FNS(2) BLOCK_FNS(3) BLOCK_FNS(4) BLOCK_FNS(5) BLOCK_FNS(6)
#define BLOCK_ROW(rows) {{block_##rows##_1_0, block_##rows##_2_0}, {block_##rows##_1_1, block_##rows##_2_1}}
/* [rows - 1][op(A) transposed][halves - 1] */
static const BlockFn block_fns[MR][2][2] = {BLOCK_ROW(1), BLOCK_ROW(2), BLOCK_ROW(3),
                                             BLOCK_ROW(4), BLOCK_ROW(5), BLOCK_ROW(6)};

static void gemm_small_avx2(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                            float beta, float *C, int ldc);

int gemm_small_isa_runs_here(GemmSmallIsa isa) {
    return isa == GEMM_SMALL_AVX2 || (isa == GEMM_SMALL_AVX512 && __builtin_cpu_supports("avx512f"));
}

void gemm_small_isa(GemmSmallIsa isa, int ta, int tb, int M, int N, int K, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc) {
    if (K <= 0) { /* no products: C = beta C */
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++)
                C[(size_t)m * ldc + n] = beta != 0.0f ? beta * C[(size_t)m * ldc + n] : 0.0f;
        return;
    }
    if (isa == GEMM_SMALL_AVX512)
        gemm_small_avx512(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    else
        gemm_small_avx2(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

void gemm_small(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc) {
    /* the same bits on either kernel: the faster one where the CPU has it */
    gemm_small_isa(gemm_small_isa_runs_here(GEMM_SMALL_AVX512) ? GEMM_SMALL_AVX512 : GEMM_SMALL_AVX2, ta, tb, M, N,
                   K, A, lda, B, ldb, beta, C, ldc);
}

/* The AVX2 kernel (K > 0). */
static void gemm_small_avx2(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                            float beta, float *C, int ldc) {
    float panel[KC * NR] __attribute__((aligned(64)));
    const int at = ta != 0, MC = gemm_small_rows_per_pass(K < KC ? K : KC, MR);
    for (int m0 = 0; m0 < M; m0 += MC) {
        const int mc = M - m0 < MC ? M - m0 : MC;
        for (int n0 = 0; n0 < N; n0 += NR) {
            const int nc = N - n0 < NR ? N - n0 : NR;
            for (int k0 = 0; k0 < K; k0 += KC) {
                const int kc = K - k0 < KC ? K - k0 : KC;
                /* op(B) = B with whole strips: read in place; else the panel */
                const int direct = !tb && nc == NR;
                const float *b = direct ? B + (size_t)k0 * ldb + n0 : panel;
                if (!direct)
                    pack_panel(panel, tb, B, ldb, k0, kc, n0, nc);
                for (int m = m0; m < m0 + mc; m += MR) {
                    const int rows = m0 + mc - m < MR ? m0 + mc - m : MR;
                    /* op(A) [m, k0]: A [m, k0] or A^T's, i.e. A [k0, m] */
                    const float *a = at ? A + (size_t)k0 * lda + m : A + (size_t)m * lda + k0;
                    block_fns[rows - 1][at][nc > 8](kc, a, (size_t)lda, b, direct ? (size_t)ldb : NR,
                                                    C + (size_t)m * ldc + n0, ldc, nc, k0 == 0, beta);
                }
            }
        }
    }
}
