/* Relative-position terms of the attention scores, forward and backward. Conventions (r, r', m,
 * R, u, v, left/band/right split) in relpos.h; the derivation and costs in docs/attention.md.
 *   shaw, method4: QA = Q_h.A^T over all B*L rows (one GEMM per head), gathered per (b,h);
 *                  backward scatters into dQA / dKA and finishes with per-head GEMMs.
 *   methods 1, 2:  scores = (q.k) (.) w2[u];  dw via per-slot partials.
 *   method3:       outside the band |i-j| < k the table row is constant (a_0 right, a_2k left):
 *                  GEMMs with Q (.) a_row; inside the band a direct O(L k d) loop. */
#include "relpos.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

static inline int min_int(int a, int b) { return a < b ? a : b; }

void relpos_prepare(const AttnPlan *p, const float *qkv, const float *table, int forward) {
    const int L = p->L, k = p->k, d = p->d;
    switch (p->rel) {
    case REL_NONE: break;
    case REL_METHOD1:
    case REL_METHOD2:
        for (int u = 0; u < 2 * L - 1; u++) {
            int delta = L - 1 - u; /* i - j */
            int c = delta < -k ? -k : (delta > k ? k : delta);
            p->w2[u] = table[p->rel == REL_METHOD1 ? abs(c) : c + k];
        }
        break;
    case REL_METHOD3:
        for (int t = 0; t < d; t++)
            for (int v = 0; v < p->at_ld; v++)
                p->at[(size_t)t * p->at_ld + v] = table[(size_t)(2 * k - v) * d + t];
        break;
    case REL_SHAW:
    case REL_METHOD4:
        if (!forward)
            break;
        for (int h = 0; h < p->heads; h++) {
            const size_t hoff = (size_t)h * p->BL * p->R;
            const float *reach = table + (size_t)(k - p->m) * d;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p->BL, p->R, d, 1.0f,
                        qkv + (size_t)h * d, p->ld, reach, d, 0.0f, p->qa + hoff, p->R);
            if (p->rel == REL_METHOD4)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, p->BL, p->R, d, 1.0f,
                            qkv + p->H + (size_t)h * d, p->ld, reach, d, 0.0f, p->ka + hoff, p->R);
        }
        break;
    }
}

/* ---- shaw / method4 ------------------------------------------------------------------------ */

/* S_ij += QA[i][r'] (+ KA[j][r'] for method4), r' = clip(i-j, -m, m) + m. */
static void gather_scores(const AttnPlan *p, const AttnWork *w, float *restrict S,
                          const float *restrict qa, const float *restrict ka) {
    const int L = p->L, m = p->m, R = p->R;
    if (ka)
        for (int j = 0; j < L; j++) {
            w->vec0[j] = ka[(size_t)j * R + 2 * m];
            w->vec1[j] = ka[(size_t)j * R];
        }
    const float *restrict ka_left = w->vec0, *restrict ka_right = w->vec1;
    for (int i = 0; i < L; i++) {
        int le, rs;
        rel_split(i, m, L, &le, &rs);
        float *restrict row = S + (size_t)i * L;
        const float *restrict qr = qa + (size_t)i * R;
        const float *restrict qband = qr + i + m; /* qband[-j] = QA[i][i-j+m] */
        const float left = qr[2 * m], right = qr[0];
        if (!ka) {
            for (int j = 0; j < le; j++)
                row[j] += left;
            for (int j = le; j < rs; j++)
                row[j] += qband[-j];
            for (int j = rs; j < L; j++)
                row[j] += right;
        } else {
            const float *restrict kband = ka + i + m; /* kband[j*(R-1)] = KA[j][i-j+m] */
            for (int j = 0; j < le; j++)
                row[j] += left + ka_left[j];
            for (int j = le; j < rs; j++)
                row[j] += qband[-j] + kband[(size_t)j * (R - 1)];
            for (int j = rs; j < L; j++)
                row[j] += right + ka_right[j];
        }
    }
}

/* dQA[i][r'] = sum of G_ij over the j with that r' (and dKA[j][r'] over the i), overwriting this
 * (b,h)'s rows of the scratch. */
