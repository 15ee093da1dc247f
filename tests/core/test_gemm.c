/* core/gemm.h and core/bf16.h: bf16 rounding (nearest, ties to even; NaN, inf, overflow); fp32
 * products with the same bits at any thread count (gemm_f32's blocks are fixed by the shape) and
 * with and without a context, within the fp32 accumulation bound; the emulated backend
 * bit-identical to gemm_bf16_reference for every transpose, alpha and beta; oneDNN's bf16 matmul
 * against the reference within the fp32 accumulation bound (skipped, saying so, on a CPU without
 * avx512_bf16/amx_bf16); the weights' copy, a bf16 operand and the staged block are read instead
 * of the fp32 values (a copy holding other values changes the result), and a staged block keeps
 * its values until unstaged; repeated oneDNN products (cached primitives) give the same bits. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>

#include "core/gemm.h"
#include "core/rng.h"
#include "tests/check.h"
#include "tests/layer_testing.h"

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void test_rounding(TestTally *t) {
    struct { uint32_t in; uint16_t out; const char *what; } cases[] = {
        {0x3f800000u, 0x3f80, "1.0 exact"},
        {0x3f808000u, 0x3f80, "tie to even (down)"},
        {0x3f818000u, 0x3f82, "tie to even (up)"},
        {0x3f808001u, 0x3f81, "just above a tie rounds up"},
        {0x3f807fffu, 0x3f80, "just below a tie rounds down"},
        {0xbf818000u, 0xbf82, "negative tie to even"},
        {0x7f7fffffu, 0x7f80, "largest float overflows to inf"},
        {0x7f800000u, 0x7f80, "inf"},
        {0xff800000u, 0xff80, "-inf"},
        {0x00000001u, 0x0000, "smallest subnormal rounds to 0"},
        {0x00018000u, 0x0002, "subnormal tie to even"},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t got = bf16_from_float(from_bits(cases[i].in));
        if (got != cases[i].out) {
            ok = 0;
            printf("  %s: 0x%08x -> 0x%04x, expected 0x%04x\n", cases[i].what, cases[i].in, got, cases[i].out);
        }
    }
    CHECK(t, ok, "bf16_from_float: nearest, ties to even, overflow to inf, subnormals (%zu cases)",
          sizeof cases / sizeof cases[0]);
    float nan = from_bits(0x7fc00001u), snan = from_bits(0x7f800001u);
    CHECK(t, isnan(bf16_to_float(bf16_from_float(nan))) && isnan(bf16_to_float(bf16_from_float(snan))),
          "bf16_from_float: NaN stays NaN (quiet and signalling, which plain rounding would make inf)");
    int exact = 1;
    for (uint32_t h = 0; h < 0x10000u; h += 7) { /* every bf16 converts back to itself */
        float f = bf16_to_float((bf16)h);
        if (!isnan(f) && bf16_from_float(f) != h)
            exact = 0;
    }
    CHECK(t, exact, "bf16_to_float then bf16_from_float is the identity on bf16 values");
}

typedef struct {
    int ta, tb, M, N, K;
    float alpha, beta;
} Shape;

static const Shape shapes[] = {
    {GEMM_N, GEMM_T, 37, 45, 70, 1.0f, 0.0f}, {GEMM_N, GEMM_N, 33, 70, 45, 1.0f, 1.0f},
    {GEMM_T, GEMM_N, 45, 70, 33, 1.0f, 1.0f}, {GEMM_T, GEMM_T, 20, 31, 17, 0.5f, 0.25f},
    {GEMM_N, GEMM_T, 128, 96, 256, 1.0f, 0.0f},
    /* large enough for gemm_f32 to split them in parts: by columns, by rows of op(A) = A^T, by
     * rows (2 unequal parts), by columns of op(B) = B^T */
    {GEMM_N, GEMM_T, 300, 700, 64, 1.0f, 0.0f}, {GEMM_T, GEMM_N, 700, 300, 64, 1.0f, 1.0f},
    {GEMM_N, GEMM_N, 520, 130, 96, 0.5f, 0.25f}, {GEMM_T, GEMM_T, 90, 600, 100, 1.0f, 0.0f},
    /* in both sides: 6 x 2 blocks of 128 x 384, the last row and column of them shorter (over
     * gemm_small's size: OpenBLAS) */
    {GEMM_T, GEMM_N, 700, 650, 160, 1.0f, 1.0f},
};

