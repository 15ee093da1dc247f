/* Shaw's and Method 4's terms (Shaw et al. 2018; Huang et al. 2020), one table a [2k+1, d] per
 * layer, row r = clip(i-j, -k, k) + k:
 *   shaw     S_ij = scale * (q_i.k_j + q_i.a_r)
 *   method4  S_ij = scale * (q_i.k_j + q_i.a_r + k_j.a_r)
 * One file: method4 is shaw plus the same term with the roles of queries and keys swapped, on the
 * same kernels. Per (b,h) and block of p->block query rows (key columns), QA = Q.A^T (KA = K.A^T)
 * over only the table rows that block reaches, gathered into S (never an [L, L, d] tensor);
 * backward scatters dR into dQA / dKA by r' and runs the transposed GEMMs. Conventions (r, r',
 * m, the left/band/right split) in attention_plan.h; derivation and costs in docs/attention.md. */
#include <stddef.h>
#include <string.h>

#include "core/gemm.h"
#include "layers/attention_plan.h"

static inline int min_int(int a, int b) { return a < b ? a : b; }

static inline int max_int(int a, int b) { return a > b ? a : b; }

/* Rows first.. of X: fp32 at row stride ld, and its bf16 form (bf16 runs) at row stride ld16. */
static AttnOperand rows_of(const float *x, int ld, const bf16 *x16, int ld16, int first) {
    return (AttnOperand){x ? x + (size_t)first * ld : NULL, ld, x16 ? x16 + (size_t)first * ld16 : NULL, ld16};
}

/* The dQA / dKA block blk [nb, W] (w->blk or w->blk_key) as an operand (bf16 runs: rounded into
 * w->blk16). */