static void scatter_grads(const AttnPlan *p, const AttnWork *w, const float *restrict G,
                          float *restrict dqa, float *restrict dka) {
    const int L = p->L, m = p->m, R = p->R;
    for (int i = 0; i < L; i++) {
        int le, rs;
        rel_split(i, m, L, &le, &rs);
        const float *restrict g = G + (size_t)i * L;
        float *restrict dr = dqa + (size_t)i * R;
        float *restrict dband = dr + i + m;
        float left = 0.0f, right = 0.0f;
        memset(dr, 0, (size_t)R * sizeof(float));
#pragma omp simd reduction(+ : left)
        for (int j = 0; j < le; j++)
            left += g[j];
#pragma omp simd reduction(+ : right)
        for (int j = rs; j < L; j++)
            right += g[j];
        for (int j = le; j < rs; j++)
            dband[-j] = g[j];
        dr[2 * m] += left;
        dr[0] += right;
    }
    if (!dka)
        return;
    float *restrict col_left = w->vec0, *restrict col_right = w->vec1;
    memset(dka, 0, (size_t)L * R * sizeof(float));
    memset(col_left, 0, (size_t)L * sizeof(float));
    memset(col_right, 0, (size_t)L * sizeof(float));
    for (int i = 0; i < L; i++) {
        int le, rs;
        rel_split(i, m, L, &le, &rs);
        const float *restrict g = G + (size_t)i * L;
        float *restrict kband = dka + i + m;
        for (int j = 0; j < le; j++)
            col_left[j] += g[j];
        for (int j = le; j < rs; j++)
            kband[(size_t)j * (R - 1)] = g[j];
        for (int j = rs; j < L; j++)
            col_right[j] += g[j];
    }
    for (int j = 0; j < L; j++) {
        dka[(size_t)j * R + 2 * m] += col_left[j];
        dka[(size_t)j * R] += col_right[j];
    }
}

/* ---- method3 ------------------------------------------------------------------------------- */

/* kt = K^T [d, L]; qs0 = Q (.) a_0 and qs2 = Q (.) a_2k [L, d] when the clipped regions exist. */
static void method3_operands(const AttnPlan *p, const AttnWork *w, const float *q, const float *kk,
                             const float *table) {
    const int L = p->L, d = p->d, ld = p->ld;
    for (int j = 0; j < L; j++)
        for (int t = 0; t < d; t++)
            w->kt[(size_t)t * L + j] = kk[(size_t)j * ld + t];
    if (p->k >= L)
        return;
    const float *restrict a0 = table, *restrict a2 = table + (size_t)2 * p->k * d;
    for (int i = 0; i < L; i++) {
        const float *restrict qi = q + (size_t)i * ld;
        float *restrict s0 = w->qs0 + (size_t)i * d, *restrict s2 = w->qs2 + (size_t)i * d;
        for (int t = 0; t < d; t++) {
            s0[t] = qi[t] * a0[t];
            s2[t] = qi[t] * a2[t];
        }
    }
}

/* Right region (j >= i+k, row a_0, rows i < L-k) and left region (j <= i-k, row a_2k, rows
 * i >= k), in blocks of ATTN_BLOCK query rows. Block [i0, i0+nb) spans the key columns
 * [c0, c0+wd); the cells of the block outside the region belong to the band. */
static void region_block(const AttnPlan *p, int right, int i0, int *nb, int *c0, int *wd) {
    const int L = p->L, k = p->k;
    if (right) {
        *nb = min_int(ATTN_BLOCK, L - k - i0);
        *c0 = i0 + k;
        *wd = L - *c0;
    } else {
        *nb = min_int(ATTN_BLOCK, L - i0);
        *c0 = 0;
        *wd = i0 + *nb - k;
    }
}

static void method3_scores(const AttnPlan *p, const AttnWork *w, float *restrict S, const float *q,
                           const float *kk, const float *table) {
    const int L = p->L, d = p->d, ld = p->ld, k = p->k, at_ld = p->at_ld;
    method3_operands(p, w, q, kk, table);
    for (int right = 0; right < 2 && k < L; right++)
        for (int i0 = right ? 0 : k; i0 < (right ? L - k : L); i0 += ATTN_BLOCK) {
            int nb, c0, wd;
            region_block(p, right, i0, &nb, &c0, &wd);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, wd, d, 1.0f,
                        (right ? w->qs0 : w->qs2) + (size_t)i0 * d, d, kk + (size_t)c0 * ld, ld,
                        0.0f, w->blk, wd);
            for (int i = i0; i < i0 + nb; i++) {
                const float *br = w->blk + (size_t)(i - i0) * wd - c0; /* br[j] */
                int first = right ? i + k : 0, end = right ? L : i - k + 1;
                memcpy(S + (size_t)i * L + first, br + first, (size_t)(end - first) * sizeof(float));
            }
        }
    for (int i = 0; i < L; i++) {
        int le, rs;
        rel_split(i, k, L, &le, &rs);
        const int n = rs - le;
        float *restrict row = S + (size_t)i * L + le;
        const float *restrict qi = q + (size_t)i * ld;
        memset(row, 0, (size_t)n * sizeof(float));
        for (int t = 0; t < d; t++) {
            const float c = qi[t];
            const float *restrict ar = p->at + (size_t)t * at_ld + (le - i + k);
            const float *restrict kr = w->kt + (size_t)t * L + le;
            for (int j = 0; j < n; j++)
                row[j] += c * ar[j] * kr[j];
        }
    }
}

