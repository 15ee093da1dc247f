/* LayerNorm over the last dimension with saved row statistics. */
#include "layers/layers.h"

#include <math.h>

/* d_gamma/d_beta work unit: one thread owns this many columns and loops over all rows. */
enum { LN_COL_BLOCK = 64 };

/* out [N,C] = (in - mean) * rstd * gamma + beta;  mean, rstd [N] (biased variance) */
void layernorm_forward(float *restrict out, float *restrict mean, float *restrict rstd,
                       const float *restrict in, const float *restrict gamma,
                       const float *restrict beta, int N, int C, float eps) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *restrict x = in + (size_t)n * C;
        float *restrict y = out + (size_t)n * C;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int c = 0; c < C; c++)
            sum += x[c];
        const float mu = sum / (float)C;
        float sq = 0.0f; /* two-pass variance: no cancellation for rows with a large mean */
#pragma omp simd reduction(+ : sq)
        for (int c = 0; c < C; c++)
            sq += (x[c] - mu) * (x[c] - mu);
        const float rs = 1.0f / sqrtf(sq / (float)C + eps);
        for (int c = 0; c < C; c++)
            y[c] = (x[c] - mu) * rs * gamma[c] + beta[c];
        mean[n] = mu;
        rstd[n] = rs;
    }
}

/* With xhat = (in - mean) * rstd and g = d_out * gamma (per row, C columns):
 *   d_in = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat))
 *   d_gamma += sum_n d_out * xhat,  d_beta += sum_n d_out
 * The column pass runs first because d_in may alias d_out. */
void layernorm_backward(float *d_in, float *restrict d_gamma, float *restrict d_beta,
                        const float *d_out, const float *restrict in, const float *restrict gamma,
                        const float *restrict mean, const float *restrict rstd, int N, int C) {
    const int n_blocks = (C + LN_COL_BLOCK - 1) / LN_COL_BLOCK;
#pragma omp parallel for schedule(static)
    for (int block = 0; block < n_blocks; block++) {
        const int c0 = block * LN_COL_BLOCK;
        const int width = C - c0 < LN_COL_BLOCK ? C - c0 : LN_COL_BLOCK;
        float acc_gamma[LN_COL_BLOCK] = {0}, acc_beta[LN_COL_BLOCK] = {0};
        for (int n = 0; n < N; n++) {
            const float *restrict x = in + (size_t)n * C + c0;
            const float *restrict g = d_out + (size_t)n * C + c0;
            const float mu = mean[n], rs = rstd[n];
            for (int c = 0; c < width; c++) {
                acc_gamma[c] += g[c] * ((x[c] - mu) * rs);
                acc_beta[c] += g[c];
            }
        }
        for (int c = 0; c < width; c++) {
            d_gamma[c0 + c] += acc_gamma[c];
            d_beta[c0 + c] += acc_beta[c];
        }
    }

    const float inv_C = 1.0f / (float)C;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *restrict x = in + (size_t)n * C;
        const float *g = d_out + (size_t)n * C;
        float *dx = d_in + (size_t)n * C;
        const float mu = mean[n], rs = rstd[n];
        float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
        for (int c = 0; c < C; c++) {
            const float gc = g[c] * gamma[c];
            sum_g += gc;
            sum_gx += gc * ((x[c] - mu) * rs);
        }
        const float mean_g = sum_g * inv_C, mean_gx = sum_gx * inv_C;
#pragma omp simd
        for (int c = 0; c < C; c++)
            dx[c] = rs * (g[c] * gamma[c] - mean_g - (x[c] - mu) * rs * mean_gx);
    }
}
