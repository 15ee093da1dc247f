/* Methods 1 and 2 of Huang et al. 2020: a scalar weight per clipped distance multiplies q_i.k_j,
 *   method1  S_ij = scale * (q_i.k_j) * w_s,  s = min(|i-j|, k),        table w [k+1]
 *   method2  S_ij = scale * (q_i.k_j) * w_r,  r = clip(i-j, -k, k) + k,  table w [2k+1]
 * One file: they differ only in the index of the weight. Per call the table is spread over the
 * offsets u = j - i + L - 1 (w2 [2L-1]); the q.k GEMM writes raw (kept for backward), then
 * S = raw (.) w2[u]. Backward: dw2[u] += dR (.) raw by u, dR (.)= w2, and the slot partials [2L-1]
 * go back to the table entries in order. */
#include <stdlib.h>

#include "layers/attention_plan.h"

/* The table entry of method1 (w_s, s = |clip|) and method2 (w_r, r = clip + k) for i - j = delta. */
static int clip(int rel_k, int delta) { return delta < -rel_k ? -rel_k : (delta > rel_k ? rel_k : delta); }
static int method1_index(int rel_k, int delta) { return abs(clip(rel_k, delta)); }
static int method2_index(int rel_k, int delta) { return clip(rel_k, delta) + rel_k; }

static void method1_shape(const PosDims *dims, int *rows, int *cols) { *rows = dims->rel_k + 1, *cols = 1; }
static void method2_shape(const PosDims *dims, int *rows, int *cols) { *rows = 2 * dims->rel_k + 1, *cols = 1; }

static void plan(AttnPlan *p, Arena *shared) {
    p->w2 = arena_take(shared, 2 * (size_t)p->L - 1);
    p->slot_floats = attn_round16(2 * (size_t)p->L - 1);
}

/* w2[u] = the table entry for i - j = L - 1 - u */
static void spread(const AttnPlan *p, const float *table, int (*index)(int, int)) {
    for (int u = 0; u < 2 * p->L - 1; u++) /* u = j - i + L - 1 */
        p->w2[u] = table[index(p->rel_k, p->L - 1 - u)];
}
static void method1_prepare(const AttnPlan *p, const float *table) { spread(p, table, method1_index); }
static void method2_prepare(const AttnPlan *p, const float *table) { spread(p, table, method2_index); }

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

static void scores(const AttnPlan *p, const AttnWork *w, float *S, const float *raw, const float *qkv,
                   const float *table, int b, int h) {
    (void)w, (void)qkv, (void)table, (void)b, (void)h;
    scalar_weight_term(p, S, raw);
}

/* d_table[index(L-1-u)] += sum over the slots of dw2[u], in slot order */
static void gather(const AttnPlan *p, float *d_table, int (*index)(int, int)) {
    const float *slot = p->slot_grad;
    for (int u = 0; u < 2 * p->L - 1; u++) {
        float sum = 0.0f;
        for (int s = 0; s < p->slots; s++)
            sum += slot[(size_t)s * p->slot_floats + u];
        d_table[index(p->rel_k, p->L - 1 - u)] += sum;
    }
}
static void method1_finish(const AttnPlan *p, float *d_table) { gather(p, d_table, method1_index); }
static void method2_finish(const AttnPlan *p, float *d_table) { gather(p, d_table, method2_index); }

/* A fresh table is all 1 (S = scale * q_i.k_j), which is also the transfer's: the term (q.k) w
 * is then q.k. HF BERT has no form of either. */
const PosScheme pos_method1 = {
    .uses_k = 1,
    .table_scope = POS_TABLE_LAYER,
    .table_name = "attention/self/distance_embedding/weight",
    .table_shape = method1_shape,
    .init_ones = 1,
    .transfer_identity = 1.0f,
    .transfer_vanishes = "(q_i·k_j)·w_s = q_i·k_j",
    .check = pos_truncated_check,
    .plan = plan,
    .prepare = method1_prepare,
    .qk = POS_QK_RAW,
    .scores = scores,
    .backward_raw = scalar_weight_grads,
    .finish = method1_finish,
};

const PosScheme pos_method2 = {
    .uses_k = 1,
    .table_scope = POS_TABLE_LAYER,
    .table_name = "attention/self/distance_embedding/weight",
    .table_shape = method2_shape,
    .init_ones = 1,
    .transfer_identity = 1.0f,
    .transfer_vanishes = "(q_i·k_j)·w_r = q_i·k_j",
    .check = pos_truncated_check,
    .plan = plan,
    .prepare = method2_prepare,
    .qk = POS_QK_RAW,
    .scores = scores,
    .backward_raw = scalar_weight_grads,
    .finish = method2_finish,
};
