/* The small-product kernels' driver (core/gemm_small_driver.h). */
#include "core/gemm_small_driver.h"

#include <immintrin.h>

/* About this many floats of op(A) per pass (half of a 1 MB L2). */
enum { PASS_FLOATS = 128 * 1024 };

/* The rows of op(A) a pass takes at kc values of k: about PASS_FLOATS, a multiple of unit (at least unit). */
static int rows_per_pass(int kc, int unit) {
    const int rows = PASS_FLOATS / (kc > 0 ? kc : 1) / unit * unit;
    return rows > unit ? rows : unit;
}

static int common_multiple(int a, int b) {
    int x = a, y = b;
    while (y) {
        const int t = x % y;
        x = y, y = t;
    }
    return a / x * b;
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

/* Lanes 0 .. count-1 of 8 set. */
static inline __m256i lane_mask(int count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* panel [kc][nr] = op(B) [k0 .. k0+kc, n0 .. n0+nc] for op(B) = B^T (B [N,K], row stride ldb),
 * columns nc .. nr zero (nr a multiple of 8): 8 x 8 tiles transposed in AVX2 registers, a tile's
 * rows past nc zero and its k past kc neither read (masked loads) nor stored, so the edges of a
 * strip take the tiles' path too (not one scalar load per element through the stack). */
static void pack_transposed(float *restrict panel, int nr, const float *B, int ldb, int k0, int kc, int n0, int nc) {
    const __m256 zero = _mm256_setzero_ps();
    for (int j0 = 0; j0 < nr; j0 += 8) { /* 8 rows of B at a time */
        const int rows = nc - j0 >= 8 ? 8 : nc - j0 > 0 ? nc - j0 : 0;
        const float *tile_rows = B + (size_t)(n0 + j0) * ldb + k0;
        for (int k = 0; k < kc; k += 8) {
            const int ks = kc - k < 8 ? kc - k : 8;
            const __m256i k_mask = lane_mask(ks);
            __m256 r[8];
            for (int j = 0; j < 8; j++) {
                const float *row = tile_rows + (size_t)j * ldb + k;
                r[j] = j >= rows ? zero : ks == 8 ? _mm256_loadu_ps(row) : _mm256_maskload_ps(row, k_mask);
            }
            transpose8(r);
            for (int i = 0; i < ks; i++)
                _mm256_storeu_ps(panel + (size_t)(k + i) * nr + j0, r[i]);
        }
    }
}

void gemm_small_drive(const GemmSmallKernel *kernel, int ta, int tb, int M, int N, int K, const float *A, int lda,
                      const float *B, int ldb, float beta, const float *bias, float *C, int ldc) {
    float panel[GEMM_SMALL_PANEL_FLOATS] __attribute__((aligned(64)));
    const int mr = kernel->mr, nr = kernel->nr, kc_max = kernel->kc;
    /* a pass's rows: whole blocks of either height */
    const int pass_unit = kernel->narrow_blocks ? common_multiple(mr, kernel->narrow_mr) : mr;
    const int at = ta != 0, mc_max = rows_per_pass(K < kc_max ? K : kc_max, pass_unit);
    for (int m0 = 0; m0 < M; m0 += mc_max) {
        const int mc = M - m0 < mc_max ? M - m0 : mc_max;
        for (int n0 = 0; n0 < N; n0 += nr) {
            const int nc = N - n0 < nr ? N - n0 : nr;
            for (int k0 = 0; k0 < K; k0 += kc_max) {
                const int kc = K - k0 < kc_max ? K - k0 : kc_max;
                const int in_place = !tb && kernel->reads_b_in_place(nc, mc);
                const float *b = in_place ? B + (size_t)k0 * ldb + n0 : panel;
                if (tb && kernel->pack_transposed)
                    kernel->pack_transposed(panel, B, ldb, k0, kc, n0, nc);
                else if (tb)
                    pack_transposed(panel, nr, B, ldb, k0, kc, n0, nc);
                else if (!in_place)
                    kernel->pack_rows(panel, B, ldb, k0, kc, n0, nc);
                const int narrow = nc <= nr / 2 && kernel->narrow_blocks, block_rows = narrow ? kernel->narrow_mr : mr;
                for (int m = m0; m < m0 + mc; m += block_rows) {
                    const int rows = m0 + mc - m < block_rows ? m0 + mc - m : block_rows;
                    /* op(A) [m, k0]: A [m, k0] or A^T's, i.e. A [k0, m] */
                    const float *a = at ? A + (size_t)k0 * lda + m : A + (size_t)m * lda + k0;
                    const size_t ld_b = in_place ? (size_t)ldb : (size_t)nr;
                    const GemmSmallBlock fn =
                        narrow ? kernel->narrow_blocks[rows - 1][at] : kernel->blocks[rows - 1][at][nc > nr / 2];
                    fn(kc, a, (size_t)lda, b, ld_b, C + (size_t)m * ldc + n0, ldc, nc, k0 == 0, beta,
                       bias ? bias + n0 : NULL);
                }
            }
        }
    }
}
