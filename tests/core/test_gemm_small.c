/* core/gemm_small.h: the direct small-product kernels. Each kernel that runs on this CPU (AVX2
 * always; AVX-512 skipped, saying so, without avx512f) gives, for every transpose, beta 0 or 1 (and
 * 0.5) and the odd sizes around its blocks (1, 15, 16, 17, 31, 33, 63, 64, 65; 255; k past the
 * panel's 256 and rows past a pass), exactly the bits of one fmaf chain per element in k order
 * from beta C; within the fp32 accumulation bound of the exact product; writes no element outside
 * op(A) op(B)'s M x N (C's padding columns, the rows after M); beta 0 reads no C (NaN there);
 * K = 0 gives beta C; with a bias, the bits of C's rows filled with it and beta 1 (C unread).
 * gemm_f32 computes the products gemm_small_fits with it, the same bits at 1,
 * 2 and 3 threads; above the size limit too where gemm_small_outruns_blas says so for the OpenBLAS
 * core of this run (else OpenBLAS's bits, not gemm_small's); alpha != 1 goes to OpenBLAS. */
#include <cblas.h>
#include <math.h>
#include <omp.h>

#include "core/gemm.h"
#include "core/gemm_small.h"
#include "core/rng.h"
#include "tests/check.h"
#include "tests/layer_testing.h"

typedef struct {
    GemmOp ta, tb;
    int M, N, K;
    float beta;
} Shape;

typedef struct {
    float *A, *B, *C;
    int lda, ldb, ldc;
    size_t c_count; /* (M + 1) ldc: one row past M, to see it untouched */
} Operands;

#define AT(X, op, ld, r, c) ((op) ? (X)[(size_t)(c) * (ld) + (r)] : (X)[(size_t)(r) * (ld) + (c)])

static Operands operands(Pool *pool, Rng *rng, const Shape *s) {
    Operands o;
    const int a_rows = s->ta ? s->K : s->M, a_cols = s->ta ? s->M : s->K;
    const int b_rows = s->tb ? s->N : s->K, b_cols = s->tb ? s->K : s->N;
    o.lda = a_cols + 3, o.ldb = b_cols + 5, o.ldc = s->N + 2;
    o.A = uniform(pool, rng, (size_t)a_rows * o.lda, -1, 1);
    o.B = uniform(pool, rng, (size_t)b_rows * o.ldb, -1, 1);
    o.c_count = (size_t)(s->M + 1) * o.ldc;
    o.C = uniform(pool, rng, o.c_count, -1, 1);
    return o;
}

/* The chain itself, one element at a time. */
static void chain_reference(const Shape *s, const Operands *o, float *C) {
    for (int m = 0; m < s->M; m++)
        for (int n = 0; n < s->N; n++) {
            float *c = &C[(size_t)m * o->ldc + n];
            float acc = s->beta == 0.0f ? 0.0f : s->beta * *c;
            for (int k = 0; k < s->K; k++)
                acc = fmaf(AT(o->A, s->ta, o->lda, m, k), AT(o->B, s->tb, o->ldb, k, n), acc);
            *c = acc;
        }
}

/* max over C of |got - exact| / ((K + 2) 2^-24 (sum_k |a b| + |beta c|)): <= 1 passes. */
static double bound_ratio(const Shape *s, const Operands *o, const float *C0, const float *got) {
    double worst = 0;
    for (int m = 0; m < s->M; m++)
        for (int n = 0; n < s->N; n++) {
            const size_t e = (size_t)m * o->ldc + n;
            double sum = s->beta == 0.0f ? 0.0 : (double)s->beta * C0[e], mag = fabs(sum);
            for (int k = 0; k < s->K; k++) {
                const double ab = (double)AT(o->A, s->ta, o->lda, m, k) * AT(o->B, s->tb, o->ldb, k, n);
                sum += ab, mag += fabs(ab);
            }
            const double r = fabs((double)got[e] - sum) / ((s->K + 2) * ldexp(1.0, -24) * mag + 1e-30);
            worst = r > worst ? r : worst;
        }
    return worst;
}

