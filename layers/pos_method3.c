/* Method 3 of Huang et al. 2020: a table a [2k+1, d] per layer weights each dimension's product,
 *   S_ij = scale * sum_t q_it k_jt a_rt,   r = clip(i-j, -k, k) + k.
 * Outside the band |i-j| < k the table row is constant (a_0 right, a_2k left): GEMMs of
 * Q (.) a_row with K; inside the band a direct O(L k d) loop over the transposed table `at`
 * (prepared per call). The scheme writes the whole of S and, in backward, the whole of dQ, dK.
 * Conventions in attention_plan.h; the derivation in docs/attention.md. */
#include <string.h>

#include "core/gemm.h"
#include "layers/attention_plan.h"

static inline int min_int(int a, int b) { return a < b ? a : b; }


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
static void method3_operands(const AttnPlan *p, const AttnWork *w, const float *q, int qld,
                             const float *table) {
    const int L = p->L, d = p->d;
    const float *restrict a0 = table, *restrict a2 = table + (size_t)2 * p->rel_k * d;
    for (int i = 0; i < L; i++) {
        const float *restrict qi = q + (size_t)i * qld;
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
 * Q (.) a_row with K, the band |i-j| < k cell by cell. q, key at row stride ld. */
static void three_way_term(const AttnPlan *p, const AttnWork *w, float *restrict S, const float *q,
                           const float *key, int ld, const float *table) {
    const int L = p->L, d = p->d, rel_k = p->rel_k, at_ld = p->at_ld;
    transpose(w->kt, (size_t)L, key, (size_t)ld, L, d);
    if (rel_k < L)
        method3_operands(p, w, q, ld, table);
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

/* Its gradients from G = dR: writes this (b,h)'s dQ and dK (overwrite, row stride p->ld), dA into
 * part; q, key at row stride qld. */
static void three_way_grads(const AttnPlan *p, const AttnWork *w, const float *restrict G,
                            float *restrict part, float *dq, float *dkey, const float *q,
                            const float *key, int qld, const float *table) {
    const int L = p->L, d = p->d, ld = p->ld, rel_k = p->rel_k, m = p->m;
    if (rel_k < L)
        method3_operands(p, w, q, qld, table);
    for (int i = 0; i < L; i++) {
        memset(dq + (size_t)i * ld, 0, (size_t)d * sizeof(float));
        memset(dkey + (size_t)i * ld, 0, (size_t)d * sizeof(float));
    }
    /* band: for each cell, with g = G_ij and r = i-j+k,
     *   dq_i += g a_r (.) k_j,   dk_j += g a_r (.) q_i,   da_r += g q_i (.) k_j */
    for (int i = 0; i < L; i++) {
        int le, rs;
        rel_split(i, rel_k, L, &le, &rs);
        const float *restrict qi = q + (size_t)i * qld;
        float *restrict dqi = dq + (size_t)i * ld;
        for (int j = le; j < rs; j++) {
            const float g = G[(size_t)i * L + j];
            const float *restrict ar = table + (size_t)(i - j + rel_k) * d;
            const float *restrict kj = key + (size_t)j * qld;
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
                        key + (size_t)c0 * qld, qld, 0.0f, w->blk_g, d);
            for (int i = i0; i < i0 + nb; i++) {
                const float *restrict gi = w->blk_g + (size_t)(i - i0) * d;
                const float *restrict qi = q + (size_t)i * qld;
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

/* ---- the row ------------------------------------------------------------------------------- */

/* at [d, 2k+1]: at[t][v] = a[2k-v][t], v = j-i+k (the forward band); partials [R, d] by r' */
static void plan(AttnPlan *p, Arena *shared) {
    p->at = arena_take(shared, (size_t)p->d * p->at_ld);
    p->slot_floats = attn_round16((size_t)p->R * p->d);
}

static void work(const AttnPlan *p, AttnWork *w, Arena *arena) {
    const size_t L = (size_t)p->L, d = (size_t)p->d;
    w->qs0 = arena_take(arena, L * d);
    w->qs2 = arena_take(arena, L * d);
    w->kt = arena_take(arena, L * d);
    w->blk = arena_take(arena, p->block * L);
    w->blk_g = arena_take(arena, p->block * d);
    w->arow_grad = arena_take(arena, d);
}

static void prepare(const AttnPlan *p, const float *table) {
    const int d = p->d;
    for (int t = 0; t < d; t++)
        for (int v = 0; v < p->at_ld; v++)
            p->at[(size_t)t * p->at_ld + v] = table[(size_t)(2 * p->rel_k - v) * d + t];
}

static void scores(const AttnPlan *p, const AttnWork *w, float *S, const float *raw, const float *qkv,
                   const float *table, int b, int h) {
    (void)raw;
    int ld;
    const float *q = attn_head32(p, w, qkv, b, h, 0, &ld), *key = attn_head32(p, w, qkv, b, h, 1, &ld);
    three_way_term(p, w, S, q, key, ld, table);
}

static void backward(const AttnPlan *p, const AttnWork *w, const float *dscore, float *part, float *d_qkv,
                     const float *qkv, const float *table, int b, int h) {
    const size_t off = (size_t)b * p->L * p->ld + (size_t)h * p->d;
    int ld;
    const float *q = attn_head32(p, w, qkv, b, h, 0, &ld), *key = attn_head32(p, w, qkv, b, h, 1, &ld);
    three_way_grads(p, w, dscore, part, d_qkv + off, d_qkv + off + p->H, q, key, ld, table);
}

/* The transfer's all-1 table makes the term q_i.k_j; a fresh one is random (the paper's). */
const PosScheme pos_method3 = {
    .uses_k = 1,
    .settings = pos_truncated_settings,
    .table_scope = POS_TABLE_LAYER,
    .table_name = "attention/self/distance_embedding/weight",
    .table_shape = pos_vector_table_shape,
    .transfer_identity = 1.0f,
    .transfer_vanishes = "Σ_t q_it k_jt a_rt = q_i·k_j",
    .check = pos_truncated_check,
    .plan = plan,
    .work = work,
    .prepare = prepare,
    .qk = POS_QK_SCHEME,
    .scores = scores,
    .backward = backward,
    .finish = pos_vector_table_finish,
};
