/* GELU, exact erf form (as BERT). */
#include "layers/layers.h"

#include <math.h>

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
