/* Embedding sum (word + token type + absolute position) and its scatter-add backward. */
#include "layers/layers.h"

/* Backward work unit: one thread owns this many contiguous columns of every table. */
enum { EMB_COL_BLOCK = 64 };

/* out [B*L, H] = word[ids] + type[types] + pos[n % L] (pos may be NULL) */
void embedding_forward(float *restrict out, const int *restrict ids, const int *restrict types,
                       const float *restrict word, const float *restrict type,
                       const float *restrict pos, int B, int L, int H) {
    embedding_forward_at(out, ids, types, word, type, pos, B * L, L, NULL, H);
}

void embedding_forward_at(float *restrict out, const int *restrict ids, const int *restrict types,
                          const float *restrict word, const float *restrict type,
                          const float *restrict pos, int N, int L, const int *positions, int H) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *restrict o = out + (size_t)n * H;
        const float *restrict w = word + (size_t)ids[n] * H;
        const float *restrict t = type + (size_t)types[n] * H;
        if (pos) {
            const float *restrict p = pos + (size_t)(positions ? positions[n] : n % L) * H;
            for (int c = 0; c < H; c++)
                o[c] = w[c] + t[c] + p[c];
        } else {
            for (int c = 0; c < H; c++)
                o[c] = w[c] + t[c];
        }
    }
}

/* d_word[ids[n]] += d_out[n], d_type[types[n]] += d_out[n], d_pos[n % L] += d_out[n].
 * Parallel over column blocks: tokens sharing an id touch the same row, never the same
 * (row, column) from two threads; each element sums tokens in order n = 0..N-1. */
void embedding_backward(float *restrict d_word, float *restrict d_type, float *restrict d_pos,
                        const float *restrict d_out, const int *restrict ids,
                        const int *restrict types, int B, int L, int H) {
    embedding_backward_at(d_word, d_type, d_pos, d_out, ids, types, B * L, L, NULL, H);
}

void embedding_backward_at(float *restrict d_word, float *restrict d_type, float *restrict d_pos,
                           const float *restrict d_out, const int *restrict ids,
                           const int *restrict types, int N, int L, const int *positions, int H) {
    const int n_blocks = (H + EMB_COL_BLOCK - 1) / EMB_COL_BLOCK;
#pragma omp parallel for schedule(static)
    for (int block = 0; block < n_blocks; block++) {
        const int c0 = block * EMB_COL_BLOCK;
        const int width = H - c0 < EMB_COL_BLOCK ? H - c0 : EMB_COL_BLOCK;
        for (int n = 0; n < N; n++) {
            const float *restrict g = d_out + (size_t)n * H + c0;
            float *restrict dw = d_word + (size_t)ids[n] * H + c0;
            float *restrict dt = d_type + (size_t)types[n] * H + c0;
            for (int c = 0; c < width; c++) {
                dw[c] += g[c];
                dt[c] += g[c];
            }
            if (d_pos) {
                float *restrict dp = d_pos + (size_t)(positions ? positions[n] : n % L) * H + c0;
                for (int c = 0; c < width; c++)
                    dp[c] += g[c];
            }
        }
    }
}
