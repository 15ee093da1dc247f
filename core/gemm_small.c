/* The direct fp32 kernel for small products (core/gemm_small.h), and its AVX2 kernel.
 *
 * C is computed in blocks of up to MR x NR = 6 x 16 elements held in 12 AVX2 registers, by
 * core/gemm_small_driver.c's loop. op(B) is read a strip of NR columns at a time: in place when it
 * is B and the strip is whole, else copied up to KC values of k at a time into a panel (panel
 * [k][NR], columns past N zero); op(A) is read where it lies, one broadcast per row and k (A [M,K]:
 * along a row; A^T: along a column). */
#include "core/gemm_small.h"

#include <immintrin.h>
#include <stddef.h>
#include <strings.h>

#include "core/gemm_small_avx512.h"
#include "core/gemm_small_driver.h"

enum { MR = 6, NR = 16, KC = 256 };
/* The products of small models (a width-256 feed-forward over ~1000 rows: 2 x 256 x 256 x 976 FLOPs)
 * and of fine-tuning at a few hundred rows (bert-mini's feed-forward over the ~431 real tokens of 32
 * unpadded SST-2 sentences: 2 x 431 x 256 x 1024; this bound takes up to 768 such rows), no larger.
 * scripts/dev/gemm_small.sh on a Zen 5 (docs/bench.md, "The small-model step" and "Small-row
 * fine-tuning"): the AVX-512 kernel ran 1.3-2.2x OpenBLAS's Haswell kernels at these sizes and still
 * 1.3x at bert-mini's 4096-row products, the AVX2 kernel 0.95-1.05x. Larger products (every one of
 * bert-mini's 32 x 128 pretraining step: 4096 x 256 x 256 is 512 Mi FLOPs) go to OpenBLAS unless
 * gemm_small_outruns_blas (below). */
static const double GEMM_SMALL_FLOPS_MAX = 384.0 * 1024 * 1024;

int gemm_small_fits(int M, int N, int K, float alpha) {
    return alpha == 1.0f && M >= 0 && N >= 0 && K >= 0 && 2.0 * M * N * (double)K <= GEMM_SMALL_FLOPS_MAX;
}

/* Above the bound, scripts/dev/gemm_small.sh at bert-mini's 32 x 128 pretraining products (4096-row
 * linear layers and their dX, dW; the decoder at 634 labelled rows, 30522 columns; docs/bench-peer.md,
 * "fp32 products past gemm_small's bound"): the AVX-512 kernel ran 1.4-1.7x OpenBLAS's Haswell
 * kernels (134-167 GFLOP/s against 90-102) but 0.74-0.95x its SkylakeX kernels (170-191), which
 * OpenBLAS 0.3.21 also runs for the Cooperlake core it picks on a Zen 5 by itself. */
int gemm_small_outruns_blas(const char *blas_core, int cpu_avx512) {
    static const char *const avx512_cores[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    if (!cpu_avx512 || !blas_core)
        return 0;
    for (size_t i = 0; i < sizeof avx512_cores / sizeof *avx512_cores; i++)
        if (strcasecmp(blas_core, avx512_cores[i]) == 0)
            return 0;
    return 1;
}

/* Lanes 0 .. count-1 of 8 set. */
static inline __m256i lane_mask(int count) {
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), index);
}

/* B in place in whole strips only: the blocks load op(B) unmasked. */
static int reads_b_in_place(int nc, int mc) {
    (void)mc;
    return nc == NR;
}

/* panel [kc][NR] = B [k0 .. k0+kc, n0 .. n0+nc], columns nc .. NR zero: masked loads (a short
 * memcpy per row costs more than the product). */
static void pack_rows(float *restrict panel, const float *B, int ldb, int k0, int kc, int n0, int nc) {
    const __m256i mask0 = lane_mask(nc), mask1 = lane_mask(nc - 8);
    for (int k = 0; k < kc; k++) {
        const float *row = B + (size_t)(k0 + k) * ldb + n0;
        _mm256_store_ps(panel + (size_t)k * NR, _mm256_maskload_ps(row, mask0));
        _mm256_store_ps(panel + (size_t)k * NR + 8, _mm256_maskload_ps(row + 8, mask1));
    }
}

/* The 8 x 8 block in r transposed in place: r[i] [j] becomes r[j] [i]. */
static inline void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* panel [kc][NR] = op(B) [k0 .. k0+kc, n0 .. n0+nc] for op(B) = B^T (B [N,K], row stride ldb),
 * columns nc .. NR zero: 8 x 8 tiles transposed in registers, a tile's rows past nc zero and its k
 * past kc neither read (masked loads) nor stored, so the edges of a strip take the tiles' path too
 * (not one scalar load per element through the stack). */
