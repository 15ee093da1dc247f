/* Fully connected layer, out = in W^T + b, as in torch.nn.Linear. */
#include "layers/layers.h"

#include <string.h>

/* out [N,o] = in [N,i] . W [o,i]^T + b [o]: rows of out start as b, then GEMM with beta = 1. */
void linear_forward(Gemm *g, float *restrict out, const float *restrict in, const float *restrict W,
                    const float *restrict b, int N, int i, int o) {
    if (b) {
#pragma omp parallel for schedule(static)
        for (int n = 0; n < N; n++)
            memcpy(out + (size_t)n * o, b, (size_t)o * sizeof *out);
    }
    gemm(g, GEMM_N, GEMM_T, N, o, i, 1.0f, in, i, W, i, b ? 1.0f : 0.0f, out, o);
}

/* d_in [N,i] = beta d_in + d_out [N,o] . W [o,i];  dW [o,i] += d_out^T . in;  db [o] += sum_n d_out
 * (d_out converted to bf16 once for both products in bf16; nothing in fp32) */
static void linear_backward_beta(Gemm *g, float *restrict d_in, float beta, float *restrict dW,
                                 float *restrict db, const float *restrict d_out,
                                 const float *restrict in, const float *restrict W, int N, int i,
                                 int o) {
    gemm_stage(g, d_out, (size_t)N, (size_t)o, (size_t)o);
    if (d_in)
        gemm(g, GEMM_N, GEMM_N, N, i, o, 1.0f, d_out, o, W, i, beta, d_in, i);
    gemm(g, GEMM_T, GEMM_N, o, i, N, 1.0f, d_out, o, in, i, 1.0f, dW, i);
    gemm_unstage(g);
    if (!db)
        return;
    const ColBlocks blocks = col_blocks(o);
#pragma omp parallel for schedule(static)
    for (int block = 0; block < blocks.count; block++) {
        const int c0 = block * blocks.width, width = col_block_width(blocks, block);
        float acc[COL_BLOCK_MAX] = {0};
        for (int n = 0; n < N; n++) {
            const float *restrict g = d_out + (size_t)n * o + c0;
            for (int c = 0; c < width; c++)
                acc[c] += g[c];
        }
        for (int c = 0; c < width; c++)
            db[c0 + c] += acc[c];
    }
}

/* d_in [N,i] = d_out [N,o] . W [o,i];  dW [o,i] += d_out^T . in;  db [o] += sum_n d_out */
void linear_backward(Gemm *g, float *restrict d_in, float *restrict dW, float *restrict db,
                     const float *restrict d_out, const float *restrict in,
                     const float *restrict W, int N, int i, int o) {
    linear_backward_beta(g, d_in, 0.0f, dW, db, d_out, in, W, N, i, o);
}

/* d_in [N,i] += d_out [N,o] . W [o,i] (the GEMM's beta = 1);  dW, db as linear_backward */
void linear_backward_accumulate(Gemm *g, float *restrict d_in, float *restrict dW, float *restrict db,
                                const float *restrict d_out, const float *restrict in,
                                const float *restrict W, int N, int i, int o) {
    linear_backward_beta(g, d_in, 1.0f, dW, db, d_out, in, W, N, i, o);
}
