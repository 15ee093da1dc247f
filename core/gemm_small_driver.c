/* The small-product kernels' driver (core/gemm_small_driver.h). */
#include "core/gemm_small_driver.h"

/* About this many floats of op(A) per pass (half of a 1 MB L2). */
enum { PASS_FLOATS = 128 * 1024 };

/* The rows of op(A) a pass takes at kc values of k: about PASS_FLOATS, a multiple of unit (at least unit). */
static int rows_per_pass(int kc, int unit) {
    const int rows = PASS_FLOATS / (kc > 0 ? kc : 1) / unit * unit;
    return rows > unit ? rows : unit;
}

void gemm_small_drive(const GemmSmallKernel *kernel, int ta, int tb, int M, int N, int K, const float *A, int lda,
                      const float *B, int ldb, float beta, const float *bias, float *C, int ldc) {
    float panel[GEMM_SMALL_PANEL_FLOATS] __attribute__((aligned(64)));
    const int mr = kernel->mr, nr = kernel->nr, kc_max = kernel->kc;
    const int at = ta != 0, mc_max = rows_per_pass(K < kc_max ? K : kc_max, kernel->pass_unit);
    for (int m0 = 0; m0 < M; m0 += mc_max) {
        const int mc = M - m0 < mc_max ? M - m0 : mc_max;
        for (int n0 = 0; n0 < N; n0 += nr) {
            const int nc = N - n0 < nr ? N - n0 : nr;
            for (int k0 = 0; k0 < K; k0 += kc_max) {
                const int kc = K - k0 < kc_max ? K - k0 : kc_max;
                const int in_place = !tb && kernel->reads_b_in_place(nc, mc);
                const float *b = in_place ? B + (size_t)k0 * ldb + n0 : panel;
                if (tb)
                    kernel->pack_transposed(panel, B, ldb, k0, kc, n0, nc);
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
