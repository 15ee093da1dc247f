/* The AVX-512 kernels of softmax_scaled_row_probs and softmax_scaled_row_backward (layers/layers.h; layers/softmax_avx512.c), compiled for
 * AVX-512F by function attributes: call it only where the CPU has it. */
#pragma once

/* row [cols] = softmax(scale row) with the portable path's bits; returns 0, row untouched, when
 * every scaled element is -inf or NaN (the portable path's special case, for the caller to take). */
int softmax_scaled_row_avx512(float *row, int cols, float scale);
/* The same for 4 rows [4, cols] at once (their passes interleaved); 0, rows untouched, when one of
 * them is such a row. */
int softmax_scaled_4rows_avx512(float *rows, int cols, float scale);
/* out [cols] = exp(in - max) / sum, out may equal in, with softmax_row_probs' bits, for a max that is
 * not -inf (the portable path's special case, for the caller to take). */
void softmax_row_probs_avx512(float *out, const float *in, int cols, float max);
/* The same for 4 rows [4, cols] in place, given their maxima (none -inf). */
void softmax_4rows_probs_avx512(float *rows, int cols, const float max[4]);
/* g [cols] = scale p (g - sum_j g_j p_j) with the portable path's bits. */
void softmax_scaled_backward_avx512(float *g, const float *p, int cols, float scale);
/* The same for 4 rows of g and p [4, cols] at once. */
void softmax_scaled_backward_4rows_avx512(float *g, const float *p, int cols, float scale);
/* Residual attention's: dc [cols] += carried_scale p (g - sum_j g_j p_j), then g = scale dc, with the
 * portable path's bits; the same for 4 rows of g, p and dc. */
void softmax_carried_backward_avx512(float *g, const float *p, float *dc, int cols, float scale, float carried_scale);
void softmax_carried_backward_4rows_avx512(float *g, const float *p, float *dc, int cols, float scale,
                                           float carried_scale);
