/* RoPE (Su et al. 2021), half-split layout (GPT-NeoX, ModernBERT): q and k of every head rotated
 * by the token's index p in its row before the dot product, v not rotated:
 *   for t < d/2, theta_t = rope_theta^(-2t/d), c = cos(p theta_t), s = sin(p theta_t):
 *     x'_t       = x_t c - x_{t+d/2} s
 *     x'_{t+d/2} = x_{t+d/2} c + x_t s
 *   S_ij = scale * q'_i.k'_j  (= scale * q_i.R_{j-i} k_j: depends on j - i only)
 * Backward, R^T: g_t = g'_t c + g'_{t+d/2} s,  g_{t+d/2} = g'_{t+d/2} c - g'_t s.
 * attention.c rotates a (b,h)'s q and k into the thread's buffer (one pass, in cache) before its
 * GEMMs, and rotates back the dQ, dK those GEMMs wrote; cos and sin come from rope_prepare. */
#include <math.h>

#include "layers/positions.h"

/* cos and sin of p theta_t for every position p: the unit complex number e^{i p theta_t} by
 * repeated multiplication with e^{i theta_t}, in double (after 64k positions the error is ~1e-11,
 * far below float's 6e-8), so the table costs 4 multiply-adds per entry instead of a sincos. */
void rope_prepare(const AttnPlan *p) {
    const int half = p->d / 2;
    for (int t = 0; t < half; t++) {
        const double theta = pow((double)p->rope_theta, -2.0 * t / p->d);
        const double step_c = cos(theta), step_s = sin(theta);
        double c = 1.0, s = 0.0;
        for (int pos = 0; pos < p->L; pos++) {
            p->rope_cos[(size_t)pos * half + t] = (float)c;
            p->rope_sin[(size_t)pos * half + t] = (float)s;
            const double next_c = c * step_c - s * step_s;
            s = s * step_c + c * step_s;
            c = next_c;
        }
    }
}

void rope_rotate(const AttnPlan *p, float *out, int out_ld, const float *x, int x_ld) {
    const int half = p->d / 2;
    for (int i = 0; i < p->L; i++) {
        const float *restrict c = p->rope_cos + (size_t)i * half, *restrict s = p->rope_sin + (size_t)i * half;
        const float *restrict lo = x + (size_t)i * x_ld, *restrict hi = lo + half;
        float *restrict out_lo = out + (size_t)i * out_ld, *restrict out_hi = out_lo + half;
#pragma omp simd
        for (int t = 0; t < half; t++) {
            out_lo[t] = lo[t] * c[t] - hi[t] * s[t];
            out_hi[t] = hi[t] * c[t] + lo[t] * s[t];
        }
    }
}

void rope_rotate_back(const AttnPlan *p, float *g, int ld) {
    const int half = p->d / 2;
    for (int i = 0; i < p->L; i++) {
        const float *restrict c = p->rope_cos + (size_t)i * half, *restrict s = p->rope_sin + (size_t)i * half;
        float *restrict lo = g + (size_t)i * ld, *restrict hi = lo + half;
#pragma omp simd
        for (int t = 0; t < half; t++) {
            const float a = lo[t], b = hi[t];
            lo[t] = a * c[t] + b * s[t];
            hi[t] = b * c[t] - a * s[t];
        }
    }
}