/* Elements outside the M x N product (padding columns, the row after M) equal `before`. */
static int outside_untouched(const Shape *s, const Operands *o, const float *before, const float *got) {
    for (size_t e = 0; e < o->c_count; e++) {
        const int m = (int)(e / (size_t)o->ldc), n = (int)(e % (size_t)o->ldc);
        if ((m >= s->M || n >= s->N) && memcmp(&before[e], &got[e], sizeof(float)))
            return 0;
    }
    return 1;
}

typedef struct {
    long products, chain_mismatches, outside_written, bound_failures, bias_mismatches;
    double worst_bound;
    char first_bad[96];
} Tally;

static void run_shape(GemmSmallIsa isa, const Shape *s, Rng *rng, Tally *tally) {
    Pool pool = {0};
    Operands o = operands(&pool, rng, s);
    float *ref = copy(&pool, o.C, o.c_count), *got = copy(&pool, o.C, o.c_count);
    if (s->beta == 0.0f) /* beta 0 reads no C: NaN there must not reach the result */
        for (int m = 0; m < s->M; m++)
            for (int n = 0; n < s->N; n++)
                got[(size_t)m * o.ldc + n] = NAN;
    chain_reference(s, &o, ref);
    gemm_small_isa(isa, s->ta, s->tb, s->M, s->N, s->K, o.A, o.lda, o.B, o.ldb, s->beta, NULL, got, o.ldc);
    tally->products++;
    const double r = bound_ratio(s, &o, o.C, got);
    tally->worst_bound = r > tally->worst_bound ? r : tally->worst_bound;
    const int same = !memcmp(ref, got, o.c_count * sizeof(float));
    const int outside_ok = outside_untouched(s, &o, o.C, got);
    tally->chain_mismatches += !same;
    tally->outside_written += !outside_ok;
    tally->bound_failures += !(r <= 1.0);
    if ((!same || !outside_ok || !(r <= 1.0)) && !tally->first_bad[0])
        snprintf(tally->first_bad, sizeof tally->first_bad, "%s%s %dx%dx%d beta %g", s->ta ? "T" : "N",
                 s->tb ? "T" : "N", s->M, s->N, s->K, (double)s->beta);
    /* with a bias: C's rows set to it, then the chains with beta 1, bit for bit; C not read (NaN) */
    const float *bias = uniform(&pool, rng, (size_t)s->N, -1, 1);
    float *bias_ref = copy(&pool, o.C, o.c_count), *bias_got = copy(&pool, o.C, o.c_count);
    for (int m = 0; m < s->M; m++)
        for (int n = 0; n < s->N; n++)
            bias_ref[(size_t)m * o.ldc + n] = bias[n], bias_got[(size_t)m * o.ldc + n] = NAN;
    const Shape beta1 = {s->ta, s->tb, s->M, s->N, s->K, 1.0f};
    chain_reference(&beta1, &o, bias_ref);
    gemm_small_isa(isa, s->ta, s->tb, s->M, s->N, s->K, o.A, o.lda, o.B, o.ldb, 0.5f, bias, bias_got, o.ldc);
    const int bias_same = !memcmp(bias_ref, bias_got, o.c_count * sizeof(float));
    tally->bias_mismatches += !bias_same;
    if (!bias_same && !tally->first_bad[0])
        snprintf(tally->first_bad, sizeof tally->first_bad, "%s%s %dx%dx%d with a bias", s->ta ? "T" : "N",
                 s->tb ? "T" : "N", s->M, s->N, s->K);
    pool_release(&pool);
}

