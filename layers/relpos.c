/* Relative-position terms of the attention scores, forward and backward. Conventions (r, r', m,
 * u, v, left/band/right split) in relpos.h; the derivation and costs in docs/attention.md.
 *   shaw, method4: per (b,h) and block of p->block query rows (key columns), QA = Q.A^T
 *                  (KA = K.A^T) over only the table rows that block reaches, gathered into the
 *                  scores; backward scatters dS into dQA / dKA and runs the transposed GEMMs.
 *   methods 1, 2:  scores = (q.k) (.) w2[u].
 *   method3:       outside the band |i-j| < k the table row is constant (a_0 right, a_2k left):
 *                  GEMMs with Q (.) a_row; inside the band a direct O(L k d) loop.
 * Table gradients go to per-slot partials, summed in a fixed order by relpos_finish. */
#include "layers/relpos.h"

#include <cblas.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static inline int min_int(int a, int b) { return a < b ? a : b; }

static inline int max_int(int a, int b) { return a > b ? a : b; }

void relpos_prepare(const AttnPlan *p, const float *table) {
    const int L = p->L, k = p->k, d = p->d;
    if (p->rel == REL_METHOD1 || p->rel == REL_METHOD2)
        for (int u = 0; u < 2 * L - 1; u++) {
            int delta = L - 1 - u; /* i - j */
            int c = delta < -k ? -k : (delta > k ? k : delta);
            p->w2[u] = table[p->rel == REL_METHOD1 ? abs(c) : c + k];
        }
    if (p->rel == REL_METHOD3)
        for (int t = 0; t < d; t++)
            for (int v = 0; v < p->at_ld; v++)
                p->at[(size_t)t * p->at_ld + v] = table[(size_t)(2 * k - v) * d + t];
}

/* ---- shaw / method4 ------------------------------------------------------------------------ */

/* The block of query rows (keys = 0) or key columns (keys = 1) [first, first+nb) reaches only
 * r' in [lo, hi]: a query row i reaches clip(i-j) over j in [0, L), a key column j over i. */
static void reach_block(const AttnPlan *p, int first, int keys, int *nb, int *lo, int *hi) {
    const int L = p->L, m = p->m;
    *nb = min_int(p->block, L - first);
    if (!keys) {
        *lo = max_int(0, first - (L - 1) + m);
        *hi = min_int(2 * m, first + *nb - 1 + m);
    } else {
        *lo = max_int(0, m - (first + *nb - 1));
        *hi = min_int(2 * m, L - 1 - first + m);
    }
}

/* S_ij = QA[i][r'] + (method4) KA[j][r'],  r' = clip(i-j, -m, m) + m (overwrites S; the caller
 * adds q.k after, as a GEMM with beta = 1, which saves the pass that zeroes S), where QA = Q.A^T
 * and KA = K.A^T are computed block by block into w->blk ([nb, W], column c is r' = lo + c). */
static void gather_scores(const AttnPlan *p, const AttnWork *w, float *restrict S, const float *q,
                          const float *kk, const float *reach) {
    const int L = p->L, m = p->m, d = p->d, ld = p->ld;
    float *restrict blk = w->blk;
    for (int i0 = 0; i0 < L; i0 += p->block) {
        int nb, lo, hi;
        reach_block(p, i0, 0, &nb, &lo, &hi);
        const int W = hi - lo + 1;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, W, d, 1.0f, q + (size_t)i0 * ld,
                    ld, reach + (size_t)lo * d, d, 0.0f, blk, W);
        for (int i = i0; i < i0 + nb; i++) {
            int le, rs;
            rel_split(i, m, L, &le, &rs);
            float *restrict row = S + (size_t)i * L;
            const float *restrict qa = blk + (size_t)(i - i0) * W;
            const int band0 = i + m - lo; /* qa[band0 - j] = QA[i][i-j+m] */
            const float left = le > 0 ? qa[2 * m - lo] : 0.0f, right = rs < L ? qa[0] : 0.0f;
            for (int j = 0; j < le; j++)
                row[j] = left;
            for (int j = le; j < rs; j++)
                row[j] = qa[band0 - j];
            for (int j = rs; j < L; j++)
                row[j] = right;
        }
    }
    if (!kk)
        return;
    for (int j0 = 0; j0 < L; j0 += p->block) {
        int nb, lo, hi;
        reach_block(p, j0, 1, &nb, &lo, &hi);
        const int W = hi - lo + 1, j1 = j0 + nb;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, W, d, 1.0f, kk + (size_t)j0 * ld,
                    ld, reach + (size_t)lo * d, d, 0.0f, blk, W);
        /* clipped columns: r' = 2m (reachable iff hi = 2m) and r' = 0 (iff lo = 0) */
        float *restrict ka_left = w->vec0, *restrict ka_right = w->vec1;
        for (int c = 0; c < nb; c++) {
            ka_left[c] = hi == 2 * m ? blk[(size_t)c * W + 2 * m - lo] : 0.0f;
            ka_right[c] = lo == 0 ? blk[(size_t)c * W] : 0.0f;
        }
        for (int i = 0; i < L; i++) {
            int le, rs;
            rel_split(i, m, L, &le, &rs);
            le = min_int(max_int(le, j0), j1), rs = min_int(max_int(rs, j0), j1);
            float *restrict row = S + (size_t)i * L;
            const ptrdiff_t band0 = i + m - lo - j0; /* blk[band0 + c*(W-1)] = KA[j0+c][r'] */
            for (int j = j0; j < le; j++)
                row[j] += ka_left[j - j0];
            for (int j = le; j < rs; j++)
                row[j] += blk[band0 + (ptrdiff_t)(j - j0) * (W - 1)];
            for (int j = rs; j < j1; j++)
                row[j] += ka_right[j - j0];
        }
    }
}

