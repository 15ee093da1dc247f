/* The panel copies and pass sizes the small-product kernels share (core/gemm_small_pack.h). */
#include "core/gemm_small_pack.h"

#include <immintrin.h>
#include <stddef.h>

int gemm_small_rows_per_pass(int kc, int mr) {
    const int rows = GEMM_SMALL_PASS_FLOATS / (kc > 0 ? kc : 1) / mr * mr;
    return rows > mr ? rows : mr;
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

void gemm_small_pack_transposed(float *restrict panel, int nr, const float *B, int ldb, int k0, int kc, int n0,
                                int nc) {
    const int nc8 = nc / 8 * 8, kc8 = kc / 8 * 8;
    for (int j0 = 0; j0 < nc8; j0 += 8) { /* 8 rows of B at a time: 8 x 8 tiles transposed in registers */
        const float *rows = B + (size_t)n0 * ldb + (size_t)j0 * ldb + k0;
        for (int k = 0; k < kc8; k += 8) {
            __m256 r[8];
            for (int j = 0; j < 8; j++)
                r[j] = _mm256_loadu_ps(rows + (size_t)j * ldb + k);
            transpose8(r);
            for (int i = 0; i < 8; i++)
                _mm256_storeu_ps(panel + (size_t)(k + i) * nr + j0, r[i]);
        }
        for (int k = kc8; k < kc; k++)
            for (int j = 0; j < 8; j++)
                panel[(size_t)k * nr + j0 + j] = rows[(size_t)j * ldb + k];
    }
    if (nc8 == nr)
        return;
    for (int k = 0; k < kc; k++) { /* zeros from the last whole 8 columns on, then the last rows */
        float *out = panel + (size_t)k * nr;
        for (int j = nc8; j < nr; j += 8)
            _mm256_storeu_ps(out + j, _mm256_setzero_ps());
        for (int j = nc8; j < nc; j++)
            out[j] = B[(size_t)(n0 + j) * ldb + k0 + k];
    }
}
