/* gemm_small (core/gemm_small.h) against libxsmm's JIT kernels (libxsmm-dev 1.17), interleaved: per
 * shape, R rounds of (gemm_small, libxsmm) or (libxsmm, gemm_small) alternately, each timing enough
 * repetitions for ~1 ms; prints GFLOP/s medians and bests, the median of the per-round time ratios
 * (gemm_small / libxsmm), and whether the two give C the same bits (beta 1, random operands).
 * Row-major C [M,N] = op(A) op(B) + C is libxsmm's column-major C^T = op(B)^T op(A)^T: libxsmm's A
 * is B here (its TRANS_A flag for TB = T), its B is A. libxsmm 1.17 JITs no kernel with TRANS_A
 * (NT here): those shapes go through libxsmm_sgemm, which falls back to BLAS; they are marked.
 * Usage: gemm_xsmm [--rounds R] TA TB M N K ...   (TA, TB: N or T) */
#include <libxsmm.h>
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

static double median(const double *values, int n) {
    double v[99];
    memcpy(v, values, sizeof(double) * (size_t)n);
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double least(const double *v, int n) {
    double m = v[0];
    for (int i = 1; i < n; i++)
        m = v[i] < m ? v[i] : m;
    return m;
}

typedef struct {
    int ta, tb, M, N, K;
    libxsmm_smmfunction jit; /* NULL: libxsmm_sgemm */
} Shape;

static void run_xsmm(const Shape *s, const float *A, const float *B, float *C) {
    const float one = 1.0f;
    const libxsmm_blasint m = s->N, n = s->M, k = s->K, ld_a = s->tb ? s->K : s->N, ld_b = s->ta ? s->M : s->K,
                          ld_c = s->N;
    if (s->jit)
        s->jit(B, A, C);
    else
        libxsmm_sgemm(s->tb ? "T" : "N", s->ta ? "T" : "N", &m, &n, &k, &one, B, &ld_a, A, &ld_b, &one, C, &ld_c);
}

static void run_small(const Shape *s, const float *A, const float *B, float *C) {
    gemm_small(s->ta, s->tb, s->M, s->N, s->K, A, s->ta ? s->M : s->K, B, s->tb ? s->K : s->N, 1.0f, C, s->N);
}

int main(int argc, char **argv) {
    int rounds = 15, a = 1;
    if (argc > 2 && !strcmp(argv[1], "--rounds"))
        rounds = atoi(argv[2]), a = 3;
    if (rounds < 1 || rounds > 99 || (argc - a) % 5 != 0 || argc == a) {
        fprintf(stderr, "usage: gemm_xsmm [--rounds R] TA TB M N K ...\n");
        return 2;
    }
    libxsmm_init();
    printf("%-18s %9s %9s %9s %9s %10s  %s\n", "shape", "small GF", "xsmm GF", "best", "best", "time ratio",
           "bits");
    for (; a < argc; a += 5) {
        Shape s = {argv[a][0] == 'T', argv[a + 1][0] == 'T', atoi(argv[a + 2]), atoi(argv[a + 3]), atoi(argv[a + 4]),
                   NULL};
        const float one = 1.0f;
        const int flags = (s.tb ? LIBXSMM_GEMM_FLAG_TRANS_A : 0) | (s.ta ? LIBXSMM_GEMM_FLAG_TRANS_B : 0);
        const libxsmm_blasint ld_a = s.tb ? s.K : s.N, ld_b = s.ta ? s.M : s.K, ld_c = s.N;
        s.jit = libxsmm_smmdispatch(s.N, s.M, s.K, &ld_a, &ld_b, &ld_c, &one, &one, &flags, NULL);
        const size_t a_size = (size_t)s.M * s.K, b_size = (size_t)s.K * s.N, c_size = (size_t)s.M * s.N;
        float *A = xalloc_floats(a_size), *B = xalloc_floats(b_size), *C = xalloc_floats(c_size);
        float *C_small = xalloc_floats(c_size), *C_xsmm = xalloc_floats(c_size);
        srand(7);
        for (size_t e = 0; e < a_size; e++)
            A[e] = (float)rand() / (float)RAND_MAX - 0.5f;
        for (size_t e = 0; e < b_size; e++)
            B[e] = (float)rand() / (float)RAND_MAX - 0.5f;
        for (size_t e = 0; e < c_size; e++)
            C_small[e] = C_xsmm[e] = C[e] = (float)rand() / (float)RAND_MAX - 0.5f;
        run_small(&s, A, B, C_small);
        run_xsmm(&s, A, B, C_xsmm);
        size_t differ = 0;
        for (size_t e = 0; e < c_size; e++)
            differ += memcmp(&C_small[e], &C_xsmm[e], sizeof(float)) != 0;
        const double flops = 2.0 * s.M * s.N * s.K;
        const int reps = 1 + (int)(2e8 / flops / 8);
        double t[2][99], ratio[99];
        for (int r = -1; r < rounds; r++) { /* round -1: warm-up */
            for (int i = 0; i < 2; i++) {
                const int engine = (r + 1 + i) % 2;
                const double t0 = omp_get_wtime();
                for (int q = 0; q < reps; q++)
                    (engine ? run_xsmm : run_small)(&s, A, B, C);
                if (r >= 0)
                    t[engine][r] = (omp_get_wtime() - t0) / reps;
            }
            if (r >= 0)
                ratio[r] = t[0][r] / t[1][r];
        }
        char name[48];
        snprintf(name, sizeof name, "%c%c %dx%dx%d", s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.M, s.N, s.K);
        printf("%-18s %9.1f %9.1f %9.1f %9.1f %10.3f  %s%s\n", name, flops / median(t[0], rounds) * 1e-9,
               flops / median(t[1], rounds) * 1e-9, flops / least(t[0], rounds) * 1e-9,
               flops / least(t[1], rounds) * 1e-9, median(ratio, rounds),
               differ ? "DIFFER" : "same", s.jit ? "" : " (no JIT kernel: libxsmm_sgemm)");
        if (differ)
            printf("  %zu of %zu elements differ\n", differ, c_size);
        free(A), free(B), free(C), free(C_small), free(C_xsmm);
    }
    libxsmm_finalize();
    return 0;
}
