/* LayerNorm over the last dimension with saved row statistics. */
#include "layers/layers.h"

#include <math.h>
#include <stdint.h>

#include "core/common.h"
#include "core/rng.h"

/* Rows go GROUP at a time where N allows: a group's rows share each pass's loop, so that their
 * reductions (chains of dependent adds, one per row) run side by side instead of one after the
 * other; each row's own arithmetic and order are the one-row loop's (its own `omp simd` reduction
 * variable, the same expressions), so every row gets the same bits either way
 * (tests/layers/test_layernorm.c). At width 64 (the synthetic suite's model) the residual forward
 * over 506 rows took 0.62x the time of the row-at-a-time loop. */
enum { GROUP = 4 };

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

/* normalize_row for the GROUP rows of x [GROUP, C] into y, their means mu, their rs into rs. */
static inline void normalize_group(float *restrict y, const float *restrict x, const float *restrict mu,
                                   float *restrict rs, const float *restrict gamma, const float *restrict beta,
                                   int C, float eps) {
    const float *restrict x0 = x, *restrict x1 = x + C, *restrict x2 = x + 2 * C, *restrict x3 = x + 3 * C;
    const float mu0 = mu[0], mu1 = mu[1], mu2 = mu[2], mu3 = mu[3];
    float sq0 = 0.0f, sq1 = 0.0f, sq2 = 0.0f, sq3 = 0.0f;
#pragma omp simd reduction(+ : sq0, sq1, sq2, sq3)
    for (int c = 0; c < C; c++) {
        sq0 += (x0[c] - mu0) * (x0[c] - mu0);
        sq1 += (x1[c] - mu1) * (x1[c] - mu1);
        sq2 += (x2[c] - mu2) * (x2[c] - mu2);
        sq3 += (x3[c] - mu3) * (x3[c] - mu3);
    }
    const float rs0 = 1.0f / sqrtf(sq0 / (float)C + eps), rs1 = 1.0f / sqrtf(sq1 / (float)C + eps);
    const float rs2 = 1.0f / sqrtf(sq2 / (float)C + eps), rs3 = 1.0f / sqrtf(sq3 / (float)C + eps);
    float *restrict y0 = y, *restrict y1 = y + C, *restrict y2 = y + 2 * C, *restrict y3 = y + 3 * C;
    for (int c = 0; c < C; c++) {
        y0[c] = (x0[c] - mu0) * rs0 * gamma[c] + beta[c];
        y1[c] = (x1[c] - mu1) * rs1 * gamma[c] + beta[c];
        y2[c] = (x2[c] - mu2) * rs2 * gamma[c] + beta[c];
        y3[c] = (x3[c] - mu3) * rs3 * gamma[c] + beta[c];
    }
    rs[0] = rs0, rs[1] = rs1, rs[2] = rs2, rs[3] = rs3;
}

/* The groups of N rows: GROUP rows each, the last the N % GROUP left (1 .. GROUP). */
static inline int row_groups(int N) { return (N + GROUP - 1) / GROUP; }

/* The passes below are orphaned `omp for`s run by OMP_TEAM_OR_ALONE (core/common.h): a team, or at
 * one thread the caller alone, without a region. */