/* Operands of a shape, stored as the transposes say (row strides = stored columns + pad). */
typedef struct {
    float *A, *B, *C;
    int lda, ldb, ldc;
} Operands;

static Operands operands(Pool *pool, Rng *rng, const Shape *s) {
    Operands o;
    int a_rows = s->ta ? s->K : s->M, a_cols = s->ta ? s->M : s->K;
    int b_rows = s->tb ? s->N : s->K, b_cols = s->tb ? s->K : s->N;
    o.lda = a_cols + 3, o.ldb = b_cols + 1, o.ldc = s->N + 2;
    o.A = uniform(pool, rng, (size_t)a_rows * o.lda, -1, 1);
    o.B = uniform(pool, rng, (size_t)b_rows * o.ldb, -1, 1);
    o.C = uniform(pool, rng, (size_t)s->M * o.ldc, -1, 1);
    return o;
}

#define AT(X, op, ld, r, c) ((op) ? (X)[(size_t)(c) * (ld) + (r)] : (X)[(size_t)(r) * (ld) + (c)])

/* max over C of |got - ref| / bound, bound = (K + 2) 2^-24 (|alpha| sum_k |a b| + |beta c|):
 * fp32 accumulation of K exact products (gamma_K) plus the final roundings. <= 1 passes. */
static double bound_ratio(const Shape *s, const Operands *o, const float *C0, const float *got, const double *ref) {
    double worst = 0;
    for (int m = 0; m < s->M; m++)
        for (int n = 0; n < s->N; n++) {
            double mag = 0;
            for (int k = 0; k < s->K; k++)
                mag += fabs((double)bf16_round(AT(o->A, s->ta, o->lda, m, k)) * bf16_round(AT(o->B, s->tb, o->ldb, k, n)));
            size_t e = (size_t)m * o->ldc + n;
            double bound = (s->K + 2) * ldexp(1.0, -24) * (fabs(s->alpha) * mag + fabs(s->beta * C0[e])) + 1e-30;
            double r = fabs((double)got[e] - ref[e]) / bound;
            worst = r > worst ? r : worst;
        }
    return worst;
}

/* bound_ratio against the exact product of the fp32 operands (no bf16 rounding) */
static double fp32_bound_ratio(const Shape *s, const Operands *o, const float *C0, const float *got) {
    double worst = 0;
    for (int m = 0; m < s->M; m++)
        for (int n = 0; n < s->N; n++) {
            double sum = 0, mag = 0;
            for (int k = 0; k < s->K; k++) {
                const double ab = (double)AT(o->A, s->ta, o->lda, m, k) * AT(o->B, s->tb, o->ldb, k, n);
                sum += ab, mag += fabs(ab);
            }
            size_t e = (size_t)m * o->ldc + n;
            const double exact = s->alpha * sum + (double)s->beta * C0[e];
            double bound = (s->K + 2) * ldexp(1.0, -24) * (fabs(s->alpha) * mag + fabs(s->beta * C0[e])) + 1e-30;
            double r = fabs((double)got[e] - exact) / bound;
            worst = r > worst ? r : worst;
        }
    return worst;
}