/* dQA[i][r'] = sum of G_ij over the j with that r' (dKA[j][r'] over the i), block by block;
 * then dQ += dQA.A, dK += dKA.A and dA += dQA^T.Q + dKA^T.K (dA: part, [R, d]). */
static void scatter_grads(const AttnPlan *p, const AttnWork *w, const float *restrict G,
                          float *part, float *dq, float *dk, const float *q, const float *kk,
                          const float *reach) {
    const int L = p->L, m = p->m, d = p->d, ld = p->ld;
    float *restrict blk = w->blk;
    for (int i0 = 0; i0 < L; i0 += p->block) {
        int nb, lo, hi;
        reach_block(p, i0, 0, &nb, &lo, &hi);
        const int W = hi - lo + 1;
        for (int i = i0; i < i0 + nb; i++) {
            int le, rs;
            rel_split(i, m, L, &le, &rs);
            const float *restrict g = G + (size_t)i * L;
            float *restrict dr = blk + (size_t)(i - i0) * W;
            const int band0 = i + m - lo;
            float left = 0.0f, right = 0.0f;
            memset(dr, 0, (size_t)W * sizeof(float));
#pragma omp simd reduction(+ : left)
            for (int j = 0; j < le; j++)
                left += g[j];
#pragma omp simd reduction(+ : right)
            for (int j = rs; j < L; j++)
                right += g[j];
            for (int j = le; j < rs; j++)
                dr[band0 - j] = g[j];
            if (le > 0)
                dr[2 * m - lo] += left;
            if (rs < L)
                dr[0] += right;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nb, d, W, 1.0f, blk, W,
                    reach + (size_t)lo * d, d, 1.0f, dq + (size_t)i0 * ld, ld);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, W, d, nb, 1.0f, blk, W,
                    q + (size_t)i0 * ld, ld, 1.0f, part + (size_t)lo * d, d);
    }
    if (!dk)
        return;
    for (int j0 = 0; j0 < L; j0 += p->block) {
        int nb, lo, hi;
        reach_block(p, j0, 1, &nb, &lo, &hi);
        const int W = hi - lo + 1, j1 = j0 + nb;
        float *restrict col_left = w->vec0, *restrict col_right = w->vec1;
        memset(blk, 0, (size_t)nb * W * sizeof(float));
        memset(col_left, 0, (size_t)nb * sizeof(float));
        memset(col_right, 0, (size_t)nb * sizeof(float));
        for (int i = 0; i < L; i++) {
            int le, rs;
            rel_split(i, m, L, &le, &rs);
            le = min_int(max_int(le, j0), j1), rs = min_int(max_int(rs, j0), j1);
            const float *restrict g = G + (size_t)i * L;
            const ptrdiff_t band0 = i + m - lo - j0;
            for (int j = j0; j < le; j++)
                col_left[j - j0] += g[j];
            for (int j = le; j < rs; j++)
                blk[band0 + (ptrdiff_t)(j - j0) * (W - 1)] = g[j];
            for (int j = rs; j < j1; j++)
                col_right[j - j0] += g[j];
        }
        for (int c = 0; c < nb; c++) { /* columns with clipped cells reach r' = 2m (r' = 0) */
            if (hi == 2 * m)
                blk[(size_t)c * W + 2 * m - lo] += col_left[c];
            if (lo == 0)
                blk[(size_t)c * W] += col_right[c];
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nb, d, W, 1.0f, blk, W,
                    reach + (size_t)lo * d, d, 1.0f, dk + (size_t)j0 * ld, ld);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, W, d, nb, 1.0f, blk, W,
                    kk + (size_t)j0 * ld, ld, 1.0f, part + (size_t)lo * d, d);
    }
}

