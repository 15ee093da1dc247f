/* The direct small-product kernel (core/gemm_small.h) against one cblas_sgemm call (OpenBLAS on
 * the calling thread), interleaved: per shape, R rounds of (kernel, OpenBLAS) or (OpenBLAS, kernel)
 * alternately, each timing enough repetitions for ~2 ms; prints GFLOP/s medians and the median of
 * the per-round time ratios (kernel / OpenBLAS). Used to set GEMM_SMALL_FLOPS_MAX.
 * The kernel is gemm_small's (AVX-512 where the CPU has it), or AVX2 with --avx2.
 * Usage: gemm_small [--avx2] [--rounds R] TA TB M N K ...   (TA, TB: N or T) */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "core/gemm_small.h"

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double seconds_per_call(GemmSmallIsa isa, int engine, int ta, int tb, int M, int N, int K, const float *A, int lda,
                               const float *B, int ldb, float *C, int ldc, int reps) {
    const double t0 = omp_get_wtime();
    for (int r = 0; r < reps; r++) {
        if (engine)
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f,
                        A, lda, B, ldb, 1.0f, C, ldc);
        else
            gemm_small_isa(isa, ta, tb, M, N, K, A, lda, B, ldb, 1.0f, NULL, C, ldc);
    }
    return (omp_get_wtime() - t0) / reps;
}

int main(int argc, char **argv) {
    int rounds = 7, a = 1;
    GemmSmallIsa isa = gemm_small_isa_runs_here(GEMM_SMALL_AVX512) ? GEMM_SMALL_AVX512 : GEMM_SMALL_AVX2;
    if (argc > 1 && !strcmp(argv[1], "--avx2"))
        isa = GEMM_SMALL_AVX2, a++;
    if (argc > a + 1 && !strcmp(argv[a], "--rounds"))
        rounds = atoi(argv[a + 1]), a += 2;
    if (rounds < 1 || rounds > 99 || (argc - a) % 5 != 0 || argc == a) {
        fprintf(stderr, "usage: gemm_small [--avx2] [--rounds R] TA TB M N K ...\n");
        return 2;
    }
    printf("%s kernel\n%-16s %10s %10s %12s\n", isa == GEMM_SMALL_AVX512 ? "AVX-512" : "AVX2", "shape", "kernel GF",
           "OpenBLAS GF", "time ratio");
    for (; a < argc; a += 5) {
        const int ta = argv[a][0] == 'T', tb = argv[a + 1][0] == 'T';
        const int M = atoi(argv[a + 2]), N = atoi(argv[a + 3]), K = atoi(argv[a + 4]);
        const int lda = ta ? M : K, ldb = tb ? K : N;
        float *A = xalloc_floats((size_t)M * K), *B = xalloc_floats((size_t)K * N), *C = xalloc_floats((size_t)M * N);
        for (size_t e = 0; e < (size_t)M * K; e++)
            A[e] = (float)(e % 13) * 0.01f - 0.06f;
        for (size_t e = 0; e < (size_t)K * N; e++)
            B[e] = (float)(e % 7) * 0.01f - 0.03f;
        const double flops = 2.0 * M * N * K;
        const int reps = flops > 4e6 ? 1 + (int)(8e7 / flops) : 1 + (int)(8e7 / 4e6 * 4e6 / flops);
        double t[2][99], ratio[99];
        for (int e = 0; e < 2; e++) /* warm-up */
            seconds_per_call(isa, e, ta, tb, M, N, K, A, lda, B, ldb, C, N, reps);
        for (int r = 0; r < rounds; r++) {
            for (int i = 0; i < 2; i++) {
                const int e = (r + i) % 2;
                t[e][r] = seconds_per_call(isa, e, ta, tb, M, N, K, A, lda, B, ldb, C, N, reps);
            }
            ratio[r] = t[0][r] / t[1][r];
        }
        char shape[40];
        snprintf(shape, sizeof shape, "%c%c %dx%dx%d", ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K);
        const double r_med = median(ratio, rounds);
        printf("%-16s %10.1f %10.1f %12.3f\n", shape, flops / median(t[0], rounds) * 1e-9,
               flops / median(t[1], rounds) * 1e-9, r_med);
        free(A), free(B), free(C);
    }
    return 0;
}
