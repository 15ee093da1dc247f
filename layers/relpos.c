/* Relative-position terms of the attention scores, forward and backward, one function per term
 * of the formulas (the table in relpos.h). Conventions (r, r', m, u, v, left/band/right split) in
 * attention_plan.h; the derivation and costs in docs/attention.md.
 *   q_i.a_r, k_j.a_r (shaw, method4): per (b,h) and block of p->block query rows (key columns),
 *       QA = Q.A^T (KA = K.A^T) over only the table rows that block reaches, gathered into S;
 *       backward scatters dR into dQA / dKA and runs the transposed GEMMs.
 *   (q_i.k_j) w (methods 1, 2): S = raw (.) w2[u].
 *   sum_t q_it k_jt a_rt (method3): outside the band |i-j| < k the table row is constant (a_0
 *       right, a_2k left): GEMMs with Q (.) a_row; inside the band a direct O(L k d) loop.
 * Table gradients go to per-slot partials, summed in a fixed order by relpos_finish. */
#include "layers/relpos.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/gemm.h"

static inline int min_int(int a, int b) { return a < b ? a : b; }

static inline int max_int(int a, int b) { return a > b ? a : b; }

/* The table entry of methods 1 (w_s, s = |clip|) and 2 (w_r, r = clip + k) for i - j = delta. */
static int scalar_table_index(RelKind rel, int rel_k, int delta) {
    const int clipped = delta < -rel_k ? -rel_k : (delta > rel_k ? rel_k : delta);
    return rel == REL_METHOD1 ? abs(clipped) : clipped + rel_k;
}

void relpos_prepare(const AttnPlan *p, const float *table) {
    const int L = p->L, rel_k = p->rel_k, d = p->d;
    if (p->rel == REL_METHOD1 || p->rel == REL_METHOD2)
        for (int u = 0; u < 2 * L - 1; u++) /* u = j - i + L - 1 */
            p->w2[u] = table[scalar_table_index(p->rel, rel_k, L - 1 - u)];
    if (p->rel == REL_METHOD3)
        for (int t = 0; t < d; t++)
            for (int v = 0; v < p->at_ld; v++)
                p->at[(size_t)t * p->at_ld + v] = table[(size_t)(2 * rel_k - v) * d + t];
}

/* ---- q_i.a_r, k_j.a_r: shaw, method4 ------------------------------------------------------- */

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

/* Term q_i.a_r: S_ij = QA[i][r'], r' = clip(i-j, -m, m) + m, QA = Q.A^T computed block by block
 * into w->blk ([nb, W], column c is r' = lo + c). Overwrites S (the caller adds q_i.k_j after, as
 * a GEMM with beta = 1, which saves the pass that zeroes S). */
