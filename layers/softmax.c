/* Numerically stable softmax along rows. */
#include "layers/layers.h"

#include <math.h>

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
 * (or NaN and -inf) also arrives here: it gives NaN, never the zeros of masking. */
float softmax_row_normalize(float *out, const float *in, int cols, float max) {
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
        const float e = expf(in[c] - max);
        out[c] = e;
        sum += e;
    }
    const float inv_sum = 1.0f / sum;
#pragma omp simd
    for (int c = 0; c < cols; c++)
        out[c] *= inv_sum;
    return max + logf(sum);
}

void softmax_row_forward(float *out, const float *in, int cols) {
    softmax_row_normalize(out, in, cols, softmax_row_max(in, cols));
}

/* d_in [cols] = out * (d_out - sum_c d_out out); d_in may alias d_out */
void softmax_row_backward(float *d_in, const float *d_out, const float *out, int cols) {
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int c = 0; c < cols; c++)
        dot += d_out[c] * out[c];
#pragma omp simd
    for (int c = 0; c < cols; c++)
        d_in[c] = out[c] * (d_out[c] - dot);
}

/* out [rows, cols] = softmax of each row of in */
void softmax_forward(float *out, const float *in, int rows, int cols) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++)
        softmax_row_forward(out + (size_t)r * cols, in + (size_t)r * cols, cols);
}

/* d_in [rows, cols] from d_out and the saved out, row by row */
void softmax_backward(float *d_in, const float *d_out, const float *out, int rows, int cols) {
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++)
        softmax_row_backward(d_in + (size_t)r * cols, d_out + (size_t)r * cols,
                             out + (size_t)r * cols, cols);
}
