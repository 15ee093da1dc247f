/* GELU's elementwise loops (layers/gelu.c), written once here and compiled twice: for the build's
 * portable target (gelu.c, 8 lanes on x86-64-v3) and for AVX-512 (gelu_avx512.c, 16 lanes by
 * function attributes, chosen at run time). Every element's value comes from its own inputs through
 * the operations below in a fixed order, each fma explicit and no product left where GCC could fuse
 * it with an add (-ffp-contract=fast), so both builds, any vector width and the scalar remainders
 * give the same bits (tests/layers/test_gelu.c checks them).
 *
 * gelu(x) = x Phi(x), gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi), Phi the
 * normal CDF = (1 + erf(x / sqrt 2)) / 2. With a = |x| and the lower tail
 *   Phi(-a) = e(a) R(a),   e(a) = exp(-a^2/2),   R(a) = erfcx(a / sqrt 2) / 2,
 * (erfcx(z) = exp(z^2) erfc(z), smooth, from 1/2 at a = 0 to 0.071 at 5.5), Phi(x) = 1 - e R for
 * x > 0 and e R otherwise, one exp shared by Phi and phi. R is a degree-15 polynomial in
 * u = a fl(2/5.5) - 1 on [0, 5.5] (a minimax fit of relative error 1.8e-8, done in double and
 * rounded to fp32); beyond, Phi is 0 or 1 (as erff's -1 and 1 make it: the tail is below 2e-8).
 * e = 2^n exp(r), n = round(-a^2/2 / ln 2), r = -a^2/2 - n ln 2 in [-ln2/2, ln2/2] (ln 2 in two
 * parts, n ln2_hi exact), exp(r) a degree-6 minimax polynomial (relative error 2e-9); a is
 * clamped to 9 first (2^n stays normal) and e is 0 from 9 on (x phi(x) < 1e-17 there) and for NaN.
 * As evaluated in fp32 (tests/layers/test_gelu_kernels.c): Phi within 1.2e-7 of the double CDF (2
 * ulp of values in [0.5, 1), most of it the rounding of u and of Horner's steps near a = 0; erff's
 * 0.5 (1 + erf) had 3e-8), and within 8e-7 relative on the lower tail down to -5.5 (where 1 + erf
 * lost all digits); phi within 1.6e-7 relative of the density of the fp32-rounded x^2. gelu(-inf)
 * and gelu'(+-inf) are NaN as with erff, NaN gives NaN. */
#pragma once
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/bf16.h"

typedef struct {
    float cdf, pdf; /* Phi(x), phi(x) */
} GeluPhi;

static const float GELU_TAIL_END = 5.5f, GELU_PDF_END = 9.0f;
/* R(a) = sum_k GELU_R[k] u^k, u = a fl(2/5.5) - 1 */
static const float GELU_R[16] = {
    1.307247281e-01f, -1.084854826e-01f, 8.409250528e-02f, -6.149087474e-02f, 4.272346571e-02f, -2.838028222e-02f,
    1.814329810e-02f, -1.110487897e-02f, 6.388355512e-03f, -3.777846927e-03f, 2.558973618e-03f, -1.248083194e-03f,
    1.149563832e-04f, -1.587020379e-04f, 4.250491038e-04f, -1.824952778e-04f};
/* exp(r) = sum_k GELU_EXP[k] r^k on [-ln2/2, ln2/2] */
static const float GELU_EXP[7] = {1.0f, 1.0f, 4.999999106e-01f, 1.666641980e-01f,
                                  4.166822508e-02f, 8.374815807e-03f, 1.383684576e-03f};

/* The bits of a float and back; selects are masks on them (a float compare or ?: in the loop
 * leaves control flow that the x86-64-v3 vectorizer does not convert). */
typedef union {
    float f;
    uint32_t u;
} GeluWord;
static inline uint32_t gelu_bits(float f) { return (GeluWord){.f = f}.u; }
static inline float gelu_float(uint32_t u) { return (GeluWord){.u = u}.f; }

