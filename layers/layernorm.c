/* LayerNorm over the last dimension with saved row statistics. */
#include "layers/layers.h"

#include <math.h>
#include <stdint.h>

#include "core/common.h"
#include "core/rng.h"

/* y = (x - mu) * rs * gamma + beta for one row of C, rs = 1/sqrt(var + eps) with the two-pass
 * variance (no cancellation for rows with a large mean); returns rs. */
static inline float normalize_row(float *restrict y, const float *restrict x, float mu, const float *restrict gamma,
                                  const float *restrict beta, int C, float eps) {
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (int c = 0; c < C; c++)
        sq += (x[c] - mu) * (x[c] - mu);
    const float rs = 1.0f / sqrtf(sq / (float)C + eps);
    for (int c = 0; c < C; c++)
        y[c] = (x[c] - mu) * rs * gamma[c] + beta[c];
    return rs;
}

/* The passes below are orphaned `omp for`s run by OMP_TEAM_OR_ALONE (core/common.h): a team, or at
 * one thread the caller alone, without a region. */

static __attribute__((noinline)) void forward_rows(float *restrict out, float *restrict mean, float *restrict rstd,
                                                   const float *restrict in, const float *restrict gamma,
                                                   const float *restrict beta, int N, int C, float eps) {
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *restrict x = in + (size_t)n * C;
        float *restrict y = out + (size_t)n * C;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (int c = 0; c < C; c++)
            sum += x[c];
        mean[n] = sum / (float)C;
        rstd[n] = normalize_row(y, x, mean[n], gamma, beta, C, eps);
    }
}

/* out [N,C] = (in - mean) * rstd * gamma + beta;  mean, rstd [N] (biased variance) */
void layernorm_forward(float *restrict out, float *restrict mean, float *restrict rstd,
                       const float *restrict in, const float *restrict gamma,
                       const float *restrict beta, int N, int C, float eps) {
    OMP_TEAM_OR_ALONE(forward_rows(out, mean, rstd, in, gamma, beta, N, C, eps));
}

/* keep ? v : +0 for the dropout mask bit of element `index` (v already scaled by 1/(1-p)), as a
 * bit mask so that a loop over it has no branch to vectorise (as dropout_span) */
static inline float dropout_masked(float v, uint64_t key, uint32_t index, uint32_t threshold) {
    union {
        float f;
        uint32_t u;
    } kept = {v};
    kept.u &= 0u - (uint32_t)(hash_bits24(key, index) >= threshold);
    return kept.f;
}

/* The rows of residual_layernorm_forward_keyed (below). */
static __attribute__((noinline)) void
residual_forward_rows(float *restrict out, float *restrict sum, float *restrict mean, float *restrict rstd,
                      const float *restrict res, const float *restrict branch, const float *restrict branch_bias,
                      const float *restrict gamma, const float *restrict beta, int N, int C, float eps, float p,
                      uint64_t key, const int *row_keys) {
    const float scale = 1.0f / (1.0f - p);
    const uint32_t threshold = hash_threshold(p);
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
        const size_t row = (size_t)n * C, key_row = (size_t)(row_keys ? row_keys[n] : n) * C;
        const float *restrict r = res + row, *restrict b = branch + row;
        float *restrict x = sum + row, *restrict y = out + row;
        float total = 0.0f;
        if (p > 0.0f) {
#pragma omp simd reduction(+ : total)
            for (int c = 0; c < C; c++) {
                const float v = (b[c] + branch_bias[c]) * scale;
                x[c] = r[c] + dropout_masked(v, key, (uint32_t)key_row + (uint32_t)c, threshold);
                total += x[c];
            }
        } else {
#pragma omp simd reduction(+ : total)
            for (int c = 0; c < C; c++) {
                x[c] = r[c] + (b[c] + branch_bias[c]);
                total += x[c];
            }
        }
        mean[n] = total / (float)C;
        rstd[n] = normalize_row(y, x, mean[n], gamma, beta, C, eps);
    }
}

/* sum [N,C] = res + dropout(branch + branch_bias), keep(e) = hash_bits24(key, e) >=
 * hash_threshold(p) for e = n*C + c (exactly dropout_forward's mask and arithmetic), then
 * out = LN(sum) as layernorm_forward: the bias, the dropout, the residual add and the statistics
 * in one pass over a row, the normalisation in a second, instead of a pass over [N,C] for each
 * (and the linear before needs no bias fill). p = 0: no dropout. */
void residual_layernorm_forward(float *restrict out, float *restrict sum, float *restrict mean,
                                float *restrict rstd, const float *restrict res,
                                const float *restrict branch, const float *restrict branch_bias,
                                const float *restrict gamma, const float *restrict beta, int N,
                                int C, float eps, float p, uint64_t key) {
    residual_layernorm_forward_keyed(out, sum, mean, rstd, res, branch, branch_bias, gamma, beta, N, C,
                                     eps, p, key, NULL);
}

