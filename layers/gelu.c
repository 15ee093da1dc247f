/* GELU, exact erf form (as BERT), from the loops of layers/gelu_kernels.h: the portable set here,
 * the AVX-512 set (gelu_avx512.c) where the CPU has it, the same bits either way. */
#include "layers/layers.h"

#include <math.h>

#include "core/common.h"
#include "layers/gelu_kernels.h"

static void gelu_act_portable(float *act, const float *pre, const float *b, int count) {
    gelu_pass_bias(GELU_ACT, act, NULL, NULL, NULL, pre, b, count);
}
static void gelu_act_slope_portable(float *slope, float *act, const float *pre, const float *b, int count) {
    gelu_pass_bias(GELU_ACT | GELU_SLOPE, act, NULL, slope, NULL, pre, b, count);
}
static void gelu_act16_portable(bf16 *act16, const float *pre, const float *b, int count) {
    gelu_pass_bias(GELU_ACT16, NULL, act16, NULL, NULL, pre, b, count);
}
static void gelu_act_slope16_portable(bf16 *slope16, bf16 *act16, const float *pre, const float *b, int count) {
    gelu_pass_bias(GELU_ACT16 | GELU_SLOPE16, NULL, act16, NULL, slope16, pre, b, count);
}
static void gelu_backward_portable(float *d_in, const float *d_out, const float *in, int count) {
    gelu_backward_pass(d_in, d_out, in, count);
}
static void gelu_bias_block_portable(float *d_pre, float *acc, const float *d_act, const float *slope, int N, int ld,
                                int width) {
    gelu_bias_block(0, d_pre, NULL, acc, d_act, slope, NULL, N, ld, width);
}
static void gelu_bias_block16_portable(bf16 *d_pre16, float *acc, const float *d_act, const bf16 *slope16, int N,
                                  int ld, int width) {
    gelu_bias_block(1, NULL, d_pre16, acc, d_act, NULL, slope16, N, ld, width);
}

static const GeluKernels gelu_kernels_portable = {gelu_act_portable,      gelu_act_slope_portable,   gelu_act16_portable,
                                                  gelu_act_slope16_portable, gelu_backward_portable, gelu_bias_block_portable,
                                                  gelu_bias_block16_portable};

int gelu_has_avx512(void) { return cpu_has_avx512_loops(); }

const GeluKernels *gelu_kernels(int avx512) { return avx512 ? &gelu_kernels_avx512 : &gelu_kernels_portable; }

static const GeluKernels *host_kernels(void) { return gelu_kernels(gelu_has_avx512()); }

/* Fixed work blocks: which elements a thread takes depends on the thread count, an element's
 * value does not. */
enum { GELU_BLOCK = 2048 };

/* out [n] = 0.5 x (1 + erf(x / sqrt 2)); out may alias in */
void gelu_forward(float *out, const float *in, size_t n) {
    const GeluKernels *k = host_kernels();
    const size_t n_blocks = (n + GELU_BLOCK - 1) / GELU_BLOCK;
#pragma omp parallel for schedule(static)
    for (size_t block = 0; block < n_blocks; block++) {
        const size_t start = block * GELU_BLOCK, count = n - start < GELU_BLOCK ? n - start : GELU_BLOCK;
        k->act(out + start, in + start, NULL, (int)count);
    }
}

/* d_in [n] = d_out * (Phi(x) + x phi(x)),  phi(x) = exp(-x^2/2) / sqrt(2 pi); may alias */
void gelu_backward(float *d_in, const float *d_out, const float *in, size_t n) {
    const GeluKernels *k = host_kernels();
    const size_t n_blocks = (n + GELU_BLOCK - 1) / GELU_BLOCK;
#pragma omp parallel for schedule(static)
    for (size_t block = 0; block < n_blocks; block++) {
        const size_t start = block * GELU_BLOCK, count = n - start < GELU_BLOCK ? n - start : GELU_BLOCK;
        k->backward(d_in + start, d_out + start, in + start, (int)count);
    }
}

/* act [N,o] = gelu(pre), pre = in [N,i] . W [o,i]^T + b [o], and slope [N,o] = gelu'(pre) =
 * Phi(pre) + pre phi(pre) for the backward: the GEMM writes pre into slope (beta 0), one pass adds
 * the bias, applies GELU and overwrites pre with its slope. Phi and phi share one exp
 * (gelu_kernels.h), so the backward needs neither, and pre itself is not kept.
 * slope NULL (forward only): the GEMM writes pre into act and the pass skips the slope; act has the
 * same bits either way (elementwise, the same operations). gelu_rows is the pass, run by
 * OMP_TEAM_OR_ALONE (core/common.h). */