static void test_kernel(TestTally *t, Rng *rng, GemmSmallIsa isa, const char *name) {
    if (!gemm_small_isa_runs_here(isa)) {
        printf("SKIP gemm_small %s: this CPU has no %s\n", name, name);
        return;
    }
    static const int dims[] = {1, 15, 16, 17, 31, 33, 63, 64, 65};
    const int nd = (int)(sizeof dims / sizeof dims[0]);
    static const float betas[] = {0.0f, 1.0f};
    Tally tally = {0};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int b = 0; b < 2; b++)
                for (int i = 0; i < nd; i++)
                    for (int j = 0; j < nd; j++)
                        for (int l = 0; l < nd; l++) {
                            const Shape s = {(GemmOp)ta, (GemmOp)tb, dims[i], dims[j], dims[l], betas[b]};
                            run_shape(isa, &s, rng, &tally);
                        }
    /* strips of at most 16 columns: every count of rows of a block of up to 30 (the AVX-512 kernel's
     * narrow blocks, core/gemm_small_avx512.c) and past two of them */
    static const int narrow_cols[] = {1, 7, 16, 17}, narrow_k[] = {1, 62};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int M = 1; M <= 72; M++)
                for (int j = 0; j < 4; j++)
                    for (int l = 0; l < 2; l++) {
                        const Shape s = {(GemmOp)ta, (GemmOp)tb, M, narrow_cols[j], narrow_k[l], betas[M % 2]};
                        run_shape(isa, &s, rng, &tally);
                    }
    CHECK(t, tally.chain_mismatches == 0 && tally.outside_written == 0 && tally.bound_failures == 0,
          "gemm_small %s: %ld products (NN, NT, TN, TT; beta 0, 1; M, N, K in 1 15 16 17 31 33 63 64 65; "
          "and at M 1-72, N 1 7 16 17, K 1 62): "
          "%ld differ from the fmaf chain, %ld wrote outside M x N, %ld outside the fp32 bound (worst %.2f of "
          "it)%s%s", name, tally.products, tally.chain_mismatches, tally.outside_written, tally.bound_failures,
          tally.worst_bound, tally.first_bad[0] ? "; first: " : "", tally.first_bad);
    CHECK(t, tally.bias_mismatches == 0,
          "gemm_small %s with a bias: the same %ld products from rows of bias = rows filled with it and beta 1, "
          "bit for bit, C unread (%ld differ)%s%s", name, tally.products, tally.bias_mismatches,
          tally.first_bad[0] ? "; first: " : "", tally.first_bad);
    /* k past the panel (256, 512), rows past a pass (128 Ki floats / kc), 255, beta 0.5 */
    static const Shape large[] = {
        {GEMM_N, GEMM_T, 255, 255, 65, 1.0f},  {GEMM_T, GEMM_N, 64, 255, 300, 1.0f},
        {GEMM_N, GEMM_N, 33, 47, 520, 0.0f},   {GEMM_T, GEMM_T, 17, 40, 513, 0.5f},
        {GEMM_N, GEMM_T, 600, 37, 256, 0.0f},  {GEMM_T, GEMM_N, 1100, 20, 130, 1.0f},
        {GEMM_N, GEMM_N, 255, 1, 255, 0.5f},   {GEMM_N, GEMM_T, 7, 255, 1, 1.0f},
    };
    Tally big = {0};
    for (size_t i = 0; i < sizeof large / sizeof large[0]; i++)
        run_shape(isa, &large[i], rng, &big);
    CHECK(t, big.chain_mismatches == 0 && big.outside_written == 0 && big.bound_failures == 0 &&
                 big.bias_mismatches == 0,
          "gemm_small %s: %ld larger products (255; K 300, 513, 520 past the 256-deep panel; 600 and 1100 rows past "
          "a pass; beta 0.5; each also with a bias): %ld differ from the fmaf chain, %ld wrote outside M x N, %ld "
          "outside the bound (worst %.2f), %ld with a bias differ%s%s", name, big.products, big.chain_mismatches,
          big.outside_written, big.bound_failures, big.worst_bound, big.bias_mismatches,
          big.first_bad[0] ? "; first: " : "", big.first_bad);
    float C[6] = {1, 2, 3, 4, 5, 6}, Z[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
    const float unused = 7.0f;
    gemm_small_isa(isa, GEMM_N, GEMM_N, 2, 3, 0, &unused, 1, &unused, 3, 1.0f, NULL, C, 3);
    gemm_small_isa(isa, GEMM_N, GEMM_N, 2, 3, 0, &unused, 1, &unused, 3, 0.0f, NULL, Z, 3);
    CHECK(t, C[0] == 1 && C[5] == 6 && Z[0] == 0 && Z[5] == 0 && !signbit(Z[3]),
          "gemm_small %s: K = 0 gives beta C (beta 1: C kept; beta 0: zeros over NaN)", name);
}

