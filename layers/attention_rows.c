/* The attention backward's row passes (attention.c's backward_bh): the softmax, dropout and carry
 * backward of one (b,h)'s score gradient, and the column sums of its dq | dk | dv. */
#include <string.h>

#include "layers/attention_plan.h"
#include "layers/layers.h"

/* dS from dPd (in D) for one (b,h): dropout and softmax backward, then the residual carry, then
 * the 1/sqrt(d). bf16 runs: Pd16 = bf16(dropout(P)) and D16 = bf16(dS) row by row (NULL: not).
 * With dP = dropout'(dPd), dlogit_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij'); since
 * P_ij dP_ij = Pd_ij dPd_ij (Pd = dropout(P): the same keep factor), with dropout this is
 * dlogit_ij = Pd_ij dPd_ij - P_ij sum_j' Pd_ij' dPd_ij', which needs no second pass of the mask.
 * Pd = NULL without dropout. A scheme with bias_grad: diag [2L-1] += the sums of dS along the
 * diagonals, dS_ij into diag[j - i + L - 1] (the gradient of its bias; NULL otherwise). */
void attn_score_grad_rows(float *restrict D, float *restrict d_carried, float *restrict diag, bf16 *restrict Pd16,
                          bf16 *restrict D16, const float *restrict P, const float *restrict Pd, int L, float scale,
                          float carried_scale) {
    if (!Pd && !d_carried && !diag && !Pd16 && !D16) { /* the plain rows: all in one call */
        softmax_scaled_rows_backward(D, P, L, L, scale);
        return;
    }
    if (!Pd && !diag) { /* 4 rows at a time: their softmax (and carry) backward, then their bf16 copies */
        for (int i0 = 0; i0 < L; i0 += 4) {
            const int n = L - i0 < 4 ? L - i0 : 4;
            const size_t at = (size_t)i0 * L;
            if (Pd16) /* bf16: the rows of P for dV, while they are in cache */
                attn_to_bf16(Pd16 + at, P + at, n, L, L);
            if (d_carried)
                softmax_carried_rows_backward(D + at, P + at, d_carried + at, n, L, scale, carried_scale);
            else
                softmax_scaled_rows_backward(D + at, P + at, n, L, scale);
            if (D16) /* bf16: the rows of dS for dQ, dK */
                attn_to_bf16(D16 + at, D + at, n, L, L);
        }
        return;
    }
    for (int i = 0; i < L; i++) {
        float *restrict g = D + (size_t)i * L;
        const float *restrict pr = P + (size_t)i * L;
        const float *restrict pd = Pd ? Pd + (size_t)i * L : pr;
        if (Pd16) /* bf16: the row of dropout(P) for dV, while it is in cache */
            attn_to_bf16(Pd16 + (size_t)i * L, pd, 1, L, L);
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int j = 0; j < L; j++)
            dot += g[j] * pd[j];
        if (Pd) { /* g = dlogit */
#pragma omp simd
            for (int j = 0; j < L; j++)
                g[j] = pd[j] * g[j] - pr[j] * dot;
        } else {
#pragma omp simd
            for (int j = 0; j < L; j++)
                g[j] = pr[j] * (g[j] - dot);
        }
        if (d_carried) {
            float *restrict dc = d_carried + (size_t)i * L;
#pragma omp simd
            for (int j = 0; j < L; j++) {
                const float c = dc[j] + carried_scale * g[j];
                dc[j] = c;
                g[j] = scale * c;
            }
            if (diag) {
                float *restrict row_diag = diag + (L - 1 - i);
#pragma omp simd
                for (int j = 0; j < L; j++)
                    row_diag[j] += dc[j];
            }
        } else {
            if (diag) {
                float *restrict row_diag = diag + (L - 1 - i);
#pragma omp simd
                for (int j = 0; j < L; j++)
                    row_diag[j] += g[j];
            }
#pragma omp simd
            for (int j = 0; j < L; j++)
                g[j] = scale * g[j];
        }
        if (D16) /* bf16: the row of dS for dQ, dK */
            attn_to_bf16(D16 + (size_t)i * L, g, 1, L, L);
    }
}

/* sums [3d] = the column sums of one (b,h)'s dq | dk | dv, [L, d] each at row stride ld: read
 * back right after backward_bh wrote them, while they are in cache. */
/* The three parts' sums side by side (three independent chains of adds a column, not one after the
 * other); inlined with d = 16, a head's common width, so that the sums stay in registers. Each
 * column's sum adds the rows in order from 0, as one part at a time did: the same bits. */
static inline __attribute__((always_inline)) void column_sums(float *restrict sums, const float *dq, int L, int d,
                                                              int H, int ld) {
    float *restrict acc_q = sums, *restrict acc_k = sums + d, *restrict acc_v = sums + 2 * (size_t)d;
    for (int t = 0; t < d; t++)
        acc_q[t] = acc_k[t] = acc_v[t] = 0.0f;
    for (int i = 0; i < L; i++) {
        const float *restrict row = dq + (size_t)i * ld;
#pragma omp simd
        for (int t = 0; t < d; t++) {
            acc_q[t] += row[t];
            acc_k[t] += row[H + t];
            acc_v[t] += row[2 * (size_t)H + t];
        }
    }
}

void attn_head_column_sums(float *restrict sums, const float *dq, int L, int d, int H, int ld) {
    if (d == 16)
        column_sums(sums, dq, L, 16, H, ld);
    else
        column_sums(sums, dq, L, d, H, ld);
}