static void pack_transposed(float *restrict panel, const float *B, int ldb, int k0, int kc, int n0, int nc) {
    for (int j0 = 0; j0 < NR; j0 += 8) { /* 8 rows of B at a time */
        const int rows = nc - j0 >= 8 ? 8 : nc - j0 > 0 ? nc - j0 : 0;
        const float *tile_rows = B + (size_t)(n0 + j0) * ldb + k0;
        for (int k = 0; k < kc; k += 8) {
            const int ks = kc - k < 8 ? kc - k : 8;
            const __m256i k_mask = lane_mask(ks);
            __m256 r[8];
            for (int j = 0; j < 8; j++) {
                const float *row = tile_rows + (size_t)j * ldb + k;
                r[j] = j >= rows  ? _mm256_setzero_ps()
                       : ks == 8 ? _mm256_loadu_ps(row)
                                 : _mm256_maskload_ps(row, k_mask);
            }
            transpose8(r);
            for (int i = 0; i < ks; i++)
                _mm256_store_ps(panel + (size_t)(k + i) * NR + j0, r[i]);
        }
    }
}

/* GemmSmallBlock (core/gemm_small_driver.h) for MR x NR, halves of 8 columns. */
static inline __attribute__((always_inline)) void block(const int rows, const int halves, const int a_transposed,
                                                        int kc, const float *A, size_t ld_a, const float *b,
                                                        size_t ld_b, float *C, int ldc, int cols, int first,
                                                        float beta, const float *bias) {
    const size_t rs = a_transposed ? 1 : ld_a, cs = a_transposed ? ld_a : 1;
    __m256 acc[MR][2];
    const int full = cols == NR;
    const __m256i mask0 = lane_mask(cols), mask1 = lane_mask(cols - 8);
    const __m256 scale = _mm256_set1_ps(beta);
#pragma GCC unroll 6
    for (int r = 0; r < rows; r++) {
        float *c = C + (size_t)r * ldc;
        if (first && bias) { /* every row's chains from the bias */
            acc[r][0] = full ? _mm256_loadu_ps(bias) : _mm256_maskload_ps(bias, mask0);
            acc[r][1] = halves > 1 ? (full ? _mm256_loadu_ps(bias + 8) : _mm256_maskload_ps(bias + 8, mask1))
                                   : _mm256_setzero_ps();
            continue;
        }
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
        const __m256 b0 = _mm256_loadu_ps(b + (size_t)k * ld_b);
        const __m256 b1 = halves > 1 ? _mm256_loadu_ps(b + (size_t)k * ld_b + 8) : b0;
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

GEMM_SMALL_BLOCKS(block_fns, 6, /* the build's AVX2 */)
_Static_assert(sizeof block_fns / sizeof *block_fns == MR && KC * NR <= GEMM_SMALL_PANEL_FLOATS, "MR, KC x NR");
static const GemmSmallKernel avx2_kernel = {.mr = MR,
                                            .nr = NR,
                                            .kc = KC,
                                            .blocks = block_fns,
                                            .pass_unit = MR,
                                            .reads_b_in_place = reads_b_in_place,
                                            .pack_rows = pack_rows,
                                            .pack_transposed = pack_transposed};

int gemm_small_isa_runs_here(GemmSmallIsa isa) {
    return isa == GEMM_SMALL_AVX2 || (isa == GEMM_SMALL_AVX512 && __builtin_cpu_supports("avx512f"));
}

void gemm_small_isa(GemmSmallIsa isa, int ta, int tb, int M, int N, int K, const float *A, int lda,
                    const float *B, int ldb, float beta, const float *bias, float *C, int ldc) {
    if (K <= 0) { /* no products: C = bias, or beta C */
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++)
                C[(size_t)m * ldc + n] = bias ? bias[n] : beta != 0.0f ? beta * C[(size_t)m * ldc + n] : 0.0f;
        return;
    }
    gemm_small_drive(isa == GEMM_SMALL_AVX512 ? &gemm_small_avx512_kernel : &avx2_kernel, ta, tb, M, N, K, A, lda, B,
                     ldb, beta, bias, C, ldc);
}

/* the same bits on either kernel: the faster one where the CPU has it */
static GemmSmallIsa fastest(void) {
    return gemm_small_isa_runs_here(GEMM_SMALL_AVX512) ? GEMM_SMALL_AVX512 : GEMM_SMALL_AVX2;
}

void gemm_small(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                float beta, float *C, int ldc) {
    gemm_small_isa(fastest(), ta, tb, M, N, K, A, lda, B, ldb, beta, NULL, C, ldc);
}

void gemm_small_bias(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                     const float *bias, float *C, int ldc) {
    gemm_small_isa(fastest(), ta, tb, M, N, K, A, lda, B, ldb, 0.0f, bias, C, ldc);
}