void residual_layernorm_forward_keyed(float *restrict out, float *restrict sum, float *restrict mean,
                                      float *restrict rstd, const float *restrict res,
                                      const float *restrict branch, const float *restrict branch_bias,
                                      const float *restrict gamma, const float *restrict beta, int N,
                                      int C, float eps, float p, uint64_t key, const int *row_keys) {
    RP_CHECK(p == 0.0f || dropout_indices_fit((uint64_t)N * (uint64_t)C),
             "residual_layernorm: [%d, %d] exceeds one dropout key's 2^32 mask indices", N, C);
    OMP_TEAM_OR_ALONE(residual_forward_rows(out, sum, mean, rstd, res, branch, branch_bias, gamma, beta, N, C, eps, p,
                                            key, row_keys));
}

/* One row's layer-norm backward statistics: mean_g = mean_c(g * gamma) and
 * mean_gx = mean_c(g * gamma * xhat), xhat = (x - mu) * rstd. */
static inline void row_grad_means(float *mean_g, float *mean_gx, const float *restrict g,
                                  const float *restrict x, const float *restrict gamma, float mu,
                                  float rs, int C) {
    float sum_g = 0.0f, sum_gx = 0.0f;
#pragma omp simd reduction(+ : sum_g, sum_gx)
    for (int c = 0; c < C; c++) {
        const float gc = g[c] * gamma[c];
        sum_g += gc;
        sum_gx += gc * ((x[c] - mu) * rs);
    }
    const float inv_C = 1.0f / (float)C;
    *mean_g = sum_g * inv_C;
    *mean_gx = sum_gx * inv_C;
}

/* The passes of layernorm_backward (below): the column sums, then (after the `omp for`'s barrier,
 * since d_in may alias d_out) the rows. */
static __attribute__((noinline)) void backward_passes(float *d_in, float *restrict d_gamma, float *restrict d_beta,
                                                      const float *d_out, const float *restrict in,
                                                      const float *restrict gamma, const float *restrict mean,
                                                      const float *restrict rstd, int N, int C) {
    const ColBlocks blocks = col_blocks(C);
#pragma omp for schedule(static)
    for (int block = 0; block < blocks.count; block++) {
        const int c0 = block * blocks.width, width = col_block_width(blocks, block);
        float acc_gamma[COL_BLOCK_MAX] = {0}, acc_beta[COL_BLOCK_MAX] = {0};
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

#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *restrict x = in + (size_t)n * C;
        const float *g = d_out + (size_t)n * C;
        float *dx = d_in + (size_t)n * C;
        const float mu = mean[n], rs = rstd[n];
        float mean_g, mean_gx;
        row_grad_means(&mean_g, &mean_gx, g, x, gamma, mu, rs, C);
#pragma omp simd
        for (int c = 0; c < C; c++)
            dx[c] = rs * (g[c] * gamma[c] - mean_g - (x[c] - mu) * rs * mean_gx);
    }
}

/* With xhat = (in - mean) * rstd and g = d_out * gamma (per row, C columns):
 *   d_in = rstd * (g - mean_c(g) - xhat * mean_c(g * xhat))
 *   d_gamma += sum_n d_out * xhat,  d_beta += sum_n d_out
 * The column pass runs first because d_in may alias d_out. */
void layernorm_backward(float *d_in, float *restrict d_gamma, float *restrict d_beta,
                        const float *d_out, const float *restrict in, const float *restrict gamma,
                        const float *restrict mean, const float *restrict rstd, int N, int C) {
    OMP_TEAM_OR_ALONE(backward_passes(d_in, d_gamma, d_beta, d_out, in, gamma, mean, rstd, N, C));
}

/* The passes of residual_layernorm_backward_keyed (below): the row statistics, then (after the
 * `omp for`'s barrier) the column blocks. d_sum is written without a copy through a buffer: directly
 * where there is no d_res (the same expression), else as ds + d_res from the block's ds; d_branch then
 * reads d_sum's element, which holds the same value as ds did. */
static __attribute__((noinline)) void
residual_backward_passes(float *d_sum, float *d_branch, float *restrict d_bias, float *restrict d_gamma,
                         float *restrict d_beta, float *restrict row_stats, const float *d_out, const float *d_res,
                         const float *restrict in, const float *restrict gamma, const float *restrict mean,
                         const float *restrict rstd, int N, int C, float p, uint64_t key, const int *row_keys) {
#pragma omp for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *restrict x = in + (size_t)n * C, *restrict g = d_out + (size_t)n * C;
        row_grad_means(&row_stats[2 * n], &row_stats[2 * n + 1], g, x, gamma, mean[n], rstd[n], C);
    }

    const float scale = 1.0f / (1.0f - p);
    const uint32_t threshold = hash_threshold(p);
    const ColBlocks blocks = col_blocks(C);