static void test_products(TestTally *t, Rng *rng) {
    Pool pool = {0};
    CpuBf16 cpu = cpu_bf16_query();
    const int hardware = cpu_bf16_available(&cpu);
    Gemm *fp32 = gemm_create(PRECISION_FP32, GEMM_BF16_ONEDNN, 0, 0);
    Gemm *emulated = gemm_create(PRECISION_BF16, GEMM_BF16_EMULATED, 0, 1 << 17);
    Gemm *onednn = hardware ? gemm_create(PRECISION_BF16, GEMM_BF16_ONEDNN, 0, 1 << 17) : NULL;
    /* with lanes (a training step's context): split into core/gemm_partition.h's blocks, one a lane */
    Gemm *laned = hardware ? gemm_create(PRECISION_BF16, GEMM_BF16_ONEDNN, 0, 1 << 17) : NULL;
    if (laned)
        gemm_reserve_lanes(laned, 3);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const Shape *s = &shapes[i];
        pool_release(&pool); /* the previous shape's */
        Operands o = operands(&pool, rng, s);
        size_t nc = (size_t)s->M * o.ldc;
        float *blas = copy(&pool, o.C, nc), *ctx = copy(&pool, o.C, nc), *none[3];
        cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, s->M, s->N,
                    s->K, s->alpha, o.A, o.lda, o.B, o.ldb, s->beta, blas, o.ldc);
        for (int threads = 1; threads <= 3; threads++) {
            omp_set_num_threads(threads);
            none[threads - 1] = copy(&pool, o.C, nc);
            gemm(NULL, s->ta, s->tb, s->M, s->N, s->K, s->alpha, o.A, o.lda, o.B, o.ldb, s->beta, none[threads - 1], o.ldc);
        }
        omp_set_num_threads(2);
        gemm(fp32, s->ta, s->tb, s->M, s->N, s->K, s->alpha, o.A, o.lda, o.B, o.ldb, s->beta, ctx, o.ldc);
        char what[96];
        snprintf(what, sizeof what, "%s%s %dx%dx%d alpha %g beta %g", s->ta ? "T" : "N", s->tb ? "T" : "N", s->M,
                 s->N, s->K, (double)s->alpha, (double)s->beta);
        CHECK(t, !memcmp(none[0], none[1], nc * 4) && !memcmp(none[0], none[2], nc * 4) && !memcmp(none[1], ctx, nc * 4),
              "gemm fp32 %s: the same bits at 1, 2 and 3 threads, with and without an fp32 context", what);
        const double exact_err = fp32_bound_ratio(s, &o, o.C, none[1]), blas_err = fp32_bound_ratio(s, &o, o.C, blas);
        CHECK(t, exact_err <= 1.0 && blas_err <= 1.0,
              "gemm fp32 %s: within the fp32 accumulation bound of the exact product (%.2f of it; OpenBLAS "
              "threaded on its own: %.2f)", what, exact_err, blas_err);
        float *ref = copy(&pool, o.C, nc), *emu = copy(&pool, o.C, nc);
        gemm_bf16_reference(s->ta, s->tb, s->M, s->N, s->K, s->alpha, o.A, o.lda, o.B, o.ldb, s->beta, ref, o.ldc);
        gemm(emulated, s->ta, s->tb, s->M, s->N, s->K, s->alpha, o.A, o.lda, o.B, o.ldb, s->beta, emu, o.ldc);
        CHECK(t, !memcmp(ref, emu, nc * 4), "gemm bf16 emulated %s: bit-identical to gemm_bf16_reference", what);
        double *refd = doubles(&pool, ref, nc);
        CHECK(t, bound_ratio(s, &o, o.C, blas, refd) > 1.0 || s->K < 4,
              "gemm fp32 %s differs from the bf16 reference beyond the fp32 bound (the test can tell them apart)", what);
        if (!onednn) {
            printf("SKIP gemm oneDNN %s: skipped: no avx512_bf16 on this CPU (%s)\n", what, cpu.cpu);
            continue;
        }
        float *dnn = copy(&pool, o.C, nc), *again = copy(&pool, o.C, nc);
        gemm(onednn, s->ta, s->tb, s->M, s->N, s->K, s->alpha, o.A, o.lda, o.B, o.ldb, s->beta, dnn, o.ldc);
        gemm(onednn, s->ta, s->tb, s->M, s->N, s->K, s->alpha, o.A, o.lda, o.B, o.ldb, s->beta, again, o.ldc);
        double r = bound_ratio(s, &o, o.C, dnn, refd);
        CHECK(t, r <= 1.0, "gemm bf16 oneDNN %s: within the fp32 accumulation bound of the reference (%.3f of it)",
              what, r);
        CHECK(t, !memcmp(dnn, again, nc * 4), "gemm bf16 oneDNN %s: the cached primitive repeats the bits", what);
        int untouched = 1; /* C's padding columns are not written */
        for (int m = 0; m < s->M; m++)
            for (int n = s->N; n < o.ldc; n++)
                untouched &= bits(dnn[(size_t)m * o.ldc + n]) == bits(o.C[(size_t)m * o.ldc + n]);
        CHECK(t, untouched, "gemm bf16 oneDNN %s: only op(A) op(B)'s columns of C are written", what);
        if (s->alpha != 1.0f || (s->beta != 0.0f && s->beta != 1.0f))
            continue; /* oneDNN shares the product: no lanes */
        float *lane[3];
        for (int threads = 1; threads <= 3; threads++) {
            omp_set_num_threads(threads);
            lane[threads - 1] = copy(&pool, o.C, nc);
            gemm(laned, s->ta, s->tb, s->M, s->N, s->K, s->alpha, o.A, o.lda, o.B, o.ldb, s->beta, lane[threads - 1],
                 o.ldc);
        }
        omp_set_num_threads(2);
        r = bound_ratio(s, &o, o.C, lane[0], refd);
        CHECK(t, r <= 1.0 && !memcmp(lane[0], lane[1], nc * 4) && !memcmp(lane[0], lane[2], nc * 4),
              "gemm bf16 oneDNN on lanes %s: the same bits at 1, 2 and 3 threads, within the fp32 accumulation bound "
              "of the reference (%.3f of it)", what, r);
        if (s->ta != GEMM_N || s->tb != GEMM_T || s->beta != 0.0f || s->alpha != 1.0f)
            continue;
        /* gemm_bias on the lanes: the bias added to each finished sum, i.e. (A B^T) + bias [n] in fp32 */
        const float *bias = uniform(&pool, rng, (size_t)s->N, -4, 4);
        int biased_same = gemm_fuses_bias(laned, s->M, s->N, s->K) && !gemm_fuses_bias(emulated, s->M, s->N, s->K);
        for (int threads = 1; threads <= 3; threads++) {
            omp_set_num_threads(threads);
            float *biased = copy(&pool, o.C, nc);
            gemm_bias(laned, s->ta, s->tb, s->M, s->N, s->K, gemm_in_f32(o.A), o.lda, gemm_in_f32(o.B), o.ldb, bias,
                      biased, o.ldc);
            for (int m = 0; m < s->M; m++)
                for (int n = 0; n < o.ldc; n++) {
                    const size_t e = (size_t)m * o.ldc + n;
                    const float want = n < s->N ? lane[0][e] + bias[n] : o.C[e];
                    biased_same &= bits(biased[e]) == bits(want);
                }
        }
        omp_set_num_threads(2);
        CHECK(t, biased_same, "gemm_bias bf16 oneDNN on lanes %s: (A B^T) + bias [n] bit for bit at 1, 2 and 3 "
              "threads, C's padding untouched; gemm_fuses_bias on the lanes, not on the emulated backend", what);
    }
    if (onednn)
        printf("  oneDNN implementation: %s\n", gemm_stats(onednn).implementation);
    gemm_free(fp32), gemm_free(emulated), gemm_free(onednn), gemm_free(laned);
    pool_release(&pool);
}