/* ---- method3 ------------------------------------------------------------------------------- */

/* dst[c][r] = src[r][c] for r < rows, c < cols, in 16 x 16 tiles (both sides stay in L1). */
static void transpose(float *restrict dst, size_t dst_ld, const float *restrict src, size_t src_ld,
                      int rows, int cols) {
    for (int r0 = 0; r0 < rows; r0 += 16)
        for (int c0 = 0; c0 < cols; c0 += 16)
            for (int c = c0; c < min_int(c0 + 16, cols); c++)
                for (int r = r0; r < min_int(r0 + 16, rows); r++)
                    dst[(size_t)c * dst_ld + r] = src[(size_t)r * src_ld + c];
}

/* qs0 = Q (.) a_0 and qs2 = Q (.) a_2k [L, d], the operands of the clipped regions (k < L). */
static void method3_operands(const AttnPlan *p, const AttnWork *w, const float *q,
                             const float *table) {
    const int L = p->L, d = p->d, ld = p->ld;
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
 * i >= k), in blocks of p->block query rows. Block [i0, i0+nb) spans the key columns
 * [c0, c0+wd); the cells of the block outside the region belong to the band. */
static void region_block(const AttnPlan *p, int right, int i0, int *nb, int *c0, int *wd) {
    const int L = p->L, k = p->k;
    if (right) {
        *nb = min_int(p->block, L - k - i0);
        *c0 = i0 + k;
        *wd = L - *c0;
    } else {
        *nb = min_int(p->block, L - i0);
        *c0 = 0;
        *wd = i0 + *nb - k;
    }
}

static void method3_scores(const AttnPlan *p, const AttnWork *w, float *restrict S, const float *q,
                           const float *kk, const float *table) {
    const int L = p->L, d = p->d, ld = p->ld, k = p->k, at_ld = p->at_ld;
    transpose(w->kt, (size_t)L, kk, (size_t)ld, L, d);
    if (k < L)
        method3_operands(p, w, q, table);
    for (int right = 0; right < 2 && k < L; right++)
        for (int i0 = right ? 0 : k; i0 < (right ? L - k : L); i0 += p->block) {
            int nb, c0, wd;
            region_block(p, right, i0, &nb, &c0, &wd);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nb, wd, d, 1.0f,
                        (right ? w->qs0 : w->qs2) + (size_t)i0 * d, d, kk + (size_t)c0 * ld, ld,
                        0.0f, w->blk, wd);
            for (int i = i0; i < i0 + nb; i++) {
                const int first = right ? i + k : 0, end = right ? L : i - k + 1;
                memcpy(S + (size_t)i * L + first, w->blk + (size_t)(i - i0) * wd + (first - c0),
                       (size_t)(end - first) * sizeof(float));
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
    const int L = p->L, d = p->d, ld = p->ld, k = p->k, m = p->m;
    if (k < L)
        method3_operands(p, w, q, table);
    for (int i = 0; i < L; i++) {
        memset(dq + (size_t)i * ld, 0, (size_t)d * sizeof(float));
        memset(dk + (size_t)i * ld, 0, (size_t)d * sizeof(float));
    }
    /* band: for each cell, with g = G_ij and r = i-j+k,
     *   dq_i += g a_r (.) k_j,   dk_j += g a_r (.) q_i,   da_r += g q_i (.) k_j */
    for (int i = 0; i < L; i++) {
        int le, rs;
        rel_split(i, k, L, &le, &rs);
        const float *restrict qi = q + (size_t)i * ld;
        float *restrict dqi = dq + (size_t)i * ld;
        for (int j = le; j < rs; j++) {
            const float g = G[(size_t)i * L + j];
            const float *restrict ar = table + (size_t)(i - j + k) * d;
            const float *restrict kj = kk + (size_t)j * ld;
            float *restrict dkj = dk + (size_t)j * ld;
            float *restrict dar = part + (size_t)(i - j + m) * d;
            for (int t = 0; t < d; t++) {
                const float ga = g * ar[t];
                dqi[t] += ga * kj[t];
                dkj[t] += ga * qi[t];
                dar[t] += g * qi[t] * kj[t];
            }
        }
    }

    for (int right = 0; right < 2 && k < L; right++) {
        const float *restrict arow = right ? table : table + (size_t)2 * k * d;
        const float *qs = right ? w->qs0 : w->qs2;
        float *restrict da = w->arow_grad; /* d a_row summed over this region's rows */
        memset(da, 0, (size_t)d * sizeof(float));
        for (int i0 = right ? 0 : k; i0 < (right ? L - k : L); i0 += p->block) {
            int nb, c0, wd;
            region_block(p, right, i0, &nb, &c0, &wd);
            for (int i = i0; i < i0 + nb; i++) { /* G restricted to the region, 0 elsewhere */
                float *br = w->blk + (size_t)(i - i0) * wd;
                const int first = right ? i + k : 0, end = right ? L : i - k + 1;
                memset(br, 0, (size_t)wd * sizeof(float));
                memcpy(br + (first - c0), G + (size_t)i * L + first,
                       (size_t)(end - first) * sizeof(float));
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
                    da[t] += gi[t] * qi[t];
                }
            }
            /* dK += G_region^T . (Q (.) a_row) */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, wd, d, nb, 1.0f, w->blk, wd,
                        qs + (size_t)i0 * d, d, 1.0f, dk + (size_t)c0 * ld, ld);
        }
        float *restrict part_row = part + (right ? 0 : (size_t)2 * k * d); /* here m = k */
        for (int t = 0; t < d; t++)
            part_row[t] += da[t];
    }
}