static inline __attribute__((always_inline)) GeluPhi gelu_phi(float x) {
    const uint32_t xb = gelu_bits(x), magnitude = xb & 0x7fffffffu;
    const uint32_t in_pdf = 0u - (uint32_t)(magnitude < 0x41100000u);  /* |x| < 9 (not NaN) */
    const uint32_t in_tail = 0u - (uint32_t)(magnitude < 0x40b00000u); /* |x| < 5.5 */
    const uint32_t positive = 0u - (uint32_t)((int32_t)xb > 0);        /* x > 0 (or NaN of sign +) */
    const float a = gelu_float((magnitude & in_pdf) | (0x41100000u & ~in_pdf)); /* min(|x|, 9), NaN: 9 */
    const float h = a * a;
    const float shift = 12582912.0f; /* 1.5 2^23: adding it rounds to an integer */
    const float n = fmaf(h, -0.5f * 1.44269504088896341f, shift) - shift;
    const float r = fmaf(n, -1.42860677e-6f, fmaf(n, -0.693145751953125f, -0.5f * h));
    const float *ce = GELU_EXP; /* Horner, written out: the vectorizer takes straight code */
    float p = fmaf(fmaf(fmaf(ce[6], r, ce[5]), r, ce[4]), r, ce[3]);
    p = fmaf(fmaf(fmaf(p, r, ce[2]), r, ce[1]), r, ce[0]);
    const float two_n = gelu_float((uint32_t)((int32_t)n + 127) << 23);
    const float e = gelu_float(gelu_bits(p * two_n) & in_pdf); /* 0 from |x| = 9 on, and for NaN */
    const float u = fmaf(a, 2.0f / 5.5f, -1.0f);
    const float *cr = GELU_R;
    float R = fmaf(fmaf(fmaf(fmaf(cr[15], u, cr[14]), u, cr[13]), u, cr[12]), u, cr[11]);
    R = fmaf(fmaf(fmaf(fmaf(R, u, cr[10]), u, cr[9]), u, cr[8]), u, cr[7]);
    R = fmaf(fmaf(fmaf(fmaf(R, u, cr[6]), u, cr[5]), u, cr[4]), u, cr[3]);
    R = fmaf(fmaf(fmaf(R, u, cr[2]), u, cr[1]), u, cr[0]);
    const float tail_R = gelu_float(gelu_bits(R) & in_tail); /* Phi 0 or 1 from |x| = 5.5 on */
    /* Phi(x) = 1 - e R (x > 0) or e R; the product's one use is the select: nothing to fuse */
    const uint32_t upper = gelu_bits(fmaf(-e, tail_R, 1.0f)), lower = gelu_bits(e * tail_R);
    return (GeluPhi){gelu_float((upper & positive) | (lower & ~positive)), e * 0.39894228040143268f};
}

/* The passes, each over count elements of contiguous rows (an element's work is its own: the
 * callers split rows or blocks among threads as they like). Pointers that may be equal are noted;
 * the loops read an element before writing it. */

/* act = gelu(pre + b), act16 = bf16 of it, slope (slope16) = gelu'(pre + b): those of the outputs
 * named in the constant `outputs` (GELU_ACT | ...), the others unused; bias 0: b unused (pre
 * alone). act may equal pre, slope may equal pre. */