static __attribute__((noinline)) void forward_rows(float *restrict out, float *restrict mean, float *restrict rstd,
                                                   const float *restrict in, const float *restrict gamma,
                                                   const float *restrict beta, int N, int C, float eps) {
#pragma omp for schedule(static)
    for (int group = 0; group < row_groups(N); group++) {
        const int n0 = group * GROUP;
        if (n0 + GROUP <= N) {
            const float *restrict x = in + (size_t)n0 * C;
            float sum0 = 0.0f, sum1 = 0.0f, sum2 = 0.0f, sum3 = 0.0f;
#pragma omp simd reduction(+ : sum0, sum1, sum2, sum3)
            for (int c = 0; c < C; c++) {
                sum0 += x[c];
                sum1 += x[C + c];
                sum2 += x[2 * C + c];
                sum3 += x[3 * C + c];
            }
            mean[n0] = sum0 / (float)C, mean[n0 + 1] = sum1 / (float)C;
            mean[n0 + 2] = sum2 / (float)C, mean[n0 + 3] = sum3 / (float)C;
            normalize_group(out + (size_t)n0 * C, x, mean + n0, rstd + n0, gamma, beta, C, eps);
            continue;
        }
        for (int n = n0; n < N; n++) {
            const float *restrict x = in + (size_t)n * C;
            float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
            for (int c = 0; c < C; c++)
                sum += x[c];
            mean[n] = sum / (float)C;
            rstd[n] = normalize_row(out + (size_t)n * C, x, mean[n], gamma, beta, C, eps);
        }
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

/* One row of residual_layernorm_forward_keyed's sum: x [C] = r + dropout(b + bias) (p > 0: the mask of
 * element key_row + c), returning the row's total. */
static inline float residual_row_sum(float *restrict x, const float *restrict r, const float *restrict b,
                                     const float *restrict bias, int C, float p, uint64_t key, size_t key_row) {
    float total = 0.0f;
    if (p > 0.0f) {
        const float scale = 1.0f / (1.0f - p);
        const uint32_t threshold = hash_threshold(p);
#pragma omp simd reduction(+ : total)
        for (int c = 0; c < C; c++) {
            const float v = (b[c] + bias[c]) * scale;
            x[c] = r[c] + dropout_masked(v, key, (uint32_t)key_row + (uint32_t)c, threshold);
            total += x[c];
        }
    } else {
#pragma omp simd reduction(+ : total)
        for (int c = 0; c < C; c++) {
            x[c] = r[c] + (b[c] + bias[c]);
            total += x[c];
        }
    }
    return total;
}

/* residual_row_sum without dropout for the GROUP rows of x, r, b [GROUP, C] side by side, into their
 * means. */
static inline void residual_group_means(float *restrict mean, float *restrict x, const float *restrict r,
                                        const float *restrict b, const float *restrict bias, int C) {
    float total0 = 0.0f, total1 = 0.0f, total2 = 0.0f, total3 = 0.0f;
#pragma omp simd reduction(+ : total0, total1, total2, total3)
    for (int c = 0; c < C; c++) {
        x[c] = r[c] + (b[c] + bias[c]);
        x[C + c] = r[C + c] + (b[C + c] + bias[c]);
        x[2 * C + c] = r[2 * C + c] + (b[2 * C + c] + bias[c]);
        x[3 * C + c] = r[3 * C + c] + (b[3 * C + c] + bias[c]);
        total0 += x[c];
        total1 += x[C + c];
        total2 += x[2 * C + c];
        total3 += x[3 * C + c];
    }
    mean[0] = total0 / (float)C, mean[1] = total1 / (float)C, mean[2] = total2 / (float)C, mean[3] = total3 / (float)C;
}

/* The rows of residual_layernorm_forward_keyed (below), a group at a time: its sums side by side
 * without dropout (with dropout, each row's mask a row at a time), then its normalisation side by
 * side; the rows left after the last whole group one at a time. */
static __attribute__((noinline)) void
residual_forward_rows(float *restrict out, float *restrict sum, float *restrict mean, float *restrict rstd,
                      const float *restrict res, const float *restrict branch, const float *restrict branch_bias,
                      const float *restrict gamma, const float *restrict beta, int N, int C, float eps, float p,
                      uint64_t key, const int *row_keys) {
#pragma omp for schedule(static)
    for (int group = 0; group < row_groups(N); group++) {
        const int n0 = group * GROUP, rows = N - n0 < GROUP ? N - n0 : GROUP;
        const size_t first = (size_t)n0 * C;
        if (rows == GROUP && p == 0.0f) {
            residual_group_means(mean + n0, sum + first, res + first, branch + first, branch_bias, C);
        } else {
            for (int n = n0; n < n0 + rows; n++) {
                const size_t row = (size_t)n * C, key_row = (size_t)(row_keys ? row_keys[n] : n) * C;
                mean[n] = residual_row_sum(sum + row, res + row, branch + row, branch_bias, C, p, key, key_row) /
                          (float)C;
            }
        }
        if (rows == GROUP) {
            normalize_group(out + first, sum + first, mean + n0, rstd + n0, gamma, beta, C, eps);
        } else {
            for (int n = n0; n < n0 + rows; n++)
                rstd[n] = normalize_row(out + (size_t)n * C, sum + (size_t)n * C, mean[n], gamma, beta, C, eps);
        }
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

/* row_grad_means of the GROUP rows of g, x [GROUP, C] (their mu, rs [GROUP]) side by side, into
 * stats [2 GROUP] (mean_g, mean_gx of each row in turn). */
static inline void group_grad_means(float *restrict stats, const float *restrict g, const float *restrict x,
                                    const float *restrict gamma, const float *restrict mu, const float *restrict rs,
                                    int C) {
    const float mu0 = mu[0], mu1 = mu[1], mu2 = mu[2], mu3 = mu[3], rs0 = rs[0], rs1 = rs[1], rs2 = rs[2], rs3 = rs[3];
    float g0 = 0.0f, g1 = 0.0f, g2 = 0.0f, g3 = 0.0f, gx0 = 0.0f, gx1 = 0.0f, gx2 = 0.0f, gx3 = 0.0f;
#pragma omp simd reduction(+ : g0, g1, g2, g3, gx0, gx1, gx2, gx3)
    for (int c = 0; c < C; c++) {
        const float gc0 = g[c] * gamma[c], gc1 = g[C + c] * gamma[c];
        const float gc2 = g[2 * C + c] * gamma[c], gc3 = g[3 * C + c] * gamma[c];
        g0 += gc0, g1 += gc1, g2 += gc2, g3 += gc3;
        gx0 += gc0 * ((x[c] - mu0) * rs0);
        gx1 += gc1 * ((x[C + c] - mu1) * rs1);
        gx2 += gc2 * ((x[2 * C + c] - mu2) * rs2);
        gx3 += gc3 * ((x[3 * C + c] - mu3) * rs3);
    }
    const float inv_C = 1.0f / (float)C;
    stats[0] = g0 * inv_C, stats[1] = gx0 * inv_C, stats[2] = g1 * inv_C, stats[3] = gx1 * inv_C;
    stats[4] = g2 * inv_C, stats[5] = gx2 * inv_C, stats[6] = g3 * inv_C, stats[7] = gx3 * inv_C;
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

/* What residual_layernorm_backward_isa's two passes read and write (its arguments, described there). */
typedef struct {
    float *d_sum, *d_branch, *d_bias, *d_gamma, *d_beta, *row_stats;
    const float *d_out, *d_res, *in, *gamma, *mean, *rstd;
    const int *row_keys;
    int N, C;
    float p;
    uint64_t key;
} ResidualBackward;

/* One column block [c0, c0 + width) of residual_backward_passes' second pass (below), written once
 * and compiled twice: for the build's portable target (8 lanes) and for AVX-512 (16 lanes, by
 * AVX512_LOOPS, where cpu_has_avx512_loops()). Every element's value comes from its own
 * inputs through the same operations, and each column's sums add the rows in order, so both give
 * the same bits (test_layernorm.c); at width 64 the AVX-512 form takes half the registers' steps.
 * The outputs d_bias, d_gamma, d_beta are disjoint from every input (restrict); d_sum may alias
 * d_out or d_res, each element read before it is written. */
static inline __attribute__((always_inline)) void column_block_body(const ResidualBackward *a, int c0, int width) {
    float *d_sum = a->d_sum, *d_branch = a->d_branch;
    float *restrict d_bias = a->d_bias, *restrict d_gamma = a->d_gamma, *restrict d_beta = a->d_beta;
    const float *restrict row_stats = a->row_stats, *restrict in = a->in, *restrict gamma = a->gamma;
    const float *restrict mean = a->mean, *restrict rstd = a->rstd;
    const float *d_out = a->d_out, *d_res = a->d_res;
    const int *row_keys = a->row_keys, N = a->N, C = a->C;
    const float p = a->p;
    const uint64_t key = a->key;
    const float scale = 1.0f / (1.0f - p);
    const uint32_t threshold = hash_threshold(p);
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

typedef void (*ColumnBlockFn)(const ResidualBackward *a, int c0, int width);
static void column_block_portable(const ResidualBackward *a, int c0, int width) { column_block_body(a, c0, width); }
AVX512_LOOPS static void column_block_avx512(const ResidualBackward *a, int c0, int width) {
    column_block_body(a, c0, width);
}

/* The passes of residual_layernorm_backward_isa (below): the row statistics, then (after the
 * `omp for`'s barrier) the column blocks. d_sum is written without a copy through a buffer: directly
 * where there is no d_res (the same expression), else as ds + d_res from the block's ds; d_branch then
 * reads d_sum's element, which holds the same value as ds did. */
static __attribute__((noinline)) void residual_backward_passes(const ResidualBackward *a, int avx512) {
    const int N = a->N, C = a->C;
#pragma omp for schedule(static)
    for (int group = 0; group < row_groups(N); group++) {
        const int n0 = group * GROUP;
        if (n0 + GROUP <= N) {
            group_grad_means(a->row_stats + 2 * n0, a->d_out + (size_t)n0 * C, a->in + (size_t)n0 * C, a->gamma,
                             a->mean + n0, a->rstd + n0, C);
            continue;
        }
        for (int n = n0; n < N; n++) {
            const float *restrict x = a->in + (size_t)n * C, *restrict g = a->d_out + (size_t)n * C;
            row_grad_means(&a->row_stats[2 * n], &a->row_stats[2 * n + 1], g, x, a->gamma, a->mean[n], a->rstd[n],
                           C);
        }
    }

    const ColBlocks blocks = col_blocks(C);
    const ColumnBlockFn column_block = avx512 ? column_block_avx512 : column_block_portable;
#pragma omp for schedule(static)
    for (int block = 0; block < blocks.count; block++)
        column_block(a, block * blocks.width, col_block_width(blocks, block));
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
    residual_layernorm_backward_isa(cpu_has_avx512_loops(), d_sum, d_branch, d_bias, d_gamma, d_beta, row_stats,
                                    d_out, d_res, in, gamma, mean, rstd, N, C, p, key, row_keys);
}

void residual_layernorm_backward_isa(int avx512, float *d_sum, float *d_branch, float *restrict d_bias,
                                     float *restrict d_gamma, float *restrict d_beta, float *restrict row_stats,
                                     const float *d_out, const float *d_res, const float *restrict in,
                                     const float *restrict gamma, const float *restrict mean,
                                     const float *restrict rstd, int N, int C, float p, uint64_t key,
                                     const int *row_keys) {
    RP_CHECK(!d_branch || (p >= 0.0f && p < 1.0f), "residual_layernorm_backward: dropout %g is "
             "outside [0, 1)", (double)p);
    RP_CHECK(!d_branch || dropout_indices_fit((uint64_t)N * (uint64_t)C),
             "residual_layernorm_backward: [%d, %d] exceeds one dropout key's 2^32 mask indices", N, C);
    const ResidualBackward a = {.d_sum = d_sum, .d_branch = d_branch, .d_bias = d_bias, .d_gamma = d_gamma,
                                .d_beta = d_beta, .row_stats = row_stats, .d_out = d_out, .d_res = d_res,
                                .in = in, .gamma = gamma, .mean = mean, .rstd = rstd, .row_keys = row_keys,
                                .N = N, .C = C, .p = p, .key = key};
    OMP_TEAM_OR_ALONE(residual_backward_passes(&a, avx512));
}