/* The weights' copy, a bf16 operand or the staged block is what the product reads. */
static void test_operand_sources(TestTally *t, Rng *rng, GemmBackend backend, const char *name) {
    Pool pool = {0};
    const int M = 24, N = 40, K = 56;
    float *A = uniform(&pool, rng, (size_t)M * K, -1, 1), *W = uniform(&pool, rng, (size_t)N * K, -1, 1);
    float *W2 = copy(&pool, W, (size_t)N * K);
    for (int e = 0; e < N * K; e++)
        W2[e] *= 2.0f;
    bf16 *copy16 = pool_alloc(&pool, (size_t)N * K, sizeof(bf16));
    bf16_convert_floats(copy16, W2, (size_t)N * K); /* the weights' copy holds 2W */
    Gemm *g = gemm_create(PRECISION_BF16, backend, (size_t)M * K, (size_t)M * K);
    gemm_set_weights(g, W, (size_t)N * K, copy16);
    float *got = zeros(&pool, (size_t)M * N), *ref = zeros(&pool, (size_t)M * N);
    gemm(g, GEMM_N, GEMM_T, M, N, K, 1.0f, A, K, W, K, 0.0f, got, N);
    gemm_bf16_reference(GEMM_N, GEMM_T, M, N, K, 1.0f, A, K, W2, K, 0.0f, ref, N);
    CHECK(t, rel_err(got, doubles(&pool, ref, (size_t)M * N), (size_t)M * N) < 1e-5,
          "gemm %s: a weight is read from the weights' copy (it holds 2W: the product is A (2W)^T)", name);
    float *sub = zeros(&pool, (size_t)M * 8), *sub_ref = zeros(&pool, (size_t)M * 8);
    gemm(g, GEMM_N, GEMM_T, M, 8, K, 1.0f, A, K, W + 5 * K, K, 0.0f, sub, 8);
    gemm_bf16_reference(GEMM_N, GEMM_T, M, 8, K, 1.0f, A, K, W2 + 5 * K, K, 0.0f, sub_ref, 8);
    CHECK(t, rel_err(sub, doubles(&pool, sub_ref, (size_t)M * 8), (size_t)M * 8) < 1e-5,
          "gemm %s: rows 5..12 of the weight are read at their offset in the copy", name);
    bf16 *A16 = pool_alloc(&pool, (size_t)M * K, sizeof(bf16));
    bf16_convert_floats(A16, W2, (size_t)M * K); /* a bf16 operand that is not bf16(A): rows of 2W */
    gemm_operands(g, GEMM_N, GEMM_T, M, N, K, 1.0f, gemm_in_bf16(A16), K, gemm_in_f32(W), K, 0.0f, got, N);
    gemm_bf16_reference(GEMM_N, GEMM_T, M, N, K, 1.0f, W2, K, W2, K, 0.0f, ref, N);
    CHECK(t, rel_err(got, doubles(&pool, ref, (size_t)M * N), (size_t)M * N) < 1e-5,
          "gemm %s: a bf16 operand is read as given", name);
    float *A_before = copy(&pool, A, (size_t)M * K);
    const GemmOperand staged = gemm_stage(g, A, (size_t)M, (size_t)K, (size_t)K);
    for (int e = 0; e < M * K; e++)
        A[e] = -A[e];
    gemm(g, GEMM_N, GEMM_T, M, N, K, 1.0f, A, K, W, K, 0.0f, got, N);
    gemm_bf16_reference(GEMM_N, GEMM_T, M, N, K, 1.0f, A_before, K, W2, K, 0.0f, ref, N);
    CHECK(t, rel_err(got, doubles(&pool, ref, (size_t)M * N), (size_t)M * N) < 1e-5,
          "gemm %s: a staged block is read as staged (its fp32 values changed after gemm_stage)", name);
    float *got2 = zeros(&pool, (size_t)M * N);
    gemm_operands(g, GEMM_N, GEMM_T, M, N, K, 1.0f, staged, K, gemm_in_f32(W), K, 0.0f, got2, N);
    CHECK(t, staged.b16 && !memcmp(got, got2, sizeof(float) * (size_t)M * N),
          "gemm %s: gemm_stage returns the staged bf16 operand (the same bits as the block read by address)", name);
    gemm_unstage(g);
    gemm(g, GEMM_N, GEMM_T, M, N, K, 1.0f, A, K, W, K, 0.0f, got, N);
    gemm_bf16_reference(GEMM_N, GEMM_T, M, N, K, 1.0f, A, K, W2, K, 0.0f, ref, N);
    CHECK(t, rel_err(got, doubles(&pool, ref, (size_t)M * N), (size_t)M * N) < 1e-5,
          "gemm %s: after gemm_unstage the block is converted again from its current values", name);
    GemmStats st = gemm_stats(g);
    CHECK(t, st.products == 6 && st.converted_floats == 4.0 * M * K,
          "gemm %s: 6 products, A converted 4 times (by two products, once staged for the fourth and fifth, again for "
          "the sixth), the bf16 operand and the weight never: %.0f floats", name, st.converted_floats);
    gemm_free(g);
    pool_release(&pool);
}

