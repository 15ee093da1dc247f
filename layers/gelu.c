/* GELU, exact erf form (as BERT). */
#include "layers/layers.h"

#include <math.h>

#include "core/common.h"

/* glibc >= 2.35 ships vector erff/expf (libmvec); declaring them SIMD lets the loops below call
 * the 8-wide versions (GCC does this on its own only under -ffast-math). */
#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 35)
#pragma omp declare simd notinbranch
float erff(float);
#pragma omp declare simd notinbranch
float expf(float);
#endif

/* Fixed work blocks: an element takes the vector or the scalar path by its position in the
 * block, not by the thread count, so results are bit-identical for any number of threads. */
enum { GELU_BLOCK = 2048 };

static const float GELU_INV_SQRT2 = 0.70710678118654752f;
static const float GELU_INV_SQRT_2PI = 0.39894228040143268f;

/* out [n] = 0.5 x (1 + erf(x / sqrt 2)); out may alias in */
void gelu_forward(float *out, const float *in, size_t n) {
    const size_t n_blocks = (n + GELU_BLOCK - 1) / GELU_BLOCK;
#pragma omp parallel for schedule(static)
    for (size_t block = 0; block < n_blocks; block++) {
        const size_t end = n - block * GELU_BLOCK < GELU_BLOCK ? n : (block + 1) * GELU_BLOCK;
#pragma omp simd
        for (size_t e = block * GELU_BLOCK; e < end; e++) {
            const float x = in[e];
            out[e] = 0.5f * x * (1.0f + erff(x * GELU_INV_SQRT2));
        }
    }
}

/* d_in [n] = d_out * (Phi(x) + x phi(x)),  phi(x) = exp(-x^2/2) / sqrt(2 pi); may alias */
void gelu_backward(float *d_in, const float *d_out, const float *in, size_t n) {
    const size_t n_blocks = (n + GELU_BLOCK - 1) / GELU_BLOCK;
#pragma omp parallel for schedule(static)
    for (size_t block = 0; block < n_blocks; block++) {
        const size_t end = n - block * GELU_BLOCK < GELU_BLOCK ? n : (block + 1) * GELU_BLOCK;
#pragma omp simd
        for (size_t e = block * GELU_BLOCK; e < end; e++) {
            const float x = in[e];
            const float cdf = 0.5f * (1.0f + erff(x * GELU_INV_SQRT2));
            const float pdf = GELU_INV_SQRT_2PI * expf(-0.5f * x * x);
            d_in[e] = d_out[e] * (cdf + x * pdf);
        }
    }
}

/* act [N,o] = gelu(pre), pre = in [N,i] . W [o,i]^T + b [o], and slope [N,o] = gelu'(pre) =
 * Phi(pre) + pre phi(pre) for the backward: the GEMM writes pre into slope (beta 0), one pass adds
 * the bias, applies GELU and overwrites pre with its slope. erf(pre / sqrt 2) is computed here once
 * for both, so the backward needs neither erf nor exp, and pre itself is not kept.
 * slope NULL (forward only): the GEMM writes pre into act and the pass skips the slope's exp; the
 * two loops share every operation that act depends on, so act has the same bits either way.
 * gelu_rows is the pass, run by OMP_TEAM_OR_ALONE (core/common.h). */
static __attribute__((noinline)) void gelu_rows(float *restrict slope, float *restrict act, const float *restrict b,
                                                int N, int o) {
    if (!slope) {
#pragma omp for schedule(static)
        for (int n = 0; n < N; n++) {
            float *restrict a = act + (size_t)n * o;
#pragma omp simd
            for (int c = 0; c < o; c++) {
                const float x = a[c] + b[c];
                a[c] = x * (0.5f * (1.0f + erff(x * GELU_INV_SQRT2)));
            }
        }
        return;
    }
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
        float *restrict s = slope + (size_t)n * o, *restrict a = act + (size_t)n * o;
#pragma omp simd
        for (int c = 0; c < o; c++) {
            const float x = s[c] + b[c];
            const float cdf = 0.5f * (1.0f + erff(x * GELU_INV_SQRT2));
            const float pdf = GELU_INV_SQRT_2PI * expf(-0.5f * x * x);
            a[c] = x * cdf;
            s[c] = cdf + x * pdf;
        }
    }
}

void linear_gelu_forward(Gemm *g, float *restrict slope, float *restrict act, const float *restrict in,
                         const float *restrict W, const float *restrict b, int N, int i, int o) {
    gemm(g, GEMM_N, GEMM_T, N, o, i, 1.0f, in, i, W, i, 0.0f, slope ? slope : act, o);
    OMP_TEAM_OR_ALONE(gelu_rows(slope, act, b, N, o));
}

