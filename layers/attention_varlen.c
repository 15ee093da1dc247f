/* Attention on an unpadded batch (attention.h, AttnShape.seq_offsets): sequence b is the padded op of
 * shape [1, L_b] on its rows and its score blocks. The sequences are shared out to the threads
 * (dynamic, whole sequences: one parallel region per call, not one per sequence), each thread
 * running its sequence's heads in turn in a scratch of its own. The table and qkv-bias gradients
 * of sequence b go to a partial of its own, summed over b in order after the loop: the same bits
 * for any thread count and any assignment of sequences to threads.
 *
 * Scratch: [threads] x the most one single-thread call of shape [1, l <= L] needs, then
 * [B] x (table gradient | qkv bias gradient [3H]) partials. */
#include <omp.h>
#include <string.h>

#include "core/common.h"
#include "core/gemm.h"
#include "layers/attention.h"
#include "layers/attention_plan.h"

/* The shape of sequence b's call: [1, L_b] on one thread, numbered as sequence b of length s->L
 * (or s->drop_L) for dropout; *rows: its first row, *scores: where its score blocks start. */
static AttnShape sequence_shape(const AttnShape *s, int b, size_t *rows, size_t *scores) {
    const int *off = s->seq_offsets;
    AttnShape one = *s;
    one.seq_offsets = NULL;
    one.B = 1;
    one.L = off[b + 1] - off[b];
    one.threads = 1;
    one.drop_seq = s->drop_seq + b;
    one.drop_L = s->drop_L ? s->drop_L : s->L;
    RP_CHECK(one.L >= 0 && one.L <= s->L, "attention: sequence %d of the unpadded batch has %d rows "
             "(expected 0 to %d)", b, one.L, s->L);
    *rows = (size_t)off[b];
    one.qkv16 = s->qkv16 ? s->qkv16 + *rows * 3 * (size_t)s->H : NULL;
    one.ctx16 = s->ctx16 ? s->ctx16 + *rows * (size_t)s->H : NULL;
    *scores = 0;
    for (int i = 0; i < b; i++)
        *scores += (size_t)s->num_heads * (size_t)(off[i + 1] - off[i]) * (size_t)(off[i + 1] - off[i]);
    return one;
}

/* One thread's scratch for a single-sequence call of length l, the most over l <= s->L; the
 * layout also depends on dropout and (residual) the first layer, so the most over both. */
static size_t per_thread_floats(const AttnShape *s) {
    size_t most = 0;
    const float dropouts[2] = {s->dropout, 0.0f};
    for (int d = 0; d < 2; d++)
        for (int first = 0; first < 2; first++)
            for (int l = 1; l <= s->L; l++) {
                AttnShape one = *s;
                one.seq_offsets = NULL, one.varlen = NULL, one.B = 1, one.L = l, one.threads = 1;
                one.dropout = dropouts[d], one.first_layer = first;
                const size_t need = attention_scratch_floats(&one);
                most = need > most ? need : most;
            }
    return attn_round16(most);
}

AttnVarlenPlan attn_varlen_plan(const AttnShape *s) {
    AttnVarlenPlan v = {0};
    v.per_thread = per_thread_floats(s);
    int rows, cols;
    pos_table_shape(s->rel, &(PosDims){s->rel_k, s->H / s->num_heads, s->num_heads, s->t5_num_buckets}, &rows, &cols);
    v.table_floats = pos_scheme(s->rel)->table_scope == POS_TABLE_NONE ? 0 : attn_round16((size_t)rows * cols);
    v.part_floats = v.table_floats + attn_round16(3 * (size_t)s->H);
    v.threads = s->threads > 0 ? s->threads : 1;
    v.B = s->B, v.L = s->L;
    v.planned = *s;
    v.planned.seq_offsets = NULL, v.planned.varlen = NULL, v.planned.qkv16 = NULL, v.planned.ctx16 = NULL;
    return v;
}

/* The call's plan: the one made at start-up, checked to cover the call, or made now. */
static AttnVarlenPlan plan_of(const AttnShape *s) {
    if (!s->varlen)
        return attn_varlen_plan(s);
    const AttnVarlenPlan *v = s->varlen;
    const AttnShape *p = &v->planned;
    const int threads = s->threads > 0 ? s->threads : 1;
    RP_CHECK(s->B <= v->B && s->L <= v->L && threads <= v->threads,
             "internal: attention: an unpadded batch of %d sequences of at most %d rows on %d threads, over the "
             "%d x %d on %d threads its scratch was planned for", s->B, s->L, threads, v->B, v->L, v->threads);
    RP_CHECK(s->H == p->H && s->num_heads == p->num_heads && s->rel == p->rel && s->rel_k == p->rel_k &&
                 s->t5_num_buckets == p->t5_num_buckets && s->residual == p->residual &&
                 (s->tables != NULL) == (p->tables != NULL) &&
                 gemm_precision(s->gemm) == gemm_precision(p->gemm),
             "internal: attention: an unpadded call of another scheme, width, precision or table source than "
             "its scratch was planned for");
    return *v;
}

size_t attn_varlen_scratch_floats(const AttnShape *s) {
    const AttnVarlenPlan v = plan_of(s);
    return v.per_thread * (size_t)v.threads + v.part_floats * (size_t)s->B;
}

static int team(const AttnVarlenPlan *v, int B) {
    int t = omp_get_max_threads();
    t = t < v->threads ? t : v->threads;
    return t < B ? t : B;
}