/* The bf16 peak's probe lays its operands out in memory the caller lends (a training step's
 * activations between steps) when they fit, so a bf16 run's peak memory is its step's; a loan
 * too small is left alone and the probe allocates its own. */
static void test_probe_borrows(TestTally *t, GemmBackend backend, const char *name) {
    const GemmShape shapes[2] = {{GEMM_N, GEMM_T, 64, 48, 32, 1.0f}, {GEMM_T, GEMM_N, 48, 32, 64, 1.0f}};
    /* the largest of each: A 48 x 64 bf16 (1536 floats), B 64 x 32 bf16 (1024), C 64 x 48 (3072) */
    const size_t needed = 1536 + 1024 + 3072, floats = needed + 64;
    float *loan = xalloc_floats(floats);
    const float sentinel = -12345.0f;
    for (size_t e = 0; e < floats; e++)
        loan[e] = sentinel;
    size_t own_bytes = 1;
    double rate = gemm_bf16_shapes_gflops(backend, shapes, 2, loan, needed, &own_bytes);
    size_t written = 0, beyond = 0;
    for (size_t e = 0; e < floats; e++)
        if (loan[e] != sentinel)
            *(e < needed ? &written : &beyond) += 1;
    CHECK(t, rate > 0 && written > needed / 2 && beyond == 0 && own_bytes == 0,
          "bf16 probe %s: operands in the borrowed block (%zu of its %zu floats written, %zu past it; %zu bytes of "
          "its own, expected 0)", name, written, needed, beyond, own_bytes);
    for (size_t e = 0; e < floats; e++)
        loan[e] = sentinel;
    rate = gemm_bf16_shapes_gflops(backend, shapes, 2, loan, needed - 1, &own_bytes);
    written = 0;
    for (size_t e = 0; e < floats; e++)
        written += loan[e] != sentinel;
    /* its own: A 3072 and B 2048 bf16, C 3072 fp32 */
    const size_t own_expected = (3072 + 2048) * sizeof(bf16) + 3072 * sizeof(float);
    CHECK(t, rate > 0 && written == 0 && own_bytes == own_expected,
          "bf16 probe %s: a loan one float too small is not touched (%zu written; %zu bytes of its own, expected %zu)",
          name, written, own_bytes, own_expected);
    free(loan);
}

int main(void) {
    TestTally t = {0};
    Rng rng;
    rng_seed(&rng, 27);
    test_rounding(&t);
    test_products(&t, &rng);
    test_operand_sources(&t, &rng, GEMM_BF16_EMULATED, "emulated");
    test_probe_borrows(&t, GEMM_BF16_EMULATED, "emulated");
    CpuBf16 cpu = cpu_bf16_query();
    if (cpu_bf16_available(&cpu)) {
        test_operand_sources(&t, &rng, GEMM_BF16_ONEDNN, "oneDNN");
        test_probe_borrows(&t, GEMM_BF16_ONEDNN, "oneDNN");
    } else
        printf("SKIP gemm oneDNN operand sources: skipped: no avx512_bf16 on this CPU (%s)\n", cpu.cpu);
    return tally_exit(&t);
}