/* The same pass with act and slope in bf16 only (act16, slope16 [N,o]: they feed only W2's products
 * and GELU's backward, which PyTorch autocast also keeps in bf16); the GEMM writes pre into the fp32
 * scratch pre [N,o]. slope16 NULL (forward only): act16 alone, with the same bits. */
void linear_gelu_forward_bf16(Gemm *g, float *restrict pre, bf16 *restrict slope16, bf16 *restrict act16,
                              const float *restrict in, const float *restrict W, const float *restrict b, int N,
                              int i, int o) {
    gemm(g, GEMM_N, GEMM_T, N, o, i, 1.0f, in, i, W, i, 0.0f, pre, o);
    if (!slope16) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++) {
            const float *restrict p = pre + (size_t)n * o;
            bf16 *restrict a16 = act16 + (size_t)n * o;
#pragma omp simd
            for (int c = 0; c < o; c++) {
                const float x = p[c] + b[c];
                a16[c] = bf16_from_float(x * (0.5f * (1.0f + erff(x * GELU_INV_SQRT2))));
            }
        }
        return;
    }
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *restrict p = pre + (size_t)n * o;
        bf16 *restrict s16 = slope16 + (size_t)n * o, *restrict a16 = act16 + (size_t)n * o;
#pragma omp simd
        for (int c = 0; c < o; c++) {
            const float x = p[c] + b[c];
            const float cdf = 0.5f * (1.0f + erff(x * GELU_INV_SQRT2));
            const float pdf = GELU_INV_SQRT_2PI * expf(-0.5f * x * x);
            a16[c] = bf16_from_float(x * cdf);
            s16[c] = bf16_from_float(cdf + x * pdf);
        }
    }
}

/* d = d_act * slope into d_pre (fp32) or d_pre16 (bf16, the other NULL), db += the fp32 column
 * sums of d; slope in fp32 or, with d_pre16, in bf16 (slope16). Inlined into each caller with
 * constant NULLs, so no loop tests them; its `omp for` is run by OMP_TEAM_OR_ALONE (core/common.h). */
static inline __attribute__((always_inline)) void
gelu_bias_pass(float *d_pre, bf16 *restrict d_pre16, float *restrict db, const float *d_act,
               const float *restrict slope, const bf16 *restrict slope16, int N, int o) {
    const ColBlocks blocks = col_blocks(o);
#pragma omp for schedule(static)
    for (int block = 0; block < blocks.count; block++) {
        const int c0 = block * blocks.width, width = col_block_width(blocks, block);
        float acc[COL_BLOCK_MAX] = {0};
        for (int n = 0; n < N; n++) {
            const size_t row = (size_t)n * o + c0;
            const float *g = d_act + row;
            if (d_pre16) {
                const bf16 *restrict s16 = slope16 + row;
                bf16 *restrict dx16 = d_pre16 + row;
#pragma omp simd
                for (int c = 0; c < width; c++) {
                    const float d = g[c] * bf16_to_float(s16[c]);
                    dx16[c] = bf16_from_float(d);
                    acc[c] += d;
                }
            } else {
                const float *restrict s = slope + row;
                float *dx = d_pre + row;
#pragma omp simd
                for (int c = 0; c < width; c++) {
                    const float d = g[c] * s[c];
                    dx[c] = d;
                    acc[c] += d;
                }
            }
        }
        for (int c = 0; c < width; c++)
            db[c0 + c] += acc[c];
    }
}

static __attribute__((noinline)) void gelu_bias_pass_f32(float *d_pre, float *restrict db, const float *d_act,
                                                         const float *restrict slope, int N, int o) {
    gelu_bias_pass(d_pre, NULL, db, d_act, slope, NULL, N, o);
}

/* d_pre [N,o] = d_act * slope (d_pre may alias d_act) and db [o] += sum_n d_pre: GELU's backward
 * and the bias gradient of the linear before it in one pass. Threads own column blocks and sum
 * over rows in order, so db is the same for any thread count. */
void gelu_bias_backward(float *d_pre, float *restrict db, const float *d_act, const float *restrict slope, int N,
                        int o) {
    OMP_TEAM_OR_ALONE(gelu_bias_pass_f32(d_pre, db, d_act, slope, N, o));
}

static __attribute__((noinline)) void gelu_bias_pass_bf16(bf16 *restrict d_pre16, float *restrict db,
                                                          const float *d_act, const bf16 *restrict slope16, int N,
                                                          int o) {
    gelu_bias_pass(NULL, d_pre16, db, d_act, NULL, slope16, N, o);
}

/* The same from slope16 (bf16) with d_pre in bf16 only: the sum stays fp32, the products read d_pre16. */
void gelu_bias_backward_bf16(bf16 *restrict d_pre16, float *restrict db, const float *d_act,
                             const bf16 *restrict slope16, int N, int o) {
    OMP_TEAM_OR_ALONE(gelu_bias_pass_bf16(d_pre16, db, d_act, slope16, N, o));
}
