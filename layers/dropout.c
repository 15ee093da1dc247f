/* Inverted dropout with a counter-based mask: keep(e) = hash_uniform(key, e) >= p. */
#include "layers/layers.h"

#include <string.h>

#include "core/common.h"
#include "core/rng.h"

void dropout_span(float *out, const float *in, size_t n, float p, uint64_t key, size_t first) {
    const float scale = 1.0f / (1.0f - p);
    const uint32_t threshold = hash_threshold(p), first_index = (uint32_t)first;
#pragma omp simd
    for (size_t e = 0; e < n; e++) {
        /* keep ? in * scale : +0, as a bit mask so that the loop has no branch to vectorise */
        union {
            float f;
            uint32_t u;
        } v = {in[e] * scale};
        v.u &= 0u - (uint32_t)(hash_bits24(key, first_index + (uint32_t)e) >= threshold);
        out[e] = v.f;
    }
}

/* dst [n] = keep(e) ? src / (1-p) : 0. Exact arithmetic per element, so any thread count
 * gives the same bits; dst may alias src. */
static void dropout_apply(float *dst, const float *src, size_t n, float p, uint64_t key) {
    RP_CHECK(p >= 0.0f && p < 1.0f, "dropout: probability %g is outside [0, 1)", (double)p);
    RP_CHECK(dropout_indices_fit(n), "dropout: %zu elements exceed one key's 2^32 mask indices", n);
    if (p == 0.0f) {
        if (dst != src)
            memmove(dst, src, n * sizeof *dst);
        return;
    }
    const size_t chunk = 4096;
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < n; c += chunk)
        dropout_span(dst + c, src + c, n - c < chunk ? n - c : chunk, p, key, c);
}

/* out [n] = keep(e) ? in / (1-p) : 0 */
void dropout_forward(float *out, const float *in, size_t n, float p, uint64_t key) {
    dropout_apply(out, in, n, p, key);
}

/* d_in [n] = keep(e) ? d_out / (1-p) : 0 (the forward mask, regenerated from key) */
void dropout_backward(float *d_in, const float *d_out, size_t n, float p, uint64_t key) {
    dropout_apply(d_in, d_out, n, p, key);
}

/* d_in [N,C] = keep ? d_out / (1-p) : 0 and db [C] += sum_n d_in. Threads own column blocks and
 * sum over rows in order, so db is the same for any thread count (as linear_backward's). */
void dropout_bias_backward(float *d_in, float *restrict db, const float *d_out, int N, int C,
                           float p, uint64_t key) {
    dropout_bias_backward_keyed(d_in, db, d_out, N, C, p, key, NULL);
}

void dropout_bias_backward_keyed(float *d_in, float *restrict db, const float *d_out, int N, int C,
                                 float p, uint64_t key, const int *row_keys) {
    RP_CHECK(p >= 0.0f && p < 1.0f, "dropout: probability %g is outside [0, 1)", (double)p);
    RP_CHECK(dropout_indices_fit((uint64_t)N * (uint64_t)C),
             "dropout: [%d, %d] exceeds one key's 2^32 mask indices", N, C);
    const ColBlocks blocks = col_blocks(C);
#pragma omp parallel for schedule(static)
    for (int block = 0; block < blocks.count; block++) {
        const int c0 = block * blocks.width, width = col_block_width(blocks, block);
        float acc[COL_BLOCK_MAX] = {0};
        for (int n = 0; n < N; n++) {
            const size_t first = (size_t)n * C + c0;
            float *dx = d_in + first;
            if (p > 0.0f)
                dropout_span(dx, d_out + first, (size_t)width, p, key,
                             (size_t)(row_keys ? row_keys[n] : n) * C + c0);
            else if (dx != d_out + first)
                memcpy(dx, d_out + first, (size_t)width * sizeof *dx);
#pragma omp simd
            for (int c = 0; c < width; c++)
                acc[c] += dx[c];
        }
        for (int c = 0; c < width; c++)
            db[c0 + c] += acc[c];
    }
}

/* [N, C] rows with row n's mask indices row_keys[n]*C + c (NULL: dropout_forward's n*C + c). */
void dropout_rows(float *out, const float *in, int N, int C, float p, uint64_t key,
                  const int *row_keys) {
    if (!row_keys || p == 0.0f) {
        dropout_apply(out, in, (size_t)N * C, p, key);
        return;
    }
    RP_CHECK(p > 0.0f && p < 1.0f, "dropout: probability %g is outside [0, 1)", (double)p);
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        dropout_span(out + (size_t)n * C, in + (size_t)n * C, (size_t)C, p, key,
                     (size_t)row_keys[n] * C);
}
