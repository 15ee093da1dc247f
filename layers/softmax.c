/* Numerically stable softmax of one row, in two passes (max, then normalize), for the callers
 * that fuse their own passes around it: crossentropy.c, attention.c. */
#include "layers/layers.h"

#include <math.h>

#include "layers/softmax_avx512.h"

/* glibc >= 2.35 ships vector expf (libmvec); declaring it SIMD lets the loops below call the
 * 8-wide version (GCC does this on its own only under -ffast-math). */
#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 35)
#pragma omp declare simd notinbranch
float expf(float);
#endif

float softmax_row_max(const float *in, int cols) {
    float max = -INFINITY;
#pragma omp simd reduction(max : max)
    for (int c = 0; c < cols; c++)
        max = in[c] > max ? in[c] : max;
    return max;
}

/* out [cols] = exp(in - max) / sum, out may alias in; returns max + log(sum). A row that is
 * entirely -inf (nothing to attend to) gives zeros and -inf. The max skips NaN, so a row of NaN
 * (or NaN and -inf) also arrives here: it gives NaN, never the zeros of masking. want_log: return the
 * log-sum-exp (else 0); inline_exp: e^x from exp_nonpositive (layers/layers.h) instead of expf. Both
 * are constants at each call, so each caller gets its own loop. */
static inline __attribute__((always_inline)) float row_normalize(float *out, const float *in, int cols, float max,
                                                                 int want_log, int inline_exp) {
    if (max == -INFINITY) {
        int nan = 0;
        for (int c = 0; c < cols; c++)
            nan |= isnan(in[c]);
        for (int c = 0; c < cols; c++)
            out[c] = nan ? NAN : 0.0f;
        return nan ? NAN : -INFINITY;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < cols; c++) {
        const float e = inline_exp ? exp_nonpositive(in[c] - max) : expf(in[c] - max);
        out[c] = e;
        sum += e;
    }
    const float inv_sum = 1.0f / sum;
#pragma omp simd
    for (int c = 0; c < cols; c++)
        out[c] *= inv_sum;
    return want_log ? max + logf(sum) : 0.0f;
}

float softmax_row_normalize(float *out, const float *in, int cols, float max) {
    return row_normalize(out, in, cols, max, 1, 0);
}

/* out [cols] = exp(in - max) / sum as softmax_row_normalize (the same -inf and NaN rows), without
 * the log and with exp_nonpositive for expf: attention's rows, tens of elements long, where the
 * libmvec call, its scalar remainder and the log were most of the row's time. AVX-512: the same
 * bits, 16 a register (layers/softmax_avx512.c); the all -inf row takes the portable path. */
void softmax_row_probs_isa(int avx512, float *out, const float *in, int cols, float max) {
    if (avx512 && cols > 0 && max != -INFINITY)
        softmax_row_probs_avx512(out, in, cols, max);
    else
        row_normalize(out, in, cols, max, 0, 1); /* the -inf / NaN rows never reach the exp */
}

void softmax_row_probs(float *out, const float *in, int cols, float max) {
    softmax_row_probs_isa(__builtin_cpu_supports("avx512f"), out, in, cols, max);
}

void softmax_rows_probs_isa(int avx512, float *rows, int n, int cols, const float *max) {
    int r = 0;
    for (; avx512 && r + 4 <= n; r += 4) {
        const float *m = max + r;
        if (m[0] == -INFINITY || m[1] == -INFINITY || m[2] == -INFINITY || m[3] == -INFINITY)
            break; /* a row of -inf or NaN: this group one row at a time */
        softmax_4rows_probs_avx512(rows + (size_t)r * cols, cols, m);
    }
    for (; r < n; r++)
        softmax_row_probs_isa(avx512, rows + (size_t)r * cols, rows + (size_t)r * cols, cols, max[r]);
}

void softmax_rows_probs(float *rows, int n, int cols, const float *max) {
    softmax_rows_probs_isa(__builtin_cpu_supports("avx512f"), rows, n, cols, max);
}

/* The portable loops: the logits pass of attention.c (t = scale x + 0 and its max), then
 * softmax_row_probs' normalisation. */
static void scaled_row_portable(float *row, int cols, float scale) {
    float max = -INFINITY;
#pragma omp simd reduction(max : max)
    for (int c = 0; c < cols; c++) {
        const float t = scale * row[c] + 0.0f;
        row[c] = t;
        max = t > max ? t : max;
    }
    row_normalize(row, row, cols, max, 0, 1);
}