static void query_table_term(const AttnPlan *p, const AttnWork *w, float *restrict S,
                             const float *q, const float *reach) {
    const int L = p->L, m = p->m, d = p->d, ld = p->ld;
    float *restrict blk = w->blk;
    for (int i0 = 0; i0 < L; i0 += p->block) {
        int nb, lo, hi;
        reach_block(p, i0, 0, &nb, &lo, &hi);
        const int W = hi - lo + 1;
        gemm_f32(GEMM_N, GEMM_T, nb, W, d, 1.0f, q + (size_t)i0 * ld,
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
}

/* Term k_j.a_r (method4): S_ij += KA[j][r'], KA = K.A^T block by block over key columns. */
static void key_table_term(const AttnPlan *p, const AttnWork *w, float *restrict S,
                           const float *key, const float *reach) {
    const int L = p->L, m = p->m, d = p->d, ld = p->ld;
    float *restrict blk = w->blk;
    for (int j0 = 0; j0 < L; j0 += p->block) {
        int nb, lo, hi;
        reach_block(p, j0, 1, &nb, &lo, &hi);
        const int W = hi - lo + 1, j1 = j0 + nb;
        gemm_f32(GEMM_N, GEMM_T, nb, W, d, 1.0f, key + (size_t)j0 * ld,
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

/* Gradients of the term q_i.a_r from G = dR [L, L]: dQA[i][r'] = sum of G_ij over the j with
 * that r' (block by block), then dQ += dQA.A and dA += dQA^T.Q (dA: part, [R, d]). */
static void query_table_grads(const AttnPlan *p, const AttnWork *w, const float *restrict G,
                              float *part, float *dq, const float *q, const float *reach) {
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
        gemm_f32(GEMM_N, GEMM_N, nb, d, W, 1.0f, blk, W,
                    reach + (size_t)lo * d, d, 1.0f, dq + (size_t)i0 * ld, ld);
        gemm_f32(GEMM_T, GEMM_N, W, d, nb, 1.0f, blk, W,
                    q + (size_t)i0 * ld, ld, 1.0f, part + (size_t)lo * d, d);
    }
}

/* Gradients of the term k_j.a_r: dKA[j][r'] = sum of G_ij over the i with that r', then
 * dK += dKA.A and dA += dKA^T.K. */
static void key_table_grads(const AttnPlan *p, const AttnWork *w, const float *restrict G,
                            float *part, float *dkey, const float *key, const float *reach) {
    const int L = p->L, m = p->m, d = p->d, ld = p->ld;
    float *restrict blk = w->blk;
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
        gemm_f32(GEMM_N, GEMM_N, nb, d, W, 1.0f, blk, W,
                    reach + (size_t)lo * d, d, 1.0f, dkey + (size_t)j0 * ld, ld);
        gemm_f32(GEMM_T, GEMM_N, W, d, nb, 1.0f, blk, W,
                    key + (size_t)j0 * ld, ld, 1.0f, part + (size_t)lo * d, d);
    }
}

/* ---- (q_i.k_j) w: methods 1, 2 --------------------------------------------------------------- */

/* S_ij = raw_ij w2[j-i+L-1], raw = q_i.k_j */
static void scalar_weight_term(const AttnPlan *p, float *restrict S, const float *restrict raw) {
    const int L = p->L;
    for (int i = 0; i < L; i++) {
        float *restrict row = S + (size_t)i * L;
        const float *restrict rr = raw + (size_t)i * L, *restrict wr = p->w2 + (L - 1 - i);
        for (int j = 0; j < L; j++)
            row[j] = rr[j] * wr[j];
    }
}

/* dw2[u] += G_ij raw_ij (into part, by u), then G_ij *= w2[u]: the gradient of q_i.k_j */
static void scalar_weight_grads(const AttnPlan *p, float *restrict G, float *restrict part,
                                const float *restrict raw) {
    const int L = p->L;
    for (int i = 0; i < L; i++) {
        float *restrict g = G + (size_t)i * L, *restrict pr = part + (L - 1 - i);
        const float *restrict rr = raw + (size_t)i * L, *restrict wr = p->w2 + (L - 1 - i);
        for (int j = 0; j < L; j++) {
            pr[j] += g[j] * rr[j];
            g[j] *= wr[j];
        }
    }
}

/* ---- sum_t q_it k_jt a_rt: method3 ---------------------------------------------------------- */

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
    const float *restrict a0 = table, *restrict a2 = table + (size_t)2 * p->rel_k * d;
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
 * i >= k), k = rel_k, in blocks of p->block query rows. Block [i0, i0+nb) spans the key columns
 * [c0, c0+wd); the cells of the block outside the region belong to the band. */
static void region_block(const AttnPlan *p, int right, int i0, int *nb, int *c0, int *wd) {
    const int L = p->L, rel_k = p->rel_k;
    if (right) {
        *nb = min_int(p->block, L - rel_k - i0);
        *c0 = i0 + rel_k;
        *wd = L - *c0;
    } else {
        *nb = min_int(p->block, L - i0);
        *c0 = 0;
        *wd = i0 + *nb - rel_k;
    }
}

/* Term sum_t q_it k_jt a_rt (method3), the whole of S: the clipped regions as GEMMs of
 * Q (.) a_row with K, the band |i-j| < k cell by cell. */
static void three_way_term(const AttnPlan *p, const AttnWork *w, float *restrict S, const float *q,
                           const float *key, const float *table) {
    const int L = p->L, d = p->d, ld = p->ld, rel_k = p->rel_k, at_ld = p->at_ld;
    transpose(w->kt, (size_t)L, key, (size_t)ld, L, d);
    if (rel_k < L)
        method3_operands(p, w, q, table);
    for (int right = 0; right < 2 && rel_k < L; right++)
        for (int i0 = right ? 0 : rel_k; i0 < (right ? L - rel_k : L); i0 += p->block) {
            int nb, c0, wd;
            region_block(p, right, i0, &nb, &c0, &wd);
            gemm_f32(GEMM_N, GEMM_T, nb, wd, d, 1.0f,
                        (right ? w->qs0 : w->qs2) + (size_t)i0 * d, d, key + (size_t)c0 * ld, ld,
                        0.0f, w->blk, wd);
            for (int i = i0; i < i0 + nb; i++) {
                const int first = right ? i + rel_k : 0, end = right ? L : i - rel_k + 1;
                memcpy(S + (size_t)i * L + first, w->blk + (size_t)(i - i0) * wd + (first - c0),
                       (size_t)(end - first) * sizeof(float));
            }
        }
    for (int i = 0; i < L; i++) {
        int le, rs;
        rel_split(i, rel_k, L, &le, &rs);
        const int n = rs - le;
        float *restrict row = S + (size_t)i * L + le;
        const float *restrict qi = q + (size_t)i * ld;
        memset(row, 0, (size_t)n * sizeof(float));
        for (int t = 0; t < d; t++) {
            const float c = qi[t];
            const float *restrict ar = p->at + (size_t)t * at_ld + (le - i + rel_k);
            const float *restrict kr = w->kt + (size_t)t * L + le;
            for (int j = 0; j < n; j++)
                row[j] += c * ar[j] * kr[j];
        }
    }
}

/* Its gradients from G = dR: writes this (b,h)'s dQ and dK (overwrite), dA into part. */
static void three_way_grads(const AttnPlan *p, const AttnWork *w, const float *restrict G,
                            float *restrict part, float *dq, float *dkey, const float *q,
                            const float *key, const float *table) {
    const int L = p->L, d = p->d, ld = p->ld, rel_k = p->rel_k, m = p->m;
    if (rel_k < L)
        method3_operands(p, w, q, table);
    for (int i = 0; i < L; i++) {
        memset(dq + (size_t)i * ld, 0, (size_t)d * sizeof(float));
        memset(dkey + (size_t)i * ld, 0, (size_t)d * sizeof(float));
    }
    /* band: for each cell, with g = G_ij and r = i-j+k,
     *   dq_i += g a_r (.) k_j,   dk_j += g a_r (.) q_i,   da_r += g q_i (.) k_j */
    for (int i = 0; i < L; i++) {
        int le, rs;
        rel_split(i, rel_k, L, &le, &rs);
        const float *restrict qi = q + (size_t)i * ld;
        float *restrict dqi = dq + (size_t)i * ld;
        for (int j = le; j < rs; j++) {
            const float g = G[(size_t)i * L + j];
            const float *restrict ar = table + (size_t)(i - j + rel_k) * d;
            const float *restrict kj = key + (size_t)j * ld;
            float *restrict dkj = dkey + (size_t)j * ld;
            float *restrict dar = part + (size_t)(i - j + m) * d;
            for (int t = 0; t < d; t++) {
                const float ga = g * ar[t];
                dqi[t] += ga * kj[t];
                dkj[t] += ga * qi[t];
                dar[t] += g * qi[t] * kj[t];
            }
        }
    }

    for (int right = 0; right < 2 && rel_k < L; right++) {
        const float *restrict arow = right ? table : table + (size_t)2 * rel_k * d;
        const float *qs = right ? w->qs0 : w->qs2;
        float *restrict da = w->arow_grad; /* d a_row summed over this region's rows */
        memset(da, 0, (size_t)d * sizeof(float));
        for (int i0 = right ? 0 : rel_k; i0 < (right ? L - rel_k : L); i0 += p->block) {
            int nb, c0, wd;
            region_block(p, right, i0, &nb, &c0, &wd);
            for (int i = i0; i < i0 + nb; i++) { /* G restricted to the region, 0 elsewhere */
                float *br = w->blk + (size_t)(i - i0) * wd;
                const int first = right ? i + rel_k : 0, end = right ? L : i - rel_k + 1;
                memset(br, 0, (size_t)wd * sizeof(float));
                memcpy(br + (first - c0), G + (size_t)i * L + first,
                       (size_t)(end - first) * sizeof(float));
            }
            /* blk_g = G_region . K;  dQ += blk_g (.) a_row;  da_row += sum_i q_i (.) blk_g_i */
            gemm_f32(GEMM_N, GEMM_N, nb, d, wd, 1.0f, w->blk, wd,
                        key + (size_t)c0 * ld, ld, 0.0f, w->blk_g, d);
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
            gemm_f32(GEMM_T, GEMM_N, wd, d, nb, 1.0f, w->blk, wd,
                        qs + (size_t)i0 * d, d, 1.0f, dkey + (size_t)c0 * ld, ld);
        }
        float *restrict part_row = part + (right ? 0 : (size_t)2 * rel_k * d); /* here m = rel_k */
        for (int t = 0; t < d; t++)
            part_row[t] += da[t];
    }
}

/* ---- dispatch ------------------------------------------------------------------------------ */

void relpos_scores(const AttnPlan *p, const AttnWork *w, float *scores, const float *raw,
                   const float *qkv, const float *table, int b, int h) {
    const float *q = qkv + (size_t)b * p->L * p->ld + (size_t)h * p->d, *key = q + p->H;
    const float *reach = table + (size_t)(p->rel_k - p->m) * p->d;
    switch (p->rel) {
    case REL_NONE: break;
    case REL_SHAW: query_table_term(p, w, scores, q, reach); break;
    case REL_METHOD4:
        query_table_term(p, w, scores, q, reach);
        key_table_term(p, w, scores, key, reach);
        break;
    case REL_METHOD1:
    case REL_METHOD2: scalar_weight_term(p, scores, raw); break;
    case REL_METHOD3: three_way_term(p, w, scores, q, key, table); break;
    default: break; /* t5, alibi, rope: positions.h */
    }
}

void relpos_backward_pre(const AttnPlan *p, float *dscore, float *part, const float *raw) {
    scalar_weight_grads(p, dscore, part, raw);
}

void relpos_backward(const AttnPlan *p, const AttnWork *w, const float *dscore, float *part,
                     float *d_qkv, const float *qkv, const float *table, int b, int h) {
    const size_t off = (size_t)b * p->L * p->ld + (size_t)h * p->d;
    const float *q = qkv + off, *key = q + p->H;
    float *dq = d_qkv + off, *dkey = dq + p->H;
    const float *reach = table + (size_t)(p->rel_k - p->m) * p->d;
    switch (p->rel) {
    case REL_SHAW: query_table_grads(p, w, dscore, part, dq, q, reach); break;
    case REL_METHOD4:
        query_table_grads(p, w, dscore, part, dq, q, reach);
        key_table_grads(p, w, dscore, part, dkey, key, reach);
        break;
    case REL_METHOD3: three_way_grads(p, w, dscore, part, dq, dkey, q, key, table); break;
    default: break;
    }
}

void relpos_finish(const AttnPlan *p, float *d_table) {
    const int L = p->L, d = p->d;
    const float *slot = p->slot_grad;
    const size_t stride = p->slot_floats;
    switch (p->rel) {
    case REL_NONE: break;
    case REL_SHAW:
    case REL_METHOD3:
    case REL_METHOD4: {
        float *d_reach = d_table + (size_t)(p->rel_k - p->m) * d;
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
            d_table[scalar_table_index(p->rel, p->rel_k, L - 1 - u)] += sum;
        }
        break;
    default: break; /* t5: t5_bias_finish */
    }
}