static AttnOperand block_operand(const AttnPlan *p, const AttnWork *w, const float *blk, int nb, int W) {
    if (p->bf16)
        attn_to_bf16(w->blk16, blk, nb, W, W);
    return (AttnOperand){blk, W, w->blk16, W};
}


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
                             const float *q, int qld, const bf16 *q16, int ld16, const float *reach) {
    const int L = p->L, m = p->m, d = p->d;
    float *restrict blk = w->blk;
    for (int i0 = 0; i0 < L; i0 += p->block) {
        int nb, lo, hi;
        reach_block(p, i0, 0, &nb, &lo, &hi);
        const int W = hi - lo + 1;
        attn_product(p, GEMM_N, GEMM_T, nb, W, d, rows_of(q, qld, q16, ld16, i0), rows_of(reach, d, p->table16, d, lo),
                     0.0f, blk, W);
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
                           const float *key, int kld, const bf16 *key16, int ld16, const float *reach) {
    const int L = p->L, m = p->m, d = p->d;
    float *restrict blk = w->blk;
    for (int j0 = 0; j0 < L; j0 += p->block) {
        int nb, lo, hi;
        reach_block(p, j0, 1, &nb, &lo, &hi);
        const int W = hi - lo + 1, j1 = j0 + nb;
        attn_product(p, GEMM_N, GEMM_T, nb, W, d, rows_of(key, kld, key16, ld16, j0),
                     rows_of(reach, d, p->table16, d, lo), 0.0f, blk, W);
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

/* Row i of dQA (dr [W], column c is r' = lo + c) from row i of G = dR (g [L]): the band cells
 * G_ij at r' = i-j+m, the clipped cells' sums at r' = 2m (left) and 0 (right). */
static inline __attribute__((always_inline)) void query_row_grads(float *restrict dr, const float *restrict g, int i,
                                                                  int L, int m, int lo, int W) {
    int le, rs;
    rel_split(i, m, L, &le, &rs);
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

/* Gradients of the term q_i.a_r from G = dR [L, L]: dQA[i][r'] = sum of G_ij over the j with
 * that r' (block by block), then dQ += dQA.A and dA += dQA^T.Q (dA: part, [R, d]). */
static void query_table_grads(const AttnPlan *p, const AttnWork *w, const float *restrict G,
                              float *part, float *dq, const float *q, int qld, const bf16 *q16, int ld16,
                              const float *reach) {
    const int L = p->L, m = p->m, d = p->d, ld = p->ld;
    float *restrict blk = w->blk;
    for (int i0 = 0; i0 < L; i0 += p->block) {
        int nb, lo, hi;
        reach_block(p, i0, 0, &nb, &lo, &hi);
        const int W = hi - lo + 1;
        for (int i = i0; i < i0 + nb; i++)
            query_row_grads(blk + (size_t)(i - i0) * W, G + (size_t)i * L, i, L, m, lo, W);
        const AttnOperand dqa = block_operand(p, w, blk, nb, W);
        attn_product(p, GEMM_N, GEMM_N, nb, d, W, dqa, rows_of(reach, d, p->table16, d, lo), 1.0f,
                     dq + (size_t)i0 * ld, ld);
        attn_product(p, GEMM_T, GEMM_N, W, d, nb, dqa, rows_of(q, qld, q16, ld16, i0), 1.0f, part + (size_t)lo * d, d);
    }
}

/* Gradients of the term k_j.a_r: dKA[j][r'] = sum of G_ij over the i with that r', then
 * dK += dKA.A and dA += dKA^T.K. */
static void key_table_grads(const AttnPlan *p, const AttnWork *w, const float *restrict G,
                            float *part, float *dkey, const float *key, int kld, const bf16 *key16, int ld16,
                            const float *reach) {
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
        const AttnOperand dka = block_operand(p, w, blk, nb, W);
        attn_product(p, GEMM_N, GEMM_N, nb, d, W, dka, rows_of(reach, d, p->table16, d, lo), 1.0f,
                     dkey + (size_t)j0 * ld, ld);
        attn_product(p, GEMM_T, GEMM_N, W, d, nb, dka, rows_of(key, kld, key16, ld16, j0), 1.0f,
                     part + (size_t)lo * d, d);
    }
}

/* ---- the rows ------------------------------------------------------------------------------ */

/* Sum over blocks of T query rows of rows x reachable table rows: the multiply-adds / d of the
 * blocked QA (and, by symmetry, KA) GEMMs (see reach_block). */
static size_t reach_work(int L, int m, int T) {
    size_t work = 0;
    for (int i0 = 0; i0 < L; i0 += T) {
        int nb = T < L - i0 ? T : L - i0;
        int lo = i0 - (L - 1) + m, hi = i0 + nb - 1 + m;
        lo = lo > 0 ? lo : 0, hi = hi < 2 * m ? hi : 2 * m;
        work += (size_t)nb * (size_t)(hi - lo + 1);
    }
    return work;
}

/* A block of T rows reaches at most min(R, L+T-1) table rows, the first and last blocks fewer.
 * One GEMM over all L rows (fewer, larger calls) unless the blocks cut the QA / KA work by at
 * least a tenth (k = 64 at L = 128: 13%). Table gradient partials [R, d] by r'. */
static void plan(AttnPlan *p, Arena *shared) {
    if (10 * reach_work(p->L, p->m, p->block) > 9 * (size_t)p->L * p->R)
        p->block = p->L;
    p->slot_floats = attn_round16((size_t)p->R * p->d);
    if (p->bf16)
        p->table16 = (bf16 *)arena_take(shared, ((size_t)p->R * p->d + 1) / 2);
}

static void work(const AttnPlan *p, AttnWork *w, Arena *arena) {
    const size_t blk = (size_t)p->block * (p->L > p->R ? p->L : p->R);
    w->blk = arena_take(arena, blk);
    if (p->bf16)
        w->blk16 = (bf16 *)arena_take(arena, (blk + 1) / 2);
}

/* Method 4 in one block also keeps KA [L, R] beside QA (method4_scores). */
static void method4_work(const AttnPlan *p, AttnWork *w, Arena *arena) {
    work(p, w, arena);
    if (p->block >= p->L)
        w->blk_key = arena_take(arena, (size_t)p->L * p->R);
}

/* bf16 runs: the reachable table rows k-m .. k+m in bf16, once a call (the QA / KA products' B). */
static void prepare(const AttnPlan *p, const float *table) {
    if (p->bf16)
        attn_to_bf16(p->table16, table + (size_t)(p->rel_k - p->m) * p->d, p->R, p->d, p->d);
}

/* The table rows a head at length L reaches: k-m .. k+m. */
static const float *reachable(const AttnPlan *p, const float *table) {
    return table + (size_t)(p->rel_k - p->m) * p->d;
}

/* The (b,h)'s q (part 0) or k (1): fp32 (*ld) and, in bf16, as the products read it (*ld16). */
static const float *head_rows(const AttnPlan *p, const AttnWork *w, const float *qkv, int b, int h, int part,
                              int *ld, const bf16 **x16, int *ld16) {
    *x16 = NULL, *ld16 = p->d;
    if (p->bf16)
        *x16 = attn_head16(p, w, b, h, part, ld16);
    return attn_head32(p, w, qkv, b, h, part, ld);
}

static void shaw_scores(const AttnPlan *p, const AttnWork *w, float *S, const float *raw,
                        const float *qkv, const float *table, int b, int h) {
    (void)raw;
    int ld, ld16;
    const bf16 *q16;
    const float *q = head_rows(p, w, qkv, b, h, 0, &ld, &q16, &ld16);
    query_table_term(p, w, S, q, ld, q16, ld16, reachable(p, table));
}

/* Both terms of method4 in one block of L rows (lo = 0, W = R = 2m+1), S written once:
 *   S_ij = QA[i][r'] + KA[j][r'],  ka_left, ka_right [L] KA's columns 2m and 0 (the clipped
 * cells j <= i-m and j >= i+m), contiguous. The same bits as S = QA term, then S += KA term. */
static void both_table_terms(float *restrict S, const float *restrict qa, const float *restrict ka,
                             const float *restrict ka_left, const float *restrict ka_right, int L, int m) {
    const int W = 2 * m + 1;
    for (int i = 0; i < L; i++) {
        int le, rs;
        rel_split(i, m, L, &le, &rs);
        float *restrict row = S + (size_t)i * L;
        const float *restrict qa_row = qa + (size_t)i * W;
        const float *restrict ka_diag = ka + i + m; /* ka_diag[j (W-1)] = KA[j][i+m-j] */
        const float left = qa_row[2 * m], right = qa_row[0];
        for (int j = 0; j < le; j++)
            row[j] = left + ka_left[j];
        for (int j = le; j < rs; j++)
            row[j] = qa_row[i + m - j] + ka_diag[(ptrdiff_t)j * (W - 1)];
        for (int j = rs; j < L; j++)
            row[j] = right + ka_right[j];
    }
}

/* Method 4 in one block (p->block >= L: the k <= 32 rows of the synthetic suite) computes QA and
 * KA whole and writes S once (both_table_terms); in blocks, the query term and then the key term. */
static void method4_scores(const AttnPlan *p, const AttnWork *w, float *S, const float *raw,
                           const float *qkv, const float *table, int b, int h) {
    (void)raw;
    int ld, ld16, kld, kld16;
    const bf16 *q16, *k16;
    const float *q = head_rows(p, w, qkv, b, h, 0, &ld, &q16, &ld16);
    const float *key = head_rows(p, w, qkv, b, h, 1, &kld, &k16, &kld16);
    const float *reach = reachable(p, table);
    if (p->block < p->L) {
        query_table_term(p, w, S, q, ld, q16, ld16, reach);
        key_table_term(p, w, S, key, kld, k16, kld16, reach);
        return;
    }
    const int L = p->L, R = p->R, d = p->d;
    const AttnOperand a = rows_of(reach, d, p->table16, d, 0);
    attn_product(p, GEMM_N, GEMM_T, L, R, d, rows_of(q, ld, q16, ld16, 0), a, 0.0f, w->blk, R);
    attn_product(p, GEMM_N, GEMM_T, L, R, d, rows_of(key, kld, k16, kld16, 0), a, 0.0f, w->blk_key, R);
    for (int j = 0; j < L; j++) {
        w->vec0[j] = w->blk_key[(size_t)j * R + R - 1];
        w->vec1[j] = w->blk_key[(size_t)j * R];
    }
    both_table_terms(S, w->blk, w->blk_key, w->vec0, w->vec1, L, p->m);
}

static void shaw_backward(const AttnPlan *p, const AttnWork *w, const float *dscore, float *part,
                          float *d_qkv, const float *qkv, const float *table, int b, int h) {
    const size_t off = (size_t)b * p->L * p->ld + (size_t)h * p->d;
    int ld, ld16;
    const bf16 *q16;
    const float *q = head_rows(p, w, qkv, b, h, 0, &ld, &q16, &ld16);
    query_table_grads(p, w, dscore, part, d_qkv + off, q, ld, q16, ld16, reachable(p, table));
}

/* Both terms' dQA and dKA [L, W] (one block: lo = 0, W = 2m+1) in one pass over G = dR [L, L],
 * each cell as query_table_grads and key_table_grads give it (dQA's rows by the same
 * query_row_grads, dKA's the same loops: the same bits):
 * dQA[i][r'] and dKA[j][r'] = G_ij in the band, the clipped cells summed into r' = 2m and 0 (row
 * sums for dQA, column sums into col_left, col_right [L] for dKA). */
static void both_table_grads(const float *restrict G, float *restrict dqa, float *restrict dka,
                             float *restrict col_left, float *restrict col_right, int L, int m) {
    const int W = 2 * m + 1;
    memset(dka, 0, (size_t)L * W * sizeof(float));
    memset(col_left, 0, (size_t)L * sizeof(float));
    memset(col_right, 0, (size_t)L * sizeof(float));
    for (int i = 0; i < L; i++) {
        const float *restrict g = G + (size_t)i * L;
        query_row_grads(dqa + (size_t)i * W, g, i, L, m, 0, W);
        int le, rs;
        rel_split(i, m, L, &le, &rs);
        float *restrict dka_diag = dka + i + m; /* dka_diag[j (W-1)] = dKA[j][i+m-j] */
        for (int j = le; j < rs; j++)
            dka_diag[(ptrdiff_t)j * (W - 1)] = g[j];
        for (int j = 0; j < le; j++)
            col_left[j] += g[j];
        for (int j = rs; j < L; j++)
            col_right[j] += g[j];
    }
    for (int c = 0; c < L; c++) {
        dka[(size_t)c * W + 2 * m] += col_left[c];
        dka[(size_t)c * W] += col_right[c];
    }
}

/* In one block (as method4_scores) both gradients' cells in one pass over G (both_table_grads),
 * then the products in query_table_grads' and key_table_grads' order: dQ, dA += dQA^T.Q, dK,
 * dA += dKA^T.K. In blocks, one term after the other. */
static void method4_backward(const AttnPlan *p, const AttnWork *w, const float *dscore, float *part,
                             float *d_qkv, const float *qkv, const float *table, int b, int h) {
    const size_t off = (size_t)b * p->L * p->ld + (size_t)h * p->d;
    int ld, ld16, kld, kld16;
    const bf16 *q16, *k16;
    const float *q = head_rows(p, w, qkv, b, h, 0, &ld, &q16, &ld16);
    const float *key = head_rows(p, w, qkv, b, h, 1, &kld, &k16, &kld16);
    const float *reach = reachable(p, table);
    float *dq = d_qkv + off, *dkey = d_qkv + off + p->H;
    if (p->block < p->L) {
        query_table_grads(p, w, dscore, part, dq, q, ld, q16, ld16, reach);
        key_table_grads(p, w, dscore, part, dkey, key, kld, k16, kld16, reach);
        return;
    }
    const int L = p->L, R = p->R, d = p->d;
    both_table_grads(dscore, w->blk, w->blk_key, w->vec0, w->vec1, L, p->m);
    const AttnOperand a = rows_of(reach, d, p->table16, d, 0);
    const AttnOperand dqa = block_operand(p, w, w->blk, L, R);
    attn_product(p, GEMM_N, GEMM_N, L, d, R, dqa, a, 1.0f, dq, p->ld);
    attn_product(p, GEMM_T, GEMM_N, R, d, L, dqa, rows_of(q, ld, q16, ld16, 0), 1.0f, part, d);
    const AttnOperand dka = block_operand(p, w, w->blk_key, L, R);
    attn_product(p, GEMM_N, GEMM_N, L, d, R, dka, a, 1.0f, dkey, p->ld);
    attn_product(p, GEMM_T, GEMM_N, R, d, L, dka, rows_of(key, kld, k16, kld16, 0), 1.0f, part, d);
}

/* HF BERT's relative_key (shaw) and relative_key_query (method4) hold a [2P-1, d] table
 * distance_embedding; the transfer's zero table adds nothing to the scores. */
const PosScheme pos_shaw = {
    .uses_k = 1,
    .settings = pos_truncated_settings,
    .table_scope = POS_TABLE_LAYER,
    .table_name = "attention/self/distance_embedding/weight",
    .table_shape = pos_vector_table_shape,
    .transfer_identity = 0.0f,
    .transfer_vanishes = "q_i·a_r = 0",
    .hf_type = "relative_key",
    .check = pos_truncated_check,
    .plan = plan,
    .work = work,
    .prepare = prepare,
    .qk = POS_QK_ADDED,
    .scores = shaw_scores,
    .backward = shaw_backward,
    .finish = pos_vector_table_finish,
};

const PosScheme pos_method4 = {
    .uses_k = 1,
    .settings = pos_truncated_settings,
    .table_scope = POS_TABLE_LAYER,
    .table_name = "attention/self/distance_embedding/weight",
    .table_shape = pos_vector_table_shape,
    .transfer_identity = 0.0f,
    .transfer_vanishes = "q_i·a_r + k_j·a_r = 0",
    .hf_type = "relative_key_query",
    .check = pos_truncated_check,
    .plan = plan,
    .work = method4_work,
    .prepare = prepare,
    .qk = POS_QK_ADDED,
    .scores = method4_scores,
    .backward = method4_backward,
    .finish = pos_vector_table_finish,
};