void softmax_scaled_row_probs_isa(int avx512, float *row, int cols, float scale) {
    if (cols <= 0 || (avx512 && softmax_scaled_row_avx512(row, cols, scale)))
        return;
    scaled_row_portable(row, cols, scale);
}

void softmax_scaled_rows_probs_isa(int avx512, float *rows, int n, int cols, float scale) {
    int r = 0;
    for (; avx512 && r + 4 <= n; r += 4) /* 4 rows at a time, or one by one where one is all -inf or NaN */
        if (!softmax_scaled_4rows_avx512(rows + (size_t)r * cols, cols, scale))
            for (int i = r; i < r + 4; i++)
                softmax_scaled_row_probs_isa(avx512, rows + (size_t)i * cols, cols, scale);
    for (; r < n; r++)
        softmax_scaled_row_probs_isa(avx512, rows + (size_t)r * cols, cols, scale);
}

void softmax_scaled_rows_probs(float *rows, int n, int cols, float scale) {
    softmax_scaled_rows_probs_isa(__builtin_cpu_supports("avx512f"), rows, n, cols, scale);
}

/* g = p (g - sum_j g_j p_j): the portable loops of both backward rows below. */
static inline __attribute__((always_inline)) void backward_portable(float *restrict g, const float *restrict p,
                                                                    int cols) {
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int c = 0; c < cols; c++)
        dot += g[c] * p[c];
#pragma omp simd
    for (int c = 0; c < cols; c++)
        g[c] = p[c] * (g[c] - dot);
}

/* The loops of attention_rows.c's score-gradient rows that these replace: without a carry (dc NULL),
 * g = scale g; residual attention's (no dropout, no bias gradient), dc += carried_scale g, g = scale dc. */
static void row_backward_portable(float *restrict g, const float *restrict p, float *restrict dc, int cols,
                                  float scale, float carried_scale) {
    backward_portable(g, p, cols);
    if (!dc) {
#pragma omp simd
        for (int c = 0; c < cols; c++)
            g[c] = scale * g[c];
        return;
    }
#pragma omp simd
    for (int c = 0; c < cols; c++) {
        const float v = dc[c] + carried_scale * g[c];
        dc[c] = v;
        g[c] = scale * v;
    }
}

/* One row (dc NULL: no carry) on the kernel the caller picks. */
static void row_backward_isa(int avx512, float *g, const float *p, float *dc, int cols, float scale,
                             float carried_scale) {
    if (avx512 && dc)
        softmax_carried_backward_avx512(g, p, dc, cols, scale, carried_scale);
    else if (avx512)
        softmax_scaled_backward_avx512(g, p, cols, scale);
    else
        row_backward_portable(g, p, dc, cols, scale, carried_scale);
}

/* n rows, 4 at a time on AVX-512 (their passes interleaved), the rest one by one. */
static void rows_backward_isa(int avx512, float *g, const float *p, float *dc, int n, int cols, float scale,
                              float carried_scale) {
    int r = 0;
    for (; avx512 && r + 4 <= n; r += 4) {
        const size_t at = (size_t)r * cols;
        if (dc)
            softmax_carried_backward_4rows_avx512(g + at, p + at, dc + at, cols, scale, carried_scale);
        else
            softmax_scaled_backward_4rows_avx512(g + at, p + at, cols, scale);
    }
    for (; r < n; r++) {
        const size_t at = (size_t)r * cols;
        row_backward_isa(avx512, g + at, p + at, dc ? dc + at : NULL, cols, scale, carried_scale);
    }
}

void softmax_scaled_row_backward_isa(int avx512, float *g, const float *p, int cols, float scale) {
    row_backward_isa(avx512, g, p, NULL, cols, scale, 0.0f);
}

void softmax_scaled_rows_backward_isa(int avx512, float *g, const float *p, int n, int cols, float scale) {
    rows_backward_isa(avx512, g, p, NULL, n, cols, scale, 0.0f);
}

void softmax_scaled_rows_backward(float *g, const float *p, int n, int cols, float scale) {
    softmax_scaled_rows_backward_isa(__builtin_cpu_supports("avx512f"), g, p, n, cols, scale);
}

void softmax_carried_rows_backward_isa(int avx512, float *g, const float *p, float *dc, int n, int cols, float scale,
                                       float carried_scale) {
    rows_backward_isa(avx512, g, p, dc, n, cols, scale, carried_scale);
}

void softmax_carried_rows_backward(float *g, const float *p, float *dc, int n, int cols, float scale,
                                   float carried_scale) {
    softmax_carried_rows_backward_isa(__builtin_cpu_supports("avx512f"), g, p, dc, n, cols, scale, carried_scale);
}
