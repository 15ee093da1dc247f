/* layers/gelu_kernels.h: gelu_phi (Phi and phi from one exp) against the double normal CDF and
 * density over a dense sweep of [-10, 10] and the special values; the AVX-512 set of passes against
 * the portable one, bit for bit, at many lengths (every tail of a 16-lane register), with and
 * without a bias, in place, all outputs (fp32 and bf16), and the bias blocks (d and the column sums)
 * against a plain row-by-row loop, bit for bit, for both sets. Both sets are elementwise with every
 * fma explicit, so their bits agree in every build (NATIVE=1, the sanitizer's -O1 included). */
#include <omp.h>

#include "layers/gelu_kernels.h"
#include "layers/layers.h"
#include "tests/layer_testing.h"

static double cdf_ref(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

/* Phi within 1.5e-7 absolute and, for x <= 0 down to -5.5 (where Phi is e R), 1e-6 relative; Phi
 * exactly 0 and 1 beyond 5.5; phi within 3e-7 relative of exp(-x^2/2) / sqrt(2 pi), the square
 * rounded as the kernel rounds it (x phi(x) < 1e-17 from 9 on, where phi is 0). */
static void test_phi_accuracy(TestTally *t) {
    double worst_abs = 0.0, worst_tail = 0.0, worst_pdf = 0.0;
    float at_abs = 0.0f, at_tail = 0.0f, at_pdf = 0.0f;
    int clamped = 1;
    for (long k = -2000000; k <= 2000000; k++) {
        const float x = (float)k * 5e-6f; /* step 5e-6 */
        const GeluPhi f = gelu_phi(x);
        const double cdf = cdf_ref(x), d_abs = fabs(f.cdf - cdf);
        if (d_abs > worst_abs)
            worst_abs = d_abs, at_abs = x;
        if (x <= 0.0f && x > -5.5f && fabs(f.cdf / cdf - 1.0) > worst_tail)
            worst_tail = fabs(f.cdf / cdf - 1.0), at_tail = x;
        if (fabsf(x) >= 5.5f)
            clamped &= f.cdf == (x > 0.0f ? 1.0f : 0.0f);
        const float h = x * x;
        const double pdf = exp(-0.5 * (double)h) / sqrt(2.0 * M_PI);
        const double d_pdf = fabsf(x) < 9.0f ? fabs(f.pdf / pdf - 1.0) : fabs(x * f.pdf) / 1e-17;
        if (d_pdf > worst_pdf)
            worst_pdf = d_pdf, at_pdf = x;
    }
    CHECK(t, worst_abs <= 1.5e-7, "gelu_phi: Phi within 1.5e-7 of the double CDF on [-10, 10] (%.2e at %g)", worst_abs,
          at_abs);
    CHECK(t, worst_tail <= 1e-6, "gelu_phi: Phi within 1e-6 relative on the lower tail [-5.5, 0] (%.2e at %g)",
          worst_tail, at_tail);
    CHECK(t, clamped, "gelu_phi: Phi exactly 0 below -5.5 and 1 above 5.5");
    CHECK(t, worst_pdf <= 3e-7, "gelu_phi: phi within 3e-7 relative of the double density (%.2e at %g)", worst_pdf,
          at_pdf);

    /* special values through the portable passes: gelu and gelu' */
    const float x[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-30f, -1e-30f, 3e38f, -3e38f};
    enum { COUNT = sizeof x / sizeof *x };
    float act[COUNT], slope[COUNT];
    gelu_kernels(0)->act_slope(slope, act, x, NULL, COUNT);
    const int nan_ok = isnan(act[0]) && isnan(act[1]) && isnan(slope[0]) && isnan(slope[1]);
    const int inf_ok = act[2] == INFINITY && isnan(act[3]) && isnan(slope[2]) && isnan(slope[3]);
    const int zero_ok = act[4] == 0.0f && !signbit(act[4]) && act[5] == 0.0f && signbit(act[5]) &&
                        fabsf(slope[4] - 0.5f) <= 6e-8f && slope[5] == slope[4];
    const int tiny_ok = act[6] == 0.5f * 1e-30f && act[7] == -0.5f * 1e-30f && act[8] == 3e38f && act[9] == 0.0f &&
                        slope[8] == 1.0f && slope[9] == 0.0f;
    CHECK(t, nan_ok && inf_ok && zero_ok && tiny_ok,
          "gelu and gelu' at NaN (NaN), +-inf (inf, NaN; NaN as erff's form), +-0 (signed 0, 1/2), tiny, huge "
          "(nan %d inf %d zero %d tiny %d)", nan_ok, inf_ok, zero_ok, tiny_ok);
}

static int same_u16(const bf16 *a, const bf16 *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

/* The AVX-512 passes = the portable ones, bit for bit: lengths 1-100 and 1000-1040, inputs on
 * [-12, 12] with NaN, +-inf, +-0 and values at the ranges' ends (5.5, 9) sprinkled in. */
static void test_sets_same_bits(TestTally *t, Rng *rng) {
    if (!gelu_has_avx512()) {
        printf("SKIP gelu AVX-512 passes = portable passes (this CPU has no AVX-512 F/BW/DQ/VL)\n");
        return;
    }
    const GeluKernels *set[2] = {gelu_kernels(0), gelu_kernels(1)};
    enum { MAX = 1040 };
    Pool pool = {0};
    float *pre = pool_alloc(&pool, MAX, sizeof(float)), *b = pool_alloc(&pool, MAX, sizeof(float));
    float *g = pool_alloc(&pool, MAX, sizeof(float));
    float *act[2], *slope[2], *inplace[2], *d_in[2];
    bf16 *act16[2], *slope16[2], *only16[2];
    for (int s = 0; s < 2; s++) {
        act[s] = pool_alloc(&pool, MAX, sizeof(float)), slope[s] = pool_alloc(&pool, MAX, sizeof(float));
        inplace[s] = pool_alloc(&pool, MAX, sizeof(float)), d_in[s] = pool_alloc(&pool, MAX, sizeof(float));
        act16[s] = pool_alloc(&pool, MAX, sizeof(bf16)), slope16[s] = pool_alloc(&pool, MAX, sizeof(bf16));
        only16[s] = pool_alloc(&pool, MAX, sizeof(bf16));
    }
    static const float special[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 5.5f, -5.5f, 9.0f, -9.0f, 5.4999995f};
    int same = 1, bad_len = 0, lengths = 0;
    for (int len = 1; len <= MAX; len = len == 100 ? 1000 : len + 1) {
        for (int c = 0; c < len; c++) {
            pre[c] = -12.0f + 24.0f * rng_uniform(rng), b[c] = -1.0f + 2.0f * rng_uniform(rng);
            g[c] = -2.0f + 4.0f * rng_uniform(rng);
            if (rng_uniform(rng) < 0.1f)
                pre[c] = special[(int)(rng_uniform(rng) * 10.0f) % 10];
        }
        for (int s = 0; s < 2; s++) {
            set[s]->act(act[s], pre, NULL, len);
            memcpy(inplace[s], pre, (size_t)len * sizeof(float));
            set[s]->act_slope(inplace[s], slope[s], inplace[s], b, len); /* slope over pre, as gelu_rows */
            set[s]->act_slope16(slope16[s], act16[s], pre, b, len);
            set[s]->act16(only16[s], pre, b, len);
            memcpy(d_in[s], g, (size_t)len * sizeof(float));
            set[s]->backward(d_in[s], d_in[s], pre, len);
        }
        const int ok = same_bits(act[0], act[1], len) && same_bits(slope[0], slope[1], len) &&
                       same_bits(inplace[0], inplace[1], len) && same_bits(d_in[0], d_in[1], len) &&
                       same_u16(act16[0], act16[1], len) && same_u16(slope16[0], slope16[1], len) &&
                       same_u16(only16[0], only16[1], len);
        if (!ok && same)
            bad_len = len;
        same &= ok, lengths++;
    }
    CHECK(t, same, "gelu AVX-512 passes = portable passes bit for bit (act, act+slope in place, bf16 act+slope, "
          "bf16 act, backward; %d lengths 1-1040; first difference at %d)", lengths, bad_len);
    pool_release(&pool);
}

/* bias blocks: d = g s and acc += d row by row, against a plain loop (volatile d: no fusing), bit
 * for bit, fp32 (in place, d over g) and bf16, N = 1-5 rows, widths 1-40, leading dimension width + 3. */
static void test_bias_blocks(TestTally *t, Rng *rng) {
    enum { MAX_N = 5, MAX_W = 40, LD_EXTRA = 3, MAX_ELEMS = MAX_N * (MAX_W + LD_EXTRA) };
    float g[MAX_ELEMS], s[MAX_ELEMS], d[MAX_ELEMS], d_ref[MAX_ELEMS], acc[MAX_W], acc_ref[MAX_W];
    bf16 s16[MAX_ELEMS], d16[MAX_ELEMS], d16_ref[MAX_ELEMS];
    int same = 1, checked = 0;
    for (int isa = 0; isa < 1 + gelu_has_avx512(); isa++)
        for (int io16 = 0; io16 < 2; io16++)
            for (int N = 1; N <= MAX_N; N++)
                for (int width = 1; width <= MAX_W; width++) {
                    const int ld = width + LD_EXTRA;
                    for (int e = 0; e < N * ld; e++) {
                        g[e] = -3.0f + 6.0f * rng_uniform(rng), s[e] = -0.2f + 1.4f * rng_uniform(rng);
                        s16[e] = bf16_from_float(s[e]), d16[e] = d16_ref[e] = 0;
                    }
                    for (int c = 0; c < width; c++)
                        acc[c] = acc_ref[c] = rng_uniform(rng);
                    memcpy(d_ref, g, sizeof d_ref);
                    for (int n = 0; n < N; n++)
                        for (int c = 0; c < width; c++) {
                            const int e = n * ld + c;
                            volatile float prod = g[e] * (io16 ? bf16_to_float(s16[e]) : s[e]);
                            if (io16)
                                d16_ref[e] = bf16_from_float(prod);
                            else
                                d_ref[e] = prod;
                            acc_ref[c] += prod;
                        }
                    memcpy(d, g, sizeof d);
                    if (io16)
                        gelu_kernels(isa)->bias_block16(d16, acc, g, s16, N, ld, width);
                    else
                        gelu_kernels(isa)->bias_block(d, acc, d, s, N, ld, width);
                    same &= same_bits(acc, acc_ref, width) &&
                            (io16 ? same_u16(d16, d16_ref, MAX_ELEMS) : same_bits(d, d_ref, MAX_ELEMS));
                    checked++;
                }
    CHECK(t, same, "gelu bias blocks (portable%s): d = g s and the column sums row by row in order, bit for bit "
          "(%d blocks, fp32 in place and bf16)", gelu_has_avx512() ? " and AVX-512" : "", checked);
}

int main(void) {
    TestTally t = {0, 0};
    Rng rng;
    rng_seed(&rng, 20261207);
    omp_set_num_threads(2);
    test_phi_accuracy(&t);
    test_sets_same_bits(&t, &rng);
    test_bias_blocks(&t, &rng);
    return tally_exit(&t);
}