static void method3_backward(const AttnPlan *p, const AttnWork *w, const float *restrict G,
                             float *restrict part, float *dq, float *dk, const float *q,
                             const float *kk, const float *table) {
    const int L = p->L, d = p->d, ld = p->ld, k = p->k, at_ld = p->at_ld;
    method3_operands(p, w, q, kk, table);
    for (int i = 0; i < L; i++) {
        memset(dq + (size_t)i * ld, 0, (size_t)d * sizeof(float));
        memset(dk + (size_t)i * ld, 0, (size_t)d * sizeof(float));
    }
    memset(w->dkt, 0, (size_t)L * d * sizeof(float));
    for (int i = 0; i < L; i++) {
        int le, rs;
        rel_split(i, k, L, &le, &rs);
        const int n = rs - le;
        const float *restrict g = G + (size_t)i * L + le;
        const float *restrict qi = q + (size_t)i * ld;
        float *restrict dqi = dq + (size_t)i * ld;
        for (int t = 0; t < d; t++) {
            const float c = qi[t];
            const float *restrict ar = p->at + (size_t)t * at_ld + (le - i + k);
            const float *restrict kr = w->kt + (size_t)t * L + le;
            float *restrict dkr = w->dkt + (size_t)t * L + le;
            float *restrict dar = part + (size_t)t * at_ld + (le - i + k);
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int j = 0; j < n; j++) {
                const float ga = g[j] * ar[j];
                acc += ga * kr[j];
                dkr[j] += c * ga;
                dar[j] += c * g[j] * kr[j];
            }
            dqi[t] += acc;
        }
    }
    for (int j = 0; j < L; j++)
        for (int t = 0; t < d; t++)
            dk[(size_t)j * ld + t] += w->dkt[(size_t)t * L + j];

    for (int right = 0; right < 2 && k < L; right++) {
        const float *restrict arow = right ? table : table + (size_t)2 * k * d;
        const float *qs = right ? w->qs0 : w->qs2;
        float *restrict da = part + (right ? 2 * k : 0); /* column v of part, stride at_ld */
        for (int i0 = right ? 0 : k; i0 < (right ? L - k : L); i0 += ATTN_BLOCK) {
            int nb, c0, wd;
            region_block(p, right, i0, &nb, &c0, &wd);
            for (int i = i0; i < i0 + nb; i++) { /* G restricted to the region, 0 elsewhere */
                float *br = w->blk + (size_t)(i - i0) * wd - c0;
                const float *gr = G + (size_t)i * L;
                int first = right ? i + k : 0, end = right ? L : i - k + 1;
                memset(br + c0, 0, (size_t)wd * sizeof(float));
                memcpy(br + first, gr + first, (size_t)(end - first) * sizeof(float));
            }
            /* blk_g = G_region . K;  dQ += blk_g (.) a_row;  da_row += sum_i q_i (.) blk_g_i */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nb, d, wd, 1.0f, w->blk, wd,
                        kk + (size_t)c0 * ld, ld, 0.0f, w->blk_g, d);
            for (int i = i0; i < i0 + nb; i++) {
                const float *restrict gi = w->blk_g + (size_t)(i - i0) * d;
                const float *restrict qi = q + (size_t)i * ld;
                float *restrict dqi = dq + (size_t)i * ld;
                for (int t = 0; t < d; t++) {
                    dqi[t] += gi[t] * arow[t];
                    da[(size_t)t * at_ld] += gi[t] * qi[t];
                }
            }
            /* dK += G_region^T . (Q (.) a_row) */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, wd, d, nb, 1.0f, w->blk, wd,
                        qs + (size_t)i0 * d, d, 1.0f, dk + (size_t)c0 * ld, ld);
        }
    }
}

/* ---- dispatch ------------------------------------------------------------------------------ */