enum { GELU_ACT = 1, GELU_ACT16 = 2, GELU_SLOPE = 4, GELU_SLOPE16 = 8 };
static inline __attribute__((always_inline)) void gelu_pass(const int outputs, const int bias, float *act,
                                                            bf16 *restrict act16, float *slope,
                                                            bf16 *restrict slope16, const float *pre,
                                                            const float *restrict b, int count) {
#pragma omp simd
    for (int c = 0; c < count; c++) {
        const float x = bias ? pre[c] + b[c] : pre[c];
        const GeluPhi f = gelu_phi(x);
        const float y = x * f.cdf, dy = fmaf(x, f.pdf, f.cdf);
        if (outputs & GELU_ACT)
            act[c] = y;
        if (outputs & GELU_ACT16)
            act16[c] = bf16_from_float(y);
        if (outputs & GELU_SLOPE)
            slope[c] = dy;
        if (outputs & GELU_SLOPE16)
            slope16[c] = bf16_from_float(dy);
    }
}

/* The four passes of the callers, b NULL for none. */
static inline __attribute__((always_inline)) void gelu_pass_bias(const int outputs, float *act, bf16 *act16,
                                                                 float *slope, bf16 *slope16, const float *pre,
                                                                 const float *b, int count) {
    if (b)
        gelu_pass(outputs, 1, act, act16, slope, slope16, pre, b, count);
    else
        gelu_pass(outputs, 0, act, act16, slope, slope16, pre, NULL, count);
}

/* d_in = d_out gelu'(in) (d_in may equal d_out) */
static inline __attribute__((always_inline)) void gelu_backward_pass(float *d_in, const float *d_out,
                                                                     const float *restrict in, int count) {
#pragma omp simd
    for (int c = 0; c < count; c++) {
        const float x = in[c];
        const GeluPhi f = gelu_phi(x);
        d_in[c] = d_out[c] * fmaf(x, f.pdf, f.cdf);
    }
}

/* A column block of gelu_bias_backward: rows [N, width] with leading dimension ld, d = d_act slope
 * into d_pre (fp32; may equal d_act) with slope, or (bf16_io, a constant) into d_pre16 with slope16;
 * acc [width] += d row by row in order. d's product has a store among its uses, so GCC does not
 * fuse it into the sum. (Two rows a step, acc loaded and stored once for both, timed the same:
 * the pass is bound by memory.) */
static inline __attribute__((always_inline)) void gelu_bias_block(const int bf16_io, float *d_pre,
                                                                  bf16 *restrict d_pre16, float *restrict acc,
                                                                  const float *d_act, const float *restrict slope,
                                                                  const bf16 *restrict slope16, int N, int ld,
                                                                  int width) {
    for (int n = 0; n < N; n++) {
        const size_t row = (size_t)n * ld;
        const float *g = d_act + row;
#pragma omp simd
        for (int c = 0; c < width; c++) {
            const float d = g[c] * (bf16_io ? bf16_to_float(slope16[row + c]) : slope[row + c]);
            if (bf16_io)
                d_pre16[row + c] = bf16_from_float(d);
            else
                d_pre[row + c] = d;
            acc[c] += d;
        }
    }
}

/* The passes as functions, one set per instruction set (gelu_kernels below). */
typedef struct {
    void (*act)(float *act, const float *pre, const float *b, int count);
    void (*act_slope)(float *slope, float *act, const float *pre, const float *b, int count);
    void (*act16)(bf16 *act16, const float *pre, const float *b, int count);
    void (*act_slope16)(bf16 *slope16, bf16 *act16, const float *pre, const float *b, int count);
    void (*backward)(float *d_in, const float *d_out, const float *in, int count);
    void (*bias_block)(float *d_pre, float *acc, const float *d_act, const float *slope, int N, int ld, int width);
    void (*bias_block16)(bf16 *d_pre16, float *acc, const float *d_act, const bf16 *slope16, int N, int ld,
                         int width);
} GeluKernels;

/* The portable set (avx512 0) or the AVX-512 one (1: only where gelu_has_avx512()). */
const GeluKernels *gelu_kernels(int avx512);
/* The CPU has the AVX-512 subsets the AVX-512 set is compiled for (F, BW, DQ, VL). */
int gelu_has_avx512(void);
/* The AVX-512 set (gelu_avx512.c). */
extern const GeluKernels gelu_kernels_avx512;