/* Sequence b of the forward on the calling thread (its lane and scratch: `thread`). */
static void forward_sequence(const AttnVarlenPlan *v, int b, int thread, float *ctx, float *probs, float *raw_scores,
                             float *carried, float *scratch, const float *qkv, const float *table,
                             const AttnShape *s, uint64_t dropout_key) {
    size_t rows, scores;
    AttnShape one = sequence_shape(s, b, &rows, &scores);
    one.lane = thread; /* bf16: this thread's own lane */
    if (one.L == 0) /* a padding row: nothing */
        return;
    attention_forward(ctx ? ctx + rows * s->H : NULL, probs + scores, raw_scores ? raw_scores + scores : NULL,
                      carried ? carried + scores : NULL, scratch + v->per_thread * (size_t)thread,
                      qkv ? qkv + rows * 3 * s->H : NULL, table, NULL, &one, dropout_key);
}

void attn_varlen_forward(float *ctx, float *probs, float *raw_scores, float *carried, float *scratch,
                         const float *qkv, const float *table, const AttnShape *s, uint64_t dropout_key) {
    const AttnVarlenPlan v = plan_of(s);
    const int threads = team(&v, s->B);
    if (!omp_region_worthwhile(threads)) { /* alone: a plain loop */
        for (int b = 0; b < s->B; b++)
            forward_sequence(&v, b, 0, ctx, probs, raw_scores, carried, scratch, qkv, table, s, dropout_key);
        return;
    }
#pragma omp parallel num_threads(threads)
    {
#pragma omp for schedule(dynamic, 1)
        for (int b = 0; b < s->B; b++)
            forward_sequence(&v, b, omp_get_thread_num(), ctx, probs, raw_scores, carried, scratch, qkv, table, s,
                             dropout_key);
    }
}

/* Element e of (d_table [table_used] | d_qkv_bias) += its partials summed over the B sequences in order. */
static inline void sum_partial(const AttnVarlenPlan *v, const float *parts, size_t e, size_t table_used, int B,
                               float *d_table, float *d_qkv_bias) {
    const size_t at = e < table_used ? e : v->table_floats + (e - table_used);
    float total = 0.0f;
    for (int b = 0; b < B; b++)
        total += parts[v->part_floats * (size_t)b + at];
    if (e < table_used)
        d_table[e] += total;
    else
        d_qkv_bias[e - table_used] += total;
}

/* Sequence b of the backward on the calling thread, into its own partial (parts [B, part_floats]). */
static void backward_sequence(const AttnVarlenPlan *v, int b, int thread, float *d_qkv, float *d_qkv_bias,
                              float *d_carried, float *scratch, float *parts, int table_scope, const float *d_ctx,
                              const float *qkv, const float *table, const float *probs, const float *raw_scores,
                              const AttnShape *s, uint64_t dropout_key) {
    float *part = parts + v->part_floats * (size_t)b;
    memset(part, 0, v->part_floats * sizeof(float));
    size_t rows, scores;
    AttnShape one = sequence_shape(s, b, &rows, &scores);
    one.lane = thread; /* bf16: this thread's own lane */
    if (one.L == 0)
        return;
    attention_backward(d_qkv + rows * 3 * s->H, d_qkv_bias ? part + v->table_floats : NULL, table_scope ? part : NULL,
                       d_carried ? d_carried + scores : NULL, scratch + v->per_thread * (size_t)thread,
                       d_ctx + rows * s->H, qkv ? qkv + rows * 3 * s->H : NULL, table, probs + scores,
                       raw_scores ? raw_scores + scores : NULL, &one, dropout_key);
}

void attn_varlen_backward(float *d_qkv, float *d_qkv_bias, float *d_table, float *d_carried, float *scratch,
                          const float *d_ctx, const float *qkv, const float *table, const float *probs,
                          const float *raw_scores, const AttnShape *s, uint64_t dropout_key) {
    const AttnVarlenPlan v = plan_of(s);
    float *parts = scratch + v.per_thread * (size_t)v.threads; /* [B, part_floats] */
    const int table_scope = pos_scheme(s->rel)->table_scope != POS_TABLE_NONE;
    const int threads = team(&v, s->B);
    const int alone = !omp_region_worthwhile(threads);
    if (alone) { /* a plain loop */
        for (int b = 0; b < s->B; b++)
            backward_sequence(&v, b, 0, d_qkv, d_qkv_bias, d_carried, scratch, parts, table_scope, d_ctx, qkv, table,
                              probs, raw_scores, s, dropout_key);
    } else {
#pragma omp parallel num_threads(threads)
        {
#pragma omp for schedule(dynamic, 1)
            for (int b = 0; b < s->B; b++)
                backward_sequence(&v, b, omp_get_thread_num(), d_qkv, d_qkv_bias, d_carried, scratch, parts,
                                  table_scope, d_ctx, qkv, table, probs, raw_scores, s, dropout_key);
        }
    }
    /* the partials summed over the sequences in order (columns split over the threads) */
    const size_t table_n = table_scope && d_table ? v.part_floats - attn_round16(3 * (size_t)s->H) : 0;
    int rows, cols;
    pos_table_shape(s->rel, &(PosDims){s->rel_k, s->H / s->num_heads, s->num_heads, s->t5_num_buckets}, &rows, &cols);
    const size_t table_used = table_n ? (size_t)rows * cols : 0, bias_n = d_qkv_bias ? 3 * (size_t)s->H : 0;
    if (alone) {
        for (size_t e = 0; e < table_used + bias_n; e++)
            sum_partial(&v, parts, e, table_used, s->B, d_table, d_qkv_bias);
        return;
    }
#pragma omp parallel for schedule(static) num_threads(threads)
    for (size_t e = 0; e < table_used + bias_n; e++)
        sum_partial(&v, parts, e, table_used, s->B, d_table, d_qkv_bias);
}