/* ---- dispatch ------------------------------------------------------------------------------ */

void relpos_scores(const AttnPlan *p, const AttnWork *w, float *scores, const float *raw,
                   const float *qkv, const float *table, int b, int h) {
    const int L = p->L;
    const float *q = qkv + (size_t)b * L * p->ld + (size_t)h * p->d, *kk = q + p->H;
    const float *reach = table + (size_t)(p->k - p->m) * p->d;
    switch (p->rel) {
    case REL_NONE: break;
    case REL_SHAW: gather_scores(p, w, scores, q, NULL, reach); break;
    case REL_METHOD4: gather_scores(p, w, scores, q, kk, reach); break;
    case REL_METHOD1:
    case REL_METHOD2:
        for (int i = 0; i < L; i++) {
            float *restrict row = scores + (size_t)i * L;
            const float *restrict rr = raw + (size_t)i * L, *restrict wr = p->w2 + (L - 1 - i);
            for (int j = 0; j < L; j++)
                row[j] = rr[j] * wr[j];
        }
        break;
    case REL_METHOD3: method3_scores(p, w, scores, q, kk, table); break;
    }
}

void relpos_backward_pre(const AttnPlan *p, float *dscore, float *part, const float *raw) {
    const int L = p->L;
    for (int i = 0; i < L; i++) {
        float *restrict g = dscore + (size_t)i * L, *restrict pr = part + (L - 1 - i);
        const float *restrict rr = raw + (size_t)i * L, *restrict wr = p->w2 + (L - 1 - i);
        for (int j = 0; j < L; j++) {
            pr[j] += g[j] * rr[j];
            g[j] *= wr[j];
        }
    }
}

void relpos_backward(const AttnPlan *p, const AttnWork *w, const float *dscore, float *part,
                     float *d_qkv, const float *qkv, const float *table, int b, int h) {
    const size_t off = (size_t)b * p->L * p->ld + (size_t)h * p->d;
    const float *q = qkv + off, *kk = q + p->H;
    float *dq = d_qkv + off, *dk = dq + p->H;
    const float *reach = table + (size_t)(p->k - p->m) * p->d;
    switch (p->rel) {
    case REL_SHAW: scatter_grads(p, w, dscore, part, dq, NULL, q, NULL, reach); break;
    case REL_METHOD4: scatter_grads(p, w, dscore, part, dq, dk, q, kk, reach); break;
    case REL_METHOD3: method3_backward(p, w, dscore, part, dq, dk, q, kk, table); break;
    default: break;
    }
}

void relpos_finish(const AttnPlan *p, float *d_table) {
    const int L = p->L, k = p->k, d = p->d;
    const float *slot = p->slot_grad;
    const size_t stride = p->slot_floats;
    switch (p->rel) {
    case REL_NONE: break;
    case REL_SHAW:
    case REL_METHOD3:
    case REL_METHOD4: {
        float *d_reach = d_table + (size_t)(k - p->m) * d;
        const size_t n = (size_t)p->R * d;
#pragma omp parallel for schedule(static)
        for (size_t e = 0; e < n; e++) {
            float sum = 0.0f;
            for (int s = 0; s < p->slots; s++)
                sum += slot[(size_t)s * stride + e];
            d_reach[e] += sum;
        }
        break;
    }
    case REL_METHOD1:
    case REL_METHOD2:
        for (int u = 0; u < 2 * L - 1; u++) {
            float sum = 0.0f;
            for (int s = 0; s < p->slots; s++)
                sum += slot[(size_t)s * stride + u];
            int delta = L - 1 - u, c = delta < -k ? -k : (delta > k ? k : delta);
            d_table[p->rel == REL_METHOD1 ? abs(c) : c + k] += sum;
        }
        break;
    }
}