static __attribute__((noinline)) void gelu_rows(const GeluKernels *k, float *slope, float *act, const float *b,
                                                int N, int o) {
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
        float *a = act + (size_t)n * o;
        if (slope)
            k->act_slope(slope + (size_t)n * o, a, slope + (size_t)n * o, b, o);
        else
            k->act(a, a, b, o);
    }
}

void linear_gelu_forward(Gemm *g, float *restrict slope, float *restrict act, const float *restrict in,
                         const float *restrict W, const float *restrict b, int N, int i, int o) {
    gemm(g, GEMM_N, GEMM_T, N, o, i, 1.0f, in, i, W, i, 0.0f, slope ? slope : act, o);
    const GeluKernels *k = host_kernels();
    OMP_TEAM_OR_ALONE(gelu_rows(k, slope, act, b, N, o));
}

/* The same pass with act and slope in bf16 only (act16, slope16 [N,o]: they feed only W2's products
 * and GELU's backward, which PyTorch autocast also keeps in bf16); the GEMM writes pre into the fp32
 * scratch pre [N,o]. slope16 NULL (forward only): act16 alone, with the same bits. */
void linear_gelu_forward_bf16(Gemm *g, float *restrict pre, bf16 *restrict slope16, bf16 *restrict act16,
                              const float *restrict in, const float *restrict W, const float *restrict b, int N,
                              int i, int o) {
    gemm(g, GEMM_N, GEMM_T, N, o, i, 1.0f, in, i, W, i, 0.0f, pre, o);
    const GeluKernels *k = host_kernels();
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const size_t row = (size_t)n * o;
        if (slope16)
            k->act_slope16(slope16 + row, act16 + row, pre + row, b, o);
        else
            k->act16(act16 + row, pre + row, b, o);
    }
}

/* d = d_act * slope into d_pre (fp32) or d_pre16 (bf16, the other NULL), db += the fp32 column
 * sums of d; slope in fp32 or, with d_pre16, in bf16 (slope16). Threads own column blocks
 * (col_blocks, layers/layers.h) and sum each column over the rows in order, so db is the same for
 * any thread count; its `omp for` is run by OMP_TEAM_OR_ALONE (core/common.h). */
static __attribute__((noinline)) void gelu_bias_pass(const GeluKernels *k, float *d_pre, bf16 *d_pre16, float *db,
                                                     const float *d_act, const float *slope, const bf16 *slope16,
                                                     int N, int o) {
    const ColBlocks blocks = col_blocks(o);
#pragma omp for schedule(static)
    for (int block = 0; block < blocks.count; block++) {
        const int c0 = block * blocks.width, width = col_block_width(blocks, block);
        float acc[COL_BLOCK_MAX] = {0};
        if (d_pre16)
            k->bias_block16(d_pre16 + c0, acc, d_act + c0, slope16 + c0, N, o, width);
        else
            k->bias_block(d_pre + c0, acc, d_act + c0, slope + c0, N, o, width);
        for (int c = 0; c < width; c++)
            db[c0 + c] += acc[c];
    }
}

/* d_pre [N,o] = d_act * slope (d_pre may alias d_act) and db [o] += sum_n d_pre: GELU's backward
 * and the bias gradient of the linear before it in one pass. */
void gelu_bias_backward(float *d_pre, float *restrict db, const float *d_act, const float *restrict slope, int N,
                        int o) {
    const GeluKernels *k = host_kernels();
    OMP_TEAM_OR_ALONE(gelu_bias_pass(k, d_pre, NULL, db, d_act, slope, NULL, N, o));
}

/* The same from slope16 (bf16) with d_pre in bf16 only: the sum stays fp32, the products read d_pre16. */
void gelu_bias_backward_bf16(bf16 *restrict d_pre16, float *restrict db, const float *d_act,
                             const bf16 *restrict slope16, int N, int o) {
    const GeluKernels *k = host_kernels();
    OMP_TEAM_OR_ALONE(gelu_bias_pass(k, NULL, d_pre16, db, d_act, NULL, slope16, N, o));
}