/* gemm_f32 takes the small kernel by shape, and its parts keep the bits at any thread count. */
static void test_dispatch(TestTally *t, Rng *rng) {
    CHECK(t, gemm_small_fits(976, 256, 64, 1.0f) && gemm_small_fits(256, 256, 976, 1.0f) &&
                 !gemm_small_fits(40, 40, 16, 0.5f) && !gemm_small_fits(1024, 1024, 1024, 1.0f),
          "gemm_small_fits: the small model's products (976 x 256 x 64, 256 x 256 x 976) yes; alpha 0.5 or "
          "1024^3 no");
    CHECK(t, gemm_small_fits(768, 1024, 256, 1.0f) && gemm_small_fits(256, 1024, 768, 1.0f) &&
                 !gemm_small_fits(769, 1024, 256, 1.0f) && !gemm_small_fits(4096, 256, 256, 1.0f) &&
                 !gemm_small_fits(256, 256, 4096, 1.0f),
          "gemm_small_fits: bert-mini's feed-forward over up to 768 fine-tuning rows (768 x 1024 x 256, its dW "
          "256 x 1024 x 768) yes; 769 rows, and the 4096-row pretraining products (4096 x 256 x 256) no");
    static const Shape shapes[] = {{GEMM_N, GEMM_T, 300, 700, 64, 0.0f}, {GEMM_T, GEMM_N, 700, 300, 64, 1.0f},
                                   {GEMM_N, GEMM_N, 520, 130, 96, 1.0f},
                                   /* fine-tuning's rows: a feed-forward over 431 rows and its dW */
                                   {GEMM_N, GEMM_T, 431, 1024, 256, 0.0f}, {GEMM_T, GEMM_N, 1024, 256, 431, 1.0f}};
    int all = 1, all_bias = 1;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const Shape *s = &shapes[i];
        Pool pool = {0};
        Operands o = operands(&pool, rng, s);
        float *ref = copy(&pool, o.C, o.c_count);
        gemm_small(s->ta, s->tb, s->M, s->N, s->K, o.A, o.lda, o.B, o.ldb, s->beta, ref, o.ldc);
        for (int threads = 1; threads <= 3; threads++) {
            omp_set_num_threads(threads);
            float *got = copy(&pool, o.C, o.c_count);
            gemm_f32(s->ta, s->tb, s->M, s->N, s->K, 1.0f, o.A, o.lda, o.B, o.ldb, s->beta, got, o.ldc);
            all &= !memcmp(ref, got, o.c_count * sizeof(float));
        }
        /* gemm_bias: gemm_small_bias's bits at 1, 2 and 3 threads (the parts' columns offset the bias) */
        const float *bias = uniform(&pool, rng, (size_t)s->N, -1, 1);
        float *bias_ref = copy(&pool, o.C, o.c_count);
        gemm_small_bias(s->ta, s->tb, s->M, s->N, s->K, o.A, o.lda, o.B, o.ldb, bias, bias_ref, o.ldc);
        for (int threads = 1; threads <= 3; threads++) {
            omp_set_num_threads(threads);
            float *got = copy(&pool, o.C, o.c_count);
            gemm_bias(NULL, s->ta, s->tb, s->M, s->N, s->K, gemm_in_f32(o.A), o.lda, gemm_in_f32(o.B), o.ldb, bias, got,
                      o.ldc);
            all_bias &= !memcmp(bias_ref, got, o.c_count * sizeof(float));
        }
        pool_release(&pool);
    }
    omp_set_num_threads(2);
    CHECK(t, all, "gemm_f32 on shapes it splits into parts (300x700x64, 700x300x64, 520x130x96, 431x1024x256, "
          "1024x256x431): gemm_small's bits at 1, 2 and 3 threads");
    CHECK(t, all_bias && gemm_fuses_bias(NULL, 431, 1024, 256),
          "gemm_bias on the same shapes: gemm_small_bias's bits at 1, 2 and 3 threads; gemm_fuses_bias for them");
}

/* The rule above the bound, by OpenBLAS's core name and the CPU; and gemm_f32 / gemm_bias above it
 * following the rule for this run's core (make test-kernels runs it under Cooperlake (unset),
 * Haswell and Prescott: both sides of the rule on an AVX-512 CPU). */
