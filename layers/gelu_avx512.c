/* The loops of layers/gelu_kernels.h compiled for AVX-512 (F, BW, DQ, VL) by function attributes,
 * 16 lanes a register: the same operations element for element as the portable set of gelu.c, so
 * the same bits (tests/layers/test_gelu.c). Called only where gelu_has_avx512(). */
#include <math.h>

#include "core/common.h"
#include "layers/gelu_kernels.h"

#define AVX512 AVX512_LOOPS

static AVX512 void gelu_act_avx512(float *act, const float *pre, const float *b, int count) {
    gelu_pass_bias(GELU_ACT, act, NULL, NULL, NULL, pre, b, count);
}
static AVX512 void gelu_act_slope_avx512(float *slope, float *act, const float *pre, const float *b, int count) {
    gelu_pass_bias(GELU_ACT | GELU_SLOPE, act, NULL, slope, NULL, pre, b, count);
}
static AVX512 void gelu_act16_avx512(bf16 *act16, const float *pre, const float *b, int count) {
    gelu_pass_bias(GELU_ACT16, NULL, act16, NULL, NULL, pre, b, count);
}
static AVX512 void gelu_act_slope16_avx512(bf16 *slope16, bf16 *act16, const float *pre, const float *b, int count) {
    gelu_pass_bias(GELU_ACT16 | GELU_SLOPE16, NULL, act16, NULL, slope16, pre, b, count);
}
static AVX512 void gelu_backward_avx512(float *d_in, const float *d_out, const float *in, int count) {
    gelu_backward_pass(d_in, d_out, in, count);
}
static AVX512 void gelu_bias_block_avx512(float *d_pre, float *acc, const float *d_act, const float *slope, int N, int ld,
                                int width) {
    gelu_bias_block(0, d_pre, NULL, acc, d_act, slope, NULL, N, ld, width);
}
static AVX512 void gelu_bias_block16_avx512(bf16 *d_pre16, float *acc, const float *d_act, const bf16 *slope16, int N,
                                  int ld, int width) {
    gelu_bias_block(1, NULL, d_pre16, acc, d_act, NULL, slope16, N, ld, width);
}

const GeluKernels gelu_kernels_avx512 = {gelu_act_avx512,         gelu_act_slope_avx512,  gelu_act16_avx512,
                                         gelu_act_slope16_avx512, gelu_backward_avx512,   gelu_bias_block_avx512,
                                         gelu_bias_block16_avx512};