#pragma omp for schedule(static)
    for (int block = 0; block < blocks.count; block++) {
        const int c0 = block * blocks.width, width = col_block_width(blocks, block);
        const float *restrict gam = gamma + c0;
        float acc_gamma[COL_BLOCK_MAX] = {0}, acc_beta[COL_BLOCK_MAX] = {0};
        float acc_bias[COL_BLOCK_MAX] = {0}, ds[COL_BLOCK_MAX];
        for (int n = 0; n < N; n++) {
            const size_t first = (size_t)n * C + c0;
            const size_t key_first = (size_t)(row_keys ? row_keys[n] : n) * C + c0;
            const float *restrict x = in + first;
            const float *g = d_out + first;
            float *dx = d_sum + first;
            const float mu = mean[n], rs = rstd[n];
            const float mean_g = row_stats[2 * n], mean_gx = row_stats[2 * n + 1];
            float *out = d_res ? ds : dx; /* the rstd term: into ds to add d_res to, or d_sum's own */
#pragma omp simd
            for (int c = 0; c < width; c++) {
                const float xhat = (x[c] - mu) * rs;
                acc_gamma[c] += g[c] * xhat;
                acc_beta[c] += g[c];
                out[c] = rs * (g[c] * gam[c] - mean_g - xhat * mean_gx);
            }
            if (d_res) {
                const float *r = d_res + first;
#pragma omp simd
                for (int c = 0; c < width; c++)
                    dx[c] = ds[c] + r[c];
            }
            if (d_branch && p == 0.0f) { /* every element kept (threshold 0): no hash to compute */
                float *db = d_branch + first;
#pragma omp simd
                for (int c = 0; c < width; c++) {
                    db[c] = dx[c] * scale;
                    acc_bias[c] += db[c];
                }
            } else if (d_branch) {
                float *db = d_branch + first;
#pragma omp simd
                for (int c = 0; c < width; c++) {
                    db[c] = dropout_masked(dx[c] * scale, key, (uint32_t)key_first + (uint32_t)c, threshold);
                    acc_bias[c] += db[c];
                }
            }
        }
        for (int c = 0; c < width; c++) {
            d_gamma[c0 + c] += acc_gamma[c];
            d_beta[c0 + c] += acc_beta[c];
            if (d_bias)
                d_bias[c0 + c] += acc_bias[c];
        }
    }
}

/* With xhat, g as layernorm_backward, mean_g = mean_c(g * gamma), mean_gx = mean_c(g * gamma *
 * xhat) per row (the first pass, into row_stats), then per column block over all rows:
 *   d_sum = rstd * (g * gamma - mean_g - xhat * mean_gx) [+ d_res]
 *   d_gamma += g * xhat,  d_beta += g,  d_branch = keep ? d_sum / (1-p) : 0,  d_bias += d_branch
 * Each element is read before it is written, so d_sum may alias d_out or d_res. Threads own
 * column blocks and sum over rows in order: every result is the same for any thread count. */
void residual_layernorm_backward(float *d_sum, float *d_branch, float *restrict d_bias,
                                 float *restrict d_gamma, float *restrict d_beta,
                                 float *restrict row_stats, const float *d_out, const float *d_res,
                                 const float *restrict in, const float *restrict gamma,
                                 const float *restrict mean, const float *restrict rstd, int N,
                                 int C, float p, uint64_t key) {
    residual_layernorm_backward_keyed(d_sum, d_branch, d_bias, d_gamma, d_beta, row_stats, d_out, d_res,
                                      in, gamma, mean, rstd, N, C, p, key, NULL);
}

void residual_layernorm_backward_keyed(float *d_sum, float *d_branch, float *restrict d_bias,
                                       float *restrict d_gamma, float *restrict d_beta,
                                       float *restrict row_stats, const float *d_out, const float *d_res,
                                       const float *restrict in, const float *restrict gamma,
                                       const float *restrict mean, const float *restrict rstd, int N,
                                       int C, float p, uint64_t key, const int *row_keys) {
    RP_CHECK(!d_branch || (p >= 0.0f && p < 1.0f), "residual_layernorm_backward: dropout %g is "
             "outside [0, 1)", (double)p);
    RP_CHECK(!d_branch || dropout_indices_fit((uint64_t)N * (uint64_t)C),
             "residual_layernorm_backward: [%d, %d] exceeds one dropout key's 2^32 mask indices", N, C);
    OMP_TEAM_OR_ALONE(residual_backward_passes(d_sum, d_branch, d_bias, d_gamma, d_beta, row_stats, d_out, d_res,
                                               in, gamma, mean, rstd, N, C, p, key, row_keys));
}