static void test_above_bound(TestTally *t, Rng *rng) {
    CHECK(t, gemm_small_outruns_blas("Haswell", 1) && gemm_small_outruns_blas("Zen", 1) &&
                 gemm_small_outruns_blas("Prescott", 1) && !gemm_small_outruns_blas("Haswell", 0) &&
                 !gemm_small_outruns_blas("SkylakeX", 1) && !gemm_small_outruns_blas("cooperlake", 1) &&
                 !gemm_small_outruns_blas("SapphireRapids", 1) && !gemm_small_outruns_blas(NULL, 1),
          "gemm_small_outruns_blas: on an AVX-512 CPU against OpenBLAS's AVX2 or older cores (Haswell, Zen, "
          "Prescott) yes; against its AVX-512 ones (SkylakeX, Cooperlake in any case, SapphireRapids), or "
          "without AVX-512, no");
    /* 419 Mi FLOPs, past the 384 Mi bound; K long enough that OpenBLAS sums it in blocks (its AVX-512
     * kernels give one unbroken fma chain at K = 256 too, as gemm_small does) */
    const Shape s = {GEMM_N, GEMM_T, 200, 1024, 1024, 0.0f};
    const int expect_small =
        gemm_small_outruns_blas(openblas_get_corename(), gemm_small_isa_runs_here(GEMM_SMALL_AVX512));
    Pool pool = {0};
    Operands o = operands(&pool, rng, &s);
    const float *bias = uniform(&pool, rng, (size_t)s.N, -1, 1);
    float *ref = copy(&pool, o.C, o.c_count), *bias_ref = copy(&pool, o.C, o.c_count);
    gemm_small(s.ta, s.tb, s.M, s.N, s.K, o.A, o.lda, o.B, o.ldb, s.beta, ref, o.ldc);
    gemm_small_bias(s.ta, s.tb, s.M, s.N, s.K, o.A, o.lda, o.B, o.ldb, bias, bias_ref, o.ldc);
    int same = 1, differs = 0, bias_same = 1;
    for (int threads = 1; threads <= 3; threads++) {
        omp_set_num_threads(threads);
        float *got = copy(&pool, o.C, o.c_count);
        gemm_f32(s.ta, s.tb, s.M, s.N, s.K, 1.0f, o.A, o.lda, o.B, o.ldb, s.beta, got, o.ldc);
        const int equal = !memcmp(ref, got, o.c_count * sizeof(float));
        same &= equal;
        differs |= !equal;
        if (expect_small && gemm_fuses_bias(NULL, s.M, s.N, s.K)) { /* else the check below fails */
            float *got_bias = copy(&pool, o.C, o.c_count);
            gemm_bias(NULL, s.ta, s.tb, s.M, s.N, s.K, gemm_in_f32(o.A), o.lda, gemm_in_f32(o.B), o.ldb, bias,
                      got_bias, o.ldc);
            bias_same &= !memcmp(bias_ref, got_bias, o.c_count * sizeof(float));
        }
    }
    omp_set_num_threads(2);
    pool_release(&pool);
    CHECK(t, gemm_small_fits(s.M, s.N, s.K, 1.0f) == 0 && gemm_fuses_bias(NULL, s.M, s.N, s.K) == expect_small,
          "200 x 1024 x 1024 is past gemm_small's bound; gemm_fuses_bias there iff gemm_small_outruns_blas (%d, "
          "OpenBLAS core %s)", expect_small, openblas_get_corename());
    if (expect_small)
        CHECK(t, same && bias_same,
              "gemm_f32 and gemm_bias past the bound on OpenBLAS core %s (an AVX-512 CPU): gemm_small's bits at "
              "1, 2 and 3 threads", openblas_get_corename());
    else
        CHECK(t, differs, "gemm_f32 past the bound on OpenBLAS core %s: OpenBLAS's bits, not gemm_small's",
              openblas_get_corename());
}

int main(void) {
    TestTally t = {0};
    Rng rng;
    rng_seed(&rng, 50);
    test_kernel(&t, &rng, GEMM_SMALL_AVX2, "AVX2");
    test_kernel(&t, &rng, GEMM_SMALL_AVX512, "AVX-512");
    test_dispatch(&t, &rng);
    test_above_bound(&t, &rng);
    return tally_exit(&t);
}