void relpos_scores(const AttnPlan *p, const AttnWork *w, float *scores, const float *raw,
                   const float *qkv, const float *table, int b, int h) {
    const int L = p->L;
    const size_t rows = ((size_t)h * p->BL + (size_t)b * L) * p->R;
    const float *q = qkv + (size_t)b * L * p->ld + (size_t)h * p->d;
    switch (p->rel) {
    case REL_NONE: break;
    case REL_SHAW: gather_scores(p, w, scores, p->qa + rows, NULL); break;
    case REL_METHOD4: gather_scores(p, w, scores, p->qa + rows, p->ka + rows); break;
    case REL_METHOD1:
    case REL_METHOD2:
        for (int i = 0; i < L; i++) {
            float *restrict row = scores + (size_t)i * L;
            const float *restrict rr = raw + (size_t)i * L, *restrict wr = p->w2 + (L - 1 - i);
            for (int j = 0; j < L; j++)
                row[j] = rr[j] * wr[j];
        }
        break;
    case REL_METHOD3: method3_scores(p, w, scores, q, q + p->H, table); break;
    }
}

void relpos_backward(const AttnPlan *p, const AttnWork *w, float *dscore, float *part,
                     float *d_qkv, const float *raw, const float *qkv, const float *table, int b,
                     int h) {
    const int L = p->L;
    const size_t rows = ((size_t)h * p->BL + (size_t)b * L) * p->R;
    const size_t qoff = (size_t)b * L * p->ld + (size_t)h * p->d;
    switch (p->rel) {
    case REL_NONE: break;
    case REL_SHAW: scatter_grads(p, w, dscore, p->qa + rows, NULL); break;
    case REL_METHOD4: scatter_grads(p, w, dscore, p->qa + rows, p->ka + rows); break;
    case REL_METHOD1:
    case REL_METHOD2:
        for (int i = 0; i < L; i++) {
            float *restrict g = dscore + (size_t)i * L, *restrict pr = part + (L - 1 - i);
            const float *restrict rr = raw + (size_t)i * L, *restrict wr = p->w2 + (L - 1 - i);
            for (int j = 0; j < L; j++) {
                pr[j] += g[j] * rr[j];
                g[j] *= wr[j];
            }
        }
        break;
    case REL_METHOD3:
        method3_backward(p, w, dscore, part, d_qkv + qoff, d_qkv + qoff + p->H, qkv + qoff,
                         qkv + qoff + p->H, table);
        break;
    }
}

void relpos_finish(const AttnPlan *p, float *d_qkv, float *d_table, const float *qkv,
                   const float *table) {
    const int L = p->L, k = p->k, d = p->d;
    switch (p->rel) {
    case REL_NONE: break;
    case REL_SHAW:
    case REL_METHOD4: {
        /* dQ_h += dQA_h . A;  dA += dQA_h^T . Q_h  (and the same for K with dKA) */
        const float *reach = table + (size_t)(k - p->m) * d;
        float *d_reach = d_table + (size_t)(k - p->m) * d;
        for (int h = 0; h < p->heads; h++)
            for (int part = 0; part < (p->rel == REL_METHOD4 ? 2 : 1); part++) {
                const float *g = (part ? p->ka : p->qa) + (size_t)h * p->BL * p->R;
                const size_t col = (size_t)part * p->H + (size_t)h * d;
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, p->BL, d, p->R, 1.0f, g,
                            p->R, reach, d, 1.0f, d_qkv + col, p->ld);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p->R, d, p->BL, 1.0f, g, p->R,
                            qkv + col, p->ld, 1.0f, d_reach, d);
            }
        break;
    }
    case REL_METHOD1:
    case REL_METHOD2:
        for (int u = 0; u < 2 * L - 1; u++) {
            float sum = 0.0f;
            for (int s = 0; s < p->slots; s++)
                sum += p->slot_grad[(size_t)s * p->slot_floats + u];
            int delta = L - 1 - u, c = delta < -k ? -k : (delta > k ? k : delta);
            d_table[p->rel == REL_METHOD1 ? abs(c) : c + k] += sum;
        }
        break;
    case REL_METHOD3:
#pragma omp parallel for schedule(static)
        for (int t = 0; t < d; t++)
            for (int v = 0; v < p->at_ld; v++) {
                float sum = 0.0f;
                for (int s = 0; s < p->slots; s++)
                    sum += p->slot_grad[(size_t)s * p->slot_floats + (size_t)t * p->at_ld + v];
                d_table[(size_t)(2 * k - v) * d + t] += sum;
            }
        break;
    }
}
